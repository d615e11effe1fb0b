from __future__ import annotations

import orjson
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


def test_model_tie_is_broken_the_same_way_every_time() -> None:
    from .conftest import SAMPLES

    runs = {
        CliRunner()
        .invoke(main, ["sessions", "f6", "--root", str(SAMPLES), "--format", "json"])
        .stdout
        for _ in range(4)
    }
    assert len(runs) == 1
