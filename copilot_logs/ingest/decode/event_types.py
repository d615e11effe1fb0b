"""What the reader keeps of each event type; no polars here, so the fast paths stay light.

Which types exist and which are ephemeral, across CLI versions, is
:mod:`copilot_logs.ingest.decode.cli_format`'s to say.
"""

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
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "session.usage_record",
        "session.fusion_completed",
    }
)

NUDGE_TEXT = "You have not yet marked the task as complete"
