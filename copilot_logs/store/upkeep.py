"""Keeping the store tidy: pruning what is gone or over the size cap, ``cache info|clear``."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from copilot_logs.store.entry import folder, load_header

MAX_MB_VARIABLE = "COPILOT_LOGS_CACHE_MAX_MB"
DEFAULT_MAX_MB = 2048
STALE_TEMPORARY_S = 3600
"""A temporary file older than this was left by a run that died mid-write: prune deletes it."""


def max_bytes() -> int:
    """The size cap: ``$COPILOT_LOGS_CACHE_MAX_MB`` megabytes (default 2048)."""
    try:
        megabytes = int(os.environ.get(MAX_MB_VARIABLE, DEFAULT_MAX_MB))
    except ValueError:
        megabytes = DEFAULT_MAX_MB
    return max(0, megabytes) << 20


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
    kept = [item for name in names if (item := _keep(where / name, time.time())) is not None]
    total = sum(size for _, size, _ in kept)
    for _, size, path in sorted(kept, key=lambda item: item[0]):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size


def _keep(path: Path, now: float) -> tuple[float, int, Path] | None:
    """(mtime, size, path) of a valid entry of a log that exists; anything else in the store
    folder is deleted (a temporary file only once it is stale) and gives None."""
    try:
        info = path.stat()
    except OSError:
        return None
    if path.name.endswith(".tmp"):
        if now - info.st_mtime > STALE_TEMPORARY_S:
            path.unlink(missing_ok=True)
        return None
    loaded = load_header(path) if path.name.endswith(".entry") else None
    if loaded is None or not os.path.exists(loaded[0].path):
        path.unlink(missing_ok=True)
        return None
    return info.st_mtime, info.st_size, path


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
