"""The frames as Parquet datasets: what ``copilot-logs export OUT`` writes (see docs/export.md).

Six tables, each a hive-partitioned dataset under OUT: ``events``, ``turns``, ``tools``,
``sessions``, ``findings`` and ``usage``. Every source log gives one file per table and per
start day of its sessions, ``OUT/<table>/date=<YYYY-MM-DD>/<file key>.parquet`` (a table with
no row for that log gets an empty file, so every dataset has its schema even when empty). The
``date`` column is the partition key: not inside the files, added back by hive readers, and
part of :func:`frames`.

Export is incremental. ``OUT/_manifest.json`` records, per source log, its size, mtime_ns and a
hash of its first and last bytes, and the files it produced. A later export rewrites only the
sources that changed, removes the files of sources no longer selected (or gone), and never
touches a file it did not write. Every file is written to a temporary name and renamed.

The flow: :func:`prepare` (check OUT, compare with the manifest), :func:`write_batch` mapped
over batches of the changed sources (memory bounded by a batch), :func:`finish` (the manifest,
stale files removed).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson
import polars as pl

from copilot_logs import derive
from copilot_logs.commands import sessions as sessions_core
from copilot_logs.commands import usage, validate
from copilot_logs.errors import CopilotLogsError, ExitCode
from copilot_logs.ingest.envelope import Source
from copilot_logs.ingest.logfile import open_log
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import EVENTS_SCHEMA

TABLES = ("events", "turns", "tools", "sessions", "findings", "usage")
PARTITION = "date"
MANIFEST = "_manifest.json"
FORMAT = "copilot-logs-export"
VERSION = 1
"""Bumped when a table's columns change: an export of another version is rewritten whole."""
HASHED_BYTES = 8192
"""Bytes hashed at the start and at the end of a source for its fingerprint."""

EVENT_NAMES = {"event_id": "id"}
EVENT_LEAD = ("session_id", "file", "line", "type", "id", "parent_id", "agent_id", "timestamp")


class ExportError(CopilotLogsError):
    """OUT cannot take an export: a file, a folder of other things, a foreign manifest."""

    exit_code = ExitCode.USAGE


# --- the tables ---------------------------------------------------------------------------------


def events_table(events: pl.DataFrame) -> pl.DataFrame:
    """One row per recovered event: the envelope first, then the typed columns."""
    renamed = events.rename(EVENT_NAMES)
    rest = [EVENT_NAMES.get(name, name) for name in EVENTS_SCHEMA]
    return renamed.select(*EVENT_LEAD, *(name for name in rest if name not in EVENT_LEAD))


def turns_table(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per LLM call: the main agent's turns, then the sub-agents' calls.

    A main-agent row is a turn of :func:`copilot_logs.derive.turns` (turn_start to turn_end),
    ``agent_id`` null. A sub-agent writes no turn events: its row is one call counted by
    ``count`` (the first ``assistant.message`` line of each messageId), spanning that agent's
    lines up to its next call; ``agent_id`` is the sub-agent's id, ``turn_index`` the main-agent
    turn it ran in, and ``ended_at``, ``open`` and ``duration_ms`` are null (no turn_end).
    ``call_index`` numbers the calls of each agent in the file from 1.
    """
    main = derive.turns(annotated).with_columns(
        agent_id=pl.lit(None, pl.String), call_index=pl.col("turn_index")
    )
    sub = _subagent_calls(annotated)
    columns = ["file", "session_id", "agent_id", "turn_index", "call_index"]
    columns += [name for name in main.columns if name not in columns]
    return pl.concat(
        [main.select(columns), sub.select(columns).cast(main.select(columns).schema)],
        how="vertical",
    ).sort("file", "line")


def _subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    is_message = derive.TYPE == "assistant.message"
    requests = pl.col("tool_requests").filter(is_message).explode().drop_nulls()
    agents = annotated.filter(pl.col("agent_id").is_not_null()).with_columns(
        call_index=pl.col("subagent_call")
        .cum_sum()
        .over(*derive.SESSION, "agent_id")
        .cast(pl.Int64)
    )
    return (
        agents.filter(pl.col("call_index") > 0)
        .group_by(*derive.SESSION, "agent_id", "call_index", maintain_order=True)
        .agg(
            turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")).first(),
            interaction_index=pl.col("interaction_index").first(),
            turn_id=pl.col("turn_id").first(),
            interaction_id=pl.col("interaction_id").first(),
            event_id=pl.col("event_id").first(),
            line=pl.col("line").first(),
            started_at=pl.col("timestamp").first(),
            ended_at=pl.lit(None, pl.Datetime("ms", "UTC")),
            last_event_at=pl.col("timestamp").last(),
            open=pl.lit(None, pl.Boolean),
            model=pl.coalesce(
                pl.col("model").filter(is_message).drop_nulls().first(),
                pl.col("session_model").first(),
            ),
            messages=is_message.sum().cast(pl.Int64),
            text=pl.col("text").filter(is_message & (pl.col("text") != "")).first(),
            output_tokens=pl.col("output_tokens").filter(is_message).sum(),
            requested_tools=requests.struct.field("name"),
            tool_calls=(derive.TYPE == "tool.execution_start").sum().cast(pl.Int64),
            failed_tool_calls=(
                (derive.TYPE == "tool.execution_complete") & (pl.col("success") == False)  # noqa: E712
            )
            .sum()
            .cast(pl.Int64),
            task_complete_called=requests.struct.field("name").is_in(["task_complete"]).any(),
            task_complete_event=pl.lit(False),
        )
        .with_columns(
            duration_ms=pl.lit(None, pl.Int64),
            ended_loop=(pl.col("messages") > 0) & (pl.col("requested_tools").list.len() == 0),
        )
    )


def frames(result: ReadResult) -> dict[str, pl.DataFrame]:
    """The tables ``export`` writes, for the logs of ``result``, each with its ``date``
    partition column (the start day, UTC, of the row's session) last."""
    annotated = derive.annotate(result.events)
    sessions = sessions_core.summarize(result)
    tables = {
        "events": events_table(result.events),
        "turns": turns_table(annotated),
        "tools": derive.tools(annotated),
        "sessions": sessions,
        "findings": validate.check(result),
        "usage": usage.session_usage(result),
    }
    days = _session_days(result.events, sessions)
    return {name: _with_day(table, days) for name, table in tables.items()}


def _session_days(events: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """Per (file, session_id): the day its session started; the file's own day for a
    session the sessions table does not name (a second session.start in one file)."""
    # A file can hold several sessions: its own day is its first session's.
    file_day = sessions.group_by("file").agg(_file_day=pl.col("started_at").min().dt.date())
    pairs = pl.concat(
        [events.select("file", "session_id"), sessions.select("file", "session_id")],
        how="vertical",
    ).unique()
    starts = events.group_by("file", "session_id").agg(_start=pl.col("timestamp").min())
    return (
        pairs.join(starts, on=["file", "session_id"], how="left", nulls_equal=True)
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


def _with_day(table: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    keyed = table.join(days, on=["file", "session_id"], how="left", nulls_equal=True)
    file_day = days.group_by("file").agg(_file_day=pl.col(PARTITION).min())
    return (
        keyed.join(file_day, on="file", how="left")
        .with_columns(pl.coalesce(PARTITION, "_file_day").alias(PARTITION))
        .drop("_file_day")
    )


# --- writing -----------------------------------------------------------------------------------


def file_key(name: str, hint: str) -> str:
    """The stem of a source's partition files: its session hint (made safe for a file name)
    and a short hash of its path, so two logs never share a file."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", hint)[:64] or "log"
    return f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def _partition(day: Any) -> str:
    return f"{PARTITION}={day.isoformat() if day is not None else '__HIVE_DEFAULT_PARTITION__'}"


class Written(NamedTuple):
    """What :func:`write_batch` did for one source log."""

    files: list[str]
    """The files written, relative to OUT."""
    readable: bool
    """The log gave at least one event (else it is exported again next time)."""


def write_batch(result: ReadResult, *, out: str, keys: Mapping[str, str]) -> dict[str, Written]:
    """Write the tables of one batch of logs under ``out``: one file per log, table and day
    (an empty one when the table has no row there). ``keys`` maps each log's name to its file
    key (:func:`file_key`)."""
    root = Path(out)
    tables = frames(result)
    readable = set(result.events["file"].unique().to_list())
    days: dict[str, set[Any]] = {}  # every log gets a file in every table for each of its days
    for table in tables.values():
        for file, day in table.select("file", PARTITION).unique().iter_rows():
            days.setdefault(file, set()).add(day)
    written = {file: Written([], file in readable) for file in days}
    for name, table in tables.items():
        parts = table.partition_by("file", PARTITION, as_dict=True)
        for file, file_days in days.items():
            for day in sorted(file_days, key=lambda d: (d is None, d)):
                rows = parts.get((file, day), table.clear())
                relative = f"{name}/{_partition(day)}/{keys[file]}.parquet"
                _write_parquet(rows.drop(PARTITION), root / relative)
                written[file].files.append(relative)
    return written


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with _atomic(path, "wb") as stream:
        frame.write_parquet(stream)


@contextmanager
def _atomic(path: Path, mode: str) -> Iterator[IO[Any]]:
    """A file written under a temporary name beside ``path``, renamed over it when whole
    (private to the user, 0600, like the temporary file: the tables hold prompt previews)."""
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, mode) as stream:
            yield stream
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


# --- the manifest and the plan -----------------------------------------------------------------


def fingerprint(source: Source) -> dict[str, Any] | None:
    """Size, mtime_ns and a hash of the first and last bytes; None when it cannot be taken
    (standard input, an unreadable file; a named pipe is refused, never waited on): such a
    source is always exported again."""
    if source.path is None:
        return None
    try:
        with open_log(source.path) as stream:  # never blocks on a named pipe
            info = os.fstat(stream.fileno())
            digest = hashlib.sha256(stream.read(HASHED_BYTES))
            stream.seek(max(0, info.st_size - HASHED_BYTES))
            digest.update(stream.read(HASHED_BYTES))
    except OSError:
        return None
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": digest.hexdigest()}


@dataclass
class Plan:
    """What an export of ``sources`` into ``out`` has to do."""

    out: Path
    changed: list[Source]
    unchanged: list[Source]
    previous: dict[str, Any]
    """The manifest's entries of the last export (by source name)."""
    fingerprints: dict[str, dict[str, Any] | None]
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def gone(self) -> list[str]:
        """Sources of the last export that are not selected now."""
        selected = {source.name for source in (*self.changed, *self.unchanged)}
        return sorted(set(self.previous) - selected)


@dataclass(frozen=True)
class Summary:
    """What an export did, per source log."""

    out: Path
    written: int
    unchanged: int
    removed: int
    files: int


def prepare(out: Path, sources: Iterable[Source]) -> Plan:
    """Check that ``out`` can take an export, and which sources changed since the last one.

    Raises :class:`ExportError` when ``out`` is a file, a non-empty folder without our
    manifest, or holds a manifest that is not ours.
    """
    previous = _previous(out)
    changed: list[Source] = []
    unchanged: list[Source] = []
    prints: dict[str, dict[str, Any] | None] = {}
    for source in sources:
        print_ = fingerprint(source)
        prints[source.name] = print_
        entry = previous.get(source.name)
        same = print_ is not None and entry is not None and entry["source"] == print_
        (unchanged if same else changed).append(source)
    keys = {s.name: file_key(s.name, s.session_hint) for s in (*changed, *unchanged)}
    return Plan(out, changed, unchanged, previous, prints, keys)


def _previous(out: Path) -> dict[str, Any]:
    """The manifest's sources (an empty dict for a new or empty folder)."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: not a folder; give a new or empty folder, or an earlier export")
    manifest = out / MANIFEST
    if not manifest.exists():
        if out.is_dir() and any(out.iterdir()):
            raise ExportError(
                f"{out}: not empty and holds no {MANIFEST} of copilot-logs; "
                "give a new or empty folder, or an earlier export"
            )
        return {}
    try:
        document = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise ExportError(f"{manifest}: cannot be read as an export manifest ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ExportError(f"{manifest}: not a manifest of copilot-logs export")
    sources = document.get("sources")
    if not isinstance(sources, dict):
        raise ExportError(f"{manifest}: has no sources; delete it and export again")
    fresh = document.get("version") == VERSION
    # An entry of another version, or malformed, is exported again (its listed files replaced).
    entries = {}
    for name, entry in sources.items():
        if isinstance(entry, dict):
            files = _files(entry)
            whole = fresh and files and len(files) == len(entry["files"])
            entries[name] = {"source": entry.get("source") if whole else None, "files": files}
    return entries


def finish(plan: Plan, written: Iterable[Mapping[str, Written]]) -> Summary:
    """Record the export in the manifest and remove the files no source produces any more:
    files of the sources gone, and files a rewritten source no longer writes."""
    done: dict[str, Written] = {}
    for part in written:
        done.update(part)
    entries: dict[str, Any] = {}
    for source in plan.unchanged:
        entries[source.name] = plan.previous[source.name]
    for source in plan.changed:
        result = done.get(source.name, Written([], readable=False))
        # A source that gave no event (unreadable, empty, not a log) keeps no fingerprint: it
        # is read, and reported, again next time.
        entries[source.name] = {
            "source": plan.fingerprints.get(source.name) if result.readable else None,
            "files": result.files,
        }
    kept = {f for entry in entries.values() for f in entry["files"]}
    stale = {f for entry in plan.previous.values() for f in entry["files"] if f not in kept}
    for relative in sorted(stale):
        _remove(plan.out, relative)
    document = {"format": FORMAT, "version": VERSION, "sources": entries}
    plan.out.mkdir(parents=True, exist_ok=True)
    with _atomic(plan.out / MANIFEST, "wb") as stream:
        stream.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return Summary(
        out=plan.out,
        written=sum(1 for s in plan.changed if s.name in done),
        unchanged=len(plan.unchanged),
        removed=len(plan.gone),
        files=len(kept),
    )


def _files(entry: Mapping[str, Any]) -> list[str]:
    files = entry.get("files")
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []


def _remove(out: Path, relative: str) -> None:
    """Delete a file the manifest lists, only inside ``out`` and only a Parquet file of ours;
    its partition folder too when that leaves it empty."""
    path = (out / relative).resolve()
    if not relative.endswith(".parquet") or out.resolve() not in path.parents:
        return
    with suppress(FileNotFoundError):
        path.unlink()
    with suppress(OSError):
        path.parent.rmdir()


def batch_writer(plan: Plan) -> Callable[[ReadResult], dict[str, Written]]:
    """The function to map over batches of ``plan.changed`` (picklable: a partial)."""
    return partial(write_batch, out=str(plan.out), keys=plan.keys)
