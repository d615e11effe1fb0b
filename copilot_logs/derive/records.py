"""One row per LLM call, as the CLI's ``session.usage_record`` lines tell it (CLI 1.0.102 on).

The CLI writes one ``session.usage_record {usage: {...}}`` per call it made, the main agent's
and each sub-agent's (a sub-agent's carries its agentId, and ``usage.parentToolCallId``): its
model, tokens, cost, duration and time to first token, who initiated it, the provider's call
id. Older CLIs write none: their frame is empty. Every column is declared in
:data:`USAGE_RECORD_SCHEMA` and read field by field from the line's kept payload (the
``detail`` column), so a field missing or of another type is null, never an error.
"""

from __future__ import annotations

import polars as pl

from copilot_logs.derive.events import SESSION, TYPE
from copilot_logs.derive.shutdowns import MAX_FIGURE

USAGE_RECORD = "session.usage_record"

FIELDS: dict[str, tuple[str, pl.DataType]] = {
    "model": ("model", pl.String()),
    "input_tokens": ("inputTokens", pl.Int64()),
    "output_tokens": ("outputTokens", pl.Int64()),
    "cache_read_tokens": ("cacheReadTokens", pl.Int64()),
    "cache_write_tokens": ("cacheWriteTokens", pl.Int64()),
    "reasoning_tokens": ("reasoningTokens", pl.Int64()),
    "cost": ("cost", pl.Float64()),
    "total_nano_aiu": ("copilotUsage.totalNanoAiu", pl.Float64()),
    "ai_credits_status": ("aiCreditsStatus", pl.String()),
    "duration_ms": ("duration", pl.Int64()),
    "ttft_ms": ("timeToFirstTokenMs", pl.Float64()),
    "initiator": ("initiator", pl.String()),
    "interaction_type": ("interactionType", pl.String()),
    "provider_type": ("providerType", pl.String()),
    "parent_tool_call_id": ("parentToolCallId", pl.String()),
    "api_call_id": ("apiCallId", pl.String()),
    "finish_reason": ("finishReason", pl.String()),
    "num_tool_calls": ("numToolCalls", pl.Int64()),
    "fusion_id": ("fusion.fusionId", pl.String()),
    "sequence": ("accounting.sequence", pl.Int64()),
}
"""column -> (its path under ``data.usage``, its type)."""

USAGE_RECORD_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "session_id": pl.String(),
    "line": pl.Int64(),
    "event_id": pl.String(),
    "timestamp": pl.Datetime("ms", "UTC"),
    "agent_id": pl.String(),
    "agent_instance": pl.String(),
    **{name: dtype for name, (_, dtype) in FIELDS.items()},
}
"""The columns of :func:`usage_records`. ``agent_id`` is the sub-agent's key (its task call's
toolCallId, as every command keys a sub-agent; null for the main agent), ``agent_instance``
the envelope agentId as written. Tokens, cost and time are the CLI's figures for the call:
``input_tokens`` includes the cache reads and writes; ``cost`` is the premium-request
multiplier (legacy billing); ``total_nano_aiu`` the AI credits in nano units (credits =
total_nano_aiu / 1e9), with ``ai_credits_status`` saying whether it was reported at all."""


def usage_records(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per ``session.usage_record`` of the annotated events (see
    :func:`copilot_logs.derive.annotate`), in file order, with :data:`USAGE_RECORD_SCHEMA`."""
    usage = pl.col("detail")
    columns = [
        _field(usage.str.json_path_match(f"$.usage.{path}"), dtype).alias(name)
        for name, (path, dtype) in FIELDS.items()
    ]
    return (
        annotated.filter(TYPE == USAGE_RECORD)
        .select(*SESSION, "line", "event_id", "timestamp", "agent_id", "agent_instance", *columns)
        .sort(*SESSION, "line")
    )


def _field(text: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A field's JSON text in its column's type. A number must be one a log may hold as a
    figure: finite, from 0 to :data:`~copilot_logs.derive.shutdowns.MAX_FIGURE` (a string such
    as ``"NaN"`` or ``"Infinity"``, a negative or an absurd amount is null, never a figure that
    prints ``nan`` or wraps a sum around)."""
    value = text.cast(dtype, strict=False)
    if dtype == pl.String():
        return value
    number = value.cast(pl.Float64)
    return pl.when(number.is_finite() & number.is_between(0, MAX_FIGURE)).then(value)
