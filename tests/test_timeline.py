"""timeline: the nested agent loop, its flat rows, the terminal view and the CLI."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from rich.text import Text

from copilot_logs.cli import main
from copilot_logs.commands.timeline import TURN_ROW_SCHEMA, iso, timeline, turn_rows
from copilot_logs.ingest.reader import ReadResult, read_bytes
from copilot_logs.render.timeline import print_timeline, session_lines
from synth import SessionBuilder, bash, join_lines, task, view

Node = dict[str, Any]


def read(builder: SessionBuilder, name: str = "s.jsonl") -> ReadResult:
    return read_bytes(builder.to_bytes(), name)


def only(builder: SessionBuilder, **options: Any) -> Node:
    sessions = timeline(read(builder), **options)
    assert len(sessions) == 1
    return sessions[0]


def at(builder: SessionBuilder, event_type: str, nth: int = 0) -> dict[str, Any]:
    """The nth written event of a type, with its 1-based line."""
    found = [
        {**event, "line": line}
        for line, event in enumerate(builder.events, start=1)
        if event["type"] == event_type and "agentId" not in event
    ]
    return found[nth]


def ms_between(later: str, earlier: str) -> int:
    delta = datetime.fromisoformat(later) - datetime.fromisoformat(earlier)
    return round(delta.total_seconds() * 1000)


def all_turns(session: Node) -> list[Node]:
    return [turn for interaction in session["interactions"] for turn in interaction["turns"]]


# --- the nested structure ------------------------------------------------------------------


def test_turns_nest_under_interactions_with_times_from_the_log() -> None:
    builder = SessionBuilder(seed=1)
    builder.user_message("How does caching work?")
    first = builder.turn("Looking around.", [view("a.py", "x"), bash("ls", "a.py")])
    builder.turn("It is a dict.")
    builder.shutdown()
    session = only(builder)

    start = builder.events[0]["data"]["startTime"]
    assert session["started_at"] == start
    (interaction,) = session["interactions"]
    assert interaction["trigger"] == "prompt"
    assert interaction["text"] == "How does caching work?"
    assert interaction["line"] == at(builder, "user.message")["line"]
    turn1, turn2 = interaction["turns"]
    assert [turn1["turn_index"], turn2["turn_index"]] == [1, 2]
    assert [turn1["turn_id"], turn2["turn_id"]] == ["0", "1"]
    begin, end = at(builder, "assistant.turn_start"), at(builder, "assistant.turn_end")
    assert turn1["started_at"] == begin["timestamp"]
    assert turn1["ended_at"] == end["timestamp"]
    assert turn1["offset_ms"] == ms_between(begin["timestamp"], start)
    assert turn1["duration_ms"] == ms_between(end["timestamp"], begin["timestamp"])
    assert turn1["model"] == "gpt-5-mini"
    assert turn1["text"] == "Looking around."
    assert turn1["requested_tools"] == ["view", "bash"]
    assert [t["tool_call_id"] for t in turn1["tools"]] == list(first.tool_call_ids)
    assert [t["name"] for t in turn1["tools"]] == ["view", "bash"]
    assert [t["status"] for t in turn1["tools"]] == ["ok", "ok"]
    assert turn1["tools"][1]["duration_ms"] == 120
    assert not turn1["ended_loop"] and turn2["ended_loop"]
    assert not turn1["open"] and not turn2["open"]
    assert interaction["ended_loop"] is True
    assert interaction["llm_calls"] == 2 and interaction["tool_calls"] == 2
    assert session["llm_calls"] == 2


def test_a_failed_tool_carries_its_error() -> None:
    builder = SessionBuilder()
    builder.user_message("edit it")
    builder.turn("Editing.", [view("a.py", error="no such file", error_code="not_found")])
    (tool,) = all_turns(only(builder))[0]["tools"]
    assert tool["status"] == "failed"
    assert tool["error"] == "no such file"
    assert tool["error_code"] == "not_found"
    assert all_turns(only(builder))[0]["failed_tool_calls"] == 1


def test_nudges_and_task_complete_are_marked() -> None:
    builder = SessionBuilder()
    builder.mode_changed("autopilot")
    builder.user_message("Do the thing.")
    builder.turn("Planning.")
    builder.nudge()
    record = builder.task_complete_turn("Did the thing.")
    session = only(builder)

    prompt, nudge = session["interactions"]
    assert (prompt["trigger"], prompt["agent_mode"]) == ("prompt", "autopilot")
    assert nudge["trigger"] == "nudge"
    (done,) = nudge["turns"]
    assert done["task_complete_called"] and done["task_complete_event"]
    assert [t["name"] for t in done["tools"]] == ["task_complete"]
    assert done["tools"][0]["tool_call_id"] == record.tool_call_ids[0]
    (event,) = done["events"]
    assert event["type"] == "session.task_complete"
    assert event["line"] == at(builder, "session.task_complete")["line"]
    assert event["text"] == "task complete (success): Did the thing."
    assert nudge["task_complete"] is True
    assert [e["type"] for e in session["events"]] == [
        "session.model_change",
        "session.mode_changed",
    ]
    assert session["events"][1]["text"] == "mode interactive -> autopilot"


def test_subagent_runs_nest_under_the_turn_of_their_task_call() -> None:
    builder = SessionBuilder()
    builder.user_message("Run the tests with a sub-agent.")
    ok = builder.turn("Delegating.", [task("run tests", llm_calls=2, tool_calls=1)])
    failed = builder.subagent_run("bisect", llm_calls=1, error="time budget exceeded")
    builder.turn("Summary.")
    session = only(builder)

    first, second, third = all_turns(session)
    (run,) = first["subagents"]
    assert run["agent_id"] == ok.tool_call_ids[0] == first["tools"][0]["tool_call_id"]
    assert run["status"] == "completed"
    assert run["prompt"] == "run tests"
    assert run["llm_calls"] == 2 and len(run["calls"]) == 2
    call1, call2 = run["calls"]
    assert [call1["call_index"], call2["call_index"]] == [1, 2]
    assert [t["name"] for t in call1["tools"]] == ["bash"]
    assert call2["tools"] == [] and call2["ended_loop"] and not call1["ended_loop"]
    assert call1["offset_ms"] >= run["offset_ms"]
    # A sub-agent call starts when the agent's previous line was written (here its prompt).
    sub_prompt = next(e for e in builder.events if e.get("agentId") and e["type"] == "user.message")
    assert call1["started_at"] == sub_prompt["timestamp"]

    (bad,) = second["subagents"]
    assert bad["agent_id"] == failed.tool_call_ids[0]
    assert (bad["status"], bad["error"]) == ("failed", "time budget exceeded")
    assert second["tools"][0]["status"] == "failed"
    assert third["subagents"] == []
    assert session["subagent_calls"] == 3


def test_lifecycle_events_sit_where_they_happened() -> None:
    builder = SessionBuilder()
    builder.user_message("Summarise.")
    builder.turn(None)
    builder.session_error("Could not connect", status_code=502)
    builder.compaction(40_000)
    builder.shutdown()
    builder.resume()
    builder.model_change("claude-sonnet-4.5")
    builder.user_message("Again.")
    builder.turn("Here it is.")
    builder.abort()
    session = only(builder)

    first, second = session["interactions"]
    (failed_turn,) = first["turns"]
    assert failed_turn["messages"] == 0 and not failed_turn["ended_loop"]
    assert [e["type"] for e in first["events"]] == [
        "session.error",
        "session.compaction_start",
        "session.compaction_complete",
        "session.shutdown",
        "session.resume",
        "session.model_change",
    ]
    assert first["events"][0]["text"] == "query: Could not connect"
    assert first["events"][0]["line"] == at(builder, "session.error")["line"]
    assert first["events"][2]["text"] == "compaction removed 40,000 tokens"
    assert first["events"][4]["text"].startswith("resumed after ")
    assert first["events"][5]["text"] == "model gpt-5-mini -> claude-sonnet-4.5"
    assert [e["type"] for e in second["events"]] == ["abort"]
    assert second["events"][0]["text"] == "aborted: user initiated"
    assert second["turns"][0]["model"] == "claude-sonnet-4.5"
    for event in first["events"]:
        assert event["offset_ms"] == ms_between(event["timestamp"], session["started_at"])


def test_an_open_turn_at_the_end_is_shown_open() -> None:
    builder = SessionBuilder()
    builder.user_message("Build it.")
    builder.turn("Reading.", [view("a.py", "x")])
    record = builder.turn("Building.", [bash("make", never_completes=True)], end=False)
    session = only(builder)

    last = all_turns(session)[-1]
    assert last["open"] is True
    assert last["duration_ms"] is None and last["ended_at"] is None
    assert last["elapsed_ms"] == ms_between(builder.now, last["started_at"])
    (tool,) = last["tools"]
    assert (tool["tool_call_id"], tool["status"]) == (record.tool_call_ids[0], "open")
    assert tool["duration_ms"] is None
    assert session["open_turns"] == 1


def test_shell_escapes_are_tools_of_the_interaction() -> None:
    builder = SessionBuilder()
    builder.user_message("Fix it.")
    builder.turn("Fixed.")
    call_id = builder.user_requested_shell("git status", "clean")
    (interaction,) = only(builder)["interactions"]
    (tool,) = interaction["tools"]
    assert tool["tool_call_id"] == call_id
    assert (tool["name"], tool["user_requested"], tool["status"]) == ("bash", True, "ok")
    assert tool["started_at"] is None and tool["offset_ms"] is not None


def test_turns_before_any_user_message_form_interaction_zero() -> None:
    builder = SessionBuilder()
    builder.turn("Continuing where the lost lines left off.", [view("a.py", "x")])
    builder.user_message("Next.")
    builder.turn("Done.")
    session = only(builder)
    zero, one = session["interactions"]
    assert (zero["interaction_index"], zero["trigger"], zero["line"]) == (0, "none", None)
    assert [t["turn_index"] for t in zero["turns"]] == [1]
    assert [t["turn_index"] for t in one["turns"]] == [2]
    # Events before the first turn belong to interaction 0 when it exists.
    assert session["events"] == []
    assert [e["type"] for e in zero["events"]] == ["session.model_change"]


def test_a_stray_turn_end_is_an_event() -> None:
    builder = SessionBuilder()
    builder.user_message("Hi.")
    builder.turn("Hello.")
    builder.event("assistant.turn_end", {"turnId": "0"})
    (interaction,) = only(builder)["interactions"]
    (event,) = interaction["events"]
    assert event["type"] == "assistant.turn_end"
    assert event["text"] == "turn_end with no open turn (turn id 0)"


def test_without_tools_the_lists_go_and_the_counts_stay() -> None:
    builder = SessionBuilder()
    builder.user_message("Go.")
    builder.turn("Delegating.", [task("t", llm_calls=1, tool_calls=1), view("a.py")])
    session = only(builder, include_tools=False)
    (interaction,) = session["interactions"]
    (turn,) = interaction["turns"]
    assert "tools" not in turn and "tools" not in interaction
    assert turn["tool_calls"] == 2
    (run,) = turn["subagents"]
    assert "tools" not in run and "tools" not in run["calls"][0]
    assert run["tool_calls"] == 1


def test_sessions_come_newest_first() -> None:
    old = SessionBuilder(seed=1, start="2026-08-01T10:00:00.000Z")
    new = SessionBuilder(seed=2, start="2026-08-02T10:00:00.000Z")
    for builder in (old, new):
        builder.user_message("hi")
        builder.turn("hello")
    result = ReadResult.concat([read(old, "old.jsonl"), read(new, "new.jsonl")])
    assert [s["session_id"] for s in timeline(result)] == [new.session_id, old.session_id]


def test_iso_keeps_milliseconds() -> None:
    assert iso(datetime.fromisoformat("2026-08-05T07:49:01.551+00:00")) == (
        "2026-08-05T07:49:01.551Z"
    )
    assert iso(None) is None


# --- flat rows -------------------------------------------------------------------------------


def test_turn_rows_list_turns_then_subagent_calls_in_file_order() -> None:
    builder = SessionBuilder()
    builder.user_message("Go.")
    builder.turn("Reading.", [view("a.py", "x", success=False)])
    delegated = builder.turn("Delegating.", [task("t", llm_calls=2)])
    builder.nudge()
    builder.turn("Done.", end=False)
    rows = turn_rows(only_list(builder))
    assert rows.columns == list(TURN_ROW_SCHEMA)
    agent = delegated.tool_call_ids[0]
    assert rows["agent_id"].to_list() == [None, None, agent, agent, None]
    assert rows["turn_index"].to_list() == [1, 2, 1, 2, 3]
    assert rows["parent_turn_index"].to_list() == [None, None, 2, 2, None]
    assert rows["interaction_index"].to_list() == [1, 1, 1, 1, 2]
    assert rows["failed_tool_calls"].to_list() == [1, 0, 0, 0, 0]
    assert rows["open"].to_list() == [False, False, False, False, True]
    assert rows["duration_ms"][4] is None


def only_list(builder: SessionBuilder) -> list[Node]:
    return timeline(read(builder))


# --- the terminal view -----------------------------------------------------------------------


def rich_session() -> SessionBuilder:
    builder = SessionBuilder(seed=3)
    builder.mode_changed("autopilot")
    builder.user_message("A long prompt that goes on and on about what the agent should do.")
    builder.turn("Quick look.", [view("a.py", "x")], duration_ms=1000)
    builder.turn(
        "Delegating.",
        [task("run the tests", llm_calls=2, tool_calls=2), bash("false", error="exit 1")],
        duration_ms=8000,
    )
    builder.session_error("rate limited", "rate_limit")
    builder.nudge()
    builder.task_complete_turn("All done.", duration_ms=4000)
    builder.user_message("One more thing.")
    builder.turn("On it.", [bash("make", never_completes=True)], end=False)
    return builder


def render_lines(session: Node, width: int, **options: Any) -> list[Text]:
    return list(session_lines(session, width, **options))


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_every_line_fits_the_width(width: int) -> None:
    session = only(rich_session())
    for line in render_lines(session, width):
        assert line.cell_len <= width, line.plain


@pytest.mark.parametrize("width", [40, 60, 120])
def test_the_scale_is_never_cut_inside_its_number(width: int) -> None:
    builder = SessionBuilder()
    builder.user_message("slow")
    builder.turn("done", duration_ms=25_400)
    builder.shutdown()
    session = only(builder)
    longest = max(t["elapsed_ms"] for i in session["interactions"] for t in i["turns"])
    header = render_lines(session, width)[2].plain.rstrip()
    assert header.endswith(f" {longest / 1000:.1f}s"), header  # whole, "max " or not


def test_the_bar_is_proportional_to_the_longest_turn() -> None:
    session = only(rich_session())
    lines = {
        line.plain.split()[1]: line.plain
        for line in render_lines(session, 120)[3:]
        if "#" in line.plain
    }
    longest, quick = lines["#2"], lines["#1"]
    full = longest.count("█")
    assert full == max(6, min(40, 120 // 5))
    # Turn 1 took a fraction of turn 2 (1.3 s of 8.3 s): its bar is that fraction long.
    assert 1 <= quick.count("█") <= full // 4


def test_tools_subagents_and_their_calls_draw_a_bar_of_their_own_duration() -> None:
    # rich_session: the view tool, the task's sub-agent run, its calls and their bash tools
    # all took time, so each draws a bar on the same scale as the turns (never longer than
    # the longest turn's); an open tool has no duration, so no bar.
    session = only(rich_session())
    plain = [line.plain for line in render_lines(session, 160)[3:]]
    blocks = "█▉▊▋▌▍▎▏"

    def bar(start: str) -> str:
        line = next(p for p in plain if p.lstrip(" │├└─").startswith(start))
        return "".join(c for c in line if c in blocks)

    longest = max(len(bar(turn)) for turn in ("#1 ", "#2 ", "#3 "))
    for start in ("view ok", "sub-agent task completed", "call 1 ", "call 2 ", "bash ok"):
        assert 1 <= len(bar(start)) <= longest, start
    assert bar("bash running") == ""


def test_the_view_shows_every_node_once_in_order() -> None:
    session = only(rich_session())
    plain = [line.plain for line in render_lines(session, 160)]
    labels = [p.lstrip(" │├└─").split("  ")[0] for p in plain[3:]]
    assert labels[0].startswith("• model")
    assert labels[1] == "• mode interactive -> autopilot"
    assert labels[2].startswith("▶ 1 prompt (autopilot) A long prompt")
    assert labels[3].startswith("#1 t0 Quick look.")
    assert labels[4].startswith("view ok a.py")
    assert labels[5].startswith("#2 t1 Delegating.")
    assert labels[6].startswith("task ok Run tests and summarise")
    assert labels[7].startswith("sub-agent task completed · 2 calls")
    assert labels[8].startswith("call 1 Running test shard batch 1.")
    assert labels[9].startswith("bash ok npm test -- --shard=1")
    assert labels[10].startswith("bash ok npm test -- --shard=2")
    assert labels[11].startswith("call 2 [final]")
    assert labels[12].startswith("bash failed: exit 1 false")
    assert labels[13] == "• error: rate_limit: rate limited"
    assert labels[14] == "▶ 2 autopilot nudge"
    assert labels[15].startswith("#3 t0 [task_complete]")
    assert labels[16].startswith("task_complete ok All done.")
    assert labels[17].startswith("• task complete (success): All done.")
    assert labels[18].startswith("▶ 3 prompt (autopilot) One more thing.")
    assert labels[19].startswith("#4 t0 [open] On it.")
    assert labels[20].startswith("bash running make")
    assert len(labels) == 21


def test_no_tools_keeps_subagents_under_the_turn() -> None:
    session = only(rich_session(), include_tools=False)
    plain = [line.plain for line in render_lines(session, 160, show_tools=False)]
    assert not any(" ok " in p or "running" in p for p in plain)
    delegating = next(p for p in plain if "#2 t1" in p)
    assert "2 tools (1 failed)" in delegating
    assert any("└─ sub-agent task completed" in p for p in plain)


def test_print_timeline_writes_the_width_asked(capsys: pytest.CaptureFixture[str]) -> None:
    print_timeline(timeline(read(rich_session())), width=60)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("session ")
    assert max(len(line) for line in lines) <= 60


# --- the command -----------------------------------------------------------------------------


def write_sessions(root: Path) -> tuple[SessionBuilder, SessionBuilder]:
    old = SessionBuilder(seed=1, start="2026-08-01T10:00:00.000Z")
    old.user_message("old one")
    old.turn("hi")
    new = rich_session()
    old.write_to(root)
    new.write_to(root)
    return old, new


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["timeline", *args])


def test_cli_json_is_the_nested_tree(tmp_path: Path) -> None:
    old, new = write_sessions(tmp_path)
    result = invoke("--root", str(tmp_path), "--latest", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    sessions = orjson.loads(result.stdout)
    assert [s["session_id"] for s in sessions] == [new.session_id, old.session_id]
    turn = sessions[0]["interactions"][0]["turns"][1]
    assert turn["subagents"][0]["calls"][0]["tools"][0]["name"] == "bash"
    assert result.stderr == ""


def test_cli_with_no_session_shows_the_newest_and_says_so(copilot_home: Path) -> None:
    _, new = write_sessions(copilot_home / "session-state")
    result = invoke("--format", "json")
    assert result.exit_code == 0, result.output
    assert [s["session_id"] for s in orjson.loads(result.stdout)] == [new.session_id]
    assert "showing the newest" in result.stderr


def test_cli_ndjson_and_csv_give_one_row_per_call(tmp_path: Path) -> None:
    _, new = write_sessions(tmp_path)
    path = str(tmp_path / new.session_id / "events.jsonl")
    ndjson = invoke(path, "--format", "ndjson")
    assert ndjson.exit_code == 0, ndjson.output
    rows = [orjson.loads(line) for line in ndjson.stdout.splitlines()]
    # Four main turns and the sub-agent's two calls.
    assert len(rows) == 6
    required = {
        "session_id",
        "interaction_index",
        "turn_index",
        "turn_id",
        "started_at",
        "duration_ms",
        "tool_calls",
        "failed_tool_calls",
        "open",
        "agent_id",
    }
    assert required <= set(rows[0])
    assert [r["agent_id"] is None for r in rows] == [True, True, False, False, True, True]
    assert rows[-1]["open"] is True and rows[-1]["duration_ms"] is None

    as_csv = invoke(path, "--format", "csv")
    assert as_csv.exit_code == 0
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(table) == 6
    assert required <= set(table[0])
    assert table[-1]["open"] == "true"


def test_cli_no_tools_and_width(tmp_path: Path) -> None:
    _, new = write_sessions(tmp_path)
    path = str(tmp_path / new.session_id / "events.jsonl")
    as_json = invoke(path, "--no-tools", "--format", "json")
    turn = orjson.loads(as_json.stdout)[0]["interactions"][0]["turns"][0]
    assert "tools" not in turn and turn["tool_calls"] == 1
    table = invoke(path, "--width", "64")
    assert table.exit_code == 0, table.output
    assert max(len(line) for line in table.stdout.splitlines()) <= 64
    assert "view ok" in table.stdout
    assert "view ok" not in invoke(path, "--width", "64", "--no-tools").stdout


def test_cli_errors_and_empty_roots(tmp_path: Path) -> None:
    missing = invoke(str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2
    assert missing.stderr.startswith("Error: ")
    assert invoke("--width", "10").exit_code == 2
    empty = invoke("--root", str(tmp_path), "--format", "json")
    assert empty.exit_code == 0
    assert empty.stdout == "[]\n"
    assert "No sessions found" in empty.stderr


def test_help_has_examples() -> None:
    result = CliRunner().invoke(main, ["timeline", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "copilot-logs timeline 3fa --no-tools" in result.output


# --- the real logs ---------------------------------------------------------------------------


def test_real_samples(real_samples: Path) -> None:
    result = invoke(str(real_samples), "--format", "json")
    assert result.exit_code == 0, result.output
    sessions = {s["session_id"][:8]: s for s in orjson.loads(result.stdout)}

    autopilot = sessions["7a2f9870"]
    assert [i["trigger"] for i in autopilot["interactions"]] == ["prompt", "nudge", "nudge"]
    assert [len(i["turns"]) for i in autopilot["interactions"]] == [2, 2, 2]
    last = autopilot["interactions"][-1]["turns"][-1]
    assert last["task_complete_called"] and last["task_complete_event"]
    assert autopilot["llm_calls"] == 6 and autopilot["tool_calls"] == 4

    error = sessions["8eae0f15"]
    (interaction,) = error["interactions"]
    (turn,) = interaction["turns"]
    assert turn["messages"] == 0
    assert [e["type"] for e in interaction["events"]] == ["session.error", "session.shutdown"]

    subagent = sessions["fcf48e4f"]
    turns = subagent["interactions"][0]["turns"]
    assert [len(t["subagents"]) for t in turns] == [1, 0, 1, 0]
    assert turns[0]["subagents"][0]["status"] == "failed"
    assert turns[2]["subagents"][0]["llm_calls"] == 1
    assert subagent["failed_tool_calls"] == 2


def test_subagent_lines_without_their_lifecycle_are_still_shown() -> None:
    builder = SessionBuilder()
    builder.user_message("Go.")
    record = builder.turn("Delegating.", [task("t", llm_calls=2, tool_calls=1)])
    kept = [
        line
        for line, event in zip(builder.lines(), builder.events, strict=True)
        if not event["type"].startswith("subagent.")
    ]
    (session,) = timeline(read_bytes(join_lines(kept), "s.jsonl"))
    (run,) = all_turns(session)[0]["subagents"]
    assert (run["agent_id"], run["status"]) == (record.tool_call_ids[0], "unknown")
    assert len(run["calls"]) == 2
    assert [t["name"] for t in run["calls"][0]["tools"]] == ["bash"]


@pytest.mark.parametrize("shut_down", [True, False])
def test_a_running_subagent_call_is_open_and_left_open_only_by_a_shutdown(
    shut_down: bool,
) -> None:
    builder = SessionBuilder()
    builder.user_message("Go.")
    record = builder.turn("Delegating.", [task("t", llm_calls=2)], end=False)
    if shut_down:
        builder.shutdown()
    # The run never finished: no subagent.completed, no complete of its task call.
    kept = [
        line
        for line, event in zip(builder.lines(), builder.events, strict=True)
        if event["type"] != "subagent.completed"
        and not (
            event["type"] == "tool.execution_complete"
            and event["data"]["toolCallId"] == record.tool_call_ids[0]
        )
    ]
    (session,) = timeline(read_bytes(join_lines(kept), "s.jsonl"))
    (run,) = all_turns(session)[0]["subagents"]
    assert run["status"] == "running"
    first, last = run["calls"]
    assert (first["open"], first["open_at_shutdown"]) == (False, False)
    assert (last["open"], last["open_at_shutdown"]) == (True, shut_down)


def test_cli_a_file_with_no_event_exits_unreadable(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not json\n")
    result = invoke(str(garbage), "--format", "json")
    assert result.exit_code == 3
    assert orjson.loads(result.stdout) == []
    assert "invalid-json" in result.stderr
