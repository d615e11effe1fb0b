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
