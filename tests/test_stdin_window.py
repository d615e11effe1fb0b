"""--since / --until apply to standard input too, by the session's start (known only once the
stream is read), while files on disk are still chosen before they are opened."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs import api
from copilot_logs.cli import main

from .conftest import SAMPLES

SESSION = "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f"  # started 2026-08-03T09:12:40.118Z
DATA = (SAMPLES / SESSION / "events.jsonl").read_bytes()
LLM_CALLS = sum(
    1
    for event in map(orjson.loads, DATA.splitlines())
    if event["type"] == "assistant.turn_start" and "agentId" not in event
)

WINDOWS = [
    (["--since", "2026-08-03T09:00:00Z"], True),
    (["--since", "2026-08-03T10:00:00Z"], False),
    (["--until", "2026-08-03T10:00:00Z"], True),
    (["--until", "2026-08-03T09:00:00Z"], False),
    (["--since", "2026-08-03T09:12:40.118Z", "--until", "2026-08-03T09:12:40.119Z"], True),
]


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args), input=DATA)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize(("window", "kept"), WINDOWS)
def test_sessions_on_stdin_are_chosen_by_their_start(window: list[str], kept: bool) -> None:
    listed = orjson.loads(run("sessions", "-", *window, "--format", "json").stdout)
    assert [row["session_id"] for row in listed] == ([SESSION] if kept else [])
    counted = orjson.loads(run("count", "-", *window, "--format", "json").stdout)
    assert [row["llm_calls"] for row in counted] == ([LLM_CALLS] if kept else [])


@pytest.mark.parametrize(("window", "kept"), WINDOWS)
def test_count_total_on_stdin_honours_the_window(window: list[str], kept: bool) -> None:
    total = run("count", "--total", "-", *window).stdout
    assert int(total) == (LLM_CALLS if kept else 0)


def test_validate_on_stdin_outside_the_window_checks_nothing() -> None:
    damaged = DATA + b'{"type":"cut'
    result = CliRunner().invoke(
        main, ["validate", "-", "--since", "2026-08-04", "--format", "json"], input=damaged
    )
    assert orjson.loads(result.stdout)["findings"] == []
    inside = CliRunner().invoke(
        main, ["validate", "-", "--since", "2026-08-02", "--format", "json"], input=damaged
    )
    assert [f["code"] for f in orjson.loads(inside.stdout)["findings"]] == ["E110"]


def test_the_api_applies_the_window_to_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DATA)))
    assert api.read("-", since="2026-08-03T10:00:00Z").events.is_empty()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DATA)))
    assert api.read("-", since="2026-08-03T09:00:00Z").events.height == len(DATA.splitlines())


def test_damage_of_a_session_outside_the_window_is_not_reported() -> None:
    damaged = DATA + b'{"type":"cut'
    outside = CliRunner().invoke(main, ["sessions", "-", "--since", "2026-08-04"], input=damaged)
    assert (outside.exit_code, outside.stderr) == (0, "")
    inside = CliRunner().invoke(main, ["sessions", "-", "--since", "2026-08-02"], input=damaged)
    assert "<stdin>:27: cut-line:" in inside.stderr
