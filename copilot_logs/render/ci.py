"""A validate report as text for people and CI: text, json, GitHub annotations, JUnit, SARIF.

The JUnit and SARIF documents (:func:`junit_document`, :func:`sarif_document`) serve ``diff``
too. Paths are shown relative to the current folder when under it, as CI expects.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from copilot_logs.render.escape import json_text, multiline, one_line
from copilot_logs.render.formats import github_annotation
from copilot_logs.render.humanize import display_path, plural

if TYPE_CHECKING:
    from copilot_logs.commands.validate import Report, Rule
    from copilot_logs.render.output import Part

GITHUB_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}
SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def tool_version() -> str:
    try:
        return version("copilot-logs")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


def _location(row: dict[str, Any]) -> str:
    path = display_path(row["file"])
    return f"{path}:{row['line']}" if row["line"] is not None else path


def finding_line(row: dict[str, Any]) -> str:
    """``path:line: CODE name: message``, on one line (control characters escaped)."""
    return one_line(f"{_location(row)}: {row['code']} {row['name']}: {row['message']}")


def summary_line(report: Report) -> str:
    s = report.summary()
    files = plural(s["files"], "file")
    if not s["findings"]:
        return f"All checks passed: {files}, no findings."
    counts = (
        f"{plural(s['errors'], 'error')}, {plural(s['warnings'], 'warning')} and {s['info']} info"
    )
    strict = " (--strict: warnings fail too)" if s["strict"] else ""
    if not s["failed"]:
        return f"Found {counts} in {files}; the gate passed{strict}."
    failing = plural(s["failing"], "failing finding")
    return f"Found {counts}; the gate failed: {failing} in {s['files_failing']} of {files}{strict}."


SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
"""A finding's code and name on a colour terminal, by severity."""


def text_lines(report: Report, *, statistics: bool = False) -> list[list[Part]]:
    """The text format as lines of styled parts (:func:`copilot_logs.render.output.echo_styled`
    colours them on a colour terminal): each finding's code and name by severity, the summary
    red when the gate failed, green when it passed."""
    lines: list[list[Part]] = []
    if statistics:
        stats = report.statistics().to_dicts()
        width = max((len(str(row["count"])) for row in stats), default=1)
        name_width = max((len(row["name"]) for row in stats), default=1)
        lines.extend(
            [
                (f"{row['count']:>{width}}  ", None),
                (
                    f"{row['code']}  {row['name']:<{name_width}}",
                    SEVERITY_STYLES.get(row["severity"]),
                ),
                (f"  [{row['severity']}]", None),
            ]
            for row in stats
        )
    else:
        lines.extend(_finding_parts(row) for row in report.findings.iter_rows(named=True))
    if lines:
        lines.append([])
    summary = summary_line(report)
    lines.append([(summary, "bold red" if report.failed else "green")])
    return lines


def _finding_parts(row: dict[str, Any]) -> list[Part]:
    """:func:`finding_line` in three parts: where, what (styled by severity), and the message."""
    return [
        (one_line(f"{_location(row)}: "), None),
        (one_line(f"{row['code']} {row['name']}"), SEVERITY_STYLES.get(row["severity"])),
        (one_line(f": {row['message']}"), None),
    ]


def json(report: Report, *, statistics: bool = False) -> str:
    body: dict[str, Any] = (
        {"statistics": report.statistics().to_dicts()}
        if statistics
        else {"findings": report.findings.to_dicts()}
    )
    body["summary"] = report.summary()
    return json_text(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()) + "\n"


def github(report: Report) -> str:
    """One workflow command per finding: GitHub Actions shows them on the files' lines."""
    lines = [
        github_annotation(
            GITHUB_LEVELS[row["severity"]],
            row["message"],
            file=display_path(row["file"]),
            line=row["line"],
            title=f"{row['code']} {row['name']}",
        )
        for row in report.findings.iter_rows(named=True)
    ]
    return "".join(line + "\n" for line in lines)


def junit(report: Report) -> str:
    """JUnit XML: one test case per session log, failed when it has a failing finding. Valid
    XML 1.0 for any log: the control characters it forbids are written as visible escapes."""
    # One case per session log: a file holding two sessions is two cases.
    per_file: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in report.findings.iter_rows(named=True):
        per_file.setdefault((row["file"], row["session_id"]), []).append(row)
    fail_levels = {"error", "warning"} if report.strict else {"error"}
    cases = []
    for file, session_id in report.files.select("file", "session_id").iter_rows():
        rows = per_file.get((file, session_id), [])
        bad = [row for row in rows if row["severity"] in fail_levels]
        other = [row for row in rows if row["severity"] not in fail_levels]
        failure = None
        if bad:
            failure = (
                f"{plural(len(bad), 'failing finding')}: "
                + ", ".join(sorted({row["code"] for row in bad})),
                "\n".join(finding_line(row) for row in bad),
            )
        cases.append(
            JUnitCase(
                classname=display_path(file),
                name=session_id or file,
                file=file,
                failure=failure,
                output="\n".join(finding_line(row) for row in other) if other else None,
            )
        )
    return junit_document("copilot-logs validate", "copilot-logs.validate", cases)


@dataclass(frozen=True)
class JUnitCase:
    """One test case of a JUnit report: failed when ``failure`` (its message and text) is
    given, skipped when ``skipped`` (why) is."""

    classname: str
    name: str
    file: str | None = None
    failure: tuple[str, str] | None = None
    output: str | None = None
    skipped: str | None = None


def junit_document(suite: str, failure_type: str, cases: Sequence[JUnitCase]) -> str:
    """JUnit XML of one suite of ``cases`` (the ``testsuites`` element CI systems read), every
    text one line where an attribute, control characters as visible escapes."""
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(case.failure is not None for case in cases)),
        "errors": "0",
        "skipped": str(sum(case.skipped is not None for case in cases)),
    }
    suites = ET.Element("testsuites", {"name": suite, **counts})
    element = ET.SubElement(suites, "testsuite", {"name": suite, **counts})
    for case in cases:
        attributes = {"classname": one_line(case.classname), "name": one_line(case.name)}
        if case.file is not None:
            attributes["file"] = one_line(case.file)
        node = ET.SubElement(element, "testcase", attributes)
        if case.failure is not None:
            message, text = case.failure
            failure = ET.SubElement(
                node, "failure", {"message": one_line(message), "type": failure_type}
            )
            failure.text = multiline(text)
        if case.skipped is not None:
            ET.SubElement(node, "skipped", {"message": one_line(case.skipped)})
        if case.output:
            out = ET.SubElement(node, "system-out")
            out.text = multiline(case.output)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def artifact_uri(file: str) -> str:
    """A log's path as a SARIF artifact location: relative to the current folder when under
    it (as code scanning resolves it against the checkout), else a file URI."""
    shown = display_path(file)
    path = Path(shown)
    if path.is_absolute():
        return path.as_uri()
    return quote(shown.replace(os.sep, "/"))


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": {"text": rule.explanation},
        "defaultConfiguration": {"level": SARIF_LEVELS[rule.severity]},
        "properties": {"tags": [rule.family]},
    }


def sarif(report: Report) -> str:
    """SARIF 2.1.0, for code-scanning upload (``github/codeql-action/upload-sarif``)."""
    from copilot_logs.commands.validate import RULES

    index = {rule.code: position for position, rule in enumerate(RULES)}
    results = []
    for row in report.findings.iter_rows(named=True):
        location: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(row["file"])}}
        if row["line"] is not None:
            location["region"] = {"startLine": row["line"]}
        result: dict[str, Any] = {
            "ruleId": row["code"],
            "ruleIndex": index[row["code"]],
            "level": SARIF_LEVELS[row["severity"]],
            "message": {"text": row["message"]},
            "locations": [{"physicalLocation": location}],
        }
        properties = {key: row[key] for key in ("event_id", "session_id") if row[key] is not None}
        if properties:
            result["properties"] = properties
        results.append(result)
    return sarif_document([_sarif_rule(rule) for rule in RULES], results)


def sarif_document(rules: list[dict[str, Any]], results: list[dict[str, Any]]) -> str:
    """SARIF 2.1.0 text of one run of copilot-logs: its ``rules`` (reportingDescriptors) and
    ``results``."""
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "copilot-logs",
                        "version": tool_version(),
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json_text(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()) + "\n"


MACHINE_FORMATS = ("json", "sarif")
"""Formats whose text is exact (JSON escapes every control character itself)."""


def render(report: Report, fmt: str, *, statistics: bool = False) -> str:
    """The report in json (``statistics``: its counts by rule), github, junit or sarif."""
    if fmt == "json":
        return json(report, statistics=statistics)
    return {"github": github, "junit": junit, "sarif": sarif}[fmt](report)
