"""One folder's bytes, as ``du -sb`` (apparent) and ``du -sB1`` (allocated) count them, without
ever following a link, opening a file that is not a folder, or holding more than one folder
open at a time (so ``ulimit -n 64`` and a tree thousands deep are fine).

Each folder is opened by its path with ``O_NOFOLLOW`` and checked, on the descriptor, to be the
very folder its parent listed (device and inode): a folder swapped for a link to somewhere else
while the walk runs is never listed, and the walk says so (``changed``). A file with several
links is counted once over a whole survey (``seen``), as ``du`` counts it once over its
arguments. A folder on another file system is not entered (``mounts``); one that cannot be
listed leaves the count partial (``unreadable``).

Inside a session folder the bytes are split by where they sit: the log (``events.jsonl``),
``files/``, ``checkpoints/``, the rewind snapshots (``rewind-file-snapshots/``) and the rest
(the folder itself among them).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from copilot_logs.commands.disk import locks as lock_files

LOG = "events.jsonl"
PARTS = ("log", "files", "checkpoints", "rewind", "other")
_TOP = dict(zip((LOG, "files", "checkpoints", "rewind-file-snapshots"), PARTS[:4], strict=True))

SCAFFOLD_FILES = frozenset(
    {"workspace.yaml", ".workspace-fork.lock", "checkpoints/index.md"}
    | {"rewind-file-snapshots/tracking.json"}
)
SCAFFOLD_FOLDERS = frozenset({"checkpoints", "files", "research", "rewind-file-snapshots"})
"""What the CLI writes into a session folder before the first event (1.0.102): a folder holding
nothing else and no log is a scaffold (an aborted start, an interactive resume never used)."""

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
LOCK_BYTES = 64
"""What is read of a lock file: the CLI writes its pid and a newline."""

Identity = tuple[int, int]
"""A file's (device, inode)."""


@dataclass
class Tree:
    """What a walk of one folder found."""

    apparent: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PARTS, 0))
    allocated: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PARTS, 0))
    files: int = 0
    """Entries that are not folders, each name counted."""
    newest_ns: int = 0
    log: str | None = None
    """``file`` when ``events.jsonl`` is a regular file, ``other`` when it is something else
    (a link, a pipe), None when there is none."""
    scaffold: bool = True
    """Nothing but what the CLI writes before the first event."""
    # relative paths: owned by another user; folders on another file system (not entered);
    # not listed or stat'ed (the sizes are partial); not what their parent listed (swapped)
    foreign: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    locks: list[lock_files.Lock] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PARTS, 0))
    """Per part, a sum over every entry in it of a hash of its path, type, inode, size and
    time: equal for two walks of an unchanged tree in one process, whatever order the folders
    list their entries in. The folder walked is not in it (its time changes when it is
    moved)."""

    @property
    def bytes(self) -> int:
        return sum(self.apparent.values())

    @property
    def allocated_bytes(self) -> int:
        return sum(self.allocated.values())

    def fingerprint(self, *, but: str | None = None) -> int:
        """The sum of :attr:`marks` (all parts, or all but ``but``)."""
        return sum(mark for part, mark in self.marks.items() if part != but) & _MASK

    @property
    def partial(self) -> bool:
        return bool(self.unreadable or self.changed)


_MASK = (1 << 64) - 1


def _mark(relative: str, st: os.stat_result) -> int:
    # Python's own hash: fast, and a fingerprint is only ever compared within one process
    # (a plan and its apply), where the hash of a text stays the same.
    return hash((relative, st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns)) & _MASK


Judge = Callable[[str, bytes, int, int], lock_files.Lock]
"""How a lock file is judged: its name, first bytes, inode and mtime (ns) -> a Lock."""


def walk(
    path: str,
    identity: Identity,
    *,
    seen: set[Identity] | None = None,
    session: bool = True,
    judge: Judge | None = None,
    uid: int | None = None,
) -> Tree:
    """Walk the folder at ``path``, which must be the folder ``identity`` (as listed by its
    parent). ``seen``: files with several links counted already (updated); ``session``: split
    by the parts of a session folder and judge its scaffold and locks (with ``judge``);
    ``uid``: whose files are not foreign (default: this process's)."""
    tree = Tree()
    owner = os.geteuid() if uid is None else uid
    counted = seen if seen is not None else set()
    stack: list[tuple[str, str, Identity]] = [("", "other", identity)]
    first = True
    while stack:
        relative, part, expected = stack.pop()
        try:
            fd = os.open(os.path.join(path, relative) if relative else path, _OPEN_DIR)
        except OSError as error:
            (
                tree.changed if error.errno in (errno.ELOOP, errno.ENOTDIR) else tree.unreadable
            ).append(relative or ".")
            continue
        try:
            own = os.fstat(fd)
            if (own.st_dev, own.st_ino) != expected:
                tree.changed.append(relative or ".")
                continue
            if first:
                first = False
                _count(tree, "", "other", own, counted, owner)
            _list(tree, fd, relative, part, own.st_dev, stack, counted, owner, session, judge)
        except OSError:
            tree.unreadable.append(relative or ".")
        finally:
            os.close(fd)
    if session and tree.log is not None:
        tree.scaffold = False
    return tree


def _list(
    tree: Tree,
    fd: int,
    relative: str,
    part: str,
    device: int,
    stack: list[tuple[str, str, Identity]],
    counted: set[Identity],
    owner: int,
    session: bool,
    judge: Judge | None,
) -> None:
    """Count the entries of the open folder ``fd`` and stack its subfolders."""
    with os.scandir(fd) as listing:
        for entry in listing:
            name = entry.name
            inner = f"{relative}/{name}" if relative else name
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while listed
            except OSError:
                tree.unreadable.append(inner)
                continue
            here = (_TOP.get(name, "other") if not relative else part) if session else part
            if stat.S_ISDIR(st.st_mode):
                if st.st_dev != device:
                    tree.mounts.append(inner)
                    continue
                _count(tree, inner, here, st, counted, owner)
                stack.append((inner, here, (st.st_dev, st.st_ino)))
            else:  # a file, a link, a pipe...: counted by name, never opened
                tree.files += 1
                _count(tree, inner, here, st, counted, owner)
            if session:
                _session_entry(tree, fd, relative, inner, name, st, judge)


def _count(
    tree: Tree,
    relative: str,
    part: str,
    st: os.stat_result,
    counted: set[Identity],
    owner: int,
) -> None:
    if relative:
        tree.marks[part] = (tree.marks[part] + _mark(relative, st)) & _MASK
    tree.newest_ns = max(tree.newest_ns, st.st_mtime_ns)
    if st.st_uid != owner:
        tree.foreign.append(relative or ".")
    if st.st_nlink > 1:
        key = (st.st_dev, st.st_ino)
        if key in counted:
            return
        counted.add(key)
    tree.apparent[part] += st.st_size
    tree.allocated[part] += st.st_blocks * 512


def _session_entry(
    tree: Tree,
    fd: int,
    relative: str,
    inner: str,
    name: str,
    st: os.stat_result,
    judge: Judge | None,
) -> None:
    """What one entry says of the session: its log, its locks, whether it is scaffold."""
    regular = stat.S_ISREG(st.st_mode)
    if not relative and name == LOG:
        tree.log = "file" if regular else "other"
    top_lock = not relative and lock_files.ANY.fullmatch(name) is not None
    if top_lock and lock_files.HOLD.fullmatch(name) is None and judge is not None:
        content = lock_content(fd, name, st) if regular else b"\0"
        tree.locks.append(judge(name, content, st.st_ino, st.st_mtime_ns))
    if stat.S_ISDIR(st.st_mode):
        scaffold = inner in SCAFFOLD_FOLDERS
    else:
        scaffold = regular and (inner in SCAFFOLD_FILES or top_lock)
    if not scaffold:
        tree.scaffold = False


def lock_content(folder_fd: int, name: str, listed: os.stat_result) -> bytes:
    """The first bytes of a lock file; ``\\0`` (which no pid reads as) when it is not the file
    listed or cannot be read."""
    found = read_at(folder_fd, name, LOCK_BYTES, (listed.st_dev, listed.st_ino))
    return b"\0" if found is None else found


@contextmanager
def opened(
    name: str | os.PathLike[str],
    dir_fd: int | None = None,
    *,
    identity: Identity | None = None,
    regular: bool = False,
) -> Iterator[int]:
    """A descriptor of the folder (with ``regular``, the regular file) ``name`` in ``dir_fd``,
    opened without following a link or blocking, checked to be ``identity`` when given; OSError
    when it is not."""
    fd = os.open(name, _OPEN_FILE if regular else _OPEN_DIR, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if regular and not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        if identity is not None and (st.st_dev, st.st_ino) != identity:
            raise OSError(0, "replaced since the plan")
        yield fd
    finally:
        os.close(fd)


def read_at(dir_fd: int, name: str, limit: int, identity: Identity | None = None) -> bytes | None:
    """The first ``limit`` bytes of the regular file ``name`` in ``dir_fd`` (see
    :func:`opened`); None when it cannot be read."""
    try:
        with opened(name, dir_fd, identity=identity, regular=True) as fd:
            return os.read(fd, limit)
    except OSError:
        return None
