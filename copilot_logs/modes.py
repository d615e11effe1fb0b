"""The files copilot-logs writes: their mode (that of the logs they hold text of, never more
open than the umask), and the one atomic write (:func:`atomic`).

A file made of several logs gets the bits they all share; standard input, or a log that cannot
be stat'ed, counts as 0600 (the CLI's own). docs/report.md, docs/export.md and docs/doctor.md
say so to the user.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

PRIVATE = 0o600  # Copilot CLI's own logs
_SHARED = 0o066  # what a log may give its group and others: read and write, never execute


def like(log_mode: int) -> int:
    """The mode of a file holding text of one log whose mode is ``log_mode``."""
    return PRIVATE | (log_mode & _SHARED)


def mode_of(logs: Iterable[Path | str | None]) -> int:
    """The mode of a file holding text of ``logs`` (``None``: standard input)."""
    shared = _SHARED
    for log in logs:
        try:
            shared &= os.stat(log).st_mode if log is not None else 0
        except (OSError, ValueError):  # gone, unreadable, or a name that is no path
            shared = 0
    return PRIVATE | shared


def create(path: Path, mode: int, *, replace: bool = False, dir_fd: int | None = None) -> int:
    """A file descriptor open for writing on a new file at ``path`` (in ``dir_fd`` when given),
    never through a link, with ``mode`` less the umask, also when an earlier attempt left a file
    there (``replace``: truncated; else an existing file is an error, FileExistsError)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_TRUNC if replace else os.O_EXCL
    descriptor = os.open(path, flags, mode, dir_fd=dir_fd)
    if hasattr(os, "fchmod"):  # POSIX: an existing file keeps its mode unless told
        umask = os.umask(0o077)  # read by setting it and putting it back
        os.umask(umask)
        try:
            os.fchmod(descriptor, mode & ~umask)
        except BaseException:
            os.close(descriptor)
            raise
    return descriptor


@contextlib.contextmanager
def atomic(
    path: Path | str,
    mode: int = PRIVATE,
    *,
    temporary: Path | None = None,
    dir_fd: int | None = None,
    durable: bool = False,
) -> Iterator[BinaryIO]:
    """A new file beside ``path`` (in ``dir_fd`` when given; ``mode`` less the umask;
    ``temporary``, named by the caller, else ``.<name>.<random>.tmp``) to write, renamed over
    ``path`` once written whole (and synced to disk first when ``durable``); on any failure it
    is removed, and ``path`` is as it was."""
    target = Path(path)
    temporary = temporary or target.with_name(f".{target.name}.{os.urandom(6).hex()}.tmp")
    descriptor = create(temporary, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            yield stream
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        at = {} if dir_fd is None else {"src_dir_fd": dir_fd, "dst_dir_fd": dir_fd}
        os.replace(temporary, target, **at)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise
