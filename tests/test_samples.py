"""The bundled sample sessions give exactly the figures sample_sessions/README.md promises."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs import derive
from copilot_logs.cli import main

from . import make_samples
from .conftest import SAMPLES

EXPECTED: dict[str, dict[str, Any]] = orjson.loads((SAMPLES / "expected.json").read_bytes())

COUNT_FIELDS = derive.COUNT_FIELDS
SESSION_FIELDS = (
    "llm_calls",
    "user_prompts",
    "autopilot_nudges",
    "tool_calls",
    "subagent_runs",
    "errors",
    "task_complete",
    "status",
    "damaged_lines",
    "mode",
)


def run_json(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = orjson.loads(result.stdout)
    return rows


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home and cache folder for the module fixtures below: they run the CLI before the
    function-scoped ``copilot_home`` of conftest applies, and must not touch ~/.cache."""
    home = tmp_path_factory.mktemp("samples-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COPILOT_HOME", str(home))
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_CACHE_HOME", str(home / "cache"))
        yield home


@pytest.fixture(scope="module")
def counted(module_home: Path) -> dict[str, dict[str, Any]]:
    return {row["session_id"]: row for row in run_json("count", str(SAMPLES))}


@pytest.fixture(scope="module")
def listed(module_home: Path) -> dict[str, dict[str, Any]]:
    return {row["session_id"]: row for row in run_json("sessions", str(SAMPLES))}


def test_module_fixtures_cache_in_their_own_home(
    counted: dict[str, dict[str, Any]], listed: dict[str, dict[str, Any]], module_home: Path
) -> None:
    """The reads behind ``counted`` and ``listed`` were cached under the module's home."""
    cache = module_home / "cache" / "copilot-logs"
    assert counted and listed
    assert cache.is_dir() and any(cache.iterdir())


@pytest.mark.parametrize("session_id", sorted(EXPECTED))
def test_count_matches_expected(session_id: str, counted: dict[str, dict[str, Any]]) -> None:
    expected = EXPECTED[session_id]
    assert {k: counted[session_id][k] for k in COUNT_FIELDS} == {
        k: expected[k] for k in COUNT_FIELDS
    }


@pytest.mark.parametrize("session_id", sorted(EXPECTED))
def test_sessions_matches_expected(session_id: str, listed: dict[str, dict[str, Any]]) -> None:
    expected = EXPECTED[session_id]
    row = listed[session_id]
    assert {k: row[k] for k in SESSION_FIELDS} == {k: expected[k] for k in SESSION_FIELDS}
    assert row["started_at"] == expected["start"]


def test_sessions_are_newest_first(listed: dict[str, dict[str, Any]]) -> None:
    starts = [row["started_at"] for row in listed.values()]
    assert starts == sorted(starts, reverse=True)


def test_sessions_json_fields(listed: dict[str, dict[str, Any]]) -> None:
    required = {
        "session_id",
        "started_at",
        "llm_calls",
        "user_prompts",
        "autopilot_nudges",
        "tool_calls",
        "subagent_runs",
        "task_complete",
        "status",
        "damaged_lines",
    }
    for row in listed.values():
        assert required <= row.keys()


def by_hand(log: Path) -> tuple[dict[str, Any], str]:
    """A log's session.start data and the timestamp of its last line that is a whole event,
    read line by line with the standard json module (a damaged line is passed over)."""
    start: dict[str, Any] = {}
    last = ""
    for line in log.read_bytes().split(b"\n"):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "type" in event and "timestamp" in event:
            start = start or (event["data"] if event["type"] == "session.start" else {})
            last = event["timestamp"]
    return start, last


@pytest.mark.parametrize("session_id", sorted(EXPECTED))
def test_sessions_json_of_each_sample_is_what_its_log_says(
    session_id: str, listed: dict[str, dict[str, Any]]
) -> None:
    """The fields the generator's manifest does not hold, from the log by hand."""
    row, expected = listed[session_id], EXPECTED[session_id]
    start, last = by_hand(SAMPLES / expected["file"])
    context = start["context"]
    assert (row["repository"], row["cwd"], row["branch"]) == (
        context.get("repository"),
        context.get("cwd"),
        context.get("branch"),
    )
    assert row["copilot_version"] == start["copilotVersion"]
    assert (row["started_at"], row["ended_at"]) == (start["startTime"], last)
    duration = datetime.fromisoformat(last) - datetime.fromisoformat(start["startTime"])
    assert row["duration_ms"] == duration // timedelta(milliseconds=1)
    assert (row["open_turns"], row["subagent_calls"]) == (
        expected["open_turns"],
        expected["subagent_calls"],
    )
    # Which of several models is the session's: tests/test_cli_smoke.py (most replies, a tie).
    if expected["models"]:  # else the model the session set: tests/test_cli_smoke.py
        assert row["model"] in expected["models"]
        assert len(expected["models"]) > 1 or row["model"] == expected["models"][0]
    assert Path(row["file"]) == SAMPLES / expected["file"]


def test_each_sample_selected_by_its_first_character() -> None:
    for session_id, expected in EXPECTED.items():
        [row] = run_json("count", "--root", str(SAMPLES), session_id[:2])
        assert row["llm_calls"] == expected["llm_calls"]


@pytest.mark.skipif(shutil.which("grep") is None, reason="grep is not installed")
def test_count_is_exact_where_grep_overcounts() -> None:
    """The session whose tool output holds the text `"type":"assistant.turn_start"`."""
    [session_id] = [k for k, v in EXPECTED.items() if v["scenario"] == "i"]
    path = SAMPLES / EXPECTED[session_id]["file"]
    grep_c = subprocess.run(
        ["grep", "-c", "assistant.turn_start", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    ours = CliRunner().invoke(main, ["count", "--total", str(path)])
    assert int(grep_c.stdout) == EXPECTED[session_id]["grep_c"]
    assert int(ours.stdout) == EXPECTED[session_id]["llm_calls"]
    assert int(grep_c.stdout) > int(ours.stdout)


def test_total_is_one_integer_and_nothing_else() -> None:
    result = CliRunner().invoke(main, ["count", "--total", str(SAMPLES)])
    assert result.stdout == f"{sum(v['llm_calls'] for v in EXPECTED.values())}\n"
    with_subagents = CliRunner().invoke(
        main, ["count", "--total", "--include-subagents", str(SAMPLES)]
    )
    expected = sum(v["llm_calls"] + v["subagent_calls"] for v in EXPECTED.values())
    assert with_subagents.stdout == f"{expected}\n"


def test_damage_is_reported_on_stderr_with_file_and_line() -> None:
    [damaged] = [v for v in EXPECTED.values() if v["damaged_lines"]]
    result = CliRunner().invoke(main, ["count", "--total", str(SAMPLES / damaged["file"])])
    assert result.exit_code == 0
    assert result.stdout == f"{damaged['llm_calls']}\n"
    reported = set(
        re.findall(rf"^warning: {re.escape(str(SAMPLES))}/\S+:(\d+): ", result.stderr, re.M)
    )
    assert len(reported) == damaged["damaged_lines"]


def test_sample_files_are_what_the_builder_writes(tmp_path: Path) -> None:
    """sample_sessions/ is generated by tests/make_samples.py, never edited by hand."""
    assert make_samples.main([str(tmp_path)]) == 0
    for expected in EXPECTED.values():
        assert (tmp_path / expected["file"]).read_bytes() == (
            SAMPLES / expected["file"]
        ).read_bytes()
