"""The runs ``diff`` compares: one row per session (or per task), its figures taken from what
``count``, ``sessions``, ``usage`` and ``audit`` compute, batch by batch.

Nothing here decides what a call, a completion or a credit is; with ``--unit task`` the
figures not known per task stay unknown. Each run carries what pairs it with runs of the other
side: its first typed prompt (normalised, hashed, previewed), its session's name and id
(docs/diff.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands import audit as audit_core
from copilot_logs.commands import count as count_core
from copilot_logs.commands import sessions as sessions_core
from copilot_logs.commands.usage.breakdown import NOT_ATTRIBUTABLE, breakdowns
from copilot_logs.derive import SESSION
from copilot_logs.derive.usage import session_rows
from copilot_logs.ingest.reader import ReadResult

UNITS = ("session", "task")
PREVIEW_CHARS = 60
"""Characters of a prompt shown beside its hash."""
HASH_CHARS = 12

RUN_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "session_id": pl.String(),
    "task_index": pl.Int64(),
    "started_at": pl.Datetime("ms", "UTC"),
    **dict.fromkeys(("prompt_hash", "prompt_preview", "name", "verdict"), pl.String()),
    "ai_credits": pl.Float64(),
    **dict.fromkeys(("input_tokens", "output_tokens", "llm_calls", "subagent_calls"), pl.Int64()),
    **dict.fromkeys(("fusion_calls", "nudges", "wasted_calls", "tool_calls"), pl.Int64()),
    "failed_tool_calls": pl.Int64(),
    "tool_failure_rate": pl.Float64(),
    **dict.fromkeys(("completed", "looping"), pl.Boolean()),
    **dict.fromkeys(("wall_time_ms", "model_time_ms", "damaged_lines"), pl.Int64()),
}
"""One run: where it is, what pairs it, and every metric of
:data:`copilot_logs.commands.diff.metrics.METRICS` (null: unknown)."""

NOT_JUDGED = (audit_core.INTERACTIVE, audit_core.RUNNING)
"""Verdicts that say nothing of completion: ``completed`` is unknown for them."""


def session_part(result: ReadResult) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One batch's figures per session, and its audit facts (judged once all batches are in,
    as ``audit`` does). Both split by file, so the store keeps them."""
    counted = count_core.count(result)
    listed = sessions_core.summarize(result).select(
        *SESSION, wall_time_ms="duration_ms", damaged_lines="damaged_lines"
    )
    annotated = derive.annotate(result.events)
    first_prompts = (  # the text of each session's first typed prompt
        annotated.filter(derive.TASK_START)
        .group_by(*SESSION, maintain_order=True)
        .agg(prompt=pl.col("text").first())
    )
    used = session_rows(annotated).select(
        *SESSION, "ai_credits", "input_tokens", "output_tokens", model_time_ms="api_duration_ms"
    )
    figures = (
        counted.select(
            *SESSION,
            "started_at",
            "llm_calls",
            "subagent_calls",
            "fusion_calls",
            "tool_calls",
            "failed_tool_calls",
            nudges="autopilot_nudges",
        )
        .join(first_prompts, on=SESSION, how="left")
        .join(listed, on=SESSION, how="left")
        .join(used, on=SESSION, how="left")
    )
    return figures, audit_core.facts(result)


def task_part(result: ReadResult) -> pl.DataFrame:
    """One batch's figures per task, from ``usage --by task`` (and its calls: which are the
    main agent's, which a sub-agent's); a session's ``not attributable`` row is no task."""
    found = {
        by: rows.filter(pl.col("source") != NOT_ATTRIBUTABLE)
        for by, rows in breakdowns(result, ("call", "task")).items()
    }
    calls = (
        found["call"]
        .group_by(*SESSION, "task_index")
        .agg(
            llm_calls=pl.col("agent_id").is_null().sum().cast(pl.Int64),
            subagent_calls=pl.col("agent_id").is_not_null().sum().cast(pl.Int64),
        )
    )
    return (
        found["task"]
        .drop("llm_calls")
        .join(calls, on=[*SESSION, "task_index"], how="left")
        .select(
            *SESSION,
            "task_index",
            "started_at",
            "prompt",
            "completed",
            "llm_calls",
            "subagent_calls",
            "ai_credits",
            "input_tokens",
            "output_tokens",
            "model_time_ms",
        )
    )


def part_for(unit: str) -> Callable[[ReadResult], Any]:
    """The batch function of ``unit`` (module-level, so worker processes and the store take
    it)."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}")
    return session_part if unit == "session" else task_part


def runs(
    parts: Iterable[Any],
    *,
    unit: str,
    now: datetime | None = None,
    names: Callable[[str], str | None] | None = None,
) -> pl.DataFrame:
    """The runs (:data:`RUN_SCHEMA`) of the batches' parts, oldest first; ``names`` gives each
    log's session name (default: none)."""
    parts = list(parts)
    table = _task_runs(parts) if unit == "task" else _session_runs(parts, now)
    files = table["file"].unique().to_list()
    named = {file: (names(file) if names else None) for file in files}
    keyed = _keyed(table).with_columns(
        name=pl.col("file").replace_strict(named, default=None, return_dtype=pl.String)
    )
    return (
        keyed.select(list(RUN_SCHEMA))
        .cast(RUN_SCHEMA)  # type: ignore[arg-type]
        .sort("started_at", "file", "session_id", "task_index", nulls_last=True)
    )


def _session_runs(
    parts: list[tuple[pl.DataFrame, pl.DataFrame]], now: datetime | None
) -> pl.DataFrame:
    if not parts:
        return _empty_with_prompt()
    figures = pl.concat([p[0] for p in parts], how="vertical_relaxed")
    judged = audit_core.judge([p[1] for p in parts], now=now).select(
        *SESSION, "verdict", "looping", "wasted_calls"
    )
    return figures.join(judged, on=SESSION, how="left").with_columns(
        task_index=pl.lit(None, pl.Int64),
        completed=pl.when(~pl.col("verdict").is_in(NOT_JUDGED)).then(
            pl.col("verdict") == audit_core.COMPLETED
        ),
        tool_failure_rate=pl.when(pl.col("tool_calls") > 0).then(
            pl.col("failed_tool_calls") / pl.col("tool_calls")
        ),
    )


def _task_runs(parts: list[pl.DataFrame]) -> pl.DataFrame:
    if not parts:
        return _empty_with_prompt()
    table = pl.concat(parts, how="vertical_relaxed")
    unknown = [
        name
        for name in RUN_SCHEMA
        if name not in table.columns and name not in ("prompt_hash", "prompt_preview", "name")
    ]
    return table.with_columns(pl.lit(None, RUN_SCHEMA[name]).alias(name) for name in unknown)


def _empty_with_prompt() -> pl.DataFrame:
    schema = {k: v for k, v in RUN_SCHEMA.items() if k not in ("prompt_hash", "prompt_preview")}
    return pl.DataFrame(schema={**schema, "prompt": pl.String()})


def _keyed(table: pl.DataFrame) -> pl.DataFrame:
    """The prompt's hash and preview in place of its text."""
    keys = [prompt_key(text) for text in table["prompt"].to_list()]
    return table.drop("prompt").with_columns(
        prompt_hash=pl.Series([k[0] for k in keys], dtype=pl.String),
        prompt_preview=pl.Series([k[1] for k in keys], dtype=pl.String),
    )


def prompt_key(text: str | None) -> tuple[str | None, str | None]:
    """A prompt's hash (of its text with every run of whitespace one space, trimmed) and its
    preview; (None, None) without one. The events frame keeps a prompt's first
    characters only (``PREVIEW_CHARS`` of the reader): two prompts alike that far are one."""
    if text is None:
        return None, None
    normal = " ".join(text.split())
    digest = hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    preview = normal if len(normal) <= PREVIEW_CHARS else normal[: PREVIEW_CHARS - 1] + "…"
    return digest, preview
