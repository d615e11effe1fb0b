"""``OUT/_manifest.json``: what an export wrote from which log, so that the next one into the same
folder writes only what changed (docs/export.md, "Exporting again"); and OUT itself: one export
at a time (``fcntl.flock`` on ``OUT/.copilot-logs-export.lock``), what cannot be written there
as one clear error.

A manifest of another :data:`VERSION`, or one whose parts cannot be trusted, makes the next
export write everything again. Only paths ``<table>/date=<day>/<name>.parquet`` inside OUT are
ever read, replaced or removed.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import msgspec
import orjson

from copilot_logs import modes
from copilot_logs.commands.export.files import PARTITION, RUN, TABLES, is_ours, written_files
from copilot_logs.errors import FULL, CopilotLogsError, ExitCode, WriteError
from copilot_logs.ingest.logfile import Source
from copilot_logs.store.entry import Stamp
from copilot_logs.store.key import Seen, State, growth, stamp_of

MANIFEST = "_manifest.json"
LOCK = ".copilot-logs-export.lock"
"""Held while an export writes into OUT (:mod:`copilot_logs.commands.export.manifest`)."""
FORMAT = "copilot-logs-export"
VERSION = 5
"""Bumped when a table's columns or the manifest change: an export of another version is
rewritten whole."""

_LISTED = re.compile(rf"(?:{'|'.join(TABLES)})/{PARTITION}=[^/\\]+/[^/\\]+\.parquet")


class ExportError(CopilotLogsError):
    """OUT cannot take an export: a file, a folder of other things, a foreign manifest."""

    exit_code = ExitCode.USAGE


@dataclass
class Part:
    """A batch of logs exported together, and the files (relative to OUT) holding their rows."""

    sources: list[str]
    files: list[str]


@dataclass
class Commit:
    """The moves that finish an export: each of ``files`` from its temporary name (see
    :func:`copilot_logs.commands.export.files.temporary`, run ``run``) into place; ``remove``
    deleted."""

    run: str
    files: list[str]
    remove: list[str]


@dataclass
class Manifest:
    sources: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Each log as it was when exported (:func:`record`); None: export it again."""
    parts: list[Part] = field(default_factory=list)
    commit: Commit | None = None
    stale: list[str] = field(default_factory=list)
    """Files listed by a manifest that is not trusted: to be removed."""


def record(seen: Seen) -> dict[str, Any]:
    """A source's entry in the manifest: its :class:`Seen`, the stamp's fields beside the rest."""
    fields = msgspec.structs.asdict(seen)
    return {**msgspec.structs.asdict(fields.pop("stamp")), **fields}


def unchanged(source: Source, entry: dict[str, Any] | None) -> bool:
    """Whether a source is the log its manifest entry was exported from, by the one growth
    check (a log that grew is changed: its rows are written again whole)."""
    if entry is None or source.path is None:
        return False
    stamp = stamp_of(source.path)
    seen = _seen(entry)
    return (
        stamp is not None and seen is not None and growth(seen, stamp, source.path) is State.FRESH
    )


def _seen(entry: dict[str, Any]) -> Seen | None:
    stamp = {name: entry.get(name) for name in _STAMP}
    rest = {name: value for name, value in entry.items() if name not in _STAMP}
    try:
        return msgspec.convert({**rest, "stamp": stamp}, Seen, strict=True)
    except msgspec.ValidationError:
        return None


_STAMP = frozenset(Stamp.__struct_fields__)
_FIELDS = (_STAMP | set(Seen.__struct_fields__)) - {"stamp"}


def listed(out: Path, relative: object) -> bool:
    """Whether a path a manifest names is one export may touch: a Parquet file of a table's
    partition folder, inside ``out`` (also once links are followed)."""
    if not isinstance(relative, str) or not _LISTED.fullmatch(relative):
        return False
    with suppress(OSError, RuntimeError):
        return out.resolve() in (out / relative).resolve().parents
    return False


def load(out: Path) -> Manifest:
    """The manifest of an earlier export into ``out`` (an empty one for a new or empty folder).

    Raises :class:`ExportError` when ``out`` is a file, a non-empty folder without our
    manifest, or holds a manifest that is not ours.
    """
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: not a folder; give a new or empty folder, or an earlier export")
    path = out / MANIFEST
    if not path.exists():
        refuse_foreign(out)
        return Manifest()
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise ExportError(f"{path}: cannot be read as an export manifest ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ExportError(f"{path}: not a manifest of copilot-logs export")
    sources = document.get("sources")
    if not isinstance(sources, dict):
        raise ExportError(f"{path}: has no sources; delete it and export again")
    return _parsed(out, document, sources)


def refuse_foreign(out: Path) -> None:
    """Raise :class:`ExportError` when ``out`` (without a manifest) holds other things."""
    if out.is_dir() and not holds_only_exports(out):
        raise ExportError(
            f"{out}: not empty and holds no {MANIFEST} of copilot-logs; "
            "give a new or empty folder, or an earlier export"
        )


def holds_only_exports(out: Path) -> bool:
    """Whether a folder without a manifest holds nothing but what an export writes (its
    lock, and files named as export names them, left by one that died before its first
    manifest): it is then taken as empty, and those files are removed."""
    try:
        for item in out.iterdir():
            if item.name == LOCK and item.is_file():
                continue
            if item.name not in TABLES or item.is_symlink() or not item.is_dir():
                return False
            for day in item.iterdir():
                if not day.name.startswith(f"{PARTITION}=") or day.is_symlink():
                    return False
                if not day.is_dir() or not all(is_ours(file) for file in day.iterdir()):
                    return False
    except OSError:
        return False
    return True


def _parsed(out: Path, document: dict[str, Any], sources: dict[str, Any]) -> Manifest:
    """A manifest of this version as it says; any other (or parts that cannot be read) as
    its sources all to export again and every file it lists to remove."""
    parts = document.get("parts")
    commit = document.get("commit")
    if document.get("version") == VERSION and isinstance(parts, list):
        read = [_part(out, part) for part in parts]
        moves = _commit(out, commit) if commit is not None else None
        if all(part is not None for part in read) and (commit is None or moves is not None):
            prints = {name: _entry(entry) for name, entry in sources.items()}
            return Manifest(prints, [part for part in read if part is not None], moves)
    entries = [*sources.values(), *(parts if isinstance(parts, list) else []), commit]
    listed_files = [*_strings(entries, "files"), *_strings(entries, "remove")]
    ours = written_files(out)  # those of a part that cannot be read are not listed
    stale = sorted({f for f in [*listed_files, *ours] if listed(out, f)})
    return Manifest({name: None for name in sources}, [], None, stale)


def _strings(entries: list[Any], key: str) -> list[str]:
    """The strings of ``entry[key]`` over the entries that are dicts holding a list there."""
    found: list[str] = []
    for entry in entries:
        values = entry.get(key) if isinstance(entry, dict) else None
        if isinstance(values, list):
            found += [value for value in values if isinstance(value, str)]
    return found


def _entry(entry: Any) -> dict[str, Any] | None:
    """A source's entry as a manifest of this version writes it, else None (export it again)."""
    whole = isinstance(entry, dict) and set(entry) == _FIELDS and _seen(entry) is not None
    return entry if whole else None


def _part(out: Path, entry: Any) -> Part | None:
    if not isinstance(entry, dict):
        return None
    sources, files = entry.get("sources"), entry.get("files")
    if not (_all_strings(sources) and _all_strings(files)):
        return None
    if not all(listed(out, file) for file in files):
        return None
    return Part(list(sources), list(files))


def _commit(out: Path, entry: Any) -> Commit | None:
    if not isinstance(entry, dict) or not RUN.fullmatch(str(entry.get("run"))):
        return None
    files, remove = entry.get("files"), entry.get("remove")
    if not (_all_strings(files) and _all_strings(remove)):
        return None
    if not all(listed(out, file) for file in [*files, *remove]):
        return None
    return Commit(entry["run"], list(files), list(remove))


def _all_strings(values: object) -> TypeGuard[list[str]]:
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


def save(out: Path, manifest: Manifest) -> None:
    """Write the manifest (atomically, 0600)."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "sources": manifest.sources,
        "parts": [{"sources": p.sources, "files": p.files} for p in manifest.parts],
    }
    if manifest.commit is not None:
        commit = manifest.commit
        document["commit"] = {"run": commit.run, "files": commit.files, "remove": commit.remove}
    out.mkdir(parents=True, exist_ok=True)
    with modes.atomic(out / MANIFEST) as stream:
        stream.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}
IN_THE_WAY = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR}


@contextmanager
def exporting(out: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold OUT's lock while an export writes in it (OUT is made when new); ``on_wait`` is
    called once when another export holds it. An OSError on the way is raised as one clear
    :class:`~copilot_logs.errors.CopilotLogsError`."""
    try:
        descriptor = _lock_file(out)
        try:
            _lock(descriptor, on_wait)
            yield
        finally:
            os.close(descriptor)
    except OSError as error:
        raise cannot_write(out, error) from None


def _lock_file(out: Path) -> int:
    if out.is_symlink() and not out.is_dir():
        raise ExportError(f"{out}: a link to no folder; give a new or empty folder")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: not a folder; give a new or empty folder, or an earlier export")
    if not (out / LOCK).exists() and not (out / MANIFEST).exists():
        refuse_foreign(out)  # before a lock file is left in a folder that is not an export
    out.mkdir(parents=True, exist_ok=True)
    return os.open(out / LOCK, os.O_RDWR | os.O_CREAT | NOFOLLOW | CLOEXEC, 0o600)


def _lock(descriptor: int, on_wait: Callable[[], None] | None) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks to take
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if on_wait is not None:
            on_wait()
        fcntl.flock(descriptor, fcntl.LOCK_EX)


def cannot_write(out: Path, error: OSError) -> CopilotLogsError:
    """One clear error for an OSError met while exporting into ``out``."""
    where = error.filename or out
    reason = error.strerror or str(error)
    if error.errno in FULL:
        return WriteError(
            f"{where}: cannot write ({reason}); free some space and export again "
            f"({out} is as the last finished export left it)"
        )
    if error.errno in DENIED:
        return ExportError(f"{where}: cannot write there ({reason}); give a folder you can write")
    if error.errno in IN_THE_WAY:
        blocking = in_the_way(Path(where), out)
        return ExportError(
            f"{blocking}: a file where export keeps a folder, or a folder where it writes a file; "
            f"move it out of {out}"
        )
    return WriteError(f"{where}: cannot write ({reason}); {out} is as the last export left it")


def in_the_way(path: Path, out: Path) -> Path:
    """The first thing from OUT down to ``path`` that is not what export would put there."""
    try:
        relative = path.relative_to(out)
    except ValueError:
        return path
    at = out
    for part in relative.parts[:-1]:
        at = at / part
        if at.exists() and not at.is_dir():
            return at
    return path
