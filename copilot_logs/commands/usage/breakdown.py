"""``usage --by call|prompt|agent|task``: where the credits and tokens went inside sessions.

Rows are made of the calls of :mod:`copilot_logs.derive.calls`; when a figure is ``exact``,
``from totals`` or only the messages' output tokens: docs/usage.md, "Per call, prompt, agent,
task". Nothing is apportioned (no share by calls or by time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import SESSION
from copilot_logs.derive.calls import (
    CALL_SCHEMA,
    EXACT,
    FROM_TOTALS,
    MAIN_AGENT,
    MESSAGES,
    call_usage,
    credits,
)
from copilot_logs.derive.usage import TOKEN_FIELDS, agent_figures, lifecycle, session_rows
from copilot_logs.ingest.reader import ReadResult

NOT_ATTRIBUTABLE = "not attributable"
"""The ``source`` (and label) of the row that holds what a session's groups do not."""
LOST_REASON = (
    "figures of calls the session's own totals leave out (no shutdown or record holds them: a "
    "run killed before CLI 1.0.102, a /rewind)"
)
NO_CALL_RECORDS = "no per-call records before CLI 1.0.102"
NO_AGENT_FIGURES = "no per-agent figures before CLI 1.0.85 (nor per-call records)"
BEYOND_RECORDS = (
    "usage the shutdowns hold beyond the calls' own records (compaction, calls with no record)"
)

CALL_GROUPINGS = ("call", "prompt", "agent", "task")

KEYS: dict[str, tuple[str, ...]] = {
    "prompt": ("prompt_index", "prompt"),
    "agent": ("agent_id", "agent"),
    "task": ("task_index", "prompt_index", "prompt"),
}
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
FIGURES = ("ai_credits", "credits_status", "nano_aiu", *TOKENS, "model_time_ms", "ttft_ms")
SUMMED = ("llm_calls", "ai_credits", *TOKENS, "model_time_ms")


@dataclass(frozen=True)
class CallReport:
    by: str
    rows: pl.DataFrame
    totals: dict[str, Any]


def call_report(parts: list[pl.DataFrame], by: str) -> CallReport:
    """The report over the :func:`breakdown` rows of several batches. A total sums the rows
    where the figure is known (null when known for none)."""
    rows = pl.concat(parts, how="diagonal_relaxed") if parts else _empty(by)
    # The same rows in the same order whatever batches the store made of the logs.
    rows = rows.sort(*SESSION, maintain_order=True)
    summed = _counted(rows).select(
        pl.len().cast(pl.Int64).alias("rows"),
        *(
            pl.when(pl.col(name).is_not_null().any()).then(pl.col(name).sum()).alias(name)
            for name in SUMMED
        ),
        (pl.col("source") == MESSAGES).sum().cast(pl.Int64).alias("rows_without_figures"),
    )
    totals = summed.to_dicts()[0]
    statuses = set(rows["credits_status"].drop_nulls().to_list())
    totals["credits_status"] = "unavailable" if "unavailable" in statuses else None
    return CallReport(by=by, rows=rows, totals=totals)


def _counted(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with their LLM calls: a ``--by call`` row is one, a not-attributable row none."""
    if "llm_calls" in rows.columns:
        return rows
    one = pl.when(pl.col("source") == NOT_ATTRIBUTABLE).then(0).otherwise(1)
    return rows.with_columns(llm_calls=one.cast(pl.Int64))


def breakdown(result: ReadResult, by: str) -> pl.DataFrame:
    if by not in CALL_GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}")
    return breakdowns(result, (by,))[by]


def breakdowns(result: ReadResult, groupings: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """:func:`breakdown` of one batch by several groupings."""
    if result.events.is_empty():
        return {by: _empty(by) for by in groupings}
    annotated = derive.annotate(result.events)
    calls = call_usage(annotated)
    sessions = session_rows(annotated)
    found = {}
    for by in groupings:
        rows = calls if by == "call" else _grouped(annotated, calls, sessions, by)
        found[by] = _with_remainder(rows, calls, sessions, by)
    return found


def _grouped(
    annotated: pl.DataFrame, calls: pl.DataFrame, sessions: pl.DataFrame, by: str
) -> pl.DataFrame:
    if calls.is_empty():
        return _empty(by)
    grouped = _group(calls, by)
    if by == "task":
        done = _completions(annotated, calls)
        grouped = grouped.join(done, on=[*SESSION, "task_index"], how="left")
        grouped = grouped.with_columns(completed=pl.col("completed").fill_null(False))
    totals = _totals(annotated, sessions, by)
    filled = _filled(grouped, totals, by).sort(*SESSION, "first_line")
    return filled.select(c for c in _empty(by).columns if c != "reason")


ADDED_UP = ("nano_aiu", *TOKENS, "model_time_ms", "llm_calls")
"""The figures every grouping's rows add up to, per session: the session's own (``usage``)."""


def _with_remainder(
    rows: pl.DataFrame, calls: pl.DataFrame, sessions: pl.DataFrame, by: str
) -> pl.DataFrame:
    """``rows`` and, per session whose rows do not add up to its own figures, one row
    ``not attributable`` holding the difference and why (``reason``). A difference below zero
    is usage the rows hold and no shutdown does (a killed run's calls before CLI 1.0.102)."""
    held = (
        _counted(rows)
        .group_by(*SESSION)
        .agg(
            pl.col(name).cast(pl.Float64).fill_null(0).sum().alias(f"_rows_{name}")
            for name in ADDED_UP
        )
    )
    has_records = calls.group_by(*SESSION).agg(_records=(pl.col("source") == EXACT).any())
    whole = sessions.select(
        *SESSION,
        "started_at",
        "nano_aiu",
        *TOKENS,
        "credits_status",
        model_time_ms="api_duration_ms",
        llm_calls=pl.col("llm_calls") + pl.col("subagent_calls"),
    )
    left = whole.join(held, on=SESSION, how="left").join(has_records, on=SESSION, how="left")
    differences = {
        name: (pl.col(name).cast(pl.Float64) - pl.col(f"_rows_{name}").fill_null(0))
        for name in ADDED_UP
    }
    remainder = left.with_columns(**differences).filter(
        pl.any_horizontal((pl.col(name).fill_null(0) != 0) for name in ADDED_UP)
    )
    rows = rows.with_columns(reason=pl.lit(None, pl.String))
    if remainder.is_empty():
        return rows
    negative = pl.any_horizontal((pl.col(name).fill_null(0) < 0) for name in ADDED_UP)
    missing = NO_AGENT_FIGURES if by == "agent" else NO_CALL_RECORDS
    reason = (
        pl.when(negative)
        .then(pl.lit(LOST_REASON))
        .when(~pl.col("_records").fill_null(False))
        .then(pl.lit(missing))
        .otherwise(pl.lit(BEYOND_RECORDS))
    )
    label = "agent" if by in ("agent", "call") else "prompt"
    extra = remainder.select(
        *SESSION,
        "started_at",
        pl.col("nano_aiu").cast(pl.Float64),
        ai_credits=credits(pl.col("nano_aiu")),
        credits_status="credits_status",
        **{name: pl.col(name).cast(pl.Int64) for name in (*TOKENS, "model_time_ms", "llm_calls")},
        source=pl.lit(NOT_ATTRIBUTABLE),
        reason=reason,
        **{label: pl.lit(NOT_ATTRIBUTABLE)},
    )
    if by == "call":
        extra = extra.drop("llm_calls")
    return pl.concat([rows, extra], how="diagonal_relaxed")


def _empty(by: str) -> pl.DataFrame:
    if by == "call":
        return pl.DataFrame(schema={**CALL_SCHEMA, "reason": pl.String()})
    keys = {name: CALL_SCHEMA[name] for name in KEYS[by]}
    extra = {"completed": pl.Boolean(), "summary": pl.String()} if by == "task" else {}
    schema = {
        "file": pl.String(),
        "session_id": pl.String(),
        **keys,
        **extra,
        "started_at": CALL_SCHEMA["started_at"],
        "llm_calls": pl.Int64(),
        **{name: CALL_SCHEMA[name] for name in FIGURES},
        "source": pl.String(),
        "reason": pl.String(),
    }
    return pl.DataFrame(schema=schema)


def _group(calls: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per group, the records' sums where every call of it has one (and the figure)."""
    exact = (pl.col("source") == EXACT).all()

    def known_sum(name: str, *, records_only: bool = True) -> pl.Expr:
        known = pl.col(name).is_not_null().all()
        return pl.when((exact & known) if records_only else known).then(pl.col(name).sum())

    return (
        calls.group_by(*SESSION, *KEYS[by], maintain_order=True)
        .agg(
            first_line=pl.col("line").min(),
            started_at=pl.col("started_at").min(),
            llm_calls=pl.len().cast(pl.Int64),
            nano_aiu=known_sum("nano_aiu"),
            credits_status=pl.when(exact).then(_status()),
            input_tokens=known_sum("input_tokens"),
            cache_read_tokens=known_sum("cache_read_tokens"),
            cache_write_tokens=known_sum("cache_write_tokens"),
            output_tokens=known_sum("output_tokens", records_only=False),
            model_time_ms=known_sum("model_time_ms"),
            ttft_ms=pl.col("ttft_ms").mean(),
            source=pl.when(exact).then(pl.lit(EXACT)).otherwise(pl.lit(MESSAGES)),
        )
        .with_columns(ai_credits=credits(pl.col("nano_aiu")))
    )


def _status() -> pl.Expr:
    status = pl.col("credits_status")
    return (
        pl.when((status == "unavailable").any())
        .then(pl.lit("unavailable"))
        .when((status.fill_null("") == "complete").all())
        .then(pl.lit("complete"))
        .when(status.is_not_null().any())
        .then(pl.lit("partial"))
    )


def _completions(annotated: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Per task, whether an accepted completion ended it, and its summary: a completion
    belongs to the task of the main-agent call it was made in (the last one before it)."""
    summary = pl.coalesce("summary", "text")
    done = (
        annotated.filter(derive.ACCEPTED_COMPLETION)
        .select(*SESSION, "line", summary=summary)
        .sort("line")
    )
    main = calls.filter(pl.col("agent_id").is_null()).select(*SESSION, "line", "task_index")
    return (
        done.join_asof(main.sort("line"), on="line", by=list(SESSION), check_sortedness=False)
        .drop_nulls("task_index")
        .group_by(*SESSION, "task_index")
        .agg(completed=pl.lit(True), summary=pl.col("summary").last())
    )


def _totals(annotated: pl.DataFrame, sessions: pl.DataFrame, by: str) -> pl.DataFrame:
    """The figures the log gives for whole groups: per session, or per agent (agentMetrics)."""
    sessions = sessions.filter("complete")
    figures = sessions.select(
        *SESSION, "nano_aiu", "credits_status", *TOKENS, model_time_ms="api_duration_ms"
    )
    if by != "agent":
        return figures
    agents = _agent_metrics(annotated, sessions)
    whole = figures.with_columns(pl.col("nano_aiu").cast(pl.Float64), _whole=pl.lit(True))
    return pl.concat([agents, whole], how="diagonal_relaxed")


def _agent_metrics(annotated: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """Per agent of each complete session's last shutdown ``agentMetrics``, keyed like the
    calls (``_main`` for the main agent)."""
    complete = set(sessions.select(*SESSION).iter_rows())
    rows: list[dict[str, Any]] = []
    for (file, session_id), kinds in lifecycle(annotated).items():
        shutdowns = kinds.get("session.shutdown", [])
        if (file, session_id) not in complete or not shutdowns:
            continue
        for agent in agent_figures(shutdowns[-1]):
            rows.append({"file": file, "session_id": session_id, **agent})
    schema = {
        "file": pl.String(),
        "session_id": pl.String(),
        "agent_instance": pl.String(),
        "requests": pl.Int64(),
        **{name: pl.Int64() for name in TOKEN_FIELDS.values()},
        "nano_aiu": pl.Int64(),
        "api_duration_ms": pl.Int64(),
    }
    found = pl.DataFrame(rows, schema=schema)
    links = (
        annotated.filter(pl.col("agent_instance").is_not_null())
        .select(*SESSION, "agent_instance", "agent_id")
        .unique(subset=[*SESSION, "agent_instance"], keep="first")
    )
    return (
        found.join(links, on=[*SESSION, "agent_instance"], how="left")
        .join(sessions.select(*SESSION, "credits_status"), on=SESSION, how="left")
        .with_columns(_main=pl.col("agent_instance") == MAIN_AGENT)
        .filter(pl.col("_main") | pl.col("agent_id").is_not_null())
        .select(
            *SESSION,
            "agent_id",
            "_main",
            pl.col("nano_aiu").cast(pl.Float64),
            "credits_status",
            *TOKENS,
            model_time_ms="api_duration_ms",
        )
    )


def _filled(grouped: pl.DataFrame, totals: pl.DataFrame, by: str) -> pl.DataFrame:
    """Groups not exact take the log's figures for exactly them, where it has some."""
    rows = grouped.with_row_index("_row").with_columns(
        _groups=pl.len().over(*SESSION).cast(pl.Int64)
    )
    lone = pl.col("_groups") == 1
    if by == "agent":
        whole = pl.col("_whole").fill_null(False)
        per_agent = totals.filter(~whole)
        steps = [
            (pl.col("agent_id").is_null(), per_agent.filter("_main"), SESSION),
            (pl.col("agent_id").is_null() & lone, totals.filter(whole), SESSION),
            (
                pl.col("agent_id").is_not_null(),
                per_agent.filter(~pl.col("_main")),
                [*SESSION, "agent_id"],
            ),
        ]
    else:
        steps = [(lone, totals, SESSION)]
    for where, figures, keys in steps:
        rows = _take(rows, where, figures, list(keys))
    return rows.drop("_row", "_groups")


def _take(
    rows: pl.DataFrame, where: pl.Expr, figures: pl.DataFrame, keys: list[str]
) -> pl.DataFrame:
    """The groups ``where`` selects with only their messages' figures take ``figures``."""
    wanted = (
        rows.filter(where & (pl.col("source") == MESSAGES))
        .select("_row", *keys)
        .join(figures, on=keys, how="inner")
    )
    if wanted.is_empty():
        return rows
    taken = wanted.with_columns(
        nano_aiu=pl.col("nano_aiu").cast(pl.Float64),
        ai_credits=credits(pl.col("nano_aiu")),
        ttft_ms=pl.lit(None, pl.Float64),
        source=pl.lit(FROM_TOTALS),
    ).select("_row", *FIGURES, "source")
    return rows.update(taken, on="_row", how="left", include_nulls=True)
