"""``count --total`` from envelopes alone: exact, at close to the speed of reading the bytes.

Only the envelope of each line is looked at (see
:func:`copilot_logs.ingest.decode.envelope.envelope_at`); a sub-agent's ``assistant.message`` is
decoded for its messageId and chunkIndex. The first line the envelope cannot vouch for (any
damage, a broken parentId chain, a replayed line, a cut last line) stops the scan: the full
reader goes on from there, which recovers and reports what it can. Both feed the one
:class:`copilot_logs.ingest.calls.CallCounter`, so a file is counted exactly as ``count`` counts
it. Each file's figures are kept in the store (a header without frames, see
:mod:`copilot_logs.store`): an unchanged file is not opened again, and a clean file that grew is
scanned from where the entry stopped. No polars is imported on this path."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import orjson

from copilot_logs import store
from copilot_logs.errors import failed_on_session
from copilot_logs.ingest.calls import MESSAGE, TURN_START, CallCounter
from copilot_logs.ingest.decode.envelope import Source, envelope_at
from copilot_logs.ingest.logfile import open_log
from copilot_logs.ingest.reader import Resume, count_calls
from copilot_logs.store import pool as pool_store

Damage = tuple[tuple[int, str, str], ...]
"""(line, kind, message) of each damaged line the full reader reported."""


@dataclass
class Scanned:
    """How far a scan vouched for the lines: to the end of the stream (``whole``), or to the
    line it stopped at, with what the full reader needs to go on from there."""

    offset: int
    line: int
    last_id: bytes | None
    seen: set[bytes]
    whole: bool


SCAN_BLOCK = 8 << 20
_TURN_START = TURN_START.encode()
_MESSAGE = MESSAGE.encode()


def scan_stream(
    stream: BinaryIO,
    counter: CallCounter,
    *,
    start: int = 0,
    line: int = 1,
    last_id: str | None = None,
) -> Scanned:
    """Feed the LLM calls of a stream's lines to ``counter`` until a line needs the full
    reader. ``start``, ``line`` and ``last_id`` go on where an earlier scan ended.

    Lines are checked in place in the read buffer (no copy per line). The parentId chain
    check also catches replayed lines: a replay's parentId is never the id just before it.
    Payload bytes are not checked as UTF-8: a bad byte inside a string changes no count (the
    full reader keeps that event too) and `validate` reports it.
    """
    seen: set[bytes] = set()
    previous = last_id.encode() if last_id is not None else None
    buffer = bytearray()
    consumed = start
    number = line
    remember, add = seen.add, counter.add

    def stopped(at: int) -> Scanned:
        return Scanned(at, number, previous, seen, whole=False)

    while block := stream.read(SCAN_BLOCK):
        buffer += block
        position = 0
        find = buffer.find
        while (newline := find(b"\n", position)) != -1:
            fields = envelope_at(buffer, position, newline)
            if fields is None:
                return stopped(consumed + position)
            kind, agent_id, event_id, _stamp, parent_id = fields
            if parent_id != previous:
                return stopped(consumed + position)
            if kind == _TURN_START:
                add(TURN_START, agent_id.decode() if agent_id is not None else None)
            elif kind == _MESSAGE and agent_id is not None:
                try:
                    data = orjson.loads(buffer[position:newline]).get("data")
                except orjson.JSONDecodeError:  # invalid UTF-8: the reader mends and reports
                    return stopped(consumed + position)
                data = data if isinstance(data, dict) else {}
                add(MESSAGE, agent_id.decode(), data.get("messageId"), data.get("chunkIndex"))
            remember(event_id)
            previous = event_id
            position = newline + 1
            number += 1
        consumed += position
        del buffer[:position]
    if buffer or consumed == 0:
        # A last line with no newline (cut off, or still being written), or an empty file.
        return stopped(consumed)
    return Scanned(consumed, number, previous, seen, whole=True)


@dataclass(frozen=True)
class FileTotals:
    """A file's figures, and what the store keeps to go on when the file grows."""

    llm_calls: int
    subagent_calls: int
    damage: Damage
    unreadable: bool
    """Nothing could be read: no event at all, only damage."""
    progress: store.Progress | None
    """None for standard input or a file that cannot be read."""


def count_file(source: Source, since: store.Header | None = None) -> FileTotals:
    """A file's figures: by the envelope scan as far as it vouches for the lines (going on
    from an earlier read's entry ``since`` when the file only grew), and by the full reader,
    which recovers and reports damage, from the first line it does not."""
    if source.path is not None and since is not None:
        counter = CallCounter(since.messages)
        counter.llm_calls, counter.subagent_calls = since.llm_calls, since.subagent_calls
        scanned = _scan(source, counter, since.end, since.next_line, since.last_id)
        if scanned is not None and scanned.whole:
            return _totals(counter, scanned, since.session_id)
    counter = CallCounter()
    scanned = _scan(source, counter) if source.path is not None else None
    if scanned is not None and scanned.whole:
        return _totals(counter, scanned, None)
    resume = None
    if scanned is not None and scanned.offset:
        resume = Resume(
            offset=scanned.offset,
            line=scanned.line,
            last_id=scanned.last_id.decode() if scanned.last_id is not None else None,
            seen_ids=frozenset(event_id.decode() for event_id in scanned.seen),
            session_id=None,
        )
    calls = count_calls(source, counter, resume)
    unreadable = calls.events == 0 and resume is None and bool(calls.damage)
    state = calls.state
    progress = None
    if state is not None:
        progress = store.Progress(
            end=state.end,
            next_line=state.next_line,
            last_id=state.last_id,
            session_id=state.session_id,
            clean=False,
            llm_calls=counter.llm_calls,
            subagent_calls=counter.subagent_calls,
            messages=counter.messages,
            damage=calls.damage,
            unreadable=unreadable,
        )
    return FileTotals(counter.llm_calls, counter.subagent_calls, calls.damage, unreadable, progress)


def _scan(
    source: Source,
    counter: CallCounter,
    start: int = 0,
    line: int = 1,
    last_id: str | None = None,
) -> Scanned | None:
    """:func:`scan_stream` of a file (None when it cannot be opened)."""
    assert source.path is not None
    try:
        with open_log(source.path) as stream:  # never blocks on a named pipe
            stream.seek(start)
            return scan_stream(stream, counter, start=start, line=line, last_id=last_id)
    except OSError:
        return None


def _totals(counter: CallCounter, scanned: Scanned, session_id: str | None) -> FileTotals:
    progress = store.Progress(
        end=scanned.offset,
        next_line=scanned.line,
        last_id=scanned.last_id.decode() if scanned.last_id is not None else None,
        session_id=session_id,
        clean=True,
        llm_calls=counter.llm_calls,
        subagent_calls=counter.subagent_calls,
        messages=counter.messages,
        damage=(),
        unreadable=False,
    )
    return FileTotals(counter.llm_calls, counter.subagent_calls, (), False, progress)


Job = tuple[Source, "store.Stamp | None", "store.Header | None"]
"""A file to count, its stamp before the count, and its entry when the file only grew."""


def _count_and_keep(jobs: Sequence[Job], use_cache: bool) -> list[FileTotals]:
    """Count each file (in a worker process when there are several) and write its entry."""
    results = []
    for source, stamp, since in jobs:
        totals = _count_one(source, since)
        if use_cache and stamp is not None and totals.progress is not None:
            store.write(source, stamp, totals.progress, None)
        results.append(totals)
    return results


def _count_one(source: Source, since: store.Header | None) -> FileTotals:
    try:
        return count_file(source, since=since)
    except Exception:  # from one log's content: the other files are still counted
        damage = ((0, "unprocessable", failed_on_session()),)
        return FileTotals(0, 0, damage, unreadable=True, progress=None)


@dataclass
class Scan:
    """The selection's totals, and the damage met on the way (file, line, kind, message)."""

    llm_calls: int = 0
    subagent_calls: int = 0
    damage: list[tuple[str, int, str, str]] = field(default_factory=list)
    unreadable: bool = False

    def add(self, source: Source, totals: FileTotals | store.Header) -> None:
        self.llm_calls += totals.llm_calls
        self.subagent_calls += totals.subagent_calls
        self.damage.extend((source.name, line, kind, text) for line, kind, text in totals.damage)
        self.unreadable = self.unreadable or totals.unreadable


def scan_sources(sources: Iterable[Source], *, use_cache: bool = True) -> Scan:
    """Totals of every source: from the store, scanned, or read in full, whichever each file
    allows; what was counted is written to the store (unless ``use_cache`` is false)."""
    scan = Scan()
    jobs: list[Job] = []
    for source in sources:
        found = store.find(source) if use_cache else store.Found(store.State.MISS, None)
        if found.state is store.State.FRESH and found.header is not None:
            scan.add(source, found.header)
            continue
        since = found.header if found.state is store.State.GROWN else None
        jobs.append((source, found.stamp, since))
    sizes = [_to_read(source, since) for source, _, since in jobs]
    for (source, _, _), totals in zip(jobs, _run(jobs, sizes, use_cache), strict=True):
        scan.add(source, totals)
    if use_cache and jobs:
        store.prune()
    return scan


def _to_read(source: Source, since: store.Header | None) -> int:
    return source.size - (since.end if since is not None else 0)


def _run(jobs: list[Job], sizes: list[int], use_cache: bool) -> list[FileTotals]:
    plan = pool_store.plan(sum(sizes), frames=False)
    if plan.workers < 2 or any(source.path is None for source, _, _ in jobs):
        return _count_and_keep(jobs, use_cache)
    batches = pool_store.balance(jobs, sizes, plan.workers * 4)
    order = {id(job): index for index, job in enumerate(jobs)}
    results: list[FileTotals | None] = [None] * len(jobs)
    with pool_store.executor(plan.workers, frames=False) as pool:
        futures = [pool.submit(_count_and_keep, batch, use_cache) for batch in batches]
        for batch, future in zip(batches, futures, strict=True):
            for job, total in zip(batch, future.result(), strict=True):
                results[order[id(job)]] = total
    return [total for total in results if total is not None]
