"""A session log to read, opened without surprises: never blocking on a named pipe, never failing
on a file name that is not UTF-8, and saying in one line why a log cannot be read and what to do."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

STDIN = "<stdin>"
"""The name standard input goes by (in the file column, in messages)."""

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


@dataclass(frozen=True)
class Source:
    """One session log to read: a file on disk, or standard input when ``path`` is None."""

    path: Path | None
    session_hint: str
    """The id the layout gives (folder or file name), used when the log has no session.start."""
    only: tuple[str, ...] = ()
    """Session ids or id prefixes the user selected this log by: only the log's sessions whose
    id starts with one of them are kept, or all when none does. Empty: every session."""

    @property
    def name(self) -> str:
        """The path as valid UTF-8 text (a name that is not UTF-8 shows ``\\xff`` escapes)."""
        return display_name(self.path) if self.path is not None else STDIN

    @property
    def size(self) -> int:
        """Bytes on disk now (0 for stdin or a file that cannot be stat'ed)."""
        try:
            return self.path.stat().st_size if self.path is not None else 0
        except OSError:
            return 0


class Readable(Protocol):
    """What the line splitter reads from: an open binary file, stdin, or a wrapper."""

    def read(self, size: int = -1, /) -> bytes: ...


class NotALogFile(OSError):
    """A path that is not a regular file, or whose name cannot be shown."""


def display_name(path: Path | str) -> str:
    """The path as valid UTF-8 text: bytes that are not UTF-8 shown as ``\\xff`` escapes."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


def open_log(path: Path, *, buffered: bool = True) -> BinaryIO:
    """Open a log for reading, without blocking (a named pipe nobody writes to is refused);
    raises OSError (NotALogFile for a name that is not UTF-8 or a file that is not a regular
    one). Not ``buffered``: a raw file, for a reader that reads in large blocks."""
    if display_name(path) != str(path):
        raise NotALogFile(errno.EILSEQ, "its path is not valid UTF-8")
    try:
        descriptor = _open_regular(path)
    except NotALogFile:
        raise
    except OSError as error:  # a socket cannot even be opened: say what it is
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise error from None
        _regular(mode)
        raise
    try:
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb", buffering=-1 if buffered else 0)
    except BaseException:
        os.close(descriptor)
        raise


def _open_regular(path: str | Path) -> int:
    """A descriptor of the regular file at ``path``, opened without blocking."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _regular(os.fstat(descriptor).st_mode)  # what was opened, if it changed since
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise NotALogFile(errno.EINVAL, f"{kind}, not a regular file")


def read_spans(path: str | Path, spans: Sequence[tuple[int, int]]) -> list[bytes] | None:
    """The bytes of a regular log at each (offset, length) of ``spans``; None when it cannot be
    read, is not a regular file, or is shorter than a span."""
    try:
        descriptor = _open_regular(path)
    except OSError:
        return None
    try:
        got = [os.pread(descriptor, length, offset) for offset, length in spans]
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if any(len(part) != length for part, (_, length) in zip(got, spans, strict=True)):
        return None
    return got


class Capped:
    """A binary stream read no further than byte ``end`` (``at``: where the stream is): what a
    log held when the command reached it, however fast it is appended to meanwhile."""

    def __init__(self, stream: BinaryIO, end: int, at: int | None = None) -> None:
        self.stream = stream
        self.left = max(0, end - (stream.tell() if at is None else at))

    def read(self, size: int = -1, /) -> bytes:
        wanted = self.left if size < 0 else min(size, self.left)
        data = self.stream.read(wanted) if wanted else b""
        self.left -= len(data)
        return data


class Growth:
    """Which logs grew while a command read them: their sizes when it reached them, taken now
    or, for logs looked up in the store (``found``: each with its ``stamp``), when they were
    looked up; and the logs bigger at the end (:meth:`grown`), whose growth was not read."""

    def __init__(self, logs: Sequence[Source], found: Sequence[Any] | None = None) -> None:
        self.logs = logs
        # a log the store could not stamp (unreadable) is as it is now: stat'ed only then
        stamps = [looked.stamp for looked in found] if found is not None else [None] * len(logs)
        self.sizes = [
            stamp.size if stamp else log.size for log, stamp in zip(logs, stamps, strict=True)
        ]

    def grown(self) -> list[Source]:
        return [log for log, then in zip(self.logs, self.sizes, strict=True) if log.size > then]


def why_unreadable(path: Path, error: OSError) -> str:
    """One line: why the log cannot be read, and what to do."""
    if isinstance(error, NotALogFile):
        if error.errno == errno.EILSEQ:
            return f"{error.strerror} (shown with \\x escapes): rename it to read it"
        return (
            f"cannot read the file: it is {error.strerror}; give its content on standard "
            "input (`-`) or copy it to a file"
        )
    if isinstance(error, FileNotFoundError) and os.path.islink(path):
        return "a broken symbolic link (its target does not exist): restore it or remove the link"
    if error.errno == errno.ELOOP:
        return "a symbolic link that loops: point it at a file or remove it"
    if isinstance(error, PermissionError):
        return "cannot read the file: permission denied; check its and its folder's permissions"
    return f"cannot read the file: {error.strerror or error}"
