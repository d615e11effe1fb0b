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
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from copilot_logs.cache import JsonCache
from copilot_logs.envelope import DATA_KEY, ENVELOPE_TAIL, EVENT_START, TAIL_WINDOW, Source, as_int
from copilot_logs.parallel import balance, worker_count

PARALLEL_BYTES = 32 << 20
"""Below this much input, starting worker processes costs more than it saves."""


@dataclass(frozen=True)
class FileTotals:
    llm_calls: int
    subagent_calls: int
    end: int
    """Bytes scanned: the whole file, which ends with a newline."""
    last_id: str | None


SCAN_BLOCK = 8 << 20
_TURN_START = b"assistant.turn_start"
_MESSAGE = b"assistant.message"


def scan_stream(
    stream: BinaryIO, *, start: int = 0, last_id: str | None = None
) -> FileTotals | None:
    """Main-agent turn starts and sub-agent LLM calls of a stream, or None when some line
    needs the full reader. ``start``/``last_id`` continue a scan where an earlier one ended.

    Lines are checked in place in the read buffer (no copy per line). The parentId chain
    check also catches replayed lines: a replay's parentId is never the id just before it.
    Payload bytes are not checked as UTF-8: a bad byte inside a string changes no count (the
    full reader keeps that event too) and `validate` reports it.
    """
    llm_calls = subagent_calls = 0
    previous = last_id.encode() if last_id is not None else None
    buffer = bytearray()
    consumed = start
    while block := stream.read(SCAN_BLOCK):
        buffer += block
        position = 0
        while (newline := buffer.find(b"\n", position)) != -1:
            if not buffer.startswith(EVENT_START, position):
                return None
            type_end = buffer.find(b'"', position + 9, newline)
            if type_end < 0 or not buffer.startswith(DATA_KEY, type_end):
                return None
            tail = ENVELOPE_TAIL.search(buffer, max(position, newline - TAIL_WINDOW), newline)
            if tail is None:
                return None
            agent_id, event_id, _stamp, parent_id = tail.groups()
            if parent_id != previous or not event_id:
                return None
            kind = buffer[position + 9 : type_end]
            if kind == _TURN_START:
                if agent_id is None:
                    llm_calls += 1
            elif kind == _MESSAGE and agent_id is not None:
                data = orjson.loads(buffer[position:newline]).get("data")
                # One call per LLM call: later chunks of a message are not new calls.
                if as_int(data.get("chunkIndex") if isinstance(data, dict) else None) in (None, 0):
                    subagent_calls += 1
            previous = event_id
            position = newline + 1
        consumed += position
        del buffer[:position]
    if buffer:
        return None  # a last line with no newline: cut off, or still being written
    return FileTotals(
        llm_calls, subagent_calls, consumed, previous.decode() if previous is not None else None
    )


def scan_file(path: Path, *, start: int = 0, last_id: str | None = None) -> FileTotals | None:
    try:
        with path.open("rb") as stream:
            stream.seek(start)
            return scan_stream(stream, start=start, last_id=last_id)
    except OSError:
        return None


def _scan_many(paths: Sequence[tuple[str, int, str | None]]) -> list[FileTotals | None]:
    return [scan_file(Path(p), start=start, last_id=last) for p, start, last in paths]


def _can_fork() -> bool:
    """Forking is safe only before polars starts its threads; on this path it is not imported."""
    return "polars" not in sys.modules


def _run(jobs: list[tuple[str, int, str | None]], sizes: list[int]) -> list[FileTotals | None]:
    workers = worker_count(len(jobs))
    if workers < 2 or sum(sizes) < PARALLEL_BYTES or not _can_fork():
        return _scan_many(jobs)
    batches = balance(jobs, sizes, workers * 4)
    order = {job: index for index, job in enumerate(jobs)}
    results: list[FileTotals | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        for batch, totals in zip(batches, pool.map(_scan_many, batches), strict=True):
            for job, total in zip(batch, totals, strict=True):
                results[order[job]] = total
    return results


@dataclass
class Scan:
    """What the fast path counted, and the sources it left to the full reader."""

    llm_calls: int
    subagent_calls: int
    left: list[Source]


def scan_sources(sources: Iterable[Source], *, use_cache: bool = True) -> Scan:
    """Count every source the envelopes vouch for; return the rest for the full reader."""
    cache = JsonCache("totals") if use_cache else None
    scan = Scan(0, 0, [])
    jobs: list[tuple[str, int, str | None]] = []
    sizes: list[int] = []
    stamps: list[tuple[Source, str, int, int, dict[str, Any] | None]] = []
    for source in sources:
        if source.path is None:
            scan.left.append(source)
            continue
        stamp = JsonCache.stamp(source.path)
        if stamp is None:
            scan.left.append(source)
            continue
        key, size, mtime = stamp
        previous = cache.previous(key) if cache else None
        if previous and previous["size"] == size and previous["mtime_ns"] == mtime:
            scan.llm_calls += previous["llm_calls"]
            scan.subagent_calls += previous["subagent_calls"]
            continue
        grew = previous is not None and previous["size"] < size
        start, last = (previous["size"], previous["last_id"]) if grew and previous else (0, None)
        jobs.append((str(source.path), start, last))
        sizes.append(size - start)
        stamps.append((source, key, size, mtime, previous if grew else None))
    for (source, key, size, mtime, previous), totals in zip(stamps, _run(jobs, sizes), strict=True):
        if totals is None and previous is not None:
            # The new bytes do not continue the cached part: read the whole file again.
            totals = scan_file(source.path) if source.path else None
            previous = None
        if totals is None:
            scan.left.append(source)
            continue
        llm_calls = totals.llm_calls + (previous["llm_calls"] if previous else 0)
        subagent_calls = totals.subagent_calls + (previous["subagent_calls"] if previous else 0)
        scan.llm_calls += llm_calls
        scan.subagent_calls += subagent_calls
        if cache is not None and totals.end == size:
            cache.put(
                key,
                size,
                mtime,
                llm_calls=llm_calls,
                subagent_calls=subagent_calls,
                last_id=totals.last_id,
            )
    if cache is not None:
        cache.save()
    return scan
