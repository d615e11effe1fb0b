"""Which store folder and entries copilot-logs uses: its own, and nothing else.

As ssh treats its keys (docs/cache.md, "What the store trusts"): anything else is never read,
written over, chmod-ed or deleted; the logs are read without the store, and
:func:`take_notice` says why, once, for the command line to print.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
OWNED = hasattr(os, "geteuid")  # files have owners and modes (on Windows only links are refused)

_verdicts: dict[str, str | None] = {}  # each folder checked, and why it is not used (None: it is)
_notices: list[str] = []


def folder() -> Path:
    """The store folder: ``copilot-logs/store`` in the user's cache folder (on Linux
    ``$XDG_CACHE_HOME``, else ``~/.cache``; the platform's cache folder elsewhere)."""
    return Path(where())


def where() -> str:
    get = os.environ.get
    return _folder(get("XDG_CACHE_HOME"), get("HOME"), get("LOCALAPPDATA"))


@functools.cache
def _folder(*environment: str | None) -> str:
    """:func:`folder` for the variables platformdirs reads."""
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("copilot-logs", appauthor=False), "store")


def usable() -> str | None:
    """The store folder when it exists and is ours (checked once per folder, until
    :func:`recheck`); None otherwise."""
    path = where()
    if path not in _verdicts:
        _verdicts[path] = _refusal(path, create=False)
    return path if _verdicts[path] is None else None


def refused() -> str | None:
    """Why the store folder is there but not used (None: it is used, or absent)."""
    usable()
    reason = _verdicts.get(where())
    return None if reason == "absent" else reason


def private_folder() -> Path | None:
    """The store folder, created 0700 when missing and made so when others may read it; None
    when it is not ours (the reason is noted). Checked once per folder once found ours."""
    path = where()
    if path in _verdicts and _verdicts[path] is None:
        return Path(path)
    _verdicts[path] = _refusal(path, create=True)
    return Path(path) if _verdicts[path] is None else None


def _refusal(path: str, *, create: bool) -> str | None:
    """Why the store folder is not used ("absent" when it does not exist and ``create`` is
    false), or None. The reason is noted when it is more than absence."""
    app = os.path.dirname(path)
    root = os.path.dirname(app)
    try:
        if create:
            os.makedirs(root, mode=0o700, exist_ok=True)
        reason = _root_refusal(root)
        for folder_of_ours in (app, path):  # each checked before anything is made in it
            if reason is not None:
                break
            if create:
                with contextlib.suppress(FileExistsError):  # whatever is there is checked next
                    os.mkdir(folder_of_ours, 0o700)
            reason = _own_refusal(folder_of_ours)
    except FileNotFoundError:
        return "absent"
    except OSError as error:
        reason = f"{path} cannot be used ({error.strerror or error})"
    if reason is not None:
        note(f"{reason}: the store is not used, the logs are read without it (docs/cache.md)")
    return reason


def _root_refusal(root: str) -> str | None:
    """The cache folder (a link there is the user's choice): owned by the user or root, and
    others cannot rename our folder in it."""
    info = os.stat(root)
    if not stat.S_ISDIR(info.st_mode):
        return f"{root} is not a folder"
    if not OWNED:
        return None
    if info.st_uid not in (os.geteuid(), 0):
        return f"{root} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        return f"{root} is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _own_refusal(path: str) -> str | None:
    """``copilot-logs`` and ``store``: real folders of ours, which others can neither write
    nor read (made 0700 when they could read it: they hold previews of prompts)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link (never followed)"
    reason = refusal(info)
    if reason is not None or not stat.S_ISDIR(info.st_mode):
        return f"{path} {reason or 'is not a folder'}"
    if OWNED and info.st_mode & 0o077:
        descriptor = os.open(path, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC)
        try:
            opened = os.fstat(descriptor)
            if (opened.st_dev, opened.st_ino) == (info.st_dev, info.st_ino):
                os.fchmod(descriptor, 0o700)
        finally:
            os.close(descriptor)
    return None


def refusal(info: os.stat_result) -> str | None:
    if not OWNED:
        return None
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def open_entry(path: str | Path) -> int | None:
    """A descriptor of the entry at ``path`` when it is a regular file of ours (never through
    a link, never waiting on a named pipe); None otherwise (a foreign entry is noted)."""
    if usable() is None:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK | CLOEXEC)
    except OSError:
        return None  # absent, a link (ELOOP), or unreadable: nothing to serve
    try:
        info = os.fstat(descriptor)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        reason = refusal(info)
        if reason is None:
            return descriptor
        note(
            f"the store entry {path} {reason}: it is not used, its log is read without it "
            "(docs/cache.md)"
        )
    os.close(descriptor)
    return None


def replaceable(path: str | Path) -> bool:
    """Whether an entry may be written at ``path``: nothing is there, or a file of ours."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and refusal(info) is None


def note(message: str) -> None:
    if not _notices:
        _notices.append(message)


def recheck() -> None:
    _verdicts.clear()


def take_notice() -> str | None:
    """Why the store was not used in this run (one line, or None); the next run checks again."""
    message = _notices[0] if _notices else None
    _notices.clear()
    _verdicts.clear()
    return message
