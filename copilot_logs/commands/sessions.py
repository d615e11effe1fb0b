"""One row per session: what ``copilot-logs sessions`` lists."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import SESSION, TYPE
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import damaged_line_count

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


def damaged_lines(diagnostics: pl.DataFrame) -> pl.DataFrame:
    return diagnostics.group_by(*SESSION).agg(damaged_lines=damaged_line_count())


def newest_first(parts: list[pl.DataFrame]) -> pl.DataFrame:
    return derive.newest_first(pl.concat(parts))


def summarize(result: ReadResult) -> pl.DataFrame:
    """One row per session log read, newest first: its facts from the session model and its
    counts. ``status``: ``ended`` when its last run shut down after its last work (a turn left
    open at that shutdown still ended: it stays in ``open_turns``), else ``open``."""
    annotated = derive.annotate(result.events)
    flags = derive.count_flags(annotated)
    per_file = flags.group_by(*SESSION, maintain_order=True).agg(
        *[pl.col(name).sum() for name in derive.COUNT_FIELDS],
        subagent_runs=(TYPE == "subagent.started").sum().cast(pl.Int64),
        errors=(TYPE == "session.error").sum().cast(pl.Int64),
    )
    facts = derive.session_facts(annotated)
    table = (
        facts.join(per_file, on=SESSION, how="left")
        .join(damaged_lines(result.diagnostics), on=SESSION, how="full", coalesce=True)
        .with_columns(
            damaged_lines=pl.col("damaged_lines").fill_null(0),
            ended_at=pl.col("last_at"),
            duration_ms=(pl.col("last_at") - pl.col("started_at")).dt.total_milliseconds(),
            task_complete=pl.col("completed").fill_null(False),
            status=pl.when(pl.col("events").is_null())
            .then(pl.lit("unreadable"))
            .when(pl.col("ended"))
            .then(pl.lit("ended"))
            .otherwise(pl.lit("open")),
        )
        .with_columns(
            pl.col(name).fill_null(0) for name in (*derive.COUNT_FIELDS, "errors", "subagent_runs")
        )
    )
    return newest_first([table.select(SESSION_COLUMNS)])
