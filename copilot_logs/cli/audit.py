"""``copilot-logs audit``: which autopilot runs never finished their task, and which looped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from copilot_logs.cli import options
from copilot_logs.errors import ExitCode

# Spelled out here so `--help` needs no polars; a test checks them against the core module.
VERDICT_NAMES = (
    "completed",
    "completion-rejected",
    "blocked",
    "missing-task-complete",
    "nudge-cap",
    "errored",
    "interrupted",
    "user-quit",
    "running",
)
DEFAULT_FAIL_ON = "missing-task-complete,nudge-cap,errored,interrupted,user-quit"
LOOPING = "looping"
# The loop thresholds: (option, signal, default, help); a test checks them against the core.
LOOP_OPTIONS = (
    ("--stalled-nudges", "stalled-nudges", 3, "N nudges in a row with no new successful tool call"),
    ("--repeated-calls", "repeated-call", 3, "the same tool call N times in a row"),
    ("--rejected-completions", "rejected-completions", 2, "task_complete rejected N times"),
    ("--calls-after-completion", "after-completion", 1, "N LLM calls after a task_complete"),
)


@options.reading_command("table", "json", "ndjson", "csv", "markdown", "github")
@options.fail_on_option(
    VERDICT_NAMES, DEFAULT_FAIL_ON, also=(LOOPING, "for a session that loops whatever its verdict")
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
@options.nudge_cap_option()
@options.running_within_option(
    "An open session whose last event is this recent is `running`, not `interrupted`"
)
@options.stacked(
    *(
        click.option(
            option, type=click.IntRange(1), default=default, metavar="N", help=f"Looping: {what}."
        )
        for option, _, default, what in LOOP_OPTIONS
    )
)
def audit(
    ctx: click.Context,
    picked: options.Picked,
    fail_on: frozenset[str],
    require_task_complete: bool,
    show_all: bool,
    nudge_cap: int,
    running_within: timedelta,
    fmt: str,
    **loops: int,
) -> None:
    """Find the autopilot runs that never finished their task.

    Gives each autopilot session a verdict: completed, completion-rejected, blocked,
    missing-task-complete, nudge-cap, errored, interrupted, user-quit or running, with its
    nudges and the LLM calls and tool calls spent after the first nudge. Beside the verdict,
    `looping` marks a run that spent calls without progress (nudges in a row with no new
    successful tool call, the same tool call again and again, task_complete rejected again,
    calls after an accepted completion) and counts the wasted calls. Interactive sessions
    are left out unless --all (or judged too with --require-task-complete).

    Exit codes: 0 no session got a --fail-on verdict; 1 one did, or no session was found;
    2 bad usage; 3 a selected file could not be read at all. Gating CI on it: docs/ci.md of
    the copilot-logs source.

    \b
    Examples:
      copilot-logs audit
      copilot-logs audit --latest 1 --format github
      copilot-logs audit --since 2026-08-01 --fail-on nudge-cap,errored --format markdown
      copilot-logs audit ./events.jsonl --require-task-complete --format json
      copilot-logs audit --fail-on looping --stalled-nudges 2
    """
    loaded = options.load(picked)
    from copilot_logs.commands import audit as core
    from copilot_logs.render.audit import RENDERERS, AuditContext

    table = core.judge(
        options.read_each(loaded, core.facts),
        now=datetime.now(UTC),
        running_within=running_within,
        nudge_cap=nudge_cap,
        require_task_complete=require_task_complete,
        loop_thresholds={
            signal: loops[option[2:].replace("-", "_")] for option, signal, *_ in LOOP_OPTIONS
        },
    )
    shown = table if show_all else core.judged(table)
    RENDERERS[fmt](shown, AuditContext(fail_on, table.height))
    if loaded is None or table.is_empty() or not core.failing(shown, fail_on).is_empty():
        ctx.exit(int(ExitCode.FAILED))
    ctx.exit(options.exit_code(loaded))
