"""A :class:`~copilot_logs.commands.report.Report` as one self-contained HTML page.

Nothing is fetched; its Content-Security-Policy allows only its own style and script (by their
sha256), so no log text can run in it even if escaping failed (docs/report.md).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from copilot_logs import modes
from copilot_logs.commands.report import Report, Row
from copilot_logs.render.formats import Column
from copilot_logs.render.humanize import (
    count_or_unknown,
    credits_text,
    decimal_or_unknown,
    human_duration,
    minute,
    short_id,
    yes_no,
)
from copilot_logs.render.svg import attr, calls_chart, duration, legend, preview, text, timeline_svg

# The page's one style and one script: files beside this module.
STYLE, SCRIPT = (
    "\n" + (files(__package__) / name).read_text("utf-8") for name in ("report.css", "report.js")
)


def sha256(source: str) -> str:
    """The CSP source expression allowing exactly this inline style or script."""
    digest = hashlib.sha256(source.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def policy(style: str = STYLE, script: str = SCRIPT) -> str:
    return (
        f"default-src 'none'; style-src {sha256(style)}; script-src {sha256(script)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


Anchors = dict[tuple[str, str], str]
"""(session id, file) -> the id of the session's timeline in the page."""


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
    Column("wasted_calls", "looping", numeric=True, format=wasted),
    Column("resume", "resume", format=lambda v: v or ""),
    Column("errors", "errors", numeric=True),
    Column("task_complete", "done", format=yes_no),
    Column("damaged_lines", "damaged", numeric=True),
    Column("duration_ms", "took", numeric=True, format=human_duration),
    Column("llm_calls", "calls", numeric=True),
    Column("subagent_calls", "sub-agent calls", numeric=True),
    Column("tool_calls", "tools", numeric=True),
    Column("user_prompts", "prompts", numeric=True),
    Column("autopilot_nudges", "nudges", numeric=True),
    Column("subagent_runs", "sub-agents", numeric=True),
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
    Column("wasted_calls", "calls wasted", numeric=True, format=lambda v: f"{v:,}" if v else ""),
    Column("wasted_credits", "credits wasted", numeric=True, format=credits_wasted),
    Column("verdict", "verdict", format=lambda v: v or ""),
    Column("resume", "resume", format=lambda v: v or ""),
    Column("repository", "repository"),
]
AUDIT_COLUMNS = [
    Column("session_id", "session"),
    Column("verdict", "verdict"),
    Column("wasted_calls", "looping", numeric=True, format=wasted),
    Column("wasted_credits", "credits wasted", numeric=True, format=credits_wasted),
    Column("started_at", "started", format=minute),
    Column("autopilot_nudges", "nudges", numeric=True),
    Column("turns_after_first_nudge", "calls after 1st nudge", numeric=True),
    Column("tool_calls_after_first_nudge", "tools after 1st nudge", numeric=True),
    Column("note", "summary / error"),
]
RULE_COLUMNS = [
    Column("code", "rule"),
    Column("name", "name"),
    Column("severity", "severity"),
    Column("count", "findings", numeric=True),
]
USAGE_COLUMNS = [
    Column("model", "model"),
    Column("sessions", "sessions", numeric=True, format=count_or_unknown),
    Column("requests", "requests", numeric=True, format=count_or_unknown),
    Column("premium_requests", "premium requests", numeric=True, format=decimal_or_unknown),
    Column("ai_credits", "AI credits", numeric=True, format=decimal_or_unknown),
    Column("input_tokens", "input tokens", numeric=True, format=count_or_unknown),
    Column("output_tokens", "output tokens", numeric=True, format=count_or_unknown),
    Column("cache_read_tokens", "cache read", numeric=True, format=count_or_unknown),
    Column("reasoning_tokens", "reasoning", numeric=True, format=count_or_unknown),
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
        heading = text(column.header)
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
    Column("llm_calls", "calls", numeric=True, format=count_or_unknown),
    Column("credits", "AI credits", numeric=True),
    Column("input_tokens", "input tokens", numeric=True, format=count_or_unknown),
    Column("output_tokens", "output tokens", numeric=True, format=count_or_unknown),
    Column("cache_read_tokens", "cache read", numeric=True, format=count_or_unknown),
    Column("source", "source"),
]
CREDIT_CALL_COLUMNS = [
    Column("line", "line", numeric=True),
    Column("agent", "agent"),
    Column("api_call_id", "call id"),
    Column("credits", "AI credits", numeric=True),
    Column("input_tokens", "input", numeric=True, format=count_or_unknown),
    Column("output_tokens", "output", numeric=True, format=count_or_unknown),
    Column("cache_read_tokens", "cached", numeric=True, format=count_or_unknown),
    Column("ttft_ms", "ttft ms", numeric=True, format=lambda v: "" if v is None else f"{v:,.0f}"),
]


GOOD_VERDICTS = frozenset({"completed"})
BAD_VERDICTS = frozenset({"missing-task-complete", "nudge-cap", "errored", "interrupted"})
SESSIONS_SHOWN = 50
"""Sessions the table shows before "show all": the first screens, what needs attention first."""
ATTENTION_SHOWN = 25
"""Sessions the attention section lists; the others are next in the sessions table."""


def _note(row: Row) -> str:
    """What the agent said, or what went wrong (as in ``audit``'s table)."""
    if row["verdict"] in ("completed", "completion-rejected") and row["task_complete_summary"]:
        return preview(row["task_complete_summary"], 200)
    if row["verdict"] == "errored" and row["session_error"]:
        return preview(row["session_error"], 200)
    if row["last_failed_tool"]:
        return preview(
            f"last failed tool: {row['last_failed_tool']}: {row['last_failed_tool_error']}", 200
        )
    return ""


def _section(anchor: str, heading: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{text(heading)}</h2>{body}</section>'


def _card(body: str) -> str:
    return f'<div class="card">{body}</div>'


def _audit(report: Report, anchors: Anchors) -> str:
    if not report.audited:
        return (
            '<p class="empty">No autopilot session among these (interactive ones are not '
            "judged).</p>"
        )
    chips = []
    for verdict, count in report.verdicts.items():
        tone = "good" if verdict in GOOD_VERDICTS else "bad" if verdict in BAD_VERDICTS else ""
        chips.append(f'<span class="{tone}">{text(verdict)}: {count}</span>')
    rows = [{**row, "note": _note(row)} for row in report.audited]
    return f'<div class="chips">{"".join(chips)}</div>' + _card(
        table(rows, AUDIT_COLUMNS, sortable=True, anchors=anchors, label="audit")
    )


def _local(iso_time: str | None, zone: str) -> str:
    if not iso_time:
        return "?"
    moment = datetime.fromisoformat(iso_time.replace("Z", "+00:00"))
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")


def _timeline(session: dict[str, Any], anchor: str, zone: str) -> str:
    facts = [
        f"started {_local(session.get('started_at'), zone)}",
        f"took {duration(session.get('duration_ms'))}",
        f"{len(session['interactions'])} interactions",
        f"{session['llm_calls']} LLM calls",
        f"{session['subagent_calls']} sub-agent calls",
        f"{session['tool_calls']} tools ({session['failed_tool_calls']} failed)",
    ]
    where = " · ".join(
        str(session[k])
        for k in ("repository", "branch", "model", "copilot_version")
        if session.get(k)
    )
    return (
        f'<article class="card session-timeline" id="{anchor}" '
        f'data-session="{attr(session["session_id"])}">'
        f"<h3>Session {text(session['session_id'])}</h3>"
        f'<p class="facts">{text(where)}<br>{text(" · ".join(facts))}<br>'
        f"{text(session['file'])}</p>{timeline_svg(session)}</article>"
    )


def _or_empty(rows: list[Row], body: str, empty: str) -> str:
    return _card(body) if rows else f'<p class="empty">{empty}</p>'


def _needs(report: Report, anchors: Anchors) -> str:
    """What needs attention: the failing verdicts, the loops and what they wasted, the damaged
    logs and those the CLI cannot resume; then the sessions concerned, the worst first."""
    needs = report.needs
    if not needs.anything:
        return (
            '<p class="empty">Nothing needs attention: no run failed the default audit gate or '
            "looped, and no log is damaged or beyond resuming.</p>"
        )
    chips = []
    if needs.failing:
        by_verdict = ", ".join(f"{count} {verdict}" for verdict, count in needs.failing.items())
        failed = sum(needs.failing.values())
        chips.append(("bad", f"{failed} failing ({by_verdict})"))
    if needs.looping:
        credits = (
            f", {needs.wasted_credits:g} AI credits" if needs.wasted_credits is not None else ""
        )
        chips.append(
            ("bad", f"{needs.looping} looping: {needs.wasted_calls:,} LLM calls{credits} wasted")
        )
    if needs.cannot_resume:
        chips.append(("bad", f"{needs.cannot_resume} cannot be resumed"))
    if needs.damaged:
        chips.append(("", f"{needs.damaged} damaged ({needs.damaged_lines:,} lines)"))
    if needs.at_risk:
        chips.append(("", f"{needs.at_risk} at risk on resume"))
    rows = [row for row in report.sessions if row["attention"]]
    shown = rows[:ATTENTION_SHOWN]
    more = (
        f'<p class="meta">and {len(rows) - len(shown)} more, next in '
        '<a href="#sessions">the sessions table</a></p>'
        if len(rows) > len(shown)
        else ""
    )
    return (
        '<div class="chips">'
        + "".join(f'<span class="{tone}">{text(chip)}</span>' for tone, chip in chips)
        + "</div>"
        + _card(table(shown, ATTENTION_COLUMNS, anchors=anchors, label="needs attention") + more)
    )


def _sessions(report: Report, anchors: Anchors) -> str:
    """Every session, what needs attention first; past the first screens, behind "show all"
    (a checkbox: it works without the script)."""
    count = len(report.sessions)
    sessions = table(
        report.sessions,
        SESSION_COLUMNS,
        sortable=True,
        anchors=anchors,
        label="sessions",
        shown=SESSIONS_SHOWN,
    )
    hint = (
        "What needs attention first; click a heading to sort; a linked session has its "
        "timeline below."
    )
    toggle = ""
    if count > SESSIONS_SHOWN:
        toggle = (
            '<input type="checkbox" id="all-sessions" class="all">'
            f'<label for="all-sessions">Show all {count} sessions (the first '
            f"{SESSIONS_SHOWN} are shown)</label>"
        )
    return f'<p class="meta">{text(hint)}</p>{toggle}' + _card(sessions)


def _overview(report: Report, anchors: Anchors) -> str:
    """The tables and the chart: every session."""
    return "".join(
        [
            _section("attention", "Needs attention", _needs(report, anchors)),
            _section("sessions", f"Sessions ({len(report.sessions)})", _sessions(report, anchors)),
            _section(
                "calls",
                "LLM calls per day",
                _or_empty(report.calls_by_day, calls_chart(report.calls_by_day), "No LLM call."),
            ),
            _section("audit", "Autopilot audit", _audit(report, anchors)),
            _section(
                "validate",
                "Validate findings by rule",
                _or_empty(
                    report.findings_by_rule,
                    table(report.findings_by_rule, RULE_COLUMNS, label="findings by rule"),
                    "No finding: every log keeps its invariants.",
                ),
            ),
            _section("credits", "Where the credits went", _credits(report, anchors)),
            _section(
                "usage",
                "Usage per model",
                _or_empty(
                    report.usage_by_model,
                    table(report.usage_by_model, USAGE_COLUMNS, label="usage per model"),
                    "No usage recorded (no session.shutdown).",
                ),
            ),
        ]
    )


def _credits(report: Report, anchors: Anchors) -> str:
    """The biggest prompts and agents, biggest first, each with the calls behind it."""
    parts = []
    for heading, rows, key in (
        ("By prompt", report.credits_by_prompt, "prompt"),
        ("By agent", report.credits_by_agent, "agent"),
    ):
        groups = [
            {**row, "label": preview(row[key], 80), "credits": credits_text(row)} for row in rows
        ]
        body = table(groups, CREDIT_GROUP_COLUMNS, anchors=anchors, label=f"credits {key}")
        calls = "".join(_calls_behind(row, key) for row in rows)
        parts.append(f"<h3>{text(heading)}</h3>{_card(body + calls)}" if rows else "")
    hint = (
        "Biggest first (by credits, then tokens). Exact where the CLI recorded each call "
        "(1.0.102 on); from the shutdown's totals only for a group they describe exactly."
    )
    body = "".join(parts)
    return f'<p class="meta">{text(hint)}</p>{body}' if body else _or_empty([], "", "No LLM call.")


def _calls_behind(row: Row, key: str) -> str:
    """The calls behind a group, folded; none for a session's not-attributable row, whose
    reason is said instead."""
    if not row["calls"] and row.get("reason"):
        summary = f"{short_id(row['session_id'])} · not attributable: {row['reason']}"
        return f'<p class="meta">{text(summary)}</p>'
    calls = [{**call, "credits": credits_text(call)} for call in row["calls"]]
    summary = f"{short_id(row['session_id'])} · {preview(row[key], 60)}: the calls behind it"
    more = row["more_calls"]
    note = f'<p class="meta">and {more} smaller calls more</p>' if more else ""
    return (
        f"<details><summary>{text(summary)}</summary>"
        f"{table(calls, CREDIT_CALL_COLUMNS, label='calls behind')}{note}</details>"
    )


def _timelines(report: Report, anchors: Anchors) -> str:
    """The pictures: the newest sessions only."""
    sessions, drawn = len(report.sessions), len(report.timelines)
    more = (
        f" The other {sessions - drawn} are in the tables only (--timelines N draws more)."
        if sessions > drawn
        else ""
    )
    key = _card(
        '<svg class="legend" viewBox="0 0 1200 44" width="1200" height="44" role="img" '
        f'aria-label="legend">{legend()}</svg>'
    )
    pictures = "".join(
        _timeline(session, anchors[(str(session["session_id"]), str(session["file"]))], report.zone)
        for session in report.timelines
    )
    return _section(
        "timelines",
        f"Timelines ({drawn} newest of {sessions})",
        f'<p class="meta">Hover or focus (Tab) a mark for its details.{more}</p>{key}{pictures}',
    )


def page(report: Report) -> str:
    """The whole HTML document."""
    anchors = {
        (str(s["session_id"]), str(s["file"])): f"t{n}"
        for n, s in enumerate(report.timelines, start=1)
    }
    generated = report.generated_at.strftime("%Y-%m-%d %H:%M %Z")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy()}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>copilot-logs report</title>"
        f"<style>{STYLE}</style></head><body>"
        "<header><h1>Copilot CLI sessions</h1>"
        f'<p class="meta">{len(report.sessions)} sessions · generated {text(generated)} · '
        f"times in {text(report.zone)} · by copilot-logs report</p>"
        '<nav><a href="#attention">needs attention</a><a href="#sessions">sessions</a>'
        '<a href="#calls">LLM calls per day</a>'
        '<a href="#audit">audit</a><a href="#validate">validate</a>'
        '<a href="#credits">credits</a><a href="#usage">usage</a>'
        '<a href="#timelines">timelines</a></nav></header>'
        f"<main>{_overview(report, anchors)}{_timelines(report, anchors)}</main>"
        '<div id="tip" role="tooltip" hidden></div>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def save(page: str, path: Path, mode: int = modes.PRIVATE) -> int:
    """Write the page at ``path`` (through a link there, to its target) whole or not at all:
    into a new file beside it, renamed over it once written. The file gets ``mode`` less the
    umask: the mode of the logs the page shows (:func:`copilot_logs.modes.mode_of`), as every
    file copilot-logs makes of logs; a failed write leaves no file behind and raises the
    OSError. Returns the bytes written."""
    data = page.encode()
    with modes.atomic(os.path.realpath(path), mode) as stream:
        stream.write(data)
    return len(data)
