"""The results cache: what a command's core function gave for a batch of unchanged files.

A command maps its core function over batches of files (:mod:`copilot_logs.corpus`). When
neither the function (with its options), nor copilot-logs' own code, nor any file of a batch
(path, name, size, modification time) has changed since a run that computed it, the batch's
value and damage report are served from here without reading a byte of the logs. A batch with
any change misses, and is computed from the events cache (:mod:`copilot_logs.store`) as
before, so a cached value is never stale: it is only ever found under the exact inputs that
produced it.

Entries are pickles under ``<cache folder>/results-v1/``, one per batch, named by a hash of
those inputs; the least recently used are deleted beyond :data:`MAX_ENTRIES`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from copilot_logs.cache import JsonCache, cache_dir
from copilot_logs.envelope import Source

NAME = "results"
VERSION = 1
MAX_ENTRIES = 1024
"""About 24 GB of logs' worth of batches of one command (each entry is tens of KB); the least
recently used beyond are deleted when a run writes."""

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def code_stamp() -> str:
    """The size and modification time of every module of copilot-logs: a cached value is never
    served to code other than the code that computed it (an upgrade or an edit)."""
    parts = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        info = path.stat()
        parts.append(f"{path.relative_to(_PACKAGE)}:{info.st_size}:{info.st_mtime_ns}")
    return "\n".join(parts)


def describe(fn: Callable[..., Any]) -> str | None:
    """A stable text naming ``fn`` and its bound options, or None when it has none (a lambda,
    a closure, an option that has no stable text): such a function is never cached."""
    if isinstance(fn, functools.partial):
        inner = describe(fn.func)
        args = [_stable(value) for value in fn.args]
        options = [(name, _stable(value)) for name, value in sorted(fn.keywords.items())]
        texts = [*args, *(f"{name}={text}" for name, text in options if text is not None)]
        if inner is None or len(texts) != len(args) + len(options) or None in texts:
            return None
        return f"{inner}({', '.join(t for t in texts if t is not None)})"
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not name or "<" in name:
        return None
    return f"{module}.{name}"


def _stable(value: Any) -> str | None:
    """The text of an option value that is the same in every process (set order is not)."""
    if value is None or isinstance(value, bool | int | float | str | date | datetime | timedelta):
        return repr(value)
    if isinstance(value, set | frozenset):
        items = [_stable(item) for item in value]
        stable = [item for item in items if item is not None]
        return "{" + ", ".join(sorted(stable)) + "}" if len(stable) == len(items) else None
    if isinstance(value, tuple | list):
        items = [_stable(item) for item in value]
        stable = [item for item in items if item is not None]
        return "[" + ", ".join(stable) + "]" if len(stable) == len(items) else None
    return None


class ResultCache:
    """The cached values of one function (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], folder: Path | None = None) -> None:
        self.folder = (folder or cache_dir()) / f"{NAME}-v{VERSION}"
        described = describe(fn)
        self.fn = None if described is None else f"{described}\n{code_stamp()}"

    def key(self, group: Sequence[Source]) -> str | None:
        """The entry name of a batch, or None when it cannot be cached (standard input, a file
        that cannot be stat'ed, a function with no stable description)."""
        if self.fn is None:
            return None
        digest = hashlib.sha256(self.fn.encode())
        for source in group:
            stamp = JsonCache.stamp(source.path) if source.path is not None else None
            if stamp is None:
                return None
            where, size, mtime = stamp
            digest.update(
                f"\n{where}\t{source.name}\t{source.session_hint}\t{size}\t{mtime}".encode()
            )
        return digest.hexdigest()

    def get(self, key: str | None) -> Any:
        """The value stored under ``key``, or None; anything unreadable is a miss."""
        if key is None:
            return None
        path = self.folder / f"{key}.pickle"
        try:
            with path.open("rb") as stream:
                value = pickle.load(stream)
            os.utime(path)  # recently used: kept when old entries are deleted
        except Exception:  # a damaged or foreign entry is a miss, never an error
            return None
        return value

    def put(self, key: str | None, value: Any) -> None:
        """Store ``value``; a cache that cannot be written is simply not kept."""
        if key is None:
            return
        path = self.folder / f"{key}.pickle"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            with temporary.open("wb") as stream:
                pickle.dump(value, stream, protocol=pickle.HIGHEST_PROTOCOL)
            temporary.replace(path)
        except (OSError, pickle.PicklingError):
            return

    def prune(self, limit: int = MAX_ENTRIES) -> None:
        """Delete the least recently used entries beyond ``limit``."""
        try:
            entries = [(p.stat().st_mtime_ns, p) for p in self.folder.glob("*.pickle")]
        except OSError:
            return
        if len(entries) <= limit:
            return
        entries.sort()
        for _, path in entries[: len(entries) - limit]:
            path.unlink(missing_ok=True)
