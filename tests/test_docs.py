"""The docs check themselves: every command has help with examples, the README lists exactly
the CLI's commands, and the reader's columns are the schema's."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.ingest.decode import PAYLOAD_FIELDS
from copilot_logs.ingest.events_frame import ENVELOPE_FIELDS
from copilot_logs.ingest.schema import EVENTS_SCHEMA

from .conftest import PROJECT

README = (PROJECT / "README.md").read_text()


def commands() -> list[str]:
    return main.list_commands(click.Context(main))


def test_every_command_has_help_with_an_example() -> None:
    for name in commands():
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Examples:" in result.output, name
        assert f"copilot-logs {name}" in result.output.split("Examples:")[1], name


def test_readme_lists_exactly_the_cli_commands() -> None:
    table = README.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE)
    assert sorted(listed) == sorted(commands())


def test_readme_documents_every_exit_code() -> None:
    from copilot_logs.errors import ExitCode

    section = README.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    for code in ExitCode:
        assert f"| {int(code)} | {code.name} |" in section


def test_reader_fills_exactly_the_schema_columns() -> None:
    assert sorted(EVENTS_SCHEMA) == sorted(
        ("session_id", "file", *ENVELOPE_FIELDS, *PAYLOAD_FIELDS)
    )


# --- docs/rules.md, generated from the rules ----------------------------------------------------

RULES_PAGE = PROJECT / "docs" / "rules.md"


def test_rules_page_is_up_to_date() -> None:
    from copilot_logs.render import rules as rules_page

    assert RULES_PAGE.read_text(encoding="utf-8") == rules_page.render(), (
        "docs/rules.md is out of date: run `python -m copilot_logs.render.rules > docs/rules.md`"
    )


def test_the_rules_page_generator_writes_the_page() -> None:
    from copilot_logs.render import output
    from copilot_logs.render import rules as rules_page
    from tests.streams import MockEnvironment, Stream

    stdout = Stream()
    with output.environment(MockEnvironment(stdout, Stream())):
        rules_page.main()
    assert stdout.bytes() == RULES_PAGE.read_bytes()


@pytest.mark.process
def test_the_rules_page_generator_runs_as_documented() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "copilot_logs.render.rules"],
        capture_output=True,
        check=True,
        cwd=PROJECT,
    )
    assert done.stdout == RULES_PAGE.read_bytes()
    assert done.stderr == b""


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation other than '-' and
    '_' dropped, each space a '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_rules_page_documents_every_rule_and_its_links_resolve() -> None:
    from copilot_logs.commands.validate import FAMILIES, RULES

    page = RULES_PAGE.read_text(encoding="utf-8")
    headings = re.findall(r"^#{1,6} (.+)$", page, re.MULTILINE)
    for rule in RULES:
        entry = page.split(f"\n### {rule.code} {rule.name}\n", 1)[1].split("\n### ", 1)[0]
        assert f"**{rule.summary}**" in entry, rule.code
        assert f"Severity: {rule.severity}. Family: {FAMILIES[rule.code[0]]}." in entry
        assert rule.explanation in entry, rule.code
    rows = re.findall(r"^\| \[`([A-Z]\d{3})`\]\(#([\w-]+)\) \|", page, re.MULTILINE)
    assert [code for code, _ in rows] == [rule.code for rule in RULES]
    anchors = {github_slug(heading) for heading in headings}
    assert {target for _, target in rows} <= anchors


def test_the_docs_point_at_the_rules_page_and_name_only_real_codes() -> None:
    from copilot_logs.commands.validate import RULES_BY_CODE

    assert "](docs/rules.md)" in README
    validate_page = (PROJECT / "docs" / "validate.md").read_text(encoding="utf-8")
    section = validate_page.split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    assert "](rules.md)" in section
    assert "python -m copilot_logs.render.rules > docs/rules.md" in section
    pages = [README] + [page.read_text() for page in (PROJECT / "docs").glob("*.md")]
    named = set(re.findall(r"\b[ETXSCR][1-6]\d\d\b", "\n".join(pages)))
    assert named and named <= set(RULES_BY_CODE)


def test_every_ledger_row_names_code_that_exists() -> None:
    """docs/development.md's mutation ledger names where each mutation goes (`path` `name`):
    after a module is merged or a function renamed, the row must follow it."""
    ledger = (PROJECT / "docs" / "development.md").read_text()
    missing = []
    for path, name in re.findall(r"^\| [^|]*\| `([\w/]+\.py)` `([\w.]+)`", ledger, re.MULTILINE):
        under = PROJECT / path if path.split("/")[0] in ("tests", "rig", "synth") else None
        file = under or PROJECT / "copilot_logs" / path
        last = name.split(".")[-1]
        if not file.is_file() or not re.search(rf"\b{re.escape(last)}\b", file.read_text()):
            missing.append(f"{path} {name}")
    assert missing == []
