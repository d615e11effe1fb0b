"""``copilot-logs diff``'s report for people and CI: a table (failing rows first), markdown for
a pull-request comment, GitHub annotations, JUnit, SARIF, and json with both populations.

A row's SARIF rule is its metric's stable code (D1xx cost ... D6xx coverage).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from copilot_logs.render import ci
from copilot_logs.render.escape import json_text, one_line
from copilot_logs.render.formats import Column, github_annotation
from copilot_logs.render.humanize import display_path, human_duration, plural

if TYPE_CHECKING:
    from copilot_logs.commands.diff import Diff, Figures, Row
    from copilot_logs.commands.diff.metrics import Metric

MACHINE_FORMATS = ("json", "sarif")
QUIET_STATUSES = ("unchanged", "unknown")
"""Rows markdown folds into one count: nothing moved, or nothing to compare."""

STATUS_STYLES = {
    "fail": "bold red",
    "insufficient": "yellow",
    "changed": "cyan",
    "new": "yellow",
    "gone": "yellow",
}


def figure(metric: Metric, value: float | None) -> str:
    """A metric's value as people read it; ``unknown`` for none."""
    if value is None:
        return "unknown"
    if metric.kind == "rate" or metric.name == "tool_failure_rate":
        return f"{value:.0%}"
    if metric.name.endswith("_ms"):
        return human_duration(value)
    if metric.name == "ai_credits":
        return f"{value:,.2f}"
    return f"{value:,.10g}"


def _signed(metric: Metric, change: float | None) -> str:
    if change is None:
        return ""
    if change == 0:
        return "0"
    sign = "+" if change > 0 else "-"
    if metric.kind == "rate" or metric.name == "tool_failure_rate":
        return f"{sign}{abs(change) * 100:.0f} pts"
    return sign + figure(metric, abs(change))


def _percent(relative: float | None) -> str:
    if relative is None:
        return ""
    if math.isinf(relative):
        return "+∞" if relative > 0 else "-∞"
    return f"{relative:+.0%}"


def _side(metric: Metric, side: Figures | None) -> str:
    """``median (n)``, or ``rate (yes/known)`` for a yes/no metric."""
    if side is None:
        return ""
    if metric.kind == "rate":
        return f"{figure(metric, side.mean)} ({side.yes}/{side.known})"
    shown = figure(metric, side.median)
    known = f"{side.known}" if side.known == side.runs else f"{side.known} of {side.runs}"
    return f"{shown} (n={known})"


def _p(row: Row) -> str:
    return "" if row.p_value is None else f"{row.p_value:.3g}"


def _cells(diff: Diff) -> list[dict[str, Any]]:
    labels = {case.key: case.label for case in diff.cases}
    cells = []
    for row in diff.rows:
        metric = row.metric
        cells.append(
            {
                "status": row.status,
                "code": metric.code,
                "case": labels[row.case],
                "metric": metric.name,
                "base": _side(metric, row.base),
                "candidate": _side(metric, row.candidate),
                "change": _signed(metric, row.change),
                "relative": _percent(row.relative),
                "p": _p(row),
                "why": "; ".join(row.fired),
            }
        )
    return cells


TABLE = [
    Column("status", "status", 1, style=lambda value: STATUS_STYLES.get(str(value))),
    Column("case", "case", 2, max_width=40),
    Column("metric", "metric", 1),
    Column("base", "base", 1, numeric=True),
    Column("candidate", "candidate", 1, numeric=True),
    Column("change", "change", 1, numeric=True),
    Column("relative", "%", 3, numeric=True),
    Column("p", "p", 3, numeric=True),
    Column("code", "code", 4),
    Column("why", "threshold", 5, max_width=40),
]


def summary_line(diff: Diff) -> str:
    """One line: the gate's result, the runs and cases, and the rows by status."""
    s = diff.summary()
    statuses = ", ".join(f"{count} {status}" for status, count in s["statuses"].items())
    runs = f"{s['base_runs']} base and {s['candidate_runs']} candidate {diff.unit}s"
    head = f"FAIL: {plural(s['failing'], 'failing row')}" if s["failed"] else "OK"
    return f"{head} ({runs} in {plural(s['cases'], 'case')}: {statuses or 'no rows'})."


def write_table(diff: Diff) -> None:
    import polars as pl

    from copilot_logs.render import formats, output

    cells = _cells(diff)
    frame = pl.DataFrame(cells, schema={c.field: pl.String() for c in TABLE}) if cells else None
    if frame is not None:
        columns = TABLE if len(diff.cases) > 1 else [c for c in TABLE if c.field != "case"]
        formats.print_table(frame, columns)
    line = summary_line(diff)
    output.echo_styled([[(line, "bold red" if diff.failed else "green")]])


def markdown(diff: Diff) -> str:
    """A summary line and the rows that say something (failing first), ready to paste as a
    pull-request comment; the unchanged and unknown rows counted, not listed."""
    import polars as pl

    from copilot_logs.render import formats

    mark = ":x:" if diff.failed else ":white_check_mark:"
    text = f"{mark} **copilot-logs diff**: {summary_line(diff)}\n"
    cells = [cell for cell in _cells(diff) if cell["status"] not in QUIET_STATUSES]
    if cells:
        columns = [
            replace(c, header=c.header if c.field == "p" else c.header.capitalize())
            for c in TABLE
            if c.field != "code"
        ]
        frame = pl.DataFrame(cells, schema={c.field: pl.String() for c in TABLE})
        text += "\n" + formats.markdown_table(frame, columns)
    quiet = sum(1 for row in diff.rows if row.status in QUIET_STATUSES)
    if quiet:
        text += f"\n{plural(quiet, 'more row')} unchanged or unknown (--format json lists them).\n"
    return text


def _message(diff: Diff, row: Row) -> str:
    label = next(case.label for case in diff.cases if case.key == row.case)
    metric = row.metric
    if row.status in ("new", "gone"):
        return f"{label}: {metric.summary} ({row.status})"
    moved = (
        f"{metric.name} {_side(metric, row.base)} -> {_side(metric, row.candidate)}"
        f" ({_signed(metric, row.change)}"
        + (f", {_percent(row.relative)}" if row.relative is not None else "")
        + (f", p={_p(row)}" if row.p_value is not None else "")
        + ")"
    )
    why = f": {'; '.join(row.fired)}" if row.fired else ""
    head = "insufficient runs to fail" if row.status == "insufficient" else row.status
    return f"{label}: {moved} {head}{why}"


def _reported(diff: Diff) -> list[tuple[Row, str]]:
    """The rows CI is told of, with their level: failing (error), a threshold that would
    have fired with more runs, a new or gone case (warning)."""
    found = []
    for row in diff.rows:
        if row.failing:
            found.append((row, "error"))
        elif (row.status == "insufficient" and row.fired) or row.status in ("new", "gone"):
            found.append((row, "warning"))
    return found


def github(diff: Diff) -> str:
    """One workflow command per row CI should see (failing rows as errors)."""
    lines = [
        github_annotation(
            level,
            _message(diff, row),
            file=display_path(row.file) if row.file else None,
            title=f"{row.metric.code} {row.metric.name} {row.status}",
        )
        for row, level in _reported(diff)
    ]
    return "".join(line + "\n" for line in lines)


def junit(diff: Diff) -> str:
    """One test case per row: failed when failing, skipped when it cannot be judged
    (insufficient, unknown, or a new or gone case that does not fail)."""
    labels = {case.key: case.label for case in diff.cases}
    cases = []
    for row in diff.rows:
        text = _message(diff, row)
        skipped = row.status in ("insufficient", "unknown", "new", "gone") and not row.failing
        cases.append(
            ci.JUnitCase(
                classname=labels[row.case],
                name=f"{row.metric.code} {row.metric.name}",
                file=row.file,
                failure=(f"{row.metric.name} {row.status}", text) if row.failing else None,
                skipped=text if skipped else None,
                output=None if row.failing or skipped else text,
            )
        )
    return ci.junit_document("copilot-logs diff", "copilot-logs.diff", cases)


def _sarif_rule(metric: Metric) -> dict[str, Any]:
    source = f" (from {metric.source})" if metric.source else ""
    return {
        "id": metric.code,
        "name": metric.name,
        "shortDescription": {"text": f"{metric.summary} changed"},
        "fullDescription": {"text": f"The {metric.family} metric {metric.summary}{source}."},
        "help": {"text": "copilot-logs diff: see docs/diff.md"},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": [metric.family]},
    }


def sarif(diff: Diff) -> str:
    """SARIF 2.1.0: a result per row CI is told of (:func:`_reported`), its rule the
    metric's code, its location the case's first log."""
    from copilot_logs.commands.diff.metrics import CASE_ROWS, METRICS

    catalogue = [*METRICS, *CASE_ROWS]
    index = {metric.code: position for position, metric in enumerate(catalogue)}
    results = []
    for row, level in _reported(diff):
        result: dict[str, Any] = {
            "ruleId": row.metric.code,
            "ruleIndex": index[row.metric.code],
            "level": level,
            "message": {"text": _message(diff, row)},
            "properties": {"case": row.case, "status": row.status},
        }
        if row.file:
            result["locations"] = [
                {"physicalLocation": {"artifactLocation": {"uri": ci.artifact_uri(row.file)}}}
            ]
        results.append(result)
    return ci.sarif_document([_sarif_rule(metric) for metric in catalogue], results)


def _figures(side: Figures | None) -> dict[str, Any] | None:
    if side is None:
        return None
    found = {name: getattr(side, name) for name in ("runs", "known", "median", "p90", "mean")}
    return found if side.yes is None else {**found, "yes": side.yes, "rate": side.mean}


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


def document(diff: Diff) -> dict[str, Any]:
    """The json report: the gate, a summary, the cases, every row, and both populations."""
    from copilot_logs.commands.diff.metrics import METRICS_VERSION

    rows = [
        {
            "case": row.case,
            "metric": row.metric.name,
            "code": row.metric.code,
            "family": row.metric.family,
            "kind": row.metric.kind,
            "status": row.status,
            "failing": row.failing,
            "base": _figures(row.base),
            "candidate": _figures(row.candidate),
            "change": row.change,
            "relative": _finite(row.relative),
            "p_value": row.p_value,
            "p_method": row.p_method,
            "fired": list(row.fired),
            "file": row.file,
        }
        for row in diff.rows
    ]
    cases = [
        {
            "case": case.key,
            "label": case.label,
            "base_runs": case.base_runs,
            "candidate_runs": case.candidate_runs,
            "base_verdicts": case.base_verdicts,
            "candidate_verdicts": case.candidate_verdicts,
        }
        for case in diff.cases
    ]
    return {
        "schema": "copilot-logs/diff",
        "metrics_version": METRICS_VERSION,
        "unit": diff.unit,
        "gate": diff.gate.describe(),
        "summary": diff.summary(),
        "cases": cases,
        "rows": rows,
        "base": {"runs": diff.base.to_dicts()},
        "candidate": {"runs": diff.candidate.to_dicts()},
    }


def json(diff: Diff) -> str:
    text = orjson.dumps(document(diff), option=orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z).decode()
    return json_text(text) + "\n"


def render(diff: Diff, fmt: str) -> str:
    """The diff as text in one of the formats other than ``table``."""
    writers = {"json": json, "markdown": markdown, "github": github, "junit": junit}
    return {**writers, "sarif": sarif}[fmt](diff)


def one_line_summary(diff: Diff) -> str:
    return one_line(summary_line(diff))
