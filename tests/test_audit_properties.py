"""Property tests of `audit`: generated autopilot runs get the verdict their shape implies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from copilot_logs.cli import main
from copilot_logs.commands.audit import FAILING_VERDICTS, audit
from copilot_logs.ingest.reader import read_bytes
from synth import SessionBuilder, bash, join_lines

LATER = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Run:
    """A generated autopilot run: tool turns per loop (the first loop, then one per nudge),
    which nudges carry isAutopilotContinuation, and the bytes of the log."""

    loops: tuple[int, ...]
    flagged: tuple[bool, ...]
    lines: tuple[bytes, ...]

    @property
    def nudges(self) -> int:
        return len(self.loops) - 1

    @property
    def data(self) -> bytes:
        return join_lines(self.lines)

    def index_of(self, kind: str) -> int:
        """0-based position of the first line of that event type."""
        return next(i for i, line in enumerate(self.lines) if orjson.loads(line)["type"] == kind)

    def without(self, kind: str) -> bytes:
        drop = self.index_of(kind)
        return join_lines([line for i, line in enumerate(self.lines) if i != drop])


@st.composite
def autopilot_runs(draw: st.DrawFn) -> Run:
    nudges = draw(st.integers(min_value=0, max_value=7))
    loops = tuple(draw(st.lists(st.integers(0, 2), min_size=nudges + 1, max_size=nudges + 1)))
    flagged = tuple(draw(st.lists(st.booleans(), min_size=nudges, max_size=nudges)))
    b = SessionBuilder(seed=draw(st.integers(0, 2**16)))
    b.mode_changed("autopilot")
    b.user_message("Finish the migration.")
    for index, tool_turns in enumerate(loops):
        if index:
            b.nudge(flagged=flagged[index - 1])
        for step in range(tool_turns):
            b.turn("Working.", [bash(f"make step{step}", "ok")])
        if index < nudges:
            b.turn("That should be it.")
    b.task_complete_turn("Migrated.")
    b.shutdown()
    return Run(loops, flagged, tuple(b.lines()))


def judge(data: bytes, *, nudge_cap: int = 5, now: datetime = LATER) -> dict[str, Any]:
    return audit(read_bytes(data, "run.jsonl"), now=now, nudge_cap=nudge_cap).row(0, named=True)


@settings(max_examples=60, deadline=None)
@given(autopilot_runs())
def test_a_run_ending_in_task_complete_is_completed_with_its_nudges(run: Run) -> None:
    row = judge(run.data)
    assert row["verdict"] == "completed"
    assert row["mode"] == "autopilot"
    assert row["autopilot_nudges"] == row["task_nudges"] == run.nudges
    assert row["user_prompts"] == 1
    after_nudges = run.loops[1:]
    # Each nudged loop but the last ends with a text turn; the last ends with task_complete.
    expected_turns = sum(after_nudges) + len(after_nudges) if run.nudges else 0
    expected_tools = sum(after_nudges) + 1 if run.nudges else 0
    assert row["turns_after_first_nudge"] == expected_turns
    assert row["tool_calls_after_first_nudge"] == expected_tools


@settings(max_examples=60, deadline=None)
@given(autopilot_runs(), st.integers(min_value=1, max_value=6))
def test_without_the_task_complete_line_it_is_missing_or_capped(run: Run, cap: int) -> None:
    row = judge(run.without("session.task_complete"), nudge_cap=cap)
    assert row["verdict"] == ("nudge-cap" if run.nudges >= cap else "missing-task-complete")
    assert row["autopilot_nudges"] == run.nudges
    assert row["task_complete_summary"] is None


@settings(max_examples=40, deadline=None)
@given(
    autopilot_runs(),
    st.booleans(),
    st.sets(st.sampled_from(FAILING_VERDICTS)),
)
def test_the_exit_code_follows_fail_on(run: Run, drop: bool, fail_on: set[str]) -> None:
    data = run.without("session.task_complete") if drop else run.data
    verdict = "completed" if not drop else ("nudge-cap" if run.nudges >= 5 else None)
    verdict = verdict or "missing-task-complete"
    result = CliRunner().invoke(
        main,
        ["audit", "-", "--format", "json", "--fail-on", ",".join(sorted(fail_on)) or "none"],
        input=data,
    )
    assert [row["verdict"] for row in orjson.loads(result.stdout)] == [verdict]
    assert result.exit_code == (1 if verdict in fail_on else 0), result.output


@settings(max_examples=60, deadline=None)
@given(autopilot_runs(), st.data(), st.integers(min_value=1, max_value=6))
def test_a_log_cut_before_task_complete_never_completes(
    run: Run, data: st.DataObject, cap: int
) -> None:
    first = run.index_of("user.message")
    end = data.draw(
        st.integers(min_value=first + 1, max_value=run.index_of("session.task_complete"))
    )
    kept = run.lines[:end]
    events = [orjson.loads(line) for line in kept]
    markers = [e["type"] for e in events if e["type"].startswith("assistant.turn_")]
    turn_open = bool(markers) and markers[-1] == "assistant.turn_start"
    nudges = sum(1 for e in events if e["type"] == "user.message") - 1
    expected = "nudge-cap" if not turn_open and nudges >= cap else "interrupted"
    assert judge(join_lines(kept), nudge_cap=cap)["verdict"] == expected
    last = datetime.fromisoformat(events[-1]["timestamp"])
    recent = judge(join_lines(kept), nudge_cap=cap, now=last + timedelta(minutes=1))
    assert recent["verdict"] == ("running" if expected == "interrupted" else expected)
