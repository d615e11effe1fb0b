from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from copilot_logs.cli import Command
from copilot_logs.cli.options import (
    Picked,
    engine_options,
    exit_code,
    format_option,
    load,
    parse_duration,
    selection_options,
)
from copilot_logs.errors import ExitCode

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


@click.command(cls=Command)
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
    callback=parse_duration,
    show_default=True,
    metavar="DURATION",
    help="An open session whose last event is this recent is `running`, not `interrupted` "
    "(90s, 10m, 1h; a bare number is seconds; 0: never).",
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
    from copilot_logs.render.audit import RENDERERS, AuditContext

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
