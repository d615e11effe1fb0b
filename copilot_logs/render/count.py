"""``copilot-logs count``'s figures: a table with a totals row for people, or the machine
formats (json, ndjson, csv)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot_logs.render import formats
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import local_time, short_id

if TYPE_CHECKING:
    import polars as pl


def write_counts(table: pl.DataFrame, fmt: str) -> None:
    """The table (its key columns first, then the figures, and their totals), or ``fmt``."""
    from copilot_logs.commands import count as count_core
    from copilot_logs.derive import COUNT_FIELDS

    if fmt != "table":
        formats.write_frame(table, fmt)
        return
    keys = [c for c in table.columns if c not in (*COUNT_FIELDS, "file")]
    # HydraFusion is experimental: its column shows only where a log has fusion calls.
    fusion = "fusion_calls" in table.columns and bool(table["fusion_calls"].sum())
    columns = [c for c in COUNT_COLUMNS if fusion or c.field != "fusion_calls"]
    formats.print_table(
        table,
        [*(KEY_COLUMNS[k] for k in keys), *columns],
        totals={keys[0]: "total", **count_core.totals(table)},
    )


KEY_COLUMNS = {
    "session_id": Column("session_id", "session", 1, format=short_id),
    "started_at": Column("started_at", "started", 4, format=local_time),
    "interaction_index": Column("interaction_index", "interaction", 1, numeric=True),
    "model": Column("model", "model", 1, max_width=24),
    "day": Column("day", "day", 1),
    "repository": Column("repository", "repository", 1, max_width=32),
}
COUNT_COLUMNS = [
    Column("llm_calls", "llm calls", 1, numeric=True),
    Column("completed_turns", "completed", 4, numeric=True),
    Column("open_turns", "open", 2, numeric=True),
    Column("subagent_calls", "sub-agent calls", 2, numeric=True),
    Column("interactions", "interactions", 5, numeric=True),
    Column("user_prompts", "prompts", 3, numeric=True),
    Column("autopilot_nudges", "nudges", 3, numeric=True),
    Column("tool_calls", "tools", 2, numeric=True),
    Column("failed_tool_calls", "failed", 3, numeric=True),
    Column("subagent_tool_calls", "sub-agent tools", 6, numeric=True),
    Column("fusion_calls", "fusion calls", 6, numeric=True),
]
