"""Opening a session log without surprises: never blocking on a named pipe, never failing on a
file name that is not UTF-8, and saying in one line why a log cannot be read and what to do."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Generic, Protocol, TypeVar

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


class NotALogFile(OSError):
    """A path that is not a regular file, or whose name cannot be shown."""


def display_name(path: Path | str) -> str:
    """The path as text that is valid UTF-8: bytes of a name that are not UTF-8 are shown as
    ``\\xff`` escapes (the path itself still opens the file)."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


def open_log(path: Path, *, buffered: bool = True) -> BinaryIO:
    """Open a log for reading; raises OSError (NotALogFile for a name that is not UTF-8 or a
    file that is not a regular one). Opened without blocking, so a named pipe nobody writes to
    is refused, not waited on. Not ``buffered``: a raw file, for a reader that reads in large
    blocks (fewer system calls per file)."""
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
    """A descriptor of the regular file at ``path``, opened without blocking (a named pipe
    nobody writes to is refused, not waited on); raises OSError (NotALogFile for a file that
    is not a regular one)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _regular(os.fstat(descriptor).st_mode)  # what was opened, if it changed since
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def read_spans(path: str | Path, spans: Sequence[tuple[int, int]]) -> list[bytes] | None:
    """The bytes of a regular log at each (offset, length) of ``spans``, read without a
    buffered stream (two small reads of each log are all a run from the store needs); None
    when it cannot be read, is not a regular file, or is shorter than a span."""
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
    """A binary stream read no further than byte ``end``: what a log held when the command
    reached it, however fast it is appended to meanwhile (``watch`` alone follows a log)."""

    def __init__(self, stream: BinaryIO, end: int, at: int | None = None) -> None:
        """``at``: where the stream is (asked of it when not given)."""
        self.stream = stream
        self.left = max(0, end - (stream.tell() if at is None else at))

    def read(self, size: int = -1, /) -> bytes:
        wanted = self.left if size < 0 else min(size, self.left)
        data = self.stream.read(wanted) if wanted else b""
        self.left -= len(data)
        return data


class _Located(Protocol):
    @property
    def path(self) -> Path | None: ...


class _Stamp(Protocol):
    @property
    def size(self) -> int: ...


class _Looked(Protocol):
    @property
    def stamp(self) -> _Stamp | None: ...


L = TypeVar("L", bound=_Located)


class Growth(Generic[L]):
    """Which logs grew while a command read them: their sizes when it reached them, taken now
    or, for logs looked up in the store (``found``), when they were looked up (a log that grows
    after that is answered as it was then); and their sizes at the end (:meth:`grown`)."""

    def __init__(self, logs: Sequence[L], found: Sequence[_Looked] | None = None) -> None:
        self.logs = logs
        self.sizes = _sizes(logs)
        if found is not None:  # a log the store could not stamp (unreadable) is as it is now
            self.sizes = [
                looked.stamp.size if looked.stamp else size
                for looked, size in zip(found, self.sizes, strict=True)
            ]

    def grown(self) -> list[L]:
        """The logs that are bigger now: each was read no further than it went when the
        command reached it, so what they gained since was not read."""
        now = _sizes(self.logs)
        return [
            log for log, then, size in zip(self.logs, self.sizes, now, strict=True) if size > then
        ]


def _sizes(logs: Sequence[_Located]) -> list[int]:
    """Each log's size now (0 for standard input, or a file that cannot be stat'ed)."""
    found = []
    for log in logs:
        try:
            found.append(os.stat(log.path).st_size if log.path is not None else 0)
        except OSError:
            found.append(0)
    return found


def _regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise NotALogFile(errno.EINVAL, f"{kind}, not a regular file")


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
