"""``copilot-logs audit``'s verdicts for people and CI: a table, a markdown comment, GitHub
annotations, or the machine formats (json, ndjson, csv)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from copilot_logs.render import formats, output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import display_path, local_time, plural, short_id

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class AuditContext:
    """What the renderers need besides the rows: the failing verdicts and how many sessions
    were read (interactive ones included)."""

    fail_on: frozenset[str]
    sessions_read: int


Renderer = Callable[["pl.DataFrame", AuditContext], None]


VERDICT_STYLES = {
    "completed": "green",
    "nudge-cap": "bold red",
    "missing-task-complete": "bold red",
    "errored": "bold red",
    "interrupted": "bold red",
    "completion-rejected": "yellow",
    "user-quit": "yellow",
    "running": "cyan",
}
"""A verdict's colour on a colour terminal: the ones the gate fails by default in red."""


def verdict_style(verdict: object) -> str | None:
    return VERDICT_STYLES.get(str(verdict))


def _gate(fail_on: frozenset[str]) -> str:
    return f"--fail-on {','.join(sorted(fail_on)) if fail_on else 'none'}"


def summary_line(table: pl.DataFrame, context: AuditContext) -> str:
    """One line: how many sessions were judged, by verdict, and whether the gate fails. A run
    the default gate fails never reads OK, whatever --fail-on says (a CI summary written with
    ``--fail-on none`` before the gating step): ``NOT OK``, naming the gate that let it pass."""
    from copilot_logs.commands import audit as core

    if context.sessions_read == 0:
        return "FAIL: no session found to audit."
    judged = core.judged(table)
    not_judged = context.sessions_read - judged.height
    if judged.is_empty():
        return (
            f"OK: no autopilot session among the {plural(context.sessions_read, 'session')} read "
            "(--require-task-complete judges interactive ones too)."
        )
    counts = core.verdict_counts(judged)
    by_verdict = ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
    failed = core.failing(judged, context.fail_on).height
    by_default = core.failing(judged, core.DEFAULT_FAIL_ON).height
    status = (
        f"FAIL: {failed} failing"
        if failed
        else f"NOT OK: {by_default} failing by the default gate, passed by {_gate(context.fail_on)}"
        if by_default
        else "OK"
    )
    looping = judged.filter("looping")
    wasted = plural(int(looping["wasted_calls"].sum()), "LLM call")
    loops = f"; {looping.height} looping, {wasted} wasted" if looping.height else ""
    rest = f"; {not_judged} interactive not judged" if not_judged else ""
    return f"{status} ({plural(judged.height, 'session')} audited: {by_verdict}{loops}{rest})."


_SENTENCES = {
    "completed": "Session {sid} completed{after_nudges}{cost}: {task_complete_summary}",
    "completion-rejected": "Session {sid} called task_complete without finishing "
    "({rejection}){cost}: {task_complete_summary}",
    "blocked": "Session {sid} called task_complete but is blocked ({blocker}): it needs a "
    "person{cost}: {task_complete_summary}",
    "nudge-cap": "Session {sid} hit the nudge cap: {task_nudges} nudges and no "
    "task_complete{cost}.",
    "missing-task-complete": "Session {sid} ended without task_complete{after_nudges}{cost}.",
    "errored": "Session {sid} ended on a session.error{error_type}: {session_error}",
    "interrupted": "Session {sid} was interrupted: it ended inside a turn, was aborted, or "
    "never shut down{cost}.",
    "user-quit": "Session {sid} was shut down by the user while its last turn was still open "
    "(e.g. at a permission prompt){cost}.",
    "running": "Session {sid} is still running (last event at {last_event_at:%Y-%m-%d %H:%M} UTC).",
}


def describe(row: dict[str, Any]) -> str:
    """A sentence on one audited session, for annotations."""
    nudges = row["autopilot_nudges"]
    fields = {
        **row,
        "sid": short_id(row["session_id"]),
        "after_nudges": f" after {plural(nudges, 'nudge')}" if nudges else "",
        "cost": f" ({row['turns_after_first_nudge']} LLM calls and "
        f"{row['tool_calls_after_first_nudge']} tool calls after the first nudge)"
        if nudges
        else "",
        "error_type": f" ({row['session_error_type']})" if row["session_error_type"] else "",
        "blocker": row["task_complete_blocker"] or "no blocker given",
        "rejection": f"outcome {row['task_complete_outcome']}"
        if row["task_complete_outcome"]
        else "success: false",
    }
    text = _SENTENCES.get(row["verdict"], "Session {sid} is {verdict}.").format(**fields)
    if row["last_failed_tool"] and row["verdict"] != "completed":
        text += f" Last failed tool: {row['last_failed_tool']}: {row['last_failed_tool_error']}"
    if row["looping"]:
        text += " " + loop_sentence(row)
    return text


def loop_sentence(row: dict[str, Any]) -> str:
    """What the loop of a looping session was and what it wasted."""
    signals = ", ".join(row["loop_signals"])
    repeated = f"; repeated: {row['repeated_call']}" if row["repeated_call"] else ""
    credits = row["wasted_credits"]
    spent = f", {credits:g} AI credits" if credits is not None else ""
    return (
        f"Looping ({signals}{repeated}): {plural(row['wasted_calls'], 'LLM call')}{spent} "
        f"wasted from line {row['loop_line']}."
    )


def write_github(table: pl.DataFrame, context: AuditContext) -> None:
    """One workflow command per judged session: error for a --fail-on verdict, notice for
    completed, warning for the rest; then the summary line."""
    if context.sessions_read == 0:
        output.echo(
            formats.github_annotation("error", "No Copilot CLI session found to audit."),
            workflow_commands=True,
        )
    for row in table.to_dicts():
        verdict = row["verdict"]
        if verdict == "interactive":
            continue
        fails = verdict in context.fail_on or (row["looping"] and "looping" in context.fail_on)
        clean = verdict == "completed" and not row["looping"]
        level = "error" if fails else ("notice" if clean else "warning")
        title = f"{verdict}, looping" if row["looping"] else verdict
        output.echo(
            formats.github_annotation(
                level,
                describe(row),
                file=display_path(row["file"]),
                line=row["line"],
                title=f"copilot-logs audit: {title}",
            ),
            workflow_commands=True,
        )
    output.echo(summary_line(table, context))


def _note() -> pl.Expr:
    """The one text cell a table row has room for: what the agent said, or what went wrong."""
    import polars as pl

    failed_tool = pl.concat_str(
        pl.lit("last failed tool: "), "last_failed_tool", pl.lit(": "), "last_failed_tool_error"
    )
    note = pl.coalesce(
        pl.when(pl.col("verdict").is_in(["completed", "completion-rejected", "blocked"])).then(
            "task_complete_summary"
        ),
        pl.when(pl.col("verdict") == "errored").then("session_error"),
        failed_tool,
        pl.lit(""),
    )
    return note.str.replace_all(r"\s+", " ").str.strip_chars()


def write_table(table: pl.DataFrame, context: AuditContext) -> None:
    formats.print_table(table.with_columns(note=_note()), _columns(AUDIT_TABLE, table))
    _echo_summary(summary_line(table, context), err=False)


def _echo_summary(line: str, *, err: bool) -> None:
    """The summary line in red when the gate fails (or the default gate would), else green."""
    style = "bold red" if line.startswith(("FAIL", "NOT OK")) else "green"
    output.echo_styled([[(line, style)]], err=err)


def _columns(columns: list[Column], table: pl.DataFrame) -> list[Column]:
    """The table's columns; the looping one only when a session loops."""
    if not table.is_empty() and table["looping"].any():
        return columns
    return [column for column in columns if column.field != "wasted_calls"]


def write_verdicts(table: pl.DataFrame, context: AuditContext, *, on_stderr: bool) -> None:
    """``watch --until-done``'s ending: audit's table, or (beside an ndjson stream) a line per
    verdict and the summary on stderr."""
    if not on_stderr:
        write_table(table, context)
        return
    rows = table.to_dicts()
    verdicts = [(row["verdict"], verdict_style(row["verdict"])) for row in rows]
    said = [(f": {one_line(describe(row))}", None) for row in rows]
    lines = [[("verdict: ", None), *parts] for parts in zip(verdicts, said, strict=True)]
    output.echo_styled(lines, err=True)
    _echo_summary(summary_line(table, context), err=True)


def write_markdown(table: pl.DataFrame, context: AuditContext) -> None:
    """A one-line summary and a table, ready to paste as a pull-request comment."""
    from copilot_logs.commands import audit as core

    gates = context.fail_on | frozenset(core.DEFAULT_FAIL_ON)
    failed = not core.failing(table, gates).is_empty() or context.sessions_read == 0
    looping = not table.is_empty() and bool(table["looping"].any())
    mark = ":x:" if failed else ":warning:" if looping else ":white_check_mark:"
    output.echo(f"{mark} **copilot-logs audit**: {summary_line(table, context)}")
    if not table.is_empty():
        limited = table.with_columns(note=_note().str.slice(0, 120))
        columns = _columns(MARKDOWN_TABLE, table)
        output.echo("\n" + formats.markdown_table(limited, columns), nl=False)


def _machine(fmt: str, table: pl.DataFrame, context: AuditContext) -> None:
    formats.write_frame(table, fmt)


RENDERERS: dict[str, Renderer] = {
    "table": write_table,
    "markdown": write_markdown,
    "github": write_github,
    **{fmt: partial(_machine, fmt) for fmt in ("json", "ndjson", "csv")},
}


def _wasted(calls: Any) -> str:
    """The looping cell: the calls a loop wasted (empty when the session does not loop)."""
    return f"{calls} wasted" if calls else ""


AUDIT_TABLE = [
    Column("session_id", "session", 1, format=short_id),
    Column("verdict", "verdict", 1, style=verdict_style),
    Column("wasted_calls", "looping", 1, format=_wasted),
    Column("autopilot_nudges", "nudges", 1, numeric=True),
    Column("turns_after_first_nudge", "calls after nudge", 2, numeric=True),
    Column("tool_calls_after_first_nudge", "tools after nudge", 2, numeric=True),
    Column("started_at", "started", 3, format=local_time),
    Column("note", "summary / error", 3, max_width=50),
    Column("llm_calls", "calls", 4, numeric=True),
    Column("mode", "mode", 5),
    Column("repository", "repository", 6, max_width=24),
]
MARKDOWN_TABLE = [
    Column("session_id", "Session", format=short_id),
    Column("verdict", "Verdict"),
    Column("wasted_calls", "Looping", format=_wasted),
    Column("autopilot_nudges", "Nudges", numeric=True),
    Column("turns_after_first_nudge", "LLM calls after 1st nudge", numeric=True),
    Column("tool_calls_after_first_nudge", "Tool calls after 1st nudge", numeric=True),
    Column("note", "Summary / error"),
]
