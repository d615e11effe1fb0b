"""Where the bytes of ``~/.copilot/session-state`` went (``copilot-logs disk``): each session
folder's bytes by part, its files, last activity, ``workspace.yaml`` keys, prompts and LLM
calls (read through the store), its lock and a category (docs/disk.md, "`disk`").

Only folders named as the CLI names a session (a lowercase UUID) are sessions; the rest of the
root and what sits beside it are totalled, never touched. ``workspace.yaml`` is read by a small
strict parser (:func:`parse_workspace`) instead of a YAML library.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from copilot_logs.commands.disk import locks as lock_files
from copilot_logs.commands.disk.walk import LOG, PARTS, Identity, Judge, Tree, opened, read_at, walk
from copilot_logs.errors import SelectionError, UnreadableError
from copilot_logs.ingest.discover import default_root
from copilot_logs.ingest.logfile import Source, display_name

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.ingest.reader import ReadResult


WORKSPACE_KEYS = ("name", "cwd", "client_name")
WORKSPACE_BYTES = 64 * 1024
"""Bytes read at most: the CLI's file is a few hundred."""

_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?")
# YAML's escapes in a double-quoted scalar: each code after a backslash, and what it stands for.
_SIMPLE_ESCAPES = dict(
    zip('0abt\tnvfre "/\\N_LP', '\0\a\b\t\t\n\v\f\r\x1b "/\\\x85\xa0\u2028\u2029', strict=True)
)
_ESCAPE = r'\\([0abt\tnvfre "/\\N_LP]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})'
_DOUBLE_QUOTED = re.compile(rf'"((?:[^"\\]|{_ESCAPE})*)"')
_PLAIN_BAD_START = tuple("-?:,[]{}#&*!|>'\"%@`")


def parse_workspace(lines: Iterable[str], keys: Iterable[str]) -> dict[str, str | None]:
    """The values of ``keys`` in flat ``key: value`` lines (see the module's docstring)."""
    wanted = set(keys)
    found: dict[str, str | None] = {}
    twice: set[str] = set()
    for line in lines:
        match = _LINE.fullmatch(line.rstrip("\r"))
        if match is None or match[1] not in wanted:
            continue
        key = match[1]
        if key in found:
            twice.add(key)
        found[key] = yaml_scalar(match[2] or "")
    return {key: None if key in twice else found.get(key) for key in keys}


def yaml_scalar(text: str) -> str | None:
    """One flow scalar written on one line, as YAML reads it; None when it is not one."""
    text = text.strip(" ")
    if text.startswith("'"):
        return _single_quoted(text)
    if text.startswith('"'):
        return _double_quoted(text)
    return _plain(text)


def _single_quoted(text: str) -> str | None:
    if len(text) < 2 or not text.endswith("'"):
        return None
    inner = text[1:-1]
    if "'" in inner.replace("''", ""):
        return None
    return inner.replace("''", "'")


def _double_quoted(text: str) -> str | None:
    found = _DOUBLE_QUOTED.fullmatch(text)
    try:
        return re.sub(_ESCAPE, _unescape, found[1]) if found else None
    except (ValueError, OverflowError):  # a code point past U+10FFFF
        return None


def _unescape(escape: re.Match[str]) -> str:
    code = escape[1]
    return _SIMPLE_ESCAPES.get(code) or chr(int(code[1:], 16))


def _plain(text: str) -> str | None:
    if text == "" or text in ("~", "null", "Null", "NULL"):
        return None
    if text.startswith(_PLAIN_BAD_START) or ": " in text or " #" in text or text.endswith(":"):
        return None
    return text


SESSION_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""How the CLI names a session folder."""

ACTIVE, STALE_LOCK, SCAFFOLD, LOG_MISSING = "active", "stale-lock", "scaffold", "log-missing"
EMPTY, ABANDONED, HEAVY_FILES, OK = "empty", "abandoned", "heavy-files", "ok"
CATEGORIES = (ACTIVE, STALE_LOCK, SCAFFOLD, LOG_MISSING, EMPTY, ABANDONED, HEAVY_FILES, OK)
HEAVY = 1 << 30
"""``files/`` over this many allocated bytes makes a session ``heavy-files`` (``--heavy``)."""

TRASH = ".copilot-logs-trash"
"""Where ``prune`` moves what it removes, inside the root (docs/disk.md)."""
OPERATION_LOCKS = ".session-operation-locks"
BESIDE_ROOT = ("session-store.db", "session-store.db-wal", "session-store.db-shm", "logs")
"""What the CLI keeps in ``~/.copilot`` beside ``session-state``: totalled, never touched."""


@dataclass
class Folder:
    """One session folder of a root, as a survey found it."""

    root: Path
    name: str
    identity: Identity
    uid: int
    link: bool = False  # never followed: no tree
    other_device: bool = False  # on another file system than its root: not entered
    tree: Tree = field(default_factory=Tree)
    workspace: dict[str, str | None] = field(default_factory=dict)
    lock: str = lock_files.NONE
    lock_why: str = ""

    @property
    def path(self) -> Path:
        return self.root / self.name

    @property
    def log_path(self) -> Path:
        return self.path / LOG

    @property
    def last_activity(self) -> datetime | None:
        ns = self.tree.newest_ns
        return datetime.fromtimestamp(ns / 1e9, UTC) if ns else None

    def refusal(self) -> str | None:
        """Why this folder may never be pruned whatever it holds; None when it may be."""
        if self.link:
            return "a link, never followed"
        if self.other_device:
            return "on another file system than its root"
        if self.uid != os.geteuid() or self.tree.foreign:
            where = self.tree.foreign[0] if self.tree.foreign else "."
            return f"holds files of another user ({display_name(where)})"
        for paths, why in (
            (self.tree.mounts, "holds another file system"),
            (self.tree.unreadable, "could not be read whole"),
            (self.tree.changed, "changed while it was read"),
        ):
            if paths:
                return f"{why} ({display_name(paths[0])})"
        return None


@dataclass
class Root:
    """One folder of sessions, as a survey found it."""

    path: Path
    identity: Identity
    folders: list[Folder] = field(default_factory=list)
    beside: dict[str, Tree] = field(default_factory=dict)
    """What is not a session, by name (``other``: everything else in the root together)."""
    beside_parent: set[str] = field(default_factory=set)
    """The names of :attr:`beside` that sit in the root's parent (``session-store.db``...)."""
    sessions_seen: int = 0
    """Session-shaped names in the root, selected or not."""


@dataclass
class Survey:
    roots: list[Root]
    seen: set[Identity] = field(default_factory=set)

    @property
    def folders(self) -> list[Folder]:
        return [folder for root in self.roots for folder in root.folders]

    def logs(self) -> list[Source]:
        """The session logs to read through the store: each regular ``events.jsonl`` of a
        folder that is not a link and is this user's."""
        return [
            Source(folder.log_path, folder.name)
            for folder in self.folders
            if folder.tree.log == "file" and not folder.link and folder.uid == os.geteuid()
        ]


# --- choosing roots and folders -----------------------------------------------------------


def refuse_root(path: Path) -> None:
    """Raise SelectionError when ``path`` is ``/`` or the home folder: never a folder of
    sessions, and far too much to walk (or to prune)."""
    real = os.path.realpath(path)
    home = os.path.realpath(os.path.expanduser("~"))
    if real == os.path.realpath(os.sep) or real == home:
        raise SelectionError(
            f"{display_name(path)} is {'/' if real == os.sep else 'the home folder'}, not a folder "
            "of sessions; give --root ~/.copilot/session-state (or where COPILOT_HOME points)"
        )


def choose(selectors: Sequence[str], root: Path | None) -> list[tuple[Path, set[str] | None]]:
    """The roots to survey, each with the session names chosen in it (None: all of them).

    A selector is a folder of sessions, a session folder (a path whose name is a session's),
    or an id or id prefix of a session under ``root`` (default: the CLI's)."""
    base = root if root is not None else default_root()
    if root is not None and not root.is_dir():
        raise SelectionError(f"--root {display_name(root)}: no such folder")
    if not selectors:
        refuse_root(base)
        return [(base, None)]
    chosen: dict[Path, set[str] | None] = {}
    for selector in selectors:
        path = Path(selector).expanduser()
        if os.path.lexists(path):
            if not path.is_dir():
                raise SelectionError(f"{display_name(selector)}: not a folder of sessions")
            if SESSION_NAME.fullmatch(path.name):
                _add(chosen, path.parent, {path.name})
            else:
                refuse_root(path)
                chosen[path] = None
        elif os.sep in selector or selector.startswith("."):
            raise SelectionError(f"{display_name(selector)}: no such folder")
        else:
            refuse_root(base)
            _add(chosen, base, {_by_id(selector, base)})
    return list(chosen.items())


def _add(chosen: dict[Path, set[str] | None], root: Path, names: set[str]) -> None:
    held = chosen.setdefault(root, set())
    if held is not None:
        held.update(names)


def _by_id(selector: str, root: Path) -> str:
    try:
        names = sorted(n for n in os.listdir(root) if SESSION_NAME.fullmatch(n))
    except OSError:
        names = []
    matching = [name for name in names if name.startswith(selector)]
    if selector in matching:
        return selector
    if len(matching) == 1:
        return matching[0]
    if not matching:
        raise SelectionError(
            f"no session folder matches '{display_name(selector)}' under {display_name(root)}; "
            "run `copilot-logs disk` to list them, or give a path"
        )
    raise SelectionError(
        f"'{display_name(selector)}' is ambiguous: it starts {len(matching)} session folders; "
        "give more characters"
    )


# --- the survey ---------------------------------------------------------------------------


def survey(
    chosen: Iterable[tuple[Path, set[str] | None]],
    *,
    clock: lock_files.Clock | None = None,
    now: float | None = None,
) -> Survey:
    """Walk the chosen session folders of each root, and what else the root (and, for the
    CLI's ``session-state``, its parent) holds."""
    judged = clock or lock_files.Clock.here()
    moment = now if now is not None else datetime.now(UTC).timestamp()
    found = Survey([])
    found.roots = [_survey_root(path, names, judged, moment, found.seen) for path, names in chosen]
    return found


def _survey_root(
    path: Path, names: set[str] | None, clock: lock_files.Clock, now: float, seen: set[Identity]
) -> Root:
    try:
        own = os.stat(path)
        with os.scandir(path) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except FileNotFoundError:
        return Root(path, (0, 0))
    except OSError as error:
        raise UnreadableError(
            f"cannot list {display_name(path)}: {error.strerror or error}; check the folder's "
            "permissions"
        ) from None
    root = Root(path, (own.st_dev, own.st_ino))
    network = lock_files.network_file_system(str(path), own.st_dev)
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not SESSION_NAME.fullmatch(entry.name) or not (
            stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)
        ):
            _beside(root, entry.name, st, seen)
            continue
        root.sessions_seen += 1
        if names is not None and entry.name not in names:
            continue
        root.folders.append(_folder(root, entry.name, st, own.st_dev, network, clock, now, seen))
    for name in BESIDE_ROOT if path.name == "session-state" else ():
        with contextlib.suppress(OSError):
            root.beside[name] = _tree(path.parent / name, os.lstat(path.parent / name), seen, None)
            root.beside_parent.add(name)
    return root


def _beside(root: Root, name: str, st: os.stat_result, seen: set[Identity]) -> None:
    """Count an entry of the root that is not a session, under its own name (the trash, the
    operation locks) or ``other``."""
    kind = name if name in (TRASH, OPERATION_LOCKS) else "other"
    into = root.beside.setdefault(kind, Tree())
    tree = _tree(root.path / name, st, seen, root.identity[0])
    for part in PARTS:
        into.apparent[part] += tree.apparent[part]
        into.allocated[part] += tree.allocated[part]
    into.files += tree.files
    into.newest_ns = max(into.newest_ns, tree.newest_ns)
    into.unreadable += tree.unreadable


def _tree(path: Path, st: os.stat_result, seen: set[Identity], device: int | None) -> Tree:
    """What is not a session: a folder (on ``device`` when given) walked, else one file."""
    if stat.S_ISDIR(st.st_mode) and device in (None, st.st_dev):
        return walk(str(path), (st.st_dev, st.st_ino), seen=seen, session=False)
    tree = Tree(files=1, newest_ns=st.st_mtime_ns)
    key = (st.st_dev, st.st_ino)
    if st.st_nlink < 2 or key not in seen:
        seen.add(key)
        tree.apparent["other"] = st.st_size
        tree.allocated["other"] = st.st_blocks * 512
    return tree


def _folder(
    root: Root,
    name: str,
    st: os.stat_result,
    device: int,
    network: bool | None,
    clock: lock_files.Clock,
    now: float,
    seen: set[Identity],
) -> Folder:
    folder = Folder(root.path, name, (st.st_dev, st.st_ino), st.st_uid)
    folder.link = stat.S_ISLNK(st.st_mode)
    folder.other_device = not folder.link and st.st_dev != device
    if folder.link or folder.other_device:
        return folder
    folder.tree = walk(
        str(folder.path), folder.identity, seen=seen, judge=lock_judge(network, clock, now)
    )
    folder.lock = lock_files.held(folder.tree.locks)
    folder.lock_why = next(
        (lock.why for lock in folder.tree.locks if lock.state == folder.lock), ""
    )
    folder.workspace = read_workspace(folder)
    return folder


def lock_judge(network: bool | None, clock: lock_files.Clock, now: float) -> Judge:
    """How the locks of a root are judged: as :func:`locks.judge` does, but ``unknown`` on a
    network file system or one that cannot be known (``network`` not False)."""

    def judge(name: str, content: bytes, inode: int, mtime_ns: int) -> lock_files.Lock:
        if network is not False:
            why = "on a network file system" if network else "its file system cannot be known"
            return lock_files.Lock(name, None, lock_files.UNKNOWN, why, inode, mtime_ns)
        return lock_files.judge(name, content, inode, mtime_ns, clock, now)

    return judge


def read_workspace(folder: Folder) -> dict[str, str | None]:
    """:data:`WORKSPACE_KEYS` from ``workspace.yaml`` in the folder surveyed (None for each it
    does not hold, or holds in a form :func:`parse_workspace` does not read)."""
    data = None
    with contextlib.suppress(OSError), opened(folder.path, identity=folder.identity) as fd:
        data = read_at(fd, "workspace.yaml", WORKSPACE_BYTES + 1)
    if data is None:
        return dict.fromkeys(WORKSPACE_KEYS)
    return parse_workspace(
        data[:WORKSPACE_BYTES].decode("utf-8", "replace").splitlines(), WORKSPACE_KEYS
    )


# --- what the logs say, through the store -------------------------------------------------

FIGURES = ("user_prompts", "llm_calls", "replies")


def log_figures(result: ReadResult) -> pl.DataFrame:
    """Per log file of a batch: its prompts, LLM calls and main-agent replies (summed over the
    sessions a file holds), and whether it could not be read at all."""
    import polars as pl

    from copilot_logs import derive

    flags = derive.count_flags(derive.annotate(result.events))
    reply = derive.MAIN & (derive.TYPE == "assistant.message")
    counted = flags.group_by("file").agg(
        pl.col("user_prompts").sum(), pl.col("llm_calls").sum(), replies=reply.sum().cast(pl.Int64)
    )
    unreadable = (
        result.diagnostics.filter(pl.col("kind") == "unreadable")
        .select("file", unreadable=pl.lit(True))
        .unique()
    )
    files = pl.concat(
        [result.events.select("file").unique(), result.diagnostics.select("file").unique()]
    ).unique()
    return (
        files.join(counted, on="file", how="left")
        .join(unreadable, on="file", how="left")
        .with_columns(
            *[pl.col(name).fill_null(0).cast(pl.Int64) for name in FIGURES],
            unreadable=pl.col("unreadable").fill_null(False),
        )
        .select("file", *FIGURES, "unreadable")
    )


# --- the table --------------------------------------------------------------------------

COLUMNS = (
    *("session_id", "category", "lock", "bytes", "allocated_bytes"),
    *(f"{part}_bytes" for part in PARTS),
    *(f"{part}_allocated" for part in PARTS),
    *("files", "last_activity", "name", "cwd", "host", "user_prompts", "llm_calls", "replies"),
    *("partial", "why", "folder"),
)


def content(folder: Folder, figures: dict[str, int] | None) -> str | None:
    """What a folder holds, as a category (scaffold, log-missing, empty, abandoned), or None
    when it is none of these. ``figures``: its log's (None when not read)."""
    if folder.link or folder.other_device:
        return None
    if folder.tree.log is None:
        return SCAFFOLD if folder.tree.scaffold else LOG_MISSING
    if folder.tree.log != "file":
        return LOG_MISSING
    if figures is None:
        return None
    if figures["user_prompts"] == 0 and figures["llm_calls"] == 0:
        return EMPTY
    if figures["user_prompts"] > 0 and figures["replies"] == 0:
        return ABANDONED
    return None


def category(folder: Folder, figures: dict[str, int] | None, heavy: int) -> str:
    """The folder's category: the first of :data:`CATEGORIES` that holds."""
    if folder.lock == lock_files.ACTIVE:
        return ACTIVE
    if folder.lock == lock_files.STALE:
        return STALE_LOCK
    held = content(folder, figures)
    if held is not None:
        return held
    if folder.tree.allocated["files"] > heavy:
        return HEAVY_FILES
    return OK


def figures_by_file(parts: Iterable[pl.DataFrame]) -> dict[str, dict[str, int]]:
    """The logs' figures (:func:`log_figures` of each batch) by file name; a log that could
    not be read is left out."""
    return {
        row["file"]: {name: row[name] for name in FIGURES}
        for part in parts
        for row in part.iter_rows(named=True)
        if not row["unreadable"]
    }


def rows(
    survey_: Survey, figures: dict[str, dict[str, int]], heavy: int = HEAVY
) -> list[dict[str, Any]]:
    """One row per session folder (see :data:`COLUMNS`)."""
    found = []
    for folder in survey_.folders:
        log = figures.get(Source(folder.log_path, folder.name).name)
        tree = folder.tree
        unread_log = folder.tree.log == "file" and log is None
        why = folder.refusal() or (folder.lock_why if folder.lock != lock_files.NONE else "")
        found.append(
            {
                "session_id": folder.name,
                "category": category(folder, log, heavy),
                "lock": folder.lock,
                "bytes": tree.bytes,
                "allocated_bytes": tree.allocated_bytes,
                **{f"{part}_bytes": tree.apparent[part] for part in PARTS},
                **{f"{part}_allocated": tree.allocated[part] for part in PARTS},
                "files": tree.files,
                "last_activity": folder.last_activity,
                "name": folder.workspace.get("name"),
                "cwd": folder.workspace.get("cwd"),
                "host": folder.workspace.get("client_name"),
                **{name: (log or {}).get(name) for name in FIGURES},
                "partial": tree.partial or unread_log,
                "why": why or ("its log could not be read" if unread_log else ""),
                "folder": display_name(folder.path),
            }
        )
    return found


def table(found: list[dict[str, Any]]) -> pl.DataFrame:
    """The rows as a frame with an explicit schema."""
    import polars as pl

    schema: dict[str, pl.DataType] = {name: pl.Int64() for name in COLUMNS}
    for name in ("session_id", "category", "lock", "name", "cwd", "host", "why", "folder"):
        schema[name] = pl.String()
    schema["last_activity"] = pl.Datetime("us", "UTC")
    schema["partial"] = pl.Boolean()
    return pl.DataFrame(found, schema=schema, orient="row")


def arranged(frame: pl.DataFrame, *, sort: str, min_size: int | None) -> pl.DataFrame:
    """The rows at least ``min_size`` allocated bytes, largest (``sort="size"``) or oldest
    (``age``) first; ties by session id."""
    if min_size is not None:
        frame = frame.filter(frame["allocated_bytes"] >= min_size)
    if sort == "age":
        return frame.sort("last_activity", "session_id", nulls_last=False)
    return frame.sort("allocated_bytes", "session_id", descending=[True, False])


def by_category(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per category found, in :data:`CATEGORIES` order: sessions, bytes, files."""
    import polars as pl

    order = {name: index for index, name in enumerate(CATEGORIES)}
    return (
        frame.group_by("category")
        .agg(
            sessions=pl.len().cast(pl.Int64),
            bytes=pl.col("bytes").sum(),
            allocated_bytes=pl.col("allocated_bytes").sum(),
            files_allocated=pl.col("files_allocated").sum(),
            files=pl.col("files").sum(),
        )
        .sort(pl.col("category").replace_strict(order, default=len(order)))
    )


def beside(survey_: Survey) -> list[dict[str, Any]]:
    """What is not a session, per root: its name, the folder it is in, bytes, allocated bytes
    and files."""
    return [
        {
            "name": name,
            "folder": display_name(root.path.parent if name in root.beside_parent else root.path),
            "bytes": tree.bytes,
            "allocated_bytes": tree.allocated_bytes,
            "files": tree.files,
        }
        for root in survey_.roots
        for name, tree in sorted(root.beside.items())
    ]
