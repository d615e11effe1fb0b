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


def wasted(calls: Any) -> str:
    """A loop's wasted calls (empty when the session does not loop)."""
    return f"{calls:,} wasted" if calls else ""


def credits_wasted(value: Any) -> str:
    return "" if value is None else f"{value:g}"


def reasons(value: Any) -> str:
    return "; ".join(value or [])


# What shows problems comes first, so it is on screen in a window 1400 px wide.
SESSION_COLUMNS = [
    Column("session_id", "session"),
    Column("started_at", "started", format=minute),
    Column("status", "status"),
    Column("verdict", "verdict", format=lambda v: v or ""),
    Column("wasted_calls", "looping", True, wasted),
    Column("resume", "resume", format=lambda v: v or ""),
    Column("errors", "errors", True),
    Column("task_complete", "done", format=yes_no),
    Column("damaged_lines", "damaged", True),
    Column("duration_ms", "took", True, human_duration),
    Column("llm_calls", "calls", True),
    Column("subagent_calls", "sub-agent calls", True),
    Column("tool_calls", "tools", True),
    Column("user_prompts", "prompts", True),
    Column("autopilot_nudges", "nudges", True),
    Column("subagent_runs", "sub-agents", True),
    Column("mode", "mode"),
    Column("model", "model"),
    Column("copilot_version", "cli"),
    Column("repository", "repository"),
    Column("branch", "branch"),
]
ATTENTION_COLUMNS = [
    Column("session_id", "session"),
    Column("started_at", "started", format=minute),
    Column("reasons", "what needs attention", format=reasons),
    Column("wasted_calls", "calls wasted", True, lambda v: f"{v:,}" if v else ""),
    Column("wasted_credits", "credits wasted", True, credits_wasted),
    Column("verdict", "verdict", format=lambda v: v or ""),
    Column("resume", "resume", format=lambda v: v or ""),
    Column("repository", "repository"),
]
AUDIT_COLUMNS = [
    Column("session_id", "session"),
    Column("verdict", "verdict"),
    Column("wasted_calls", "looping", True, wasted),
    Column("wasted_credits", "credits wasted", True, credits_wasted),
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
    if column.field in ("note", "reasons"):
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
    shown: int | None = None,
) -> str:
    """A table of ``rows``; past the first ``shown`` rows, each row is marked ``more``: the
    page hides them until asked to show all."""
    heads = []
    for column in columns:
        classes = ' class="num"' if column.numeric else ""
        heading = text(column.heading)
        if sortable:
            heading = f'<button type="button">{heading}</button>'
        heads.append(f'<th scope="col"{classes}>{heading}</th>')
    body = [
        ('<tr class="more">' if shown is not None and index >= shown else "<tr>")
        + "".join(_cell(c, row, anchors or {}) for c in columns)
        + "</tr>"
        for index, row in enumerate(rows)
    ]
    kind = ' class="sortable"' if sortable else ""
    if shown is not None:
        kind += f' data-shown="{shown}"'
    return (
        f'<table{kind} aria-label="{attr(label)}"><thead><tr>{"".join(heads)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


CREDIT_GROUP_COLUMNS = [
    Column("session_id", "session"),
    Column("label", "prompt / agent"),
    Column("llm_calls", "calls", True, count_or_unknown),
    Column("credits", "AI credits", True),
    Column("input_tokens", "input tokens", True, count_or_unknown),
    Column("output_tokens", "output tokens", True, count_or_unknown),
    Column("cache_read_tokens", "cache read", True, count_or_unknown),
    Column("source", "source"),
]
CREDIT_CALL_COLUMNS = [
    Column("line", "line", True),
    Column("agent", "agent"),
    Column("api_call_id", "call id"),
    Column("credits", "AI credits", True),
    Column("input_tokens", "input", True, count_or_unknown),
    Column("output_tokens", "output", True, count_or_unknown),
    Column("cache_read_tokens", "cached", True, count_or_unknown),
    Column("ttft_ms", "ttft ms", True, lambda v: "" if v is None else f"{v:,.0f}"),
]


def credits_cell(row: Row) -> str:
    """A row's credits: ``unavailable`` when the log says none were reported."""
    if row.get("ai_credits") is None and row.get("credits_status") == "unavailable":
        return "unavailable"
    return decimal_or_unknown(row.get("ai_credits"))
