"""The store: one entry per source log, holding what the commands need of it (docs/cache.md).

A warm run reads one header per log: each log is looked up once (:func:`look_up`), the logs
whose entry holds the command's value are answered from the headers alone (:func:`recall`), and
the others are read through :func:`read` and their entries written with the command's value
(:func:`keep`). The format is :mod:`~copilot_logs.store.entry`, the key
:mod:`~copilot_logs.store.key`, whose store it is :mod:`~copilot_logs.store.trust`, pruning
:mod:`~copilot_logs.store.upkeep`.
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from copilot_logs.ingest.calls import CALL_TYPES, CallCounter
from copilot_logs.ingest.decode.cli_format import writer
from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.progress import Figures, ReadState
from copilot_logs.store import trust
from copilot_logs.store.entry import (
    MAGIC,
    PREFIX,
    VERSION,
    Header,
    Result,
    Rows,
    Stamp,
    code_stamp,
    encode,
    entry_path,
    replace,
    result,
)
from copilot_logs.store.key import Found, State, crc_to_keep, find, hashes, no_gc, stamp_of
from copilot_logs.store.rows import DIAGNOSTIC_COLUMNS, describe, diagnostics_of, split_rows
from copilot_logs.store.trust import folder, private_folder, take_notice
from copilot_logs.store.upkeep import (
    DEFAULT_MAX_MB,
    MAX_MB_VARIABLE,
    Cleared,
    Info,
    clear,
    info,
    max_bytes,
    prune,
)

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult

__all__ = [  # what the rest of copilot-logs uses of the store's modules, under one name
    "DEFAULT_MAX_MB",
    "MAGIC",
    "MAX_MB_VARIABLE",
    "PREFIX",
    "VERSION",
    "Cleared",
    "Found",
    "Header",
    "Info",
    "Pending",
    "Stamp",
    "State",
    "clear",
    "code_stamp",
    "describe",
    "entry_path",
    "figures_of",
    "find",
    "folder",
    "info",
    "keep",
    "load_frames",
    "look_up",
    "max_bytes",
    "prune",
    "read",
    "seen_ids",
    "stamp_of",
    "take_notice",
    "write",
]


def look_up(sources: Sequence[Source]) -> list[Found]:
    """Each source's entry and what to do with it (one lookup per log and run)."""
    trust.recheck()  # the folder is checked once per lookup, before the first entry is opened
    with no_gc():
        return [find(source) for source in sources]


def figures_of(result: ReadResult) -> Figures:
    """The figures of one log's frames, counted by the one kernel."""
    import polars as pl

    events, diagnostics = result.events, result.diagnostics
    counter = CallCounter()
    candidates = events.filter(pl.col("type").is_in(list(CALL_TYPES))).select(
        "type", "agent_id", "parent_tool_call_id", "message_id", "chunk_index"
    )
    for kind, agent_id, parent, message_id, chunk_index in candidates.iter_rows():
        counter.add(kind, writer(agent_id, parent), message_id, chunk_index)
    columns = ("line", "kind", "message", "more_lines", "new_lines")
    damage = diagnostics.sort("line").select(columns).rows()
    return counter.figures(damage, unreadable=events.height == 0 and bool(damage))


def write(
    source: Source,
    stamp: Stamp,
    state: ReadState,
    figures: Figures,
    frames: ReadResult | None,
    results: Iterable[Result] = (),
    *,
    events_ipc: bytes | None = None,
    where: Path | None = None,
    found: Found | None = None,
) -> bool:
    """Write the entry of a log read at ``stamp`` as far as ``state``, with its ``figures``
    (its events frame as ``events_ipc`` when the caller has its IPC already; ``found``, the
    log's lookup before it was read); False when it cannot be written (the store is a cache:
    the next run reads the log again). The log is clean, so that a read may go on from
    ``state`` when it grows, when it was read to its end (a last line with its newline) without
    damage."""
    if source.path is None:
        return False
    windows = hashes(source.path, state.end)
    crc = crc_to_keep(source.path, found, state.end)
    if windows is None or stamp_of(Path(source.path)) != stamp:
        return False  # changed while it was read: these bytes may not be the ones read
    shape, ids, diagnostics = None, None, []
    if frames is not None:
        body = events_ipc if events_ipc is not None else _ipc(frames.events)
        shape = (len(body), zlib.crc32(body), frames.events.height)
        diagnostics = frames.diagnostics.select(DIAGNOSTIC_COLUMNS).rows()
    else:  # the ids the frames would hold, for a read that goes on from here
        body = _ENCODER.encode(state.seen_ids)
        ids = (len(body), zlib.crc32(body))
    header = Header(
        version=VERSION,
        code=code_stamp(),
        path=os.path.abspath(source.path),
        stamp=stamp,
        read=msgspec.structs.replace(state, seen_ids=frozenset()),
        head=windows[0],
        tail=windows[1],
        crc=crc,
        clean=not figures.damage and state.end == stamp.size,
        figures=figures,
        body=shape,
        ids=ids,
        diagnostics=diagnostics,
        results=sorted(results, key=lambda result: result.key) if frames is not None else [],
    )
    return replace(entry_path(source.path), encode(header, body), where)


def _ipc(frame: object) -> bytes:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="lz4")
    return buffer.getvalue()


def load_frames(source: Source, found: Found) -> ReadResult | None:
    """The frames an entry holds, under the caller's name for the file; None when the entry
    has none or they are not whole."""
    loaded = _load_events(source, found)
    return loaded[0] if loaded is not None else None


def seen_ids(source: Source, found: Found) -> frozenset[str] | None:
    """The event ids an entry without frames keeps (a read going on from it drops a replayed
    line as a whole read would); None when it keeps none, or they are not whole."""
    header = found.header
    if header is None or header.ids is None:
        return None
    raw = _body(source, found, *header.ids)
    if raw is None:
        return None
    try:
        return _IDS.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


_ENCODER = msgspec.msgpack.Encoder()
_IDS = msgspec.msgpack.Decoder(frozenset[str])


def _body(source: Source, found: Found, length: int, crc: int) -> bytes | None:
    """The body of a source's entry, when it is whole (``length`` bytes of CRC-32 ``crc``)."""
    if source.path is None:
        return None
    descriptor = trust.open_entry(entry_path(source.path))
    if descriptor is None:
        return None
    try:
        with os.fdopen(descriptor, "rb") as stream:
            stream.seek(found.body_at)
            body = stream.read(length)
    except OSError:
        return None
    return body if len(body) == length and zlib.crc32(body) == crc else None


def _load_events(source: Source, found: Found) -> tuple[ReadResult, bytes] | None:
    """The frames an entry holds and the IPC of its events (to write the entry again)."""
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult
    from copilot_logs.ingest.schema import EVENTS_SCHEMA

    header = found.header
    if header is None or header.body is None:
        return None
    length, crc, rows = header.body
    body = _body(source, found, length, crc)
    if body is None:
        return None
    try:
        events = pl.read_ipc(io.BytesIO(body))
    except (OSError, pl.exceptions.PolarsError):
        return None
    if events.schema != EVENTS_SCHEMA or events.height != rows:
        return None
    name = pl.lit(source.name, dtype=pl.String)
    diagnostics = diagnostics_of([(source.name, header)])
    return ReadResult(events.with_columns(file=name), diagnostics), body


@dataclass
class Pending:
    """An entry to write once the command's value for the batch is known (see :func:`keep`)."""

    source: Source
    stamp: Stamp
    state: ReadState
    figures: Figures
    frames: ReadResult
    found: Found | None = None
    """The entry that was served (None: the log was read now, so the entry must be written)."""
    events_ipc: bytes | None = None
    """The served entry's events IPC, written again as it is."""
    looked: Found | None = None
    """The log's lookup, when it was read now."""


Parse = Callable[
    [Sequence[tuple[Source, ReadState | None]]], tuple["ReadResult", list[ReadState | None]]
]
"""How logs are read (the reader's ``read_many``, or a caller's wrapper around it)."""

Job = tuple[Source, ReadState | None, Found, "ReadResult | None"]


def read(
    sources: Sequence[Source],
    parse: Parse | None = None,
    found: Sequence[Found] | None = None,
) -> tuple[ReadResult, list[Pending]]:
    """Every source's frames: from its entry when the log is unchanged, read from where the
    entry stopped when it only grew, read whole otherwise (by ``parse``, the reader's
    ``read_many`` by default); and the entries to write (pass them to :func:`keep`).
    ``found`` is each source's :func:`look_up` when the caller has it."""
    from copilot_logs.ingest.reader import ReadResult

    served: list[ReadResult] = []
    pending: list[Pending] = []
    jobs: list[Job] = []
    for source, looked in zip(sources, found or look_up(sources), strict=True):
        loaded = _load_events(source, looked) if looked.state is not State.MISS else None
        header = looked.header
        if loaded is None or header is None:
            jobs.append((source, None, looked, None))
        elif looked.state is State.FRESH:
            cached, ipc = loaded
            served.append(cached)
            if looked.stamp is not None:
                pending.append(
                    Pending(source, looked.stamp, header.read, header.figures, cached, looked, ipc)
                )
        else:
            cached = loaded[0]
            seen = frozenset(cached.events["event_id"].drop_nulls().to_list())
            resume = msgspec.structs.replace(header.read, seen_ids=seen)
            jobs.append((source, resume, looked, cached))
    read_now, written = _read(jobs, parse)
    return ReadResult.concat([*served, *read_now]), pending + written


def _read(jobs: list[Job], parse: Parse | None) -> tuple[list[ReadResult], list[Pending]]:
    """Read the jobs' logs, grown ones from where their entry stopped (the growth check
    proved every byte read before unchanged, so the reader going on with its state there reads
    what a whole read would, whatever the new lines are: tests/test_store.py holds it)."""
    from copilot_logs.ingest.reader import ReadResult, read_many

    if not jobs:
        return [], []
    parsed, states = (parse or read_many)([(source, resume) for source, resume, _, _ in jobs])
    events = _by_file(parsed.events)
    diagnostics = _by_file(parsed.diagnostics)
    done: list[ReadResult] = []
    pending: list[Pending] = []
    for (source, _, found, cached), state in zip(jobs, states, strict=True):
        mine = _part(events, diagnostics, source.name, parsed)
        if cached is not None:
            mine = ReadResult.concat([cached, mine])
        done.append(mine)
        if found.stamp is not None and state is not None:
            figures = figures_of(mine)
            pending.append(Pending(source, found.stamp, state, figures, mine, looked=found))
    return done, pending


def keep(pending: list[Pending], key: str | None = None, value: object = None) -> None:
    """Write the pending entries, each with its rows of ``value`` (what the function described
    by ``key`` computed from the batch's frames) when the value splits by file."""
    split = _split(value) if key is not None else None
    where = private_folder() if pending else None
    if where is None:
        return
    for item in pending:
        found = item.found
        if found is not None and (split is None or found.header is None):
            continue  # served as it is: nothing new to keep
        results = {r.key: r for r in found.header.results} if found and found.header else {}
        if split is not None and key is not None:
            rows = [by_file.get(item.source.name, empty) for empty, by_file in split]
            results[key] = result(key, isinstance(value, tuple), rows)
        write(
            item.source,
            item.stamp,
            item.state,
            item.figures,
            item.frames,
            results.values(),
            events_ipc=item.events_ipc,
            where=where,
            found=item.found or item.looked,
        )


def _split(value: object) -> list[tuple[Rows, dict[str, Rows]]] | None:
    """Each frame of a command's value, split by log (None: the value does not split)."""
    frames = value if isinstance(value, tuple) else (value,)
    split = [split_rows(frame) for frame in frames]
    if not split or any(part is None for part in split):
        return None
    return [part for part in split if part is not None]


def _by_file(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    return {str(key[0]): part for key, part in frame.partition_by("file", as_dict=True).items()}


def _part(
    events: dict[str, pl.DataFrame],
    diagnostics: dict[str, pl.DataFrame],
    name: str,
    parsed: ReadResult,
) -> ReadResult:
    from copilot_logs.ingest.reader import ReadResult

    return ReadResult(
        events.get(name, parsed.events.clear()), diagnostics.get(name, parsed.diagnostics.clear())
    )
