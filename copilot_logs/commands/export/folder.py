"""OUT itself: one export at a time, and what cannot be written there as one clear error.

An export holds a lock on ``OUT/.copilot-logs-export.lock`` (``fcntl.flock``, released by the
system when the process ends, however it ends) from before it reads the manifest until its
files are in place: a second export into OUT waits for it, then finds its work done. The lock
file stays (removing it would let a third export lock another file while the second waits on
this one). On a system without ``fcntl`` (Windows) exports are not locked.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from copilot_logs.commands.export.manifest import LOCK, MANIFEST, ExportError, refuse_foreign
from copilot_logs.errors import FULL, CopilotLogsError, WriteError

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
