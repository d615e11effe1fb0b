"""``copilot-logs doctor``'s verdicts and repairs, for people (a table, then each reason under
its file and line) and for scripts (json, ndjson: one object per session with its reasons); and
docs/doctor.md's damage x version table, from the recorded resumes: ``python -m
copilot_logs.render.doctor docs/doctor.md`` rewrites the part of the page between its markers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from copilot_logs.commands import doctor as evidence
from copilot_logs.render import formats, output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import display_path, local_time, plural, short_id

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.commands.doctor import Doctor
    from copilot_logs.commands.doctor.repair import Repair


def session_records(doctor: Doctor) -> list[dict[str, Any]]:
    """One record per session, its reasons nested, in the json field names docs/doctor.md
    lists."""
    reasons: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in formats.records(doctor.reasons):
        key = (row.pop("file"), row.pop("session_id"))
        reasons.setdefault(key, []).append(row)
    out = []
    for row in formats.records(doctor.sessions):
        out.append({**row, "reasons": reasons.get((row["file"], row["session_id"]), [])})
    return out


def summary_line(sessions: pl.DataFrame, fail_on: frozenset[str]) -> str:
    if sessions.is_empty():
        return "No session to examine."
    counts = sessions["verdict"].value_counts(sort=True).iter_rows()
    by_verdict = ", ".join(f"{count} {verdict}" for verdict, count in counts)
    failed = sessions.filter(sessions["verdict"].is_in(list(fail_on))).height
    status = f"FAIL: {failed} failing" if failed else "OK"
    return f"{status} ({plural(sessions.height, 'session')} examined: {by_verdict})."


def write_table(doctor: Doctor, fail_on: frozenset[str]) -> None:
    """The sessions as a table; then, for each one that is not healthy, its reasons by line."""
    formats.print_table(doctor.sessions, DOCTOR_TABLE)
    for record in session_records(doctor):
        if record["verdict"] == "healthy":
            continue
        output.echo(
            f"\n{short_id(record['session_id'])} {record['verdict']}: "
            f"{display_path(record['file'])} (CLI {record['cli_version'] or 'unknown'})"
        )
        for reason in record["reasons"]:
            output.echo(
                f"  line {reason['line']}: {reason['severity']}: {reason['code']}: "
                + one_line(reason["message"])
            )
    output.echo("\n" + summary_line(doctor.sessions, fail_on))


def _write_records(rows: list[dict[str, Any]], fmt: str) -> None:
    formats.write_json(rows) if fmt == "json" else formats.write_ndjson(rows)


def _machine(fmt: str, doctor: Doctor, fail_on: frozenset[str]) -> None:
    _write_records(session_records(doctor), fmt)


RENDERERS: dict[str, Callable[[Doctor, frozenset[str]], None]] = {
    "table": write_table,
    **{fmt: partial(_machine, fmt) for fmt in ("json", "ndjson")},
}

DOCTOR_TABLE = [
    Column("session_id", "session", 1, format=short_id),
    Column("verdict", "verdict", 1),
    Column("problems", "problems", 1, numeric=True),
    Column("cli_version", "cli", 2),
    Column("bytes", "bytes", 2, numeric=True),
    Column("last_event_at", "last event", 3, format=local_time),
    Column("file", "file", 4, format=display_path, max_width=60),
]


def write_repairs(repairs: list[Repair], fmt: str) -> None:
    """What ``--repair`` did: each change (line, what, why) under the copy it wrote."""
    if fmt in ("json", "ndjson"):
        _write_records([repair.record() for repair in repairs], fmt)
        return
    for repair in repairs:
        output.echo(
            f"{short_id(repair.session_id)}: wrote {display_path(str(repair.events))} "
            f"({plural(len(repair.changes), 'change')}; the original is untouched)"
        )
        for change in repair.changes:
            output.echo(f"  line {change.line}: {one_line(change.what)}: {one_line(change.why)}")
        if repair.set_aside_bytes:
            output.echo(
                f"  {plural(repair.set_aside_bytes, 'damaged byte')} set aside in "
                f"{display_path(str(repair.sidecar))}"
            )
        for skipped in repair.not_copied:
            output.echo(f"  not copied: {one_line(skipped['path'])}: {one_line(skipped['why'])}")
        if repair.resumable:
            output.echo(f"  doctor calls the copy {repair.verdict}")
        else:
            output.echo(f"  the copy is still {repair.verdict}: the CLI may not resume it")
            for blocker in repair.blockers:
                output.echo(f"    line {blocker['line']}: {one_line(blocker['message'])}")


START = "<!-- evidence: generated by python -m copilot_logs.render.doctor -->"
END = "<!-- evidence: end -->"
WORDS = {
    "resumed": "resumes",
    "resumed-dropping": "resumes, drops events",
    "history-lost": "resumes, loses history",
    "unanswered-tool-call": "**unanswered tool call**",
    "failed-after-call": "**fails**",
    "no-call": "**no model call**",
    "refused": "**refuses**",
}


def table(outcomes: dict[str, dict[str, str]]) -> str:
    """The outcome of every recorded resume: a damage a row, a CLI version a column."""
    versions = evidence.VERSIONS
    lines = [
        "| damage | what was done to the log | " + " | ".join(versions) + " |",
        "|---|---|" + "---|" * len(versions),
    ]
    for damage, row in outcomes.items():
        cells = [WORDS.get(row[v], row[v]) if v in row else "not recorded" for v in versions]
        about = evidence.DAMAGES.get(damage, "")
        lines.append(f"| `{damage}` | {about} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def notes() -> str:
    """What each version did beyond the outcome: its error, how it closed an open tool call,
    what it dropped."""
    lines = []
    for damage, row in evidence.NOTES.items():
        by_note: dict[str, list[str]] = {}
        for version in evidence.VERSIONS:
            note = row.get(version)
            if note:
                by_note.setdefault(note, []).append(version)
        said = [f"{', '.join(versions)}: {note}" for note, versions in by_note.items()]
        if said:
            lines.append(f"- `{damage}`: " + "; ".join(said).replace("|", "\\|") + ".")
    return "\n".join(lines) + "\n"


def block() -> str:
    return (
        f"{START}\n\n{table(evidence.OUTCOMES)}\nWhat each version did, beyond the outcome:\n\n"
        f"{notes()}\nEvery damaged log was then repaired with `doctor --repair`, and the copy "
        f"resumed the same way:\n\n{table(evidence.REPAIRED)}\n{END}"
    )


def rewrite(page: str) -> str:
    """``page`` with the generated block replaced by the current one."""
    head, found, rest = page.partition(START)
    if not found or END not in rest:
        raise ValueError("the page has no evidence markers")
    return head + block() + rest.split(END, 1)[1]


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "docs/doctor.md")
    path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
