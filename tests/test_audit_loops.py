"""`audit`'s `looping`: autopilot runs that spend calls without progress.

The gate is checked on every recording of the real CLI (the model server's truth says which
run loops and which calls it served after the loop began) and on hand-built runs whose wasted
calls are counted by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs import api
from copilot_logs.api import read_file
from copilot_logs.cli import audit as audit_cli
from copilot_logs.cli import main
from copilot_logs.commands.audit import audit, loops
from synth import SessionBuilder, ToolCall, bash, edit

from .recorded import RECORDED, Read, Recording, read
from .test_audit import LATER, autopilot, judge, lines_of, loop, task_complete

__all__ = ["read"]  # the fixture, for pytest

RECORDINGS = Path(__file__).parent / "recordings"
LOGS = sorted(RECORDINGS.glob("*/*/events.jsonl"))


def served(log: Path) -> dict[str, Any]:
    truth: dict[str, Any] = json.loads((log.parent / "truth.json").read_text())
    return truth


def recording_id(log: Path) -> str:
    return f"{log.parent.parent.name}/{log.parent.name}"


# --- the real CLI: the loop and only the loop ------------------------------------------------


@pytest.mark.parametrize("recording", RECORDED, ids=lambda r: r.id)
def test_the_loop_gate_flags_the_looping_recording_and_only_it(
    recording: Recording, read: Read
) -> None:
    (row,) = read.rows(
        recording, ("audit",), lambda logs: audit(api.read(*logs), now=LATER).to_dicts()
    )
    assert row["looping"] is bool(recording.truth["expect"].get("looping")), row["loop_signals"]


def test_there_are_looping_recordings() -> None:
    assert any(served(log)["scenario"] == "autopilot-loop" for log in LOGS)


@pytest.mark.parametrize(
    "log", [log for log in LOGS if log.parent.name == "autopilot-loop"], ids=recording_id
)
def test_the_recorded_loop_wastes_every_call_from_the_second_identical_command(
    log: Path,
) -> None:
    """The server answered `ls -la`, then a text, after the prompt and after every nudge. The
    first `ls -la` and its text are work; every call from the second `ls -la` on is the loop."""
    requests = [r for r in served(log)["requests"] if r["status"] == 200]
    tool_calls = [r["call"] for r in requests if r["reply"] == "tools"]
    assert len(tool_calls) >= 3
    wasted = [r for r in requests if r["call"] >= tool_calls[1]]
    (row,) = audit(read_file(log), now=LATER).to_dicts()
    assert row["wasted_calls"] == len(wasted)
    assert row["loop_signals"] == ["stalled-nudges", "repeated-call"]
    assert row["repeated_call"].startswith('bash {"command":"ls -la"')


# --- each sign, by hand ----------------------------------------------------------------------


def idle_nudges(b: SessionBuilder, count: int) -> None:
    """Nudges each answered by a text turn alone: one LLM call each, no tool."""
    for _ in range(count):
        b.nudge()
        b.turn("I am still looking into it.")


def test_nudges_with_no_new_successful_tool_call_loop_from_the_threshold() -> None:
    b = autopilot()
    loop(b)  # 2 calls of work
    idle_nudges(b, 3)  # 3 calls, no tool
    b.shutdown()
    row = judge(b)
    assert (row["looping"], row["loop_signals"], row["wasted_calls"]) == (
        True,
        ["stalled-nudges"],
        3,
    )
    assert row["loop_line"] == lines_of(b, "user.message")[1]  # the first nudge
    assert judge(b, loop_thresholds={"stalled-nudges": 4})["looping"] is False
    two = autopilot()
    loop(two)
    idle_nudges(two, 2)
    two.shutdown()
    assert judge(two)["looping"] is False
    assert judge(two, loop_thresholds={"stalled-nudges": 2})["wasted_calls"] == 2


def test_a_nudge_followed_by_new_work_breaks_the_stall() -> None:
    b = autopilot()
    loop(b)
    idle_nudges(b, 2)
    b.nudge()
    b.turn("Editing.", [edit("src/app.py", "old", "new")])  # new work: the stall ends here
    b.turn("Edited.")
    idle_nudges(b, 2)
    b.shutdown()
    assert judge(b)["looping"] is False


def test_a_failed_or_repeated_tool_call_is_no_progress() -> None:
    b = autopilot()
    b.turn("Testing.", [bash("make test", "ok")])
    b.turn("Tests ran.")
    for _ in range(3):
        b.nudge()
        b.turn("Trying the deploy.", [bash("make deploy", "denied", success=False)])
        b.turn("It failed.")
    b.shutdown()
    row = judge(b)
    # Three nudges: each ran `make deploy`, which failed (and after the first, was no new call).
    assert row["loop_signals"] == ["stalled-nudges", "repeated-call"]
    assert row["wasted_calls"] == 6


def test_the_same_call_three_times_in_a_row_loops_and_edits_between_do_not() -> None:
    b = autopilot()
    for _ in range(3):
        b.turn("Checking.", [bash("git status", "clean")])  # calls 1-3
    task_complete(b)  # call 4: accepted, ends the run
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "completed"
    assert row["loop_signals"] == ["repeated-call"]
    # From the call that asked for the second `git status` to the one that asked for
    # something else (task_complete is no tool call of the task's work): calls 2 to 4.
    assert row["wasted_calls"] == 3
    assert row["repeated_call"].startswith('bash {"command":"git status"')
    assert judge(b, loop_thresholds={"repeated-call": 4})["looping"] is False
    apart = autopilot()
    for index in range(3):
        apart.turn("Checking.", [bash("make test", "1 failed")])
        apart.turn("Fixing.", [edit("src/app.py", f"old {index}", f"fix {index}")])
    task_complete(apart)
    apart.shutdown()
    assert judge(apart)["looping"] is False


def test_rejected_completions_loop_at_two() -> None:
    b = autopilot()
    loop(b)  # calls 1-2
    task_complete(b, "Done?", success=False, outcome="continue")  # call 3: first rejection
    b.turn("More work.", [bash("make", "ok")])  # call 4
    task_complete(b, "Done now?", success=False, outcome="continue")  # call 5
    b.turn("Even more.", [bash("make lint", "ok")])  # call 6
    task_complete(b, "Done.", success=True)  # call 7: accepted
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "completed"
    assert row["loop_signals"] == ["rejected-completions"]
    assert row["wasted_calls"] == 4  # calls 4 to 7: after the first rejection
    assert row["loop_line"] == lines_of(b, "session.task_complete")[0]
    once = autopilot()
    task_complete(once, "Done?", success=False, outcome="continue")
    loop(once)
    task_complete(once, "Done.", success=True)
    once.shutdown()
    assert judge(once)["looping"] is False


def test_calls_after_an_accepted_completion_are_wasted() -> None:
    b = autopilot()
    loop(b)  # calls 1-2
    task_complete(b, "Done.", success=True)  # call 3
    b.nudge()
    b.turn("Double-checking.", [bash("git diff", "")])  # call 4
    b.turn("All fine.")  # call 5
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "missing-task-complete"
    assert (row["loop_signals"], row["wasted_calls"]) == (["after-completion"], 2)
    assert judge(b, loop_thresholds={"after-completion": 3})["looping"] is False


def test_overlapping_signs_count_each_wasted_call_once() -> None:
    b = autopilot()
    b.turn("Looking.", [bash("ls", "a")])  # call 1
    for _ in range(3):
        b.nudge()
        b.turn("Looking again.", [bash("ls", "a")])  # calls 2, 4, 6
        b.turn("Nothing new.")  # calls 3, 5, 7
    b.shutdown()
    row = judge(b)
    assert row["loop_signals"] == ["stalled-nudges", "repeated-call"]
    assert row["wasted_calls"] == 6  # calls 2-7, in both spans


def test_sub_agent_calls_in_the_loop_are_wasted_too() -> None:
    b = autopilot()
    b.turn("Starting.", [bash("ls", "a")])
    b.subagent_run("Look around.")
    for _ in range(3):
        b.nudge()
        b.turn("Looking again.", [bash("ls", "a")])
        b.subagent_run("Look around.")  # a main call, and the helper's one
        b.turn("Still nothing.")
    b.shutdown()
    row = judge(b)
    assert row["loop_signals"] == ["stalled-nudges"]  # ls and the task call, in turn
    assert row["wasted_calls"] == 3 * 4  # per nudge: three main calls and the helper's one


def test_an_interactive_session_never_loops() -> None:
    b = SessionBuilder(seed=8)
    b.user_message("Check the status.")
    for _ in range(4):
        b.turn("Checking.", [bash("git status", "clean")])
    b.turn("Clean.")
    b.shutdown()
    row = judge(b, require_task_complete=True)
    assert row["looping"] is False


def test_the_thresholds_option_names_match_the_signals() -> None:
    assert tuple(signal for _, signal, _, _ in audit_cli.LOOP_OPTIONS) == loops.SIGNALS
    defaults = {signal: default for _, signal, default, _ in audit_cli.LOOP_OPTIONS}
    assert defaults == dict(loops.DEFAULT_THRESHOLDS)
    assert audit_cli.LOOPING == "looping"


# --- the command ------------------------------------------------------------------------------


def looping_log(tmp_path: Path) -> Path:
    b = autopilot(seed=11)
    loop(b)
    idle_nudges(b, 2)
    b.shutdown()
    b.write_to(tmp_path)
    return tmp_path


def test_cli_fail_on_looping_and_the_thresholds(tmp_path: Path) -> None:
    root = str(looping_log(tmp_path))
    runner = CliRunner()
    ok = runner.invoke(main, ["audit", "--root", root, "--fail-on", "looping", "--format", "json"])
    assert ok.exit_code == 0, ok.output
    (row,) = orjson.loads(ok.stdout)
    assert (row["looping"], row["wasted_calls"]) == (False, 0)
    caught = runner.invoke(
        main,
        [
            "audit",
            "--root",
            root,
            "--fail-on",
            "looping",
            "--stalled-nudges",
            "2",
            "--format",
            "json",
        ],
    )
    assert caught.exit_code == 1, caught.output
    (row,) = orjson.loads(caught.stdout)
    assert (row["looping"], row["loop_signals"], row["wasted_calls"]) == (
        True,
        ["stalled-nudges"],
        2,
    )
    assert row["wasted_credits"] is None  # the log has no per-call credits
    spared = runner.invoke(
        main, ["audit", "--root", root, "--fail-on", "none", "--stalled-nudges", "2"]
    )
    assert spared.exit_code == 0
    assert "1 looping, 2 LLM calls wasted" in spared.stdout


def test_cli_refuses_a_threshold_below_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["audit", "--root", str(looping_log(tmp_path)), "--repeated-calls", "0"]
    )
    assert result.exit_code == 2
    assert "--repeated-calls" in result.output


def test_cli_github_marks_a_completed_but_looping_run_as_an_error_under_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = autopilot(seed=12)
    for _ in range(3):
        b.turn("Checking.", [bash("git status", "clean")])
    task_complete(b, "All good.")
    b.shutdown()
    b.write_to(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["audit", "--root", ".", "--fail-on", "looping", "--format", "github"]
    )
    assert result.exit_code == 1
    annotation = result.stdout.splitlines()[0]
    assert annotation.startswith("::error ")
    assert "title=copilot-logs audit%3A completed%2C looping::" in annotation
    assert "Looping (repeated-call; repeated: bash" in annotation
    assert "3 LLM calls wasted" in annotation


def test_the_wasted_credits_are_the_wasted_calls_credits_where_each_call_has_them() -> None:
    """Per-call credits as CLI 1.0.102 writes them for a GitHub-billed call (a
    session.usage_record with copilotUsage.totalNanoAiu): the loop's calls' credits summed."""

    def billed(nano: int) -> dict[str, Any]:
        return {
            "usage": {
                "model": "gpt-5",
                "inputTokens": 1000,
                "outputTokens": 10,
                "aiCreditsStatus": "complete",
                "copilotUsage": {"totalNanoAiu": nano},
            }
        }

    b = autopilot(seed=13)
    b.turn("Looking.", [bash("ls", "a")])
    b.event("session.usage_record", billed(100_000_000))  # call 1: work, 0.1 credits
    for index in range(3):
        b.nudge()
        b.turn("Looking again.", [bash("ls", "a")])
        b.event("session.usage_record", billed(10_000_000 * (index + 1)))
        b.turn("Nothing new.")
        b.event("session.usage_record", billed(1_000_000))
    b.shutdown()
    row = judge(b)
    assert row["wasted_calls"] == 6
    # 0.01 + 0.02 + 0.03 for the repeated `ls`, and 3 x 0.001 for the texts after them.
    assert row["wasted_credits"] == pytest.approx(0.063, abs=1e-12)


# --- a call is judged by what it does (issue 34) ---------------------------------------------


def reworded(command: str, description: str, result: str = "ok") -> ToolCall:
    """bash as the CLI's model calls it: the command, then a description in its own words."""
    return ToolCall("bash", {"command": command, "description": description}, result=result)


def test_the_same_command_reworded_each_time_is_still_the_same_call() -> None:
    """`make test` four times in a row, its description worded anew each time: a loop (on the
    calls from the one that asked for the second to the final answer: 4 of the 5 calls)."""
    b = autopilot()
    for words in ("Run the tests", "Run the test suite again", "Re-run tests", "Tests, once more"):
        b.turn("Testing.", [reworded("make test", words, "1 failed")])
    b.turn("The tests still fail.")
    b.shutdown()
    row = judge(b)
    assert row["loop_signals"] == ["repeated-call"]
    assert row["wasted_calls"] == 4
    assert row["repeated_call"].startswith('bash {"command":"make test"')


def test_other_commands_with_one_description_are_other_calls() -> None:
    b = autopilot()
    for step in range(4):
        b.turn("Working.", [reworded(f"make step{step}", "Run the next step")])
    task_complete(b)
    b.shutdown()
    assert judge(b)["looping"] is False


def poll(agent: str, result: str) -> ToolCall:
    return ToolCall("read_agent", {"agent_id": agent, "wait": True, "timeout": 120}, result=result)


def test_polling_a_background_agent_that_ends_in_completion_is_no_loop() -> None:
    """A run that starts a background agent and reads it four times with the same arguments
    (waiting), then completes: it waited, it did not loop."""
    b = autopilot()
    b.turn("Starting a helper.", [ToolCall("task", {"prompt": "explain", "mode": "background"})])
    for answer in ("still running", "still running", "still running", "The answer."):
        b.turn("Waiting for the helper.", [poll("helper", answer)])
    task_complete(b)
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "completed"
    assert row["looping"] is False, row["loop_signals"]


def test_polling_that_never_ends_in_completion_is_a_loop() -> None:
    b = autopilot()
    for _ in range(4):
        b.turn("Waiting for the helper.", [poll("helper", "still running")])
    b.turn("The helper has not answered.")
    b.shutdown()
    row = judge(b)
    assert row["loop_signals"] == ["repeated-call"]
    assert row["wasted_calls"] == 4


def test_a_description_the_preview_cuts_compares_equal_to_a_whole_one() -> None:
    """The arguments are kept to their first 160 characters: a long description is cut, a
    short one is whole; the same command is still the same call."""
    b = autopilot()
    for words in ("Run it", "R" * 300, "Run it once more", "S" * 300):
        b.turn("Testing.", [reworded("make test", words, "1 failed")])
    b.turn("Still failing.")
    b.shutdown()
    assert judge(b)["loop_signals"] == ["repeated-call"]


def test_the_same_command_failing_then_succeeding_is_two_calls() -> None:
    """`make test` failed twice, then passed: two runs of the same call (two, then one), under
    the threshold of three."""
    b = autopilot()
    for success in (False, False, True):
        b.turn("Testing.", [ToolCall("bash", {"command": "make test"}, success=success)])
    task_complete(b)
    b.shutdown()
    assert judge(b)["looping"] is False
