"""Hostile input round three, the session model's part (issue 34, items 2, 3, 11 and 13): a clock
ahead never keeps a session running, a number that is no figure never becomes one, a sub-agent
that lost its start is no second main agent, and rows come in the same order whatever the store
holds. Every expectation is written from the hand-made log, not read back from the code."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from copilot_logs.cli import main
from synth import SessionBuilder

from .test_rules import bash


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    return result.exit_code, (orjson.loads(result.stdout) if result.stdout.strip() else None)


def write(path: Path, b: SessionBuilder) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b.to_bytes())
    return path


def with_line(b: SessionBuilder, event: dict[str, Any]) -> bytes:
    """The builder's log with one more raw event line (a payload no builder would write)."""
    return b.to_bytes() + orjson.dumps(event) + b"\n"


# --- item 2: a clock ahead -------------------------------------------------------------------


def killed_autopilot_run(start: datetime) -> SessionBuilder:
    """An autopilot run killed inside a tool: an open turn, no shutdown."""
    b = SessionBuilder(start=start)
    b.user_message("Do it.", agent_mode="autopilot")
    b.turn("run", [bash("sleep 30", never_completes=True)], end=False)
    return b


def test_a_killed_run_whose_clock_is_days_ahead_is_not_running(tmp_path: Path) -> None:
    ahead = datetime.now(UTC) + timedelta(days=3)
    log = write(tmp_path / "s" / "events.jsonl", killed_autopilot_run(ahead))
    code, rows = run("audit", str(log))
    # The last event is three days ahead of now: not within running_within (10 minutes) of
    # it either way, so the open turn is a run that was cut off, and the default gate fails.
    assert [row["verdict"] for row in rows] == ["interrupted"]
    assert code == 1


def test_a_run_a_few_minutes_ahead_is_still_running(tmp_path: Path) -> None:
    """A machine whose clock runs a little ahead of ours writes a log that is running now."""
    ahead = datetime.now(UTC) + timedelta(minutes=3)
    log = write(tmp_path / "s" / "events.jsonl", killed_autopilot_run(ahead))
    code, rows = run("audit", str(log))
    assert ([row["verdict"] for row in rows], code) == (["running"], 0)


def test_doctor_does_not_call_a_log_days_ahead_running(tmp_path: Path) -> None:
    ahead = datetime.now(UTC) + timedelta(days=3)
    log = write(tmp_path / "s" / "events.jsonl", killed_autopilot_run(ahead))
    code, report = run("doctor", "--fail-on", "running", str(log))
    assert [row["verdict"] for row in report] != ["running"]
    assert code == 0


# --- item 3: numbers that are no figures -----------------------------------------------------


def record(**usage: Any) -> dict[str, Any]:
    return {
        "type": "session.usage_record",
        "id": f"rec-{len(json.dumps(usage))}-{sorted(usage)[0]}",
        "timestamp": "2026-08-05T07:50:00.000Z",
        "data": {"usage": {"model": "gpt-5-mini", **usage}},
    }


def one_call() -> SessionBuilder:
    b = SessionBuilder(copilot_version="1.0.102")
    b.user_message("hi")
    b.turn("ok")
    return b


def test_credits_written_as_nan_or_infinity_are_unknown(tmp_path: Path) -> None:
    for text in ("NaN", "Infinity", "-Infinity"):
        data = with_line(one_call(), record(copilotUsage={"totalNanoAiu": text}, inputTokens=10))
        log = tmp_path / text / "events.jsonl"
        log.parent.mkdir()
        log.write_bytes(data)
        code, report = run("usage", "--by", "call", str(log))
        assert code == 0
        billed = [row["ai_credits"] for row in report["rows"]]
        # The call's record gives no credits: unknown, never nan or inf.
        assert billed == [None], (text, billed)
        assert report["totals"]["ai_credits"] is None


def test_a_shutdown_s_credits_written_as_a_string_are_unknown(tmp_path: Path) -> None:
    b = one_call()
    b.shutdown()
    lines = b.to_bytes().splitlines()
    shutdown = orjson.loads(lines[-1])
    shutdown["data"]["totalNanoAiu"] = "Infinity"
    for model in shutdown["data"]["modelMetrics"].values():
        model.pop("totalNanoAiu", None)
    log = tmp_path / "s" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"\n".join([*lines[:-1], orjson.dumps(shutdown)]) + b"\n")
    code, report = run("usage", str(log))
    (row,) = report["rows"]
    assert (code, row["ai_credits"], row["nano_aiu"]) == (0, None, None)


def test_token_sums_never_wrap_around(tmp_path: Path) -> None:
    """Two records of 2^63-1 input tokens summed as 64-bit integers give -2: a count no CLI
    writes is no figure."""
    largest = (1 << 63) - 1
    b = one_call()
    b.turn("again")
    data = b.to_bytes()
    for index in range(2):
        event = record(inputTokens=largest, outputTokens=5)
        event["id"] = f"rec-{index}"
        data += orjson.dumps(event) + b"\n"
    log = tmp_path / "s" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(data)
    code, report = run("usage", "--by", "call", str(log))
    assert code == 0
    inputs = [row["input_tokens"] for row in report["rows"]]
    assert all(value is None or value >= 0 for value in inputs), inputs
    assert report["totals"]["input_tokens"] in (None, 0)


def test_sessions_of_absurd_token_counts_never_give_a_negative_total(tmp_path: Path) -> None:
    largest = (1 << 63) - 1
    for name in ("a", "b"):
        b = one_call()
        b.shutdown()
        lines = b.to_bytes().splitlines()
        shutdown = orjson.loads(lines[-1])
        for model in shutdown["data"]["modelMetrics"].values():
            model["usage"]["inputTokens"] = largest
        log = tmp_path / name / "events.jsonl"
        log.parent.mkdir()
        log.write_bytes(b"\n".join([*lines[:-1], orjson.dumps(shutdown)]) + b"\n")
    code, report = run("usage", "--by", "day", str(tmp_path))
    assert code == 0
    assert [row["input_tokens"] for row in report["rows"]] == [None]
    assert report["totals"]["input_tokens"] is None


# --- item 11: a sub-agent whose start was lost ------------------------------------------------


def test_a_sub_agent_without_its_start_line_is_no_second_main_row(tmp_path: Path) -> None:
    b = SessionBuilder(copilot_version="1.0.78")
    b.user_message("Delegate.")
    b.turn("Delegating.", [bash("true")])
    kept = []
    for line in b.to_bytes().splitlines():
        kept.append(line)
    # A sub-agent's message (1.0.3x-1.0.80 mark it with the envelope agentId) with no
    # subagent.started before it: its start line was lost.
    kept.append(
        orjson.dumps(
            {
                "type": "assistant.message",
                "id": "sub-1",
                "timestamp": "2026-08-05T07:50:00.000Z",
                "agentId": "call_lost_task",
                "data": {"messageId": "m-sub-1", "content": "done", "outputTokens": 7},
            }
        )
    )
    log = tmp_path / "s" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"\n".join(kept) + b"\n")
    code, report = run("usage", "--by", "agent", str(log))
    agents = [(row["agent"], row["agent_id"]) for row in report["rows"]]
    assert code == 0
    assert agents == [("main", None), ("sub-agent call_lost_task", "call_lost_task")]


# --- item 13: rows in the same order whatever the store holds ---------------------------------


def test_call_rows_keep_their_order_after_one_log_changes(tmp_path: Path) -> None:
    logs = []
    for index, name in enumerate(("a", "b", "c")):
        b = SessionBuilder(seed=index, start=f"2026-08-0{index + 3}T07:49:01.551Z")
        b.user_message(f"prompt {name}")
        b.turn("ok")
        logs.append(write(tmp_path / name / "events.jsonl", b))
    cold = run("usage", "--by", "call", "--no-cache", str(tmp_path))[1]["rows"]
    run("usage", "--by", "call", str(tmp_path))  # fills the store
    with logs[0].open("ab") as grown:  # the first log grows: the store reads it apart
        grown.write(
            orjson.dumps(
                {
                    "type": "session.info",
                    "id": "late",
                    "timestamp": "2026-08-03T08:00:00.000Z",
                    "data": {"infoType": "note", "message": "later"},
                }
            )
            + b"\n"
        )
    warm = run("usage", "--by", "call", str(tmp_path))[1]["rows"]
    order = [(row["file"], row["line"]) for row in warm]
    assert order == [(row["file"], row["line"]) for row in cold]
    assert order == sorted(order)
