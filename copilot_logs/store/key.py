"""The store's key, which fails closed, and the one growth check.

An entry is served only when every field of the key matches: the log's path, size, mtime_ns,
ctime_ns, inode and device, and hashes of the bytes at its start and just before the end of
what was read. A file that only grew (same inode, longer, clean when read, and every byte read
before unchanged: the CRC-32 the entry keeps of them) is read from where the entry stopped;
anything else is read again. The CRC is kept once a log is seen to change (:func:`crc_to_keep`):
a log read once and never touched costs no second pass over its bytes, and the first growth of
a log is read whole.
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

from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.logfile import open_log
from copilot_logs.store.entry import Header, Stamp, entry_file, load_header

HASH_BYTES = 4096
"""Bytes hashed at the start of a log and just before the end of what was read."""


def stamp_of(path: Path) -> Stamp | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def hashes(path: str | Path, end: int) -> tuple[str, str] | None:
    """Hashes of the first bytes of the file and of the bytes just before ``end``."""
    try:
        with open_log(Path(path)) as stream:
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


def growth(header: Header, stamp: Stamp, path: str | Path) -> State:
    """The one growth check: is the log the one the entry was read from, longer, or neither?"""
    before = header.stamp
    same_file = before.inode == stamp.inode and before.device == stamp.device
    if not same_file or stamp.size < header.end:
        return State.MISS
    if stamp == before:
        return State.FRESH if hashes(path, header.end) == (header.head, header.tail) else State.MISS
    grew = header.clean and header.end == before.size and stamp.size > before.size
    if grew and header.crc is not None and crc_of(path, 0, header.end) == header.crc:
        return State.GROWN  # the bytes read before are all as they were: read on from there
    return State.MISS


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
    stamp = Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
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
