"""What sessions used and cost (``copilot-logs usage``), from the session model's usage.

The session rows of :mod:`copilot_logs.derive.usage`, regrouped by day, week (ISO) or month of
their start in the chosen zone, repository or model; a grouped figure sums the sessions where
it is known (None when known for none). Per call, prompt, agent and task: ``breakdown``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import SESSION
from copilot_logs.derive import usage as derive_usage
from copilot_logs.derive.calls import credits
from copilot_logs.derive.usage import MODEL_FIGURES, MODEL_USAGE, SUMMED
from copilot_logs.errors import CopilotLogsError
from copilot_logs.ingest.reader import ReadResult

GROUPINGS = ("session", "day", "week", "month", "model", "repository")


def _known_sum(name: str) -> pl.Expr:
    column = pl.col(name)
    summed = column.sum()
    if name == "premium_requests":
        summed = summed.round(6)
    return pl.when(column.is_not_null().any()).then(summed).otherwise(None).alias(name)


def _credits() -> pl.Expr:
    return credits(pl.col("nano_aiu")).alias("ai_credits")


def _merged_models(sessions: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    exploded = sessions.select(*keys, "models").explode("models").drop_nulls("models")
    per_model = (
        exploded.unnest("models")
        .group_by(*keys, "model")
        .agg(_known_sum(name) for name in MODEL_FIGURES if name != "ai_credits")
        .with_columns(_credits())
        .sort(*keys, "model")
    )
    fields = [pl.col(name) for name in MODEL_USAGE.to_schema()]
    if not keys:
        return per_model.select(models=pl.struct(fields).implode())
    return per_model.group_by(keys, maintain_order=True).agg(models=pl.struct(fields))


def _bucket(by: str, zone: str) -> pl.Expr:
    local = pl.col("started_at").dt.convert_time_zone(zone)
    if by == "day":
        return local.dt.date().alias("day")
    if by == "week":
        return local.dt.strftime("%G-W%V").alias("week")
    return local.dt.strftime("%Y-%m").alias("month")


KNOWN = {"sessions_with_credits": "nano_aiu", "sessions_with_tokens": "input_tokens"}
"""How many of a row's sessions have a figure at all: a sum over fewer than all of them says
so (``0.00 (88 of 140 known)``), never a bare 0.00."""


def _aggregates() -> list[pl.Expr]:
    return [
        pl.len().cast(pl.Int64).alias("sessions"),
        (~pl.col("complete")).sum().cast(pl.Int64).alias("incomplete_sessions"),
        *(
            pl.col(figure).is_not_null().sum().cast(pl.Int64).alias(n)
            for n, figure in KNOWN.items()
        ),
        *(_known_sum(name) for name in SUMMED),
    ]


def _by_model(sessions: pl.DataFrame) -> pl.DataFrame:
    exploded = (
        sessions.select(_session=pl.struct(SESSION), complete="complete", models="models")
        .explode("models")
        .drop_nulls("models")
        .unnest("models")
    )
    return (
        exploded.group_by("model")
        .agg(
            pl.col("_session").n_unique().cast(pl.Int64).alias("sessions"),
            pl.col("_session")
            .filter(~pl.col("complete"))
            .n_unique()
            .cast(pl.Int64)
            .alias("incomplete_sessions"),
            *(
                pl.col("_session")
                .filter(pl.col(figure).is_not_null())
                .n_unique()
                .cast(pl.Int64)
                .alias(name)
                for name, figure in KNOWN.items()
            ),
            *(_known_sum(name) for name in MODEL_FIGURES if name != "ai_credits"),
        )
        .with_columns(_credits())
        .select("model", "sessions", "incomplete_sessions", *KNOWN, *MODEL_FIGURES)
        .sort("model")
    )


def group(sessions: pl.DataFrame, by: str, zone: str) -> pl.DataFrame:
    """The session rows regrouped ``by`` one of :data:`GROUPINGS` (periods in ``zone``)."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}")
    if by == "session":
        return sessions
    if by == "model":
        return _by_model(sessions)
    keyed = sessions.with_columns(pl.col("repository") if by == "repository" else _bucket(by, zone))
    keys = [by]
    rows = keyed.group_by(keys).agg(_aggregates()).with_columns(_credits())
    rows = rows.join(_merged_models(keyed, keys), on=keys, how="left")
    return rows.select(
        *keys,
        "sessions",
        "incomplete_sessions",
        *KNOWN,
        "premium_requests",
        "nano_aiu",
        "ai_credits",
        *(name for name in SUMMED if name not in ("premium_requests", "nano_aiu")),
        pl.col("models").fill_null([]),
    ).sort(keys)


def totals(sessions: pl.DataFrame) -> dict[str, Any]:
    row = sessions.select(_aggregates()).with_columns(_credits())
    merged = _merged_models(sessions, [])
    figures = row.to_dicts()[0]
    figures["models"] = merged["models"].to_list()[0] if merged.height else []
    return figures


SESSION_SCHEMA = derive_usage.SESSION_SCHEMA


@dataclass(frozen=True)
class UsageReport:
    by: str
    zone: str
    rows: pl.DataFrame
    sessions: pl.DataFrame
    totals: dict[str, Any]


def session_usage(result: ReadResult) -> pl.DataFrame:
    """One row per session log (:data:`SESSION_SCHEMA`), newest first."""
    if result.events.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    return derive_usage.session_rows(derive.annotate(result.events))


def usage(result: ReadResult, *, by: str = "session", zone: str = "UTC") -> UsageReport:
    return report([session_usage(result)], by=by, zone=zone)


def report(parts: list[pl.DataFrame], *, by: str = "session", zone: str = "UTC") -> UsageReport:
    """The report over the :func:`session_usage` of several batches."""
    sessions = derive.newest_first(pl.concat(parts))
    return UsageReport(
        by=by, zone=zone, rows=group(sessions, by, zone), sessions=sessions, totals=totals(sessions)
    )


def ordered(rows: pl.DataFrame, sort: str | None = None, top: int | None = None) -> pl.DataFrame:
    """``rows`` sorted by ``sort`` (``FIELD``, ``FIELD:desc``: biggest first, a missing figure
    last; ``FIELD:asc``; a tie keeps the rows' order) and cut to the first ``top``."""
    if sort:
        field, _, direction = sort.partition(":")
        sortable = [
            name
            for name, dtype in rows.schema.items()
            if not isinstance(dtype, pl.List | pl.Struct)
        ]
        if field not in sortable:
            raise CopilotLogsError(
                f"--sort {field}: no such field to sort by; choose one of {', '.join(sortable)}"
            )
        if direction not in ("", "asc", "desc"):
            raise CopilotLogsError(f"--sort {sort}: write FIELD, FIELD:desc or FIELD:asc")
        rows = rows.sort(field, descending=direction != "asc", nulls_last=True, maintain_order=True)
    return rows.head(top) if top is not None else rows
