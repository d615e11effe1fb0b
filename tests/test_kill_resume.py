"""The kill-resume recordings (issue 32): the real CLI, in autopilot, killed with SIGKILL (its
whole process group) while its tool ran, then ``--resume``d with a second prompt that runs a tool
and completes. What the recordings hold, and what every command says of them, against the rig's
truth: which run (segment) each call the server answered belongs to, where each run's part of the
log ends (``runs[i].log_lines``), and what sat beside the log after each run.

The facts of the CLI checked first are those ../shared/event-format.md states ("A run that was
killed, a retry, and what sits beside the log"). Then what the session model makes of them:
no error or warning from validate (T206, X309 are info), the killed turn and tool
``interrupted`` in the timeline, never "open at shutdown", and a usage row that is complete
only when a shutdown holds every call, with its ``segments`` saying which run lost a call.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.ingest.cli_format import version_key

from .recorded import COMMITTED, KILLED_AND_RESUMED, Recording

pytestmark = pytest.mark.live

INTERRUPTED_COMPLETION = (1, 0, 102)
"""The first CLI that closes the killed tool on resume (and whose shutdown keeps the killed
call's usage)."""
REMOVES_A_DEAD_LOCK = (1, 0, 40)
"""The first CLI that removes the killed run's ``inuse.<pid>.lock`` when it resumes."""
FIGURES = ("llm_calls", "tool_calls", "user_prompts", "autopilot_nudges", "interactions")


def closes_the_killed_tool(recording: Recording) -> bool:
    return (version_key(recording.version) or ()) >= INTERRUPTED_COMPLETION


def cases() -> list[Any]:
    """Every kill-resume recording."""
    return [pytest.param(r, id=r.id) for r in KILLED_AND_RESUMED]


def recorded(recording: Recording) -> Recording:
    if recording.outcome != "recorded":
        pytest.skip(recording.why_not_recorded)
    return recording


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--no-cache", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return orjson.loads(result.stdout)


def events(recording: Recording) -> list[dict[str, Any]]:
    """The log's events as the CLI wrote them (the recording's own bytes, no copilot-logs)."""
    return [orjson.loads(line) for line in recording.log.read_bytes().splitlines()]


def killed_lines(recording: Recording) -> int:
    """The lines the killed run wrote: the log as it stood when the run was killed."""
    lines: int = recording.runs[0]["log_lines"]
    return lines


def killed_call(recording: Recording) -> dict[str, Any]:
    (call,) = recording.served_in(0)
    return call


def main_turns(recording: Recording) -> list[dict[str, Any]]:
    (session,) = cli_json("timeline", str(recording.log))
    return [turn for i in session["interactions"] for turn in i["turns"]]


def run_of(recording: Recording, line: int) -> int:
    """The run that wrote ``line`` of the log (1-based), by where each run's part ends."""
    return next(i for i, run in enumerate(recording.runs) if line <= run["log_lines"])


def test_there_are_kill_resume_recordings() -> None:
    committed = [r for r in KILLED_AND_RESUMED if r.folder.is_relative_to(COMMITTED)]
    if not committed:
        pytest.skip("COPILOT_LOGS_RECORDINGS points elsewhere")
    assert len({r.version for r in committed if r.outcome == "recorded"}) >= 3


# --- what the rig did and what the CLI wrote ----------------------------------------------------


@pytest.mark.parametrize("recording", cases())
def test_the_first_run_was_killed_in_its_tool_and_the_resume_finished(
    recording: Recording,
) -> None:
    recording = recorded(recording)
    killed, resumed = recording.runs
    assert (killed["killed"], killed["exit_code"]) == (True, -9)
    assert (resumed["killed"], resumed["exit_code"]) == (False, 0)
    assert killed_call(recording)["tools"] == ["bash"]
    assert {r["run"] for r in recording.served} == {0, 1}
    assert recording.served_in(1)[-1]["tools"] == ["task_complete"]


@pytest.mark.parametrize("recording", cases())
def test_the_killed_run_ends_cleanly_after_its_tool_started_and_leaves_its_lock(
    recording: Recording,
) -> None:
    recording = recorded(recording)
    killed = recording.runs[0]
    before_resume = recording.log.read_bytes()[: killed["log_bytes"]]
    assert before_resume.endswith(b"\n") and b"\0" not in before_resume
    logged = events(recording)
    last = logged[killed_lines(recording) - 1]
    assert last["type"] == "tool.execution_start"
    assert last["data"]["toolCallId"] == killed_call(recording)["tool_call_ids"][0]
    kinds = {e["type"] for e in logged[: killed_lines(recording)]}
    assert kinds.isdisjoint({"assistant.turn_end", "session.shutdown", "abort"})
    resume = logged[killed_lines(recording)]
    assert (resume["type"], resume["data"]["eventCount"]) == (
        "session.resume",
        killed_lines(recording),
    )
    # The killed CLI's inuse.<pid>.lock stays (1.0.20 runs a child process, whose pid it holds).
    assert len(killed["inuse_lock_pids"]) == 1
    if version_key(recording.version) >= (1, 0, 32):
        assert killed["inuse_lock_pids"] == [killed["pid"]]


@pytest.mark.parametrize("recording", cases())
def test_the_resume_removes_the_dead_lock_from_1_0_40(recording: Recording) -> None:
    recording = recorded(recording)
    killed, resumed = recording.runs
    removes = (version_key(recording.version) or ()) >= REMOVES_A_DEAD_LOCK
    assert resumed["inuse_lock_pids"] == ([] if removes else killed["inuse_lock_pids"])


@pytest.mark.parametrize("recording", cases())
def test_only_1_0_102_closes_the_killed_tool_and_no_version_closes_the_killed_turn(
    recording: Recording,
) -> None:
    """What the resumed run writes before its prompt: from 1.0.102 an ``interrupted``
    completion of the killed tool and a ``session.warning``; never a turn_end."""
    recording = recorded(recording)
    logged = events(recording)[killed_lines(recording) :]
    prompt = next(i for i, e in enumerate(logged) if e["type"] == "user.message")
    before_prompt = logged[:prompt]
    closed = [
        e["data"]
        for e in before_prompt
        if e["type"] == "tool.execution_complete"
        and e["data"]["toolCallId"] == killed_call(recording)["tool_call_ids"][0]
    ]
    warnings = [e["data"]["warningType"] for e in before_prompt if e["type"] == "session.warning"]
    if closes_the_killed_tool(recording):
        (completion,) = closed
        assert (completion["success"], completion["error"]["code"]) == (False, "interrupted")
        assert warnings == ["interrupted_tools"]
    else:
        assert (closed, warnings) == ([], [])
    assert "assistant.turn_end" not in {e["type"] for e in before_prompt}


@pytest.mark.parametrize("recording", cases())
def test_the_shutdown_holds_the_killed_call_from_1_0_102_only(recording: Recording) -> None:
    """The resumed run's shutdown (the only one) counts every call on 1.0.102; before, only
    the resumed run's: the killed call's usage is in no shutdown."""
    recording = recorded(recording)
    (shutdown,) = [e["data"] for e in events(recording) if e["type"] == "session.shutdown"]
    metrics = shutdown["modelMetrics"].values()
    held = recording.served if closes_the_killed_tool(recording) else recording.served_in(1)
    assert sum(m["requests"]["count"] for m in metrics) == len(held)
    assert sum(m["usage"]["inputTokens"] for m in metrics) == sum(r["prompt_tokens"] for r in held)


# --- what the commands say -------------------------------------------------------------------


@pytest.mark.parametrize("recording", cases())
def test_count_finds_the_calls_of_both_runs(recording: Recording) -> None:
    recording = recorded(recording)
    (row,) = cli_json("count", str(recording.log))
    expected = recording.expected
    assert {name: row[name] for name in FIGURES} == {name: expected[name] for name in FIGURES}
    assert row["llm_calls"] == len(recording.served_in(0)) + len(recording.served_in(1))


@pytest.mark.parametrize("recording", cases())
def test_timeline_puts_each_call_and_tool_in_the_run_that_made_it(recording: Recording) -> None:
    """Each turn (one LLM call) and its tools, by the run whose part of the log holds it, are
    the calls the server answered during that run and the tools they asked for; with per-call
    records (1.0.102) each turn's tokens are its call's."""
    recording = recorded(recording)
    turns = main_turns(recording)
    for run in range(len(recording.runs)):
        mine = [turn for turn in turns if run_of(recording, turn["line"]) == run]
        served = recording.served_in(run)
        assert len(mine) == len(served)
        shown = [tool["name"] for turn in mine for tool in turn["tools"]]
        assert shown == [tool for r in served for tool in r["tools"]]
        if closes_the_killed_tool(recording):
            assert [(t["api_call_id"], t["input_tokens"]) for t in mine] == [
                (r["api_call_id"], r["prompt_tokens"]) for r in served
            ]


@pytest.mark.parametrize("recording", cases())
def test_validate_finds_no_error_or_warning(recording: Recording) -> None:
    """The CLI's own shape after a kill and a resume is no damage (before the session model:
    T202, an error)."""
    recording = recorded(recording)
    report = cli_json("validate", "--strict", str(recording.log))
    failing = [(f["code"], f["line"]) for f in report["findings"] if f["severity"] != "info"]
    assert failing == []


@pytest.mark.parametrize("recording", cases())
def test_validate_never_says_the_killed_run_was_left_open_at_a_shutdown(
    recording: Recording,
) -> None:
    """The shutdown is the resumed run's: no turn or tool of the killed run was open at it
    (before the session model, X307 on the versions that write no interrupted completion)."""
    recording = recorded(recording)
    report = cli_json("validate", "--strict", str(recording.log))
    at_shutdown = [
        (f["code"], f["line"])
        for f in report["findings"]
        if f["code"] in ("T205", "X307") and f["line"] <= killed_lines(recording)
    ]
    assert at_shutdown == []


@pytest.mark.parametrize("recording", cases())
def test_timeline_never_says_open_at_shutdown(recording: Recording) -> None:
    recording = recorded(recording)
    turns = main_turns(recording)
    assert [t["line"] for t in turns if t["open_at_shutdown"]] == []
    tools = [tool for turn in turns for tool in turn["tools"]]
    assert [tool["line"] for tool in tools if tool["open_at_shutdown"]] == []
    text = CliRunner().invoke(main, ["timeline", "--no-cache", str(recording.log)]).stdout
    assert "open at shutdown" not in text


@pytest.mark.parametrize("recording", cases())
def test_timeline_shows_the_killed_turn_and_tool_as_interrupted(recording: Recording) -> None:
    recording = recorded(recording)
    turns = main_turns(recording)
    killed = [t for t in turns if run_of(recording, t["line"]) == 0]
    assert len(killed) == len(recording.served_in(0)) == 1
    assert [t["interrupted"] for t in turns] == [t in killed for t in turns]
    (tool,) = killed[0]["tools"]
    assert (tool["tool_call_id"], tool["status"]) == (
        killed_call(recording)["tool_call_ids"][0],
        "interrupted",
    )


@pytest.mark.parametrize("recording", cases())
def test_usage_counts_the_calls_of_both_runs(recording: Recording) -> None:
    recording = recorded(recording)
    (row,) = cli_json("usage", str(recording.log))["rows"]
    assert (row["llm_calls"], row["subagent_calls"]) == (len(recording.served), 0)


@pytest.mark.parametrize("recording", cases())
def test_usage_is_complete_only_when_a_shutdown_holds_every_call(recording: Recording) -> None:
    """1.0.102's shutdown holds the killed call: complete, reconciled, the server's sums. The
    older ones hold the resumed run's calls only: the row is not complete (before the session
    model it said complete, with a reconciliation that said mismatch)."""
    recording = recorded(recording)
    (row,) = cli_json("usage", str(recording.log))["rows"]
    held = recording.served if closes_the_killed_tool(recording) else recording.served_in(1)
    assert (row["requests"], row["input_tokens"]) == (
        len(held),
        sum(r["prompt_tokens"] for r in held),
    )
    every_call = len(held) == len(recording.served)
    assert row["complete"] is every_call
    assert (row["reconciliation"] == "exact") is every_call


@pytest.mark.parametrize("recording", cases())
def test_usage_names_the_segment_that_lost_a_call(recording: Recording) -> None:
    """One segment per run: its LLM calls, and those whose usage no shutdown holds (the
    killed run's call before 1.0.102)."""
    recording = recorded(recording)
    (row,) = cli_json("usage", str(recording.log))["rows"]
    lost = 0 if closes_the_killed_tool(recording) else len(recording.served_in(0))
    expected = [(len(recording.served_in(0)), lost), (len(recording.served_in(1)), 0)]
    assert [(s["llm_calls"], s["lost_calls"]) for s in row["segments"]] == expected


@pytest.mark.parametrize("recording", cases())
def test_audit_judges_the_resumed_task(recording: Recording) -> None:
    recording = recorded(recording)
    (row,) = cli_json("audit", "--all", str(recording.log))
    expect = recording.truth["expect"]
    assert (row["verdict"], row["looping"]) == (expect["verdict"], expect["looping"])
    assert row["llm_calls"] == len(recording.served)


@pytest.mark.parametrize("recording", cases())
def test_doctor_calls_the_log_healthy(recording: Recording) -> None:
    recording = recorded(recording)
    (row,) = cli_json("doctor", str(recording.log))
    assert row["verdict"] == "healthy"
