"""Carrying out a prune plan, one folder at a time, each checked again just before it moves.

Every move is made relative to a descriptor of the root checked to be the folder surveyed,
never through a path a link could redirect; the trash, its undo, the checks before and after
each move, ``--delete`` and the record each apply leaves: docs/disk.md, "`prune`".
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from copilot_logs import modes
from copilot_logs.commands.disk import TRASH, Root, Survey, lock_judge
from copilot_logs.commands.disk import locks as lock_files
from copilot_logs.commands.disk.walk import LOG, Judge, Tree, lock_content, opened, walk
from copilot_logs.commands.prune import FILES, FOLDER, LOCKS, Item, Plan
from copilot_logs.errors import WriteError
from copilot_logs.ingest.logfile import Source, display_name

RUN_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")
"""A run of prune in the trash: ``<UTC time>-<random>``, a folder and its ``.json`` record."""
RECORD_FORMAT = "copilot-logs-prune"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def removal_resists_symlink_attacks() -> bool:
    """Whether this platform's :func:`shutil.rmtree` works on descriptors (``--delete`` and
    ``--empty-trash`` are refused where it does not)."""
    return bool(getattr(shutil.rmtree, "avoids_symlink_attacks", False))


@dataclass
class Done:
    item: Item
    to: str | None
    """Where it went (in the trash); None when deleted, or for unlinked locks."""
    deleted: bool = False
    unlinked: list[str] = field(default_factory=list)
    log_sha256: str | None = None
    left: str | None = None
    """Why a removal stopped part way (what is left stays in the trash)."""


@dataclass
class Skipped:
    item: Item
    why: str


@dataclass
class Applied:
    done: list[Done] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    records: list[str] = field(default_factory=list)


def apply(
    plan: Plan,
    survey: Survey,
    *,
    delete: bool = False,
    exported: set[str] | None = None,
    exported_to: Path | None = None,
    clock: lock_files.Clock | None = None,
    now: Callable[[], float] = time.time,
) -> Applied:
    """Carry ``plan`` out. ``exported``: the logs an export holds whole (``--export-to``; None
    for ``--no-export``): a folder whose log is not among them stays."""
    judged = clock or lock_files.Clock.here()
    applied = Applied()
    roots = {root.path: root for root in survey.roots}
    for path in plan.roots:
        items = [item for item in plan.items if item.folder.root == path]
        _RootRun(roots[path], judged, now, plan, delete, exported, exported_to, applied).run(items)
    return applied


@dataclass
class _RootRun:
    """One root's part of an apply: its descriptor, its trash, its record."""

    root: Root
    clock: lock_files.Clock
    now: Callable[[], float]
    plan: Plan
    delete: bool
    exported: set[str] | None
    exported_to: Path | None
    applied: Applied
    fd: int = -1
    trash_fd: int = -1
    run_fd: int = -1
    network: bool | None = None
    name: str = field(
        default_factory=lambda: datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(4)
    )
    done: list[Done] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def run_path(self) -> Path:
        return self.root.path / TRASH / self.name

    def run(self, items: list[Item]) -> None:
        try:
            self.fd = os.open(self.root.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            self._skip_all(items, f"the root cannot be opened ({error.strerror})")
            return
        try:
            own = os.fstat(self.fd)
            if (own.st_dev, own.st_ino) != self.root.identity:
                self._skip_all(items, "the root is no longer the folder surveyed")
                return
            self.network = lock_files.network_file_system(str(self.root.path), own.st_dev)
            for item in items:
                self._one(item)
            if self.done or self.skipped:
                self._record()
        finally:
            for fd in (self.run_fd, self.trash_fd, self.fd):
                if fd >= 0:
                    os.close(fd)
            self.applied.done += self.done
            self.applied.skipped += self.skipped

    def _skip_all(self, items: Iterable[Item], why: str) -> None:
        self.skipped += [Skipped(item, why) for item in items]

    def _one(self, item: Item) -> None:
        self.judge: Judge = lock_judge(self.network, self.clock, self.now())
        if item.action == LOCKS:
            self._unlock(item)
            return
        folder = item.folder
        held = self.exported is None or Source(folder.log_path, folder.name).name in self.exported
        if item.action == FOLDER and folder.tree.log == "file" and not held:
            self.skipped.append(Skipped(item, "its log is not in the export whole"))
            return
        why, tree = self._recheck(item)
        if why is not None or tree is None:
            self.skipped.append(Skipped(item, why or "changed"))
            return
        try:
            self._open_trash()
            if item.action == FOLDER:
                self._move_folder(item, tree)
            else:
                self._move_files(item, tree)
        except OSError as error:
            self.skipped.append(Skipped(item, f"could not be moved ({error.strerror or error})"))

    # --- checks ---------------------------------------------------------------------------

    def _recheck(self, item: Item) -> tuple[str | None, Tree | None]:
        """Why ``item`` may no longer go, and the folder as it is now."""
        folder = item.folder
        try:
            st = os.stat(folder.name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return "gone since the plan", None
        except OSError as error:
            return f"cannot be looked at ({error.strerror})", None
        if stat.S_ISLNK(st.st_mode):
            return "now a link", None
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != folder.identity:
            return "replaced since the plan", None
        if st.st_uid != os.geteuid():
            return "now another user's", None
        tree = walk(str(folder.path), folder.identity, judge=self.judge)
        return self._still(folder.tree, tree), tree

    def _still(
        self, planned: Tree, tree: Tree, *, but: str | None = None, moved: bool = False
    ) -> str | None:
        """Why ``tree`` (a folder walked again) is no longer the one planned; None when it
        is (``but``: a part allowed to differ; ``moved``: walked just after a move, when
        ``--quiet-for`` was checked already)."""
        if tree.changed:
            return f"changed while checked ({display_name(tree.changed[0])} swapped)"
        if tree.unreadable:
            return f"could not be read whole ({display_name(tree.unreadable[0])})"
        if tree.foreign or tree.mounts:
            return "now holds files of another user or another file system"
        state = lock_files.held(tree.locks)
        if state in (lock_files.ACTIVE, lock_files.UNKNOWN):
            held = next(lock for lock in tree.locks if lock.state == state)
            return f"in use now: {held.why}" if state == lock_files.ACTIVE else held.why
        if tree.fingerprint(but=but) != planned.fingerprint(but=but):
            return "changed since the plan (written to, or something in it replaced)"
        quiet = self.now() - tree.newest_ns / 1e9
        if not moved and quiet < self.plan.criteria.quiet_for.total_seconds():
            return "written within --quiet-for"
        return None

    # --- moves ----------------------------------------------------------------------------

    def _open_trash(self) -> None:
        if self.run_fd >= 0:
            return
        if self.trash_fd < 0:
            self.trash_fd = _own_folder(self.fd, TRASH, self.root.identity[0])
        os.mkdir(self.name, 0o700, dir_fd=self.trash_fd)
        self.run_fd = _own_folder(self.trash_fd, self.name, self.root.identity[0])

    def _move_folder(self, item: Item, tree: Tree) -> None:
        folder = item.folder
        digest = _log_sha256(self.fd, folder.name) if folder.tree.log == "file" else None
        os.rename(folder.name, folder.name, src_dir_fd=self.fd, dst_dir_fd=self.run_fd)
        after = walk(str(self.run_path / folder.name), folder.identity, judge=self.judge)
        why = self._still(tree, after, moved=True)
        if why is not None:
            os.rename(folder.name, folder.name, src_dir_fd=self.run_fd, dst_dir_fd=self.fd)
            self.skipped.append(Skipped(item, f"taken during the move, put back: {why}"))
            return
        self._done(
            Done(item, display_name(self.run_path / folder.name), log_sha256=digest), folder.name
        )

    def _move_files(self, item: Item, tree: Tree) -> None:
        folder = item.folder
        with opened(folder.name, self.fd, identity=folder.identity) as inside:
            st = os.stat("files", dir_fd=inside, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                self.skipped.append(Skipped(item, "its files/ is no longer a folder"))
                return
            target = f"{folder.name}.files"
            os.rename("files", target, src_dir_fd=inside, dst_dir_fd=self.run_fd)
            os.mkdir("files", 0o700, dir_fd=inside)
            after = walk(str(folder.path), folder.identity, judge=self.judge)
            why = self._still(tree, after, but="files", moved=True)
            if why is not None:
                os.rmdir("files", dir_fd=inside)
                os.rename(target, "files", src_dir_fd=self.run_fd, dst_dir_fd=inside)
                self.skipped.append(Skipped(item, f"taken during the move, put back: {why}"))
                return
        self._done(Done(item, display_name(self.run_path / target)), target)

    def _done(self, done: Done, moved: str) -> None:
        """A move done; with ``--delete``, what was moved (``moved`` in the run's folder) is
        removed from the trash."""
        if self.delete:
            done.left = _remove(self.run_fd, moved)
            done.deleted = done.left is None
            done.to = None if done.deleted else done.to
        self.done.append(done)

    def _unlock(self, item: Item) -> None:
        """Unlink each stale lock of ``item`` (and the ``.hold`` of its pid) relative to the
        session folder's descriptor, after checking its inode and time and judging it again."""
        unlinked: list[str] = []
        why = ""
        with contextlib.ExitStack() as stack:
            try:
                inside = stack.enter_context(
                    opened(item.folder.name, self.fd, identity=item.folder.identity)
                )
            except OSError as error:
                self.skipped.append(Skipped(item, f"cannot be opened ({error.strerror or error})"))
                return
            for lock in item.locks:
                reason = self._unlink_lock(inside, lock, unlinked)
                why = why or reason or ""
        if unlinked:
            self.done.append(Done(item, None, unlinked=unlinked))
        else:
            self.skipped.append(Skipped(item, why or "no stale lock left"))

    def _unlink_lock(self, inside: int, lock: lock_files.Lock, unlinked: list[str]) -> str | None:
        try:
            st = os.stat(lock.name, dir_fd=inside, follow_symlinks=False)
        except FileNotFoundError:
            return "its lock is gone already"
        listed = (st.st_ino, st.st_mtime_ns) == (lock.inode, lock.mtime_ns)
        if not stat.S_ISREG(st.st_mode) or not listed:
            return "its lock changed since the plan"
        again = self.judge(
            lock.name, lock_content(inside, lock.name, st), st.st_ino, st.st_mtime_ns
        )
        if again.state != lock_files.STALE:
            return f"its lock is no longer stale: {again.why}"
        os.unlink(lock.name, dir_fd=inside)
        unlinked.append(lock.name)
        hold = f"inuse.{lock.pid}.hold"
        try:
            held = os.stat(hold, dir_fd=inside, follow_symlinks=False)
        except OSError:
            return None
        if stat.S_ISREG(held.st_mode) and held.st_size == 0:
            os.unlink(hold, dir_fd=inside)
            unlinked.append(hold)
        return None

    # --- the record -----------------------------------------------------------------------

    def _record(self) -> None:
        if self.trash_fd < 0:
            self.trash_fd = _own_folder(self.fd, TRASH, self.root.identity[0])
        if self.run_fd >= 0 and self.delete and not any(done.left for done in self.done):
            with contextlib.suppress(OSError):
                os.rmdir(self.name, dir_fd=self.trash_fd)
        document = record(
            self.root.path, self.name, self.done, self.skipped, self.delete, self.exported_to
        )
        name = f"{self.name}.json"
        _write_atomic(
            self.trash_fd, name, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
        )
        self.applied.records.append(display_name(self.root.path / TRASH / name))


def record(
    root: Path,
    run: str,
    done: list[Done],
    skipped: list[Skipped],
    delete: bool,
    exported_to: Path | None,
) -> dict[str, Any]:
    """The record of one root's apply (``<run>.json`` in its trash)."""
    return {
        "format": RECORD_FORMAT,
        "version": 1,
        "run": run,
        "root": display_name(root),
        "applied_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "removal": "delete" if delete else "trash",
        "exported_to": display_name(exported_to) if exported_to is not None else None,
        "done": [
            {
                **_item(entry.item),
                "to": entry.to,
                "deleted": entry.deleted,
                "unlinked": entry.unlinked,
                "log_sha256": entry.log_sha256,
                "left": entry.left,
            }
            for entry in done
        ],
        "skipped": [{**_item(entry.item), "skipped": entry.why} for entry in skipped],
    }


def _what(item: Item) -> dict[str, Any]:
    """What an item of the plan is, and why: the fields every record of it starts with."""
    return {
        "session_id": item.folder.name,
        "category": item.category,
        "action": item.action,
        "why": item.why,
        "bytes": item.bytes,
        "allocated_bytes": item.allocated_bytes,
    }


def _item(item: Item) -> dict[str, Any]:
    return {
        **_what(item),
        "from": display_name(
            item.folder.path if item.action != FILES else item.folder.path / "files"
        ),
    }


# --- descriptors ------------------------------------------------------------------------


def _own_folder(parent_fd: int, name: str, device: int) -> int:
    """A descriptor of the folder ``name`` in ``parent_fd`` (made 0700 when missing): never a
    link, this user's, on ``device``, writable by no one else."""
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    except FileExistsError:
        pass
    except OSError as error:
        raise WriteError(
            f"cannot make the trash folder {name}: {error.strerror or error}"
        ) from None
    try:
        fd = os.open(name, _DIR, dir_fd=parent_fd)
    except OSError as error:
        raise WriteError(
            f"cannot open the trash folder {name} ({error.strerror or error}): it must be a "
            "folder, not a link"
        ) from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_dev != device or st.st_mode & 0o022:
        os.close(fd)
        raise WriteError(
            f"the trash folder {name} is not this user's own folder on the root's file system; "
            "move it away and prune again"
        )
    return fd


def _log_sha256(root_fd: int, name: str) -> str | None:
    """The sha256 of a session's log, opened relative to the root's descriptor."""
    digest = hashlib.sha256()
    try:
        with opened(name, root_fd) as inside, opened(LOG, inside, regular=True) as fd:
            while block := os.read(fd, 1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _remove(parent_fd: int, name: str) -> str | None:
    """Remove ``name`` (in ``parent_fd``) and everything in it, on descriptors; what stopped
    the removal (it stays in the trash), or None."""
    errors: list[str] = []

    def failed(function: Any, path: str, info: Any) -> None:
        errors.append(f"{display_name(path)}: {getattr(info[1], 'strerror', None) or info[1]}")

    shutil.rmtree(name, onerror=failed, dir_fd=parent_fd)
    return errors[0] if errors else None


def _write_atomic(folder_fd: int, name: str, data: bytes) -> None:
    try:
        with modes.atomic(name, dir_fd=folder_fd, durable=True) as stream:
            stream.write(data)
    except OSError as error:
        raise WriteError(f"cannot write the record {name}: {error.strerror or error}") from None


# --- the trash --------------------------------------------------------------------------


@dataclass
class TrashRun:
    """One run's folder in a root's trash."""

    root: Path
    name: str
    identity: tuple[int, int]
    bytes: int
    allocated_bytes: int


def trash_runs(survey: Survey) -> list[TrashRun]:
    """The run folders in each root's trash (what ``--empty-trash`` removes; the records stay)."""
    found: list[TrashRun] = []
    for root in survey.roots:
        trash = root.path / TRASH
        try:
            st = os.lstat(trash)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            names = sorted(os.listdir(trash))
        except OSError:
            continue
        for name in names:
            if not RUN_NAME.fullmatch(name):
                continue
            try:
                run = os.lstat(trash / name)
            except OSError:
                continue
            if stat.S_ISDIR(run.st_mode) and run.st_uid == os.geteuid() and run.st_dev == st.st_dev:
                tree = walk(str(trash / name), (run.st_dev, run.st_ino), session=False)
                found.append(
                    TrashRun(
                        root.path, name, (run.st_dev, run.st_ino), tree.bytes, tree.allocated_bytes
                    )
                )
    return found


def empty_trash(runs: list[TrashRun]) -> list[tuple[TrashRun, str | None]]:
    """Remove each run folder (never a record), on descriptors: each with what stopped its
    removal, or None."""
    done: list[tuple[TrashRun, str | None]] = []
    for run in runs:
        try:
            root_fd = os.open(run.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            done.append((run, f"the root cannot be opened ({error.strerror})"))
            continue
        try:
            trash_fd = os.open(TRASH, _DIR, dir_fd=root_fd)
        except OSError as error:
            os.close(root_fd)
            done.append((run, f"the trash cannot be opened ({error.strerror})"))
            continue
        try:
            st = os.stat(run.name, dir_fd=trash_fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != run.identity:
                done.append((run, "replaced since the plan"))
                continue
            done.append((run, _remove(trash_fd, run.name)))
        except OSError as error:
            done.append((run, f"cannot be removed ({error.strerror})"))
        finally:
            os.close(trash_fd)
            os.close(root_fd)
    return done


# --- what is shown ----------------------------------------------------------------------


def rows(plan: Plan, applied: Applied | None = None) -> list[dict[str, Any]]:
    """One row per item of the plan: what it is and why, and (after an apply) what became of
    it: ``planned``, ``done`` (``to`` where it went, ``deleted``, ``unlinked`` locks) or
    ``skipped`` (``skipped`` says why)."""
    done = {id(entry.item): entry for entry in applied.done} if applied else {}
    skipped = {id(entry.item): entry.why for entry in applied.skipped} if applied else {}
    found = []
    for item in plan.items:
        entry = done.get(id(item))
        found.append(
            {
                **_what(item),
                "last_activity": item.folder.last_activity,
                "status": "done" if entry else "skipped" if id(item) in skipped else "planned",
                "to": entry.to if entry else None,
                "deleted": entry.deleted if entry else False,
                "unlinked": entry.unlinked if entry else [],
                "log_sha256": entry.log_sha256 if entry else None,
                "skipped": skipped.get(id(item)) or (entry.left if entry else None),
                "folder": display_name(item.folder.path),
            }
        )
    return found


def held_rows(plan: Plan) -> list[dict[str, Any]]:
    """One row per folder a criterion picked that a rule keeps."""
    return [
        {
            "session_id": held.folder.name,
            "category": held.category,
            "why": held.why,
            "kept": held.reason,
            "allocated_bytes": held.folder.tree.allocated_bytes,
            "last_activity": held.folder.last_activity,
            "folder": display_name(held.folder.path),
        }
        for held in plan.held
    ]
