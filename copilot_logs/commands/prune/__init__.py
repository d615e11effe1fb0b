"""What ``copilot-logs prune`` would remove, and why (docs/disk.md, "prune").

A plan is made from a survey (:mod:`copilot_logs.commands.disk`): each session folder that a
criterion picks becomes an :class:`Item` with what is done to it (the whole folder, only its
``files/``, or only its stale lock files), unless a rule never lets it go (:class:`Held`; the
rules: docs/disk.md, "prune"). :mod:`copilot_logs.commands.prune.apply` carries a plan out,
checking everything again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from copilot_logs.commands import disk
from copilot_logs.commands.disk import Folder, Survey
from copilot_logs.commands.disk import locks as lock_files
from copilot_logs.ingest.logfile import Source

FOLDER, FILES, LOCKS = "folder", "files", "locks"
"""What is done: the whole session folder goes, only its ``files/`` goes, or only its stale
``inuse.<pid>.lock`` (and the ``.hold`` of the same pid) is unlinked."""


@dataclass(frozen=True)
class Criteria:
    """What to prune (any that holds picks a folder) and what to keep whatever it holds."""

    scaffolds: bool = False
    empty: bool = False
    abandoned: bool = False
    stale_locks: bool = False
    older_than: timedelta | None = None
    larger_than: int | None = None
    files_larger_than: int | None = None
    keep_newest: int = 5
    quiet_for: timedelta = timedelta(minutes=10)

    @property
    def any(self) -> bool:
        sizes = (self.older_than, self.larger_than, self.files_larger_than)
        kinds = (self.scaffolds, self.empty, self.abandoned, self.stale_locks)
        return any(kinds) or any(size is not None for size in sizes)


@dataclass
class Item:
    """One thing a plan does to one session folder."""

    folder: Folder
    category: str
    action: str
    why: list[str]
    """The criteria that picked it, as options (``--scaffolds``, ``--older-than 30d``...)."""
    bytes: int
    allocated_bytes: int
    locks: list[lock_files.Lock] = field(default_factory=list)
    """For :data:`LOCKS`: the stale lock files to unlink."""


@dataclass
class Held:
    """A folder a criterion picked that a rule keeps."""

    folder: Folder
    category: str
    why: list[str]
    reason: str


@dataclass
class Plan:
    items: list[Item]
    held: list[Held]
    now: float
    criteria: Criteria

    @property
    def roots(self) -> list[Path]:
        return list(dict.fromkeys(item.folder.root for item in self.items))


def plan(
    survey: Survey,
    figures: Mapping[str, Mapping[str, int]],
    criteria: Criteria,
    now: float,
    *,
    chosen: Mapping[Path, set[str] | None] | None = None,
    heavy: int = disk.HEAVY,
) -> Plan:
    """The plan over every session folder of the survey (``chosen``: the names of each root
    that may be picked, None for all; the others still count among the newest)."""
    made = Plan([], [], now, criteria)
    for root in survey.roots:
        ranked = sorted(root.folders, key=lambda f: (f.tree.newest_ns, f.name), reverse=True)
        newest = {folder.name for folder in ranked[: criteria.keep_newest]}
        names = chosen.get(root.path) if chosen is not None else None
        for folder in root.folders:
            if names is not None and folder.name not in names:
                continue
            log = figures.get(Source(folder.log_path, folder.name).name)
            _consider(made, folder, log, criteria, now, folder.name in newest, heavy)
    return made


def picks(
    folder: Folder, log: Mapping[str, int] | None, criteria: Criteria, now: float
) -> dict[str, list[str]]:
    """The criteria that pick ``folder``, by what they do to it."""
    held = disk.content(folder, dict(log) if log is not None else None)
    whole: list[str] = []
    if criteria.scaffolds and held == disk.SCAFFOLD:
        whole.append("--scaffolds")
    if criteria.empty and held == disk.EMPTY:
        whole.append("--empty")
    if criteria.abandoned and held == disk.ABANDONED:
        whole.append("--abandoned")
    age = now - folder.tree.newest_ns / 1e9
    if criteria.older_than is not None and age > criteria.older_than.total_seconds():
        whole.append("--older-than")
    if criteria.larger_than is not None and folder.tree.allocated_bytes > criteria.larger_than:
        whole.append("--larger-than")
    found = {FOLDER: whole}
    files = folder.tree.allocated["files"]
    if criteria.files_larger_than is not None and files > criteria.files_larger_than:
        found[FILES] = ["--files-larger-than"]
    if criteria.stale_locks and folder.lock == lock_files.STALE:
        found[LOCKS] = ["--stale-locks"]
    return {action: why for action, why in found.items() if why}


def keeps(
    folder: Folder, log: Mapping[str, int] | None, criteria: Criteria, now: float
) -> str | None:
    """The rule that keeps ``folder`` whatever picks it (None: none does; ``--keep-newest``,
    which does not keep a stale lock from being unlinked, is :func:`_consider`'s)."""
    refused = folder.refusal()
    if refused:
        return refused
    if folder.tree.log == "file" and log is None:
        return "its log could not be read"
    if folder.lock == lock_files.ACTIVE:
        return f"in use: {folder.lock_why}"
    if folder.lock == lock_files.UNKNOWN:
        return f"its lock cannot be judged: {folder.lock_why}"
    quiet = now - folder.tree.newest_ns / 1e9
    if quiet < criteria.quiet_for.total_seconds():
        return "written within --quiet-for"
    return None


def _consider(
    made: Plan,
    folder: Folder,
    log: Mapping[str, int] | None,
    criteria: Criteria,
    now: float,
    newest: bool,
    heavy: int,
) -> None:
    picked = picks(folder, log, criteria, now)
    if not picked:
        return
    category = disk.category(folder, dict(log) if log is not None else None, heavy)
    why = [reason for reasons in picked.values() for reason in reasons]
    reason = keeps(folder, log, criteria, now)
    if reason is not None:
        made.held.append(Held(folder, category, why, reason))
        return
    if newest and set(picked) - {LOCKS}:
        kept = [
            reason for action, reasons in picked.items() if action != LOCKS for reason in reasons
        ]
        made.held.append(Held(folder, category, kept, f"one of the {criteria.keep_newest} newest"))
        picked = {LOCKS: picked[LOCKS]} if LOCKS in picked else {}
    tree = folder.tree
    if FOLDER in picked:
        made.items.append(
            Item(folder, category, FOLDER, why, tree.bytes, tree.allocated_bytes, tree.locks)
        )
        return
    if FILES in picked:
        files = (tree.apparent["files"], tree.allocated["files"])
        made.items.append(Item(folder, category, FILES, picked[FILES], *files))
    if LOCKS in picked:
        stale = [lock for lock in tree.locks if lock.state == lock_files.STALE]
        made.items.append(Item(folder, category, LOCKS, picked[LOCKS], 0, 0, stale))
