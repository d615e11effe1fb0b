"""The agent loop of each session, from the annotated events: one row per main-agent turn (one
LLM call), per tool run, per sub-agent run and per sub-agent LLM call, and the per-event flags
``count`` sums. Each row carries its segment, and something left open says what became of it
(:func:`copilot_logs.derive.events.open_state`)."""

from __future__ import annotations

import polars as pl

from copilot_logs.derive.events import (
    INTERRUPTED,
    MAIN,
    SESSION,
    TURN_END,
    TURN_START,
    TYPE,
    open_state,
)
from copilot_logs.ingest import cli_format

INTERRUPTED_CODE = "interrupted"
"""The error code of the ``tool.execution_complete`` CLI 1.0.102 writes on resume for a tool its
killed run left running."""

COUNT_FIELDS = (
    "llm_calls",
    "completed_turns",
    "open_turns",
    "subagent_calls",
    "interactions",
    "user_prompts",
    "autopilot_nudges",
    "tool_calls",
    "failed_tool_calls",
    "subagent_tool_calls",
    "fusion_calls",
)


def session_model() -> pl.Expr:
    """The model a session is listed under: the one most main-agent replies (``assistant.message``)
    name; on a tie, the one of the latest reply among the tied models (what the session was using
    last); with no reply naming a model, the last model the session set. An aggregation in
    reading order: use it per session."""
    replies = pl.col("model").filter(MAIN & (TYPE == "assistant.message")).drop_nulls()
    most_named = replies.filter(replies.is_in(replies.mode().implode()))
    return pl.coalesce(most_named.last(), pl.col("session_model").drop_nulls().last())


_MESSAGE = TYPE == "assistant.message"
_REQUESTS = pl.col("tool_requests").filter(_MESSAGE).explode().drop_nulls()
"""The tool requests of an LLM call's messages (in an aggregation over the call's lines)."""


def _call_figures() -> dict[str, pl.Expr]:
    """What an LLM call (a main-agent turn or a sub-agent call) did, aggregated over its lines:
    its messages, the text of the first that has one, their output tokens, the tools they
    requested, and the tools started and failed."""
    return {
        "messages": _MESSAGE.sum().cast(pl.Int64),
        "text": pl.col("text").filter(_MESSAGE & (pl.col("text") != "")).first(),
        "output_tokens": pl.col("output_tokens").filter(_MESSAGE).sum(),
        "requested_tools": _REQUESTS.struct.field("name"),
        "tool_calls": (TYPE == "tool.execution_start").sum().cast(pl.Int64),
        "failed_tool_calls": (
            (TYPE == "tool.execution_complete") & (pl.col("success") == False)  # noqa: E712
        )
        .sum()
        .cast(pl.Int64),
    }


def turns(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per main-agent turn (one LLM call), in order, open turns included."""
    rows = annotated.filter(pl.col("in_turn"))
    return (
        rows.group_by(*SESSION, "turn_index", maintain_order=True)
        .agg(
            interaction_index=pl.col("interaction_index").first(),
            prompt_index=pl.col("prompt_index").first(),
            task_index=pl.col("task_index").first(),
            segment=pl.col("segment").first(),
            segment_end=pl.col("segment_end").first(),
            segment_shutdown_line=pl.col("segment_shutdown_line").first(),
            turn_id=pl.col("turn_id").filter(TYPE == TURN_START).first(),
            interaction_id=pl.col("interaction_id").filter(TYPE == TURN_START).first(),
            event_id=pl.col("event_id").first(),
            line=pl.col("line").first(),
            started_at=pl.col("timestamp").first(),
            ended_at=pl.col("timestamp").filter(pl.col("closes_turn")).first(),
            last_event_at=pl.col("timestamp").last(),
            open=~pl.col("closes_turn").any(),
            model=pl.coalesce(
                pl.col("model").filter(_MESSAGE).drop_nulls().first(),
                pl.col("model").filter(TYPE.str.starts_with("tool.")).drop_nulls().first(),
                pl.col("session_model").first(),
            ),
            **_call_figures(),
            task_complete_called=(
                (TYPE == "tool.execution_start") & (pl.col("tool_name") == "task_complete")
            ).any()
            | _REQUESTS.struct.field("name").is_in(["task_complete"]).any(),
            task_complete_event=(TYPE == "session.task_complete").any(),
        )
        .with_columns(
            duration_ms=(pl.col("ended_at") - pl.col("started_at")).dt.total_milliseconds(),
            ended_loop=(pl.col("messages") > 0) & (pl.col("requested_tools").list.len() == 0),
            state=open_state(pl.col("open")),
        )
        .drop("segment_end", "segment_shutdown_line")
    )


def tools(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per tool execution, start joined to complete by toolCallId.

    A complete with no start (a ``!cmd`` shell escape, or damage) still has a row, with
    ``started_at`` null; a start never completed has ``completed_at`` null.
    """
    keys = [*SESSION, "tool_call_id"]
    starts = annotated.filter(TYPE == "tool.execution_start").select(
        *keys,
        "agent_id",
        "tool_name",
        "segment",
        "segment_end",
        "segment_shutdown_line",
        start_line=pl.col("line"),
        start_event_id=pl.col("event_id"),
        started_at=pl.col("timestamp"),
        turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")),
        interaction_index="interaction_index",
        arguments=pl.col("text"),
    )
    completes = annotated.filter(TYPE == "tool.execution_complete").select(
        *keys,
        complete_agent_id=pl.col("agent_id"),
        complete_line=pl.col("line"),
        complete_event_id=pl.col("event_id"),
        completed_at=pl.col("timestamp"),
        success="success",
        error="error",
        error_code="error_code",
        is_user_requested=pl.col("is_user_requested").fill_null(False),
        result=pl.col("text"),
        complete_turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")),
        complete_segment=pl.col("segment"),
    )
    # Keep the first complete per call: a duplicated complete is a validate finding, not a
    # second execution.
    completes = completes.unique(subset=keys, keep="first", maintain_order=True)
    starts = starts.unique(subset=keys, keep="first", maintain_order=True)
    joined = starts.join(completes, on=keys, how="full", coalesce=True, nulls_equal=False)
    return (
        joined.with_columns(
            agent_id=pl.coalesce("agent_id", "complete_agent_id"),
            turn_index=pl.coalesce("turn_index", "complete_turn_index"),
            segment=pl.coalesce("segment", "complete_segment"),
            is_user_requested=pl.col("is_user_requested").fill_null(False),
            duration_ms=(pl.col("completed_at") - pl.col("started_at")).dt.total_milliseconds(),
            line=pl.coalesce("start_line", "complete_line"),
        )
        .with_columns(
            # CLI 1.0.102 closes a tool its killed run left running when the session is resumed,
            # with the error code `interrupted` (tests/recordings/1.0.102/kill-resume): the
            # CLI's own word that its run was killed. Its time to that note is no run time.
            state=pl.when((pl.col("error_code") == INTERRUPTED_CODE).fill_null(False))
            .then(pl.lit(INTERRUPTED))
            .otherwise(
                open_state(
                    pl.col("started_at").is_not_null() & pl.col("completed_at").is_null(),
                    "start_line",
                )
            ),
        )
        .with_columns(
            duration_ms=pl.when(pl.col("state") != INTERRUPTED).then(pl.col("duration_ms")),
        )
        .drop(
            "complete_agent_id",
            "complete_turn_index",
            "complete_segment",
            "segment_end",
            "segment_shutdown_line",
        )
        .select("file", "tool_call_id", "session_id", pl.exclude(*keys))
        .sort(*SESSION, "line")
    )


def subagent_runs(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent run: started, then completed or failed, keyed by toolCallId."""
    keys = [*SESSION, "tool_call_id"]
    started = annotated.filter(TYPE == "subagent.started").select(
        *keys,
        agent_name="tool_name",
        start_line="line",
        started_at="timestamp",
        model="model",
        turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")),
    )
    finished = (
        annotated.filter(TYPE.is_in(["subagent.completed", "subagent.failed"]))
        .select(
            *keys,
            end_line="line",
            finished_at="timestamp",
            success="success",
            error="error",
        )
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    inner = (
        annotated.filter(pl.col("agent_id").is_not_null())
        .group_by(*SESSION, pl.col("agent_id").alias("tool_call_id"))
        .agg(
            llm_calls=pl.col("subagent_call").sum().cast(pl.Int64),
            tool_calls=(TYPE == "tool.execution_start").sum().cast(pl.Int64),
            failed_tool_calls=((TYPE == "tool.execution_complete") & (pl.col("success") == False))  # noqa: E712
            .sum()
            .cast(pl.Int64),
            output_tokens=pl.col("output_tokens").filter(TYPE == "assistant.message").sum(),
        )
    )
    runs = started.unique(subset=keys, keep="first", maintain_order=True).join(
        finished, on=keys, how="full", coalesce=True
    )
    return (
        runs.join(inner, on=keys, how="left")
        .with_columns(
            status=pl.when(pl.col("success") == True)  # noqa: E712
            .then(pl.lit("completed"))
            .when(pl.col("success") == False)  # noqa: E712
            .then(pl.lit("failed"))
            .otherwise(pl.lit("running")),
            duration_ms=(pl.col("finished_at") - pl.col("started_at")).dt.total_milliseconds(),
            llm_calls=pl.col("llm_calls").fill_null(0),
            tool_calls=pl.col("tool_calls").fill_null(0),
            failed_tool_calls=pl.col("failed_tool_calls").fill_null(0),
        )
        .sort(*SESSION, pl.coalesce("start_line", "end_line"))
    )


def subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent LLM call: a sub-agent's lines from a line that is a call (its
    turn_start where it writes turn pairs, else its first message line of the call) up to its
    next call. ``previous_at`` is the time of that agent's line before the call (where it
    writes no turn pair, the call is taken to start then); ``ended_at`` and ``open`` come from
    its turn_end, and are null where it writes none. ``call_index`` numbers the calls of each
    sub-agent from 1."""
    turn_start = (TYPE == TURN_START).first()
    agents = annotated.filter(pl.col("agent_id").is_not_null()).with_columns(
        previous_at=pl.col("timestamp").shift(1).over(*SESSION, "agent_id"),
        call_index=pl.col("subagent_call").cum_sum().over(*SESSION, "agent_id").cast(pl.Int64),
    )
    return (
        agents.filter(pl.col("call_index") > 0)
        .group_by(*SESSION, "agent_id", "call_index", maintain_order=True)
        .agg(
            turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")).first(),
            interaction_index=pl.col("interaction_index").first(),
            prompt_index=pl.col("prompt_index").first(),
            task_index=pl.col("task_index").first(),
            segment=pl.col("segment").first(),
            segment_end=pl.col("segment_end").first(),
            segment_shutdown_line=pl.col("segment_shutdown_line").first(),
            turn_id=pl.col("turn_id").first(),
            interaction_id=pl.col("interaction_id").first(),
            event_id=pl.col("event_id").first(),
            line=pl.col("line").first(),
            timestamp=pl.col("timestamp").first(),
            previous_at=pl.when(turn_start).then(None).otherwise(pl.col("previous_at").first()),
            ended_at=pl.col("timestamp").filter(TYPE == TURN_END).first(),
            last_event_at=pl.col("timestamp").last(),
            open=pl.when(turn_start).then(~(TYPE == TURN_END).any()),
            model=pl.coalesce(
                pl.col("model").filter(_MESSAGE).drop_nulls().first(),
                pl.col("session_model").first(),
            ),
            **_call_figures(),
        )
        .with_columns(
            duration_ms=(pl.col("ended_at") - pl.col("timestamp")).dt.total_milliseconds(),
            ended_loop=(pl.col("messages") > 0) & (pl.col("requested_tools").list.len() == 0),
            # Where the agent writes no turn pair (``open`` null), what became of the call
            # had it been left open (its run's end decides: the timeline asks it of the last
            # call of a sub-agent still running).
            state=open_state(pl.col("open").fill_null(True)),
        )
        .drop("segment_end", "segment_shutdown_line")
    )


def count_flags(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per event, a column for every figure ``count`` reports (0 or 1, but a fusion
    completion's phase count); sums give the counts."""
    start = MAIN & (TYPE == TURN_START)
    user = MAIN & (TYPE == "user.message")
    return annotated.with_columns(
        llm_calls=MAIN & pl.col("llm_call"),
        completed_turns=start & pl.col("turn_closed"),
        open_turns=start & ~pl.col("turn_closed"),
        subagent_calls=pl.col("subagent_call"),
        interactions=user & ~pl.col("is_queued"),
        user_prompts=user & ~pl.col("is_nudge"),
        autopilot_nudges=user & pl.col("is_nudge"),
        tool_calls=MAIN & (TYPE == "tool.execution_start"),
        failed_tool_calls=MAIN
        & (TYPE == "tool.execution_complete")
        & (pl.col("success") == False)  # noqa: E712
        & ~pl.col("is_user_requested").fill_null(False),
        subagent_tool_calls=pl.col("agent_id").is_not_null() & (TYPE == "tool.execution_start"),
        fusion_calls=cli_format.fusion_calls().over(*SESSION),
    ).with_columns(pl.col(name).cast(pl.Int64) for name in COUNT_FIELDS)
