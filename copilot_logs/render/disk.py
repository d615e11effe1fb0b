"""``copilot-logs disk``: a table of the session folders (or their categories) for people, with
what sits beside them, or the machine formats (json: ``{"rows": [...], "beside": [...]}``,
ndjson and csv: the rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from copilot_logs.render import formats, output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import human_bytes, local_time, plural, short_id

if TYPE_CHECKING:
    import polars as pl


def write_disk(frame: pl.DataFrame, beside: list[dict[str, Any]], fmt: str, *, by: str) -> None:
    if fmt == "json":
        formats.write_json({"rows": formats.records(frame), "beside": beside})
    elif fmt != "table":
        formats.write_frame(frame, fmt)
    elif by == "category":
        summed = ("sessions", "allocated_bytes", "files_allocated", "files")
        totals = {"category": "total", **_sums(frame, *summed)}
        formats.print_table(frame, CATEGORY_TABLE, totals=totals)
        _beside(beside)
    else:
        totals = {"session_id": "total", **_sums(frame, *SUMMED)}
        formats.print_table(frame, SESSION_TABLE, totals=totals)
        _beside(beside)


SUMMED = (
    "allocated_bytes",
    "log_allocated",
    "files_allocated",
    "checkpoints_allocated",
    "rewind_allocated",
    "other_allocated",
    "files",
)


def _sums(frame: pl.DataFrame, *names: str) -> dict[str, int]:
    return {name: int(frame[name].sum()) for name in names if name in frame.columns}


def _beside(beside: list[dict[str, Any]]) -> None:
    """What is not a session, one line each (never touched by ``prune``)."""
    if not beside:
        return
    output.echo("Beside the sessions (never pruned):")
    for row in beside:
        size = human_bytes(row["allocated_bytes"])
        files = plural(row["files"], "file", grouped=True)
        output.echo(f"  {one_line(row['name'])}: {size} ({files}) in {one_line(row['folder'])}")


SESSION_TABLE = [
    Column("session_id", "session", 1, format=short_id),
    Column("category", "category", 1),
    Column("lock", "lock", 3),
    Column("allocated_bytes", "size", 1, numeric=True, format=human_bytes),
    Column("log_allocated", "log", 2, numeric=True, format=human_bytes),
    Column("files_allocated", "files/", 2, numeric=True, format=human_bytes),
    Column("checkpoints_allocated", "checkpoints", 6, numeric=True, format=human_bytes),
    Column("rewind_allocated", "rewind", 6, numeric=True, format=human_bytes),
    Column("other_allocated", "other", 5, numeric=True, format=human_bytes),
    Column("files", "count", 4, numeric=True),
    Column("last_activity", "last activity", 2, format=local_time),
    Column("user_prompts", "prompts", 3, numeric=True),
    Column("llm_calls", "calls", 3, numeric=True),
    Column("name", "name", 5, max_width=28),
    Column("host", "host", 7, max_width=16),
    Column("why", "note", 4, max_width=40),
]
CATEGORY_TABLE = [
    Column("category", "category", 1),
    Column("sessions", "sessions", 1, numeric=True),
    Column("allocated_bytes", "size", 1, numeric=True, format=human_bytes),
    Column("files_allocated", "files/", 2, numeric=True, format=human_bytes),
    Column("files", "count", 3, numeric=True),
]
