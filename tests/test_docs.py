"""The docs check themselves: every command has help with examples, the README lists exactly
the CLI's commands, and the reader's columns are the schema's."""

from __future__ import annotations

import re

import click
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.reader import ENVELOPE_FIELDS, PAYLOAD_FIELDS
from copilot_logs.schema import EVENTS_SCHEMA

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
