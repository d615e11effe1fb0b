"""Generated valid sessions validate clean; one random damage gives its rule at its line.

Sessions come from a hypothesis strategy over plans (prompts and autopilot nudges; turns with
sequential or parallel tools, failing tools, sub-agents that complete or fail, provider errors,
task_complete; `!cmd` escapes, checkpoints, compactions, shutdown and resume) built with
``synth.SessionBuilder``. Each damage (a lost, replayed, reordered, cut, split,
glued, blank, CRLF, NUL-padded or non-UTF-8 line) is applied to the clean lines and names
exactly the (code, line) findings it must produce, no more and no fewer; the strict gate must
then fail with exit code 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synth
from copilot_logs.cli import main
from copilot_logs.commands import validate
from copilot_logs.ingest.reader import read_bytes
from synth import SessionBuilder, ToolCall, bash, subagent_plan, task, view

# --- plans of valid sessions -------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    kind: str  # "bash", "view" or "task"
    failed: bool = False
    subagent_calls: int = 0
    subagent_tools: int = 0


@dataclass(frozen=True)
class Turn:
    kind: str  # "tools", "error", "task_complete"
    tools: tuple[Tool, ...] = ()
    parallel: bool = False


@dataclass(frozen=True)
class Interaction:
    nudge: bool
    turns: tuple[Turn, ...]
    after: tuple[str, ...]  # "shell", "checkpoint", "compaction", "resume", "model"


TOOLS = st.one_of(
    st.builds(Tool, st.sampled_from(["bash", "view"]), st.booleans()),
    st.builds(
        Tool,
        st.just("task"),
        st.booleans(),
        st.integers(0, 2),
        st.integers(0, 2),
    ),
)
TURNS = st.one_of(
    st.builds(
        Turn, st.just("tools"), st.lists(TOOLS, min_size=1, max_size=3).map(tuple), st.booleans()
    ),
    st.just(Turn("error")),
    st.just(Turn("task_complete")),
)
INTERACTIONS = st.builds(
    Interaction,
    st.booleans(),
    st.lists(TURNS, min_size=0, max_size=3).map(tuple),
    st.lists(
        st.sampled_from(["shell", "checkpoint", "compaction", "resume", "model"]), max_size=2
    ).map(tuple),
)
PLANS = st.lists(INTERACTIONS, min_size=1, max_size=4)


def _tool(spec: Tool, index: int) -> ToolCall:
    if spec.kind == "task":
        llm_calls = spec.subagent_calls or (1 if spec.subagent_tools else 0)
        error = "the sub-agent gave up" if spec.failed else None
        sub = subagent_plan(llm_calls, spec.subagent_tools, error=error)
        return task(f"sub-task {index}", subagent=sub)
    if spec.kind == "view":
        return view(f"src/m{index}.py", "x = 1", success=not spec.failed)
    return bash(f"make step{index}", "ok", success=not spec.failed)


def build(plan: list[Interaction], seed: int) -> SessionBuilder:
    b = SessionBuilder(seed=seed)
    for number, interaction in enumerate(plan):
        if interaction.nudge and number > 0:
            if b.mode != "autopilot":
                b.mode_changed("autopilot")
            b.nudge()
        else:
            b.user_message(f"prompt {number}")
        finished = False
        for turn in interaction.turns:
            if turn.kind == "error":
                b.turn(None)
                b.session_error("provider unreachable", status_code=503)
                finished = True
                break
            if turn.kind == "task_complete":
                b.task_complete_turn(f"done with prompt {number}")
                finished = True
                break
            calls = [_tool(spec, i) for i, spec in enumerate(turn.tools)]
            b.turn("working", calls, parallel=turn.parallel)
        if not finished:
            b.turn(f"answer {number}")
        for step in interaction.after:
            if step == "shell":
                b.user_requested_shell("git status", "clean")
            elif step == "checkpoint":
                b.usage_checkpoint()
            elif step == "compaction":
                b.compaction(12_000)
            elif step == "model":
                b.model_change("claude-sonnet-4.5")
            else:
                b.shutdown()
                b.resume()
    b.shutdown()
    return b


# --- damage ------------------------------------------------------------------------------------

Expected = set[tuple[str, int | None]]
Damage = Callable[[st.DataObject, list[bytes], list[dict[str, object]]], tuple[bytes, Expected]]


def _main(event: dict[str, object], kind: str) -> bool:
    return event["type"] == kind and "agentId" not in event


def _shutdowns_after(events: list[dict[str, object]], index: int, shift: int) -> Expected:
    """R602 on every shutdown and resume after a change of size at ``index``: each one's
    ``eventsFileSizeBytes`` names a byte offset the change moved."""
    return {
        ("R602", later + 1 + shift)
        for later in range(index + 1, len(events))
        if events[later]["type"] in ("session.shutdown", "session.resume")
    }


def _resumes_after(events: list[dict[str, object]], index: int, shift: int) -> Expected:
    """R601 on every resume after a line lost (or added) at ``index``: its ``eventCount`` no
    longer matches the lines before it."""
    return {
        ("R601", later + 1 + shift)
        for later in range(index + 1, len(events))
        if events[later]["type"] == "session.resume"
    }


def drop_turn_end(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    ends = [i for i, e in enumerate(events) if _main(e, "assistant.turn_end")]
    k = data.draw(st.sampled_from(ends), label="dropped turn_end")
    start = max(i for i in range(k) if _main(events[i], "assistant.turn_start"))
    # A session.resume starts a new run of the CLI (derive's segment): the open turn belongs
    # to the run it was written in, and only that run's next turn_start finds it open.
    run_end = next(
        (i for i in range(k + 1, len(events)) if events[i]["type"] == "session.resume"),
        len(events),
    )
    following = [i for i in range(k + 1, run_end) if _main(events[i], "assistant.turn_start")]
    # The line after the gap points at the lost line; the run's next turn_start finds a turn
    # open (T202). With none left in the run, the turn stays open to the run's end: T205 when
    # a shutdown follows in that run (the user quitting with the turn open), T206 when the run
    # ended without one and a later run resumed the session, else T204.
    if following:
        turn_rule: tuple[str, int | None] = ("T202", following[0])
    elif any(e["type"] == "session.shutdown" for e in events[k + 1 : run_end]):
        turn_rule = ("T205", start + 1)
    else:
        turn_rule = ("T206" if run_end < len(events) else "T204", start + 1)
    expected = {("E104", k + 1), turn_rule} | _shutdowns_after(events, k, -1)
    expected |= _resumes_after(events, k, -1)
    return synth.join_lines(lines[:k] + lines[k + 1 :]), expected


def drop_tool_complete(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    completes = [
        i
        for i, e in enumerate(events)
        if e["type"] == "tool.execution_complete" and not e["data"].get("isUserRequested")  # type: ignore[attr-defined]
    ]
    k = data.draw(st.sampled_from(completes), label="dropped complete")
    call = events[k]["data"]["toolCallId"]  # type: ignore[index]
    start = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "tool.execution_start" and e["data"]["toolCallId"] == call  # type: ignore[index]
    )
    expected = {("X302", start + 1), ("E104", k + 1)} | _shutdowns_after(events, k, -1)
    expected |= _resumes_after(events, k, -1)
    return synth.join_lines(lines[:k] + lines[k + 1 :]), expected


def duplicate_line(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    k = data.draw(st.integers(0, len(lines) - 1), label="duplicated line")
    damaged = lines[:k] + list(synth.duplicate(lines[k])) + lines[k + 1 :]
    expected = {("E103", k + 2)} | _shutdowns_after(events, k, 1) | _resumes_after(events, k, 1)
    return synth.join_lines(damaged), expected


def swap_timestamps(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    i = data.draw(st.integers(0, len(lines) - 2), label="earlier line")
    j = data.draw(st.integers(i + 1, len(lines) - 1), label="later line")
    first, second = dict(events[i]), dict(events[j])
    first["timestamp"], second["timestamp"] = events[j]["timestamp"], events[i]["timestamp"]
    damaged = list(lines)
    damaged[i], damaged[j] = orjson.dumps(first), orjson.dumps(second)
    # Every line whose time is earlier than the line before it: line j (the earliest of the
    # two times, after a later one) and, when the swapped lines are not next to each other,
    # line i + 1 (now behind the latest time). Same-format ISO strings order as times.
    stamps = [str(e["timestamp"]) for e in events]
    stamps[i], stamps[j] = stamps[j], stamps[i]
    backwards = {("E105", n + 1) for n in range(1, len(stamps)) if stamps[n] < stamps[n - 1]}
    assert ("E105", j + 1) in backwards
    return synth.join_lines(damaged), backwards


def cut_file(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    # Cut where nothing is under way, so the cut is the only finding: a cut inside a turn
    # also leaves that turn (and its tools, its sub-agents) open, which other tests cover.
    k = data.draw(st.sampled_from(_quiet_lines(events)), label="cut line")
    keep = data.draw(st.integers(1, len(lines[k]) - 1), label="bytes kept")
    damaged = synth.join_lines(lines[:k]) + lines[k][:keep]
    # With the first line cut, nothing is left to read: the file holds no event (E118).
    nothing_left = {("E118", None)} if k == 0 else set()
    if data.draw(st.booleans(), label="NUL tail after the cut"):
        # The crash padded the cut line with NULs: still the cut line, now NUL-padded too.
        return synth.nul_tail(damaged, data.draw(st.integers(1, 64))), {
            ("E110", k + 1),
            ("E115", k + 1),
            *nothing_left,
        }
    return damaged, {("E110", k + 1), *nothing_left}


def _quiet_lines(events: list[dict[str, object]]) -> list[int]:
    """Indexes of the lines before which no turn, tool call or sub-agent is open."""
    quiet = []
    open_turn = False
    pending: set[object] = set()
    for index, event in enumerate(events):
        if not open_turn and not pending:
            quiet.append(index)
        payload = event["data"]
        assert isinstance(payload, dict)
        if _main(event, "assistant.turn_start"):
            open_turn = True
        elif _main(event, "assistant.turn_end"):
            open_turn = False
        elif event["type"] in ("tool.execution_start", "subagent.started"):
            pending.add((event["type"], payload["toolCallId"]))
        elif event["type"] == "tool.execution_complete":
            pending.discard(("tool.execution_start", payload["toolCallId"]))
        elif event["type"] in ("subagent.completed", "subagent.failed"):
            pending.discard(("subagent.started", payload["toolCallId"]))
    return quiet


def nul_tail(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    count = data.draw(st.integers(1, 200), label="NUL bytes")
    # After the last newline: the NULs are a physical line of their own.
    return synth.nul_tail(synth.join_lines(lines), count), {("E115", len(lines) + 1)}


def blank_line(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    k = data.draw(st.integers(0, len(lines) - 1), label="blank line before")
    blank = synth.blank_line(data.draw(st.sampled_from([b"", b" ", b"\t", b"  \t "])))
    damaged = [*lines[:k], blank, *lines[k:]]
    # Every later line moves down one; the shutdown at k itself now starts further on.
    return synth.join_lines(damaged), {("E116", k + 1)} | _shutdowns_after(events, k - 1, 1)


def crlf_line(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    k = data.draw(st.integers(0, len(lines) - 1), label="CRLF line")
    damaged = [*lines[:k], synth.crlf(lines[k]), *lines[k + 1 :]]
    return synth.join_lines(damaged), {("E114", k + 1)} | _shutdowns_after(events, k, 0)


def _with_text(lines: list[bytes]) -> list[int]:
    """Indexes of the lines holding a free-text value the synth payload helpers can damage."""
    found = []
    for index, line in enumerate(lines):
        try:
            synth.invalid_utf8(line)
        except ValueError:
            continue
        found.append(index)
    return found


def split_event(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    k = data.draw(st.sampled_from(_with_text(lines)), label="split line")
    first, second = synth.split_line(lines[k])
    damaged = [*lines[:k], first, second, *lines[k + 1 :]]
    # Both halves are reported; the raw newline adds a byte and a line.
    expected = {("E112", k + 1), ("E112", k + 2)}
    return synth.join_lines(damaged), expected | _shutdowns_after(events, k, 1)


def invalid_utf8(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    k = data.draw(st.sampled_from(_with_text(lines)), label="line with a bad byte")
    bad = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xe9", b"\x80"]), label="bad byte")
    damaged = [*lines[:k], synth.invalid_utf8(lines[k], bad), *lines[k + 1 :]]
    return synth.join_lines(damaged), {("E113", k + 1)} | _shutdowns_after(events, k, 0)


def glue_replayed(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    """A write cut short, then the same event written whole behind it on the same line: the
    event is recovered (nothing lost), the line is reported as truncated."""
    k = data.draw(st.integers(0, len(lines) - 1), label="glued line")
    keep = data.draw(st.integers(1, len(lines[k]) - 1), label="bytes of the cut copy")
    damaged = [*lines[:k], synth.glue_truncated(lines[k], lines[k], keep=keep), *lines[k + 1 :]]
    # The recovered event starts `keep` bytes into its line: a shutdown or resume glued so no
    # longer sits at the offset it records (hence from k, not after it).
    return synth.join_lines(damaged), {("E111", k + 1)} | _shutdowns_after(events, k - 1, 0)


def reorder_turns(
    data: st.DataObject, lines: list[bytes], events: list[dict[str, object]]
) -> tuple[bytes, Expected]:
    starts = [i for i, e in enumerate(events) if _main(e, "assistant.turn_start")]
    blocks = [
        (s, next(i for i in range(s, len(events)) if _main(events[i], "assistant.turn_end")))
        for s in starts
    ]
    a = data.draw(st.integers(0, len(blocks) - 2), label="first turn")
    b = data.draw(st.integers(a + 1, len(blocks) - 1), label="second turn")
    (a1, a2), (b1, b2) = blocks[a], blocks[b]
    damaged = [
        *lines[:a1],
        *lines[b1 : b2 + 1],
        *lines[a2 + 1 : b1],
        *lines[a1 : a2 + 1],
        *lines[b2 + 1 :],
    ]
    # The later turn now opens where the earlier one did: its parentId names another line.
    assert ("E104", a1 + 1) in _envelope_faults(damaged)
    return synth.join_lines(damaged), _envelope_faults(damaged)


def _envelope_faults(lines: list[bytes]) -> Expected:
    """What whole events moved around break, read off the damaged lines by hand: each line
    whose parentId is not the previous line's id (E104) or whose time is before the previous
    line's (E105), and each shutdown or resume whose recorded size is not its own byte offset
    (R602) or, for a resume, whose event count is not the number of lines before it (R601)."""
    faults: Expected = set()
    offset = 0
    previous: dict[str, object] | None = None
    for index, line in enumerate(lines):
        event = orjson.loads(line)
        number = index + 1
        if event["parentId"] != (previous["id"] if previous else None):
            faults.add(("E104", number))
        if previous is not None and event["timestamp"] < previous["timestamp"]:
            faults.add(("E105", number))
        if event["type"] in ("session.shutdown", "session.resume"):
            if event["data"]["eventsFileSizeBytes"] != offset:
                faults.add(("R602", number))
            if event["type"] == "session.resume" and event["data"]["eventCount"] != index:
                faults.add(("R601", number))
        offset += len(line) + 1
        previous = event
    return faults


DAMAGES: list[Damage] = [
    drop_turn_end,
    drop_tool_complete,
    duplicate_line,
    swap_timestamps,
    cut_file,
    reorder_turns,
    nul_tail,
    blank_line,
    crlf_line,
    split_event,
    invalid_utf8,
    glue_replayed,
]


def has_tool_completes(b: SessionBuilder) -> bool:
    return any(
        e["type"] == "tool.execution_complete" and not e["data"].get("isUserRequested")
        for e in b.events
    )


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=PLANS, seed=st.integers(0, 10_000))
def test_generated_sessions_validate_clean(plan: list[Interaction], seed: int) -> None:
    b = build(plan, seed)
    result = read_bytes(b.to_bytes(), f"/state/{b.session_id}/events.jsonl")
    report = validate.validate(result, strict=True)
    assert report.findings.is_empty(), report.findings.select("line", "code", "message").rows()
    assert not report.failed


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=PLANS, seed=st.integers(0, 10_000), damage=st.sampled_from(DAMAGES), data=st.data())
def test_one_damage_gives_its_rule_at_its_line(
    plan: list[Interaction], seed: int, damage: Damage, data: st.DataObject
) -> None:
    b = build(plan, seed)
    if damage is drop_tool_complete and not has_tool_completes(b):
        plan = [Interaction(False, (Turn("tools", (Tool("bash"),)),), ())]
        b = build(plan, seed)
    if damage is reorder_turns and len(plan) < 2:
        b = build([*plan, Interaction(False, (), ())], seed)
    damaged, expected = damage(data, b.lines(), b.events)

    # --strict: some damages are warnings only (E112-E116), and must fail the gate too.
    result = CliRunner().invoke(
        main, ["validate", "-", "--strict", "--format", "json"], input=damaged
    )
    findings = orjson.loads(result.stdout)["findings"]
    gave_no_event = any(f["code"] == "E118" for f in findings)  # a cut left nothing to read
    assert result.exit_code == (3 if gave_no_event else 1), result.output
    found = {(f["code"], f["line"]) for f in findings}
    assert found == expected, (damage.__name__, sorted(found), sorted(expected))


@pytest.mark.parametrize("keep", [1, 9, 200, -1])
@pytest.mark.parametrize("prompt_size", [0, 50_000])
def test_a_glued_system_message_is_reported_like_any_line(keep: int, prompt_size: int) -> None:
    """The system.message glued behind a cut copy of itself (once left out of glue_replayed
    as a reader gap): line 3 is reported as truncated, the event kept, and the shutdown after
    it no longer sits at the offset it records. Expected by hand: the builder writes
    session.start, session.model_change, then the system.message before the first prompt."""
    b = SessionBuilder(seed=3, system_prompt_size=prompt_size)
    b.user_message("prompt 0")
    b.turn("done")
    b.shutdown()
    lines = b.lines()
    assert b.events[2]["type"] == "system.message"
    cut = keep % len(lines[2])
    damaged = [*lines[:2], synth.glue_truncated(lines[2], lines[2], keep=cut), *lines[3:]]
    result = read_bytes(synth.join_lines(damaged), f"/state/{b.session_id}/events.jsonl")
    report = validate.validate(result, strict=True)
    found = set(report.findings.select("code", "line").iter_rows())
    shutdown_line = len(lines)
    assert found == {("E111", 3), ("R602", shutdown_line)}
    assert result.events["type"].to_list() == [e["type"] for e in b.events]


def test_generator_covers_the_features() -> None:
    """One hand-picked plan holds every feature the strategy draws from, and is clean."""
    plan = [
        Interaction(
            False,
            (
                Turn("tools", (Tool("bash"), Tool("view", failed=True)), parallel=True),
                Turn("tools", (Tool("task", False, 2, 2), Tool("task", True, 0, 0))),
            ),
            ("shell", "checkpoint", "resume"),
        ),
        Interaction(True, (Turn("error"),), ("compaction", "model")),
        Interaction(True, (Turn("tools", (Tool("bash"),)), Turn("task_complete")), ()),
    ]
    b = build(plan, 3)
    types = {e["type"] for e in b.events}
    assert {
        "subagent.completed",
        "subagent.failed",
        "session.error",
        "session.resume",
        "session.task_complete",
        "tool.user_requested",
        "session.compaction_complete",
    } <= types
    assert sum(1 for e in b.events if e["type"] == "user.message" and e.get("agentId") is None) == 3
    found = validate.check(read_bytes(b.to_bytes(), "s.jsonl"))
    assert found.is_empty(), found.select("line", "code", "message").rows()


def test_damages_round_trip_lines_unchanged() -> None:
    """Re-serialising a synth line gives the same bytes (so swapping timestamps moves nothing)."""
    b = build([Interaction(False, (Turn("tools", (Tool("task", False, 1, 1),)),), ())], 5)
    for line in b.lines():
        assert orjson.dumps(orjson.loads(line)) == line
    assert pl.Series(b.lines()).len() == b.event_count
