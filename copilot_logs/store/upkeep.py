"""Keeping the store tidy: pruning what is gone or over the size cap, ``cache info|clear``.

Only files copilot-logs wrote are ever deleted, each recognised by its name, its first bytes
(:func:`copilot_logs.store.entry.is_ours`), its owner and its being a regular file; anything
else in the store folder is left as it is and never opened. The entries of logs that are gone
are found by reading each entry's header, which is done at most once a day
(:data:`SWEEP_INTERVAL_S`); an entry written by another build of copilot-logs (another venv,
an edited checkout) is kept while its log exists: it is replaced when this build reads that
log, and it counts towards the size cap like any other.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from copilot_logs.store.entry import (
    ENTRY_NAME,
    HEAD_READ,
    MAGIC,
    MAX_HEADER_BYTES,
    PREFIX,
    TEMPORARY_NAME,
    is_ours,
)
from copilot_logs.store.trust import NOFOLLOW, NONBLOCK, folder, refusal, refused, usable

MAX_MB_VARIABLE = "COPILOT_LOGS_CACHE_MAX_MB"
DEFAULT_MAX_MB = 2048
STALE_TEMPORARY_S = 3600
"""A temporary file older than this was left by a run that died mid-write: prune deletes it."""
SWEEP_INTERVAL_S = 86400
"""How often prune reads the entries' headers to find those whose log is gone."""
SWEPT = ".last-sweep"
"""An empty file of the store folder: its modification time is the last sweep's."""


def max_bytes() -> int:
    """The size cap: ``$COPILOT_LOGS_CACHE_MAX_MB`` megabytes (default 2048)."""
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
    """The files of the store folder named as ours, regular, owned by the user."""
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
    """The first bytes of a regular file of ours (never through a link, never waiting on a
    named pipe); None for anything else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or refusal(info) is not None:
            return None
        return os.read(descriptor, count)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _remove(where: str, name: str) -> bool:
    """Delete a file of the store folder when it is one copilot-logs wrote."""
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
    """The one field of an entry's header that every version of the store writes."""

    path: str


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
    trusted: bool = True
    """False when the store is not the user's own (:mod:`copilot_logs.store.trust`): it is
    not used, and nothing in it is counted."""


def info() -> Info:
    """Where the store is, how many logs it holds, and how many bytes it takes."""
    where = usable()
    if where is None:
        return Info(folder(), 0, 0, trusted=refused() is None)
    held = _held(where)
    entries = sum(1 for item in held if ENTRY_NAME.fullmatch(item.name))
    return Info(Path(where), entries, sum(item.size for item in held))


@dataclass(frozen=True)
class Cleared:
    """What ``cache clear`` did: the entries and bytes it removed, and the files of ours it
    could not remove."""

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
