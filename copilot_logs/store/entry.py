"""The store's entry format: one file per source log, its header, and writing it atomically.

An entry is ``<hash of the log's path>.entry`` in the store folder (:func:`folder`)::

    magic (8 bytes) | header length (u32) | CRC-32 of the header (u32) | header | body

The header is MessagePack, decoded into the typed :class:`Header` by msgspec (never executed):
the log's path and key, how far the read got and the file's ``count --total`` figures (the
reader's and the count's own records, nested), its diagnostics, and what commands computed
from its frames, as rows of plain values (:class:`Result`); a warm run reads only headers.
The body, when present, is the log's events frame in Arrow IPC, or, in an entry written by
``count --total``, the event ids its read saw (MessagePack); its length and CRC-32 are in the
header.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

import msgspec

import copilot_logs
from copilot_logs.ingest.progress import Count, Figures, ReadState
from copilot_logs.store.trust import open_entry, private_folder, replaceable, where

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
    :mod:`copilot_logs.store.rows`); the ``file`` column is left empty (it is the caller's
    name for the log)."""

    schema: list[tuple[str, str]]
    """Each column's name and dtype, as :func:`copilot_logs.store.rows.dtype_text` writes it."""
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
