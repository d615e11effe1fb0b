"""``copilot-logs prune``: the plan (what would go, why, and what a rule keeps), then what an
apply did, for people; or json (``{"applied": ..., "rows": [...], "kept": [...], ...}``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from copilot_logs.render import formats, output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import human_bytes, human_duration, plural, short_id


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
    if fmt == "json":
        formats.write_json(
            {
                "applied": applied,
                "rows": [_plain(row) for row in rows],
                "kept": [_plain(row) for row in kept],
                "trash_runs": [_plain(row) for row in trash],
                "records": records,
            }
        )
        return
    import polars as pl

    if rows:
        shown = [{**row, "age_ms": _age_ms(row["last_activity"], now)} for row in rows]
        frame = pl.DataFrame([_cells(row) for row in shown], orient="row", infer_schema_length=None)
        formats.print_table(frame, PLAN_TABLE if not applied else [*PLAN_TABLE, *DONE_COLUMNS])
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
    _summary(rows, trash, records, applied)


def _summary(
    rows: list[dict[str, Any]], trash: list[dict[str, Any]], records: list[str], applied: bool
) -> None:
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
    return {
        **{
            key: value
            for key, value in row.items()
            if key not in ("why", "unlinked", "last_activity")
        },
        "why": " ".join(row["why"]),
        "unlinked": ", ".join(row["unlinked"]),
    }


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if isinstance(value, datetime)
        else value
        for key, value in row.items()
    }


PLAN_TABLE = [
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
