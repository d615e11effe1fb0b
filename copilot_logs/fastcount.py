"""``count --total`` from envelopes alone: exact, at close to the speed of reading the bytes.

Only the envelope of each line is looked at (see :mod:`copilot_logs.envelope`); a sub-agent's
``assistant.message`` is decoded for its chunkIndex. The first line the envelope cannot vouch
for (any damage, a broken parentId chain, a replayed line, a cut last line) stops the scan:
that file is left to the full reader, which recovers and reports what it can. So a file is
either counted here exactly as the full reader would count it, or not counted here at all.
No polars is imported on this path.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from copilot_logs.cache import JsonCache
from copilot_logs.envelope import (
    ENVELOPE_HEAD,
    ENVELOPE_TAIL,
    TAIL_WINDOW,
    Source,
    new_subagent_call,
)
from copilot_logs.errors import failed_on_session
from copilot_logs.logfile import open_log
from copilot_logs.parallel import balance, worker_count
from copilot_logs.reader import Resume, count_calls

PARALLEL_BYTES = 32 << 20
"""Below this much input, starting worker processes costs more than it saves."""


Damage = tuple[tuple[int, str, str], ...]
"""(line, kind, message) of each damaged line the full reader reported."""


@dataclass(frozen=True)
class FileTotals:
    llm_calls: int
    subagent_calls: int
    end: int
    """Bytes scanned: the whole file, which ends with a newline (-1 after a full read)."""
    last_id: str | None
    damage: Damage = ()
    unreadable: bool = False
    """Nothing could be read: no event at all, only damage."""
    start: int = 0
    """Where the counted bytes began: after an earlier scan's end when the file only grew."""


@dataclass
class Stopped:
    """Where a scan met a line it cannot vouch for, and what it had counted before it: the
    full reader goes on from there (with the ids seen, so a replayed line is still caught)."""

    llm_calls: int
    subagent_calls: int
    offset: int
    line: int
    last_id: bytes | None
    seen: set[bytes]
    calls: set[tuple[str, str]]


SCAN_BLOCK = 8 << 20
_TURN_START = b"assistant.turn_start"
_MESSAGE = b"assistant.message"


def scan_stream(
    stream: BinaryIO, *, start: int = 0, last_id: str | None = None
) -> FileTotals | Stopped:
    """Main-agent turn starts and sub-agent LLM calls of a stream, or where it stopped at a
    line that needs the full reader. ``start``/``last_id`` continue a scan where an earlier
    one ended.

    Lines are checked in place in the read buffer (no copy per line). The parentId chain
    check also catches replayed lines: a replay's parentId is never the id just before it.
    Payload bytes are not checked as UTF-8: a bad byte inside a string changes no count (the
    full reader keeps that event too) and `validate` reports it.
    """
    llm_calls = subagent_calls = 0
    calls: set[tuple[str, str]] = set()
    seen: set[bytes] = set()
    previous = last_id.encode() if last_id is not None else None
    buffer = bytearray()
    consumed = start
    lines = 0
    head, tail_of, remember = ENVELOPE_HEAD.match, ENVELOPE_TAIL.search, seen.add

    def stopped(at: int) -> Stopped:
        return Stopped(llm_calls, subagent_calls, at, lines + 1, previous, seen, calls)

    while block := stream.read(SCAN_BLOCK):
        buffer += block
        position = 0
        find = buffer.find
        while (newline := find(b"\n", position)) != -1:
            shape = head(buffer, position, newline)
            if shape is None:
                return stopped(consumed + position)
            window = newline - TAIL_WINDOW
            tail = tail_of(buffer, window if window > position else position, newline)
            if tail is None:
                return stopped(consumed + position)
            agent_id, event_id, _stamp, parent_id = tail.groups()
            if parent_id != previous or not event_id:
                return stopped(consumed + position)
            kind = shape.group(1)
            if kind == _TURN_START:
                if agent_id is None:
                    llm_calls += 1
            elif kind == _MESSAGE and agent_id is not None:
                data = orjson.loads(buffer[position:newline]).get("data")
                data = data if isinstance(data, dict) else {}
                if new_subagent_call(
                    agent_id.decode(), data.get("messageId"), data.get("chunkIndex"), calls
                ):
                    subagent_calls += 1
            remember(event_id)
            previous = event_id
            position = newline + 1
            lines += 1
        consumed += position
        del buffer[:position]
    if buffer or consumed == 0:
        # A last line with no newline (cut off, or still being written), or an empty file.
        return stopped(consumed)
    return FileTotals(
        llm_calls,
        subagent_calls,
        consumed,
        previous.decode() if previous is not None else None,
        start=start,
    )


def scan_file(
    path: Path, *, start: int = 0, last_id: str | None = None
) -> FileTotals | Stopped | None:
    """:func:`scan_stream` of a file (None when it cannot be opened)."""
    try:
        with open_log(path) as stream:  # never blocks on a named pipe
            stream.seek(start)
            return scan_stream(stream, start=start, last_id=last_id)
    except OSError:
        return None


def count_file(source: Source, *, start: int = 0, last_id: str | None = None) -> FileTotals:
    """A file's totals: by the envelope scan as far as it vouches for the lines (continuing
    from ``start`` when given), and by the full reader, which recovers and reports damage,
    from the first line it does not."""
    scanned = scan_file(source.path, start=start, last_id=last_id) if source.path else None
    if isinstance(scanned, Stopped) and start:
        scanned = scan_file(source.path) if source.path else None  # read it all again
    if isinstance(scanned, FileTotals):
        return scanned
    if scanned is None or scanned.offset == 0:
        calls = count_calls(source)
        before = (0, 0)
    else:
        resume = Resume(
            offset=scanned.offset,
            line=scanned.line,
            last_id=scanned.last_id.decode() if scanned.last_id is not None else None,
            seen_ids=frozenset(event_id.decode() for event_id in scanned.seen),
            session_id=None,
        )
        calls = count_calls(source, resume, scanned.calls)
        before = (scanned.llm_calls, scanned.subagent_calls)
    return FileTotals(
        before[0] + calls.llm_calls,
        before[1] + calls.subagent_calls,
        -1,
        None,
        calls.damage,
        unreadable=calls.events == 0
        and (scanned is None or scanned.line == 1)
        and bool(calls.damage),
    )


Job = tuple[Source, int, "str | None"]


def _count_many(jobs: Sequence[Job]) -> list[FileTotals]:
    return [_count_one(*job) for job in jobs]


def _count_one(source: Source, start: int, last_id: str | None) -> FileTotals:
    try:
        return count_file(source, start=start, last_id=last_id)
    except Exception:  # from one log's content: the other files are still counted
        damage = ((0, "unprocessable", failed_on_session()),)
        return FileTotals(0, 0, -1, None, damage, unreadable=True)


def _can_fork() -> bool:
    """Forking is safe only before polars starts its threads; on this path it is not imported."""
    return "polars" not in sys.modules


def _run(jobs: list[Job], sizes: list[int]) -> list[FileTotals]:
    workers = worker_count(len(jobs))
    if workers < 2 or sum(sizes) < PARALLEL_BYTES or not _can_fork():
        return _count_many(jobs)
    batches = balance(jobs, sizes, workers * 4)
    order = {id(job): index for index, job in enumerate(jobs)}
    results: list[FileTotals | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        for batch, totals in zip(batches, pool.map(_count_many, batches), strict=True):
            for job, total in zip(batch, totals, strict=True):
                results[order[id(job)]] = total
    return [total for total in results if total is not None]


@dataclass
class Scan:
    """The selection's totals, and the damage met on the way (file, line, kind, message)."""

    llm_calls: int = 0
    subagent_calls: int = 0
    damage: list[tuple[str, int, str, str]] = field(default_factory=list)
    unreadable: bool = False


def scan_sources(sources: Iterable[Source], *, use_cache: bool = True) -> Scan:
    """Totals of every source: cached, scanned, or read in full, whichever each file allows.

    The cache keeps every file's totals and damage (keyed on size and mtime), so an unchanged
    file is not opened again; a clean file that only grew is scanned from where it ended.
    """
    cache = JsonCache("totals") if use_cache else None
    scan = Scan()
    jobs: list[Job] = []
    sizes: list[int] = []
    stamps: list[tuple[str, int, int, dict[str, Any] | None]] = []
    for source in sources:
        stamp = JsonCache.stamp(source.path) if source.path is not None else None
        key, size, mtime = stamp if stamp is not None else ("", 0, 0)
        previous = cache.previous(key) if cache is not None and stamp is not None else None
        if previous and previous["size"] == size and previous["mtime_ns"] == mtime:
            _add(scan, previous["llm_calls"], previous["subagent_calls"])
            _add_damage(scan, source, previous.get("damage", ()), previous.get("unreadable", False))
            continue
        grew = previous is not None and previous["end"] == previous["size"] < size
        start, last = (previous["size"], previous["last_id"]) if grew and previous else (0, None)
        jobs.append((source, start, last))
        sizes.append(size - start)
        stamps.append((key, size, mtime, previous if grew else None))
    for (source, _, _), (key, size, mtime, previous), totals in zip(
        jobs, stamps, _run(jobs, sizes), strict=True
    ):
        carried = previous if totals.start else None
        llm_calls = totals.llm_calls + (carried["llm_calls"] if carried else 0)
        subagent_calls = totals.subagent_calls + (carried["subagent_calls"] if carried else 0)
        _add(scan, llm_calls, subagent_calls)
        _add_damage(scan, source, totals.damage, totals.unreadable)
        if cache is not None and key:
            cache.put(
                key,
                size,
                mtime,
                llm_calls=llm_calls,
                subagent_calls=subagent_calls,
                end=totals.end,
                last_id=totals.last_id,
                damage=[list(item) for item in totals.damage],
                unreadable=totals.unreadable,
            )
    if cache is not None:
        cache.save()
    return scan


def _add(scan: Scan, llm_calls: int, subagent_calls: int) -> None:
    scan.llm_calls += llm_calls
    scan.subagent_calls += subagent_calls


def _add_damage(scan: Scan, source: Source, damage: Iterable[Any], unreadable: bool) -> None:
    scan.damage.extend((source.name, line, kind, message) for line, kind, message in damage)
    scan.unreadable = scan.unreadable or unreadable
