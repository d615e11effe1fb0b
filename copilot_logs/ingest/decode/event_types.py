"""What is known of the event types on disk; no polars here, so the fast paths stay light."""

from __future__ import annotations

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
        "session.autopilot_stopped",
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
