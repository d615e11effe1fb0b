"""``copilot-logs audit``: which autopilot runs never finished their task, and which looped."""

from __future__ import annotations

from collections.abc import Callable
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
FAIL_ON_NAMES = (*VERDICT_NAMES, LOOPING)
# The loop thresholds: (option, signal, default, help); a test checks them against the core.
LOOP_OPTIONS = (
    ("--stalled-nudges", "stalled-nudges", 3, "N nudges in a row with no new successful tool call"),
    ("--repeated-calls", "repeated-call", 3, "the same tool call N times in a row"),
    ("--rejected-completions", "rejected-completions", 2, "task_complete rejected N times"),
    ("--calls-after-completion", "after-completion", 1, "N LLM calls after a task_complete"),
)


def _fail_on(ctx: click.Context, param: click.Parameter, value: str) -> frozenset[str]:
    names = {part.strip().lower() for part in value.split(",") if part.strip()}
    names.discard("none")
    unknown = sorted(names - set(FAIL_ON_NAMES))
    if unknown:
        raise click.BadParameter(
            f"unknown verdict {', '.join(unknown)}; choose from {', '.join(FAIL_ON_NAMES)} "
            "(or none)",
            ctx,
            param,
        )
    return frozenset(names)


def _name(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def loop_options(command: Callable[..., None]) -> Callable[..., None]:
    """The loop thresholds (LOOP_OPTIONS), each an option of its own."""
    for option, _signal, default, what in reversed(LOOP_OPTIONS):
        command = click.option(
            option,
            _name(option),
            type=click.IntRange(min=1),
            default=default,
            show_default=True,
            metavar="N",
            help=f"Looping: {what}.",
        )(command)
    return command


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
    + "; and `looping`, for a session that loops whatever its verdict.",
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
@loop_options
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
    stalled_nudges: int,
    repeated_calls: int,
    rejected_completions: int,
    calls_after_completion: int,
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
    2 bad usage; 3 a selected file could not be read at all.

    \b
    Examples:
      copilot-logs audit
      copilot-logs audit --latest 1 --format github
      copilot-logs audit --since 2026-08-01 --fail-on nudge-cap,errored --format markdown
      copilot-logs audit ./events.jsonl --require-task-complete --format json
      copilot-logs audit --fail-on looping --stalled-nudges 2
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
        loop_thresholds=dict(
            zip(
                (signal for _, signal, *_ in LOOP_OPTIONS),
                (stalled_nudges, repeated_calls, rejected_completions, calls_after_completion),
                strict=True,
            )
        ),
    )
    shown = table if show_all else core.judged(table)
    RENDERERS[fmt](shown, AuditContext(fail_on, table.height))
    if loaded is None or table.is_empty() or not core.failing(shown, fail_on).is_empty():
        ctx.exit(int(ExitCode.FAILED))
    ctx.exit(exit_code(loaded))
