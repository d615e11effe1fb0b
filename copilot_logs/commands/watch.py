"""The core of ``watch`` (docs/watch.md): which logs to follow, following them as they grow
(the one growth check, as a poll), and their events folded into a live state and the ndjson
records, every figure derived by the batch commands' own functions.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from copilot_logs import derive
from copilot_logs.commands import audit, count
from copilot_logs.derive import MAIN, TYPE
from copilot_logs.errors import SelectionError
from copilot_logs.ingest.discover import EVENTS_FILE, Selection, find_sources
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult, ReadState
from copilot_logs.ingest.schema import damaged_line_count, empty_diagnostics, empty_events
from copilot_logs.store.collect import read_held
from copilot_logs.store.entry import Fed, Seen, Stamp, State, growth

FIGURES = (
    *(name for name in derive.COUNT_FIELDS if name != "open_turns"),
    "subagent_runs",
    "errors",
)
"""The running figures every record carries: ``count``'s (but open turns, which a running sum
cannot hold), sub-agent runs and errors."""

KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "session_start": ("copilot_version", "cwd"),
    "prompt": ("interaction_index", "interaction_id", "agent_mode"),
    "nudge": ("interaction_index", "interaction_id"),
    "turn_start": ("turn_id", "interaction_id", "turn_index", "agent_id", "model"),
    "turn_end": ("turn_id", "turn_index", "duration_ms"),
    "tool_start": ("tool_name", "tool_call_id", "agent_id"),
    "tool_end": (
        *("tool_name", "tool_call_id", "agent_id", "success", "duration_ms", "error"),
        "user_requested",
    ),
    "subagent_start": ("agent_id", "agent_name"),
    "subagent_end": ("agent_id", "agent_name", "success", "error"),
    "task_complete": ("summary", "success", "outcome"),
    "error": ("error_type", "message"),
    "shutdown": ("shutdown_type",),
}
"""The kinds of ``--format ndjson`` records, in the README's order, and the fields each adds to
``session_id``, ``at``, ``kind``, ``file``, ``line`` and the running figures."""
KINDS = tuple(KIND_FIELDS)


def _kind() -> pl.Expr:
    user = MAIN & (TYPE == "user.message")
    rules = [
        (TYPE == "session.start", "session_start"),
        (user & pl.col("is_nudge").fill_null(False), "nudge"),
        (user, "prompt"),
        (MAIN & (TYPE == derive.TURN_START), "turn_start"),
        (pl.col("subagent_call"), "turn_start"),
        (pl.col("closes_turn"), "turn_end"),
        (TYPE == "tool.execution_start", "tool_start"),
        (TYPE == "tool.execution_complete", "tool_end"),
        (TYPE == "subagent.started", "subagent_start"),
        (TYPE.is_in(["subagent.completed", "subagent.failed"]), "subagent_end"),
        (TYPE == "session.task_complete", "task_complete"),
        (TYPE == "session.error", "error"),
        (TYPE == "session.shutdown", "shutdown"),
    ]
    return pl.coalesce(pl.when(condition).then(pl.lit(kind)) for condition, kind in rules)


def records(events: pl.DataFrame) -> pl.DataFrame:
    """One row per event that makes a record (:data:`KINDS`), in file order, with the running
    figures just after it and every kind's fields."""
    annotated = derive.annotate(events)
    flags = derive.count_flags(annotated)
    running = flags.with_columns(
        completed_turns=pl.col("closes_turn").cast(pl.Int64),
        subagent_runs=(TYPE == "subagent.started").cast(pl.Int64),
        errors=(TYPE == "session.error").cast(pl.Int64),
    ).with_columns(pl.col(name).cum_sum().over(*derive.SESSION) for name in FIGURES)
    keys = list(derive.SESSION)
    tools = derive.tools(annotated).select(
        *keys, "tool_call_id", _tool_name="tool_name", _tool_ms="duration_ms"
    )
    runs = derive.subagent_runs(annotated).select(*keys, "tool_call_id", _agent_name="agent_name")
    turns = derive.turns(annotated).select(*keys, "turn_index", _turn_ms="duration_ms")
    return (
        running.with_columns(kind=_kind())
        .filter(pl.col("kind").is_not_null())
        .join(tools, on=[*keys, "tool_call_id"], how="left")
        .join(runs, on=[*keys, "tool_call_id"], how="left")
        .join(turns, on=[*keys, "turn_index"], how="left")
        .sort("file", "line")
        .with_columns(
            at=pl.col("timestamp")
            .dt.convert_time_zone("UTC")
            .dt.to_string("%Y-%m-%dT%H:%M:%S%.3fZ"),
            agent_id=pl.when(pl.col("kind").is_in(["subagent_start", "subagent_end"]))
            .then(pl.col("tool_call_id"))
            .otherwise(pl.col("agent_id")),
            agent_name=pl.col("_agent_name"),
            tool_name=pl.coalesce("tool_name", "_tool_name"),
            duration_ms=pl.when(pl.col("kind") == "turn_end")
            .then(pl.col("_turn_ms"))
            .otherwise(pl.col("_tool_ms")),
            user_requested=pl.col("is_user_requested").fill_null(False),
            summary=pl.coalesce("summary", "text"),
            error_type=pl.col("error_code"),
            message=pl.col("error"),
        )
    )


def record(row: dict[str, object]) -> dict[str, object]:
    kind = str(row["kind"])
    record: dict[str, object] = {
        "session_id": row["session_id"],
        "at": row["at"],
        "kind": kind,
        "file": row["file"],
        "line": row["line"],
    }
    record.update((name, row[name]) for name in FIGURES)
    record.update((name, row[name]) for name in KIND_FIELDS[kind])
    if kind == "turn_start" and row["agent_id"] is None:
        record["model"] = row["model"]
    return record


POLL_SECONDS = 0.2
SCAN_SECONDS = 1.0
"""How often each followed file is stat'ed, and the root listed for new sessions."""
ENDED_LINGER = timedelta(seconds=60)
"""Watching a root: how long an ended session stays on screen."""


@dataclass
class Update:
    """What one poll of a file brought: new records (in file order) and new damage; ``reread``:
    the file did not only grow (shrunk, replaced, rewritten), it was read again whole."""

    records: list[dict[str, object]]
    diagnostics: pl.DataFrame
    reread: bool = False


class Follower:
    """One session log followed as it grows (or waited for until it exists)."""

    def __init__(self, candidates: tuple[Path, ...], session_hint: str) -> None:
        self.candidates = candidates
        self.session_hint = session_hint
        self.path: Path | None = None
        self.result = ReadResult(empty_events(), empty_diagnostics())
        self.pending_bytes = 0  # of a last line still waiting for its newline
        self.ended_seen_at: datetime | None = None  # watching a root: it leaves later
        self.last_growth = time.monotonic()
        self._emitted: set[str] = set()  # the ids reported: a re-read reports only new ones
        self.records_from = 0
        """The first read makes records only for the events from this offset on (a resumed
        session picked up by a root's watch: its earlier events are state, not news)."""
        self._forget()

    def _forget(self) -> None:
        self.result = ReadResult(empty_events(), empty_diagnostics())
        self._fed = Fed()  # the whole lines read so far, and the growth check's record of them
        self._seen: Seen | None = None
        self._next_line = 1
        self._last_id: str | None = None
        self._session_id: str | None = None
        self._seen_ids: set[str] = set()

    @property
    def name(self) -> str:
        return str(self.path if self.path is not None else self.candidates[0])

    def poll(self) -> Update | None:
        """Read what was appended since the last poll; None when nothing new is complete."""
        located = _first_file((self.path,) if self.path is not None else self.candidates)
        if located is None:
            return None
        self.path, stamp = located
        old_end, reread = self._fed.end, False
        if self._seen is not None:
            state = growth(self._seen, stamp, self.path, polling=True)
            if state is State.FRESH:
                return None
            if state is State.MISS:  # shrunk (/rewind), replaced, rewritten: read it whole
                self._forget()
                reread = True
        try:
            with self.path.open("rb") as stream:
                stream.seek(self._fed.end)
                data = stream.read(stamp.size - self._fed.end)
        except OSError:
            return None
        cut = data.rfind(b"\n") + 1
        self.pending_bytes = len(data) - cut
        if cut == 0:  # no new complete line: the half-written one is not read again until it grows
            self._seen = self._fed.seen(stamp, self._seen.clean if self._seen else True)
            return Update([], empty_diagnostics(), True) if reread else None
        return self._take(data[:cut], stamp, old_end, reread)

    def _take(self, chunk: bytes, stamp: Stamp, old_end: int, reread: bool) -> Update:
        """Read the new complete lines on from where the last read stopped."""
        start = self._fed.end
        part, state = self._read(chunk)
        self.result = ReadResult.concat([self.result, part])
        # Every byte fed was complete lines, all read or reported: the next read starts after
        # them even when the reader's own end lags (a file of lines it cannot read at all).
        self._fed.feed(chunk)
        self._next_line += chunk.count(b"\n")
        if state is not None:
            self._last_id, self._session_id = state.last_id, state.session_id
        # A damaged last line may go on in the next bytes (an event split across the cut):
        # the file is then read again whole once it grows, as a batch read would read it.
        tail_damaged = part.diagnostics.filter(pl.col("line") == self._next_line - 1).height
        self._seen = self._fed.seen(stamp, clean=not tail_damaged)
        self._seen_ids.update(part.events["event_id"].drop_nulls().to_list())
        new_damage = part.diagnostics.filter(pl.col("offset") >= (0 if reread else start))
        return Update(self._new_records(old_end), new_damage, reread)

    def _read(self, chunk: bytes) -> tuple[ReadResult, ReadState | None]:
        """The new lines through the reader every command reads with."""
        assert self.path is not None
        source = Source(self.path, self.session_hint)
        resume = None
        if self._fed.end:
            resume = ReadState(
                end=self._fed.end,
                next_line=self._next_line,
                last_id=self._last_id,
                seen_ids=frozenset(self._seen_ids),
                session_id=self._session_id,
            )
        result, states = read_held([(source, chunk, resume)])
        return result, states[0]

    def _new_records(self, old_end: int) -> list[dict[str, object]]:
        """Records for the events not yet reported (after a re-read: those with new ids)."""
        frame = records(self.result.events)
        new = (
            pl.col("event_id").is_not_null() & ~pl.col("event_id").is_in(list(self._emitted))
        ) | (pl.col("event_id").is_null() & (pl.col("offset") >= old_end))
        fresh = frame.filter(new)
        self._emitted.update(fresh["event_id"].drop_nulls().to_list())
        if self.records_from:
            fresh = fresh.filter(pl.col("offset") >= self.records_from)
            self.records_from = 0
        return [record(row) for row in fresh.to_dicts()]


Signature = Stamp | None
"""A session's log as the root's scan last saw it (its stat), None when it has no log yet."""


def _first_file(candidates: tuple[Path, ...]) -> tuple[Path, Stamp] | None:
    """The first candidate that is a regular file, and its stamp (one stat each)."""
    for path in candidates:
        try:
            found = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode):
            return path, Stamp.of(found)
    return None


def log_signature(candidates: tuple[Path, ...]) -> Signature:
    located = _first_file(candidates)
    return located[1] if located is not None else None


@dataclass
class Watcher:
    """The followed files, and the root watched for sessions that appear or start writing."""

    followers: list[Follower]
    root: Path
    pick_up_new: bool
    """Watching the root: follow sessions that appear; ended ones leave the view."""
    wanted: int = 0  # with --latest N and fewer than N sessions at the start: how many more
    idle: dict[str, Signature] = field(default_factory=dict)
    """The root's sessions not followed, as last seen: one is followed once its log appears or
    changes (a session folder created before its events.jsonl, an old session resumed)."""
    new_only: bool = False
    """``--until-done`` with no session named: the first session written after the start is
    streamed from its first line."""
    _next_scan: float = 0.0

    def tick(self) -> list[tuple[Follower, Update]]:
        """One round: list the root when due, poll every file; what changed, in order."""
        now = time.monotonic()
        if (self.pick_up_new or self.wanted) and now >= self._next_scan:
            self._next_scan = now + SCAN_SECONDS
            self._scan()
        changes = []
        for follower in self.followers:
            update = follower.poll()
            if update is not None:
                follower.last_growth = now
                changes.append((follower, update))
        self._note_ended([follower for follower, _ in changes])
        return changes

    def _scan(self) -> None:
        followed = followed_paths(self.followers)
        for name, candidates in root_entries(self.root):
            if followed.intersection(candidates) or not (self.pick_up_new or self.wanted):
                continue
            signature = log_signature(candidates)
            if signature is None or self.idle.get(name, None) == signature:
                # No log yet (a session folder comes first; the CLI also makes folders that
                # hold no session), or not written since it was last seen.
                self.idle[name] = signature
                continue
            follower = Follower(candidates, name)
            grown_from = _grown_from(self.idle.pop(name, None), signature)
            follower.records_from = 0 if self.new_only else grown_from
            self.followers.append(follower)
            self.wanted = max(0, self.wanted - 1)

    def _note_ended(self, changed: list[Follower]) -> None:
        wall = datetime.now(UTC)
        for follower in changed:
            if not shut_down(follower.result):
                follower.ended_seen_at = None
            elif follower.ended_seen_at is None:
                follower.ended_seen_at = wall

    def shown(self) -> list[Follower]:
        """Watching a root, an ended session leaves the view after ENDED_LINGER (it is still
        followed, and comes back if it is resumed)."""
        if not self.pick_up_new:
            return self.followers
        wall = datetime.now(UTC)
        return [
            f
            for f in self.followers
            if f.ended_seen_at is None or wall - f.ended_seen_at < ENDED_LINGER
        ]


def followed_paths(followers: list[Follower]) -> set[Path]:
    return {path for follower in followers for path in follower.candidates}


def _grown_from(seen: Signature, now: Signature) -> int:
    """Where a log seen before grew from (an old session resumed: what it held is not news)."""
    if seen is None or now is None or (seen.inode, seen.device) != (now.inode, now.device):
        return 0
    return seen.size if now.size >= seen.size else 0


def follow(watcher: Watcher) -> Iterator[list[tuple[Follower, Update]]]:
    while True:
        yield watcher.tick()
        time.sleep(POLL_SECONDS)


def root_entries(root: Path) -> Iterator[tuple[str, tuple[Path, ...]]]:
    """The session names under ``root`` (both layouts), without opening any file."""
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(".jsonl"):
            yield entry.name.removesuffix(".jsonl"), (Path(entry.path),)
        elif entry.is_dir():
            # The folder may appear before its events.jsonl: wait for the file.
            yield entry.name, (Path(entry.path) / EVENTS_FILE,)


def shut_down(result: ReadResult) -> bool:
    return derive.last_run_ended(result.events)


ACTIVE_WITHIN = timedelta(minutes=10)
"""Watching a root: the sessions written to this recently are followed from the start."""
ERROR_SETTLE = timedelta(seconds=10)
FINISH_SETTLE = timedelta(seconds=3)
"""``--until-done``: an error (the CLI may retry), or a loop judged over, ends the wait once no
event follows for this long (the shutdown the CLI writes as it exits is then in the stream)."""
FOREVER = timedelta(days=36_500)

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


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


RUNNING = "running"
ENDED = "ended"
FINISHING = "finishing"
SETTLING = "settling"


def run_status(follower: Follower, *, nudge_cap: int = audit.DEFAULT_NUDGE_CAP) -> str:
    """Whether the run in the followed log is over: a shutdown after its last work (``ENDED``),
    its loop ended in a way the audit judges (``FINISHING``: the shutdown may follow), or on an
    error (``SETTLING``: the CLI may still retry)."""
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
    return audit.judge([audit.facts(result)], now=datetime.now(UTC), nudge_cap=nudge_cap)


def _waited_for(selector: str, root: Path) -> Follower | None:
    """A follower for a selector naming a session that does not exist yet (a full session id
    or a path), else None."""
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
    """The files to follow for ``selection`` (docs/watch.md); a session named that does not
    exist yet is waited for. ``new_only`` (``--until-done`` with no selector): nothing there now
    is followed, the first session written after now is, from its first line."""
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
