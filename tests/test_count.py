"""count: exact figures for generated sessions, regrouping, and the CLI's shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from copilot_logs.cli import main
from copilot_logs.commands import count
from copilot_logs.ingest.reader import read_bytes
from synth import SessionBuilder, ToolCall, bash, task, view

from .conftest import SAMPLES

TURN = st.fixed_dictionaries(
    {
        "tools": st.integers(min_value=0, max_value=3),
        "failed": st.booleans(),
        "parallel": st.booleans(),
        "subagent_calls": st.integers(min_value=0, max_value=2),
    }
)
INTERACTION = st.fixed_dictionaries(
    {"nudge": st.booleans(), "turns": st.lists(TURN, min_size=1, max_size=4)}
)


def build(interactions: list[dict[str, Any]], seed: int) -> tuple[bytes, dict[str, int]]:
    builder = SessionBuilder(seed=seed)
    expected = dict.fromkeys(count.derive.COUNT_FIELDS, 0)
    for index, interaction in enumerate(interactions):
        if interaction["nudge"] and index > 0:
            builder.nudge()
            expected["autopilot_nudges"] += 1
        else:
            builder.user_message(f"prompt {index}")
            expected["user_prompts"] += 1
        expected["interactions"] += 1
        for turn in interaction["turns"]:
            tools: list[ToolCall] = [
                bash(f"echo {n}", "ok", success=not (turn["failed"] and n == 0))
                if n
                else view("a.py", "x", success=not turn["failed"])
                for n in range(turn["tools"])
            ]
            if turn["subagent_calls"]:
                tools.append(task("sub", llm_calls=turn["subagent_calls"], tool_calls=1))
                expected["subagent_calls"] += turn["subagent_calls"]
                expected["subagent_tool_calls"] += 1
            builder.turn("working", tools, parallel=turn["parallel"])
            expected["llm_calls"] += 1
            expected["completed_turns"] += 1
            expected["tool_calls"] += len(tools)
            expected["failed_tool_calls"] += sum(not t.ok for t in tools)
    builder.shutdown()
    return builder.to_bytes(), expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interactions=st.lists(INTERACTION, min_size=1, max_size=4), seed=st.integers(0, 1000))
def test_generated_sessions_count_exactly(interactions: list[dict[str, Any]], seed: int) -> None:
    data, expected = build(interactions, seed)
    table = count.count(read_bytes(data, "s.jsonl"))
    assert table.height == 1
    figures = {name: table[name][0] for name in count.derive.COUNT_FIELDS}
    assert figures == expected
    assert figures["completed_turns"] == figures["llm_calls"]


def test_open_turn_is_counted_and_marked_open() -> None:
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("reading", [view("a.py", "x")])
    builder.turn("still reading", [view("b.py", "y", never_completes=True)], end=False)
    table = count.count(read_bytes(builder.to_bytes()))
    assert table.select("llm_calls", "completed_turns", "open_turns").row(0) == (2, 1, 1)


def test_duplicated_turn_start_counted_once() -> None:
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("done")
    lines = builder.lines()
    start = next(i for i, line in enumerate(lines) if b'"assistant.turn_start"' in line)
    data = b"\n".join([*lines[: start + 1], lines[start], *lines[start + 1 :]]) + b"\n"
    result = read_bytes(data)
    assert count.count(result)["llm_calls"][0] == 1
    assert result.diagnostics["kind"].to_list() == ["duplicate-id"]


def sample_rows(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["count", "--root", str(SAMPLES), *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = orjson.loads(result.stdout)
    return rows


def test_by_day_follows_the_time_zone() -> None:
    """Two sessions 37 minutes apart on either side of midnight UTC."""
    evening, night = "07f6c938", "18e7da49"
    utc = {
        r["day"]: r["llm_calls"] for r in sample_rows("--by", "day", "--tz", "UTC", evening, night)
    }
    new_york = {
        r["day"]: r["llm_calls"]
        for r in sample_rows("--by", "day", "--tz", "America/New_York", evening, night)
    }
    assert utc == {"2026-08-06": 1, "2026-08-07": 3}
    assert new_york == {"2026-08-06": 4}


def test_regroupings_keep_the_totals() -> None:
    per_session = sample_rows()
    totals = {k: sum(r[k] for r in per_session) for k in count.derive.COUNT_FIELDS}
    for by in ("interaction", "model", "day", "repository"):
        rows = sample_rows("--by", by, "--tz", "UTC")
        assert {k: sum(r[k] for r in rows) for k in count.derive.COUNT_FIELDS} == totals, by


def test_by_model_uses_the_turns_model() -> None:
    rows = {r["model"]: r["llm_calls"] for r in sample_rows("--by", "model")}
    assert "unknown" not in rows
    assert sum(rows.values()) == sum(r["llm_calls"] for r in sample_rows())


def test_by_interaction_keys() -> None:
    rows = sample_rows("--by", "interaction", "c3d")
    assert [(r["interaction_index"], r["user_prompts"], r["autopilot_nudges"]) for r in rows] == [
        (1, 1, 0),
        (2, 0, 1),
    ]


def test_ndjson_and_csv_carry_the_same_figures() -> None:
    runner = CliRunner()
    ndjson = runner.invoke(main, ["count", str(SAMPLES), "--format", "ndjson"]).stdout
    csv = runner.invoke(main, ["count", str(SAMPLES), "--format", "csv"]).stdout
    from_ndjson = pl.DataFrame([orjson.loads(line) for line in ndjson.splitlines()])
    from_csv = pl.read_csv(csv.encode())
    assert_frame_equal(from_ndjson, from_csv, check_dtypes=False)


def test_table_ends_with_a_totals_row() -> None:
    # Wide enough for every column: no line under the table names hidden ones.
    result = CliRunner().invoke(main, ["count", str(SAMPLES)], env={"COLUMNS": "300"})
    last = result.stdout.strip().splitlines()[-1].split()
    assert last[0] == "total"
    assert int(last[1]) == sum(r["llm_calls"] for r in sample_rows())


def test_bad_time_zone_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["count", str(SAMPLES), "--tz", "Mars/Olympus"])
    assert result.exit_code == 2
    assert "unknown time zone" in result.stderr


def test_empty_selection_total_is_zero(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["count", "--total", "--root", str(tmp_path)])
    assert result.exit_code == 0
    assert result.stdout == "0\n"


def test_two_copies_of_a_session_are_two_rows(tmp_path: Path) -> None:
    data = (SAMPLES / "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071" / "events.jsonl").read_bytes()
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "events.jsonl").write_bytes(data)
    runner = CliRunner()
    args = [str(tmp_path / "x"), str(tmp_path / "y")]
    rows = orjson.loads(runner.invoke(main, ["count", *args, "--format", "json"]).stdout)
    assert [row["llm_calls"] for row in rows] == [5, 5]
    assert {row["file"] for row in rows} == {str(tmp_path / n / "events.jsonl") for n in "xy"}
    assert runner.invoke(main, ["count", "--total", *args]).stdout == "10\n"


def subagent_lines(chunks: list[tuple[str | None, int | None]]) -> bytes:
    """A session whose one sub-agent writes messages with these (messageId, chunkIndex)."""
    builder = SessionBuilder()
    builder.user_message("go")
    record = builder.turn("delegating", [task("sub", llm_calls=1)])
    agent = record.tool_call_ids[0]
    for message_id, chunk in chunks:
        data: dict[str, Any] = {"content": "part"}
        if message_id is not None:
            data["messageId"] = message_id
        if chunk is not None:
            data["chunkIndex"] = chunk
        builder.event("assistant.message", data, agent_id=agent)
    builder.turn("done")
    return builder.to_bytes()


def test_subagent_calls_are_one_per_message_id(tmp_path: Path) -> None:
    cases = {
        # (messageId, chunkIndex) of the extra sub-agent messages -> extra calls
        (("m1", 0), ("m1", 1)): 1,  # two chunks of one call
        (("m2", 1),): 1,  # chunk 0 lost: still one call
        ((None, 0), (None, 1)): 1,  # no messageId: later chunks skipped
        (("m3", None), ("m4", None)): 2,
    }
    for chunks, extra in cases.items():
        data = subagent_lines(list(chunks))
        path = tmp_path / "events.jsonl"
        path.write_bytes(data)
        frame_count = count.count(read_bytes(data))["subagent_calls"][0]
        total = CliRunner().invoke(
            main, ["count", "--total", "--include-subagents", "--no-cache", str(path)]
        )
        assert frame_count == 1 + extra, chunks
        assert int(total.stdout) == frame_count + 2, chunks  # plus the 2 main-agent turns
