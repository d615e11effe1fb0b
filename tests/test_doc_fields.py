"""Each command's page documents exactly the fields its `--format json` prints: a field added,
renamed or dropped in the code fails here until its page says so.

A page documents an object with a table under a heading: the first cell of each row names one
field or several (`a`, `b`); the test compares those names with the keys the command prints on
sample_sessions/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from click.testing import CliRunner

from copilot_logs.cli import main

from .conftest import PROJECT, SAMPLES

DOCS = PROJECT / "docs"


def documented(page: str, heading: str) -> set[str]:
    """The field names of the first table under `heading` (up to the next heading)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    section = re.split(rf"^#+ {re.escape(heading)}\n", text, maxsplit=1, flags=re.M)[1]
    section = re.split(r"^#+ ", section, maxsplit=1, flags=re.M)[0]
    rows = re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+) \|", section, re.M)
    assert rows, f"{page}: no field table under {heading!r}"
    return {name for row in rows for name in re.findall(r"`([a-z_]+)`", row)}


def printed(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def keys(objects: list[dict[str, Any]]) -> set[str]:
    assert objects
    return {key for item in objects for key in item}


def test_sessions_fields() -> None:
    assert documented("sessions.md", "JSON fields") == keys(printed("sessions", str(SAMPLES)))


def test_count_fields() -> None:
    rows = printed("count", str(SAMPLES))
    grouping = {"session_id", "started_at", "file"}  # the grouping key, told in the prose
    assert documented("count.md", "JSON fields") == keys(rows) - grouping


def test_audit_fields() -> None:
    assert documented("audit.md", "JSON fields") == keys(printed("audit", str(SAMPLES)))


def test_validate_fields() -> None:
    report = printed("validate", str(SAMPLES))
    assert documented("validate.md", "Finding") == keys(report["findings"])
    assert documented("validate.md", "Summary") == set(report["summary"])
    statistics = printed("validate", str(SAMPLES), "--statistics")["statistics"]
    assert documented("validate.md", "Statistics row") == keys(statistics)


def test_usage_fields() -> None:
    report = printed("usage", str(SAMPLES))
    assert documented("usage.md", "JSON fields") == set(report)
    assert documented("usage.md", "Per session") == keys(report["rows"])
    models = [model for row in report["rows"] for model in row["models"]]
    assert documented("usage.md", "Per model") == keys(models)


def test_usage_call_fields() -> None:
    calls = printed("usage", str(SAMPLES), "--by", "call")
    assert set(calls) == {"by", "rows", "totals"}
    assert documented("usage.md", "Per call") == keys(calls["rows"])
    assert documented("usage.md", "Totals of the calls") == set(calls["totals"])
    grouped: set[str] = set()
    for by in ("prompt", "agent", "task"):
        grouped |= keys(printed("usage", str(SAMPLES), "--by", by)["rows"])
    assert documented("usage.md", "Per prompt, agent, task") == grouped


def test_cache_fields() -> None:
    assert documented("cache.md", "JSON fields") == set(printed("cache", "info"))


def test_rules_fields() -> None:
    page = (DOCS / "rules.md").read_text(encoding="utf-8")
    named = re.search(r"`--format json` gives a list with, per rule, (.*?)\.\s", page, re.S)
    assert named
    fields = re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", named[1]))
    assert set(fields) == keys(printed("rules"))


def walk(node: dict[str, Any], kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of the timeline, with its kind (the heading that documents it)."""
    yield kind, node
    children = {
        "interactions": "Interaction",
        "turns": "Turn",
        "tools": "Tool",
        "subagents": "Sub-agent run",
        "calls": "Sub-agent call",
        "events": "Event",
    }
    for field, child in children.items():
        for item in node.get(field) or []:
            yield from walk(item, child)


def test_timeline_fields() -> None:
    found: dict[str, set[str]] = {}
    for session in printed("timeline", "--latest", "100", "--root", str(SAMPLES)):
        for kind, node in walk(session, "Session"):
            found.setdefault(kind, set()).update(node)
    assert len(found) == 7
    for kind, names in found.items():
        assert documented("timeline.md", kind) == names, kind


def test_events_frame_columns() -> None:
    from copilot_logs.ingest.schema import EVENTS_SCHEMA

    page = (DOCS / "api.md").read_text(encoding="utf-8")
    section = page.split("\n## The events frame\n", 1)[1]
    named = re.findall(
        r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", section.split("Payload columns")[0])
    )
    assert named == list(EVENTS_SCHEMA)


def test_watch_records_are_documented() -> None:
    """Every kind and field `watch --format ndjson` prints on the samples is in watch.md."""
    page = (DOCS / "watch.md").read_text(encoding="utf-8")
    section = page.split("\n## Events as they happen (`--format ndjson`)\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    kinds = set(re.findall(r"^\| `([a-z_]+)`(?: / `([a-z_]+)`)? \|", section, re.M))
    documented_kinds = {kind for pair in kinds for kind in pair if kind}
    named = set(re.findall(r"`([a-z_]+)`", section))
    printed_kinds, printed_keys = set(), set()
    for prefix in ("c3", "e5", "d4", "f6"):
        (log,) = [p for p in SAMPLES.iterdir() if p.name.startswith(prefix)]
        result = CliRunner().invoke(main, ["watch", str(log), "--until-done", "--format", "ndjson"])
        assert result.exit_code in (0, 1), result.output
        records = [json.loads(line) for line in result.stdout.splitlines()]
        printed_kinds |= {record["kind"] for record in records}
        printed_keys |= keys(records)
    assert printed_kinds <= documented_kinds
    assert len(printed_kinds) >= 10
    assert printed_keys <= named


def test_damage_kinds_and_their_rules() -> None:
    """docs/damaged-logs.md names every kind of damage a rule reports, with that rule."""
    from copilot_logs.commands.validate import RULES

    page = (DOCS / "damaged-logs.md").read_text(encoding="utf-8")
    table: dict[str, set[str]] = {}
    for kinds, rules in re.findall(
        r"^\| ((?:`[a-z0-9-]+`(?:, )?)+) \|.*\| (\[.*\)) \|$", page, re.M
    ):
        codes = set(re.findall(r"\[([A-Z]\d{3})\]", rules))
        for kind in re.findall(r"`([a-z0-9-]+)`", kinds):
            table[kind] = codes
    expected = {kind: {rule.code for rule in RULES if kind in rule.diagnostics} for kind in table}
    assert table == expected
    assert set(table) == {kind for rule in RULES for kind in rule.diagnostics}
