"""The frames a session's timeline is built from, and their rows grouped by session log.

Each frame is derived from the annotated events frame (:func:`copilot_logs.derive.annotate`):
the tools (with the name a ``!cmd`` shell escape gives), the sub-agent LLM calls, the lifecycle
events shown where they happened, the messages that start interactions, and the sub-agents'
prompts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.derive.calls import call_usage

Row = dict[str, Any]

# Lifecycle events shown where they happened. A stray assistant.turn_end (one with no open
# turn) is shown too: it is where a log lost or repeated lines.
EVENT_TYPES = frozenset(
    {
        "session.error",
        "session.warning",
        "session.info",
        "session.compaction_start",
        "session.compaction_complete",
        "session.resume",
        "session.shutdown",
        "session.mode_changed",
        "session.model_change",
        "session.auto_mode_resolved",
        "session.task_complete",
        "session.truncation",
        "abort",
    }
)

SessionKey = tuple[str, str]
"""(file, session_id): one session log (see :data:`copilot_logs.derive.SESSION`)."""


@dataclass(frozen=True)
class SessionRows:
    """The rows of one session log, from each frame, in file order."""

    turns: list[Row]
    tools: list[Row]
    runs: list[Row]
    calls: list[Row]
    events: list[Row]
    messages: list[Row]

    @classmethod
    def empty(cls) -> SessionRows:
        return cls([], [], [], [], [], [])


def rows_by_session(annotated: pl.DataFrame) -> dict[SessionKey, SessionRows]:
    """Every session log's rows of every frame (a log with none of a kind gets none)."""
    usage = call_figures(annotated)
    frames = [
        _by_session(derive.turns(annotated).join(usage, on=[*SESSION, "line"], how="left")),
        _by_session(tool_frame(annotated)),
        _by_session(derive.subagent_runs(annotated)),
        _by_session(subagent_calls(annotated).join(usage, on=[*SESSION, "line"], how="left")),
        _by_session(events_frame(annotated)),
        _by_session(interaction_frame(annotated)),
    ]
    keys = dict.fromkeys(key for frame in frames for key in frame)
    return {key: SessionRows(*(frame.get(key, []) for frame in frames)) for key in keys}


CALL_FIGURES = (
    "input_tokens",
    "cache_read_tokens",
    "ai_credits",
    "credits_status",
    "ttft_ms",
    "api_call_id",
    "usage_source",
)
"""What a call node shows of its usage (:mod:`copilot_logs.derive.calls`)."""


def call_figures(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per LLM call (by its line), the figures of its usage record, where it has one."""
    return (
        call_usage(annotated)
        .rename({"source": "usage_source", "output_tokens": "record_output_tokens"})
        .select(*SESSION, "line", *CALL_FIGURES, "record_output_tokens")
        .unique(subset=[*SESSION, "line"], keep="first")
    )


def _by_session(frame: pl.DataFrame) -> dict[SessionKey, list[Row]]:
    grouped: dict[SessionKey, list[Row]] = defaultdict(list)
    for row in frame.iter_rows(named=True):
        grouped[(row["file"], row["session_id"])].append(row)
    return grouped


def tool_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """Tool executions, with their error code, and the name and command a ``!cmd`` shell
    escape gives in its tool.user_requested line (its complete has neither)."""
    keys = [*SESSION, "tool_call_id"]
    requested = (
        annotated.filter(TYPE == "tool.user_requested")
        .select(*keys, requested_name="tool_name", requested_text="text")
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    codes = (
        annotated.filter(TYPE == "tool.execution_complete")
        .select(*keys, "error_code")
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    return (
        derive.tools(annotated)
        .join(requested, on=keys, how="left")
        .join(codes, on=keys, how="left")
        .with_columns(
            tool_name=pl.coalesce("tool_name", "requested_name"),
            arguments=pl.coalesce("arguments", "requested_text"),
        )
    )


def subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent LLM call (:func:`copilot_logs.derive.subagent_calls`)."""
    return derive.subagent_calls(annotated).select(
        *SESSION,
        "agent_id",
        "line",
        "event_id",
        "timestamp",
        "previous_at",
        "ended_at",
        "open",
        "state",
        "turn_id",
        "model",
        "text",
        "output_tokens",
        "requested_tools",
    )


def events_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """The lifecycle events (:data:`EVENT_TYPES`), stray turn ends and queued messages."""
    shown = TYPE.is_in(list(EVENT_TYPES)) | pl.col("stray_end") | pl.col("is_queued")
    return annotated.filter(shown).select(
        *SESSION,
        "line",
        "event_id",
        "type",
        "timestamp",
        "agent_id",
        "in_turn",
        "turn_index",
        "interaction_index",
        "turn_id",
        "text",
        "error",
        "error_code",
        "model",
        "agent_mode",
        "success",
        "outcome",
        "stray_end",
        "info_type",
        "warning_type",
        "event_count",
        "shutdown_type",
        "tokens_removed",
        "compaction_success",
        "compaction_error",
        "previous_mode",
        "previous_model",
    )


def interaction_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """The main agent's user messages, each starting an interaction."""
    # A queued message joins its interaction: it is shown as an event there, not as a new one.
    return annotated.filter(MAIN & (TYPE == "user.message") & ~pl.col("is_queued")).select(
        *SESSION,
        "line",
        "event_id",
        "timestamp",
        "interaction_index",
        "interaction_id",
        "text",
        "is_nudge",
        "agent_mode",
    )


def subagent_prompts(annotated: pl.DataFrame) -> dict[tuple[str, str, str], str | None]:
    """Each sub-agent's prompt (its first user message), by (file, session_id, agent_id)."""
    prompts = (
        annotated.filter(pl.col("agent_id").is_not_null() & (TYPE == "user.message"))
        .group_by(*SESSION, "agent_id", maintain_order=True)
        .agg(prompt=pl.col("text").first())
    )
    return {
        (row["file"], row["session_id"], row["agent_id"]): row["prompt"]
        for row in prompts.iter_rows(named=True)
    }
