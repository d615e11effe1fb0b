"""One row per LLM call and what it used: ``usage --by call``, and the calls behind the rows
of ``--by prompt``, ``agent`` and ``task`` (docs/usage.md, "Per call, prompt, agent, task").

A call is what every command counts as one (a main-agent turn, or a sub-agent's call). Its
figures are *exact* where the CLI wrote a ``session.usage_record`` for it (1.0.102 on), matched
to the call its agent made last before it; elsewhere only its messages' output tokens are
known (``source`` ``messages``), every other figure null, never 0. A record that matches no
call is kept as a call of its own, so no usage the log reports is lost. Each call is placed,
as the session model places its events, in its prompt, task and segment.
"""

from __future__ import annotations

import polars as pl

from copilot_logs.derive import MAIN, SESSION, TASK_START, TYPE, subagent_calls, turns

USAGE_RECORD = "session.usage_record"
NANO_PER_CREDIT = 1_000_000_000
MAX_FIGURE = 1 << 50
"""The largest count or amount taken as a figure (about 10^15 tokens, or a million credits in
nano-AIU): no CLI writes more for a session, and sums of figures below it cannot overflow the
64-bit columns. A larger, negative or non-finite value is no figure (None), never a wrapped or
infinite total (issue 34)."""

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
"""column -> (its path under ``data.usage``, its type); ``input_tokens`` includes the cache
reads and writes; ``cost`` is the premium-request multiplier (legacy billing)."""


def usage_records(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per ``session.usage_record`` of the annotated events, in file order; a field
    missing or of another type is null, never an error."""
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
    """A field's JSON text in its column's type; a number only when finite and from 0 to
    :data:`MAX_FIGURE` (``"NaN"``, ``"Infinity"``, a negative or an absurd amount is null)."""
    value = text.cast(dtype, strict=False)
    if dtype == pl.String():
        return value
    number = value.cast(pl.Float64)
    return pl.when(number.is_finite() & number.is_between(0, MAX_FIGURE)).then(value)


EXACT = "exact"
FROM_TOTALS = "from totals"
MESSAGES = "messages"
SOURCES = (EXACT, FROM_TOTALS, MESSAGES)
"""Where a row's figures come from: the CLI's per-call records; the shutdown's (or
checkpoints') figures for exactly that group; or only the output tokens of the messages."""

MAIN_AGENT = "main"

CALL_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "session_id": pl.String(),
    "line": pl.Int64(),
    "started_at": pl.Datetime("ms", "UTC"),
    "agent_id": pl.String(),
    "agent": pl.String(),
    "prompt_index": pl.Int64(),
    "prompt": pl.String(),
    "task_index": pl.Int64(),
    "segment": pl.Int64(),
    "model": pl.String(),
    "api_call_id": pl.String(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "cache_read_tokens": pl.Int64(),
    "cache_write_tokens": pl.Int64(),
    "nano_aiu": pl.Float64(),
    "ai_credits": pl.Float64(),
    "credits_status": pl.String(),
    "model_time_ms": pl.Int64(),
    "ttft_ms": pl.Float64(),
    "source": pl.String(),
}
"""The columns of :func:`call_usage`; the figures are documented in docs/usage.md."""


def credits(nano: pl.Expr) -> pl.Expr:
    """AI credits from nano-AIU. Polars divides by multiplying with the reciprocal; a credit
    has nine decimals at most, so rounding there gives the exact figure back."""
    return (nano / NANO_PER_CREDIT).round(9)


RECORD_SCHEMA: dict[str, pl.DataType] = {
    "record_line": pl.Int64(),
    "record_event_id": pl.String(),
    "record_at": pl.Datetime("ms", "UTC"),
    "finish_reason": pl.String(),
    "initiator": pl.String(),
    "cost": pl.Float64(),
    "provider_type": pl.String(),
}
"""What :func:`call_records` adds to a call's row from its usage record (null without one)."""


def call_usage(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per LLM call of the annotated events (:data:`CALL_SCHEMA`), in file order."""
    return call_records(annotated).select(list(CALL_SCHEMA))


def call_records(annotated: pl.DataFrame) -> pl.DataFrame:
    """:func:`call_usage`'s rows with :data:`RECORD_SCHEMA` after them (``otel``'s spans)."""
    schema = {**CALL_SCHEMA, **RECORD_SCHEMA}
    if annotated.is_empty():
        return pl.DataFrame(schema=schema)
    events = annotated
    matched = _matched(_calls(events), _records(events))
    names = _agent_names(events)
    prompts = events.filter(TASK_START).select(*SESSION, "prompt_index", prompt="text")
    return (
        matched.join(names, on=[*SESSION, "agent_id"], how="left")
        .join(prompts, on=[*SESSION, "prompt_index"], how="left")
        .with_columns(
            # A sub-agent whose subagent.started was lost is still a sub-agent: named by its
            # key, never taken for the main agent (issue 34).
            agent=pl.when(pl.col("agent_id").is_null())
            .then(pl.lit(MAIN_AGENT))
            .otherwise(pl.coalesce("agent", pl.format("sub-agent {}", "agent_id"))),
            # Numbered 1, 2, ... over the tasks that made calls.
            task_index=pl.col("task_index").rank("dense").over(*SESSION).cast(pl.Int64),
        )
        .select(list(schema))
        .cast(schema)  # type: ignore[arg-type]
        .sort(*SESSION, "line")
    )


def _calls(events: pl.DataFrame) -> pl.DataFrame:
    """The calls counted from the events: main turns and sub-agent calls, with their line,
    time, model, output tokens (from their messages) and place."""
    where = events.select(*SESSION, "line", "prompt_index", "task_index", "segment")
    main_lines = events.filter(MAIN & pl.col("llm_call")).select(*SESSION, "line")
    main = (
        turns(events)
        .join(main_lines, on=[*SESSION, "line"])
        .select(
            *SESSION,
            "line",
            "model",
            "output_tokens",
            started_at="started_at",
            agent_id=pl.lit(None, pl.String),
        )
    )
    subs = subagent_calls(events).select(
        *SESSION, "line", "model", "output_tokens", "agent_id", started_at="timestamp"
    )
    # A log whose messages carry no outputTokens (BYOK providers, some versions) knows none:
    # the turns' sums are 0 there, which would pass for a figure.
    known = events.group_by(*SESSION).agg(
        _known=((TYPE == "assistant.message") & pl.col("output_tokens").is_not_null()).any()
    )
    return (
        pl.concat([main, subs.select(main.columns)], how="vertical_relaxed")
        .join(known, on=SESSION, how="left")
        .with_columns(output_tokens=pl.when("_known").then("output_tokens"))
        .drop("_known")
        .join(where, on=[*SESSION, "line"], how="left")
        .with_columns(_agent=pl.col("agent_id").fill_null(""))
        .sort("_agent", *SESSION, "line")
    )


def _records(events: pl.DataFrame) -> pl.DataFrame:
    where = events.select(*SESSION, "line", "prompt_index", "task_index", "segment")
    return (
        usage_records(events)
        .join(where, on=[*SESSION, "line"], how="left")
        .rename({"line": "record_line", "output_tokens": "record_output_tokens"})
        .with_columns(
            _agent=pl.col("agent_id").fill_null(""),
            _line=pl.col("record_line"),
            record_event_id=pl.col("event_id"),
            record_at=pl.col("timestamp"),
        )
        .sort("_agent", *SESSION, "_line")
    )


def _matched(calls: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """Each call with the first record its agent wrote after it (and before its next call);
    records left over become calls of their own."""
    keys = ["_agent", *SESSION]
    located = (
        records.sort("_line")
        .join_asof(
            calls.select(*keys, call_line="line", _line="line").sort("_line"),
            on="_line",
            by=keys,
            strategy="backward",
            check_sortedness=False,  # sorted by line above; polars cannot check it within groups
        )
        .with_columns(_first=pl.col("record_line").rank("ordinal").over(*keys, "call_line") == 1)
    )
    taken = located.filter(pl.col("call_line").is_not_null() & pl.col("_first"))
    figures = [
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "total_nano_aiu",
        "ai_credits_status",
        "duration_ms",
        "ttft_ms",
        "api_call_id",
        *(name for name in RECORD_SCHEMA if name != "record_line"),
        "record_output_tokens",
        "record_model",
    ]
    taken = taken.rename({"model": "record_model"}).select(
        *keys, "call_line", "record_line", *figures, _exact=pl.lit(True)
    )
    joined = calls.join(taken, left_on=[*keys, "line"], right_on=[*keys, "call_line"], how="left")
    left_over = located.filter(pl.col("call_line").is_null() | ~pl.col("_first")).select(
        *SESSION,
        "agent_id",
        "prompt_index",
        "task_index",
        "segment",
        *figures[:-1],
        "record_line",
        line="record_line",
        started_at="timestamp",
        record_model="model",
        model="model",
        output_tokens=pl.lit(None, pl.Int64),
        _exact=pl.lit(True),
    )
    both = pl.concat([joined.drop("_agent"), left_over], how="diagonal_relaxed")
    return _figures(both)


def _figures(calls: pl.DataFrame) -> pl.DataFrame:
    """The call's figures: the record's where it has one, else its messages' output tokens."""
    exact = pl.col("_exact").fill_null(False)
    status = pl.col("ai_credits_status")
    # A record's credits count where it reports some (none is "unavailable", not 0); a
    # negative amount, which the schema rules out, is no figure.
    billed = (
        exact
        & (pl.col("total_nano_aiu") >= 0).fill_null(False)
        & (status != "unavailable").fill_null(True)
    )
    return calls.with_columns(
        model=pl.coalesce("record_model", "model"),
        output_tokens=pl.when(exact)
        .then(pl.coalesce("record_output_tokens", "output_tokens"))
        .otherwise("output_tokens"),
        nano_aiu=pl.when(billed).then("total_nano_aiu"),
        ai_credits=pl.when(billed).then(credits(pl.col("total_nano_aiu"))),
        credits_status=pl.when(exact)
        .then(pl.coalesce(status, pl.when(billed).then(pl.lit("complete"))))
        .otherwise(pl.lit(None, pl.String)),
        model_time_ms="duration_ms",
        source=pl.when(exact).then(pl.lit(EXACT)).otherwise(pl.lit(MESSAGES)),
    )


def _agent_names(events: pl.DataFrame) -> pl.DataFrame:
    """Per sub-agent (by its key, the task call's toolCallId), the name it was started with:
    its display name (the task call's name from CLI 1.0.85), else its agent type."""
    started = events.filter(TYPE == "subagent.started").select(
        *SESSION, agent_id="tool_call_id", agent=pl.coalesce("text", "tool_name")
    )
    return started.unique(subset=[*SESSION, "agent_id"], keep="first", maintain_order=True)
