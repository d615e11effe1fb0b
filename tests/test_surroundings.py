"""What surrounds the logs (issue 25): empty option values, dates and durations at the edges of
their range, time zones polars refuses, timestamps no datetime holds, CSV formula cells.

The output streams, the environment and the working directory, which are about the process,
are in tests/test_process_surroundings.py (the CLI run as a subprocess).
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from copilot_logs.cli.options import Command
from tests.conftest import SAMPLES


def run(*args: str | Path, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args], input=input)


def _commands() -> list[tuple[list[str], click.Command]]:
    """Every command, with the words that call it (``cache info``)."""
    ctx = click.Context(main)
    found = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += [([name, sub], command.commands[sub]) for sub in command.commands]
        else:
            found.append(([name], command))
    return found


def _value_params() -> list[tuple[list[str], click.Parameter]]:
    """Every option that takes a value, and every argument, of every command."""
    return [
        (words, param)
        for words, command in _commands()
        for param in command.params
        if not (isinstance(param, click.Option) and (param.is_flag or param.count))
    ]


def test_every_command_refuses_empty_values() -> None:
    assert all(isinstance(command, Command) for _, command in _commands())


@pytest.mark.parametrize(
    ("words", "param"),
    _value_params(),
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v.name),
)
def test_an_empty_value_is_a_usage_error(
    words: list[str], param: click.Parameter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--select ''`, `--since ''`, `''` as a path or an argument, for every option and
    argument of every command: exit 2 with one Error line, never a silent "nothing" (a gate
    switched off, the current folder read)."""
    monkeypatch.chdir(tmp_path)  # were '' the current folder, nothing is written in the project
    out = [] if words != ["export"] or param.name == "out" else [tmp_path / "out"]
    if words == ["watch"]:  # were the value taken, watch would end (124), not follow for ever
        out = ["--until-done", "--timeout", "1s"]
    if isinstance(param, click.Option):
        args = [*words, *out, param.opts[0], ""]
    else:
        args = [*words, *out, ""]
    result = run(*args)
    assert result.exit_code == 2, (args, result.output)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "--select", ",", SAMPLES],
        ["validate", "--select", " ", SAMPLES],
        ["validate", "--ignore", " , ", SAMPLES],
        ["audit", "--fail-on", ",", SAMPLES],
        ["audit", "--fail-on", "", SAMPLES],
        ["count", "--total", "--since", "", SAMPLES],
        ["count", "--total", "--until=", SAMPLES],
        ["count", "--total", SAMPLES, ""],
        ["export", ""],
        ["count", "--total", "--root", ""],
    ],
)
def test_a_value_that_names_nothing_is_a_usage_error(
    args: list[str | Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "empty" in result.stderr
    assert "All checks passed" not in result.output and "OK" not in result.output


def test_a_path_may_be_named_by_blanks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only '' is empty for a path: a file named " " is a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / " ").write_bytes(
        (SAMPLES / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl").read_bytes()
    )
    result = run("count", "--total", "./ ")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "4"
