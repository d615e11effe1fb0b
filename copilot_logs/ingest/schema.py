"""Explicit polars schemas of the frames the reader builds (never inferred: the ``data`` payload
differs per event type and between CLI versions)."""

from __future__ import annotations

import polars as pl

from copilot_logs.ingest.repair import EARLIEST_TIME, LATEST_TIME

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
    # null on a row about one line; on a row that sums up a file's problems of one kind past
    # the first it lists (ingest.events_frame.MAX_DETAILS): the lines with that problem...
    "more_lines": pl.Int64(),
    # ...and of those, the damaged lines no earlier row of the file names (a line can have
    # problems of several kinds): what the row adds to the count of damaged lines
    "new_lines": pl.Int64(),
}


def damaged_line_count() -> pl.Expr:
    """The damaged lines of a diagnostics frame (an aggregation: per session, per file): the
    lines its rows name one by one, and those its summing rows add."""
    listed = pl.col("line").filter(pl.col("more_lines").is_null()).n_unique()
    return (listed + pl.col("new_lines").sum()).cast(pl.Int64)


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENTS_SCHEMA)


def empty_diagnostics() -> pl.DataFrame:
    return pl.DataFrame(schema=DIAGNOSTICS_SCHEMA)


def held_times(times: pl.Expr) -> pl.Expr:
    """UTC datetimes, null where a log may not hold them (``+10000-01-01`` parses, but no row
    holding it could be printed)."""
    return pl.when(times.is_between(EARLIEST_TIME, LATEST_TIME, closed="left")).then(times)


def log_times(text: pl.Expr) -> pl.Expr:
    """ISO-8601 strings from a log (``session.start``'s ``startTime``) -> UTC datetimes in ms,
    null for what is not a time a log may hold."""
    return held_times(text.str.to_datetime(strict=False, time_unit="ms", time_zone="UTC"))
