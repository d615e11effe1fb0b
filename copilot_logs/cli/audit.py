from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from copilot_logs.cli.options import (
    Picked,
    engine_options,
    exit_code,
    format_option,
    load,
    selection_options,
)
from copilot_logs.errors import ExitCode
from copilot_logs.render import output
from copilot_logs.render.formats import Column, local_time, short_id

if TYPE_CHECKING:
    import polars as pl

# Spelled out here so `--help` needs no polars; a test checks them against the core module.
VERDICT_NAMES = (
    "completed",
    "completion-rejected",
    "missing-task-complete",
    "nudge-cap",
    "errored",
    "interrupted",
    "user-quit",
    "running",
)
DEFAULT_FAIL_ON = "missing-task-complete,nudge-cap,errored,interrupted,user-quit"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    """``90s``, ``10m``, ``1h30m``, ``2d`` or ``0`` -> a timedelta."""
    text = value.strip().lower().replace(" ", "")
    if text == "0":
        return timedelta(0)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise click.BadParameter(
            f"{value!r} is not a duration like 90s, 10m, 1h30m or 2d", ctx, param
        )
    return timedelta(seconds=sum(float(n) * _UNIT_SECONDS[unit] for n, unit in parts))


def _fail_on(ctx: click.Context, param: click.Parameter, value: str) -> frozenset[str]:
    names = {part.strip().lower() for part in value.split(",") if part.strip()}
    names.discard("none")
    unknown = sorted(names - set(VERDICT_NAMES))
    if unknown:
        raise click.BadParameter(
            f"unknown verdict {', '.join(unknown)}; choose from {', '.join(VERDICT_NAMES)} "
            "(or none)",
            ctx,
            param,
        )
    return frozenset(names)


@click.command()
@selection_options
@engine_options
@click.option(
    "--fail-on",
    metavar="VERDICT,...",
    default=DEFAULT_FAIL_ON,
    show_default=True,
    callback=_fail_on,
    help="Exit 1 when a session gets one of these verdicts (`none`: never). Verdicts: "
    + ", ".join(VERDICT_NAMES)
    + ".",
)
@click.option(
    "--require-task-complete",
    is_flag=True,
    help="Judge every selected session as one that must call task_complete, interactive "
    "ones included (for CI running `copilot -p` in any mode).",
)
@click.option(
    "--all", "show_all", is_flag=True, help="Also list interactive sessions (not judged)."
)
@click.option(
    "--nudge-cap",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Nudges per task after which the CLI stops (its default is 5).",
)
@click.option(
    "--running-within",
    default="10m",
    callback=_duration,
    show_default=True,
    metavar="DURATION",
    help="An open session whose last event is this recent is `running`, not `interrupted` "
    "(90s, 10m, 1h; 0: never).",
)
@format_option("table", "json", "ndjson", "csv", "markdown", "github")
@click.pass_context
def audit(
    ctx: click.Context,
    picked: Picked,
    fail_on: frozenset[str],
    require_task_complete: bool,
    show_all: bool,
    nudge_cap: int,
    running_within: timedelta,
    fmt: str,
) -> None:
    """Find the autopilot runs that never finished their task.

    Gives each autopilot session a verdict: completed, completion-rejected,
    missing-task-complete, nudge-cap, errored, interrupted, user-quit or running, with its
    nudges and the LLM calls and tool calls spent after the first nudge. Interactive sessions
    are left out unless --all (or judged too with --require-task-complete).

    Exit codes: 0 no session got a --fail-on verdict; 1 one did, or no session was found;
    2 bad usage; 3 a selected file could not be read at all.

    \b
    Examples:
      copilot-logs audit
      copilot-logs audit --latest 1 --format github
      copilot-logs audit --since 2026-08-01 --fail-on nudge-cap,errored --format markdown
      copilot-logs audit ./events.jsonl --require-task-complete --format json
    """
    loaded = load(picked)
    from copilot_logs.commands import audit as core
    from copilot_logs.ingest.reader import ReadResult

    table = core.judge(
        loaded.map(core.facts) if loaded else [core.facts(ReadResult.empty())],
        now=datetime.now(UTC),
        running_within=running_within,
        nudge_cap=nudge_cap,
        require_task_complete=require_task_complete,
    )
    shown = table if show_all else core.judged(table)
    RENDERERS[fmt](shown, AuditContext(fail_on, table.height))
    if loaded is None or table.is_empty() or not core.failing(shown, fail_on).is_empty():
        ctx.exit(int(ExitCode.FAILED))
    ctx.exit(exit_code(loaded))


# --- rendering, specific to audit ------------------------------------------------------------


@dataclass(frozen=True)
class AuditContext:
    """What the renderers need besides the rows: the failing verdicts and how many sessions
    were read (interactive ones included)."""

    fail_on: frozenset[str]
    sessions_read: int


Renderer = Callable[["pl.DataFrame", AuditContext], None]


def summary_line(table: pl.DataFrame, context: AuditContext) -> str:
    """One line: how many sessions were judged, by verdict, and whether the gate fails."""
    from copilot_logs.commands import audit as core

    if context.sessions_read == 0:
        return "FAIL: no session found to audit."
    judged = core.judged(table)
    not_judged = context.sessions_read - judged.height
    if judged.is_empty():
        return (
            f"OK: no autopilot session among the {_sessions(context.sessions_read)} read "
            "(--require-task-complete judges interactive ones too)."
        )
    counts = core.verdict_counts(judged)
    by_verdict = ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
    failed = sum(count for verdict, count in counts.items() if verdict in context.fail_on)
    status = f"FAIL: {failed} failing" if failed else "OK"
    rest = f"; {not_judged} interactive not judged" if not_judged else ""
    return f"{status} ({_sessions(judged.height)} audited: {by_verdict}{rest})."


def _sessions(count: int) -> str:
    return f"{count} session" + ("" if count == 1 else "s")


_SENTENCES = {
    "completed": "Session {sid} completed{after_nudges}{cost}: {task_complete_summary}",
    "completion-rejected": "Session {sid} called task_complete without finishing "
    "({rejection}){cost}: {task_complete_summary}",
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
        "after_nudges": f" after {nudges} nudge{'' if nudges == 1 else 's'}" if nudges else "",
        "cost": f" ({row['turns_after_first_nudge']} LLM calls and "
        f"{row['tool_calls_after_first_nudge']} tool calls after the first nudge)"
        if nudges
        else "",
        "error_type": f" ({row['session_error_type']})" if row["session_error_type"] else "",
        "rejection": f"outcome {row['task_complete_outcome']}"
        if row["task_complete_outcome"]
        else "success: false",
    }
    text = _SENTENCES.get(row["verdict"], "Session {sid} is {verdict}.").format(**fields)
    if row["last_failed_tool"] and row["verdict"] != "completed":
        text += f" Last failed tool: {row['last_failed_tool']}: {row['last_failed_tool_error']}"
    return text


def _annotation_path(file: str) -> str:
    """The log's path relative to the working directory when it is inside it (GitHub shows
    such annotations on the file), else as read."""
    if file.startswith("<"):  # <stdin>
        return file
    try:
        return Path(file).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a link loop (3.11)
        return file


def write_github(table: pl.DataFrame, context: AuditContext) -> None:
    """One workflow command per judged session: error for a --fail-on verdict, notice for
    completed, warning for the rest; then the summary line."""
    from copilot_logs.render import formats

    if context.sessions_read == 0:
        output.echo(
            formats.github_annotation("error", "No Copilot CLI session found to audit."),
            workflow_commands=True,
        )
    for row in table.to_dicts():
        verdict = row["verdict"]
        if verdict == "interactive":
            continue
        level = (
            "error"
            if verdict in context.fail_on
            else ("notice" if verdict == "completed" else "warning")
        )
        output.echo(
            formats.github_annotation(
                level,
                describe(row),
                file=_annotation_path(row["file"]),
                line=row["line"],
                title=f"copilot-logs audit: {verdict}",
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
        pl.when(pl.col("verdict").is_in(["completed", "completion-rejected"])).then(
            "task_complete_summary"
        ),
        pl.when(pl.col("verdict") == "errored").then("session_error"),
        failed_tool,
        pl.lit(""),
    )
    return note.str.replace_all(r"\s+", " ").str.strip_chars()


def write_table(table: pl.DataFrame, context: AuditContext) -> None:
    from copilot_logs.render import formats

    formats.print_table(table.with_columns(note=_note()), AUDIT_TABLE)
    output.echo(summary_line(table, context))


def write_markdown(table: pl.DataFrame, context: AuditContext) -> None:
    """A one-line summary and a table, ready to paste as a pull-request comment."""
    from copilot_logs.commands import audit as core
    from copilot_logs.render import formats

    failed = not core.failing(table, context.fail_on).is_empty() or context.sessions_read == 0
    mark = ":x:" if failed else ":white_check_mark:"
    output.echo(f"{mark} **copilot-logs audit**: {summary_line(table, context)}")
    if not table.is_empty():
        limited = table.with_columns(note=_note().str.slice(0, 120))
        output.echo("\n" + formats.markdown_table(limited, MARKDOWN_TABLE), nl=False)


def _machine(fmt: str) -> Renderer:
    def write(table: pl.DataFrame, context: AuditContext) -> None:
        from copilot_logs.render import formats

        formats.write_frame(table, fmt)

    return write


RENDERERS: dict[str, Renderer] = {
    "table": write_table,
    "markdown": write_markdown,
    "github": write_github,
    "json": _machine("json"),
    "ndjson": _machine("ndjson"),
    "csv": _machine("csv"),
}

AUDIT_TABLE = [
    Column("session_id", "session", 1, format=short_id),
    Column("verdict", "verdict", 1),
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
    Column("autopilot_nudges", "Nudges", numeric=True),
    Column("turns_after_first_nudge", "LLM calls after 1st nudge", numeric=True),
    Column("tool_calls_after_first_nudge", "Tool calls after 1st nudge", numeric=True),
    Column("note", "Summary / error"),
]
