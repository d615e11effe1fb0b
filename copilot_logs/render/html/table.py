"""The report page's tables: one cell per field, its sort key in ``data-v``, a session id
linked to its timeline; every text from a log through :func:`svg_marks.text` or
:func:`svg_marks.attr`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from copilot_logs.commands.report import Row
from copilot_logs.render.humanize import (
    count_or_unknown,
    decimal_or_unknown,
    human_duration,
    minute,
    short_id,
    yes_no,
)
from copilot_logs.render.svg.marks import attr, text

Anchors = dict[tuple[str, str], str]
"""(session id, file) -> the id of the session's timeline in the page."""


@dataclass(frozen=True)
class Column:
    field: str
    heading: str
    numeric: bool = False
    format: Callable[[Any], str] | None = None


SESSION_COLUMNS = [
    Column("session_id", "session"),
    Column("started_at", "started", format=minute),
    Column("duration_ms", "took", True, human_duration),
    Column("repository", "repository"),
    Column("branch", "branch"),
    Column("copilot_version", "cli"),
    Column("model", "model"),
    Column("mode", "mode"),
    Column("user_prompts", "prompts", True),
    Column("autopilot_nudges", "nudges", True),
    Column("llm_calls", "calls", True),
    Column("subagent_calls", "sub-agent calls", True),
    Column("tool_calls", "tools", True),
    Column("subagent_runs", "sub-agents", True),
    Column("errors", "errors", True),
    Column("task_complete", "done", format=yes_no),
    Column("status", "status"),
    Column("damaged_lines", "damaged", True),
]
AUDIT_COLUMNS = [
    Column("session_id", "session"),
    Column("verdict", "verdict"),
    Column("started_at", "started", format=minute),
    Column("autopilot_nudges", "nudges", True),
    Column("turns_after_first_nudge", "calls after 1st nudge", True),
    Column("tool_calls_after_first_nudge", "tools after 1st nudge", True),
    Column("note", "summary / error"),
]
RULE_COLUMNS = [
    Column("code", "rule"),
    Column("name", "name"),
    Column("severity", "severity"),
    Column("count", "findings", True),
]
USAGE_COLUMNS = [
    Column("model", "model"),
    Column("sessions", "sessions", True, count_or_unknown),
    Column("requests", "requests", True, count_or_unknown),
    Column("premium_requests", "premium requests", True, decimal_or_unknown),
    Column("ai_credits", "AI credits", True, decimal_or_unknown),
    Column("input_tokens", "input tokens", True, count_or_unknown),
    Column("output_tokens", "output tokens", True, count_or_unknown),
    Column("cache_read_tokens", "cache read", True, count_or_unknown),
    Column("reasoning_tokens", "reasoning", True, count_or_unknown),
]


def _sort_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _cell(column: Column, row: Row, anchors: Anchors) -> str:
    value = row.get(column.field)
    classes = ' class="num"' if column.numeric else ""
    if column.field == "note":
        classes = ' class="note"'
    shown = column.format(value) if column.format else ("" if value is None else str(value))
    if column.numeric and column.format is None and isinstance(value, int):
        shown = f"{value:,}"
    body = text(shown)
    if column.field == "session_id":
        body = f'<span title="{attr(value)}">{text(short_id(value))}</span>'
        anchor = anchors.get((str(value), str(row.get("file"))))
        if anchor:
            body = f'<a href="#{anchor}" title="{attr(value)}">{text(short_id(value))}</a>'
    return f'<td{classes} data-v="{attr(_sort_value(value))}">{body}</td>'


def table(
    rows: Iterable[Row],
    columns: list[Column],
    *,
    sortable: bool = False,
    anchors: Anchors | None = None,
    label: str,
) -> str:
    heads = []
    for column in columns:
        classes = ' class="num"' if column.numeric else ""
        heading = text(column.heading)
        if sortable:
            heading = f'<button type="button">{heading}</button>'
        heads.append(f'<th scope="col"{classes}>{heading}</th>')
    body = [
        "<tr>" + "".join(_cell(c, row, anchors or {}) for c in columns) + "</tr>" for row in rows
    ]
    kind = ' class="sortable"' if sortable else ""
    return (
        f'<table{kind} aria-label="{attr(label)}"><thead><tr>{"".join(heads)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
