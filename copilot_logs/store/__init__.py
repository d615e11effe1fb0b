"""The store: one entry per source log, holding what the commands need of it.

An entry is one file, ``<hash of the log's path>.entry`` in the store folder (the user's cache
folder, see :func:`folder`), laid out as::

    magic (8 bytes) | header length (u32) | CRC-32 of the header (u32) | header | body

The header is JSON (decoded into typed fields by msgspec, never executed): the log's path, its
key (size, mtime_ns, inode, device, ctime_ns, and hashes of the bytes at its start and just
before the end of what was read), how far the read got (to go on when the file grows: the
offset, line, last id and session id), the file's ``count --total`` figures (LLM calls,
sub-agent calls, the sub-agent messageIds already counted, the damage to report), and the
lengths and CRC-32 of the body. The body, when present, is the file's events frame and
diagnostics frame in Arrow IPC. ``count --total`` reads only headers (it never imports polars);
the other commands read bodies. An entry written by ``count --total`` has no body: a command
that needs the frames reads the log and rewrites the entry whole.

The key fails closed: an entry is served only when every field of the key matches; a file
that only grew (same inode, longer, its first and last read bytes unchanged, and clean when
read) is read from where the entry stopped; anything else is read again. An entry that is
corrupt, foreign, or from another version of copilot-logs is ignored and rewritten, never
served. Entries are written to a temporary file in the store folder and renamed over the old
one, so concurrent runs never see half an entry and leave nothing behind; the folder is 0700
and the files 0600 (they hold previews of prompts). :func:`prune` removes the entries of logs
that are gone and keeps the store under :func:`max_bytes`.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import io
import os
import shutil
import struct
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from copilot_logs.ingest.calls import CallCounter, needs_payload
from copilot_logs.ingest.decode.envelope import Source

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult, ReadState, Resume

VERSION = 1
MAGIC = b"CLSTORE\x01"
PREFIX = struct.Struct("<8sII")
HASH_BYTES = 4096
"""Bytes hashed at the start of a log and just before the end of what was read."""
MAX_MB_VARIABLE = "COPILOT_LOGS_CACHE_MAX_MB"
DEFAULT_MAX_MB = 2048
STALE_TEMPORARY_S = 3600
"""A temporary file older than this was left by a run that died mid-write: prune deletes it."""

Count = Annotated[int, msgspec.Meta(ge=0)]


class Stamp(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``stat`` says of a log: any difference means the file changed."""

    size: Count
    mtime_ns: int
    ctime_ns: int
    inode: Count
    device: Count


class Header(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    code: str
    path: str
    stamp: Stamp
    end: Count
    """Bytes read: up to the last newline."""
    head: str
    tail: str
    next_line: Count
    last_id: str | None
    session_id: str | None
    clean: bool
    """No damage, and the file ended with a newline: a later read may go on from ``end``."""
    llm_calls: Count
    subagent_calls: Count
    messages: list[tuple[str, str]]
    damage: list[tuple[Count, str, str]]
    unreadable: bool
    body: tuple[Count, Count, Count, Count, Count] | None
    """The frames at the start of the body: events IPC length and CRC-32, diagnostics IPC
    length and CRC-32, events rows; None when the entry holds only the counts."""
    results: list[tuple[str, bool, list[tuple[Count, Count]]]]
    """What commands computed from the frames, after them in the body: the function's
    description, whether its value is a tuple of frames, and each frame's IPC length and
    CRC-32 (see :func:`recall`)."""


_DECODER = msgspec.json.Decoder(Header)
_ENCODER = msgspec.json.Encoder()


def folder() -> Path:
    """The store folder: ``copilot-logs/store`` in the user's cache folder (on Linux
    ``$XDG_CACHE_HOME``, else ``~/.cache``; the platform's cache folder elsewhere)."""
    return Path(_where())


def _where() -> str:
    get = os.environ.get
    return _folder(get("XDG_CACHE_HOME"), get("HOME"), get("LOCALAPPDATA"))


@functools.cache
def _folder(*environment: str | None) -> str:
    """:func:`folder` for the variables platformdirs reads (asked once per process)."""
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("copilot-logs", appauthor=False), "store")


def max_bytes() -> int:
    """The size cap: ``$COPILOT_LOGS_CACHE_MAX_MB`` megabytes (default 2048)."""
    try:
        megabytes = int(os.environ.get(MAX_MB_VARIABLE, DEFAULT_MAX_MB))
    except ValueError:
        megabytes = DEFAULT_MAX_MB
    return max(0, megabytes) << 20


_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def code_stamp() -> str:
    """A hash of the size and modification time of every module of copilot-logs: an entry is
    never served to code other than the code that wrote it (an upgrade, an edit)."""
    digest = hashlib.blake2b(f"{VERSION}".encode(), digest_size=16)
    for path in sorted(_PACKAGE.rglob("*.py")):
        info = path.stat()
        digest.update(f"\n{path.relative_to(_PACKAGE)}:{info.st_size}:{info.st_mtime_ns}".encode())
    return digest.hexdigest()


def describe(fn: Callable[..., Any]) -> str | None:
    """A stable text naming ``fn`` and its bound options, or None when it has none (a lambda,
    a closure, an option that has no stable text): such a function's values are not kept."""
    if isinstance(fn, functools.partial):
        inner = describe(fn.func)
        texts = [_stable(value) for value in fn.args]
        names = [""] * len(texts)
        for name, value in sorted(fn.keywords.items()):
            texts.append(_stable(value))
            names.append(f"{name}=")
        if inner is None or None in texts:
            return None
        return f"{inner}({', '.join(f'{n}{t}' for n, t in zip(names, texts, strict=True))})"
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not name or "<" in name:
        return None
    return f"{module}.{name}"


def _stable(value: object) -> str | None:
    """The text of an option value that is the same in every process (set order is not)."""
    if value is None:
        return "null"
    if isinstance(value, bool | int | float | str | date | datetime | timedelta):
        return repr(value)
    if isinstance(value, set | frozenset | tuple | list):
        items = [_stable(item) for item in value]
        if None in items:
            return None
        texts = [item for item in items if item is not None]
        if isinstance(value, set | frozenset):
            return "{" + ", ".join(sorted(texts)) + "}"
        return "[" + ", ".join(texts) + "]"
    return None


def entry_path(log: Path) -> Path:
    return Path(_entry_file(os.path.abspath(log)))


def _entry_file(absolute: str) -> str:
    name = hashlib.blake2b(absolute.encode(), digest_size=16).hexdigest()
    return os.path.join(_where(), name + ".entry")


def stamp_of(path: Path) -> Stamp | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def _hashes(path: str | Path, end: int) -> tuple[str, str] | None:
    """Hashes of the first bytes of the file and of the bytes just before ``end``."""
    try:
        with open(path, "rb", buffering=0) as stream:
            head = stream.read(min(end, HASH_BYTES))
            stream.seek(max(0, end - HASH_BYTES))
            tail = stream.read(min(end, HASH_BYTES))
    except OSError:
        return None
    if len(head) != min(end, HASH_BYTES) or len(tail) != min(end, HASH_BYTES):
        return None
    return (
        hashlib.blake2b(head, digest_size=16).hexdigest(),
        hashlib.blake2b(tail, digest_size=16).hexdigest(),
    )


class State(enum.Enum):
    FRESH = "fresh"
    """The log is as it was read: the entry is served."""
    GROWN = "grown"
    """Bytes were appended to a clean log: it is read from ``header.end``."""
    MISS = "miss"
    """No usable entry, or the log changed in any other way: it is read whole."""


@dataclass(frozen=True)
class Found:
    state: State
    stamp: Stamp | None
    """The log's stamp before it is read (None: it cannot be stat'ed)."""
    header: Header | None = None
    body_at: int = 0


def growth(header: Header, stamp: Stamp, path: str | Path) -> State:
    """The one growth check: is the log the one the entry was read from, longer, or neither?"""
    before = header.stamp
    same_file = before.inode == stamp.inode and before.device == stamp.device
    if not same_file or stamp.size < header.end:
        return State.MISS
    if stamp == before:
        state = State.FRESH
    elif header.clean and header.end == before.size and stamp.size > before.size:
        state = State.GROWN
    else:
        return State.MISS
    if _hashes(path, header.end) != (header.head, header.tail):
        return State.MISS
    return state


HEAD_READ = 16 << 10
"""Bytes read at once from the start of an entry: the header of almost every entry."""


def _load_header(entry: str | Path) -> tuple[Header, int] | None:
    """The header of an entry and where its body starts; None for anything but a whole, valid
    entry of this version of copilot-logs."""
    try:
        with open(entry, "rb", buffering=0) as stream:
            start = stream.read(HEAD_READ)
            if len(start) < PREFIX.size:
                return None
            magic, length, crc = PREFIX.unpack_from(start)
            if magic != MAGIC or length > 64 << 20:
                return None
            raw = start[PREFIX.size : PREFIX.size + length]
            if len(raw) < length:
                raw += stream.read(length - len(raw))
    except OSError:
        return None
    if len(raw) != length or zlib.crc32(raw) != crc:
        return None
    try:
        header = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if header.version != VERSION or header.code != code_stamp():
        return None
    return header, PREFIX.size + length


def find(source: Source) -> Found:
    """The entry of a source and what to do with it."""
    if source.path is None:
        return Found(State.MISS, None)
    path = os.fspath(source.path)
    try:
        info = os.stat(path)
    except OSError:
        return Found(State.MISS, None)
    stamp = Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
    absolute = os.path.abspath(path)
    if not absolute.isascii() and not _is_text(absolute):
        return Found(State.MISS, None)  # a name that is not UTF-8 is no key (never stored)
    loaded = _load_header(_entry_file(absolute))
    if loaded is None or loaded[0].path != absolute:
        return Found(State.MISS, stamp)
    header, body_at = loaded
    return Found(growth(header, stamp, path), stamp, header, body_at)


def _is_text(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def load_frames(source: Source, found: Found) -> ReadResult | None:
    """The frames an entry holds, under the caller's name for the file; None when the entry
    has none or they are not whole."""
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult
    from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA, EVENTS_SCHEMA

    header = found.header
    if header is None or header.body is None or source.path is None:
        return None
    events_length, events_crc, diagnostics_length, diagnostics_crc, rows = header.body
    try:
        with entry_path(source.path).open("rb") as stream:
            stream.seek(found.body_at)
            body = stream.read(events_length + diagnostics_length)
    except OSError:
        return None
    if (
        len(body) != events_length + diagnostics_length
        or zlib.crc32(body[:events_length]) != events_crc
        or zlib.crc32(body[events_length:]) != diagnostics_crc
    ):
        return None
    try:
        events = pl.read_ipc(io.BytesIO(body[:events_length]))
        diagnostics = pl.read_ipc(io.BytesIO(body[events_length:]))
    except (OSError, pl.exceptions.PolarsError):
        return None
    if (
        events.schema != EVENTS_SCHEMA
        or diagnostics.schema != DIAGNOSTICS_SCHEMA
        or events.height != rows
    ):
        return None
    name = pl.lit(source.name, dtype=pl.String)
    return ReadResult(events.with_columns(file=name), diagnostics.with_columns(file=name))


@dataclass(frozen=True)
class Progress:
    """How far a read of a log got, and its ``count --total`` figures."""

    end: int
    next_line: int
    last_id: str | None
    session_id: str | None
    clean: bool
    llm_calls: int
    subagent_calls: int
    messages: Iterable[tuple[str, str]]
    damage: Iterable[tuple[int, str, str]]
    unreadable: bool


def progress_of(result: ReadResult, state: ReadState, size: int) -> Progress:
    """The progress and figures of one log's frames, counted by the one kernel."""
    import polars as pl

    events, diagnostics = result.events, result.diagnostics
    counter = CallCounter()
    candidates = events.filter(
        (pl.col("type") == "assistant.turn_start")
        | ((pl.col("type") == "assistant.message") & pl.col("agent_id").is_not_null())
    ).select("type", "agent_id", "message_id", "chunk_index")
    for kind, agent_id, message_id, chunk_index in candidates.iter_rows():
        if needs_payload(kind, agent_id):
            counter.add(kind, agent_id, message_id, chunk_index)
        else:
            counter.add(kind, agent_id)
    damage = diagnostics.sort("line").select("line", "kind", "message").rows()
    return Progress(
        end=state.end,
        next_line=state.next_line,
        last_id=state.last_id,
        session_id=state.session_id,
        clean=not damage and state.end == size,
        llm_calls=counter.llm_calls,
        subagent_calls=counter.subagent_calls,
        messages=counter.messages,
        damage=damage,
        unreadable=events.height == 0 and bool(damage),
    )


Stored = tuple[bool, list[bytes]]
"""A command's value for one log: whether it is a tuple of frames, and each frame's IPC."""


def write(
    source: Source,
    stamp: Stamp,
    progress: Progress,
    frames: ReadResult | None,
    results: dict[str, Stored] | None = None,
) -> bool:
    """Write the entry of a log read at ``stamp``; False when it cannot be written (the store
    is a cache: the next run reads the log again)."""
    if source.path is None:
        return False
    hashes = _hashes(source.path, progress.end)
    if hashes is None:
        return False
    body, shape = b"", None
    if frames is not None:
        events = _ipc(frames.events)
        diagnostics = _ipc(frames.diagnostics)
        body = events + diagnostics
        shape = (
            len(events),
            zlib.crc32(events),
            len(diagnostics),
            zlib.crc32(diagnostics),
            frames.events.height,
        )
    described = []
    for key, (is_tuple, blobs) in sorted((results or {}).items()) if frames is not None else ():
        described.append((key, is_tuple, [(len(blob), zlib.crc32(blob)) for blob in blobs]))
        body += b"".join(blobs)
    header = Header(
        version=VERSION,
        code=code_stamp(),
        path=os.path.abspath(source.path),
        stamp=stamp,
        end=progress.end,
        head=hashes[0],
        tail=hashes[1],
        next_line=progress.next_line,
        last_id=progress.last_id,
        session_id=progress.session_id,
        clean=progress.clean,
        llm_calls=progress.llm_calls,
        subagent_calls=progress.subagent_calls,
        messages=sorted(progress.messages),
        damage=list(progress.damage),
        unreadable=progress.unreadable,
        body=shape,
        results=described,
    )
    raw = _ENCODER.encode(header)
    prefix = PREFIX.pack(MAGIC, len(raw), zlib.crc32(raw))
    return _replace(entry_path(source.path), prefix + raw + body)


def _ipc(frame: object) -> bytes:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="lz4")
    return buffer.getvalue()


def _private_folder() -> Path:
    where = folder()
    for path in (where.parent, where):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    return where


def _replace(target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` atomically: a temporary file (0600) in the same folder,
    renamed over the target; the temporary file is removed when anything fails."""
    try:
        where = _private_folder()
        handle, name = tempfile.mkstemp(dir=where, prefix=".", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(name, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)
        return False
    return True


def prune(limit: int | None = None) -> None:
    """Delete the entries of logs that are gone, entries that are not valid entries of this
    version, temporary files left by a run that died; then the oldest entries until the store
    is under ``limit`` (:func:`max_bytes`)."""
    limit = max_bytes() if limit is None else limit
    where = folder()
    try:
        names = os.listdir(where)
    except OSError:
        return
    now = time.time()
    kept: list[tuple[float, int, Path]] = []
    for name in names:
        path = where / name
        try:
            info = path.stat()
        except OSError:
            continue
        if name.endswith(".tmp"):
            if now - info.st_mtime > STALE_TEMPORARY_S:
                path.unlink(missing_ok=True)
            continue
        loaded = _load_header(path) if name.endswith(".entry") else None
        if loaded is None or not os.path.exists(loaded[0].path):
            path.unlink(missing_ok=True)
            continue
        kept.append((info.st_mtime, info.st_size, path))
    total = sum(size for _, size, _ in kept)
    for _, size, path in sorted(kept, key=lambda item: item[0]):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size


@dataclass(frozen=True)
class Info:
    path: Path
    entries: int
    bytes: int


def info() -> Info:
    """Where the store is, how many logs it holds, and how many bytes it takes."""
    where = folder()
    entries = size = 0
    try:
        names = os.listdir(where)
    except OSError:
        names = []
    for name in names:
        try:
            size += (where / name).stat().st_size
        except OSError:
            continue
        entries += name.endswith(".entry")
    return Info(where, entries, size)


def clear() -> None:
    """Empty the store (and whatever older versions of copilot-logs kept beside it)."""
    shutil.rmtree(folder().parent, ignore_errors=True)


@dataclass
class Pending:
    """An entry to write once the command's value for the batch is known (see :func:`keep`)."""

    source: Source
    stamp: Stamp
    progress: Progress
    frames: ReadResult
    found: Found | None = None
    """The entry that was served (None: the log was read now, so the entry must be written)."""


Parse = Callable[
    [Sequence[tuple[Source, "Resume | None"]]], tuple["ReadResult", list["ReadState | None"]]
]
"""How logs are read (the reader's ``read_many``, or a caller's wrapper around it)."""


def read(sources: Sequence[Source], parse: Parse | None = None) -> tuple[ReadResult, list[Pending]]:
    """Every source's frames: from its entry when the log is unchanged, read from where the
    entry stopped when it only grew, read whole otherwise (by ``parse``, the reader's
    ``read_many`` by default); and the entries to write (pass them to :func:`keep`)."""
    from copilot_logs.ingest.reader import ReadResult, Resume

    served: list[ReadResult] = []
    pending: list[Pending] = []
    jobs: list[tuple[Source, Resume | None, Found, ReadResult | None]] = []
    for source in sources:
        found = find(source)
        cached = load_frames(source, found) if found.state is not State.MISS else None
        if cached is None or found.header is None:
            jobs.append((source, None, found, None))
        elif found.state is State.FRESH:
            served.append(cached)
            if found.stamp is not None:
                progress = _progress_of_header(found.header)
                pending.append(Pending(source, found.stamp, progress, cached, found))
        else:
            header = found.header
            seen = frozenset(cached.events["event_id"].drop_nulls().to_list())
            resume = Resume(header.end, header.next_line, header.last_id, seen, header.session_id)
            jobs.append((source, resume, found, cached))
    read_now, written = _read(jobs, parse)
    return ReadResult.concat([*served, *read_now]), pending + written


def _progress_of_header(header: Header) -> Progress:
    return Progress(
        end=header.end,
        next_line=header.next_line,
        last_id=header.last_id,
        session_id=header.session_id,
        clean=header.clean,
        llm_calls=header.llm_calls,
        subagent_calls=header.subagent_calls,
        messages=header.messages,
        damage=header.damage,
        unreadable=header.unreadable,
    )


def _read(
    jobs: list[tuple[Source, Resume | None, Found, ReadResult | None]],
    parse: Parse | None,
) -> tuple[list[ReadResult], list[Pending]]:
    """Read the jobs' logs (grown ones from where their entry stopped: read whole again when
    the new part does not continue the old one)."""
    from copilot_logs.ingest.reader import ReadResult, read_many

    if not jobs:
        return [], []
    parsed, states = (parse or read_many)([(source, resume) for source, resume, _, _ in jobs])
    events = _by_file(parsed.events)
    diagnostics = _by_file(parsed.diagnostics)
    done: list[ReadResult] = []
    pending: list[Pending] = []
    again: list[tuple[Source, Resume | None, Found, ReadResult | None]] = []
    for (source, resume, found, cached), state in zip(jobs, states, strict=True):
        mine = _part(events, diagnostics, source.name, parsed)
        if cached is not None and resume is not None:
            first = mine.events["parent_id"].head(1).to_list()
            if first and first[0] != resume.last_id:
                again.append((source, None, Found(State.MISS, found.stamp), None))
                continue
            mine = ReadResult.concat([cached, mine])
        done.append(mine)
        if found.stamp is not None and state is not None:
            progress = progress_of(mine, state, found.stamp.size)
            pending.append(Pending(source, found.stamp, progress, mine))
    more, more_pending = _read(again, parse)
    return done + more, pending + more_pending


def keep(pending: list[Pending], key: str | None = None, value: object = None) -> None:
    """Write the pending entries, each with its rows of ``value`` (what the function described
    by ``key`` computed from the batch's frames) when the value splits by file."""
    for item in pending:
        rows = _rows_of(value, item.source.name) if key is not None else None
        found = item.found
        if found is not None and (rows is None or found.header is None):
            continue  # served as it is: nothing new to keep
        results = _stored_results(item.source, found) if found is not None else {}
        if rows is not None and key is not None:
            results[key] = rows
        write(item.source, item.stamp, item.progress, item.frames, results)


def _rows_of(value: object, name: str) -> Stored | None:
    """One log's rows of a command's value: a frame, or a tuple of frames, each with a
    ``file`` column (else the value does not split by file and is not kept)."""
    import polars as pl

    frames = value if isinstance(value, tuple) else (value,)
    if not frames or not all(
        isinstance(frame, pl.DataFrame) and "file" in frame.columns for frame in frames
    ):
        return None
    blobs = [_ipc(frame.filter(pl.col("file") == name)) for frame in frames]
    return isinstance(value, tuple), blobs


def _after_events(source: Source, found: Found) -> tuple[bytes, dict[str, Stored]] | None:
    """An entry's diagnostics IPC and the results it holds, read at once (the events, the bulk
    of an entry, are skipped); None when they are not whole."""
    header = found.header
    if header is None or header.body is None or source.path is None:
        return None
    events_length, _, diagnostics_length, diagnostics_crc, _ = header.body
    lengths = [length for _, _, parts in header.results for length, _ in parts]
    try:
        with entry_path(source.path).open("rb") as stream:
            stream.seek(found.body_at + events_length)
            raw = stream.read(diagnostics_length + sum(lengths))
    except OSError:
        return None
    diagnostics = raw[:diagnostics_length]
    if len(diagnostics) != diagnostics_length or zlib.crc32(diagnostics) != diagnostics_crc:
        return None
    stored: dict[str, Stored] = {}
    at = diagnostics_length
    for key, is_tuple, parts in header.results:
        blobs = []
        for length, crc in parts:
            blob = raw[at : at + length]
            at += length
            if len(blob) != length or zlib.crc32(blob) != crc:
                return None
            blobs.append(blob)
        stored[key] = (is_tuple, blobs)
    return diagnostics, stored


def _stored_results(source: Source, found: Found) -> dict[str, Stored]:
    """The results an entry already holds (kept when another command's are added)."""
    after = _after_events(source, found)
    return after[1] if after is not None else {}


@dataclass(frozen=True)
class Recalled:
    """A batch answered from the entries alone: the value and what to report about the read."""

    value: object
    diagnostics: pl.DataFrame
    files_with_events: list[str]


def recall(sources: Sequence[Source], key: str) -> Recalled | None:
    """The value the function described by ``key`` gave for these logs, from their entries,
    without loading their events; None unless every log is unchanged and its entry holds it."""
    import polars as pl

    from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA, empty_diagnostics

    values: list[tuple[bool, list[pl.DataFrame]]] = []
    diagnostics: list[pl.DataFrame] = [empty_diagnostics()]
    with_events: list[str] = []
    for source in sources:
        found = find(source)
        header = found.header
        if found.state is not State.FRESH or header is None or header.body is None:
            return None
        after = _after_events(source, found)
        if after is None or key not in after[1]:
            return None
        raw_diagnostics, stored = after
        name = pl.lit(source.name, dtype=pl.String)
        try:
            parts = [
                pl.read_ipc(io.BytesIO(blob)).with_columns(file=name) for blob in stored[key][1]
            ]
            if header.damage:  # no damage: no diagnostics rows to read
                frame = pl.read_ipc(io.BytesIO(raw_diagnostics))
                if frame.schema != DIAGNOSTICS_SCHEMA:
                    return None
                diagnostics.append(frame.with_columns(file=name))
        except (OSError, pl.exceptions.PolarsError):
            return None
        values.append((stored[key][0], parts))
        if header.body[4]:
            with_events.append(source.name)
    if not values or len({(is_tuple, len(parts)) for is_tuple, parts in values}) != 1:
        return None
    is_tuple, _ = values[0]
    columns = list(zip(*(parts for _, parts in values), strict=True))
    joined = [pl.concat(list(column), how="vertical") for column in columns]
    value: object = tuple(joined) if is_tuple else joined[0]
    return Recalled(value, pl.concat(diagnostics, how="vertical"), with_events)


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
