"""One row per session: what ``copilot-logs sessions`` lists."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import damaged_line_count

NEWEST_FIRST = ("started_at", "file", "session_id")
"""How session rows are ordered: newest first, ties (two sessions of one file may start at
the same moment) by file and session id, so that the order never depends on batches."""

SESSION_COLUMNS = (
    "session_id",
    "started_at",
    "ended_at",
    "duration_ms",
    "repository",
    "cwd",
    "branch",
    "copilot_version",
    "model",
    "mode",
    "user_prompts",
    "autopilot_nudges",
    "llm_calls",
    "open_turns",
    "tool_calls",
    "subagent_runs",
    "subagent_calls",
    "errors",
    "task_complete",
    "status",
    "damaged_lines",
    "file",
)


def autopilot_work() -> pl.Expr:
    """Per event: main-agent work done in autopilot, i.e. a nudge, or a prompt or LLM call
    (turn_start) while the mode in effect is autopilot.

    The mode in effect is the last ``session.mode_changed`` newMode or ``user.message``
    agentMode before the event. A switch to autopilot with no work after it (flipped and back,
    or at the very end) does not make a session autopilot. The expression forward-fills in
    reading order: use it inside ``group_by(*SESSION).agg`` or as
    ``autopilot_work().over(*SESSION)`` on a frame sorted by file and line.
    """
    in_effect = pl.when(MAIN).then(pl.col("agent_mode")).forward_fill()
    work = MAIN & TYPE.is_in(["user.message", derive.TURN_START])
    nudge = MAIN & (TYPE == "user.message") & pl.col("is_nudge").fill_null(False)
    return (work & (in_effect == "autopilot")).fill_null(False) | nudge


def session_mode() -> pl.Expr:
    """``autopilot`` when the log shows autopilot work (see :func:`autopilot_work`: a nudge, or
    a prompt or LLM call while the mode set by ``session.mode_changed`` or a message's
    agentMode is autopilot), else ``interactive``. An aggregation: use it per session."""
    return (
        pl.when(autopilot_work().any()).then(pl.lit("autopilot")).otherwise(pl.lit("interactive"))
    )


def damaged_lines(diagnostics: pl.DataFrame) -> pl.DataFrame:
    """Per session, the number of distinct physical lines that carry damage."""
    return diagnostics.group_by(*SESSION).agg(damaged_lines=damaged_line_count())


def newest_first(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Summaries of several batches as one table, newest session first."""
    return pl.concat(parts).sort(*NEWEST_FIRST, descending=[True, False, False], nulls_last=True)


def summarize(result: ReadResult) -> pl.DataFrame:
    """One row per session log read, newest first."""
    annotated = derive.annotate(result.events)
    flags = derive.count_flags(annotated)
    per_file = flags.group_by(*SESSION, maintain_order=True).agg(
        *[pl.col(name).sum() for name in derive.COUNT_FIELDS],
        model=derive.session_model(),
        mode=session_mode(),
        subagent_runs=(TYPE == "subagent.started").sum().cast(pl.Int64),
        errors=(TYPE == "session.error").sum().cast(pl.Int64),
        task_complete=(TYPE == "session.task_complete").any(),
        _last_start=pl.col("line").filter(MAIN & (TYPE == derive.TURN_START)).max(),
        _last_shutdown=pl.col("line").filter(TYPE == "session.shutdown").max(),
    )
    facts = derive.session_facts(annotated)
    table = (
        facts.join(per_file, on=SESSION, how="left")
        .join(damaged_lines(result.diagnostics), on=SESSION, how="full", coalesce=True)
        .with_columns(
            damaged_lines=pl.col("damaged_lines").fill_null(0),
            ended_at=pl.col("last_at"),
            duration_ms=(pl.col("last_at") - pl.col("started_at")).dt.total_milliseconds(),
            task_complete=pl.col("task_complete").fill_null(False),
            status=pl.when(pl.col("events").is_null())
            .then(pl.lit("unreadable"))
            # A turn left open at the shutdown (the user quit, e.g. at a permission prompt)
            # still ended: it stays counted in open_turns.
            .when(
                pl.col("_last_shutdown").is_not_null()
                & (pl.col("_last_shutdown") > pl.col("_last_start").fill_null(0))
            )
            .then(pl.lit("ended"))
            .otherwise(pl.lit("open")),
        )
        .with_columns(
            pl.col(name).fill_null(0) for name in (*derive.COUNT_FIELDS, "errors", "subagent_runs")
        )
    )
    return table.select(SESSION_COLUMNS).sort(
        *NEWEST_FIRST, descending=[True, False, False], nulls_last=True
    )
