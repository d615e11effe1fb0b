"""``copilot-logs watch``: running sessions followed live, or one autopilot run waited for."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from copilot_logs.cli.options import (
    Picked,
    nudge_cap_option,
    parse_duration,
    quiet,
    reading_command,
)
from copilot_logs.errors import ExitCode
from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    from copilot_logs.commands.watch.tail import Follower, Watcher

REFRESH_SECONDS = 1.0
"""How often the live view is drawn again when nothing changed (its clocks move)."""


def _timeout(ctx: click.Context, param: click.Parameter, value: str | None) -> timedelta | None:
    return None if value is None else parse_duration(ctx, param, value)


@reading_command("table", "ndjson", engine=False, stdin=False)
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
    callback=_timeout,
    metavar="DURATION",
    help="With --until-done: give up when no new event arrives for DURATION (90s, 10m, 1h; "
    "a bare number is seconds, as for coreutils timeout), or no session appears, and exit "
    f"{int(ExitCode.TIMEOUT)}.",
)
@nudge_cap_option("as for audit")
def watch(
    ctx: click.Context,
    picked: Picked,
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

    watcher = core.choose(_selection(picked), started=datetime.now(UTC), new_only=until_done)
    if until_done and len(watcher.followers) + watcher.wanted != 1:
        raise click.UsageError("--until-done follows one session: name it, or use --latest 1", ctx)
    if not until_done and timeout is not None:
        raise click.UsageError("--timeout goes with --until-done", ctx)
    console = output.live_console() if fmt == "table" else None
    live = console is not None
    if fmt == "table" and not live and not until_done:
        output.echo(
            "Not a terminal: the live view needs one; use --format ndjson for a stream of "
            "events. Following until Ctrl-C.",
            err=True,
        )
    ending: _Ending | None = None
    try:
        with _Screen(console) as screen:
            ending = _follow(watcher, screen, fmt, until_done, timeout, nudge_cap)
    except KeyboardInterrupt:
        ctx.exit(int(ExitCode.OK))
    ctx.exit(int(ending.report(fmt, nudge_cap) if ending else ExitCode.OK))


def _selection(picked: Picked) -> Any:
    from copilot_logs.ingest.discover import Selection, parse_when

    return Selection(
        selectors=picked.selectors,
        root=picked.root,
        since=parse_when(picked.since) if picked.since else None,
        until=parse_when(picked.until, end_of_day=True) if picked.until else None,
        latest=picked.latest,
    )


class _Screen:
    """The rich Live display on a terminal; nothing elsewhere (ndjson, or a pipe). A session's
    state is worked out again only when its file changed."""

    def __init__(self, console: Any) -> None:
        self.live: Any = None
        if console is not None:
            from rich.live import Live

            self.live = Live(
                console=console, auto_refresh=False, redirect_stderr=False, redirect_stdout=False
            )
        self.drawn_at = 0.0
        self.states: dict[int, Any] = {}

    def __enter__(self) -> _Screen:
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def draw(self, watcher: Watcher, changed: list[Follower]) -> None:
        from copilot_logs.commands import watch as core
        from copilot_logs.render.timeline import view

        now = time.monotonic()
        if self.live is None or not (changed or now - self.drawn_at >= REFRESH_SECONDS):
            return
        self.drawn_at = now
        for follower in changed:
            self.states[id(follower)] = core.state(follower)
        shown = watcher.shown()
        states = [self.states[id(f)] for f in shown if self.states.get(id(f)) is not None]
        waiting = [f.name for f in shown if f.path is None]
        self.live.update(view(states, waiting), refresh=True)


@dataclass(frozen=True)
class _Ending:
    """How an --until-done wait ended: the run is over, or the timeout expired (maybe before
    any session appeared: no follower)."""

    follower: Follower | None
    root: Path
    timed_out: timedelta | None = None

    def report(self, fmt: str, nudge_cap: int) -> ExitCode:
        if self.follower is None:
            assert self.timed_out is not None
            output.echo(
                f"Error: no session appeared under {one_line(str(self.root))} in "
                f"{self.timed_out.total_seconds():g}s: gave up waiting",
                err=True,
            )
            return ExitCode.TIMEOUT
        code = _verdict(self.follower, fmt, nudge_cap)
        if self.timed_out is None:
            return code
        output.echo(
            f"Error: no new event in {self.follower.name} for "
            f"{self.timed_out.total_seconds():g}s: gave up waiting",
            err=True,
        )
        return ExitCode.TIMEOUT


def _follow(
    watcher: Watcher,
    screen: _Screen,
    fmt: str,
    until_done: bool,
    timeout: timedelta | None,
    nudge_cap: int,
) -> _Ending:
    """Follow until the run ends (--until-done) or forever (until Ctrl-C)."""
    from copilot_logs.commands import watch as core
    from copilot_logs.render.formats import report_damage
    from copilot_logs.render.timeline import write_record

    if fmt == "ndjson" or not screen.live:
        _say_waiting(watcher)
    status = core.RUNNING
    started = time.monotonic()
    for changes in core.follow(watcher):
        for _follower, update in changes:
            report_damage(update.diagnostics, quiet=quiet())
            if fmt == "ndjson":
                for record in update.records:
                    write_record(record)
        screen.draw(watcher, [follower for follower, _ in changes])
        if not until_done:
            continue
        follower = watcher.followers[0] if watcher.followers else None
        if follower is not None and changes:
            status = core.run_status(follower, nudge_cap=nudge_cap)
        # Nothing followed yet: the wait counts from the start.
        last = follower.last_growth if follower is not None else started
        idle = timedelta(seconds=time.monotonic() - last)
        if follower is not None and _over(status, idle):
            return _Ending(follower, watcher.root)
        if timeout is not None and idle >= timeout:
            return _Ending(follower, watcher.root, timeout)
    raise AssertionError("follow() never ends")


def _over(status: str, idle: timedelta) -> bool:
    """Whether the run is over, ``idle`` after its last event."""
    from copilot_logs.commands import watch as core

    if status == core.FINISHING:
        return idle >= core.FINISH_SETTLE  # the shutdown may follow
    if status == core.SETTLING:
        return idle >= core.ERROR_SETTLE  # the CLI may retry
    return status == core.ENDED


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
    from copilot_logs.cli.audit import DEFAULT_FAIL_ON
    from copilot_logs.commands import audit
    from copilot_logs.commands import watch as core
    from copilot_logs.ingest.decode.envelope import Source
    from copilot_logs.render.audit import AuditContext, write_verdicts
    from copilot_logs.store.collect import read_files

    if follower.path is None:
        output.echo(f"No session log appeared at {follower.name}.", err=True)
        return ExitCode.FAILED
    fail_on = frozenset(DEFAULT_FAIL_ON.split(","))
    read = read_files([(Source(follower.path, follower.session_hint), None)])[0]
    table = core.verdict(read, nudge_cap=nudge_cap)
    shown = audit.judged(table)
    write_verdicts(shown, AuditContext(fail_on, table.height), on_stderr=fmt != "table")
    if table.is_empty() or not audit.failing(shown, fail_on).is_empty():
        return ExitCode.FAILED
    return ExitCode.OK
