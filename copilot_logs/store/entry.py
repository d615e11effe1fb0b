"""The store's entry (docs/cache.md): its format, its key, which fails closed, and the one
growth check; and a command's value per log, kept in the header as rows of plain values.

An entry is ``<hash of the log's path>.entry`` in the store folder::

    magic (8 bytes) | header length (u32) | CRC-32 of the header (u32) | header | body

The header is MessagePack decoded into the typed :class:`Header` by msgspec; a warm run reads
only headers. The body is the log's events frame in Arrow IPC or, written by ``count
--total``, the event ids its read saw. :func:`growth` is the one check that a log only grew, for
every reader that keeps what it read: the store, export's manifest (:func:`seen_whole`) and
``watch`` (:class:`Fed`, as a poll).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import gc
import hashlib
import json
import math
import os
import re
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

import copilot_logs
from copilot_logs import modes
from copilot_logs.ingest.calls import Count, Figures
from copilot_logs.ingest.logfile import Source, open_log, read_spans
from copilot_logs.ingest.reader import ReadState
from copilot_logs.store.trust import open_entry, private_folder, replaceable, where

if TYPE_CHECKING:
    import polars as pl


VERSION = 4
MAGIC = b"CLSTORE\x04"
PREFIX = struct.Struct("<8sII")
HEAD_READ = 16 << 10  # bytes read at once from an entry's start: almost every header
MAX_HEADER_BYTES = 64 << 20

_ENCODER = msgspec.msgpack.Encoder()


class Stamp(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``stat`` says of a log: any difference means the file changed."""

    size: Count
    mtime_ns: int
    ctime_ns: int
    inode: Count
    device: Count

    @classmethod
    def of(cls, info: os.stat_result) -> Stamp:
        return cls(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


class Rows(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    """One log's rows of a frame, column by column, as plain values (each column's name and
    :func:`dtype_text`); the ``file`` column is left empty (the caller's name for the log)."""

    schema: list[tuple[str, str]]
    height: Count
    columns: list[list[Any]]


class Result(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    """What the function described by ``key`` computed from the log's frames."""

    key: str
    is_tuple: bool  # a tuple of frames, else one frame
    frames: msgspec.Raw
    """Each frame's :class:`Rows`, decoded only when asked for (:func:`rows_of`): a run
    decodes the rows of its own command, not those of every command the entry holds."""


def result(key: str, is_tuple: bool, frames: list[Rows]) -> Result:
    return Result(key, is_tuple, msgspec.Raw(_ENCODER.encode(frames)))


def rows_of(result: Result) -> list[Rows] | None:
    try:
        return _ROWS.decode(result.frames)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


Diagnostic = tuple[
    str | None, int | None, int | None, str | None, str | None, str | None, int | None, int | None
]
"""A diagnostics row without its file (:data:`DIAGNOSTIC_COLUMNS`)."""


class Header(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    code: str
    path: str
    stamp: Stamp
    read: ReadState  # without the ids it saw
    head: str
    tail: str
    crc: Count | None  # as :class:`Seen`'s, kept once the log was seen to change
    clean: bool
    figures: Figures  # ``count --total``'s, and the damage to report
    body: tuple[Count, Count, Count] | None
    """The events frame in the body: its IPC length and CRC-32, and its rows; None when the
    entry holds only the counts (written by ``count --total``)."""
    ids: tuple[Count, Count] | None
    """Else the body is the event ids the read saw (its length and CRC-32): a read going on
    from the entry needs them (a replayed line is read once); a warm run never reads them."""
    diagnostics: list[Diagnostic]
    results: list[Result]

    @property
    def end(self) -> int:
        return self.read.end


_DECODER = msgspec.msgpack.Decoder(Header)
_ROWS = msgspec.msgpack.Decoder(list[Rows])


_PACKAGE = Path(copilot_logs.__file__).resolve().parent


@functools.cache
def code_stamp() -> str:
    """A hash of every module's size and mtime: an entry is served only to the code that wrote
    it."""
    digest = hashlib.blake2b(f"{VERSION}".encode(), digest_size=16)
    for path in sorted(_PACKAGE.rglob("*.py")):
        info = path.stat()
        digest.update(f"\n{path.relative_to(_PACKAGE)}:{info.st_size}:{info.st_mtime_ns}".encode())
    return digest.hexdigest()


def entry_path(log: Path) -> Path:
    return Path(named(os.path.abspath(log), ".entry"))


def named(text: str, suffix: str) -> str:
    """The file of the store folder keyed by ``text`` (a log's absolute path, a destination)."""
    return os.path.join(
        where(), hashlib.blake2b(text.encode(), digest_size=16).hexdigest() + suffix
    )


ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.entry")
LEDGER_NAME = re.compile(r"[0-9a-f]{32}\.sent")  # otel's ledgers: magic of the same family
TEMPORARY_NAME = re.compile(r"\.[a-z0-9_]{8}\.tmp")  # :func:`replace`'s (and older mkstemp's)


def is_ours(name: str, start: bytes) -> bool:
    """Whether a file of the store folder, by its name and its first bytes, is one that
    copilot-logs writes: an entry of any version, a ledger, or a temporary one (maybe still
    empty)."""
    family = MAGIC[:-1]  # the version byte aside
    if ENTRY_NAME.fullmatch(name) or LEDGER_NAME.fullmatch(name):
        return len(start) >= len(MAGIC) and start.startswith(family)
    if TEMPORARY_NAME.fullmatch(name):
        known = min(len(start), len(family))
        return start[:known] == family[:known]
    return False


def load_header(entry: str | Path) -> tuple[Header, int] | None:
    """The header of an entry and where its body starts; None for anything but a whole, valid
    entry of this version of copilot-logs."""
    loaded: tuple[Header, int] | None = load(entry, MAGIC, _DECODER, MAX_HEADER_BYTES)
    if loaded is None or loaded[0].version != VERSION or loaded[0].code != code_stamp():
        return None
    return loaded


def load(path: str | Path, magic: bytes, decoder: msgspec.msgpack.Decoder[Any], limit: int) -> Any:
    """The header of a file of ours written by :func:`encode` (``magic``, at most ``limit``
    bytes, its CRC right) and where its body starts; None for anything else."""
    descriptor = open_entry(path)
    if descriptor is None:
        return None
    try:
        with os.fdopen(descriptor, "rb", buffering=0) as stream:
            start = stream.read(HEAD_READ)
            if len(start) < PREFIX.size:
                return None
            found, length, crc = PREFIX.unpack_from(start)
            if found != magic or length > limit:
                return None
            raw = start[PREFIX.size : PREFIX.size + length]
            if len(raw) < length:
                raw += stream.read(length - len(raw))
    except OSError:
        return None
    if len(raw) != length or zlib.crc32(raw) != crc:
        return None
    try:
        return decoder.decode(raw), PREFIX.size + length
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def encode(header: object, body: bytes = b"", magic: bytes = MAGIC) -> bytes:
    raw = _ENCODER.encode(header)
    return PREFIX.pack(magic, len(raw), zlib.crc32(raw)) + raw + body


def replace(target: Path, data: bytes, folder: Path | None = None) -> bool:
    """Write ``data`` over ``target`` (nothing, or a file of ours) by the one atomic write, its
    temporary file in the store folder (``folder`` once checked by the caller, else
    :func:`private_folder`); False when nothing was written."""
    folder = folder or private_folder()
    if folder is None or not replaceable(target):
        return False
    try:
        with modes.atomic(target, temporary=folder / f".{secrets.token_hex(4)}.tmp") as stream:
            stream.write(data)
    except OSError:
        return False
    return True


_PLAIN = frozenset(
    {
        *("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"),
        *("Float32", "Float64", "Boolean", "String", "Null"),
    }
)


def describe(fn: Callable[..., Any]) -> str | None:
    """A stable text naming ``fn`` and its bound options; None (its values are not kept) for a
    lambda, a closure, an option that has no stable text."""
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
    """The text of a value that is the same in every process (set order is not)."""
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


def dtype_text(dtype: Any) -> str | None:
    """``Int64``, ``Datetime|us|UTC``, ``List|String``, ``Struct|`` and its fields' names and
    texts in JSON...; None for a dtype that is not kept."""
    import polars as pl

    name = type(dtype).__name__
    if name in _PLAIN or name in ("Date", "Time"):
        return name
    if isinstance(dtype, pl.Datetime):
        return f"Datetime|{dtype.time_unit}|{dtype.time_zone or ''}"
    if isinstance(dtype, pl.Duration):
        return f"Duration|{dtype.time_unit}"
    if isinstance(dtype, pl.List):
        inner = dtype_text(dtype.inner)
        return None if inner is None else f"List|{inner}"
    if isinstance(dtype, pl.Struct):
        fields = [(field.name, dtype_text(field.dtype)) for field in dtype.fields]
        if any(text is None for _, text in fields):
            return None
        return f"Struct|{json.dumps(fields)}"
    return None


def parse_dtype(text: str) -> pl.DataType:
    """The dtype :func:`dtype_text` wrote (ValueError for any other text)."""
    import polars as pl

    kind, _, rest = text.partition("|")
    if kind in _PLAIN or kind in ("Date", "Time"):
        if rest:
            raise ValueError(text)
        dtype: pl.DataType = getattr(pl, kind)()
        return dtype
    if kind == "Datetime":
        unit, _, zone = rest.partition("|")
        return pl.Datetime(_unit(unit), zone or None)
    if kind == "Duration":
        return pl.Duration(_unit(rest))
    if kind == "List":
        return pl.List(parse_dtype(rest))
    if kind == "Struct":
        fields = json.loads(rest)
        if not isinstance(fields, list):
            raise ValueError(text)
        return pl.Struct([pl.Field(str(name), parse_dtype(str(inner))) for name, inner in fields])
    raise ValueError(text)


def _unit(text: str) -> Any:
    if text not in ("ns", "us", "ms"):
        raise ValueError(text)
    return text


def split_rows(frame: object) -> tuple[Rows, dict[str, Rows]] | None:
    """The rows of a log that has none, and each log's rows, of a frame with a ``file`` column
    whose dtypes are all kept (else None)."""
    import polars as pl

    if not isinstance(frame, pl.DataFrame) or "file" not in frame.columns:
        return None
    schema = [(name, dtype_text(dtype)) for name, dtype in frame.schema.items()]
    texts = [(name, text) for name, text in schema if text is not None]
    if len(texts) != len(schema):
        return None
    physical = frame.select(pl.all().to_physical())
    columns = [None if s.name == "file" else s.to_list() for s in physical.iter_columns()]
    where: dict[str, list[int]] = {}
    for at, file in enumerate(frame["file"].to_list()):
        where.setdefault(file, []).append(at)
    split = {
        file: Rows(texts, len(rows), [[] if c is None else [c[at] for at in rows] for c in columns])
        for file, rows in where.items()
    }
    return Rows(texts, 0, [[] for _ in texts]), split


def frame_of(parts: Sequence[tuple[str, Rows]]) -> pl.DataFrame:
    """One frame of several logs' rows of one schema (each under the caller's name for the
    log); ValueError (or polars' error) when the rows do not fit their schema."""
    import polars as pl

    schema = parts[0][1].schema
    heights = [rows.height for _, rows in parts]
    if any(len(rows.columns) != len(schema) for _, rows in parts):
        raise ValueError("not one column per field of the schema")
    series = []
    for index, (name, text) in enumerate(schema):
        dtype = parse_dtype(text)
        if name == "file":
            files = [file for file, rows in parts for _ in range(rows.height)]
            series.append(pl.Series(name, files, dtype=pl.String))
            continue
        values = []
        for (_, rows), height in zip(parts, heights, strict=True):
            column = rows.columns[index]
            if len(column) != height:
                raise ValueError(f"{name}: {len(column)} values for {height} rows")
            values.extend(column)
        series.append(_series(name, values, _physical(dtype)).cast(dtype))
    return pl.DataFrame(series)


def _series(name: str, values: list[Any], physical: Any) -> pl.Series:
    """The values as a series of ``physical``. A nested column (usage's per model figures)
    goes through JSON text polars decodes in one call: built value by value from Python, it
    costs most of a warm ``usage``. NaN and infinities have no JSON text: the slow way."""
    import orjson
    import polars as pl

    nested = isinstance(physical, pl.List | pl.Struct)
    if nested and all(_finite(value) for value in values):
        texts = pl.Series(name, [orjson.dumps(value).decode() for value in values], pl.String)
        return texts.str.json_decode(physical)
    return pl.Series(name, values, dtype=physical, strict=True)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    return True


def _physical(dtype: Any) -> Any:
    import polars as pl

    if isinstance(dtype, pl.List):
        return pl.List(_physical(dtype.inner))
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _physical(f.dtype)) for f in dtype.fields])
    if isinstance(dtype, pl.Date):
        return pl.Int32()
    if isinstance(dtype, pl.Datetime | pl.Duration | pl.Time):
        return pl.Int64()
    return dtype


DIAGNOSTIC_COLUMNS = (
    *("session_id", "line", "offset", "kind", "message", "event_id"),
    *("more_lines", "new_lines"),
)


def diagnostics_of(logs: Iterable[tuple[str, Header]]) -> pl.DataFrame:
    """The diagnostics frame the headers of these logs keep (each under the caller's name for
    the log, the ``file`` the header does not keep)."""
    import polars as pl

    from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA

    rows = [(row[0], name, *row[1:]) for name, header in logs for row in header.diagnostics]
    return pl.DataFrame(rows, schema=DIAGNOSTICS_SCHEMA, orient="row")


HASH_BYTES = 4096
"""Bytes hashed at the start of a log and just before the end of what was read."""
CRC_CHUNK = 1 << 20


def stamp_of(path: Path) -> Stamp | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return Stamp.of(info)


def hashes(path: str | Path, end: int) -> tuple[str, str] | None:
    """:func:`windows` of the file's first bytes and of the bytes just before ``end``."""
    length = min(end, HASH_BYTES)
    got = read_spans(path, [(0, length), (end - length, length)])
    return None if got is None else windows(*got)


def windows(head: bytes, tail: bytes) -> tuple[str, str]:
    return (
        hashlib.blake2b(head, digest_size=16).hexdigest(),
        hashlib.blake2b(tail, digest_size=16).hexdigest(),
    )


class Seen(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a reader keeps of a log it read, for :func:`growth` (as an entry's header does)."""

    stamp: Stamp  # before it was read
    end: int  # bytes read
    head: str
    tail: str  # :func:`windows` of the bytes read
    clean: bool
    """Nothing damaged up to ``end``, which ends a line: a later read may go on from there."""
    crc: int | None
    """CRC-32 of the bytes read; None when not kept (a grown log is then read whole)."""


def seen_whole(path: Path) -> Seen | None:
    """The record of a log taken whole before it is read (``export``; None: it cannot be
    opened). Not clean: a reader keeping it reads a changed log whole."""
    stamp = stamp_of(path)
    held = hashes(path, stamp.size) if stamp is not None else None
    if stamp is None or held is None:
        return None
    return Seen(stamp, stamp.size, held[0], held[1], clean=False, crc=None)


class Fed:
    """The :class:`Seen` of a log read piece by piece (``watch``): the hashed windows kept from
    the bytes as they are fed, never read a second time, and no CRC."""

    def __init__(self) -> None:
        self.end = 0
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        if len(self._head) < HASH_BYTES:
            self._head = (self._head + chunk[:HASH_BYTES])[:HASH_BYTES]
        self._tail = (self._tail + chunk[-HASH_BYTES:])[-HASH_BYTES:]
        self.end += len(chunk)

    def seen(self, stamp: Stamp, clean: bool) -> Seen:
        head, tail = windows(self._head, self._tail)
        return Seen(stamp, self.end, head, tail, clean, None)


class State(enum.Enum):
    FRESH = "fresh"  # as it was read: served
    GROWN = "grown"  # bytes appended to a clean log: read on from its ``end``
    MISS = "miss"  # no usable entry, or any other change: read whole


@dataclass(frozen=True)
class Found:
    state: State
    stamp: Stamp | None  # before it is read (None: it cannot be stat'ed)
    header: Header | None = None
    body_at: int = 0

    def to_parse(self) -> int:
        """Bytes of the log a read through the store would parse."""
        size = self.stamp.size if self.stamp is not None else 0
        if self.header is None or self.header.body is None:
            return size
        if self.state is State.FRESH:
            return 0
        return size - self.header.end if self.state is State.GROWN else size


def crc_of(path: str | Path, start: int, end: int, value: int = 0) -> int | None:
    """CRC-32 of the file's bytes from ``start`` to ``end``, going on from ``value`` (that of the
    bytes before); None when they cannot all be read."""
    try:
        with open_log(Path(path)) as stream:
            stream.seek(start)
            left = end - start
            while left > 0:
                chunk = stream.read(min(left, CRC_CHUNK))
                if not chunk:
                    return None
                value = zlib.crc32(chunk, value)
                left -= len(chunk)
    except OSError:
        return None
    return value


def growth(seen: Seen | Header, stamp: Stamp, path: str | Path, *, polling: bool = False) -> State:
    """The one growth check: is the log the one ``seen`` was read from (FRESH), that log with
    bytes appended (GROWN: read on from ``seen.end``), or neither (MISS: read it whole)?

    A run proves an unchanged log by its hashed windows and a grown one by the CRC of every
    byte read before. A poll (``watch``, five times a second: ``polling``) takes an unchanged
    stamp as proof enough and the hashed windows for the CRC, so that it costs one stat while
    nothing changes and two 4 KB reads when the log grew, never a pass over the log."""
    before = seen.stamp
    same_file = before.inode == stamp.inode and before.device == stamp.device
    if not same_file or stamp.size < seen.end:
        return State.MISS
    if stamp == before:
        unchanged = polling or hashes(path, seen.end) == (seen.head, seen.tail)
        return State.FRESH if unchanged else State.MISS
    if not (seen.clean and stamp.size > before.size):
        return State.MISS
    if polling:
        kept = hashes(path, seen.end) == (seen.head, seen.tail)
    else:
        kept = seen.crc is not None and crc_of(path, 0, seen.end) == seen.crc
    return State.GROWN if kept else State.MISS  # GROWN: the bytes read before are as they were


def crc_to_keep(path: str | Path, found: Found | None, end: int) -> int | None:
    """The CRC-32 of the log's first ``end`` bytes that an entry written now keeps: the served
    entry's, gone on over the new bytes when the log grew, taken whole when it changed since
    its entry was written (it may grow again), else None."""
    header = found.header if found is not None else None
    if found is None or header is None:
        return None
    if found.state is State.FRESH:
        return header.crc if end == header.end else None
    if found.state is State.GROWN and header.crc is not None:
        return crc_of(path, header.end, end, header.crc)
    return crc_of(path, 0, end)


def find(source: Source) -> Found:
    """The entry of a source and what to do with it."""
    if source.path is None:
        return Found(State.MISS, None)
    path = os.fspath(source.path)
    try:
        info = os.stat(path)
    except OSError:
        return Found(State.MISS, None)
    stamp = Stamp.of(info)
    absolute = os.path.abspath(path)
    if not absolute.isascii() and not _is_text(absolute):
        return Found(State.MISS, None)  # a name that is not UTF-8 is no key (never stored)
    loaded = load_header(named(absolute, ".entry"))
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


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while many headers are decoded: they make no cycles,
    and its passes cost more than the decoding (as msgspec's documentation recommends)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
