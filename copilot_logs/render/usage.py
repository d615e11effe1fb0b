"""``copilot-logs usage``'s report for people and scripts: a table (with a totals row and,
with --breakdown, a row per model), markdown, json (nested models), ndjson and csv."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from copilot_logs.render import formats, output
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import (
    count_or_unknown,
    credits_text,
    decimal_or_unknown,
    human_duration,
    minute,
    plural,
    short_id,
    yes_no,
)

if TYPE_CHECKING:
    from copilot_logs.commands.usage import UsageReport
    from copilot_logs.commands.usage.breakdown import CallReport


def write_reconciliation(sessions: pl.DataFrame) -> None:
    """--verbose: the reconciliation lines, on stderr."""
    for line in reconciliation_lines(sessions):
        output.echo(line, err=True)


def reconciliation_lines(sessions: pl.DataFrame) -> list[str]:
    """One line per session: the shutdown's request count against the counted LLM calls."""
    lines = []
    for row in sessions.iter_rows(named=True):
        shutdowns = plural(row["shutdowns"], "shutdown")
        head = f"{short_id(row['session_id'])} {row['accounting']}, {shutdowns}"
        counted = f"{row['llm_calls']} turns + {row['subagent_calls']} sub-agent calls"
        if row["requests"] is None:
            lines.append(f"{head}: no shutdown request count; {counted} counted, usage unknown")
            continue
        sign = "!=" if row["reconciliation"] in ("mismatch", "rewound") else "="
        line = f"{head}: requests {row['requests']} {sign} {counted}"
        if row["calls_after_shutdown"]:
            line += f" - {row['calls_after_shutdown']} calls after the last shutdown"
        if row["reconciliation"] == "unanswered":
            line += f" - {row['turns_without_reply']} turns without a reply"
        if row["reconciliation"] == "rewound":
            line += " (the session was rewound with /rewind: the file and the count disagree)"
        lines.append(f"{line} [{row['reconciliation']}]")
    return lines


def _duration(value: Any) -> str:
    return "?" if value is None else human_duration(value)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


KEYS = {
    "session": Column("label", "session", 1),
    "day": Column("label", "day", 1),
    "week": Column("label", "week", 1),
    "month": Column("label", "month", 1),
    "model": Column("label", "model", 1, max_width=28),
    "repository": Column("label", "repository", 1, max_width=32),
}
MODEL_COLUMNS = [
    Column("ai_credits", "credits", 1, numeric=True, format=decimal_or_unknown),
    Column("premium_requests", "premium (legacy)", 5, numeric=True, format=decimal_or_unknown),
    Column("requests", "requests", 2, numeric=True, format=count_or_unknown),
    Column("input_tokens", "input", 2, numeric=True, format=count_or_unknown),
    Column("output_tokens", "output", 2, numeric=True, format=count_or_unknown),
    Column("cache_read_tokens", "cache read", 3, numeric=True, format=count_or_unknown),
    Column("cache_write_tokens", "cache write", 5, numeric=True, format=count_or_unknown),
    Column("reasoning_tokens", "reasoning", 5, numeric=True, format=count_or_unknown),
]
SESSION_COLUMNS = [
    Column("api_duration_ms", "api time", 4, numeric=True, format=_duration),
    Column("lines_added", "+lines", 6, numeric=True, format=count_or_unknown),
    Column("lines_removed", "-lines", 6, numeric=True, format=count_or_unknown),
    Column("files_modified", "files", 6, numeric=True, format=count_or_unknown),
    Column("compactions", "compactions", 7, numeric=True, format=count_or_unknown),
    Column("compaction_input_tokens", "compaction in", 8, numeric=True, format=count_or_unknown),
    Column("compaction_output_tokens", "compaction out", 8, numeric=True, format=count_or_unknown),
]
GROUP_COLUMNS = [
    Column("sessions", "sessions", 2, numeric=True, format=count_or_unknown),
    Column("incomplete_sessions", "incomplete", 2, numeric=True, format=count_or_unknown),
]


def _columns(by: str) -> list[Column]:
    if by == "session":
        lead = [
            Column("started_at", "started", 3, format=minute),
            Column("accounting", "accounting", 3, format=_text),
        ]
        return [KEYS[by], *lead, *MODEL_COLUMNS, *SESSION_COLUMNS]
    if by == "model":
        return [KEYS[by], *GROUP_COLUMNS, *MODEL_COLUMNS]
    return [KEYS[by], *GROUP_COLUMNS, *MODEL_COLUMNS, *SESSION_COLUMNS]


def _label(by: str, row: dict[str, Any]) -> str:
    if by == "session":
        return short_id(row["session_id"])
    return _text(row[by])


def _cells(
    columns: list[Column], row: dict[str, Any], fields: set[str] | None = None
) -> dict[str, str]:
    """A row's cells as text; a field outside ``fields`` does not apply: blank, not "?"."""
    return {
        c.field: (c.format or _text)(row.get(c.field))
        if fields is None or c.field in fields
        else ""
        for c in columns
    }


def _display(report: UsageReport, breakdown: bool) -> tuple[pl.DataFrame, dict[str, str]]:
    """The table's cells as text (a label, and with --breakdown a row per model), and its
    totals row."""
    columns = _columns(report.by)
    model_fields = {"label", *(c.field for c in MODEL_COLUMNS)}
    rows: list[dict[str, str]] = []
    local = report.rows
    if report.by == "session":  # start times shown in --tz, like the buckets
        local = local.with_columns(pl.col("started_at").dt.convert_time_zone(report.zone))
    for row in local.iter_rows(named=True):
        rows.append(_known(_cells(columns, {**row, "label": _label(report.by, row)}), row))
        if breakdown and report.by != "model":
            rows.extend(
                _cells(columns, {**m, "label": f"  └ {m['model']}"}, model_fields)
                for m in row["models"]
            )
    totals = _known(_cells(columns, {**report.totals, "label": "total"}), report.totals)
    if report.by == "session":
        totals["started_at"] = totals["accounting"] = ""
    schema = {c.field: pl.String() for c in columns}
    return pl.DataFrame(rows, schema=schema), totals


KNOWN_CELLS = {"ai_credits": "sessions_with_credits"}
"""The cells of a row of several sessions that say how many of them have the figure (the
credits; json and csv give ``sessions_with_tokens`` too)."""


def _known(cells: dict[str, str], row: dict[str, Any]) -> dict[str, str]:
    """``cells`` with ``(k of n known)`` after a sum that only k of the row's n sessions
    have a figure for."""
    sessions = row.get("sessions")
    for field, count in KNOWN_CELLS.items():
        known = row.get(count)
        if field in cells and sessions is not None and known is not None and known < sessions:
            cells[field] = f"{cells[field]} ({known:,} of {sessions:,} known)"
    return cells


def _flat_rows(report: UsageReport, breakdown: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """CSV rows: the nested models dropped, or with --breakdown one row per model after each
    row (its ``model`` column set)."""
    keys = [c for c in report.rows.columns if c != "models"]
    with_models = breakdown and report.by != "model"
    columns = [*keys[:1], "model", *keys[1:]] if with_models else keys
    out: list[dict[str, Any]] = []
    for row in formats.records(report.rows):
        out.append({k: row.get(k) for k in keys})
        if with_models:
            base = {k: row.get(k) for k in keys[:1]}
            out.extend({**base, **m} for m in row["models"])
    return out, columns


def write_report(report: UsageReport, fmt: str, *, breakdown: bool = False) -> None:
    if fmt == "json":
        rows = formats.records(report.rows)
        formats.write_json(
            {"by": report.by, "zone": report.zone, "rows": rows, "totals": report.totals}
        )
    elif fmt == "ndjson":
        formats.write_ndjson(formats.records(report.rows))
    elif fmt == "csv":
        formats.write_csv(*_flat_rows(report, breakdown))
    else:
        _write_cells(*_display(report, breakdown), _columns(report.by), fmt)


def _write_cells(
    frame: pl.DataFrame,
    totals: dict[str, str],
    columns: list[Column],
    fmt: str,
    notes: list[str] | None = None,
) -> None:
    """Cells already text, and their totals row: a markdown table (then the ``notes``) or a
    table for people (the ``notes`` under it)."""
    plain = [replace(c, format=None) for c in columns]
    if fmt != "markdown":
        formats.print_table(frame, plain, totals=totals, notes=notes or ())
        return
    table = pl.concat([frame, pl.DataFrame([totals], schema=frame.schema)])
    output.echo(formats.markdown_table(table, plain), nl=False)
    for note in notes or ():
        output.echo(f"\n{note}")


# --- usage --by call|prompt|agent|task ----------------------------------------------------


FIGURE_COLUMNS = [
    Column("credits", "credits", 1, numeric=True),
    Column("input_tokens", "input", 2, numeric=True, format=count_or_unknown),
    Column("output_tokens", "output", 2, numeric=True, format=count_or_unknown),
    Column("cache_read_tokens", "cached", 3, numeric=True, format=count_or_unknown),
    Column("model_time_ms", "model time", 4, numeric=True, format=_duration),
    Column("ttft_ms", "ttft", 5, numeric=True, format=lambda v: "" if v is None else f"{v:,.0f}ms"),
    Column("source", "source", 1, format=_text),
]
CALL_KEYS = {
    "call": [
        Column("session_id", "session", 1, format=short_id),
        Column("line", "line", 2, numeric=True, format=_text),
        Column("agent", "agent", 1, max_width=20, format=_text),
        Column("prompt", "prompt", 4, max_width=24, format=_text),
        Column("model", "model", 5, max_width=20, format=_text),
    ],
    "prompt": [
        Column("session_id", "session", 1, format=short_id),
        Column("prompt", "prompt", 1, max_width=40, format=_text),
    ],
    "agent": [
        Column("session_id", "session", 1, format=short_id),
        Column("agent", "agent", 1, max_width=24, format=_text),
    ],
    "task": [
        Column("session_id", "session", 1, format=short_id),
        Column("task_index", "task", 1, numeric=True, format=_text),
        Column("prompt", "prompt", 2, max_width=32, format=_text),
        Column("completed", "completed", 2, format=yes_no),
    ],
}
CALLS_COLUMN = Column("llm_calls", "calls", 1, numeric=True, format=count_or_unknown)


def write_call_report(report: CallReport, fmt: str) -> None:
    """``usage --by call|prompt|agent|task`` in ``fmt``."""
    if fmt == "json":
        rows = formats.records(report.rows)
        formats.write_json({"by": report.by, "rows": rows, "totals": report.totals})
        return
    if fmt in ("ndjson", "csv"):
        formats.write_frame(report.rows, fmt)
        return
    calls = [] if report.by == "call" else [CALLS_COLUMN]
    columns = [*CALL_KEYS[report.by], *calls, *FIGURE_COLUMNS]
    texts = [
        {c.field: (c.format or _text)(row.get(c.field)) for c in columns}
        | {"credits": credits_text(row)}
        for row in report.rows.iter_rows(named=True)
    ]
    frame = pl.DataFrame(texts, schema={c.field: pl.String() for c in columns})
    totals = {c.field: "" for c in columns}
    totals.update(
        {
            columns[0].field: "total",
            "llm_calls": count_or_unknown(report.totals["llm_calls"]),
            "credits": credits_text(report.totals),
            **{
                name: count_or_unknown(report.totals[name])
                for name in ("input_tokens", "output_tokens", "cache_read_tokens")
            },
            "model_time_ms": _duration(report.totals["model_time_ms"]),
        }
    )
    _write_cells(frame, totals, columns, fmt, remainder_notes(report.rows))


def remainder_notes(rows: pl.DataFrame) -> list[str]:
    """Why the sessions with a ``not attributable`` row have one: a line per reason."""
    if "reason" not in rows.columns:
        return []
    reasons = rows.filter(pl.col("reason").is_not_null()).group_by("reason", maintain_order=True)
    return [
        f"not attributable ({plural(n, 'session')}): {reason}"
        for reason, n in reasons.agg(pl.len()).iter_rows()
    ]
