"""The tables of ``count``, ``sessions``, ``disk``, ``prune`` and ``cache``: their columns for
people, or the machine formats."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from copilot_logs.render import formats, output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import (
    human_bytes,
    human_duration,
    local_time,
    plural,
    short_id,
    yes_no,
)

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.store import Cleared, Info


# --- count and sessions ----------------------------------------------------------------------


def write_counts(table: pl.DataFrame, fmt: str) -> None:
    """The table (its key columns first, then the figures, and their totals), or ``fmt``."""
    from copilot_logs.commands import count as count_core
    from copilot_logs.derive import COUNT_FIELDS

    keys = [c for c in table.columns if c not in (*COUNT_FIELDS, "file")]
    # HydraFusion is experimental: its column shows only where a log has fusion calls.
    fusion = "fusion_calls" in table.columns and bool(table["fusion_calls"].sum())
    columns = [c for c in COUNT_COLUMNS if fusion or c.field != "fusion_calls"]
    formats.write_table(
        table,
        fmt,
        [*(KEY_COLUMNS[k] for k in keys), *columns],
        totals=lambda: {keys[0]: "total", **count_core.totals(table)},
    )


def write_sessions(table: pl.DataFrame, fmt: str) -> None:
    formats.write_table(table, fmt, SESSION_COLUMNS)


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
SESSION_COLUMNS = [
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


# --- disk ------------------------------------------------------------------------------------


def write_disk(frame: pl.DataFrame, beside: list[dict[str, Any]], fmt: str, *, by: str) -> None:
    """The session folders (or their categories), then what sits beside them (never pruned);
    json: ``{"rows": [...], "beside": [...]}``, ndjson and csv: the rows."""
    if fmt == "json":
        formats.write_json({"rows": formats.records(frame), "beside": beside})
        return
    key, columns = ("category", CATEGORY_COLUMNS) if by == "category" else ("session_id", DISK)
    formats.write_table(frame, fmt, columns, totals=lambda: {key: "total", **_sums(frame)})
    if fmt != "table" or not beside:
        return
    output.echo("Beside the sessions (never pruned):")
    for row in beside:
        size = human_bytes(row["allocated_bytes"])
        files = plural(row["files"], "file", grouped=True)
        output.echo(f"  {one_line(row['name'])}: {size} ({files}) in {one_line(row['folder'])}")


DISK = [
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
CATEGORY_COLUMNS = [
    Column("category", "category", 1),
    Column("sessions", "sessions", 1, numeric=True),
    Column("allocated_bytes", "size", 1, numeric=True, format=human_bytes),
    Column("files_allocated", "files/", 2, numeric=True, format=human_bytes),
    Column("files", "count", 3, numeric=True),
]


def _sums(frame: pl.DataFrame) -> dict[str, int]:
    summed = (
        "sessions",
        "allocated_bytes",
        "files",
        *(c for c in frame.columns if c.endswith("_allocated")),
    )
    return {name: int(frame[name].sum()) for name in summed if name in frame.columns}


# --- prune -----------------------------------------------------------------------------------


def write_prune(
    rows: list[dict[str, Any]],
    kept: list[dict[str, Any]],
    trash: list[dict[str, Any]],
    records: list[str],
    fmt: str,
    *,
    applied: bool,
    now: float,
) -> None:
    """The plan (what would go, why, and what a rule keeps), then what an apply did; or json
    (``{"applied": ..., "rows": [...], "kept": [...], ...}``)."""
    if fmt == "json":
        lists = {"rows": rows, "kept": kept, "trash_runs": trash}
        plain = {name: [_plain(row) for row in found] for name, found in lists.items()}
        formats.write_json({"applied": applied, **plain, "records": records})
        return
    import polars as pl

    if rows:
        shown = [{**row, "age_ms": _age_ms(row["last_activity"], now)} for row in rows]
        frame = pl.DataFrame([_cells(row) for row in shown], orient="row", infer_schema_length=None)
        formats.print_table(frame, PLAN_COLUMNS if not applied else [*PLAN_COLUMNS, *DONE_COLUMNS])
    else:
        output.echo("Nothing to prune.")
    for row in kept:
        output.echo(
            f"kept {short_id(row['session_id'])} ({row['category']}, "
            f"{', '.join(row['why'])}): {one_line(row['kept'])}"
        )
    for run in trash:
        status = (
            "" if not applied else (" removed" if not run.get("left") else f" left: {run['left']}")
        )
        output.echo(
            f"trash {one_line(run['name'])}: {human_bytes(run['allocated_bytes'])} in "
            f"{one_line(run['folder'])}{one_line(status)}"
        )
    size = human_bytes(
        sum(row["allocated_bytes"] for row in rows) + sum(r["allocated_bytes"] for r in trash)
    )
    if not applied:
        output.echo(f"{plural(len(rows), 'item')} would go ({size}).")
        output.echo(
            "Nothing was removed: a dry run. Add --apply with --export-to DIR (or --no-export) to "
            "do it."
        )
        return
    done = [row for row in rows if row["status"] == "done"]
    skipped = [row for row in rows if row["status"] == "skipped"]
    freed = human_bytes(sum(row["allocated_bytes"] for row in done))
    output.echo(f"{plural(len(done), 'item')} done ({freed}), {len(skipped)} skipped.")
    for row in skipped:
        output.echo(f"skipped {short_id(row['session_id'])}: {one_line(row['skipped'] or '')}")
    for record in records:
        output.echo(f"Record: {one_line(record)}")


def _age_ms(moment: Any, now: float) -> float | None:
    return (now - moment.timestamp()) * 1000 if isinstance(moment, datetime) else None


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    rest = {key: value for key, value in row.items() if key not in ("unlinked", "last_activity")}
    return {**rest, "why": " ".join(row["why"]), "unlinked": ", ".join(row["unlinked"])}


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if isinstance(value, datetime)
        else value
        for key, value in row.items()
    }


PLAN_COLUMNS = [
    Column("session_id", "session", 1, format=short_id),
    Column("category", "category", 1),
    Column("action", "what", 1),
    Column("allocated_bytes", "size", 1, numeric=True, format=human_bytes),
    Column("age_ms", "quiet for", 2, numeric=True, format=human_duration),
    Column("why", "why", 1, max_width=30),
]
DONE_COLUMNS = [
    Column("status", "status", 1),
    Column("to", "to", 5, max_width=48),
]


# --- cache -----------------------------------------------------------------------------------


def write_info(held: Info, fmt: str) -> None:
    """Where the store is and what it holds."""
    if fmt == "json":
        fields = ("entries", "bytes", "trusted")
        formats.write_json({"path": str(held.path), **{k: getattr(held, k) for k in fields}})
        return
    output.echo(f"path     {held.path}")
    output.echo(f"entries  {held.entries:,} session logs")
    output.echo(f"bytes    {held.bytes:,} ({held.bytes / (1 << 20):.1f} MB)")
    if not held.trusted:
        output.echo("trusted  no: not used (see the warning below)")


def write_cleared(cleared: Cleared) -> None:
    """What ``cache clear`` removed, on stderr: what was really deleted."""
    if not cleared.trusted:
        output.echo("Removed nothing: the store folder is not copilot-logs' own.", err=True)
        return
    noun = "entry" if cleared.entries == 1 else "entries"
    output.echo(f"Removed {cleared.entries:,} {noun} ({cleared.bytes:,} bytes).", err=True)
