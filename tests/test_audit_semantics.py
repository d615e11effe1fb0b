"""`audit` on what newer CLIs say of a completion: the task_complete outcome and blocker, the
completion receipt's stopReason and autopilot_stopped's reason, and a completion that the run
went on from. The expectations are hand-read from the logs (synthetic ones built here, and the
recordings of the real CLI with what its model server served)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from copilot_logs import api
from copilot_logs.api import read_file
from copilot_logs.commands.audit import audit
from synth import SessionBuilder, bash

from .recorded import Read, read
from .test_audit import LATER, autopilot, judge, lines_of, loop, task_complete

__all__ = ["read"]  # the fixture, for pytest

RECORDINGS = Path(__file__).parent / "recordings"


def recording(version: str, scenario: str) -> Path:
    folder = RECORDINGS / version / scenario
    if not (folder / "truth.json").is_file():
        pytest.skip(f"no recording of {scenario} by CLI {version}")
    return folder


def truth(folder: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((folder / "truth.json").read_text())
    return loaded


# --- a completion the run went on from ------------------------------------------------------


def test_a_completion_followed_by_nudges_to_the_cap_is_nudge_cap() -> None:
    b = autopilot()
    task_complete(b, "Done, I think.", success=True)
    for _ in range(5):
        b.nudge()
        loop(b)
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "nudge-cap"
    assert row["task_complete_summary"] == "Done, I think."  # still shown: it was said


def test_a_completion_the_run_went_on_from_is_not_completed() -> None:
    """A message queued into the task_complete turn: the CLI answers it with another LLM call,
    which ends without a second task_complete. The task was taken up again and left."""
    b = SessionBuilder(seed=3)
    b.mode_changed("autopilot")
    interaction = b.user_message("Fix the build.")
    b.turn("", [bash("make", "ok")])
    b.turn("", [], end=False)
    b.event(
        "tool.execution_start",
        {"toolCallId": "tc-1", "toolName": "task_complete", "arguments": {"summary": "Fixed."}},
    )
    b.event("tool.execution_complete", {"toolCallId": "tc-1", "success": True})
    b.event(
        "user.message",
        {"content": "Also update the changelog.", "interactionId": interaction},
    )
    b.event("session.task_complete", {"summary": "Fixed.", "success": True})
    b.end_turn()
    b.turn("I will update the changelog next.")
    b.shutdown()
    row = judge(b)
    assert row["user_prompts"] == 2  # the queued message is a prompt, but starts no task
    assert row["verdict"] == "missing-task-complete"
    assert row["line"] == len(b.events)


def test_a_tool_turn_after_an_accepted_completion_reopens_it() -> None:
    b = autopilot()
    task_complete(b, "Done.", success=True)
    b.turn("One more thing.", [bash("make lint", "ok")])
    b.turn("Now it is done.")
    b.shutdown()
    assert judge(b)["verdict"] == "missing-task-complete"


@pytest.mark.parametrize("version", ["1.0.102", "1.0.85"])
def test_recorded_completion_then_a_second_prompt_nudged_to_the_cap(version: str) -> None:
    """The real CLI: the first prompt calls task_complete; the second (--resume) never does
    and is nudged to the cap (--max-autopilot-continues 2)."""
    folder = recording(version, "autopilot-done-then-nudged")
    served = truth(folder)
    assert served["expect"]["verdict"] == "nudge-cap"
    assert [r["reply"] for r in served["requests"]] == ["tools", "text", "text", "text"]
    (row,) = audit(read_file(folder / "events.jsonl"), now=LATER, nudge_cap=2).to_dicts()
    assert row["verdict"] == "nudge-cap"
    assert (row["user_prompts"], row["autopilot_nudges"], row["task_nudges"]) == (2, 2, 2)
    assert row["task_complete_summary"] is None  # the completion was the first task's


# --- outcomes, receipts and stop reasons ----------------------------------------------------


def test_a_blocked_completion_is_blocked_and_names_its_blocker() -> None:
    b = autopilot()
    loop(b)
    blocker = {
        "kind": "permission_recovery",
        "reason": "attempts_exhausted",
        "resumable": True,
        "permissionRecovery": {},
    }
    task_complete(b, "Cannot push without approval.", outcome="blocked", blocker=blocker)
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "blocked"
    assert row["task_complete_blocker"] == "permission_recovery: attempts_exhausted"
    assert row["line"] == lines_of(b, "session.task_complete")[-1]


def test_a_rejected_completion_then_an_accepted_one_is_completed() -> None:
    b = autopilot()
    task_complete(b, "Done?", success=False, outcome="continue")
    loop(b)
    task_complete(b, "Done now.", success=True, outcome="completed")
    b.shutdown()
    row = judge(b)
    assert (row["verdict"], row["task_complete_outcome"]) == ("completed", "completed")


def receipt(b: SessionBuilder, stop_reason: str) -> None:
    b.event(
        "session.completion_receipt",
        {
            "schemaVersion": 1,
            "attempt": 1,
            "sourceEventId": b.events[-1]["id"],
            "eventRange": {"startEventId": b.events[0]["id"], "endEventId": b.events[-1]["id"]},
            "stopReason": stop_reason,
            "successfulToolCount": 1,
            "failedToolCount": 0,
        },
    )


def test_a_receipt_of_the_continuation_limit_is_nudge_cap_whatever_the_nudge_count() -> None:
    b = autopilot()
    loop(b)
    b.nudge()
    loop(b)
    receipt(b, "agent_stop_block_limit")
    b.shutdown()
    row = judge(b)
    assert (row["verdict"], row["stop_reason"]) == ("nudge-cap", "agent_stop_block_limit")


def test_a_receipt_after_task_complete_keeps_it_completed_and_shows_the_reason() -> None:
    b = autopilot()
    task_complete(b, "Done.", success=True, outcome="completed")
    receipt(b, "terminal_tool")
    b.shutdown()
    row = judge(b)
    assert (row["verdict"], row["stop_reason"]) == ("completed", "terminal_tool")


def test_autopilot_stopped_aborted_is_interrupted() -> None:
    b = autopilot()
    loop(b)
    b.event("session.autopilot_stopped", {"reason": "aborted", "requestId": "r1"})
    b.shutdown()
    row = judge(b)
    assert (row["verdict"], row["stop_reason"]) == ("interrupted", "aborted")


def test_a_stop_reason_followed_by_more_work_does_not_decide() -> None:
    b = autopilot()
    loop(b)
    b.event("session.autopilot_stopped", {"reason": "aborted"})
    b.nudge()  # the run went on in the same task after the stop
    loop(b)
    b.shutdown()
    assert judge(b)["verdict"] == "missing-task-complete"
    b2 = autopilot()
    loop(b2)
    b2.event("session.autopilot_stopped", {"reason": "cap_reached"})
    b2.user_message("Go on.")  # a new task, not capped
    loop(b2)
    b2.shutdown()
    assert judge(b2)["verdict"] == "missing-task-complete"


def test_recorded_stream_says_cap_reached_where_the_log_cannot() -> None:
    """CLI 1.0.102 with --max-autopilot-continues 2 and --output-format json: the stream holds
    session.autopilot_stopped {reason: cap_reached}, which is ephemeral (never in the log). Read
    with the default --nudge-cap of 5, the stream is nudge-cap from the CLI's own word; the
    log, with two nudges, cannot say so."""
    folder = recording("1.0.102", "autopilot-cap-stream")
    assert "--max-autopilot-continues" in truth(folder)["flags"]
    (streamed,) = audit(read_file(folder / "stdout.jsonl"), now=LATER).to_dicts()
    assert (streamed["verdict"], streamed["stop_reason"]) == ("nudge-cap", "cap_reached")
    (logged,) = audit(read_file(folder / "events.jsonl"), now=LATER).to_dicts()
    assert (logged["verdict"], logged["stop_reason"]) == ("missing-task-complete", None)
    (capped,) = audit(read_file(folder / "events.jsonl"), now=LATER, nudge_cap=2).to_dicts()
    assert capped["verdict"] == "nudge-cap"


# --- every recording: the verdict its scenario must get ---------------------------------------


def _verdict_cases() -> list[Any]:
    from .recorded import ALL

    return [
        pytest.param(r, id=r.id)
        for r in ALL
        if r.outcome == "recorded" and "verdict" in r.truth["expect"]
    ]


@pytest.mark.parametrize("recording", _verdict_cases())
def test_each_recording_gets_the_verdict_its_scenario_expects(recording: Any, read: Read) -> None:
    """The scenario says the verdict (rig/scenarios.py, kept in truth.json); the cap is the
    one the CLI ran with (--max-autopilot-continues, else its default of 5)."""
    flags = recording.truth["flags"]
    cap = (
        int(flags[flags.index("--max-autopilot-continues") + 1])
        if ("--max-autopilot-continues" in flags)
        else 5
    )
    (row,) = read.rows(
        recording,
        ("audit", "--nudge-cap", str(cap)),
        lambda logs: audit(api.read(*logs), now=LATER, nudge_cap=cap).to_dicts(),
    )
    assert row["verdict"] == recording.truth["expect"]["verdict"]
