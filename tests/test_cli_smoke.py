from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main


def test_version_and_help() -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["--version"]).output.startswith("copilot-logs, version")
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "sessions" in result.output


def test_empty_root_says_so_and_exits_zero(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(main, ["sessions", "--root", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0
    assert "No sessions found" in result.stderr
    assert result.stdout == "[]\n"  # still valid JSON for jq


def test_count_real_samples(real_samples) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(main, ["count", str(real_samples), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["session_id"][:8]: row for row in orjson.loads(result.stdout)}
    assert rows["7a2f9870"]["llm_calls"] == 6
    assert rows["7a2f9870"]["autopilot_nudges"] == 2
    assert rows["fcf48e4f"]["subagent_calls"] == 1
    assert rows["8eae0f15"]["llm_calls"] == 1


def test_a_file_with_no_event_is_named_and_exits_3(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "notes.jsonl"
    path.write_text('{"a": 1}\n')
    result = CliRunner().invoke(main, ["sessions", str(path), "--format", "json"])
    assert result.exit_code == 3
    assert f"{path}:1: not-an-event" in result.stderr
    assert f"{path}:0: no-event: no event could be read from the file" in result.stderr
    assert orjson.loads(result.stdout)[0]["status"] == "unreadable"


def test_validate_fails_a_file_holding_no_event(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\x00" * 4096)
    result = CliRunner().invoke(main, ["validate", str(path), "--format", "json"])
    assert result.exit_code == 3  # UNREADABLE: the file gave nothing to check
    codes = [f["code"] for f in orjson.loads(result.stdout)["findings"]]
    assert "E118" in codes


def test_stdin_named_twice_is_read_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import SAMPLES

    data = (SAMPLES / "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071" / "events.jsonl").read_bytes()
    result = CliRunner().invoke(main, ["count", "-", "-", "--format", "json"], input=data)
    assert result.exit_code == 0
    assert [row["llm_calls"] for row in orjson.loads(result.stdout)] == [5]
    assert result.stderr == ""


NO_CACHE_JSON = ("--no-cache", "--format", "json")


def _listed_model(path: Path, process: bool) -> str:
    """The model ``sessions`` lists, with no cache (a results cache would answer whatever the
    tie-break does): in this process, or in a fresh one (polars hashes with a new seed in
    each, so an order that hangs on a hash shows there)."""
    args = ["sessions", str(path), *NO_CACHE_JSON]
    if process:
        out = subprocess.run(
            [sys.executable, "-m", "copilot_logs", *args], capture_output=True, check=True
        ).stdout
    else:
        out = CliRunner().invoke(main, args).stdout_bytes
    (row,) = orjson.loads(out)
    return str(row["model"])


def _tie_break_by_hand(path: Path) -> str:
    """The README's rule, read off the raw lines: the most named model of the main agent's
    replies; on a tie, the model of the latest reply among the tied ones."""
    models = [
        event["data"]["model"]
        for event in map(orjson.loads, path.read_bytes().splitlines())
        if event["type"] == "assistant.message" and "agentId" not in event
    ]
    counts = Counter(models)
    most = max(counts.values())
    return [m for m in models if counts[m] == most][-1]


@pytest.mark.parametrize(
    "process", [False, pytest.param(True, marks=pytest.mark.process)], ids=["here", "process"]
)
def test_model_tie_is_broken_by_the_latest_reply(tmp_path: Path, process: bool) -> None:
    from synth import SessionBuilder

    from .conftest import SAMPLES

    tied = SAMPLES / "f6a5b827-9a02-4b13-94c5-5f60718293a4" / "events.jsonl"
    assert _listed_model(tied, process) == _tie_break_by_hand(tied)
    # The sample's later model is also first in the alphabet: a log where it is last in the
    # alphabet tells the documented rule from an alphabetical one.
    b = SessionBuilder(model="claude-sonnet-4.5", seed=2)
    b.user_message("a")
    b.turn("x")
    b.model_change("gpt-5-mini")
    b.user_message("b")
    b.turn("y")
    b.shutdown()
    path = b.write(tmp_path / "tie.jsonl")
    assert _tie_break_by_hand(path) == "gpt-5-mini"
    assert _listed_model(path, process) == "gpt-5-mini"


def test_two_problems_of_one_line_are_reported_in_the_same_order_whatever_the_batches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A cut last line padded with NULs has two problems on one line: the warnings come in the
    order of their kind, whichever order the batches (or Spark's executors) gave them."""
    import polars as pl

    from copilot_logs.ingest.schema import empty_diagnostics
    from copilot_logs.render.formats import report_damage

    rows = [
        ("s", "f.jsonl", 42, 10, "nul-bytes", "64 NUL bytes", None, None, None),
        ("s", "f.jsonl", 42, 10, "cut-line", "the last line is cut off", None, None, None),
        ("s", "f.jsonl", 7, 3, "crlf", "a CR before the newline", None, None, None),
    ]
    schema = empty_diagnostics().schema
    shown = []
    for order in (rows, rows[::-1]):
        report_damage(pl.DataFrame(order, schema=schema, orient="row"))
        shown.append(capsys.readouterr().err)
    assert shown[0] == shown[1]
    assert [line.split(": ")[2] for line in shown[0].splitlines()] == [
        "crlf",
        "cut-line",
        "nul-bytes",
    ]
