"""The frames as Parquet datasets: what ``copilot-logs export OUT`` writes (see docs/export.md).

The tables (``events``, ``turns``, ``tools``, ``sessions``, ``findings``, ``usage``, each
partitioned by its session's start day) are written per batch of logs under temporary names
(0600 or the logs' mode), and moved into place together once ``OUT/_manifest.json`` records the
moves: an interrupted export leaves the earlier dataset as it was, and the next export into OUT
writes only what changed. The flow, inside :func:`exporting` (OUT's lock, an OSError on the way
one clear error): :func:`prepare`, :func:`write_batch` mapped over batches of the changed
sources, :func:`finish`.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import orjson
import polars as pl

from copilot_logs import derive, modes
from copilot_logs.commands import sessions as sessions_core
from copilot_logs.commands import usage, validate
from copilot_logs.errors import FULL, CopilotLogsError, ExitCode, WriteError
from copilot_logs.ingest.discover import peek_start
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import EVENTS_SCHEMA
from copilot_logs.store.entry import Seen, Stamp, State, growth, seen_whole, stamp_of

TABLES = ("events", "turns", "tools", "sessions", "findings", "usage")
PARTITION = "date"

EVENT_NAMES = {"event_id": "id"}
EVENT_LEAD = ("session_id", "file", "line", "type", "id", "parent_id", "agent_id", "timestamp")


def events_table(events: pl.DataFrame) -> pl.DataFrame:
    """One row per recovered event: the envelope first, then the typed columns."""
    renamed = events.rename(EVENT_NAMES)
    rest = [EVENT_NAMES.get(name, name) for name in EVENTS_SCHEMA]
    return renamed.select(*EVENT_LEAD, *(name for name in rest if name not in EVENT_LEAD))


LATER = ["prompt_index", "task_index", "segment", "state"]
"""The session model's columns of a turn, after those of export versions before 5."""


def turns_table(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per LLM call: the main agent's turns (:func:`copilot_logs.derive.turns`), then
    the sub-agents' calls (:func:`copilot_logs.derive.subagent_calls`); docs/export.md."""
    main = derive.turns(annotated).with_columns(
        agent_id=pl.lit(None, pl.String), call_index=pl.col("turn_index")
    )
    sub = _subagent_calls(annotated)
    columns = ["file", "session_id", "agent_id", "turn_index", "call_index"]
    columns += [name for name in main.columns if name not in columns and name not in LATER]
    columns += LATER
    return pl.concat(
        [main.select(columns), sub.select(columns).cast(main.select(columns).schema)],
        how="vertical",
    ).sort("file", "line")


def _subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    return (
        derive.subagent_calls(annotated)
        .rename({"timestamp": "started_at"})
        .with_columns(
            task_complete_called=pl.col("requested_tools").list.contains("task_complete"),
            task_complete_event=pl.lit(False),
        )
    )


def tools_table(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per tool execution (:func:`copilot_logs.derive.tools`), the session model's
    columns after those of export versions before 5."""
    tools = derive.tools(annotated)
    later = ["segment", "error_code", "state"]
    return tools.select(*(c for c in tools.columns if c not in later), *later)


def frames(result: ReadResult) -> dict[str, pl.DataFrame]:
    """The tables ``export`` writes, each with its ``date`` partition column (the start day,
    UTC, of the row's session) last."""
    annotated = derive.annotate(result.events)
    sessions = sessions_core.summarize(result)
    tables = {
        "events": events_table(result.events),
        "turns": turns_table(annotated),
        "tools": tools_table(annotated),
        "sessions": sessions,
        "findings": validate.check(result),
        "usage": usage.session_usage(result),
    }
    days = _session_days(result.events, sessions)
    file_days = days.group_by("file").agg(_file_day=pl.col(PARTITION).min())
    return {name: _with_day(table, days, file_days) for name, table in tables.items()}


def _session_days(events: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """Per (file, session_id): the day its session started; the file's own day for a
    session the sessions table does not name (a second session.start in one file)."""
    # A file can hold several sessions: its own day is its first session's.
    file_day = sessions.group_by("file").agg(_file_day=pl.col("started_at").min().dt.date())
    starts = events.group_by("file", "session_id").agg(_start=pl.col("timestamp").min())
    pairs = pl.concat(
        [
            starts,
            sessions.select("file", "session_id", _start=pl.lit(None, starts["_start"].dtype)),
        ],
        how="vertical",
    )
    return (
        pairs.group_by("file", "session_id")
        .agg(pl.col("_start").min())
        .join(file_day, on="file", how="left")
        .join(
            sessions.select("file", "session_id", _own=pl.col("started_at").dt.date()),
            on=["file", "session_id"],
            how="left",
            nulls_equal=True,
        )
        .select(
            "file",
            "session_id",
            pl.coalesce("_own", pl.col("_start").dt.date(), "_file_day").alias(PARTITION),
        )
    )


def _with_day(table: pl.DataFrame, days: pl.DataFrame, file_days: pl.DataFrame) -> pl.DataFrame:
    """``table`` with the day of each row's session; of its file's first session for a row
    whose session has no day of its own."""
    keyed = table.join(days, on=["file", "session_id"], how="left", nulls_equal=True)
    if keyed[PARTITION].null_count() == 0:
        return keyed
    return (
        keyed.join(file_days, on="file", how="left")
        .with_columns(pl.coalesce(PARTITION, "_file_day").alias(PARTITION))
        .drop("_file_day")
    )


RUN = re.compile(r"[0-9a-f]{16}")  # a run's id: :func:`new_run`
_TEMPORARY = re.compile(r"\..+\.parquet\.(?P<run>[0-9a-f]{16})\.tmp")
_OURS = re.compile(r"part-[0-9a-f]{16}-[0-9a-f]{12}\.parquet")
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def new_run() -> str:
    return os.urandom(8).hex()


def temporary(final: Path, run: str) -> Path:
    return final.with_name(f".{final.name}.{run}.tmp")


def _folder(day: date | None) -> str:
    return f"{PARTITION}={day.isoformat() if day is not None else DEFAULT_PARTITION}"


def write_tables(
    tables: Mapping[str, pl.DataFrame], out: Path, stem: str, run: str, mode: int
) -> list[str]:
    """Write each table's rows as ``<stem>.parquet`` in its days' folders, under temporary
    names, with ``mode``. Returns the files, relative to ``out``."""
    days = sorted(
        {day for table in tables.values() for day in table[PARTITION].unique().to_list()},
        key=lambda day: (day is None, day),
    )
    if not days:
        return []
    written: list[str] = []
    for name, table in tables.items():
        parts = table.partition_by(PARTITION, as_dict=True, include_key=False)
        if not parts:
            parts = {(days[0],): table.drop(PARTITION)}
        for (day,), rows in parts.items():
            relative = f"{name}/{_folder(day)}/{stem}.parquet"
            write_temporary(rows, temporary(out / relative, run), mode)
            written.append(relative)
    return written


def write_temporary(frame: pl.DataFrame, path: Path, mode: int) -> None:
    """``frame`` as Parquet at ``path`` with ``mode``; nothing left there when writing fails,
    and an OSError raised as it is (polars reports one met while writing as a ComputeError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = _Written(modes.create(path, mode, replace=True), path)
    try:
        with io.BufferedWriter(raw, 1 << 20) as stream:
            frame.write_parquet(stream)
    except BaseException as error:
        with suppress(OSError):
            os.unlink(path)
        if isinstance(error, pl.exceptions.PolarsError) and raw.error is not None:
            raise raw.error from None
        raise


class _Written(io.RawIOBase):
    """A file being written, which keeps the OSError a write raised."""

    def __init__(self, descriptor: int, path: Path) -> None:
        self.file = io.FileIO(descriptor, "wb")
        self.name = str(path)
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        try:
            while done < len(view):
                done += self.file.write(view[done:]) or 0
            return done
        except OSError as error:
            error.filename = error.filename or self.name
            self.error = error
            raise

    def close(self) -> None:
        self.file.close()
        super().close()


def narrow(
    out: Path, files: list[str], keep: set[str], run: str
) -> tuple[list[str], list[str], list[str]]:
    """The files of a part, keeping only the rows of the logs ``keep``: those that still have
    rows are rewritten (under temporary names) when they lost some, and the others are to be
    removed, but for one per table (empty) when the whole table lost its rows. Returns the
    files kept, those of them rewritten, and the files to remove."""
    kept: list[str] = []
    rewritten: list[str] = []
    for table in TABLES:
        mine = [f for f in files if f.split("/", 1)[0] == table]
        frames = {f: _read(out, f) for f in mine}
        left = {f: frame.filter(pl.col("file").is_in(list(keep))) for f, frame in frames.items()}
        full = [f for f in mine if left[f].height > 0] or mine[:1]
        for file in full:
            if left[file].height != frames[file].height:
                write_temporary(left[file], temporary(out / file, run), modes.mode_of(keep))
                rewritten.append(file)
        kept += full
    return kept, rewritten, [f for f in files if f not in kept]


def _read(out: Path, relative: str) -> pl.DataFrame:
    try:
        return pl.read_parquet(out / relative, hive_partitioning=False)
    except pl.exceptions.PolarsError as error:
        raise ExportError(
            f"{out / relative}: a file of the earlier export cannot be read ({error}); "
            "delete it and export again (the logs it held are written again)"
        ) from None


def _intact_file(path: Path) -> bool:
    """Whether a file of an earlier export is still there: a regular file (not a link) whose
    Parquet footer reads."""
    with suppress(OSError):
        return stat.S_ISREG(path.lstat().st_mode) and readable(path, footer=True)
    return False


def readable(path: Path, *, footer: bool = False) -> bool:
    """Whether every row (``footer``: the footer) of a file of an earlier export reads."""
    try:
        pl.read_parquet_schema(path) if footer else pl.read_parquet(path, hive_partitioning=False)
    except (OSError, pl.exceptions.PolarsError):
        return False
    return True


def is_ours(path: Path) -> bool:
    """A file named as export names its files (or their temporaries), and not a link."""
    named = _OURS.fullmatch(path.name) or _TEMPORARY.fullmatch(path.name)
    return bool(named) and not path.is_symlink() and path.is_file()


def move_in(out: Path, run: str, files: list[str], remove: list[str]) -> None:
    """Rename the temporaries of ``files`` (those still there) into place, then :func:`delete`
    ``remove``."""
    for relative in files:
        with suppress(FileNotFoundError):
            os.replace(temporary(out / relative, run), out / relative)
    delete(out, remove)


def delete(out: Path, files: list[str]) -> None:
    """Delete ``files`` (and a partition folder that this leaves empty)."""
    for relative in files:
        path = out / relative
        with suppress(OSError):
            if stat.S_ISREG(path.lstat().st_mode):  # never a folder put where a file was
                path.unlink()
        with suppress(OSError):
            path.parent.rmdir()


def remove_temporaries(out: Path, run: str | None = None) -> None:
    """Delete the temporaries of run ``run`` (of any run when None) left in ``out``."""
    for table in TABLES:
        for path in (out / table).glob(f"{PARTITION}=*/.*.tmp"):
            found = _TEMPORARY.fullmatch(path.name)
            if found and (run is None or found["run"] == run):
                with suppress(FileNotFoundError):
                    path.unlink()


def written_files(out: Path) -> list[str]:
    return sorted(
        path.relative_to(out).as_posix()
        for table in TABLES
        for path in (out / table).glob(f"{PARTITION}=*/part-*.parquet")
        if _OURS.fullmatch(path.name)
    )


MANIFEST = "_manifest.json"
LOCK = ".copilot-logs-export.lock"
"""Held (``fcntl.flock``) while an export writes into OUT: one export at a time."""
FORMAT = "copilot-logs-export"
VERSION = 5
"""Bumped when a table's columns or the manifest change: an export of another version is
rewritten whole."""

_LISTED = re.compile(rf"(?:{'|'.join(TABLES)})/{PARTITION}=[^/\\]+/[^/\\]+\.parquet")


class ExportError(CopilotLogsError):
    """OUT cannot take an export: a file, a folder of other things, a foreign manifest."""

    exit_code = ExitCode.USAGE


@dataclass
class Part:
    """A batch of logs exported together, and the files (relative to OUT) holding their rows."""

    sources: list[str]
    files: list[str]


@dataclass
class Commit:
    """The moves that finish an export: each of ``files`` from its :func:`temporary` name of
    run ``run`` into place; ``remove`` deleted."""

    run: str
    files: list[str]
    remove: list[str]


@dataclass
class Manifest:
    sources: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Each log as it was when exported (:func:`record`); None: export it again."""
    parts: list[Part] = field(default_factory=list)
    commit: Commit | None = None
    stale: list[str] = field(default_factory=list)
    """Files listed by a manifest that is not trusted: to be removed."""


def record(seen: Seen) -> dict[str, Any]:
    """A source's entry in the manifest: its :class:`Seen`, the stamp's fields beside the rest."""
    fields = msgspec.structs.asdict(seen)
    return {**msgspec.structs.asdict(fields.pop("stamp")), **fields}


def unchanged(source: Source, entry: dict[str, Any] | None) -> bool:
    """Whether a source is the log its manifest entry was exported from, by the one growth
    check (a log that grew is changed: its rows are written again whole)."""
    if entry is None or source.path is None:
        return False
    stamp = stamp_of(source.path)
    seen = _seen(entry)
    return (
        stamp is not None and seen is not None and growth(seen, stamp, source.path) is State.FRESH
    )


def _seen(entry: dict[str, Any]) -> Seen | None:
    stamp = {name: entry.get(name) for name in _STAMP}
    rest = {name: value for name, value in entry.items() if name not in _STAMP}
    try:
        return msgspec.convert({**rest, "stamp": stamp}, Seen, strict=True)
    except msgspec.ValidationError:
        return None


_STAMP = frozenset(Stamp.__struct_fields__)
_FIELDS = (_STAMP | set(Seen.__struct_fields__)) - {"stamp"}


def listed(out: Path, relative: object) -> bool:
    """Whether a path a manifest names is one export may touch: a Parquet file of a table's
    partition folder, inside ``out`` (also once links are followed)."""
    if not isinstance(relative, str) or not _LISTED.fullmatch(relative):
        return False
    with suppress(OSError, RuntimeError):
        return out.resolve() in (out / relative).resolve().parents
    return False


def load(out: Path) -> Manifest:
    """The manifest of an earlier export into ``out`` (an empty one for a new or empty folder);
    :class:`ExportError` when ``out`` is a file, a non-empty folder without our manifest, or
    holds a manifest that is not ours."""
    _refuse_file(out)
    path = out / MANIFEST
    if not path.exists():
        refuse_foreign(out)
        return Manifest()
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise ExportError(f"{path}: cannot be read as an export manifest ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ExportError(f"{path}: not a manifest of copilot-logs export")
    sources = document.get("sources")
    if not isinstance(sources, dict):
        raise ExportError(f"{path}: has no sources; delete it and export again")
    return _parsed(out, document, sources)


def _refuse_file(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: not a folder; give a new or empty folder, or an earlier export")


def refuse_foreign(out: Path) -> None:
    """Raise :class:`ExportError` when ``out`` (without a manifest) holds other things."""
    if out.is_dir() and not holds_only_exports(out):
        raise ExportError(
            f"{out}: not empty and holds no {MANIFEST} of copilot-logs; "
            "give a new or empty folder, or an earlier export"
        )


def holds_only_exports(out: Path) -> bool:
    """Whether a folder without a manifest holds nothing but what an export writes (its
    lock, and files named as export names them, left by one that died before its first
    manifest): it is then taken as empty, and those files are removed."""
    try:
        for item in out.iterdir():
            if item.name == LOCK and item.is_file():
                continue
            if item.name not in TABLES or item.is_symlink() or not item.is_dir():
                return False
            for day in item.iterdir():
                if not day.name.startswith(f"{PARTITION}=") or day.is_symlink():
                    return False
                if not day.is_dir() or not all(is_ours(file) for file in day.iterdir()):
                    return False
    except OSError:
        return False
    return True


def _parsed(out: Path, document: dict[str, Any], sources: dict[str, Any]) -> Manifest:
    """A manifest of this version as it says; any other (or parts that cannot be read) as
    its sources all to export again and every file it lists to remove."""
    parts, commit = document.get("parts"), document.get("commit")
    if document.get("version") == VERSION:
        with suppress(msgspec.ValidationError):
            read = msgspec.convert(parts, list[Part])
            moves = msgspec.convert(commit, Commit | None)
            named = [file for part in read for file in part.files]
            named += [*moves.files, *moves.remove] if moves is not None else []
            if all(listed(out, file) for file in named) and (
                moves is None or RUN.fullmatch(moves.run)
            ):
                prints = {name: _entry(entry) for name, entry in sources.items()}
                return Manifest(prints, read, moves)
    entries = [*sources.values(), *(parts if isinstance(parts, list) else []), commit]
    listed_files = [*_strings(entries, "files"), *_strings(entries, "remove")]
    ours = written_files(out)  # those of a part that cannot be read are not listed
    stale = sorted({f for f in [*listed_files, *ours] if listed(out, f)})
    return Manifest({name: None for name in sources}, [], None, stale)


def _strings(entries: list[Any], key: str) -> list[str]:
    """The strings of ``entry[key]`` over the entries that are dicts holding a list there."""
    found: list[str] = []
    for entry in entries:
        values = entry.get(key) if isinstance(entry, dict) else None
        if isinstance(values, list):
            found += [value for value in values if isinstance(value, str)]
    return found


def _entry(entry: Any) -> dict[str, Any] | None:
    """A source's entry as a manifest of this version writes it, else None (export it again)."""
    whole = isinstance(entry, dict) and set(entry) == _FIELDS and _seen(entry) is not None
    return entry if whole else None


def save(out: Path, manifest: Manifest) -> None:
    """Write the manifest (atomically, 0600)."""
    document = {"format": FORMAT, "version": VERSION, "sources": manifest.sources}
    document["parts"] = msgspec.to_builtins(manifest.parts)
    if manifest.commit is not None:
        document["commit"] = msgspec.to_builtins(manifest.commit)
    out.mkdir(parents=True, exist_ok=True)
    with modes.atomic(out / MANIFEST) as stream:
        stream.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}
IN_THE_WAY = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR}


@contextmanager
def exporting(out: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold OUT's lock while an export writes in it (OUT is made when new); ``on_wait`` is
    called once when another export holds it. An OSError on the way is one clear error."""
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
    _refuse_file(out)
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
    with suppress(ValueError):
        at = out
        for part in path.relative_to(out).parts[:-1]:
            at = at / part
            if at.exists() and not at.is_dir():
                return at
    return path


class Written(NamedTuple):
    """What :func:`write_batch` did for one batch of logs."""

    part: Part
    readable: list[str]
    """The logs that gave at least one event (the others are exported again next time)."""


def write_batch(result: ReadResult, *, out: str, run: str) -> Written:
    """Write the tables of one batch of logs under ``out``, under temporary names of run
    ``run``: one file per table and day (an empty one when the table has no row)."""
    logs = sorted(set(result.events["file"].to_list()) | set(result.diagnostics["file"]))
    if not logs:
        return Written(Part([], []), [])
    batch = hashlib.sha256("\n".join(logs).encode()).hexdigest()[:12]
    mode = modes.mode_of(logs)  # the logs' own, as every file made of logs
    try:
        written = write_tables(frames(result), Path(out), f"part-{run}-{batch}", run, mode)
    except OSError as error:  # OUT's fault, not the logs': never taken for a log's failure
        raise cannot_write(Path(out), error) from None
    return Written(Part(logs, written), result.events["file"].unique().to_list())


def batch_writer(plan: Plan) -> Callable[[ReadResult], Written]:
    """The function to map over batches of ``plan.changed`` (picklable: a partial)."""
    return partial(write_batch, out=str(plan.out), run=plan.run)


@dataclass
class Plan:
    """What an export of ``sources`` into ``out`` has to do."""

    out: Path
    changed: list[Source]  # oldest start first
    unchanged: list[Source]
    previous: Manifest
    seen: dict[str, dict[str, Any] | None]  # each changed source's entry, before it is read
    run: str
    kept: list[str] = field(default_factory=list)
    """Sources of the last export kept although not selected now (``prepare(keep_others=True)``)."""

    @property
    def gone(self) -> list[str]:
        """Sources of the last export that are not selected now (nor kept)."""
        selected = {source.name for source in (*self.changed, *self.unchanged)}
        return sorted(set(self.previous.sources) - selected - set(self.kept))


@dataclass(frozen=True)
class Summary:
    """What an export did, per source log."""

    out: Path
    written: int
    unchanged: int
    removed: int
    files: int


def prepare(out: Path, sources: Iterable[Source], *, keep_others: bool = False) -> Plan:
    """Check that ``out`` can take an export (:func:`load`), finish an export into it that was
    interrupted while moving its files into place, and find which sources changed since the last
    one. ``keep_others``: what the last export holds of sources not given stays (``prune
    --export-to`` adds the sessions it removes to an archive, never takes the others out)."""
    previous = _recovered(out, load(out))
    sources = list(sources)
    fresh = _fresh(out, previous, sources)
    unreadable = _unreadable_to_narrow(out, previous, fresh)
    changed = [source for source in sources if source.name not in fresh - unreadable]
    same = [source for source in sources if source.name in fresh - unreadable]
    seen = {source.name: _seen_now(source) for source in changed}
    given = {source.name for source in sources}
    others = sorted(set(previous.sources) - given) if keep_others else []
    return Plan(out, _by_start(changed), same, previous, seen, new_run(), others)


def _seen_now(source: Source) -> dict[str, Any] | None:
    """The manifest's entry of a log about to be read (None: it is exported again next time)."""
    seen = seen_whole(source.path) if source.path is not None else None
    return record(seen) if seen is not None else None


def _unreadable_to_narrow(out: Path, manifest: Manifest, unchanged: set[str]) -> set[str]:
    """The unchanged sources of the parts to narrow (those that also hold changed or gone
    logs) that have a file whose rows cannot be read: they are exported again, and the part
    removed whole, so its damaged file is never read."""
    again: set[str] = set()
    for part in manifest.parts:
        staying = unchanged.intersection(part.sources)
        narrowed = staying and len(staying) < len(part.sources)
        if narrowed and not all(readable(out / file) for file in part.files):
            again |= staying
    return again


def _recovered(out: Path, manifest: Manifest) -> Manifest:
    """The manifest once the moves of an interrupted export are done, with no temporary left
    and no file named as export names its files that the manifest does not list (left by two
    exports that ran at once before OUT was locked: their rows would show twice)."""
    _commit(out, manifest)
    remove_temporaries(out)
    listed_files = {file for part in manifest.parts for file in part.files}
    orphans = [file for file in written_files(out) if file not in listed_files]
    delete(out, [file for file in orphans if file not in manifest.stale])
    return manifest


def _commit(out: Path, manifest: Manifest) -> None:
    """Do the moves the manifest records, then record that they are done."""
    if manifest.commit is not None:
        commit = manifest.commit
        move_in(out, commit.run, commit.files, commit.remove)
        manifest.commit = None
        save(out, manifest)


def exported_whole(out: Path, sources: Iterable[Source]) -> set[str]:
    """The names of ``sources`` that the export in ``out`` holds as they are now."""
    manifest = load(out)
    return set() if manifest.commit is not None else _fresh(out, manifest, list(sources))


def _fresh(out: Path, manifest: Manifest, sources: list[Source]) -> set[str]:
    """The sources the manifest lists as they are now (by the one growth check), every file
    of their part still there and whole (else the part is exported again, its files
    replaced)."""
    whole = {
        log
        for part in manifest.parts
        if all(_intact_file(out / file) for file in part.files)
        for log in part.sources
    }
    return {
        source.name
        for source in sources
        if source.name in whole and unchanged(source, manifest.sources.get(source.name))
    }


def _by_start(sources: list[Source]) -> list[Source]:
    """Oldest start first: consecutive sources, read in one batch, share their days."""
    never = datetime.max.replace(tzinfo=UTC)
    return sorted(sources, key=lambda source: (peek_start(source) or never, source.name))


def finish(plan: Plan, written: Iterable[Written]) -> Summary:
    """Narrow the earlier files to the logs that did not change, record the export in the
    manifest, then move the new files into place and remove those no log produces any more."""
    try:
        manifest, written_logs = _recorded(plan, written)
        save(plan.out, manifest)
    except BaseException:
        remove_temporaries(plan.out, plan.run)
        raise
    _commit(plan.out, manifest)
    remove_temporaries(plan.out, plan.run)  # those of a batch written again log by log
    return Summary(
        out=plan.out,
        written=written_logs,
        unchanged=len(plan.unchanged),
        removed=len(plan.gone),
        files=sum(len(part.files) for part in manifest.parts),
    )


def _recorded(plan: Plan, written: Iterable[Written]) -> tuple[Manifest, int]:
    """The manifest of this export, with the moves still to do; and how many logs it wrote."""
    new_parts: list[Part] = []
    readable: set[str] = set()
    for batch in written:
        if batch.part.sources:
            new_parts.append(batch.part)
            readable.update(batch.readable)
    sources = {source.name: plan.previous.sources[source.name] for source in plan.unchanged}
    sources.update((name, plan.previous.sources[name]) for name in plan.kept)
    for source in plan.changed:
        # A source that gave no event (unreadable, empty, not a log) keeps no entry: it is
        # read, and reported, again next time.
        sources[source.name] = plan.seen[source.name] if source.name in readable else None
    kept, rewritten, removed = _narrowed(plan, set(sources) - {s.name for s in plan.changed})
    moved = [file for part in new_parts for file in part.files] + rewritten
    commit = Commit(plan.run, moved, [*removed, *plan.previous.stale])
    logs = {log for part in new_parts for log in part.sources}
    written_logs = sum(1 for source in plan.changed if source.name in logs)
    return Manifest(sources, kept + new_parts, commit), written_logs


def _narrowed(plan: Plan, keep: set[str]) -> tuple[list[Part], list[str], list[str]]:
    """The earlier parts without the logs that changed or are gone: the parts kept, the files
    rewritten (under temporary names) and the files to remove."""
    kept: list[Part] = []
    rewritten: list[str] = []
    removed: list[str] = []
    for part in plan.previous.parts:
        staying = [log for log in part.sources if log in keep]
        if staying == part.sources:
            kept.append(part)
        elif not staying:
            removed += part.files
        else:
            left, changed, gone = narrow(plan.out, part.files, set(staying), plan.run)
            kept.append(Part(staying, left))
            rewritten += changed
            removed += gone
    return kept, rewritten, removed
