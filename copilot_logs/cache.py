"""A small per-file cache under the user's cache folder (never under ~/.copilot).

Entries are keyed on the file's resolved path and remembered with its size and modification
time: a file whose size and time are unchanged is not read again; one that only grew (its first
new line continues the parentId chain where the cached part ended) has just its new bytes read;
any other change means a full re-read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from copilot_logs.logfile import display_name

VERSION = 1


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/copilot-logs``, else ``~/.cache/copilot-logs``."""
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "copilot-logs"


class JsonCache:
    """One JSON file of entries, loaded once and written back only when something changed."""

    def __init__(self, name: str, folder: Path | None = None) -> None:
        self.path = (folder or cache_dir()) / f"{name}-v{VERSION}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        try:
            loaded = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            loaded = {}
        if isinstance(loaded, dict):
            self.entries = loaded

    @staticmethod
    def stamp(path: Path) -> tuple[str, int, int] | None:
        """(key, size, mtime_ns) of a file, or None when it cannot be stat'ed."""
        key = os.path.abspath(path)
        if not key.isascii() and display_name(Path(key)) != key:
            return None  # a name that is not UTF-8 cannot be a key (the reader reports it)
        try:
            info = path.stat()
        except OSError:
            return None
        return key, info.st_size, info.st_mtime_ns

    def get(self, path: Path) -> tuple[dict[str, Any] | None, str, int, int] | None:
        """The entry of an unchanged file (or None), with the file's key, size and mtime."""
        stamp = self.stamp(path)
        if stamp is None:
            return None
        key, size, mtime = stamp
        entry = self.entries.get(key)
        fresh = entry is not None and entry.get("size") == size and entry.get("mtime_ns") == mtime
        return (entry if fresh else None), key, size, mtime

    def previous(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, size: int, mtime: int, **values: Any) -> None:
        self.entries[key] = {"size": size, "mtime_ns": mtime, **values}
        self.dirty = True

    def save(self) -> None:
        """Write the entries back; a cache that cannot be written is simply not kept."""
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_bytes(orjson.dumps(self.entries))
            temporary.replace(self.path)
        except OSError:
            return
        self.dirty = False
