"""Whether a session is held: its ``inuse.<pid>.lock``, judged by when the process that has that
pid started, against when the lock was written and when the machine booted (``active``,
``stale``, ``unknown``: docs/disk.md, "`disk`").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

NONE, ACTIVE, STALE, UNKNOWN = "none", "active", "stale", "unknown"
STATES = (NONE, ACTIVE, STALE, UNKNOWN)
_ORDER = {NONE: 0, STALE: 1, ACTIVE: 2, UNKNOWN: 3}
"""Several locks in one folder: the session is as held as its most held lock."""

LOCK = re.compile(r"inuse\.(\d{1,10})\.lock")
HOLD = re.compile(r"inuse\.(\d{1,10})\.hold")
ANY = re.compile(r"inuse\..*")
SLACK_SECONDS = 2.0
"""The boot time is known to the second and a start time to the clock tick: a process is taken
to have started after its lock only when it did by more than this."""

NETWORK_FILE_SYSTEMS = frozenset(
    {
        *("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre"),
        *("gpfs", "fuse.sshfs", "fuse.rclone", "fuse.s3fs", "fuse.gcsfuse", "davfs"),
        *("fuse.davfs", "virtiofs"),
    }
)


@dataclass(frozen=True)
class Lock:
    """One ``inuse.*`` file of a session folder, judged."""

    name: str
    pid: int | None
    state: str
    why: str
    inode: int
    mtime_ns: int


@dataclass(frozen=True)
class Clock:
    """What judging a lock needs of the machine: when it booted (None: not known here), its
    clock ticks per second, and where ``/proc`` is (a test may point it elsewhere)."""

    boot: float | None
    ticks: int
    proc: Path = Path("/proc")

    @classmethod
    def here(cls, proc: Path = Path("/proc")) -> Clock:
        return cls(_boot_time(proc), os.sysconf("SC_CLK_TCK"), proc)

    def started(self, pid: int) -> float | bool | None:
        """When process ``pid`` started (seconds since the epoch); False when no process has
        that pid; None when it cannot be known."""
        if self.boot is None:
            return None
        try:
            text = (self.proc / str(pid) / "stat").read_text("ascii", "replace")
        except FileNotFoundError:
            return False if _gone(pid) else None
        except OSError:
            return None
        # "pid (comm) state ppid ..." where comm may hold spaces and parentheses: the fields
        # are counted after its last ")"; starttime is field 22.
        fields = text[text.rfind(")") + 2 :].split()
        try:
            return self.boot + int(fields[19]) / self.ticks
        except (IndexError, ValueError):
            return None


def _boot_time(proc: Path) -> float | None:
    try:
        for line in (proc / "stat").read_text("ascii", "replace").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gone(pid: int) -> bool:
    """No process has ``pid`` (a process of another user, hidden from /proc, is not gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def judge(name: str, content: bytes, inode: int, mtime_ns: int, clock: Clock, now: float) -> Lock:
    """The state of the lock file ``name`` (its first bytes ``content``), written at
    ``mtime_ns``."""
    found = LOCK.fullmatch(name)
    if found is None:
        return Lock(name, None, UNKNOWN, "not a lock the CLI writes", inode, mtime_ns)
    pid = int(found[1])
    written = mtime_ns / 1e9

    def lock(state: str, why: str) -> Lock:
        return Lock(name, pid, state, why, inode, mtime_ns)

    if content.strip() and content.strip() != str(pid).encode():
        return lock(UNKNOWN, f"holds {content.strip()[:20]!r}, not its pid")
    if pid < 1 or written > now + SLACK_SECONDS:
        return lock(UNKNOWN, "its pid or time cannot be true")
    if clock.boot is not None and written < clock.boot - SLACK_SECONDS:
        return lock(STALE, "written before the last boot")
    started = clock.started(pid)
    if started is None:
        return lock(UNKNOWN, "the start time of processes cannot be known here")
    if started is False:
        return lock(STALE, f"pid {pid} is not running")
    if started > written + SLACK_SECONDS:
        return lock(STALE, f"pid {pid} started after the lock was written (a reused pid)")
    return lock(ACTIVE, f"pid {pid} has run since before the lock was written")


def held(locks: list[Lock]) -> str:
    """A folder's state, from its locks: the most held of them, ``none`` without any."""
    return max((lock.state for lock in locks), key=_ORDER.__getitem__, default=NONE)


def network_file_system(path: str, device: int, proc: Path = Path("/proc")) -> bool | None:
    """Whether ``path`` (on the file system of ``device``, its ``st_dev``) is on a network file
    system; None when it cannot be known (no ``/proc/self/mountinfo``). The mount is found by its
    device, else (a btrfs subvolume has a device of its own) by the longest mount point above
    ``path``."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        lines = (proc / "self" / "mountinfo").read_text("utf-8", "replace").splitlines()
    except OSError:
        return None
    kinds: list[tuple[str, str, str]] = []
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields = head.split(" ")
        if len(fields) > 4 and tail:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])
            kinds.append((fields[2], point, tail.split(" ", 1)[0]))
    for number, _point, kind in kinds:
        if number == wanted:
            return kind in NETWORK_FILE_SYSTEMS
    real = os.path.realpath(path)
    above = [
        (len(point), kind)
        for _number, point, kind in kinds
        if real == point or real.startswith(point.rstrip("/") + "/")
    ]
    return max(above)[1] in NETWORK_FILE_SYSTEMS if above else None
