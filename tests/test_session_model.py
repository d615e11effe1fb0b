"""The session model (issue 32, ``copilot_logs/derive/``) tested from outside: every command
reads one story of a session, and each decision of the model has a test that fails when it
breaks (docs/development.md, "Mutations and the tests that catch them").

Every expectation comes from an oracle other than the code: logs built here with
:class:`synth.SessionBuilder`, whose truth is known by construction (which line comes after
which, what each completion said); counts made by hand from the raw lines (parsed with
orjson); the model server's truth of the recordings (``truth.json``); the documented tables
(docs/audit.md's verdict rules, docs/sessions.md's fields, docs/doctor.md's evidence).

1. audit's verdict: for each argument of ``derive.after()`` as the verdict uses it, a log in
   which only that one line comes later, and the verdict it changes.
2. ``sessions --format json``: every field of hand-built logs.
3. doctor's severities and verdicts, one hand-built log per kind of damage.
4. A ``blocked`` completion judged the same by every command.
5. On the bundled samples, the recordings and ../shared's real samples: every ``usage --by``
   grouping adds up to the session's figures, and every command gives the same answer to
   "ended", "completed" and "which segment".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from copilot_logs.api import read_bytes
from copilot_logs.commands import audit, watch
from copilot_logs.ingest.reader import ReadResult
from synth import SessionBuilder, ToolCall, bash

from .conftest import REAL_SAMPLES, SAMPLES

LATER = datetime(2030, 1, 1, tzinfo=UTC)
"""Long after every session built here: none of them is still running."""


# --- helpers -------------------------------------------------------------------------------


def read(b: SessionBuilder) -> ReadResult:
    return read_bytes(b.to_bytes(), f"{b.session_id}.jsonl")


def last_time(b: SessionBuilder) -> datetime:
    """The time of the last line written: a ``now`` a minute after it finds the log recent."""
    return datetime.fromisoformat(b.now.replace("Z", "+00:00"))


def verdict(b: SessionBuilder, *, recent: bool = False) -> str:
    """audit's verdict of the one session of ``b``, judged with ``require_task_complete`` (so
    that the mode does not matter), a minute after its last line or long after it."""
    now = last_time(b) + timedelta(minutes=1) if recent else LATER
    table = audit.audit(read(b), now=now, require_task_complete=True)
    assert table.height == 1
    return str(table["verdict"][0])


def autopilot(seed: int = 0) -> SessionBuilder:
    b = SessionBuilder(seed=seed)
    b.mode_changed("autopilot")
    b.user_message("Fix the failing test.")
    return b


def complete(b: SessionBuilder, summary: str = "Fixed.", **data: Any) -> None:
    """A turn that calls task_complete; the ``session.task_complete`` carries ``data``."""
    b.turn("", [ToolCall("task_complete", {"summary": summary}, result=summary)], end=False)
    b.event("session.task_complete", {"summary": summary, "success": True, **data}, after_ms=1)
    b.end_turn()


def failed_call(b: SessionBuilder) -> None:
    """A main-agent LLM call the provider refused (no reply), and its ``session.error``."""
    b.turn(None)
    b.session_error("Too many requests", "rate_limit", 429)


def receipt(b: SessionBuilder, stop_reason: str) -> None:
    b.event(
        "session.completion_receipt",
        {"schemaVersion": 1, "attempt": 1, "stopReason": stop_reason},
    )


def lines(b: SessionBuilder, kind: str) -> list[int]:
    """The lines (1-based) of ``b``'s log that hold an event of type ``kind``."""
    return [n for n, event in enumerate(b.events, 1) if event["type"] == kind]


# --- 1. audit: each argument of derive.after() --------------------------------------------
#
# docs/audit.md's rules: a task_complete decides when it comes after the task's last error,
# nudge and main-agent LLM call (turn_start); an error ends the task when nothing (no
# task_complete, nudge or call) came after it; a stop reason, an abort, a shutdown decide only
# when no call came after them. Each case below puts exactly one of those lines after the line
# it is compared with (the other columns before it), so dropping that one column from its
# ``after(...)`` changes the verdict.


def completion_then_error() -> SessionBuilder:
    """tc_line < error_line; the last nudge (none) and turn_start before the completion."""
    b = autopilot()
    b.turn("Running the tests.", [bash("pytest -x", "1 failed")])
    complete(b)
    b.session_error("connection reset", "query")
    b.shutdown()
    return b


def completion_then_nudge() -> SessionBuilder:
    """tc_line < nudge_line; no error, and no turn_start after the completion."""
    b = autopilot()
    b.turn("Running the tests.", [bash("pytest -x", "ok")])
    complete(b)
    b.nudge()
    b.shutdown()
    return b


def completion_then_call() -> SessionBuilder:
    """tc_line < turn_line: one more LLM call after the completion, no nudge, no error."""
    b = autopilot()
    complete(b)
    b.turn("One more look at the diff.")
    b.shutdown()
    return b


def error_then_completion() -> SessionBuilder:
    """error_line < tc_line: the error was recovered from, and the completion decides."""
    b = autopilot()
    failed_call(b)
    complete(b)
    b.shutdown()
    return b


def error_then_nudge() -> SessionBuilder:
    """error_line < nudge_line; the failed call's turn_start before the error, nothing after
    the nudge (cut off)."""
    b = autopilot()
    failed_call(b)
    b.nudge()
    return b


def error_then_retry_in_a_tool() -> SessionBuilder:
    """error_line < turn_line: a 429, then the retried call runs a tool (the log ends inside
    it: the session is running)."""
    b = autopilot()
    b.turn("Running the tests.", [bash("pytest -x", "1 failed")])
    failed_call(b)
    b.turn("Retrying.", [bash("sleep 30", never_completes=True)], end=False)
    return b


def cap_receipt_then_call() -> SessionBuilder:
    """stop_line < turn_line: the CLI said its limit stopped the run, and a call followed."""
    b = autopilot()
    b.turn("I believe this is done.")
    receipt(b, "cap_reached")
    b.turn("Going on with the task.")
    b.shutdown()
    return b


def abort_then_call() -> SessionBuilder:
    """abort_line < turn_line: an abort, then the task went on in another call."""
    b = autopilot()
    b.turn("Working.", [bash("make", "ok")])
    b.abort()
    b.turn("Picking up where I stopped.")
    b.shutdown()
    return b


def aborted_receipt_then_call() -> SessionBuilder:
    """stop_line (reason ``aborted``) < turn_line."""
    b = autopilot()
    b.turn("Working.", [bash("make", "ok")])
    receipt(b, "aborted")
    b.turn("Picking up where I stopped.")
    b.shutdown()
    return b


def shutdown_then_resumed_call() -> SessionBuilder:
    """shutdown_line < turn_line, the last turn closed: the resumed run's loop ended, and no
    shutdown followed (the run was killed or cut off)."""
    b = autopilot()
    b.turn("Working.", [bash("make", "ok")])
    b.shutdown()
    b.resume()
    b.turn("Still working on it.")
    return b


def shutdown_then_resumed_open_turn() -> SessionBuilder:
    """shutdown_line < turn_line, the last turn open: a routine shutdown, then a resumed run
    cut off inside its tool (not a user quitting at that shutdown)."""
    b = autopilot()
    b.turn("Working.", [bash("make", "ok")])
    b.shutdown()
    b.resume()
    b.turn("Running it.", [bash("make test", never_completes=True)], end=False)
    return b


def open_turn_then_shutdown() -> SessionBuilder:
    """turn_line < shutdown_line, the turn open at a routine shutdown: the user quit."""
    b = autopilot()
    b.turn("Running it.", [bash("make test", never_completes=True)], end=False)
    b.shutdown()
    return b


AFTER_CASES = [
    # (builder, recent, verdict, the verdict if that column were not compared)
    pytest.param(completion_then_error, False, "errored", "completed", id="tc<error"),
    pytest.param(completion_then_nudge, False, "missing-task-complete", "completed", id="tc<nudge"),
    pytest.param(completion_then_call, False, "missing-task-complete", "completed", id="tc<turn"),
    pytest.param(error_then_completion, False, "completed", None, id="error<tc"),
    pytest.param(error_then_nudge, True, "running", "errored", id="error<nudge"),
    pytest.param(error_then_nudge, False, "interrupted", "errored", id="error<nudge-cut-off"),
    pytest.param(error_then_retry_in_a_tool, True, "running", "errored", id="error<turn"),
    pytest.param(
        error_then_retry_in_a_tool, False, "interrupted", "errored", id="error<turn-cut-off"
    ),
    pytest.param(
        cap_receipt_then_call, False, "missing-task-complete", "nudge-cap", id="stop<turn"
    ),
    pytest.param(abort_then_call, False, "missing-task-complete", "interrupted", id="abort<turn"),
    pytest.param(
        aborted_receipt_then_call,
        False,
        "missing-task-complete",
        "interrupted",
        id="stop(aborted)<turn",
    ),
    pytest.param(
        shutdown_then_resumed_call,
        False,
        "interrupted",
        "missing-task-complete",
        id="shutdown<turn",
    ),
    pytest.param(
        shutdown_then_resumed_call, True, "running", "missing-task-complete", id="shutdown<turn-now"
    ),
    pytest.param(
        shutdown_then_resumed_open_turn, False, "interrupted", "user-quit", id="quit:shutdown<turn"
    ),
    pytest.param(open_turn_then_shutdown, False, "user-quit", None, id="quit:turn<shutdown"),
]


@pytest.mark.parametrize(("build", "recent", "expected", "if_not_compared"), AFTER_CASES)
def test_only_one_line_later_decides_the_verdict(
    build: Any, recent: bool, expected: str, if_not_compared: str | None
) -> None:
    """``if_not_compared`` is the verdict the rules give when the one later line is left out
    of the comparison (the mutation each case is there to catch; none where the case is the
    other order of a pair)."""
    b = build()
    assert verdict(b, recent=recent) == expected
    assert if_not_compared != expected


def test_a_running_session_that_recovered_from_a_429_is_not_done_for_watch(
    tmp_path: Path,
) -> None:
    """issue 32: with turn_line dropped from the error's comparison, this session is
    ``errored`` and ``watch --until-done`` settles on the error in the middle of a tool."""
    b = error_then_retry_in_a_tool()
    path = tmp_path / "s.jsonl"
    path.write_bytes(b.to_bytes())
    follower = watch.Follower((path,), "s")
    follower.poll()
    assert watch.run_status(follower) == watch.RUNNING
    state = watch.state(follower)
    assert state is not None
    assert (state.ended, state.turn_open, state.task_complete) == (False, True, False)
    assert [tool.name for tool in state.running_tools] == ["bash"]


# --- 2. sessions --format json, every field --------------------------------------------------

FINISHED = "11111111-1111-4111-8111-111111111111"
CUT_OFF = "22222222-2222-4222-8222-222222222222"
RESUMED = "33333333-3333-4333-8333-333333333333"
WORKED_AFTER_SHUTDOWN = "44444444-4444-4444-8444-444444444444"
NO_RESUME_LINE = "55555555-5555-4555-8555-555555555555"
QUIT = "66666666-6666-4666-8666-666666666666"


def sessions_json(*paths: Path) -> list[dict[str, Any]]:
    from click.testing import CliRunner

    from copilot_logs.cli import main

    result = CliRunner().invoke(
        main, ["sessions", *map(str, paths), "--no-cache", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = orjson.loads(result.stdout)
    return rows


def ms_between(start: str, end: str) -> int:
    """Milliseconds between two of the log's timestamps, read as text."""
    parse = datetime.fromisoformat
    return int(
        (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00")))
        / timedelta(milliseconds=1)
    )


def plain_order() -> list[str]:
    """docs/sessions.md's fields between ``session_id`` and ``file``, in its order."""
    return [
        "started_at",
        "ended_at",
        "duration_ms",
        "repository",
        "cwd",
        "branch",
        "copilot_version",
        "model",
        "mode",
        "user_prompts",
        "autopilot_nudges",
        "llm_calls",
        "open_turns",
        "tool_calls",
        "subagent_runs",
        "subagent_calls",
        "errors",
        "task_complete",
        "status",
        "damaged_lines",
    ]


def test_sessions_json_gives_every_field_of_hand_built_logs(tmp_path: Path) -> None:
    """docs/sessions.md's fields, each known by construction."""
    from synth import view

    # An interactive session that completed its task and shut down.
    finished = SessionBuilder(
        session_id=FINISHED,
        start="2026-08-05T07:49:01.551Z",
        copilot_version="1.0.85",
        model="claude-sonnet-4.5",
        cwd="/home/dev/shop",
        repository="octo/shop",
        branch="feature",
        seed=1,
    )
    finished.user_message("Add a test for the parser.")
    finished.turn("Reading the parser.", [view("src/parser.py", "def parse(): ...")])
    finished.turn("Writing the test.", [bash("pytest -q", "1 passed"), bash("git diff", "")])
    complete(finished, "Added the test.")
    finished.shutdown()

    # Autopilot, cut off inside a tool: a sub-agent with two calls, a nudge, a 429, a model
    # switch that ties the replies' models (one each: the latest reply's wins).
    cut = SessionBuilder(session_id=CUT_OFF, start="2026-08-06T10:00:00.000Z", seed=2)
    cut.mode_changed("autopilot")
    cut.user_message("Upgrade the dependencies.")
    cut.subagent_run("Run the test suite.", llm_calls=2, tool_calls=1)
    cut.nudge()
    failed_call(cut)
    cut.model_change("gpt-5")
    cut.turn("Retrying.", [bash("pip install -U .", never_completes=True)], end=False)

    # Killed inside a tool, resumed with a second prompt, shut down; no repository; a blank
    # line after the first prompt.
    resumed = SessionBuilder(
        session_id=RESUMED, start="2026-08-07T09:00:00.000Z", repository=None, branch=None, seed=3
    )
    resumed.user_message("Rename the module.")
    resumed.turn("Renaming.", [bash("git mv a.py b.py", never_completes=True)], end=False)
    resumed.resume()
    resumed.user_message("Go on.")
    resumed.turn("Renamed.")
    resumed.shutdown()

    # Shut down, then resumed and worked: the last run has no shutdown after its work.
    after = SessionBuilder(session_id=WORKED_AFTER_SHUTDOWN, start="2026-08-08T09:00:00Z", seed=4)
    after.user_message("Hi.")
    complete(after, "Said hello.")
    after.shutdown()
    after.resume()
    after.user_message("And now?")
    after.turn("Nothing more.")

    # Shut down, then worked with no session.resume between (its resume line lost): the
    # shutdown is before the run's last work.
    no_resume = SessionBuilder(session_id=NO_RESUME_LINE, start="2026-08-09T09:00:00Z", seed=5)
    no_resume.user_message("Hi.")
    no_resume.turn("Hello.")
    no_resume.shutdown()
    no_resume.user_message("Again?")
    no_resume.turn("Hello again.")

    # The user quit while a tool waited at a permission prompt: ended, the turn left open.
    quit_ = SessionBuilder(session_id=QUIT, start="2026-08-10T09:00:00Z", seed=6)
    quit_.user_message("Delete the build folder.")
    quit_.turn("Deleting.", [bash("rm -rf build", never_completes=True)], end=False)
    quit_.shutdown()

    files = {}
    for b in (finished, cut, resumed, after, no_resume, quit_):
        files[b.session_id] = b.write(tmp_path / f"{b.session_id}.jsonl")
    data = files[RESUMED].read_bytes().splitlines(keepends=True)
    first_prompt = lines(resumed, "user.message")[0]
    files[RESUMED].write_bytes(b"".join([*data[:first_prompt], b"\n", *data[first_prompt:]]))

    def times(b: SessionBuilder, start: str) -> dict[str, Any]:
        end = b.events[-1]["timestamp"]
        return {"started_at": start, "ended_at": end, "duration_ms": ms_between(start, end)}

    expected = {
        FINISHED: {
            **times(finished, "2026-08-05T07:49:01.551Z"),
            "repository": "octo/shop",
            "cwd": "/home/dev/shop",
            "branch": "feature",
            "copilot_version": "1.0.85",
            "model": "claude-sonnet-4.5",
            "mode": "interactive",
            "user_prompts": 1,
            "autopilot_nudges": 0,
            "llm_calls": 3,
            "open_turns": 0,
            "tool_calls": 4,  # view, two bash, task_complete
            "subagent_runs": 0,
            "subagent_calls": 0,
            "errors": 0,
            "task_complete": True,
            "status": "ended",
            "damaged_lines": 0,
        },
        CUT_OFF: {
            **times(cut, "2026-08-06T10:00:00.000Z"),
            "repository": "octo/project",
            "cwd": "/home/dev/project",
            "branch": "main",
            "copilot_version": "1.0.78",
            "model": "gpt-5",
            "mode": "autopilot",
            "user_prompts": 1,
            "autopilot_nudges": 1,
            "llm_calls": 3,  # the task turn, the refused call, the retry
            "open_turns": 1,
            "tool_calls": 2,  # task, bash (the sub-agent's tool is its own)
            "subagent_runs": 1,
            "subagent_calls": 2,
            "errors": 1,
            "task_complete": False,
            "status": "open",
            "damaged_lines": 0,
        },
        RESUMED: {
            **times(resumed, "2026-08-07T09:00:00.000Z"),
            "repository": None,
            "cwd": "/home/dev/project",
            "branch": None,
            "copilot_version": "1.0.78",
            "model": "gpt-5-mini",
            "mode": "interactive",
            "user_prompts": 2,
            "autopilot_nudges": 0,
            "llm_calls": 2,
            "open_turns": 1,  # the killed turn: no CLI closes it
            "tool_calls": 1,
            "subagent_runs": 0,
            "subagent_calls": 0,
            "errors": 0,
            "task_complete": False,
            "status": "ended",
            "damaged_lines": 1,
        },
        WORKED_AFTER_SHUTDOWN: {
            **times(after, "2026-08-08T09:00:00.000Z"),
            "repository": "octo/project",
            "cwd": "/home/dev/project",
            "branch": "main",
            "copilot_version": "1.0.78",
            "model": "gpt-5-mini",
            "mode": "interactive",
            "user_prompts": 2,
            "autopilot_nudges": 0,
            "llm_calls": 2,
            "open_turns": 0,
            "tool_calls": 1,
            "subagent_runs": 0,
            "subagent_calls": 0,
            "errors": 0,
            "task_complete": False,  # judged on the last task, which did not complete
            "status": "open",
            "damaged_lines": 0,
        },
    }
    plain = {
        "repository": "octo/project",
        "cwd": "/home/dev/project",
        "branch": "main",
        "copilot_version": "1.0.78",
        "model": "gpt-5-mini",
        "mode": "interactive",
        "autopilot_nudges": 0,
        "subagent_runs": 0,
        "subagent_calls": 0,
        "errors": 0,
        "task_complete": False,
        "damaged_lines": 0,
    }
    expected[NO_RESUME_LINE] = {
        **times(no_resume, "2026-08-09T09:00:00.000Z"),
        **plain,
        "user_prompts": 2,
        "llm_calls": 2,
        "open_turns": 0,
        "tool_calls": 0,
        "status": "open",
    }
    expected[QUIT] = {
        **times(quit_, "2026-08-10T09:00:00.000Z"),
        **plain,
        "user_prompts": 1,
        "llm_calls": 1,
        "open_turns": 1,
        "tool_calls": 1,
        "status": "ended",
    }
    for session in expected:
        expected[session] = {name: expected[session][name] for name in plain_order()}
    rows = sessions_json(tmp_path)
    # Newest first.
    assert [row["session_id"] for row in rows] == [
        QUIT,
        NO_RESUME_LINE,
        WORKED_AFTER_SHUTDOWN,
        RESUMED,
        CUT_OFF,
        FINISHED,
    ]
    for row in rows:
        session = row["session_id"]
        assert row == {"session_id": session, **expected[session], "file": str(files[session])}
        assert list(row) == ["session_id", *expected[session], "file"]


# --- 3. doctor: the severity of each kind of damage, and the verdict -----------------------
#
# docs/doctor.md: a reason's severity is what the CLI version that wrote the log did in a
# recorded resume of the same damage (resumes: info; resumes but drops events or loses the
# history: risk; refuses, or sends a tool call without its result: fatal), judged by the
# nearest recorded version at or below it; damage no resume was recorded of is a risk; a
# sub-agent or tool out of place, and work with no shutdown after it, are at least a risk. The
# verdict is the worst severity (fatal: cannot-resume, risk: at-risk, info: healthy), unless the
# log has no shutdown after its work and its last event is recent: running. The outcomes below
# are read from docs/doctor.md's table of recorded resumes.

HOUR = timedelta(hours=1)


def worked(version: str) -> SessionBuilder:
    """A prompt, a tool turn and an answer, written by CLI ``version`` (no shutdown yet)."""
    b = SessionBuilder(seed=7, copilot_version=version)
    b.user_message("Run the tests.")
    b.turn("Running them.", [bash("pytest -q", "3 passed")])
    b.turn("They pass.")
    return b


def clean_log(version: str) -> tuple[SessionBuilder, list[bytes]]:
    b = worked(version)
    b.shutdown()
    return b, b.lines()


def first(b: SessionBuilder, kind: str) -> int:
    """The 0-based index of the first line of type ``kind``."""
    return lines(b, kind)[0] - 1


def joined(parts: list[bytes]) -> bytes:
    from synth import join_lines

    return join_lines(parts)


def cut_last_line(version: str) -> bytes:
    """A line after the shutdown cut in half (a crash while writing it)."""
    from synth import cut

    b = worked(version)
    b.shutdown()
    b.info("notice", "written as the CLI exited")
    return cut(b.to_bytes())


def nul_tail(version: str) -> bytes:
    import synth

    return synth.nul_tail(clean_log(version)[0].to_bytes())


def glued_line(version: str) -> bytes:
    """The first turn_end cut in half, the next event glued behind it."""
    from synth import glue_truncated

    b, data = clean_log(version)
    at = first(b, "assistant.turn_end")
    return joined([*data[:at], glue_truncated(data[at], data[at + 1]), *data[at + 2 :]])


def raw_newline(version: str) -> bytes:
    from synth import split_line

    b, data = clean_log(version)
    at = first(b, "user.message")
    return joined([*data[:at], *split_line(data[at]), *data[at + 1 :]])


def not_utf8(version: str) -> bytes:
    from synth import invalid_utf8

    b, data = clean_log(version)
    at = first(b, "user.message")
    return joined([*data[:at], invalid_utf8(data[at]), *data[at + 1 :]])


def blank(version: str) -> bytes:
    b, data = clean_log(version)
    at = first(b, "user.message") + 1
    return joined([*data[:at], b"", *data[at:]])


def replayed(version: str) -> bytes:
    b, data = clean_log(version)
    at = first(b, "assistant.turn_start")
    return joined([*data[: at + 1], data[at], *data[at + 1 :]])


def crlf_ending(version: str) -> bytes:
    from synth import crlf

    b, data = clean_log(version)
    at = first(b, "user.message")
    return joined([*data[:at], crlf(data[at]), *data[at + 1 :]])


def no_event(version: str) -> bytes:
    from synth import not_an_event

    b, data = clean_log(version)
    at = first(b, "user.message") + 1
    return joined([*data[:at], not_an_event(), *data[at:]])


def line_separator(version: str) -> bytes:
    from synth import raw_line_separator

    b, data = clean_log(version)
    at = first(b, "user.message")
    return joined([*data[:at], raw_line_separator(data[at]), *data[at + 1 :]])


def valid_json_oddity(version: str) -> bytes:
    """A reply's outputTokens past 64 bits: valid JSON the CLI parses like any line."""
    import re

    b, data = clean_log(version)
    at = first(b, "assistant.message")
    odd = re.sub(rb'"outputTokens":\d+', b'"outputTokens":1e999', data[at])
    assert odd != data[at]
    return joined([*data[:at], odd, *data[at + 1 :]])


def complete_removed(version: str) -> bytes:
    """A tool's complete removed, the session going on after it (orphan-mid)."""
    b, data = clean_log(version)
    at = first(b, "tool.execution_complete")
    return joined([*data[:at], *data[at + 1 :]])


def tool_open_at_shutdown(version: str) -> bytes:
    """The user quit while a tool ran (X307: orphan-start, recorded as resumed)."""
    b = worked(version)
    b.turn("Deploying.", [bash("make deploy", never_completes=True)], end=False)
    b.shutdown()
    return b.to_bytes()


def cut_off_in_a_tool(version: str) -> bytes:
    """The log ends inside a tool: orphan-start, and no shutdown."""
    b = worked(version)
    b.turn("Deploying.", [bash("make deploy", never_completes=True)], end=False)
    return b.to_bytes()


def killed_and_resumed(version: str) -> bytes:
    """Killed inside a tool, resumed, shut down (X309: orphan-start; every run saved)."""
    b = worked(version)
    b.turn("Deploying.", [bash("make deploy", never_completes=True)], end=False)
    b.resume()
    b.user_message("Go on.")
    b.turn("Deployed.")
    b.shutdown()
    return b.to_bytes()


def requested_not_started(version: str) -> bytes:
    """A reply asking for a tool that never started (orphan-request), then a shutdown."""
    b = worked(version)
    b.turn("", [], end=False)
    request = {"toolCallId": "call_never", "name": "bash", "arguments": {}, "type": "function"}
    b.event(
        "assistant.message",
        {"messageId": "m-1", "content": "", "toolRequests": [request], "turnId": "9"},
    )
    b.end_turn()
    b.shutdown()
    return b.to_bytes()


def unfinished_subagent(version: str) -> bytes:
    b = worked(version)
    b.event("subagent.started", {"toolCallId": "call_sub", "agentName": "task"})
    b.shutdown()
    return b.to_bytes()


def tool_outside_turn(version: str) -> bytes:
    b = worked(version)
    b.event("tool.execution_start", {"toolCallId": "call_out", "toolName": "bash"})
    b.event("tool.execution_complete", {"toolCallId": "call_out", "success": True})
    b.shutdown()
    return b.to_bytes()


def no_shutdown(version: str) -> bytes:
    return worked(version).to_bytes()


DOCTOR_CASES = [
    # (make the log, CLI version, reason code, evidence row, severity, verdict)
    (cut_last_line, "1.0.40", "damage", "cut-last-line", "fatal", "cannot-resume"),
    (cut_last_line, "1.0.78", "damage", "cut-last-line", "info", "healthy"),
    (cut_last_line, "1.0.50", "damage", "cut-last-line", "fatal", "cannot-resume"),  # by 1.0.40
    (cut_last_line, "1.0.77", "damage", "cut-last-line", "fatal", "cannot-resume"),  # by 1.0.60
    (cut_last_line, "1.0.10", "damage", "cut-last-line", "fatal", "cannot-resume"),  # by 1.0.20
    (cut_last_line, "1.0.200", "damage", "cut-last-line", "info", "healthy"),  # by 1.0.102
    (nul_tail, "1.0.40", "damage", "nul-tail", "fatal", "cannot-resume"),
    (nul_tail, "1.0.60", "damage", "nul-tail", "info", "healthy"),
    (glued_line, "1.0.85", "damage", "glued-line", "fatal", "cannot-resume"),
    (glued_line, "1.0.102", "damage", "glued-line", "risk", "at-risk"),
    (raw_newline, "1.0.85", "damage", "raw-newline", "fatal", "cannot-resume"),
    (raw_newline, "1.0.102", "damage", "raw-newline", "risk", "at-risk"),
    (not_utf8, "1.0.85", "damage", "invalid-utf8", "info", "healthy"),
    (not_utf8, "1.0.102", "damage", "invalid-utf8", "risk", "at-risk"),
    (blank, "1.0.20", "damage", "blank-line", "info", "healthy"),
    (replayed, "1.0.102", "damage", "duplicate-line", "info", "healthy"),
    (crlf_ending, "1.0.102", "damage", None, "risk", "at-risk"),  # no resume recorded
    (no_event, "1.0.78", "damage", None, "risk", "at-risk"),  # no resume recorded
    (line_separator, "1.0.40", "damage", "u2028", "fatal", "cannot-resume"),
    (line_separator, "1.0.60", None, None, None, "healthy"),  # not looked for: resumed
    (valid_json_oddity, "1.0.78", None, None, None, "healthy"),  # valid JSON: noted nowhere
    (complete_removed, "1.0.20", "open-tool-call", "orphan-mid", "fatal", "cannot-resume"),
    (complete_removed, "1.0.60", "open-tool-call", "orphan-mid", "info", "healthy"),
    (tool_open_at_shutdown, "1.0.78", "open-tool-call", "orphan-start", "info", "healthy"),
    (killed_and_resumed, "1.0.85", "open-tool-call", "orphan-start", "info", "healthy"),
    (requested_not_started, "1.0.102", "open-tool-call", "orphan-request", "info", "healthy"),
    (unfinished_subagent, "1.0.78", "out-of-place", None, "risk", "at-risk"),
    (tool_outside_turn, "1.0.78", "out-of-place", None, "risk", "at-risk"),
    (no_shutdown, "1.0.78", "no-shutdown", "no-shutdown", "risk", "at-risk"),
]


def doctor_of(
    data: bytes, tmp_path: Path, *, now: datetime = LATER, size: int | None = None
) -> Any:
    """doctor's verdicts and reasons of the log. ``size``: the log measured at that many bytes
    (as a log read from standard input is measured by the bytes read), without writing it."""
    from copilot_logs.commands import doctor
    from copilot_logs.ingest.reader import read_bytes as read_log

    log = tmp_path / "events.jsonl"
    log.write_bytes(data)
    found, figures = doctor.facts(read_log(data, name=str(log)))
    files = {str(log): log}
    if size is not None:
        figures = figures.with_columns(bytes_read=pl.lit(size, pl.Int64))
        files = {}
    return doctor.judge([(found, figures)], files=files, now=now, running_within=HOUR)


@pytest.mark.parametrize(
    ("make", "version", "code", "damage", "severity", "expected"),
    [pytest.param(*case, id=f"{case[0].__name__}-{case[1]}") for case in DOCTOR_CASES],
)
def test_doctor_judges_each_damage_by_its_recorded_resume(
    tmp_path: Path,
    make: Any,
    version: str,
    code: str | None,
    damage: str | None,
    severity: str | None,
    expected: str,
) -> None:
    found = doctor_of(make(version), tmp_path)
    assert found.sessions["verdict"].to_list() == [expected]
    judged = [
        (r["code"], r["damage"], r["severity"])
        for r in found.reasons.to_dicts()
        if r["severity"] != "info" or r["code"] in ("damage", "open-tool-call")
    ]
    # A tool outside its turn is out of place twice (its start, its complete): one kind.
    assert sorted(set(judged)) == ([] if code is None else [(code, damage, severity)])


@pytest.mark.parametrize(
    ("size", "severity", "expected"),
    [
        (300_000_000, "risk", "at-risk"),  # past half of the string limit
        (536_870_887, "risk", "at-risk"),
        (536_870_888, "fatal", "cannot-resume"),  # at the limit
    ],
)
def test_doctor_judges_the_size_of_a_hand_built_log(
    tmp_path: Path, size: int, severity: str, expected: str
) -> None:
    found = doctor_of(clean_log("1.0.102")[0].to_bytes(), tmp_path, size=size)
    assert [
        (r["code"], r["severity"]) for r in found.reasons.to_dicts() if r["code"] == "size"
    ] == [("size", severity)]
    assert found.sessions["verdict"].to_list() == [expected]


def test_doctor_calls_running_only_a_recent_log_with_no_shutdown_after_its_work(
    tmp_path: Path,
) -> None:
    """Running: no shutdown after the last work (the model's ``ended``), and the last event
    within ``running_within`` of now, before or after it (a clock days ahead is not)."""
    from synth import cut as cut_line

    cut_in_a_tool = cut_line(cut_off_in_a_tool("1.0.40"))  # fatal: a cut line, for 1.0.40
    cut_at = datetime.fromisoformat(
        orjson.loads(cut_off_in_a_tool("1.0.40").splitlines()[-2])["timestamp"].replace(
            "Z", "+00:00"
        )
    )
    b = worked("1.0.78")
    b.shutdown()
    shut = b.to_bytes()
    b.resume()
    b.user_message("Go on.")
    resumed = b.to_bytes()
    at = last_time(b)
    cases = [
        (cut_in_a_tool, LATER, "cannot-resume"),
        (cut_in_a_tool, cut_at + timedelta(minutes=1), "running"),  # never judged while written
        (shut, at + timedelta(minutes=1), "healthy"),  # ended: judged, however recent
        (resumed, at + timedelta(minutes=1), "running"),  # worked after its shutdown
        (resumed, at - timedelta(minutes=5), "running"),  # a clock a little ahead of ours
        (resumed, at - timedelta(days=3), "at-risk"),  # days ahead: not running for ever
        (resumed, at + timedelta(hours=2), "at-risk"),  # cut off: no-shutdown
    ]
    for data, now, expected in cases:
        assert doctor_of(data, tmp_path, now=now).sessions["verdict"].to_list() == [expected]


# --- 4. a blocked completion, judged the same by every command -----------------------------
#
# docs/audit.md: a task_complete whose outcome is ``blocked`` is not done: a call after it takes
# the task up again, and when nothing follows it the verdict is ``blocked``. It ends no task
# (usage --by task), is no loop's "after completion", and is never ``task_complete`` in
# sessions or watch.

BLOCKER = {"kind": "permission_recovery", "reason": "attempts_exhausted", "resumable": True}


def blocked_session(*, then_a_call: bool, outcome: str = "blocked") -> SessionBuilder:
    b = autopilot(seed=11)
    b.turn("Pushing the branch.", [bash("git push", "denied")])
    data = {"outcome": outcome, "blocker": BLOCKER} if outcome == "blocked" else {}
    complete(b, "Cannot push without approval.", **data)
    if then_a_call:
        b.turn("Trying another remote.", [bash("git push backup", "denied")])
        b.turn("I could not push.")
    b.shutdown()
    return b


def every_command(b: SessionBuilder, tmp_path: Path) -> dict[str, Any]:
    """What each command says of the one session of ``b``: audit's verdict and loop finding,
    sessions' task_complete, watch's state and run status, usage --by task's tasks."""
    from copilot_logs.api import sessions, usage

    result = read(b)
    (row,) = audit.audit(result, now=LATER, require_task_complete=True).to_dicts()
    path = tmp_path / f"{b.session_id}.jsonl"
    path.write_bytes(b.to_bytes())
    follower = watch.Follower((path,), b.session_id)
    follower.poll()
    state = watch.state(follower)
    assert state is not None
    tasks = usage(result, by="task").rows.filter(pl.col("source") != "not attributable")
    return {
        "verdict": row["verdict"],
        "looping": (row["looping"], row["loop_signals"]),
        "sessions": sessions(result)["task_complete"].to_list(),
        "watch": (state.task_complete, state.ended),
        "tasks": [(r["task_index"], r["llm_calls"], r["completed"]) for r in tasks.to_dicts()],
    }


def test_a_blocked_completion_followed_by_a_call_ends_nothing_anywhere(tmp_path: Path) -> None:
    said = every_command(blocked_session(then_a_call=True), tmp_path)
    assert said == {
        "verdict": "missing-task-complete",
        "looping": (False, []),  # not "after-completion": the task was taken up again
        "sessions": [False],
        "watch": (False, True),
        "tasks": [(1, 4, False)],  # one task: its 4 calls, not done
    }


def test_a_blocked_completion_that_is_last_is_blocked_and_never_completed(tmp_path: Path) -> None:
    said = every_command(blocked_session(then_a_call=False), tmp_path)
    assert said == {
        "verdict": "blocked",
        "looping": (False, []),
        "sessions": [False],
        "watch": (False, True),
        "tasks": [(1, 2, False)],
    }


def test_an_accepted_completion_in_the_same_place_ends_its_task_everywhere(
    tmp_path: Path,
) -> None:
    """The control: the same logs with the completion accepted."""
    went_on = every_command(blocked_session(then_a_call=True, outcome="completed"), tmp_path)
    assert went_on == {
        "verdict": "missing-task-complete",
        "looping": (True, ["after-completion"]),  # two calls spent after the task was done
        "sessions": [False],
        "watch": (False, True),
        "tasks": [(1, 2, True), (2, 2, False)],
    }
    done = every_command(blocked_session(then_a_call=False, outcome="completed"), tmp_path)
    assert done == {
        "verdict": "completed",
        "looping": (False, []),
        "sessions": [True],
        "watch": (True, True),
        "tasks": [(1, 2, True)],
    }


def test_watch_waits_on_a_blocked_completion_only_until_the_task_is_taken_up(
    tmp_path: Path,
) -> None:
    """``--until-done``: a blocked completion ends the loop (finishing); a call after it is
    the task going on (running)."""
    b = blocked_session(then_a_call=True)
    data = b.to_bytes().splitlines(keepends=True)
    completion = lines(b, "session.task_complete")[0]
    next_call = next(n for n in lines(b, "assistant.turn_start") if n > completion)
    path = tmp_path / "s.jsonl"
    statuses = []
    for end in (completion + 1, next_call, len(data)):  # turn_end, the next call, the shutdown
        path.write_bytes(b"".join(data[:end]))
        follower = watch.Follower((path,), "s")
        follower.poll()
        statuses.append(watch.run_status(follower))
    assert statuses == [watch.FINISHING, watch.RUNNING, watch.ENDED]


# --- 5. one story on the samples, the recordings and the real logs ------------------------
#
# Every ``usage --by`` grouping adds up to the sessions' own figures; and sessions, audit,
# doctor, watch and usage say the same of whether a session ended, whether it completed, and
# which run of the CLI (segment) each LLM call belongs to. The hand oracle reads the raw lines
# with orjson (recovering what the damaged sample's lines still hold, as docs/damaged-logs.md
# says a reader must); the recordings' truth.json says how each run ended and which calls the
# model server answered in it.

EDGE_SAMPLES = REAL_SAMPLES.parent / "real-samples-edge"
WORK = frozenset(
    {"user.message", "assistant.turn_start", "assistant.message", "tool.execution_start"}
)
"""What a run does while it works (docs/sessions.md, ``status``)."""
FIGURES = ("nano_aiu", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
BY_SESSION = ("day", "week", "month", "model", "repository")
BY_CALL = ("call", "prompt", "agent", "task")

Key = tuple[str, str]


def _parsed(raw: bytes) -> Any:
    try:
        return orjson.loads(raw.rstrip(b"\r"))
    except orjson.JSONDecodeError:
        pass
    try:  # bytes that are not UTF-8, replaced
        return orjson.loads(raw.decode("utf-8", "replace"))
    except orjson.JSONDecodeError:
        pass
    glued = raw.rfind(b'{"type"')  # a cut event with a whole one glued behind it
    if glued > 0:
        try:
            return orjson.loads(raw[glued:])
        except orjson.JSONDecodeError:
            pass
    return None


def raw_events(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The events of each session of the log, read by hand: one JSON object a line (an event
    split by a raw newline joined again), each session from its session.start, each event once
    (a replayed line's id skipped)."""
    found: dict[str, list[dict[str, Any]]] = {}
    session: str | None = None
    seen: set[str] = set()
    physical = path.read_bytes().split(b"\n")
    index = 0
    while index < len(physical):
        raw = physical[index]
        event = _parsed(raw)
        if event is None and index + 1 < len(physical):
            joined_line = _parsed(raw + b"\\n" + physical[index + 1])
            if joined_line is not None:
                event, index = joined_line, index + 1
        index += 1
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            continue
        if event.get("id") in seen:
            continue
        seen.add(str(event.get("id")))
        if event["type"] == "session.start":
            session = str(event["data"].get("sessionId") or session)
        found.setdefault(session or path.stem, []).append(event)
    return found


def main_agent(event: dict[str, Any]) -> bool:
    data = event.get("data")
    return "agentId" not in event and not (isinstance(data, dict) and "parentToolCallId" in data)


def raw_segments(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The runs of the CLI: a new one at each session.resume."""
    runs: list[list[dict[str, Any]]] = [[]]
    for event in events:
        if event["type"] == "session.resume":
            runs.append([])
        runs[-1].append(event)
    return runs


def raw_ended(events: list[dict[str, Any]]) -> bool:
    """The last run wrote a session.shutdown after its last work."""
    last_run = raw_segments(events)[-1]
    kinds = [event["type"] for event in last_run]
    shutdowns = [n for n, kind in enumerate(kinds) if kind == "session.shutdown"]
    work = [n for n, kind in enumerate(kinds) if kind in WORK]
    return bool(shutdowns) and shutdowns[-1] > max(work, default=-1)


def raw_completed(events: list[dict[str, Any]]) -> bool:
    """The session's last main-agent prompt, nudge, LLM call, error or completion is a
    task_complete the CLI accepted (not ``success: false``, not ``continue`` nor ``blocked``)."""
    decisive = ("user.message", "assistant.turn_start", "session.error", "session.task_complete")
    last = [e for e in events if e["type"] in decisive and main_agent(e)][-1:]
    if not last or last[0]["type"] != "session.task_complete":
        return False
    data = last[0]["data"]
    return data.get("success") is not False and data.get("outcome") not in ("continue", "blocked")


def raw_calls_per_run(events: list[dict[str, Any]]) -> list[int]:
    """Main-agent LLM calls (turn_start lines) of each run."""
    return [
        sum(1 for e in run if e["type"] == "assistant.turn_start" and main_agent(e))
        for run in raw_segments(events)
    ]


def _corpus_paths(name: str) -> list[Path]:
    if name == "samples":
        return sorted(
            [*SAMPLES.glob("*/events.jsonl"), *SAMPLES.glob("*.jsonl")], key=lambda p: str(p)
        )
    if name == "recordings":
        from .recorded import _EVERY

        return [r.log for r in _EVERY if r.outcome == "recorded"]
    return sorted([*REAL_SAMPLES.glob("*.jsonl"), *EDGE_SAMPLES.glob("*.jsonl")])


WATCHED_RECORDINGS = ("1.0.20", "1.0.102")
"""watch's state is built per log (a few hundredths of a second each): on the recordings, the
scenarios of the oldest and the newest version and every log of several runs."""


@cache
def told(name: str) -> dict[str, Any]:
    """What every command says of each session of the corpus, from one read of it."""
    from copilot_logs.api import read as read_logs
    from copilot_logs.api import sessions, usage
    from copilot_logs.commands import doctor as doctor_core

    paths = _corpus_paths(name)
    result = read_logs(*paths)

    def keyed(frame: pl.DataFrame) -> dict[Key, dict[str, Any]]:
        return {(r["file"], r["session_id"]): r for r in frame.to_dicts()}

    from copilot_logs.commands.usage import usage as usage_report

    report = usage_report(result)
    said: dict[str, Any] = {
        "paths": paths,
        "raw": {
            (str(path), session): events
            for path in paths
            for session, events in raw_events(path).items()
        },
        "sessions": keyed(sessions(result)),
        "audit": keyed(audit.audit(result, now=LATER, require_task_complete=True)),
        "facts": keyed(audit.facts(result)),
        "doctor": keyed(doctor_core.figures(result.events)),
        "usage": keyed(report.sessions),
        "by": {by: usage(result, by=by).rows for by in (*BY_CALL, *BY_SESSION)},
        "watch": {},
    }
    for path in paths:
        several_runs = b'"type":"session.resume"' in path.read_bytes()
        watched = path.parent.parent.name in WATCHED_RECORDINGS or several_runs
        if name == "recordings" and not watched:
            continue
        follower = watch.Follower((path,), path.stem)
        follower.poll()
        said["watch"][str(path)] = (watch.state(follower), watch.shut_down(follower.result))
    return said


CORPORA = [
    pytest.param("samples", id="samples"),
    pytest.param("recordings", id="recordings", marks=pytest.mark.live),
    pytest.param("real", id="real-samples"),
]


def corpus(name: str) -> dict[str, Any]:
    if name == "real" and not REAL_SAMPLES.is_dir():
        pytest.skip("../shared/real-samples is not here")
    found = told(name)
    assert found["sessions"], f"no session read in {name}"
    return found


def last_session_of_each_file(found: dict[str, Any]) -> dict[str, Key]:
    """watch shows a file as one block: its last session (the one its last line is in)."""
    last: dict[str, Key] = {}
    for path in found["paths"]:
        sessions = list(raw_events(path))
        last[str(path)] = (str(path), sessions[-1])
    return last


@pytest.mark.parametrize("name", CORPORA)
def test_every_usage_grouping_adds_up_to_the_sessions_figures(name: str) -> None:
    """issue 32: per session, the rows of --by call, prompt, agent and task (a 'not
    attributable' row included) sum to its credits, tokens and LLM calls wherever usage knows
    them; the rows of --by day, week, month, model and repository sum to all sessions'."""
    found = corpus(name)
    sessions = found["usage"]
    for by in BY_CALL:
        rows = found["by"][by]
        held: dict[Key, dict[str, float]] = {}
        for row in rows.to_dicts():
            sums = held.setdefault((row["file"], row["session_id"]), dict.fromkeys(FIGURES, 0.0))
            for figure in FIGURES:
                sums[figure] += row[figure] or 0
            calls = (row["source"] != "not attributable") if by == "call" else row["llm_calls"]
            sums["calls"] = sums.get("calls", 0) + calls
        for key, session in sessions.items():
            mine = held.get(key, {})
            assert mine.get("calls", 0) == session["llm_calls"] + session["subagent_calls"], (
                by,
                key,
            )
            for figure in FIGURES:
                if session[figure] is not None:
                    assert mine.get(figure, 0) == pytest.approx(session[figure]), (by, figure, key)
    for by in BY_SESSION:
        rows = found["by"][by]
        # Per model, the calls are the requests its shutdowns count; a session goes whole into
        # one row of the others.
        counts = ("requests",) if by == "model" else ("llm_calls", "subagent_calls")
        for figure in (*FIGURES, "ai_credits", *counts):
            known = [s[figure] for s in sessions.values() if s[figure] is not None]
            assert rows[figure].drop_nulls().sum() == pytest.approx(sum(known)), (by, figure)
        if by != "model":
            assert rows["sessions"].sum() == len(sessions), by


@pytest.mark.parametrize("name", CORPORA)
def test_every_command_says_the_same_of_whether_a_session_ended(name: str) -> None:
    found = corpus(name)
    last = last_session_of_each_file(found)
    for key, row in found["sessions"].items():
        ended = raw_ended(found["raw"][key])
        assert (row["status"] == "ended") is ended, key
        assert found["facts"][key]["file_open"] is not ended, key
        assert found["doctor"][key]["shut_down"] is ended, key
        if key[0] in found["watch"] and last[key[0]] == key:
            state, shut_down = found["watch"][key[0]]
            assert (state.ended, shut_down) == (ended, ended), key


@pytest.mark.parametrize("name", CORPORA)
def test_every_command_says_the_same_of_whether_a_session_completed(name: str) -> None:
    found = corpus(name)
    last = last_session_of_each_file(found)
    tasks: dict[Key, list[tuple[int, bool]]] = {}
    for row in found["by"]["task"].filter(pl.col("source") != "not attributable").to_dicts():
        tasks.setdefault((row["file"], row["session_id"]), []).append(
            (row["task_index"], row["completed"])
        )
    for key, row in found["sessions"].items():
        completed = raw_completed(found["raw"][key])
        assert row["task_complete"] is completed, key
        assert (found["audit"][key]["verdict"] == "completed") is completed, key
        if key in tasks:
            assert max(tasks[key])[1] is completed, key
        if key[0] in found["watch"] and last[key[0]] == key:
            state, _ = found["watch"][key[0]]
            assert state.task_complete is completed, key


@pytest.mark.parametrize("name", CORPORA)
def test_every_command_puts_each_call_in_the_same_run(name: str) -> None:
    """A session has one segment per run (session.resume lines + 1); each segment's main-agent
    calls are the turn_start lines of that run, in usage's session row and in --by call."""
    found = corpus(name)
    calls = found["by"]["call"].filter(
        (pl.col("source") != "not attributable") & pl.col("agent_id").is_null()
    )
    per_segment: dict[Key, dict[int, int]] = {}
    for row in calls.to_dicts():
        mine = per_segment.setdefault((row["file"], row["session_id"]), {})
        mine[row["segment"]] = mine.get(row["segment"], 0) + 1
    for key, session in found["usage"].items():
        by_hand = raw_calls_per_run(found["raw"][key])
        segments = session["segments"]
        assert [s["segment"] for s in segments] == list(range(1, len(by_hand) + 1)), key
        assert [s["llm_calls"] for s in segments] == by_hand, key
        counted = per_segment.get(key, {})
        assert [counted.get(n, 0) for n in range(1, len(by_hand) + 1)] == by_hand, key


@pytest.mark.live
def test_the_recordings_say_what_the_model_server_saw_of_each_run() -> None:
    """The rig's truth: a run that exited on its own wrote its shutdown (ended) and a killed
    one did not; one segment per run, with the calls the server answered in that run (where
    the truth says which run each request came in); completed exactly where the scenario
    expects the verdict ``completed``."""
    from .recorded import _EVERY

    found = corpus("recordings")
    checked = {"ended": 0, "runs": 0, "completed": 0}
    for recording in (r for r in _EVERY if r.outcome == "recorded"):
        (key,) = [k for k in found["sessions"] if k[0] == str(recording.log)]
        last_run = recording.runs[-1]
        if not last_run.get("killed") and not last_run.get("interrupted"):
            assert found["sessions"][key]["status"] == "ended", recording.id
            checked["ended"] += 1
        segments = found["usage"][key]["segments"]
        assert len(segments) == len(recording.runs), recording.id
        if all("run" in request for request in recording.truth["requests"]):
            served = [len(recording.served_in(run)) for run in range(len(recording.runs))]
            assert [s["llm_calls"] + s["subagent_calls"] for s in segments] == served
            checked["runs"] += 1
        expected = recording.truth["expect"].get("verdict")
        if expected not in (None, "interactive"):
            assert found["sessions"][key]["task_complete"] is (expected == "completed"), (
                recording.id
            )
            checked["completed"] += 1
    assert all(checked.values()), checked


# --- timeline: what became of a turn or tool left open --------------------------------------
#
# docs/timeline.md and the model (derive.open_state): open at a shutdown of its own run (the
# user quit while it ran); interrupted when its run was killed and a later run resumed the
# session (the CLI's own shape: no version closes the killed turn; 1.0.102 closes the killed
# tool with the error code ``interrupted``); else open (running, or cut off).


def turn_states(b: SessionBuilder) -> list[tuple[bool, bool, bool, list[str], list[bool]]]:
    """Per main-agent turn: open, open at shutdown, interrupted, its tools' status and their
    open-at-shutdown flags."""
    from copilot_logs.api import timeline

    (session,) = timeline(read(b))
    return [
        (
            turn["open"],
            turn["open_at_shutdown"],
            turn["interrupted"],
            [tool["status"] for tool in turn["tools"]],
            [tool["open_at_shutdown"] for tool in turn["tools"]],
        )
        for interaction in session["interactions"]
        for turn in interaction["turns"]
    ]


CLOSED_TURN = (False, False, False, ["ok"], [False])


def test_a_turn_killed_and_resumed_is_interrupted_not_open_at_the_next_runs_shutdown() -> None:
    b = SessionBuilder(seed=21)
    b.user_message("Deploy.")
    b.turn("Checking.", [bash("make check", "ok")])
    b.turn("Deploying.", [bash("make deploy", never_completes=True)], end=False)
    b.resume()
    b.user_message("Go on.")
    b.turn("Deployed.", [bash("make deploy", "ok")])
    b.shutdown()
    assert turn_states(b) == [
        CLOSED_TURN,
        (True, False, True, ["interrupted"], [False]),
        CLOSED_TURN,
    ]


def test_a_tool_the_cli_closed_as_interrupted_on_resume_is_interrupted() -> None:
    """CLI 1.0.102 writes a failed complete with the error code ``interrupted`` on resume."""
    b = SessionBuilder(seed=22, copilot_version="1.0.102")
    b.user_message("Deploy.")
    record = b.turn("Deploying.", [bash("make deploy", never_completes=True)], end=False)
    b.resume()
    (call,) = record.tool_call_ids
    b.event(
        "tool.execution_complete",
        {"toolCallId": call, "success": False, "error": {"message": "x", "code": "interrupted"}},
    )
    b.user_message("Go on.")
    b.turn("Deployed.", [bash("make deploy", "ok")])
    b.shutdown()
    assert turn_states(b) == [(True, False, True, ["interrupted"], [False]), CLOSED_TURN]


def test_a_turn_open_at_its_own_runs_shutdown_is_open_at_shutdown() -> None:
    b = SessionBuilder(seed=23)
    b.user_message("Delete the build folder.")
    b.turn("Deleting.", [bash("rm -rf build", never_completes=True)], end=False)
    b.shutdown()
    assert turn_states(b) == [(True, True, False, ["open"], [True])]


def test_a_turn_cut_off_is_open_and_nothing_else() -> None:
    b = SessionBuilder(seed=24)
    b.user_message("Deploy.")
    b.turn("Deploying.", [bash("make deploy", never_completes=True)], end=False)
    assert turn_states(b) == [(True, False, False, ["open"], [False])]


def test_open_at_its_runs_shutdown_comes_before_interrupted() -> None:
    """A run that shut down with a tool open, worked on (no resume line between), and was
    killed and resumed: the tool was open at a shutdown of its own run, whatever came after."""
    b = SessionBuilder(seed=25)
    b.user_message("Delete the build folder.")
    b.turn("Deleting.", [bash("rm -rf build", never_completes=True)], end=False)
    b.shutdown()
    b._open_turn = None  # the next prompt of the same run (no turn_end was written)
    b.user_message("Again.")
    b.turn("Deleting again.", [bash("rm -rf dist", never_completes=True)], end=False)
    b.resume()
    b.user_message("Go on.")
    b.turn("Done.")
    b.shutdown()
    assert turn_states(b) == [
        (True, True, False, ["open"], [True]),
        (True, False, True, ["interrupted"], [False]),
        (False, False, False, [], []),
    ]


# --- what a completion decided, the one definition ------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"success": True}, "completed", id="success"),
        pytest.param({"success": True, "outcome": "completed"}, "completed", id="completed"),
        pytest.param({}, "completed", id="no-success"),  # not written: not false
        pytest.param({"success": False}, "completion-rejected", id="success-false"),
        pytest.param(
            {"success": True, "outcome": "continue"}, "completion-rejected", id="continue"
        ),
        pytest.param({"outcome": "blocked", "blocker": BLOCKER}, "blocked", id="blocked"),
    ],
)
def test_what_a_completion_decided_is_read_the_same_everywhere(
    tmp_path: Path, data: dict[str, Any], expected: str
) -> None:
    """docs/audit.md: accepted unless ``success: false`` or the outcome ``continue``
    (rejected) or ``blocked``; only an accepted one completes the task, in every command."""
    b = autopilot(seed=12)
    b.turn("Fixing.", [bash("make fix", "ok")])
    b.turn("", [ToolCall("task_complete", {"summary": "Fixed."}, result="Fixed.")], end=False)
    b.event("session.task_complete", {"summary": "Fixed.", **data}, after_ms=1)
    b.end_turn()
    b.shutdown()
    done = expected == "completed"
    said = every_command(b, tmp_path)
    assert said == {
        "verdict": expected,
        "looping": (False, []),
        "sessions": [done],
        "watch": (done, True),
        "tasks": [(1, 2, done)],
    }


# --- ended and completed, on hand-built logs, in every command ------------------------------


def story(data: bytes, tmp_path: Path) -> dict[str, Any]:
    """Per command, what it says of each session of the log (in file order), and watch's
    state of the file (its last session)."""
    from copilot_logs.api import read_file, sessions, usage
    from copilot_logs.commands import doctor as doctor_core

    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    result = read_file(path)
    order = list(raw_events(path))

    def in_order(frame: pl.DataFrame, column: str) -> list[Any]:
        values = dict(zip(frame["session_id"], frame[column], strict=True))
        return [values[session] for session in order]

    judged = audit.audit(result, now=LATER, require_task_complete=True)
    tasks = usage(result, by="task").rows.filter(pl.col("source") != "not attributable")
    last_task = {
        session: group.sort("task_index")["completed"][-1]
        for (session,), group in tasks.group_by("session_id")
    }
    follower = watch.Follower((path,), "s")
    follower.poll()
    state = watch.state(follower)
    assert state is not None
    return {
        "ended": {
            "sessions": [s == "ended" for s in in_order(sessions(result), "status")],
            "audit": [not o for o in in_order(audit.facts(result), "file_open")],
            "doctor": in_order(doctor_core.figures(result.events), "shut_down"),
            "watch": (state.ended, watch.shut_down(follower.result)),
        },
        "completed": {
            "sessions": in_order(sessions(result), "task_complete"),
            "audit": [v == "completed" for v in in_order(judged, "verdict")],
            "usage": [last_task.get(session, False) for session in order],
            "watch": state.task_complete,
        },
    }


def done_and_shut(seed: int, session_id: str) -> SessionBuilder:
    b = SessionBuilder(seed=seed, session_id=session_id)
    b.user_message("Tidy the imports.")
    b.turn("Tidying.", [bash("ruff check --fix", "ok")])
    complete(b, "Tidied.")
    b.shutdown()
    return b


def cut_in_a_turn(seed: int, session_id: str) -> SessionBuilder:
    b = SessionBuilder(seed=seed, session_id=session_id)
    b.user_message("Tidy the imports.")
    b.turn("Tidying.", [bash("ruff check --fix", never_completes=True)], end=False)
    return b


def test_ended_and_completed_are_one_answer_on_hand_built_logs(tmp_path: Path) -> None:
    shut = done_and_shut(31, FINISHED)
    resumed_worked = done_and_shut(32, FINISHED)
    resumed_worked.resume()
    resumed_worked.user_message("One more thing.")
    resumed_worked.turn("Looking.")
    no_resume_line = done_and_shut(33, FINISHED)
    no_resume_line.user_message("One more thing.")
    # (A call, so that the new task is a row of usage --by task: a prompt that made no call
    # has none, and the task before it, completed, would be usage's last.)
    no_resume_line.turn("Looking.")
    resumed_idle = done_and_shut(34, FINISHED)
    resumed_idle.resume()
    killed = cut_in_a_turn(35, FINISHED)
    killed.resume()
    killed.user_message("Go on.")
    complete(killed, "Tidied.")
    killed.shutdown()
    quit_ = cut_in_a_turn(36, FINISHED)
    quit_.shutdown()

    def one(ended: bool, completed: bool) -> dict[str, Any]:
        return {
            "ended": {
                "sessions": [ended],
                "audit": [ended],
                "doctor": [ended],
                "watch": (ended, ended),
            },
            "completed": {
                "sessions": [completed],
                "audit": [completed],
                "usage": [completed],
                "watch": completed,
            },
        }

    assert story(shut.to_bytes(), tmp_path) == one(True, True)
    assert story(resumed_worked.to_bytes(), tmp_path) == one(False, False)
    assert story(no_resume_line.to_bytes(), tmp_path) == one(False, False)
    assert story(resumed_idle.to_bytes(), tmp_path) == one(False, True)
    assert story(killed.to_bytes(), tmp_path) == one(True, True)
    assert story(quit_.to_bytes(), tmp_path) == one(True, False)


def test_watch_shows_the_last_session_of_a_file_of_two(tmp_path: Path) -> None:
    """A recorder's copy of two sessions: each command judges each; watch's state is the
    last session's (the one its last line is in)."""
    done = done_and_shut(41, FINISHED)
    cut = cut_in_a_turn(42, CUT_OFF)
    assert story(done.to_bytes() + cut.to_bytes(), tmp_path) == {
        "ended": {
            "sessions": [True, False],
            "audit": [True, False],
            "doctor": [True, False],
            "watch": (False, False),
        },
        "completed": {
            "sessions": [True, False],
            "audit": [True, False],
            "usage": [True, False],
            "watch": False,
        },
    }
    cut = cut_in_a_turn(42, CUT_OFF)
    done = done_and_shut(41, FINISHED)
    assert story(cut.to_bytes() + done.to_bytes(), tmp_path) == {
        "ended": {
            "sessions": [False, True],
            "audit": [False, True],
            "doctor": [False, True],
            "watch": (True, True),
        },
        "completed": {
            "sessions": [False, True],
            "audit": [False, True],
            "usage": [False, True],
            "watch": True,
        },
    }
