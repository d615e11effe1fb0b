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
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from copilot_logs.api import read_bytes
from copilot_logs.commands import audit, watch
from copilot_logs.ingest.reader import ReadResult
from synth import SessionBuilder, ToolCall, bash

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
        shutdown_then_resumed_call, False, "interrupted", "missing-task-complete", id="shutdown<turn"
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
