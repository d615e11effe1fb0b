"""The synthetic log builder writes valid, real-shaped JSONL; damage helpers do what they say."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synth
from synth import SessionBuilder, ToolCall, bash, edit, glob, grep, view

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"


def rich_session(seed: int = 0) -> SessionBuilder:
    """A session that uses every helper of the builder."""
    b = SessionBuilder(seed=seed)
    b.user_message("How does caching work in this codebase?")
    b.turn(
        "Searching.",
        [grep("Cache", "src/cache.ts:1: class Cache"), glob("src/**/*.ts", "src/cache.ts")],
        parallel=True,
    )
    b.turn("Reading it.", [view("src/cache.ts", "export class Cache {}")])
    b.turn("It is a map with a TTL.")
    b.user_requested_shell("git status", "nothing to commit")
    b.usage_checkpoint()
    b.shutdown(lines_added=1, lines_removed=0, files_modified=["/home/dev/project/src/a.ts"])
    b.resume(after_ms=3_600_000)
    b.mode_changed("autopilot")
    b.model_change("claude-sonnet-4.5")
    b.user_message("Run the tests with a sub-agent and fix what fails.")
    b.subagent_run("Run the tests.", llm_calls=2, tool_calls=1)
    b.subagent_run("Bisect.", llm_calls=1, error="Error: time budget exceeded")
    b.turn("Fixing.", [edit("src/a.ts", "a", "b"), bash("npm test", "ok", success=False)])
    b.turn(None)
    b.session_error("rate limited", "rate_limit", 429)
    b.compaction(-120)
    b.nudge()
    b.task_complete_turn("Fixed the failing test.")
    b.abort("user initiated")
    b.info("rewind", "Rewound 2 events")
    b.shutdown()
    return b


def parsed(b: SessionBuilder) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in b.lines()]


def test_every_line_is_one_compact_event_in_disk_key_order() -> None:
    b = rich_session()
    data = b.to_bytes()
    assert data.endswith(b"\n")
    assert data == b"".join(line + b"\n" for line in b.lines())
    assert data.split(b"\n")[:-1] == b.lines()
    events = parsed(b)
    assert events == b.events
    assert len(events) == b.event_count
    assert len(data) == b.size
    for line, ev in zip(b.lines(), events, strict=True):
        assert b"\n" not in line and b"\r" not in line
        assert line == orjson.dumps(ev)  # compact
        keys = ["type", "data", "agentId", "id", "timestamp", "parentId"]
        if "agentId" not in ev:
            keys.remove("agentId")
        assert list(ev) == keys
        assert isinstance(ev["data"], dict)
        assert TS.match(ev["timestamp"])
        assert "ephemeral" not in ev


def test_parent_chain_is_straight_and_timestamps_strictly_increase() -> None:
    events = parsed(rich_session())
    assert events[0]["parentId"] is None
    for prev, ev in itertools.pairwise(events):
        assert ev["parentId"] == prev["id"]
        assert ev["timestamp"] > prev["timestamp"]
    assert len({e["id"] for e in events}) == len(events)


def test_session_start_shape() -> None:
    b = SessionBuilder(session_id="abc", seed=3, start="2026-01-02T03:04:05.006Z", model="gpt-4.1")
    start, change = parsed(b)
    assert start["type"] == "session.start"
    data = start["data"]
    assert data["sessionId"] == "abc" == b.session_id
    assert data["version"] == 1
    assert data["producer"] == "copilot-agent"
    assert data["startTime"] == "2026-01-02T03:04:05.006Z"
    assert data["context"]["repository"] == "octo/project"
    assert data["context"]["branch"] == "main"
    assert change == {**change, "type": "session.model_change", "data": {"newModel": "gpt-4.1"}}


def test_resume_and_shutdown_continuity_fields_are_true_offsets() -> None:
    b = rich_session()
    lines = b.lines()
    offset = 0
    seen = 0
    for index, line in enumerate(lines):
        ev = orjson.loads(line)
        if ev["type"] == "session.resume":
            assert ev["data"]["eventCount"] == index
            assert ev["data"]["eventsFileSizeBytes"] == offset
            seen += 1
        if ev["type"] == "session.shutdown":
            assert ev["data"]["eventsFileSizeBytes"] == offset
            seen += 1
        offset += len(line) + 1
    assert seen == 3


def test_deterministic_for_a_seed() -> None:
    assert rich_session(7).to_bytes() == rich_session(7).to_bytes()
    assert rich_session(7).to_bytes() != rich_session(8).to_bytes()


def test_write_layouts(tmp_path: Path) -> None:
    b = rich_session()
    assert b.write(tmp_path / "x" / "events.jsonl").read_bytes() == b.to_bytes()
    assert b.write_to(tmp_path) == tmp_path / b.session_id / "events.jsonl"
    assert b.write_to(tmp_path, layout="flat") == tmp_path / f"{b.session_id}.jsonl"
    assert (tmp_path / f"{b.session_id}.jsonl").read_bytes() == b.to_bytes()


def test_user_message_is_preceded_by_system_message_and_turn_ids_restart() -> None:
    b = SessionBuilder()
    first = b.user_message("one")
    b.turn("a", [view("f", "x")])
    b.turn("b")
    second = b.user_message("two")
    b.turn("c")
    events = parsed(b)
    users = [i for i, e in enumerate(events) if e["type"] == "user.message"]
    for i in users:
        assert events[i - 1]["type"] == "system.message"
        assert events[i - 1]["data"]["interactionId"] == events[i]["data"]["interactionId"]
        assert "agentMode" not in events[i]["data"]
    starts = [e["data"] for e in events if e["type"] == "assistant.turn_start"]
    assert starts == [
        {"turnId": "0", "interactionId": first},
        {"turnId": "1", "interactionId": first},
        {"turnId": "0", "interactionId": second},
    ]
    ends = [e["data"] for e in events if e["type"] == "assistant.turn_end"]
    assert ends == [{"turnId": "0"}, {"turnId": "1"}, {"turnId": "0"}]


def test_turn_writes_message_then_tools_and_parallel_interleaves() -> None:
    b = SessionBuilder()
    b.user_message("q")
    rec = b.turn("t", [grep("a"), glob("b"), view("c")], parallel=True, output_tokens=77)
    events = parsed(b)[4:]
    assert [e["type"] for e in events] == [
        "assistant.turn_start",
        "assistant.message",
        *["tool.execution_start"] * 3,
        *["tool.execution_complete"] * 3,
        "assistant.turn_end",
    ]
    msg = events[1]["data"]
    assert msg["outputTokens"] == 77
    assert msg["turnId"] == rec.turn_id == "0"
    assert msg["messageId"] == rec.message_id
    assert [r["toolCallId"] for r in msg["toolRequests"]] == list(rec.tool_call_ids)
    assert [r["name"] for r in msg["toolRequests"]] == ["grep", "glob", "view"]
    assert all(r["type"] == "function" for r in msg["toolRequests"])
    assert [e["data"]["toolName"] for e in events[2:5]] == ["grep", "glob", "view"]
    assert [e["data"]["toolCallId"] for e in events[5:8]] == list(rec.tool_call_ids)
    assert all("toolName" not in e["data"] for e in events[5:8])
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", c) for c in rec.tool_call_ids)

    b.turn("t", [grep("a"), glob("b")])
    types = [e["type"] for e in parsed(b)[-6:-1]]
    assert types == ["assistant.message", *["tool.execution_start", "tool.execution_complete"] * 2]


def test_failed_tool_call_and_failed_turn() -> None:
    b = SessionBuilder()
    b.user_message("q")
    b.turn("t", [ToolCall("edit", {"path": "a"}, error="No match found", error_code="failure")])
    b.turn(None)
    b.session_error("Could not connect", status_code=503)
    b.shutdown()
    events = parsed(b)
    complete = next(e for e in events if e["type"] == "tool.execution_complete")["data"]
    assert complete["success"] is False
    assert complete["error"] == {"message": "No match found", "code": "failure"}
    assert "result" not in complete
    tail = [e["type"] for e in events[-5:]]
    assert tail == [
        "assistant.turn_end",
        "assistant.turn_start",
        "assistant.turn_end",
        "session.error",
        "session.shutdown",
    ]
    assert events[-2]["data"] == {
        "errorType": "query",
        "message": "Could not connect",
        "statusCode": 503,
    }


def test_failed_only_session_has_empty_model_metrics() -> None:
    b = SessionBuilder()
    b.user_message("q")
    b.turn(None)
    b.session_error("down")
    b.shutdown()
    data = parsed(b)[-1]["data"]
    assert data["modelMetrics"] == {}
    assert "currentModel" not in data and "tokenDetails" not in data
    assert data["totalNanoAiu"] == 0 and data["totalApiDurationMs"] == 0


def test_open_turn_with_a_tool_that_never_completes() -> None:
    b = SessionBuilder()
    b.user_message("q")
    b.turn("t", [bash("npm run build", never_completes=True)], end=False)
    events = parsed(b)
    assert events[-1]["type"] == "tool.execution_start"
    assert not any(e["type"] == "tool.execution_complete" for e in events)
    with pytest.raises(ValueError):
        b.user_message("next")
    b.end_turn()
    assert parsed(b)[-1]["type"] == "assistant.turn_end"


def test_task_complete_is_written_before_the_turn_end() -> None:
    b = SessionBuilder()
    b.mode_changed("autopilot")
    b.user_message("do it")
    b.task_complete_turn("Done.", success=True)
    events = parsed(b)
    assert [e["type"] for e in events[-6:]] == [
        "assistant.turn_start",
        "assistant.message",
        "tool.execution_start",
        "tool.execution_complete",
        "session.task_complete",
        "assistant.turn_end",
    ]
    assert events[-5]["data"]["toolRequests"][0]["name"] == "task_complete"
    assert events[-5]["data"]["toolRequests"][0]["arguments"] == {"summary": "Done."}
    assert events[-2]["data"] == {"summary": "Done.", "success": True}
    user = next(e for e in events if e["type"] == "user.message")["data"]
    assert user["agentMode"] == "autopilot"


def test_nudge_shape() -> None:
    b = SessionBuilder()
    b.mode_changed("autopilot")
    b.user_message("go")
    b.turn("half done")
    iid = b.nudge()
    b.turn("more")
    events = parsed(b)
    nudge = [e for e in events if e["type"] == "user.message"][-1]["data"]
    assert nudge["content"] == ""
    assert nudge["isAutopilotContinuation"] is True
    assert nudge["agentMode"] == "autopilot"
    assert nudge["interactionId"] == iid
    assert re.match(r"^<current_datetime>.+</current_datetime>\n\n", nudge["transformedContent"])
    assert (
        "You have not yet marked the task as complete using the task_complete tool."
        in (nudge["transformedContent"])
    )
    assert events[-3]["data"]["turnId"] == "0"
    old = SessionBuilder()
    old.nudge(flagged=False)
    assert "isAutopilotContinuation" not in parsed(old)[-1]["data"]


@pytest.mark.parametrize(("k", "m"), [(0, 0), (1, 0), (1, 2), (2, 1), (4, 5)])
@pytest.mark.parametrize("fails", [False, True])
def test_subagent_with_k_llm_calls_and_m_tool_calls(k: int, m: int, fails: bool) -> None:
    b = SessionBuilder()
    b.user_message("delegate")
    error = "Error: boom" if fails else None
    rec = b.subagent_run("Run the tests.", llm_calls=k, tool_calls=m, error=error)
    task_id = rec.tool_call_ids[0]
    events = parsed(b)
    sub = [e for e in events if "agentId" in e]
    main = [e for e in events if "agentId" not in e]
    assert all(e["agentId"] == task_id for e in sub)
    assert sum(e["type"] == "assistant.message" for e in sub) == k
    assert sum(e["type"] == "tool.execution_start" for e in sub) == m
    assert sum(e["type"] == "tool.execution_complete" for e in sub) == m
    assert not any(e["type"].startswith("assistant.turn") for e in sub)
    assert all(
        e["data"]["parentToolCallId"] == task_id for e in sub if e["type"] == "assistant.message"
    )
    assert sum(e["type"] == "assistant.turn_start" for e in main) == 1
    assert [e["data"]["toolName"] for e in main if e["type"] == "tool.execution_start"] == ["task"]
    types = [e["type"] for e in events]
    started = types.index("subagent.started")
    assert types[started - 1] == "tool.execution_start"
    assert events[started]["data"]["toolCallId"] == task_id
    end_type = "subagent.failed" if fails else "subagent.completed"
    end = types.index(end_type)
    assert types[end + 1 :] == ["tool.execution_complete", "assistant.turn_end"]
    assert events[end]["data"]["totalToolCalls"] == m
    complete = events[end + 1]["data"]
    assert complete["toolCallId"] == task_id
    assert complete["success"] is (not fails)
    if fails:
        assert events[end]["data"]["error"] == "Error: boom"
        assert complete["error"]["message"] == "Error: boom"
    if k:
        sub_user = next(e for e in sub if e["type"] == "user.message")["data"]
        assert sub_user["source"] == f"agent-{b.session_id}"
        assert types[started + 1 : started + 3] == ["system.message", "user.message"]
    else:
        assert types[started + 1] == end_type


def test_user_requested_shell_has_a_complete_and_no_start() -> None:
    b = SessionBuilder()
    cid = b.user_requested_shell("ls", "a.txt")
    requested, complete = parsed(b)[-2:]
    assert requested["type"] == "tool.user_requested"
    assert requested["data"]["toolCallId"] == cid
    assert complete["type"] == "tool.execution_complete"
    assert complete["data"]["isUserRequested"] is True
    assert complete["data"]["toolCallId"] == cid
    assert not any(e["type"] == "tool.execution_start" for e in parsed(b))


def _model_totals(shutdown: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {
        m: (v["requests"]["count"], v["usage"]["outputTokens"])
        for m, v in shutdown["data"]["modelMetrics"].items()
    }


def test_shutdowns_cumulative_by_default_and_per_segment_on_request() -> None:
    for per_segment in (False, True):
        b = SessionBuilder()
        b.user_message("a")
        b.turn("x", output_tokens=10)
        b.turn("y", output_tokens=20)
        b.shutdown(per_segment=per_segment)
        b.resume()
        b.user_message("b")
        b.turn("z", output_tokens=5)
        b.shutdown(per_segment=per_segment)
        first, second = (e for e in parsed(b) if e["type"] == "session.shutdown")
        assert _model_totals(first) == {"gpt-5-mini": (2, 30)}
        expected = (1, 5) if per_segment else (3, 35)
        assert _model_totals(second) == {"gpt-5-mini": expected}


def test_shutdown_usage_matches_the_messages() -> None:
    b = rich_session()
    events = parsed(b)
    out = sum(e["data"]["outputTokens"] for e in events if e["type"] == "assistant.message")
    calls = sum(e["type"] == "assistant.message" for e in events)
    last = [e for e in events if e["type"] == "session.shutdown"][-1]["data"]
    metrics = last["modelMetrics"].values()
    assert sum(v["usage"]["outputTokens"] for v in metrics) == out
    assert sum(v["requests"]["count"] for v in metrics) == calls
    checkpoints = [e["data"]["totalNanoAiu"] for e in events if e["type"].endswith("checkpoint")]
    assert checkpoints == sorted(checkpoints)


def test_explicit_shutdown_figures_are_written_as_given() -> None:
    b = SessionBuilder()
    metrics = {"m": {"requests": {"count": 1, "cost": 0}, "usage": {"outputTokens": 3}}}
    b.shutdown(metrics, premium_requests=1.5, nano_aiu=9, api_ms=7, token_details=False)
    data = parsed(b)[-1]["data"]
    assert data["modelMetrics"] == metrics
    assert (data["totalPremiumRequests"], data["totalNanoAiu"], data["totalApiDurationMs"]) == (
        1.5,
        9,
        7,
    )
    assert "tokenDetails" not in data


def test_after_ms_must_move_the_clock() -> None:
    b = SessionBuilder()
    with pytest.raises(ValueError):
        b.event("x", {}, after_ms=0)
    ev = b.event("custom.thing", {"a": 1}, agent_id="call_x", after_ms=1)
    assert list(ev) == ["type", "data", "agentId", "id", "timestamp", "parentId"]


OPS = st.sampled_from(
    ["prompt", "nudge", "turn", "tools", "parallel", "fail", "sub", "shell", "ckpt", "stop"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(OPS, max_size=25), st.integers(0, 2**32))
def test_any_sequence_of_helpers_keeps_the_file_valid(ops: list[str], seed: int) -> None:
    b = SessionBuilder(seed=seed)
    for op in ops:
        if op == "prompt":
            b.user_message("q")
        elif op == "nudge":
            b.nudge()
        elif op == "turn":
            b.turn("t")
        elif op == "tools":
            b.turn("t", [view("a"), bash("b")])
        elif op == "parallel":
            b.turn("t", [grep("a"), glob("b")], parallel=True)
        elif op == "fail":
            b.turn(None)
            b.session_error("x")
        elif op == "sub":
            b.subagent_run("p", llm_calls=seed % 3, tool_calls=seed % 2 if seed % 3 else 0)
        elif op == "shell":
            b.user_requested_shell("ls", "x")
        elif op == "ckpt":
            b.usage_checkpoint()
        else:
            b.shutdown()
            b.resume()
    b.shutdown()
    prev: dict[str, Any] | None = None
    offset = 0
    for index, line in enumerate(b.lines()):
        ev = orjson.loads(line)
        assert ev["parentId"] == (prev["id"] if prev else None)
        assert prev is None or ev["timestamp"] > prev["timestamp"]
        if ev["type"] == "session.resume":
            assert (ev["data"]["eventCount"], ev["data"]["eventsFileSizeBytes"]) == (index, offset)
        if ev["type"] == "session.shutdown":
            assert ev["data"]["eventsFileSizeBytes"] == offset
        offset += len(line) + 1
        prev = ev


# ---- damage helpers -------------------------------------------------------------------------


@pytest.fixture
def lines() -> list[bytes]:
    b = SessionBuilder(seed=1)
    b.user_message("Explain the build.")
    b.turn("Reading.", [view("Makefile", "all: build")])
    b.turn("It runs make.")
    return b.lines()


def _line_of(lines: list[bytes], type_: str) -> bytes:
    return next(line for line in lines if orjson.loads(line)["type"] == type_)


def _parses(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def test_raw_line_separator_is_valid_json_on_one_physical_line(lines: list[bytes]) -> None:
    line = _line_of(lines, "user.message")
    damaged = synth.raw_line_separator(line)
    assert "\u2028".encode() in damaged and "\u2029".encode() in damaged
    assert b"\n" not in damaged and b"\\u2028" not in damaged
    ev = orjson.loads(damaged)
    original = orjson.loads(line)
    assert ev["id"] == original["id"]
    assert ev["data"]["content"].replace("\u2028 \u2029", "") == original["data"]["content"]
    assert len(damaged.decode().splitlines()) == 3  # the str.splitlines() trap
    assert len(damaged.split(b"\n")) == 1


def test_split_line_gives_two_physical_lines_neither_parsing(lines: list[bytes]) -> None:
    line = _line_of(lines, "assistant.message")
    first, second = synth.split_line(line)
    assert not _parses(first) and not _parses(second)
    assert b"\n" not in first and b"\n" not in second
    joined = orjson.loads(first + b"\\n" + second)
    assert joined["id"] == orjson.loads(line)["id"]
    assert "\n" in joined["data"]["content"]
    assert len(synth.join_lines([first, second]).split(b"\n")) == 3


def test_glue_truncated_keeps_the_complete_event_as_suffix(lines: list[bytes]) -> None:
    truncated = _line_of(lines, "tool.execution_complete")
    complete = _line_of(lines, "assistant.turn_end")
    glued = synth.glue_truncated(truncated, complete)
    assert not _parses(glued)
    assert glued.endswith(complete) and glued.startswith(truncated[:10])
    assert orjson.loads(glued[len(glued) - len(complete) :]) == orjson.loads(complete)
    assert not _parses(glued[: len(glued) - len(complete)])
    with pytest.raises(ValueError):
        synth.glue_truncated(truncated, complete, keep=len(truncated))


def test_cut_ends_the_file_mid_event(lines: list[bytes]) -> None:
    data = synth.join_lines(lines)
    damaged = synth.cut(data)
    assert not damaged.endswith(b"\n")
    physical = damaged.split(b"\n")
    assert physical[:-1] == lines[:-1]
    assert lines[-1].startswith(physical[-1]) and physical[-1] != lines[-1]
    assert not _parses(physical[-1])
    assert synth.cut(data, keep=5).endswith(b"\n" + lines[-1][:5])


def test_nul_tail(lines: list[bytes]) -> None:
    data = synth.join_lines(lines)
    damaged = synth.nul_tail(data, 16)
    assert damaged == data + b"\x00" * 16
    assert damaged.split(b"\n")[-1] == b"\x00" * 16
    after_cut = synth.nul_tail(synth.cut(data))
    assert after_cut.split(b"\n")[-1].endswith(b"\x00" * 64)
    assert len(after_cut.split(b"\n")) == len(lines)


def test_crlf_still_parses(lines: list[bytes]) -> None:
    damaged = synth.crlf(lines[0])
    assert damaged.endswith(b"\r") and not damaged.endswith(b"\r\n")
    assert orjson.loads(damaged) == orjson.loads(lines[0])
    assert synth.join_lines([damaged]).endswith(b"\r\n")


def test_invalid_utf8_breaks_strict_decoding_only(lines: list[bytes]) -> None:
    line = _line_of(lines, "tool.execution_complete")
    damaged = synth.invalid_utf8(line)
    assert b"\xff" in damaged and len(damaged) == len(line) + 1
    with pytest.raises(UnicodeDecodeError):
        damaged.decode("utf-8")
    assert not _parses(damaged)
    recovered = json.loads(damaged.decode("utf-8", errors="replace"))
    assert recovered["id"] == orjson.loads(line)["id"]
    assert "\ufffd" in recovered["data"]["result"]["content"]


def test_damage_needs_a_text_value(lines: list[bytes]) -> None:
    turn_end = _line_of(lines, "assistant.turn_end")
    with pytest.raises(ValueError):
        synth.split_line(turn_end)


def test_blank_not_an_event_and_duplicate(lines: list[bytes]) -> None:
    assert synth.blank_line() == b""
    assert orjson.loads(synth.not_an_event()) == {"hello": 1}
    assert orjson.loads(synth.not_an_event("array")) == [1, 2]
    assert not isinstance(orjson.loads(synth.not_an_event("scalar")), dict | list)
    first, again = synth.duplicate(lines[4])
    assert first == again == lines[4]
    assert orjson.loads(first)["id"] == orjson.loads(again)["id"]


# ---- bundled samples ------------------------------------------------------------------------


def test_bundled_samples_are_what_make_samples_writes(tmp_path: Path) -> None:
    from tests import make_samples

    # Committed with the project: its absence is a failure, never a skip.
    assert (SAMPLES / "expected.json").is_file(), "sample_sessions/ is lost: run `make samples`"
    assert make_samples.main([str(tmp_path)]) == 0
    expected = orjson.loads((tmp_path / "expected.json").read_bytes())
    assert len(expected) == 11
    assert (tmp_path / "expected.json").read_bytes() == (SAMPLES / "expected.json").read_bytes()
    assert (tmp_path / "README.md").read_bytes() == (SAMPLES / "README.md").read_bytes()
    for session_id, entry in expected.items():
        written = (tmp_path / entry["file"]).read_bytes()
        assert written == (SAMPLES / entry["file"]).read_bytes(), entry["file"]
        assert entry["file"].startswith(session_id)
        first = orjson.loads(written.split(b"\n", 1)[0])
        assert first["data"]["sessionId"] == session_id
    prefixes = {sid[0] for sid in expected}
    assert len(prefixes) == 11
