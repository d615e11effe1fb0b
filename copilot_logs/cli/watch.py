"""``copilot-logs watch``: running sessions followed live, or one autopilot run waited for."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from copilot_logs.cli import options
from copilot_logs.errors import ExitCode
from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    from copilot_logs.commands.watch import Follower, Watcher

REFRESH_SECONDS = 1.0
"""How often the live view is drawn again when nothing changed (its clocks move)."""


@options.reading_command("table", "ndjson", engine=False, stdin=False)
@click.option(
    "--until-done",
    is_flag=True,
    help="Follow one session until its run ends (shutdown, task_complete, the nudge cap, an "
    "error), then print its audit verdict and exit with audit's code (0 completed, 1 flagged). "
    "With no session named: the first one written after the watch starts (runs already "
    "there are never judged unless written to again).",
)
@click.option(
    "--timeout",
    callback=options.parse_duration,
    metavar="DURATION",
    help="With --until-done: give up when no new event arrives for DURATION (90s, 10m, 1h; "
    "a bare number is seconds, as for coreutils timeout), or no session appears, and exit "
    f"{int(ExitCode.TIMEOUT)}.",
)
@options.nudge_cap_option("as for audit")
def watch(
    ctx: click.Context,
    picked: options.Picked,
    until_done: bool,
    timeout: timedelta | None,
    nudge_cap: int,
    fmt: str,
) -> None:
    """Follow running sessions live, or wait for an autopilot run to finish.

    With no selector, follows the sessions written in the last 10 minutes under the root and
    picks up those written to later (new or resumed); ended sessions leave the view after a
    minute. A session id or path that does not exist yet is waited for. On a terminal the view
    shows each session's interaction and turn, its LLM calls (main agent and sub-agents apart),
    the tools running now, sub-agents, nudges, errors and task_complete. --format ndjson writes
    one record per event instead (session_start, prompt, nudge, turn_start, turn_end,
    tool_start, tool_end, subagent_start, subagent_end, task_complete, error, shutdown),
    flushed at once.

    Exit codes: 0 ended with Ctrl-C, or --until-done on a run audit passes; 1 --until-done on a
    run audit flags; 2 bad usage; 124 --timeout expired. Gating CI on it: docs/ci.md of the
    copilot-logs source.

    \b
    Examples:
      copilot-logs watch
      copilot-logs watch --latest 1 --format ndjson
      copilot-logs watch --latest 1 --until-done --timeout 30m
      copilot-logs watch 3fa --format ndjson | jq -c 'select(.kind == "tool_end")'
    """
    from copilot_logs.commands import watch as core

    watcher = core.choose(options.choose(picked), started=datetime.now(UTC), new_only=until_done)
    if until_done and len(watcher.followers) + watcher.wanted != 1:
        raise click.UsageError("--until-done follows one session: name it, or use --latest 1", ctx)
    if not until_done and timeout is not None:
        raise click.UsageError("--timeout goes with --until-done", ctx)
    console = output.live_console() if fmt == "table" else None
    if fmt == "table" and console is None and not until_done:
        output.echo(
            "Not a terminal: the live view needs one; use --format ndjson for a stream of "
            "events. Following until Ctrl-C.",
            err=True,
        )
    try:
        follower, timed_out = _follow(watcher, console, fmt, until_done, timeout, nudge_cap)
    except KeyboardInterrupt:
        ctx.exit(int(ExitCode.OK))
    if follower is None:
        assert timed_out is not None
        output.echo(
            f"Error: no session appeared under {one_line(str(watcher.root))} in "
            f"{timed_out.total_seconds():g}s: gave up waiting",
            err=True,
        )
        ctx.exit(int(ExitCode.TIMEOUT))
    code = _verdict(follower, fmt, nudge_cap)
    if timed_out:
        output.echo(
            f"Error: no new event in {follower.name} for {timed_out.total_seconds():g}s: "
            "gave up waiting",
            err=True,
        )
    ctx.exit(int(ExitCode.TIMEOUT if timed_out else code))


def _follow(
    watcher: Watcher,
    console: Any,
    fmt: str,
    until_done: bool,
    timeout: timedelta | None,
    nudge_cap: int,
) -> tuple[Follower | None, timedelta | None]:
    """Follow until the run ends (--until-done: its follower, and the timeout if that ended it)
    or forever (until Ctrl-C), drawing the live view on a terminal (``console``): a session's
    state is worked out again only when its file changed."""
    from contextlib import nullcontext

    from copilot_logs.commands import watch as core
    from copilot_logs.render.formats import report_damage
    from copilot_logs.render.timeline import view, write_record

    live = None
    if console is not None:
        from rich.live import Live

        live = Live(
            console=console, auto_refresh=False, redirect_stderr=False, redirect_stdout=False
        )
    if fmt == "ndjson" or not live:
        _say_waiting(watcher)
    status = core.RUNNING
    started = time.monotonic()
    drawn_at = 0.0
    states: dict[int, Any] = {}
    with live or nullcontext():
        for changes in core.follow(watcher):
            for _, update in changes:
                report_damage(update.diagnostics, quiet=options.quiet())
                if fmt == "ndjson":
                    for record in update.records:
                        write_record(record)
            if live and (changes or time.monotonic() - drawn_at >= REFRESH_SECONDS):
                drawn_at = time.monotonic()
                states.update((id(follower), core.state(follower)) for follower, _ in changes)
                shown = watcher.shown()
                drawn = [states[id(f)] for f in shown if states.get(id(f)) is not None]
                live.update(view(drawn, [f.name for f in shown if f.path is None]), refresh=True)
            if not until_done:
                continue
            followed = watcher.followers[0] if watcher.followers else None
            if followed is not None and changes:
                status = core.run_status(followed, nudge_cap=nudge_cap)
            # Nothing followed yet: the wait counts from the start.
            idle = timedelta(
                seconds=time.monotonic() - (followed.last_growth if followed else started)
            )
            # FINISHING: the shutdown may follow; SETTLING: the CLI may retry
            settle = {core.FINISHING: core.FINISH_SETTLE, core.SETTLING: core.ERROR_SETTLE}
            over = idle >= settle[status] if status in settle else status == core.ENDED
            if followed is not None and over:
                return followed, None
            if timeout is not None and idle >= timeout:
                return followed, timeout
    raise AssertionError("follow() never ends")


def _say_waiting(watcher: Watcher) -> None:
    """On stderr, what is waited for before anything can be followed."""
    for follower in watcher.followers:
        if not any(path.is_file() for path in follower.candidates):
            output.echo(f"Waiting for {follower.name} to appear...", err=True)
    if watcher.new_only:
        there = len(watcher.idle)
        older = (
            f" (the {plural(there, 'session')} there now count only if written to)" if there else ""
        )
        output.echo(
            f"Waiting for a session to be written under {one_line(str(watcher.root))}{older}...",
            err=True,
        )
    elif watcher.wanted and not watcher.followers:
        output.echo(
            f"Waiting for a session to appear under {one_line(str(watcher.root))}...", err=True
        )


def _verdict(follower: Follower, fmt: str, nudge_cap: int) -> ExitCode:
    """Print the log's audit verdict as ``copilot-logs audit`` does (on stderr beside ndjson)
    and return audit's exit code for it."""
    from copilot_logs.commands import audit
    from copilot_logs.commands import watch as core
    from copilot_logs.ingest.logfile import Source
    from copilot_logs.render.audit import AuditContext, write_verdicts
    from copilot_logs.store.collect import read_files

    if follower.path is None:
        output.echo(f"No session log appeared at {follower.name}.", err=True)
        return ExitCode.FAILED
    fail_on = frozenset(audit.DEFAULT_FAIL_ON)
    read = read_files([(Source(follower.path, follower.session_hint), None)])[0]
    table = core.verdict(read, nudge_cap=nudge_cap)
    shown = audit.judged(table)
    write_verdicts(shown, AuditContext(fail_on, table.height), on_stderr=fmt != "table")
    if table.is_empty() or not audit.failing(shown, fail_on).is_empty():
        return ExitCode.FAILED
    return ExitCode.OK
