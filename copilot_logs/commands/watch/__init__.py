"""The core of ``watch``: which logs to follow, and their events folded into a live state.

Following the files as they grow is :mod:`copilot_logs.commands.watch.tail`; the ndjson records are
:mod:`copilot_logs.commands.watch.tail`. Every figure is derived from the accumulated events
frame by the batch commands' own functions (:func:`copilot_logs.commands.count.count`,
:mod:`copilot_logs.derive`, :func:`copilot_logs.commands.audit.audit`), so ``watch`` cannot
disagree with them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from copilot_logs import derive
from copilot_logs.commands import audit, count
from copilot_logs.commands.watch.tail import Follower as Follower
from copilot_logs.commands.watch.tail import (
    Signature,
    followed_paths,
    log_signature,
    root_entries,
    shut_down,
)
from copilot_logs.commands.watch.tail import Watcher as Watcher
from copilot_logs.commands.watch.tail import follow as follow
from copilot_logs.derive import MAIN, TYPE
from copilot_logs.errors import SelectionError
from copilot_logs.ingest.discover import EVENTS_FILE, Selection, find_sources
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import damaged_line_count

ACTIVE_WITHIN = timedelta(minutes=10)
"""Watching a root: the sessions written to this recently are followed from the start."""
ERROR_SETTLE = timedelta(seconds=10)
"""``--until-done``: an error ends the run when no event follows it for this long (the CLI
may retry the call)."""
FINISH_SETTLE = timedelta(seconds=3)
"""``--until-done``: a loop judged over (task_complete, the nudge cap, an abort) ends the wait
once no event follows for this long, so the shutdown the CLI writes as it exits (with the
session's usage) is in the stream; a shutdown ends it at once."""
FOREVER = timedelta(days=36_500)

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# --- the live state --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningTool:
    name: str
    agent_id: str | None
    started_at: datetime | None


@dataclass(frozen=True)
class SessionState:
    """What the live view shows of one session (one file)."""

    session_id: str
    file: str
    mode: str
    ended: bool
    interaction: int
    turns_in_interaction: int
    turn_open: bool
    llm_calls: int
    subagent_calls: int
    tool_calls: int
    failed_tool_calls: int
    autopilot_nudges: int
    subagent_runs: int
    subagents_running: tuple[str, ...]
    errors: int
    last_error: str | None
    task_complete: bool
    last_event_at: datetime | None
    running_tools: tuple[RunningTool, ...]
    damaged_lines: int
    pending_bytes: int


def state(follower: Follower) -> SessionState | None:
    """The live state of a followed file; None while it holds no event."""
    events = follower.result.events
    if events.is_empty():
        return None
    annotated = derive.annotate(events)
    # A file holding several sessions (a recorder's copy) is shown as one block: its totals.
    figures = count.totals(count.count(follower.result))
    runs = derive.subagent_runs(annotated)
    last = annotated.tail(1).row(0, named=True)
    errors = annotated.filter(TYPE == "session.error")
    in_interaction = annotated.filter(
        MAIN
        & (TYPE == derive.TURN_START)
        & (pl.col("interaction_index") == last["interaction_index"])
    )
    return SessionState(
        session_id=str(last["session_id"] or follower.session_hint),
        file=follower.name,
        mode=str(annotated.select(session_mode=derive.session_mode()).item()),
        ended=last["segment_end"] == derive.ENDED_BY_SHUTDOWN,
        interaction=int(last["interaction_index"]),
        turns_in_interaction=in_interaction.height,
        turn_open=bool(last["during_turn"]) and not bool(last["closes_turn"]),
        llm_calls=figures["llm_calls"],
        subagent_calls=figures["subagent_calls"],
        tool_calls=figures["tool_calls"],
        failed_tool_calls=figures["failed_tool_calls"],
        autopilot_nudges=figures["autopilot_nudges"],
        subagent_runs=runs.height,
        subagents_running=tuple(
            str(name or "?") for name in runs.filter(pl.col("status") == "running")["agent_name"]
        ),
        errors=errors.height,
        last_error=next(iter(errors["error"].drop_nulls().tail(1).to_list()), None),
        task_complete=bool(derive.session_facts(annotated)["completed"][-1]),
        last_event_at=annotated["timestamp"].max(),  # type: ignore[arg-type]
        running_tools=_running_tools(annotated),
        damaged_lines=follower.result.diagnostics.select(damaged_line_count()).item(),
        pending_bytes=follower.pending_bytes,
    )


def _running_tools(annotated: pl.DataFrame) -> tuple[RunningTool, ...]:
    tools = derive.tools(annotated).filter(
        pl.col("completed_at").is_null() & pl.col("started_at").is_not_null()
    )
    return tuple(
        RunningTool(str(row["tool_name"] or "?"), row["agent_id"], row["started_at"])
        for row in tools.iter_rows(named=True)
    )


# --- until done ------------------------------------------------------------------------------

RUNNING = "running"
ENDED = "ended"
FINISHING = "finishing"
SETTLING = "settling"
"""What :func:`run_status` says: the run goes on; it is over (a shutdown); its loop is over,
the shutdown may follow (wait FINISH_SETTLE); it ended on an error unless an event follows
within ERROR_SETTLE."""


def run_status(follower: Follower, *, nudge_cap: int = audit.DEFAULT_NUDGE_CAP) -> str:
    """Whether the run in the followed log is over: a shutdown after its last work
    (``ENDED``), or its agent loop ended in a way the audit judges (``FINISHING``:
    task_complete, the nudge cap once the last loop ended, an abort), or it ended on an error
    (``SETTLING``: the CLI may still retry)."""
    result = follower.result
    if result.events.is_empty():
        return RUNNING
    if shut_down(result):
        return ENDED
    if result.events.filter(TYPE.is_in([derive.TURN_START, "user.message"])).is_empty():
        return RUNNING  # started, no prompt yet: nothing to judge
    # Judged as if every open session were still running: only a finished loop ends the wait.
    table = audit.audit(
        result, running_within=FOREVER, nudge_cap=nudge_cap, require_task_complete=True
    )
    # The file's last session is the one running (a file may hold several).
    latest = table.filter(pl.col("session_id") == result.events["session_id"][-1])
    verdict = (latest if latest.height else table)["verdict"][0]
    if verdict == audit.RUNNING:
        return RUNNING
    if verdict == audit.ERRORED:
        return SETTLING
    if verdict == audit.NUDGE_CAP:
        turns = derive.turns(derive.annotate(result.events))
        loop_over = turns.height > 0 and turns["ended_loop"][-1] and not turns["open"][-1]
        return FINISHING if loop_over else RUNNING
    return FINISHING


def verdict(result: ReadResult, *, nudge_cap: int) -> pl.DataFrame:
    """The audit table of the log, exactly as ``copilot-logs audit`` computes it."""
    return audit.judge([audit.facts(result)], now=datetime.now(UTC), nudge_cap=nudge_cap)


# --- choosing what to follow ------------------------------------------------------------------


def _waited_for(selector: str, root: Path) -> Follower | None:
    """A follower for a selector naming a session that does not exist yet (a full session id
    or a path), else None (the selector is resolved as every command resolves it)."""
    path = Path(selector).expanduser()
    if path.exists():
        return None
    if _UUID.match(selector.lower()):
        return Follower((root / selector / EVENTS_FILE, root / f"{selector}.jsonl"), selector)
    if os.sep in selector or selector.endswith(".jsonl"):
        hint = path.parent.name if path.name == EVENTS_FILE else path.stem
        return Follower((path,), hint)
    return None


def choose(selection: Selection, *, started: datetime, new_only: bool = False) -> Watcher:
    """The files to follow for ``selection`` (raises SelectionError as every command does).

    A selector that names a session that does not exist yet (a full session id, or a path) is
    waited for. With no selector, the sessions written in the last ACTIVE_WITHIN (or the
    --latest N newest) are followed, and new ones are picked up as they appear (with
    --latest N, until there are N).

    ``new_only`` (``--until-done`` with no selector): nothing there now is followed; the first
    session written after now is (a new log, or one that changes: an agent already writing
    when the watch began), streamed from its first line. An old run already over is never the
    one judged: name it to wait on it.
    """
    if "-" in selection.selectors:
        raise SelectionError("watch follows files: it cannot read standard input (`-`)")
    root = selection.resolved_root
    waiting = [_waited_for(selector, root) for selector in selection.selectors]
    present = [s for s, w in zip(selection.selectors, waiting, strict=True) if w is None]
    sources = []
    if present or not selection.selectors:
        narrowed = Selection(
            present, selection.root, selection.since, selection.until, selection.latest
        )
        sources = find_sources(narrowed)
        if not present and selection.latest is None:
            cutoff = started - ACTIVE_WITHIN
            sources = [s for s in sources if s.path is not None and _modified(s.path) >= cutoff]
    if new_only and not selection.selectors:
        return Watcher(
            [], root, pick_up_new=False, wanted=selection.latest or 1, idle=_idle(root, []),
            new_only=True,
        )  # fmt: skip
    followers = [Follower((s.path,), s.session_hint) for s in sources if s.path is not None]
    followers += [w for w in waiting if w is not None]
    watching_root = not selection.selectors and selection.until is None
    wanted = 0
    if watching_root and selection.latest is not None:
        wanted = max(0, selection.latest - len(followers))
    return Watcher(
        followers,
        root,
        pick_up_new=watching_root and selection.latest is None,
        wanted=wanted,
        idle=_idle(root, followers),
    )


def _idle(root: Path, followers: list[Follower]) -> dict[str, Signature]:
    """The root's sessions not followed from the start, and their logs as they are now."""
    followed = followed_paths(followers)
    return {
        name: log_signature(candidates)
        for name, candidates in root_entries(root)
        if not followed.intersection(candidates)
    }


def _modified(path: Path) -> datetime:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return datetime.min.replace(tzinfo=UTC)
