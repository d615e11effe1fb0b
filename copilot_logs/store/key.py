"""The store's key, which fails closed, and the one growth check.

What the key holds and when a log is read on, read whole or served: docs/cache.md. The CRC of
the bytes read is kept once a log is seen to change (:func:`crc_to_keep`). :func:`growth` is
the one check that a log only grew, for every reader that keeps what it read: the store, export's
manifest (a :class:`Seen` per source, :func:`seen_whole`) and ``watch`` (:class:`Fed`, checked
as a poll).
"""

from __future__ import annotations

import contextlib
import enum
import gc
import hashlib
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from copilot_logs.ingest.logfile import Source, open_log, read_spans
from copilot_logs.store.entry import Header, Stamp, entry_file, load_header

HASH_BYTES = 4096
"""Bytes hashed at the start of a log and just before the end of what was read."""


def stamp_of(path: Path) -> Stamp | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return Stamp.of(info)


def hashes(path: str | Path, end: int) -> tuple[str, str] | None:
    """Hashes of the first bytes of the file and of the bytes just before ``end``."""
    length = min(end, HASH_BYTES)
    got = read_spans(path, [(0, length), (end - length, length)])
    return None if got is None else windows(*got)


def windows(head: bytes, tail: bytes) -> tuple[str, str]:
    """The hashes of the bytes at a log's start and of those just before the end of a read."""
    return (
        hashlib.blake2b(head, digest_size=16).hexdigest(),
        hashlib.blake2b(tail, digest_size=16).hexdigest(),
    )


class Seen(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a reader keeps of a log it read, for :func:`growth` (an entry's header keeps the
    same fields)."""

    stamp: Stamp
    """The log's stamp before it was read."""
    end: int
    """Bytes read (from the start)."""
    head: str
    tail: str
    """:func:`windows` of the bytes read."""
    clean: bool
    """Nothing damaged up to ``end``, which ends a line: a later read may go on from there."""
    crc: int | None
    """CRC-32 of the bytes read; None when not kept (a grown log is then read whole)."""


def seen_whole(path: Path) -> Seen | None:
    """The record of a log taken whole, before it is read (``export``); None when it cannot be
    taken (a log that cannot be opened, a named pipe: never waited on). Not clean: a reader
    keeping it reads a changed log whole."""
    stamp = stamp_of(path)
    held = hashes(path, stamp.size) if stamp is not None else None
    if stamp is None or held is None:
        return None
    return Seen(stamp, stamp.size, held[0], held[1], clean=False, crc=None)


class Fed:
    """The :class:`Seen` of a log read piece by piece (``watch``): the hashed windows kept from
    the bytes as they are fed, never read a second time (no CRC: see :func:`growth`)."""

    def __init__(self) -> None:
        self.end = 0
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        """Note the next bytes read."""
        if len(self._head) < HASH_BYTES:
            self._head = (self._head + chunk[:HASH_BYTES])[:HASH_BYTES]
        self._tail = (self._tail + chunk[-HASH_BYTES:])[-HASH_BYTES:]
        self.end += len(chunk)

    def seen(self, stamp: Stamp, clean: bool) -> Seen:
        """The record of the bytes fed so far, the log's stamp taken before the last read."""
        head, tail = windows(self._head, self._tail)
        return Seen(stamp, self.end, head, tail, clean, None)


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

    @property
    def has_frames(self) -> bool:
        """The entry holds the log's frames (else only ``count --total``'s figures)."""
        return self.header is not None and self.header.body is not None

    def to_parse(self) -> int:
        """Bytes of the log a read through the store would parse."""
        size = self.stamp.size if self.stamp is not None else 0
        if not self.has_frames or self.header is None:
            return size
        if self.state is State.FRESH:
            return 0
        return size - self.header.end if self.state is State.GROWN else size


CRC_CHUNK = 1 << 20


def crc_of(path: str | Path, start: int, end: int, value: int = 0) -> int | None:
    """CRC-32 of the file's bytes from ``start`` to ``end``, going on from ``value`` (the CRC
    of the bytes before ``start``); None when they cannot all be read."""
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
    """The CRC-32 of the log's first ``end`` bytes that an entry written now keeps: the
    served entry's when the log is unchanged, the entry's gone on over the new bytes when it
    only grew, taken whole when the log changed since its entry was written (a log that
    changes once may grow again), else None."""
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
    loaded = load_header(entry_file(absolute))
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
    and its passes over the objects decoded so far cost more than the decoding (the pattern
    msgspec's documentation recommends for large messages)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
