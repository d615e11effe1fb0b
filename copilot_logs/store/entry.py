"""The store's entry format: one file per source log, its header, and writing it atomically;
and a command's value per log, kept in the header as rows of plain values.

An entry is ``<hash of the log's path>.entry`` in the store folder (:func:`folder`)::

    magic (8 bytes) | header length (u32) | CRC-32 of the header (u32) | header | body

The header is MessagePack, decoded into the typed :class:`Header` by msgspec (never executed):
the log's path and key, how far the read got and the file's ``count --total`` figures (the
reader's and the count's own records, nested), its diagnostics, and what commands computed
from its frames, as rows of plain values (:class:`Result`); a warm run reads only headers.
The body, when present, is the log's events frame in Arrow IPC, or, in an entry written by
``count --total``, the event ids its read saw (MessagePack); its length and CRC-32 are in the
header. Each column of the rows is kept in its physical form with its dtype as text
(:func:`dtype_text`); a warm run builds one frame per command from all the logs' rows
(:func:`frame_of`). A value whose dtypes have no text here is computed on every run.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import re
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

import copilot_logs
from copilot_logs.ingest.calls import Count, Figures
from copilot_logs.ingest.reader import ReadState
from copilot_logs.store.trust import open_entry, private_folder, replaceable, where

if TYPE_CHECKING:
    import polars as pl


VERSION = 4
MAGIC = b"CLSTORE\x04"
PREFIX = struct.Struct("<8sII")
HEAD_READ = 16 << 10
"""Bytes read at once from the start of an entry: the header of almost every entry."""
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
    """One log's rows of a frame, column by column, as plain values (see
    :mod:`copilot_logs.store.entry`); the ``file`` column is left empty (it is the caller's
    name for the log)."""

    schema: list[tuple[str, str]]
    """Each column's name and dtype, as :func:`copilot_logs.store.entry.dtype_text` writes it."""
    height: Count
    columns: list[list[Any]]


class Result(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    """What the function described by ``key`` computed from the log's frames."""

    key: str
    is_tuple: bool
    """The value is a tuple of frames (else one frame)."""
    frames: msgspec.Raw
    """Each frame's :class:`Rows`, decoded only when asked for (:func:`rows_of`): a run
    decodes the rows of its own command, not those of every command the entry holds."""


def result(key: str, is_tuple: bool, frames: list[Rows]) -> Result:
    return Result(key, is_tuple, msgspec.Raw(_ENCODER.encode(frames)))


def rows_of(result: Result) -> list[Rows] | None:
    """The rows of each frame of a result; None when they are not valid rows."""
    try:
        return _ROWS.decode(result.frames)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


Diagnostic = tuple[
    str | None, int | None, int | None, str | None, str | None, str | None, int | None, int | None
]
"""A diagnostics row without its file: session_id, line, offset, kind, message, event_id,
more_lines, new_lines."""


class Header(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    code: str
    path: str
    stamp: Stamp
    read: ReadState
    """How far the read got (without the ids it saw)."""
    head: str
    tail: str
    crc: Count | None
    """CRC-32 of the log's bytes before ``end``, kept once the log was seen to change (see
    :func:`copilot_logs.store.key.growth`); None until then."""
    clean: bool
    """No damage, and the file ended with a newline: a later read may go on from ``end``."""
    figures: Figures
    """The file's ``count --total`` figures, and the damage to report."""
    body: tuple[Count, Count, Count] | None
    """The events frame in the body: its IPC length and CRC-32, and its rows; None when the
    entry holds only the counts (written by ``count --total``)."""
    ids: tuple[Count, Count] | None
    """In an entry that holds only the counts, the body is instead the event ids the read saw
    (a MessagePack array): its length and CRC-32. A read going on from the entry needs them
    (a replayed line is read once); a warm run never reads them."""
    diagnostics: list[Diagnostic]
    """The diagnostics frame's rows (when the entry has a body)."""
    results: list[Result]

    @property
    def end(self) -> int:
        """Bytes read, up to the last newline: what the growth check compares."""
        return self.read.end


_DECODER = msgspec.msgpack.Decoder(Header)
_ROWS = msgspec.msgpack.Decoder(list[Rows])


_PACKAGE = Path(copilot_logs.__file__).resolve().parent


@functools.cache
def code_stamp() -> str:
    """A hash of the size and modification time of every module of copilot-logs: an entry is
    never served to code other than the code that wrote it (an upgrade, an edit)."""
    digest = hashlib.blake2b(f"{VERSION}".encode(), digest_size=16)
    for path in sorted(_PACKAGE.rglob("*.py")):
        info = path.stat()
        digest.update(f"\n{path.relative_to(_PACKAGE)}:{info.st_size}:{info.st_mtime_ns}".encode())
    return digest.hexdigest()


def entry_path(log: Path) -> Path:
    return Path(entry_file(os.path.abspath(log)))


def entry_file(absolute: str) -> str:
    """The entry of the log at ``absolute`` (an absolute path)."""
    name = hashlib.blake2b(absolute.encode(), digest_size=16).hexdigest()
    return os.path.join(where(), name + ".entry")


ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.entry")
LEDGER_NAME = re.compile(r"[0-9a-f]{32}\.sent")
"""``otel --endpoint``'s ledgers (:mod:`copilot_logs.store.ledger`), whose magic bytes are of
the same family."""
TEMPORARY_NAME = re.compile(r"\.[a-z0-9_]{8}\.tmp")
"""What :func:`replace` names its temporary files (``tempfile.mkstemp``'s)."""


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
    descriptor = open_entry(entry)
    if descriptor is None:
        return None
    try:
        with os.fdopen(descriptor, "rb", buffering=0) as stream:
            start = stream.read(HEAD_READ)
            if len(start) < PREFIX.size:
                return None
            magic, length, crc = PREFIX.unpack_from(start)
            if magic != MAGIC or length > MAX_HEADER_BYTES:
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


def encode(header: Header, body: bytes) -> bytes:
    """An entry's bytes."""
    raw = _ENCODER.encode(header)
    return PREFIX.pack(MAGIC, len(raw), zlib.crc32(raw)) + raw + body


def replace(target: Path, data: bytes, folder: Path | None = None) -> bool:
    """Write ``data`` to ``target`` atomically: a temporary file (0600) in the store folder
    (``folder``, once checked by the caller, else :func:`private_folder`), renamed over the
    target when that is nothing or an entry of ours; the temporary file is removed when
    anything fails. False when nothing was written."""
    folder = folder or private_folder()
    if folder is None or not replaceable(target):
        return False
    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
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


_PLAIN = frozenset(
    {
        *("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"),
        *("Float32", "Float64", "Boolean", "String", "Null"),
    }
)


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


def dtype_text(dtype: Any) -> str | None:
    """``Int64``, ``Datetime|us|UTC``, ``Duration|ms``, ``List|String``, ``Struct|`` and its
    fields' names and texts in JSON...; None for a dtype that is not kept."""
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
    """The rows of a log that has none in a frame with a ``file`` column, and each log's rows;
    None when it is not a frame with one, or one of its dtypes is not kept."""
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
    """One frame of several logs' rows (each under the caller's name for the log), all of one
    schema. Raises ValueError (or polars' error) when the rows do not fit their schema."""
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
    """The values as a series of ``physical``. A nested column (a list of structs: usage's per
    model figures) goes through JSON text that polars decodes to that exact type in one call:
    built value by value from Python, it costs most of a warm ``usage``. NaN and infinities
    have no JSON text, so a column holding one takes the slow way."""
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
"""The diagnostics columns a header keeps (``file`` is the caller's name for the log)."""


def diagnostics_of(logs: Iterable[tuple[str, Header]]) -> pl.DataFrame:
    """The diagnostics frame the headers of these logs keep (each under the caller's name)."""
    import polars as pl

    from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA

    rows = [(row[0], name, *row[1:]) for name, header in logs for row in header.diagnostics]
    return pl.DataFrame(rows, schema=DIAGNOSTICS_SCHEMA, orient="row")
