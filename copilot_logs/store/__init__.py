"""The store: one entry per source log, holding what the commands need of it (docs/cache.md).

A warm run reads one header per log: each log is looked up once (:func:`look_up`), the logs
whose entry holds the command's value are answered from the headers alone
(:func:`copilot_logs.store.collect.recall`), the others read through :func:`read` and their
entries written with the command's value (:func:`keep`). Only files copilot-logs wrote are ever
deleted (:func:`prune`, ``cache clear``), each known by its name, first bytes, owner and being a
regular file; the entries of logs that are gone are found at most once a day.
"""

from __future__ import annotations

import io
import os
import stat
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from copilot_logs.ingest.calls import CALL_TYPES, CallCounter, Figures
from copilot_logs.ingest.cli_format import writer
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadState
from copilot_logs.store import trust
from copilot_logs.store.entry import (
    DIAGNOSTIC_COLUMNS,
    ENTRY_NAME,
    HEAD_READ,
    MAGIC,
    MAX_HEADER_BYTES,
    PREFIX,
    TEMPORARY_NAME,
    VERSION,
    Found,
    Header,
    Result,
    Rows,
    Stamp,
    State,
    code_stamp,
    crc_to_keep,
    describe,
    diagnostics_of,
    encode,
    entry_path,
    find,
    hashes,
    is_ours,
    no_gc,
    replace,
    result,
    split_rows,
    stamp_of,
)
from copilot_logs.store.trust import (
    NOFOLLOW,
    NONBLOCK,
    folder,
    open_entry,
    private_folder,
    refusal,
    refused,
    take_notice,
    usable,
)

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult


MAX_MB_VARIABLE = "COPILOT_LOGS_CACHE_MAX_MB"
DEFAULT_MAX_MB = 2048
STALE_TEMPORARY_S = 3600  # older, a temporary file was left by a run that died mid-write
SWEEP_INTERVAL_S = 86400  # how often prune reads the headers to find the logs that are gone
SWEPT = ".last-sweep"  # an empty file: its modification time is the last sweep's


def max_bytes() -> int:
    try:
        megabytes = int(os.environ.get(MAX_MB_VARIABLE, DEFAULT_MAX_MB))
    except ValueError:
        megabytes = DEFAULT_MAX_MB
    return max(0, megabytes) << 20


@dataclass(frozen=True)
class Held:
    """A file of ours in the store folder (from its ``lstat``, never opened)."""

    name: str
    size: int
    mtime: float


def prune(limit: int | None = None) -> None:
    """Delete the temporary files left by a run that died, the entries of logs that are gone
    (at most once a day), then the oldest entries until the store is under ``limit``
    (:func:`max_bytes`)."""
    limit = max_bytes() if limit is None else limit
    where = usable()
    if where is None:
        return
    now = time.time()
    held = _held(where)
    for item in held:
        if TEMPORARY_NAME.fullmatch(item.name) and now - item.mtime > STALE_TEMPORARY_S:
            _remove(where, item.name)
    entries = [item for item in held if ENTRY_NAME.fullmatch(item.name)]
    if _sweep_due(where, now):
        entries = [
            item for item in entries if not (_gone(where, item) and _remove(where, item.name))
        ]
    total = sum(item.size for item in entries)
    for item in sorted(entries, key=lambda item: item.mtime):
        if total <= limit:
            break
        if _remove(where, item.name):
            total -= item.size


def _held(where: str) -> list[Held]:
    found: list[Held] = []
    try:
        with os.scandir(where) as listing:
            for item in listing:
                if not is_ours(item.name, MAGIC) and item.name != SWEPT:
                    continue  # by name alone: the first bytes are read only before deleting
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and refusal(info) is None:
                    found.append(Held(item.name, info.st_size, info.st_mtime))
    except OSError:
        pass
    return found


def _first_bytes(path: str, count: int) -> bytes | None:
    """The first bytes of a regular file of ours; None for anything else."""
    descriptor = open_entry(path)
    if descriptor is None:
        return None
    try:
        return os.read(descriptor, count)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _remove(where: str, name: str) -> bool:
    path = os.path.join(where, name)
    start = _first_bytes(path, len(MAGIC))
    if start is None or not (is_ours(name, start) or (name == SWEPT and start == b"")):
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _sweep_due(where: str, now: float) -> bool:
    """Whether the last sweep is a day old (and if so, the sweep is marked done now)."""
    marker = os.path.join(where, SWEPT)
    try:
        last = os.lstat(marker).st_mtime
    except FileNotFoundError:
        last = None
    except OSError:
        return False
    if last is not None and 0 <= now - last < SWEEP_INTERVAL_S:
        return False
    try:
        descriptor = os.open(marker, os.O_WRONLY | os.O_CREAT | NOFOLLOW | NONBLOCK, 0o600)
        try:
            os.utime(descriptor)
        finally:
            os.close(descriptor)
    except OSError:
        return False  # not marked: no sweep, or the store would be swept on every run
    return True


class _Log(msgspec.Struct, frozen=True):
    path: str  # the one field of a header that every version of the store writes


_LOG = msgspec.msgpack.Decoder(_Log)


def _gone(where: str, item: Held) -> bool:
    """Whether the entry's log is gone (or the entry is damaged beyond telling whose it is).
    An entry of another version that cannot be read is kept: its log may exist."""
    path = os.path.join(where, item.name)
    start = _first_bytes(path, HEAD_READ)
    if start is None or len(start) < PREFIX.size:
        return start is not None
    magic, length, _ = PREFIX.unpack_from(start)
    if PREFIX.size + length > len(start) and length <= MAX_HEADER_BYTES:
        start = _first_bytes(path, PREFIX.size + length) or start
    raw = start[PREFIX.size : PREFIX.size + length]
    try:
        log = _LOG.decode(raw).path
    except (msgspec.DecodeError, msgspec.ValidationError):
        return bool(magic == MAGIC)  # an entry of this version, damaged: no one can use it
    return not os.path.exists(log)


@dataclass(frozen=True)
class Info:
    path: Path
    entries: int
    bytes: int
    trusted: bool = True  # False: not the user's own, not used, nothing in it counted


def info() -> Info:
    where = usable()
    if where is None:
        return Info(folder(), 0, 0, trusted=refused() is None)
    held = _held(where)
    entries = sum(1 for item in held if ENTRY_NAME.fullmatch(item.name))
    return Info(Path(where), entries, sum(item.size for item in held))


@dataclass(frozen=True)
class Cleared:
    """What ``cache clear`` removed, and the files of ours it could not remove."""

    entries: int
    bytes: int
    failed: list[str] = field(default_factory=list)
    trusted: bool = True


def clear() -> Cleared:
    """Delete what copilot-logs wrote in the store, then the store's folders when that leaves
    them empty; nothing in a store that is not the user's own."""
    where = usable()
    if where is None:
        return Cleared(0, 0, trusted=refused() is None)
    entries = size = 0
    failed: list[str] = []
    for item in _held(where):
        if not _remove(where, item.name):
            failed.append(os.path.join(where, item.name))
            continue
        size += item.size
        entries += bool(ENTRY_NAME.fullmatch(item.name))
    for empty in (where, os.path.dirname(where)):
        try:
            os.rmdir(empty)
        except OSError:
            break  # something else is there, which is not ours to remove
    return Cleared(entries, size, failed)


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
    """Each source's entry and what to do with it (the folder checked again first)."""
    trust.recheck()
    with no_gc():
        return [find(source) for source in sources]


def figures_of(result: ReadResult) -> Figures:
    """``count --total``'s figures of one log's frames, by the one kernel."""
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
    """Write the entry of a log read at ``stamp`` as far as ``state`` (``events_ipc``: its
    events frame's IPC when the caller has it; ``found``: its lookup before it was read); False
    when it cannot be written (the next run reads the log again)."""
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


def _ipc(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="lz4")
    return buffer.getvalue()


def load_frames(source: Source, found: Found) -> ReadResult | None:
    """The frames an entry holds (under the caller's name for the file), when whole."""
    loaded = _load_events(source, found)
    return loaded[0] if loaded is not None else None


def seen_ids(source: Source, found: Found) -> frozenset[str] | None:
    """The event ids an entry without frames keeps (a read going on from it drops a replayed
    line as a whole read would), when whole."""
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
    descriptor = open_entry(entry_path(source.path))
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
    found: Found | None = None  # the entry served (None: read now, the entry to write)
    events_ipc: bytes | None = None  # the served entry's, written again as it is
    looked: Found | None = None  # the log's lookup, when it was read now


Parse = Callable[
    [Sequence[tuple[Source, ReadState | None]]], tuple["ReadResult", list[ReadState | None]]
]  # how logs are read: the reader's ``read_many``, or a caller's wrapper around it

Job = tuple[Source, ReadState | None, Found, "ReadResult | None"]


def read(
    sources: Sequence[Source],
    parse: Parse | None = None,
    found: Sequence[Found] | None = None,
) -> tuple[ReadResult, list[Pending]]:
    """Every source's frames: from its entry when the log is unchanged, read on from where the
    entry stopped when it only grew, read whole otherwise (by ``parse``, else ``read_many``);
    and the entries to write (pass them to :func:`keep`)."""
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
    """Read the jobs' logs, grown ones on from where their entry stopped (every byte read before
    proved unchanged, going on reads what a whole read would: tests/test_store.py holds it)."""
    from copilot_logs.ingest.reader import ReadResult, read_many

    if not jobs:
        return [], []
    parsed, states = (parse or read_many)([(source, resume) for source, resume, _, _ in jobs])
    events = _by_file(parsed.events)
    diagnostics = _by_file(parsed.diagnostics)
    done: list[ReadResult] = []
    pending: list[Pending] = []
    for (source, _, found, cached), state in zip(jobs, states, strict=True):
        mine = ReadResult(
            events.get(source.name, parsed.events.clear()),
            diagnostics.get(source.name, parsed.diagnostics.clear()),
        )
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
    frames = value if isinstance(value, tuple) else (value,)
    split = [split_rows(frame) for frame in frames]
    if not split or any(part is None for part in split):
        return None
    return [part for part in split if part is not None]


def _by_file(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    return {str(key[0]): part for key, part in frame.partition_by("file", as_dict=True).items()}
