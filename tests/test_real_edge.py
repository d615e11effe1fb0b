"""The real edge-case logs of ``../shared/real-samples-edge/`` read as SOURCES.md says they must.

These logs are not all clean (unlike ``../shared/real-samples/``): each holds something a careful
tool must report truthfully. Every test skips cleanly when the folder is absent (a user's clone
has none); the same behaviours are tested on synthetic logs in ``test_session_semantics.py``.
The expected figures come from reading the raw lines here with ``json``, not from the code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from tests.conftest import NO_EDGE_SAMPLES, NO_REAL_SAMPLES, PROJECT

EDGE = PROJECT.parent / "shared" / "real-samples-edge"
PERMISSION = "irrlicht-1.0.77-tool-gate-permission-prompt.events.jsonl"
REWIND = "irrlicht-1.0.78-checkpoint-rewind.events.jsonl"
QUEUED = "irrlicht-1.0.77-mid-turn-message-queued.events.jsonl"
NUDGE_LIMIT = "irrlicht-1.0.78-autonomous-loop-iteration-limit.events.jsonl"
MODEL_SWITCH = "irrlicht-1.0.78-model-switch-midsession.events.jsonl"
TWO_SESSIONS = "irrlicht-1.0.78-multiple-sessions-same-cwd.events.jsonl"


@pytest.fixture
def edge() -> Path:
    """../shared/real-samples-edge, skipped cleanly when absent."""
    if not EDGE.is_dir():
        pytest.skip(NO_EDGE_SAMPLES)
    return EDGE


def events_of(path: Path) -> list[dict[str, Any]]:
    """Every line of a (clean) log, parsed by the standard library."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def sessions_of(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The events split at each session.start whose sessionId differs from the one before."""
    split: dict[str, list[dict[str, Any]]] = {}
    current = None
    for event in events:
        if event["type"] == "session.start":
            current = event["data"]["sessionId"]
        assert current is not None
        split.setdefault(current, []).append(event)
    return split


def cli(*args: str, stdin: bytes | None = None) -> Any:
    result = CliRunner().invoke(main, [*args, "--format", "json"], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


# --- two sessions in one file ------------------------------------------------------------------


def test_two_sessions_in_one_file_are_two_rows_everywhere(edge: Path) -> None:
    path = edge / TWO_SESSIONS
    truth = sessions_of(events_of(path))
    assert len(truth) == 2
    turns = {
        sid: sum(e["type"] == "assistant.turn_start" for e in evs) for sid, evs in truth.items()
    }
    prompts = {sid: sum(e["type"] == "user.message" for e in evs) for sid, evs in truth.items()}

    sessions = cli("sessions", str(path))
    assert {row["session_id"]: row["llm_calls"] for row in sessions} == turns
    assert {row["session_id"]: row["user_prompts"] for row in sessions} == prompts
    assert {row["status"] for row in sessions} == {"ended"}

    counted = cli("count", str(path))
    assert {row["session_id"]: row["llm_calls"] for row in counted} == turns

    timeline = cli("timeline", str(path))
    assert {s["session_id"]: s["llm_calls"] for s in timeline} == turns
    assert {s["session_id"]: len(s["interactions"]) for s in timeline} == prompts

    audited = cli("audit", str(path), "--require-task-complete")
    assert sorted(row["session_id"] for row in audited) == sorted(truth)


def test_usage_takes_each_sessions_own_shutdown(edge: Path) -> None:
    path = edge / TWO_SESSIONS
    truth = sessions_of(events_of(path))
    requests = {}
    for sid, evs in truth.items():
        (shutdown,) = [e for e in evs if e["type"] == "session.shutdown"]
        metrics = shutdown["data"]["modelMetrics"]
        requests[sid] = sum(m["requests"]["count"] for m in metrics.values())
    assert len(set(requests.values())) == 2  # the two shutdowns differ: a merge would show
    report = cli("usage", str(path))
    assert {row["session_id"]: row["requests"] for row in report["rows"]} == requests
    assert {row["session_id"]: row["accounting"] for row in report["rows"]} == dict.fromkeys(
        truth, "single"
    )
    assert report["totals"]["requests"] == sum(requests.values())


def test_two_logs_on_stdin_are_two_sessions(edge: Path) -> None:
    first, second = edge / PERMISSION, edge / REWIND
    stream = first.read_bytes() + second.read_bytes()
    expected = {}
    for path in (first, second):
        evs = events_of(path)
        (shutdown,) = [e for e in evs if e["type"] == "session.shutdown"]
        metrics = shutdown["data"]["modelMetrics"]
        expected[evs[0]["data"]["sessionId"]] = sum(
            m["requests"]["count"] for m in metrics.values()
        )
    report = cli("usage", "-", stdin=stream)
    assert {row["session_id"]: row["requests"] for row in report["rows"]} == expected


def test_validate_checks_each_session_as_its_own_log(edge: Path) -> None:
    path = edge / TWO_SESSIONS
    evs = events_of(path)
    starts = [n for n, e in enumerate(evs, start=1) if e["type"] == "session.start"]
    # The second session began before the first ended: a merged read calls that an error.
    assert evs[starts[1] - 1]["timestamp"] < evs[starts[1] - 2]["timestamp"]
    report = cli("validate", str(path), "--strict")
    codes = [(f["code"], f["line"]) for f in report["findings"]]
    assert codes == [("R603", starts[1])]
    assert report["summary"]["failed"] is False
    assert report["summary"]["sessions"] == 2
    assert report["summary"]["files"] == 1


# --- the user quit at a permission prompt -------------------------------------------------------


def test_quitting_at_a_permission_prompt_is_not_a_cut_off_log(edge: Path) -> None:
    path = edge / PERMISSION
    evs = events_of(path)
    kinds = [e["type"] for e in evs]
    assert kinds[-2:] == ["permission.requested", "session.shutdown"]
    assert evs[-1]["data"]["shutdownType"] == "routine"
    turn_line = kinds.index("assistant.turn_start") + 1
    tool_line = kinds.index("tool.execution_start") + 1
    assert "assistant.turn_end" not in kinds and "tool.execution_complete" not in kinds

    report = cli("validate", str(path), "--strict")
    assert sorted((f["code"], f["line"], f["severity"]) for f in report["findings"]) == [
        ("T205", turn_line, "info"),
        ("X307", tool_line, "info"),
    ]
    assert report["summary"]["failed"] is False
    (row,) = cli("sessions", str(path))
    assert (row["status"], row["open_turns"]) == ("ended", 1)
    (audited,) = cli("audit", str(path), "--require-task-complete", "--running-within", "0")
    assert audited["verdict"] == "user-quit"
    (session,) = cli("timeline", str(path))
    ((turn,),) = [i["turns"] for i in session["interactions"]]
    assert turn["open_at_shutdown"] is True
    assert [t["open_at_shutdown"] for t in turn["tools"]] == [True]


def test_the_clean_real_samples_stay_clean_under_strict(edge: Path) -> None:
    clean = PROJECT.parent / "shared" / "real-samples"
    if not clean.is_dir():
        pytest.skip(NO_REAL_SAMPLES)
    report = cli("validate", str(clean), "--strict")
    assert report["findings"] == []
    assert report["summary"]["files"] == 3


# --- a message queued while a turn runs ----------------------------------------------------------


def test_a_queued_message_joins_its_interaction(edge: Path) -> None:
    path = edge / QUEUED
    messages = [e for e in events_of(path) if e["type"] == "user.message"]
    assert len(messages) == 2
    assert messages[0]["data"]["interactionId"] == messages[1]["data"]["interactionId"]
    queued_text = messages[1]["data"]["content"]

    (counted,) = cli("count", str(path))
    assert (counted["interactions"], counted["user_prompts"]) == (1, 2)
    (session,) = cli("timeline", str(path))
    (interaction,) = session["interactions"]
    assert interaction["text"] == messages[0]["data"]["content"]
    shown = [
        e["text"]
        for turn in interaction["turns"]
        for e in turn["events"]
        if e["type"] == "user.message"
    ]
    assert shown == [f"queued message: {queued_text}"]
    (audited,) = cli("audit", str(path), "--require-task-complete")
    assert audited["user_prompts"] == 2


# --- rewind, model switch, nudge cap -------------------------------------------------------------


def test_usage_says_the_rewind_is_why_requests_and_turns_differ(edge: Path) -> None:
    path = edge / REWIND
    evs = events_of(path)
    assert any(e["type"] == "session.info" and e["data"].get("infoType") == "rewind" for e in evs)
    (shutdown,) = [e for e in evs if e["type"] == "session.shutdown"]
    requests = sum(m["requests"]["count"] for m in shutdown["data"]["modelMetrics"].values())
    turns = sum(e["type"] == "assistant.turn_start" for e in evs)
    assert (requests, turns) == (1, 2)
    (row,) = cli("usage", str(path))["rows"]
    assert (row["requests"], row["llm_calls"], row["reconciliation"]) == (1, 2, "rewound")


def test_model_switch_log_figures_per_model(edge: Path) -> None:
    """The log's only model_change picks ``auto`` before the first prompt; every reply and the
    shutdown name one model, so the per-model figures have one row, exact."""
    path = edge / MODEL_SWITCH
    evs = events_of(path)
    replies = [e["data"]["model"] for e in evs if e["type"] == "assistant.message"]
    (shutdown,) = [e for e in evs if e["type"] == "session.shutdown"]
    metrics = shutdown["data"]["modelMetrics"]
    assert set(replies) == set(metrics)
    by_model = cli("count", str(path), "--by", "model")
    assert {r["model"]: r["llm_calls"] for r in by_model} == {
        m: replies.count(m) for m in set(replies)
    }
    usage = cli("usage", str(path), "--by", "model")
    assert {r["model"]: r["requests"] for r in usage["rows"]} == {
        m: v["requests"]["count"] for m, v in metrics.items()
    }


def test_nudge_limit_log_is_the_nudge_cap(edge: Path) -> None:
    path = edge / NUDGE_LIMIT
    evs = events_of(path)
    nudges = sum(bool(e["data"].get("isAutopilotContinuation")) for e in evs)
    assert nudges == 5
    assert not any(e["type"] == "session.task_complete" for e in evs)
    (audited,) = cli("audit", str(path))
    assert (audited["verdict"], audited["task_nudges"]) == ("nudge-cap", nudges)
    assert audited["llm_calls"] == sum(e["type"] == "assistant.turn_start" for e in evs)
