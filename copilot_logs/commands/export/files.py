"""The tables ``copilot-logs export`` writes (``events``, ``turns``, ``tools``, ``sessions``,
``findings``, ``usage``, each partitioned by its session's start day) and their Parquet files:
written under temporary names, moved into place together.

A batch of logs gives, per table, one file for each day its rows fall on (one empty file when
the table has no row for the batch, so every dataset has its schema):
``OUT/<table>/date=<day>/part-<run>-<batch>.parquet``. Each is first written as
:func:`temporary` (a name that ``*.parquet`` globs do not match), private to the user (0600:
the tables hold prompt previews); :func:`move_in` renames them once the manifest records the
moves, so an interrupted export leaves the earlier dataset as it was.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Mapping
from contextlib import suppress
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl

from copilot_logs import derive, modes
from copilot_logs.commands import sessions as sessions_core
from copilot_logs.commands import usage, validate
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import EVENTS_SCHEMA

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
    """One row per LLM call: the main agent's turns, then the sub-agents' calls.

    A main-agent row is a turn of :func:`copilot_logs.derive.turns` (turn_start to turn_end),
    ``agent_id`` null. A sub-agent's row is one call counted by ``count``
    (:func:`copilot_logs.derive.subagent_calls`: its turn pair where the CLI writes one, from
    1.0.85, else the first ``assistant.message`` line of each messageId), spanning that agent's
    lines up to its next call; ``agent_id`` is the sub-agent's key (its task call's toolCallId),
    ``turn_index`` the main-agent turn it ran in; ``ended_at``, ``open`` and ``duration_ms`` are
    null where it writes no turn pair. ``call_index`` numbers the calls of each agent in the
    file from 1.
    """
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
    """The tables ``export`` writes, for the logs of ``result``, each with its ``date``
    partition column (the start day, UTC, of the row's session) last."""
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


RUN = re.compile(r"[0-9a-f]{16}")
"""A run's id: :func:`new_run`."""
_TEMPORARY = re.compile(r"\..+\.parquet\.(?P<run>[0-9a-f]{16})\.tmp")
_OURS = re.compile(r"part-[0-9a-f]{16}-[0-9a-f]{12}\.parquet")
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def new_run() -> str:
    return os.urandom(8).hex()


def temporary(final: Path, run: str) -> Path:
    """Where run ``run`` writes ``final`` before moving it into place."""
    return final.with_name(f".{final.name}.{run}.tmp")


def _folder(day: date | None) -> str:
    return f"{PARTITION}={day.isoformat() if day is not None else DEFAULT_PARTITION}"


def write_tables(
    tables: Mapping[str, pl.DataFrame], out: Path, stem: str, run: str, mode: int
) -> list[str]:
    """Write each table's rows (with a ``date`` column) as ``<stem>.parquet`` in its days'
    folders, under temporary names, each with ``mode`` (that of the logs the rows come from,
    :func:`copilot_logs.modes.mode_of`). Returns the files, relative to ``out``."""
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


def table_of(relative: str) -> str:
    return relative.split("/", 1)[0]


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
        mine = [f for f in files if table_of(f) == table]
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
        from copilot_logs.commands.export.manifest import ExportError

        raise ExportError(
            f"{out / relative}: a file of the earlier export cannot be read ({error}); "
            "delete it and export again (the logs it held are written again)"
        ) from None


def whole(path: Path) -> bool:
    """Whether a file of an earlier export is still whole: a regular file (not a link)
    whose Parquet footer reads."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        pl.read_parquet_schema(path)
    except (OSError, pl.exceptions.PolarsError):
        return False
    return True


def readable(path: Path) -> bool:
    """Whether every row of a file of an earlier export reads."""
    try:
        pl.read_parquet(path, hive_partitioning=False)
    except (OSError, pl.exceptions.PolarsError):
        return False
    return True


def is_ours(path: Path) -> bool:
    """A file named as export names its files (or their temporaries), and not a link."""
    named = _OURS.fullmatch(path.name) or _TEMPORARY.fullmatch(path.name)
    return bool(named) and not path.is_symlink() and path.is_file()


def move_in(out: Path, run: str, files: list[str], remove: list[str]) -> None:
    """Rename the temporaries of ``files`` (those still there) into place and delete
    ``remove`` (and a partition folder that this leaves empty)."""
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
    """Delete the temporaries of run ``run`` (of any run when None) left in ``out``: those of
    an interrupted export, or of a batch that was written again."""
    for table in TABLES:
        for path in (out / table).glob(f"{PARTITION}=*/.*.tmp"):
            found = _TEMPORARY.fullmatch(path.name)
            if found and (run is None or found["run"] == run):
                with suppress(FileNotFoundError):
                    path.unlink()


def written_files(out: Path) -> list[str]:
    """The files of ``out`` named as this version of export names them (relative)."""
    return sorted(
        path.relative_to(out).as_posix()
        for table in TABLES
        for path in (out / table).glob(f"{PARTITION}=*/part-*.parquet")
        if _OURS.fullmatch(path.name)
    )
