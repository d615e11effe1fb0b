"""``copilot-logs sessions``: a table for people, or the machine formats (json, ndjson, csv)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot_logs.render import formats
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import human_duration, local_time, short_id, yes_no

if TYPE_CHECKING:
    import polars as pl


def write_sessions(table: pl.DataFrame, fmt: str) -> None:
    if fmt == "table":
        formats.print_table(table, SESSION_TABLE)
    else:
        formats.write_frame(table, fmt)


SESSION_TABLE = [
    Column("session_id", "session", 1, format=short_id),
    Column("started_at", "started", 1, format=local_time),
    Column("duration_ms", "took", 3, numeric=True, format=human_duration),
    Column("repository", "repository", 4, max_width=28),
    Column("branch", "branch", 7, max_width=20),
    Column("copilot_version", "cli", 8),
    Column("model", "model", 5, max_width=20),
    Column("user_prompts", "prompts", 2, numeric=True),
    Column("autopilot_nudges", "nudges", 3, numeric=True),
    Column("llm_calls", "calls", 1, numeric=True),
    Column("tool_calls", "tools", 2, numeric=True),
    Column("subagent_runs", "subagents", 6, numeric=True),
    Column("errors", "errors", 3, numeric=True),
    Column("task_complete", "done", 3, format=yes_no),
    Column("status", "status", 1),
    Column("damaged_lines", "damaged", 2, numeric=True),
]
