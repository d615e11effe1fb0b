"""The tables ``copilot-logs export`` writes, computed from a batch of logs (docs/export.md).

Six tables: ``events``, ``turns``, ``tools``, ``sessions``, ``findings`` and ``usage``, each
with its ``date`` partition column (the start day, UTC, of the row's session) last. A log's
rows do not depend on the other logs of its batch, so the tables of a corpus are the
concatenation of the tables of its batches.
"""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
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
