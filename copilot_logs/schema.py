"""Explicit polars schemas of the frames the reader builds, and what is known of event types.

Never let polars infer a schema from real logs: the ``data`` payload differs per event type and
between CLI versions, so every column is declared here and filled by the reader.
"""

from __future__ import annotations

import polars as pl

TOOL_REQUEST = pl.Struct({"tool_call_id": pl.String, "name": pl.String})

EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "file": pl.String(),
    "line": pl.Int64(),  # 1-based physical line where the event starts
    "offset": pl.Int64(),  # byte offset of that line in the file
    "length": pl.Int64(),  # bytes of the event's physical line(s), newline excluded
    "event_id": pl.String(),
    "parent_id": pl.String(),
    "type": pl.String(),
    "timestamp": pl.Datetime("ms", "UTC"),
    "agent_id": pl.String(),  # envelope agentId: set on sub-agent lines
    "turn_id": pl.String(),
    "interaction_id": pl.String(),
    "tool_call_id": pl.String(),
    "tool_name": pl.String(),
    "message_id": pl.String(),
    "parent_tool_call_id": pl.String(),
    "success": pl.Boolean(),
    "is_user_requested": pl.Boolean(),
    "is_nudge": pl.Boolean(),  # an autopilot continuation injected by the CLI
    "agent_mode": pl.String(),  # user.message agentMode, or mode_changed newMode
    "model": pl.String(),
    "output_tokens": pl.Int64(),
    "chunk_index": pl.Int64(),
    "text": pl.String(),  # a short preview: message, prompt, summary, reason
    "error": pl.String(),  # tool / session / sub-agent error message (preview)
    "error_code": pl.String(),  # errorType, error code or status code
    "outcome": pl.String(),  # session.task_complete outcome
    "tool_requests": pl.List(TOOL_REQUEST),
    "detail": pl.String(),  # the whole data payload as JSON, for small lifecycle events
}

DIAGNOSTICS_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "file": pl.String(),
    "line": pl.Int64(),
    "offset": pl.Int64(),
    "kind": pl.String(),
    "message": pl.String(),
    "event_id": pl.String(),
}

PREVIEW_CHARS = 160
"""Longest text kept per event: whole system prompts and tool outputs are never kept."""

# Events whose whole (small) payload is kept in the ``detail`` column, for usage and audit.
DETAIL_TYPES = frozenset(
    {
        "session.start",
        "session.resume",
        "session.shutdown",
        "session.usage_checkpoint",
        "session.compaction_start",
        "session.compaction_complete",
        "session.mode_changed",
        "session.model_change",
        "session.info",
        "session.warning",
        "session.task_complete",
        "session.completion_receipt",
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
    }
)

# Streamed live, never persisted: one on disk is worth a warning.
EPHEMERAL_TYPES = frozenset(
    {
        "session.idle",
        "assistant.usage",
        "session.usage_info",
        "assistant.intent",
        "tool.execution_progress",
        "tool.execution_partial_result",
        "session.snapshot_rewind",
        "assistant.message_delta",
        "assistant.reasoning_delta",
        "assistant.streaming_delta",
    }
)

KNOWN_TYPES = frozenset(
    {
        "session.start",
        "session.resume",
        "session.shutdown",
        "session.error",
        "session.info",
        "session.warning",
        "session.model_change",
        "session.auto_mode_resolved",
        "session.mode_changed",
        "session.permissions_changed",
        "session.usage_checkpoint",
        "session.compaction_start",
        "session.compaction_complete",
        "session.task_complete",
        "session.completion_receipt",
        "session.handoff",
        "session.truncation",
        "session.context_changed",
        "session.title_changed",
        "session.plan_changed",
        "session.workspace_file_changed",
        "system.message",
        "system.notification",
        "user.message",
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.message",
        "assistant.reasoning",
        "tool.user_requested",
        "tool.execution_start",
        "tool.execution_complete",
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "subagent.selected",
        "subagent.deselected",
        "permission.requested",
        "permission.completed",
        "skill.invoked",
        "hook.start",
        "hook.end",
        "abort",
    }
)

NUDGE_TEXT = "You have not yet marked the task as complete"


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENTS_SCHEMA)


def empty_diagnostics() -> pl.DataFrame:
    return pl.DataFrame(schema=DIAGNOSTICS_SCHEMA)
