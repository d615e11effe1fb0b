"""Follow session logs as they grow: the reading side of ``watch``, and the records of
``watch --format ndjson`` (one per event that makes one, see :data:`KINDS`, with the running
figures just after it, derived by the batch commands' own functions).

A :class:`Follower` keeps, per file, the complete lines it read; each :meth:`Follower.poll` asks
the one growth check (:func:`copilot_logs.store.key.growth`, as a poll): a log that only grew is
read on through :func:`copilot_logs.store.collect.read_held`, any other change makes it read
again whole (docs/watch.md), so the events held always equal a batch read of the same lines. A
:class:`Watcher` polls its followers and, watching a root, lists it for sessions that appear.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, TYPE
from copilot_logs.ingest.discover import EVENTS_FILE
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult, ReadState
from copilot_logs.ingest.schema import empty_diagnostics, empty_events
from copilot_logs.store.collect import read_held
from copilot_logs.store.entry import Stamp
from copilot_logs.store.key import Fed, Seen, State, growth

KINDS = (
    "session_start",
    "prompt",
    "nudge",
    "turn_start",
    "turn_end",
    "tool_start",
    "tool_end",
    "subagent_start",
    "subagent_end",
    "task_complete",
    "error",
    "shutdown",
)
"""The kinds of ``--format ndjson`` records, in the README's order."""

FIGURES = (
    *(name for name in derive.COUNT_FIELDS if name != "open_turns"),
    "subagent_runs",
    "errors",
)
"""The running figures every record carries, their values just after its event: ``count``'s
(but open turns, which a running sum cannot hold), then sub-agent runs and errors."""

KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "session_start": ("copilot_version", "cwd"),
    "prompt": ("interaction_index", "interaction_id", "agent_mode"),
    "nudge": ("interaction_index", "interaction_id"),
    "turn_start": ("turn_id", "interaction_id", "turn_index", "agent_id", "model"),
    "turn_end": ("turn_id", "turn_index", "duration_ms"),
    "tool_start": ("tool_name", "tool_call_id", "agent_id"),
    "tool_end": (
        "tool_name",
        "tool_call_id",
        "agent_id",
        "success",
        "duration_ms",
        "error",
        "user_requested",
    ),
    "subagent_start": ("agent_id", "agent_name"),
    "subagent_end": ("agent_id", "agent_name", "success", "error"),
    "task_complete": ("summary", "success", "outcome"),
    "error": ("error_type", "message"),
    "shutdown": ("shutdown_type",),
}
"""The fields each kind adds to ``session_id``, ``at``, ``kind``, ``file``, ``line`` and the
running figures."""


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
    """One row per event that makes a record (see :data:`KINDS`), in file order, with the
    running figures just after it and every kind's fields."""
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
"""How often each followed file is stat'ed."""
SCAN_SECONDS = 1.0
"""How often the root is listed for new sessions."""
ENDED_LINGER = timedelta(seconds=60)
"""Watching a root: how long an ended session stays on screen."""


@dataclass
class Update:
    """What one poll of a file brought: new records (in file order) and new damage."""

    records: list[dict[str, object]]
    diagnostics: pl.DataFrame
    reread: bool = False
    """The file did not only grow (shrunk, replaced, rewritten): it was read again whole."""


class Follower:
    """One session log followed as it grows (or waited for until it exists)."""

    def __init__(self, candidates: tuple[Path, ...], session_hint: str) -> None:
        self.candidates = candidates
        self.session_hint = session_hint
        self.path: Path | None = None
        self.result = ReadResult(empty_events(), empty_diagnostics())
        self.pending_bytes = 0
        """Bytes of a last line still waiting for its newline."""
        self.ended_seen_at: datetime | None = None
        """Watching a root: when the session was first seen ended (it leaves later)."""
        self.last_growth = time.monotonic()
        """When a complete line last arrived (or when following began)."""
        self._emitted: set[str] = set()
        """The ids of the events already reported: a re-read file reports only new ones."""
        self.records_from = 0
        """The first read makes records only for the events from this offset on (a resumed
        session picked up by a root's watch: its earlier events are state, not news)."""
        self._forget()

    def _forget(self) -> None:
        self.result = ReadResult(empty_events(), empty_diagnostics())
        self._fed = Fed()
        """The bytes read so far (whole lines), for the growth check."""
        self._seen: Seen | None = None
        """What :func:`~copilot_logs.store.key.growth` checks the file against at each poll."""
        self._next_line = 1
        self._last_id: str | None = None
        self._session_id: str | None = None
        self._seen_ids: set[str] = set()

    @property
    def name(self) -> str:
        return str(self.path if self.path is not None else self.candidates[0])

    def _locate(self) -> os.stat_result | None:
        """Stat the file (the first candidate that exists, while waiting for it)."""
        for path in (self.path,) if self.path is not None else self.candidates:
            try:
                found = path.stat()
            except OSError:
                continue
            if stat.S_ISREG(found.st_mode):
                self.path = path
                return found
        return None

    def poll(self) -> Update | None:
        """Read what was appended since the last poll; None when nothing new is complete."""
        found = self._locate()
        if found is None or self.path is None:
            return None
        stamp = Stamp.of(found)
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
        """Read the new complete lines on from where the last read stopped (from the start
        after a re-read)."""
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
        """The new lines through the reader every command reads with, resumed where the last
        read stopped."""
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


def log_signature(candidates: tuple[Path, ...]) -> Signature:
    """The signature of the first candidate that is a regular file (one stat each)."""
    for path in candidates:
        try:
            found = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode):
            return Stamp.of(found)
    return None


@dataclass
class Watcher:
    """The followed files, and the root watched for sessions that appear or start writing."""

    followers: list[Follower]
    root: Path
    pick_up_new: bool
    """Watching the root: follow sessions that appear; ended ones leave the view."""
    wanted: int = 0
    """With --latest N and fewer than N sessions at the start: how many more to pick up."""
    idle: dict[str, Signature] = field(default_factory=dict)
    """The root's sessions not followed, each with its log's signature when it was last
    seen: one is followed once its log appears or changes (a session folder created before
    its events.jsonl, an old session resumed)."""
    new_only: bool = False
    """Waiting for the first session written after the start (``--until-done`` with no
    session named): the one picked up is streamed from its first line."""
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
        """Note when changed sessions shut down (a resumed one runs again)."""
        wall = datetime.now(UTC)
        for follower in changed:
            if not shut_down(follower.result):
                follower.ended_seen_at = None
            elif follower.ended_seen_at is None:
                follower.ended_seen_at = wall

    def shown(self) -> list[Follower]:
        """The followers to show: watching a root, an ended session leaves after
        ENDED_LINGER (it is still followed, and comes back if it is resumed)."""
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
    """Where a log seen before grew from (an old session resumed: what it held then is its
    state, not news), else 0."""
    if seen is None or now is None or (seen.inode, seen.device) != (now.inode, now.device):
        return 0
    return seen.size if now.size >= seen.size else 0


def follow(watcher: Watcher) -> Iterator[list[tuple[Follower, Update]]]:
    """Poll forever, every POLL_SECONDS: each round's changes (often none)."""
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
    """Whether the log's last run shut down after its last work (the session model's
    ``ended``)."""
    return derive.last_run_ended(result.events)
