"""Each rule on a minimal log: it fires at the right line, and a near miss does not fire it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import synth
from copilot_logs.commands import validate
from copilot_logs.commands.validate import RULES, Report, UnknownRuleError
from copilot_logs.ingest import cli_format
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult, read_bytes, read_source
from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA
from copilot_logs.store.collect import read_all
from synth import SessionBuilder, ToolCall, bash, view
from tests.conftest import SAMPLES

SESSION = "0b5e8c1e-2f3a-4d4b-9c5d-6e7f8a9b0c1d"
OTHER = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


def builder() -> SessionBuilder:
    """session.start (line 1) and session.model_change (line 2)."""
    return SessionBuilder(session_id=SESSION, seed=7)


def read(data: bytes | list[bytes], name: str = "log.jsonl") -> ReadResult:
    if isinstance(data, list):
        data = synth.join_lines(data)
    return read_bytes(data, name)


def lines_of(result: ReadResult, code: str) -> list[int | None]:
    found = validate.check(result)
    return found.filter(pl.col("code") == code)["line"].to_list()


def renamed(result: ReadResult, name: str) -> ReadResult:
    """The same log under another file name (so several can be read together)."""
    file = pl.lit(name)
    return ReadResult(
        result.events.with_columns(file=file), result.diagnostics.with_columns(file=file)
    )


def clean() -> SessionBuilder:
    """A whole session that uses every feature a rule looks at, written correctly."""
    b = builder()
    b.user_message("Find the bug and fix it.")
    b.turn("Looking.", [bash("ls", "a b"), view("a.py", "x = 1")], parallel=True)
    b.subagent_run("Run the tests.", llm_calls=2, tool_calls=2)
    b.subagent_run("Lint.", error="model refused")
    b.turn("Done: fixed a.py.")
    b.user_requested_shell("git status", "clean")
    b.usage_checkpoint()
    b.shutdown()
    b.resume()
    b.mode_changed("autopilot")
    b.user_message("Ship it.")
    b.turn("Checking.", [bash("make test", "ok")])
    b.task_complete_turn("Shipped.")
    b.nudge()
    b.turn(None)
    b.session_error("provider unreachable")
    b.shutdown()
    return b


def test_clean_session_has_no_findings() -> None:
    found = validate.check(read(clean().to_bytes()))
    assert found.is_empty(), found.to_dicts()


def with_line(lines: list[bytes], index: int, mutate: Callable[[dict[str, object]], None]) -> None:
    event = orjson.loads(lines[index])
    mutate(event)
    lines[index] = orjson.dumps(event)


# --- one builder per case: (trigger, expected lines) and a near miss -------------------------


def e101() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    return read([*lines[:1], b'{"type":"user.message","data":{"content": broken', *lines[1:]]), [2]


def e101_miss() -> ReadResult:
    b = builder()
    b.user_message("a line with \u2028 raw separators \u2029 inside")
    return read(b.to_bytes())


def e102() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    incomplete = b'{"type":"session.info","data":{"infoType":"x","message":"m"}}'
    return read([lines[0], synth.not_an_event(), lines[1], incomplete]), [2, 4]


def e102_miss() -> ReadResult:
    lines = builder().lines()
    with_line(lines, 1, lambda event: event.update(extra={"new": "field"}))
    return read(lines)


def e103() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    return read([lines[0], *synth.duplicate(lines[1])]), [3]


def e104() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    lines = b.lines()
    del lines[2]  # the system.message: the user.message (now line 3) points at it
    return read(lines), [3]


def e104_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    lines = b.lines()
    for index in range(len(lines)):
        with_line(lines, index, lambda event: event.pop("parentId"))
    return read(lines)


def e105() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    lines = b.lines()
    early, late = orjson.loads(lines[2])["timestamp"], orjson.loads(lines[3])["timestamp"]
    with_line(lines, 2, lambda event: event.update(timestamp=late))
    with_line(lines, 3, lambda event: event.update(timestamp=early))
    return read(lines), [4]


def e105_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    lines = b.lines()
    same = orjson.loads(lines[2])["timestamp"]
    with_line(lines, 3, lambda event: event.update(timestamp=same))
    return read(lines)


def e106() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.event("assistant.message_delta", {"deltaContent": "a"})
    b.event("session.idle", {})
    b.event("assistant.message_delta", {"deltaContent": "b"})
    return read(b.to_bytes()), [3, 4]


def e106_miss() -> ReadResult:
    b = builder()
    b.event("assistant.reasoning", {"content": "thinking"})
    return read(b.to_bytes())


def e107() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.event("session.brand_new", {})
    b.event("session.brand_new", {})
    return read(b.to_bytes()), [3]


def e107_miss() -> ReadResult:
    b = builder()
    b.info("rewind", "rewound 3 events")
    return read(b.to_bytes())


def e108() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    return read(b.lines()[1:]), [1]


def e108_miss() -> ReadResult:
    return read(builder().to_bytes())


def e109() -> tuple[ReadResult, list[int | None]]:
    return read(builder().to_bytes(), f"/logs/{OTHER}/events.jsonl"), [1]


def e109_flat() -> tuple[ReadResult, list[int | None]]:
    return read(builder().to_bytes(), f"/logs/{OTHER}.jsonl"), [1]


def e109_miss() -> ReadResult:
    # A copy under a folder that is not a session id claims nothing.
    return read_all(
        [
            Source(Path("/logs/run-1/events.jsonl"), "run-1"),
            Source(Path(f"/logs/{SESSION}/events.jsonl"), SESSION),
        ]
    )


def e110() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    return read(synth.cut(b.to_bytes())), [4]


def e110_miss() -> ReadResult:
    # A whole last line without its newline is not cut.
    return read(builder().to_bytes()[:-1])


def e111() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    lines = b.lines()
    return read([lines[0], lines[1], synth.glue_truncated(lines[2], lines[3])]), [3]


def e112() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("a prompt long enough to split")
    lines = b.lines()
    first, second = synth.split_line(lines[3])
    return read([*lines[:3], first, second]), [4, 5]


def e113() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi there")
    lines = b.lines()
    lines[3] = synth.invalid_utf8(lines[3])
    return read(lines), [4]


def e113_miss() -> ReadResult:
    b = builder()
    b.user_message("héllo ✓ – naïve 日本")
    return read(b.to_bytes())


def e121() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("cut here")
    lines = b.lines()
    lines[3] = lines[3].replace(b"cut here", b"cut \\ud83d here")
    return read(lines), [4]


def e121_miss() -> ReadResult:
    b = builder()
    b.user_message("an emoji 😀 whole")
    lines = b.lines()
    lines[3] = lines[3].replace("😀".encode(), b"\\ud83d\\ude00")
    return read(lines)


def e122() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("ok")
    lines = b.lines()
    message = next(i for i, raw in enumerate(lines) if b'"assistant.message"' in raw)
    lines[message] = re.sub(rb'"outputTokens":\d+', b'"outputTokens":1e999', lines[message])
    return read(lines), [message + 1]


def e122_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.turn("ok")
    lines = b.lines()
    message = next(i for i, raw in enumerate(lines) if b'"assistant.message"' in raw)
    # The largest number a 64-bit column holds is in range.
    lines[message] = re.sub(
        rb'"outputTokens":\d+', b'"outputTokens":9223372036854775807', lines[message]
    )
    return read(lines)


def e123() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    deep = b"[" * 1100 + b"]" * 1100
    lines.append(b'{"type":"session.info","data":{"nested":' + deep + b'},"id":"d"}')
    return read(lines), [3]


def e123_miss() -> ReadResult:
    lines = builder().lines()
    deep = b"[" * 300 + b"]" * 300  # deeper than orjson writes, not than the reader reads
    lines.append(b'{"type":"session.info","data":{"nested":' + deep + b'},"id":"d"}')
    result = read(lines)
    assert result.events["event_id"].to_list()[-1] == "d"
    return result


def e124() -> tuple[ReadResult, list[int | None]]:
    return read(b"\xef\xbb\xbf" + builder().to_bytes()), [1]


def e124_miss() -> ReadResult:
    b = builder()
    b.user_message("\ufeff a BOM inside a string is text")
    return read(b.to_bytes())


def e125() -> tuple[ReadResult, list[int | None]]:
    result = read(builder().to_bytes())
    failed = pl.DataFrame(
        [(SESSION, "log.jsonl", 0, 0, "unprocessable", "ValueError: boom", None, None, None)],
        schema=DIAGNOSTICS_SCHEMA,
        orient="row",
    )
    return ReadResult(result.events, failed), [None]


def e114() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    return read([lines[0], synth.crlf(lines[1])]), [2]


def e115() -> tuple[ReadResult, list[int | None]]:
    return read(synth.nul_tail(builder().to_bytes())), [3]


def e116() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    return read([lines[0], synth.blank_line(), lines[1]]), [2]


def e117(tmp_path: Path) -> tuple[ReadResult, list[int | None]]:
    return read_source(Source(tmp_path / "gone" / "events.jsonl", "gone")), [None]


def e118() -> tuple[ReadResult, list[int | None]]:
    return read(b""), [None]


def e119() -> tuple[ReadResult, list[int | None]]:
    lines = builder().lines()
    with_line(lines, 1, lambda event: event.update(timestamp="yesterday at noon"))
    return read(lines), [2]


def e119_miss() -> ReadResult:
    lines = builder().lines()
    with_line(lines, 1, lambda event: event.update(timestamp="2026-08-05T07:49:02.000+00:00"))
    return read(lines)


def e120() -> tuple[ReadResult, list[int | None]]:
    result = read(builder().to_bytes())
    odd = pl.DataFrame(
        [(SESSION, "log.jsonl", 2, 10, "mystery-damage", "something new", None, None, None)],
        schema=DIAGNOSTICS_SCHEMA,
        orient="row",
    )
    return ReadResult(result.events, odd), [2]


def e120_miss() -> ReadResult:
    return read(synth.nul_tail(synth.cut(builder().to_bytes())))


def turn_events(b: SessionBuilder, *pairs: tuple[str, str]) -> None:
    for kind, turn_id in pairs:
        b.event(f"assistant.turn_{kind}", {"turnId": turn_id})


def t201() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"), ("end", "0"), ("end", "0"))
    return read(b.to_bytes()), [7]


def t201_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"), ("end", "0"), ("start", "1"), ("end", "1"))
    return read(b.to_bytes())


def t202() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"), ("start", "1"), ("end", "1"))
    return read(b.to_bytes()), [6]


def t203() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"), ("end", "1"))
    return read(b.to_bytes()), [6]


def t203_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    b.event("assistant.turn_end", {})  # no turnId: nothing to compare
    return read(b.to_bytes())


def t204() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("first")
    b.turn("second", end=False)
    return read(b.to_bytes()), [8]


def t204_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"), ("start", "1"), ("end", "1"))  # T202, not T204
    return read(b.to_bytes())


def tool(b: SessionBuilder, kind: str, call_id: str, **data: object) -> None:
    b.event(f"tool.execution_{kind}", {"toolCallId": call_id, **data})


def x301() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    tool(b, "complete", "call_lost", success=True)
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [6]


def x301_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.turn("ok")
    b.user_requested_shell("ls", "a b")
    return read(b.to_bytes())


def x302() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("sleep 9", never_completes=True)])  # the turn ends without the complete
    return read(b.to_bytes()), [7]


def x302_subagent() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    tool(b, "start", "call_task", toolName="task")
    b.event("subagent.started", {"toolCallId": "call_task"}, agent_id="call_task")
    b.event("tool.execution_start", {"toolCallId": "call_sub"}, agent_id="call_task")
    b.event("subagent.completed", {"toolCallId": "call_task"}, agent_id="call_task")
    b.event("tool.execution_complete", {"toolCallId": "call_sub"}, agent_id="call_task")
    tool(b, "complete", "call_task", success=True)
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [8]


def x302_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("a"), bash("b"), view("c")], parallel=True)
    return read(b.to_bytes())


def x303() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("sleep 9", never_completes=True)], end=False)
    return read(b.to_bytes()), [7]


def x303_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("ls")], end=False)  # open turn, but its tool completed
    return read(b.to_bytes())


def x304() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    same = "call_same"
    b.turn("run", [bash("a", tool_call_id=same), bash("b", tool_call_id=same)])
    return read(b.to_bytes()), [9, 10]


def x305() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("done")
    tool(b, "start", "call_late", toolName="bash")
    tool(b, "complete", "call_late", success=True)
    return read(b.to_bytes()), [8, 9]


def x306() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    requests = [{"toolCallId": "call_never", "name": "bash", "arguments": {}}]
    b.event("assistant.message", {"content": "run", "toolRequests": requests})
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [6]


def x306_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("ls"), view("a")])
    return read(b.to_bytes())


def s401() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    tool(b, "start", "call_task", toolName="task")
    b.event("subagent.started", {"toolCallId": "call_task"}, agent_id="call_task")
    tool(b, "complete", "call_task", success=True)
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [7]


def subagent_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.subagent_run("tests", llm_calls=2, tool_calls=1)
    b.subagent_run("lint", error="boom")
    return read(b.to_bytes())


def subagent_scheme(scheme: str) -> ReadResult:
    """Two sub-agents (one failed) with their lines marked as the CLI versions of ``scheme``
    mark them: every line attributed, none unknown."""
    b = builder()
    b.user_message("hi")
    b.subagent_run("tests", llm_calls=2, tool_calls=1, scheme=scheme)
    b.subagent_run("lint", llm_calls=1, error="boom", scheme=scheme)
    return read(b.to_bytes())


def subagents_1_0_20() -> ReadResult:
    return subagent_scheme("parent")


def subagents_1_0_78() -> ReadResult:
    return subagent_scheme("task-id")


def subagents_1_0_85() -> ReadResult:
    return subagent_scheme("instance")


def s402() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    b.event("subagent.failed", {"toolCallId": "call_x", "error": "e"}, agent_id="call_x")
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [6]


def s403() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    b.event("assistant.message", {"content": "a"}, agent_id="call_ghost")
    b.event("assistant.message", {"content": "b"}, agent_id="call_ghost")
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [6]


def c501() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("done")
    b.event("session.task_complete", {"summary": "done"})
    return read(b.to_bytes()), [8]


def c502() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    b.event("assistant.message", {"content": "done"})
    b.event("session.task_complete", {"summary": "done"})
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [7]


def completion_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.task_complete_turn("done")
    return read(b.to_bytes())


def completion_by_tool_start_only() -> ReadResult:
    """The turn's task_complete call is seen only as its tool start (the message that
    requested it names no toolRequests): the completion came from the model, no C502."""
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    b.event("assistant.message", {"content": "done"})
    tool(b, "start", "call_done", toolName="task_complete")
    tool(b, "complete", "call_done", success=True)
    b.event("session.task_complete", {"summary": "done"})
    turn_events(b, ("end", "0"))
    return read(b.to_bytes())


def completion_by_request_only() -> ReadResult:
    """The task_complete call is seen only in the message's toolRequests (no tool start):
    no C502 either."""
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    requests = [{"toolCallId": "call_done", "name": "task_complete", "arguments": {}}]
    b.event("assistant.message", {"content": "done", "toolRequests": requests})
    b.event("session.task_complete", {"summary": "done"})
    turn_events(b, ("end", "0"))
    return read(b.to_bytes())


def r601() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.shutdown()
    b.resume()
    lines = b.lines()
    with_line(lines, 5, lambda event: event["data"].update(eventCount=2))  # type: ignore[attr-defined]
    return read(lines), [6]


def r601_duplicates() -> tuple[ReadResult, list[int | None]]:
    # A replayed line before the resume is a line the CLI did not count.
    b = builder()
    b.shutdown()
    b.resume()
    lines = b.lines()
    return read([lines[0], *synth.duplicate(lines[1]), *lines[2:]]), [5]


def r602() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.shutdown()
    b.resume()
    b.shutdown()
    lines = b.lines()
    with_line(lines, 5, lambda event: event["data"].update(eventsFileSizeBytes=1))  # type: ignore[attr-defined]
    return read(lines), [6, 7]  # the resume's own figure, and the shutdown after the change


def interrupted(closing: tuple[str, ...]) -> list[bytes]:
    """A tool interrupted by Ctrl-C: the CLI took the file's size for its shutdown before it
    wrote its closing lines (``closing``: "end" for a turn_end, "abort"), as CLIs 1.0.70 to
    1.0.102 do."""
    b = builder()
    b.user_message("hi")
    b.turn("running it", [bash("sleep 30", never_completes=True)], end=False)
    size_before = b.size
    for kind in closing:
        b.end_turn() if kind == "end" else b.abort("user_abort")
    b.shutdown()
    lines = b.lines()
    with_line(lines, -1, lambda event: event["data"].update(eventsFileSizeBytes=size_before))  # type: ignore[attr-defined]
    return lines


def interrupted_x302_miss() -> ReadResult:
    """A turn_end with no abort next to it: the tool lost its complete (X302), no interrupt."""
    return read(interrupted(("end",)))


def r602_interrupt_miss() -> ReadResult:
    """The size taken before the interrupt's lines (turn_end and abort, in either order, or
    two aborts) is no mismatch."""
    logs = [
        renamed(read(interrupted(closing)), f"{'-'.join(closing)}.jsonl")
        for closing in (("end", "abort"), ("abort", "end"), ("abort", "abort"))
    ]
    return ReadResult.concat(logs)


def x308() -> tuple[ReadResult, list[int | None]]:
    """The tool of an interrupted turn, the abort before or after the turn_end (1.0.85 on)."""
    logs = [
        renamed(read(interrupted(closing)), f"{'-'.join(closing)}.jsonl")
        for closing in (("end", "abort"), ("abort", "end"))
    ]
    return ReadResult.concat(logs), [7, 7]


def r602_no_abort() -> tuple[ReadResult, list[int | None]]:
    """Lines before a shutdown that no interrupt explains: a turn_end alone."""
    lines = interrupted(("end",))
    return read(lines), [len(lines)]


def continuity_miss() -> ReadResult:
    b = builder()
    b.user_message("hi")
    b.turn("ok")
    b.shutdown()
    b.resume()
    b.user_message("again")
    b.turn("ok")
    b.shutdown()
    return read(b.to_bytes())


def t205() -> tuple[ReadResult, list[int | None]]:
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("rm -rf build", never_completes=True)], end=False)
    b.event("permission.requested", {"permissionRequest": {"kind": "shell"}})
    b.shutdown()
    return read(b.to_bytes()), [5]


def open_at_shutdown_miss() -> ReadResult:
    """A turn and a tool open at the end of a log with no shutdown after them (T204, X303),
    and a shutdown before an open turn that a resume started."""
    b = builder()
    b.user_message("hi")
    b.turn("ok")
    b.shutdown()
    b.resume()
    b.user_message("again")
    b.turn("run", [bash("sleep 9", never_completes=True)], end=False)
    return read(b.to_bytes())


def quit_at_permission_prompt() -> ReadResult:
    """T205's log: the user quit with the turn and tool open (no T204, no X303)."""
    return t205()[0]


def open_at_end() -> ReadResult:
    """T204's and X303's log: open to the end, no shutdown (no T205, no X307)."""
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("sleep 9", never_completes=True)], end=False)
    return read(b.to_bytes())


def killed_and_resumed() -> ReadResult:
    """The real CLI's shape after a kill and a resume (tests/recordings/*/kill-resume): the
    killed run's turn (line 5) and tool (line 7) stay open, the resumed run (line 8) starts
    and closes its own turn, then shuts down."""
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("sleep 30", never_completes=True)], end=False)
    b.resume()
    b.user_message("go on")
    b.turn("ok")
    b.shutdown()
    return read(b.to_bytes())


def t206() -> tuple[ReadResult, list[int | None]]:
    return killed_and_resumed(), [5]


def x309() -> tuple[ReadResult, list[int | None]]:
    return killed_and_resumed(), [7]


def quit_then_resumed() -> ReadResult:
    """T205's log (the user quit with the turn and the tool open), then resumed: the open
    turn and tool were left at a shutdown of their own run (T205, X307), not by a kill."""
    b = builder()
    b.user_message("hi")
    b.turn("run", [bash("rm -rf build", never_completes=True)], end=False)
    b.shutdown()
    b.resume()
    b.user_message("again")
    b.turn("ok")
    b.shutdown()
    return read(b.to_bytes())


def x307() -> tuple[ReadResult, list[int | None]]:
    result, _ = t205()
    return result, [7]


def r603() -> tuple[ReadResult, list[int | None]]:
    first = builder()
    first.user_message("hi")
    first.turn("ok")
    first.shutdown()
    second = SessionBuilder(session_id=OTHER, seed=8, start="2026-08-05T07:40:00.000Z")
    second.user_message("hi")
    second.turn("ok")
    second.shutdown()
    return read(first.to_bytes() + second.to_bytes()), [len(first.lines()) + 1]


def r603_miss() -> ReadResult:
    """A resumed session (one id, one session.start) and a repeated session.start of the
    same id are one session."""
    b = builder()
    b.user_message("hi")
    b.turn("ok")
    b.shutdown()
    b.resume()
    b.event("session.start", {"sessionId": SESSION})
    b.shutdown()
    return read(b.to_bytes())


def clean_result() -> ReadResult:
    return read(clean().to_bytes())


def r604() -> tuple[ReadResult, list[int | None]]:
    """A log of a CLI one patch newer than the newest recorded version."""
    major, minor, patch = (int(part) for part in cli_format.NEWEST_VERIFIED.split("."))
    b = SessionBuilder(session_id=SESSION, seed=7, copilot_version=f"{major}.{minor}.{patch + 1}")
    b.user_message("hi")
    b.turn("ok")
    return read(b.to_bytes()), [1]


def r604_miss() -> ReadResult:
    """The newest recorded version itself, and an older one, are verified versions."""
    logs = []
    for version in (cli_format.NEWEST_VERIFIED, "1.0.9"):
        b = SessionBuilder(session_id=SESSION, seed=7, copilot_version=version)
        b.user_message("hi")
        b.turn("ok")
        logs.append(renamed(read(b.to_bytes()), f"{version}.jsonl"))
    return ReadResult.concat(logs)


def s403_instance() -> tuple[ReadResult, list[int | None]]:
    """CLI 1.0.85 on: a sub-agent instance id that no subagent.started links to a task."""
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    ghost = "6acc76eb-054a-47f2-aed1-db476add218a"
    b.event("assistant.turn_start", {"turnId": "0", "parentToolCallId": "call_x"}, agent_id=ghost)
    b.event("assistant.turn_end", {"turnId": "0", "parentToolCallId": "call_x"}, agent_id=ghost)
    turn_events(b, ("end", "0"))
    return read(b.to_bytes()), [6]


TRIGGERS: dict[str, list[Callable[..., tuple[ReadResult, list[int | None]]]]] = {
    "E101": [e101],
    "E102": [e102],
    "E103": [e103],
    "E104": [e104],
    "E105": [e105],
    "E106": [e106],
    "E107": [e107],
    "E108": [e108],
    "E109": [e109, e109_flat],
    "E110": [e110],
    "E111": [e111],
    "E112": [e112],
    "E113": [e113],
    "E121": [e121],
    "E122": [e122],
    "E123": [e123],
    "E124": [e124],
    "E125": [e125],
    "E114": [e114],
    "E115": [e115],
    "E116": [e116],
    "E117": [e117],
    "E118": [e118],
    "E119": [e119],
    "E120": [e120],
    "T201": [t201],
    "T202": [t202],
    "T203": [t203],
    "T204": [t204],
    "X301": [x301],
    "X302": [x302, x302_subagent],
    "X303": [x303],
    "X304": [x304],
    "X305": [x305],
    "X306": [x306],
    "S401": [s401],
    "S402": [s402],
    "S403": [s403, s403_instance],
    "C501": [c501],
    "C502": [c502],
    "R601": [r601, r601_duplicates],
    "R602": [r602, r602_no_abort],
    "R603": [r603],
    "T205": [t205],
    "X307": [x307],
    "X308": [x308],
    "R604": [r604],
    "T206": [t206],
    "X309": [x309],
}

MISSES: dict[str, list[Callable[[], ReadResult]]] = {
    "E101": [e101_miss],
    "E102": [e102_miss],
    "E103": [clean_result],
    "E104": [e104_miss],
    "E105": [e105_miss],
    "E106": [e106_miss],
    "E107": [e107_miss],
    "E108": [e108_miss],
    "E109": [e109_miss],
    "E110": [e110_miss],
    "E111": [clean_result],
    "E112": [e101_miss],
    "E113": [e113_miss],
    "E121": [e121_miss],
    "E122": [e122_miss],
    "E123": [e123_miss],
    "E124": [e124_miss],
    "E125": [clean_result],
    "E114": [clean_result],
    "E115": [clean_result],
    "E116": [clean_result],
    "E117": [clean_result],
    "E118": [e108_miss],
    "E119": [e119_miss],
    "E120": [e120_miss],
    "T201": [t201_miss],
    "T202": [t201_miss, killed_and_resumed],
    "T203": [t203_miss],
    "T204": [t204_miss, quit_at_permission_prompt, killed_and_resumed],
    "X301": [x301_miss],
    "X302": [x302_miss, r602_interrupt_miss],
    "X303": [x303_miss, quit_at_permission_prompt, killed_and_resumed],
    "X304": [x302_miss],
    "X305": [x301_miss],
    "X306": [x306_miss],
    "S401": [subagent_miss, subagents_1_0_20, subagents_1_0_85],
    "S402": [subagent_miss, subagents_1_0_20, subagents_1_0_85],
    "S403": [subagent_miss, subagents_1_0_20, subagents_1_0_78, subagents_1_0_85],
    "C501": [completion_miss],
    "C502": [completion_miss, completion_by_tool_start_only, completion_by_request_only],
    "R601": [continuity_miss],
    "R602": [continuity_miss, r602_interrupt_miss],
    "R603": [r603_miss, continuity_miss],
    "T205": [open_at_shutdown_miss, open_at_end, killed_and_resumed],
    "X307": [open_at_shutdown_miss, open_at_end, killed_and_resumed],
    "X308": [x302_miss, interrupted_x302_miss],
    "R604": [r604_miss, clean_result],
    "T206": [open_at_end, quit_then_resumed, open_at_shutdown_miss],
    "X309": [open_at_end, quit_then_resumed, open_at_shutdown_miss],
}


def test_every_rule_has_a_trigger_and_a_near_miss() -> None:
    codes = [rule.code for rule in RULES]
    assert sorted(TRIGGERS) == sorted(codes)
    assert sorted(MISSES) == sorted(codes)


@pytest.mark.parametrize(
    ("code", "case"),
    [(code, case) for code, cases in TRIGGERS.items() for case in cases],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_rule_fires_at_its_line(
    code: str, case: Callable[..., tuple[ReadResult, list[int | None]]], tmp_path: Path
) -> None:
    result, expected = case(tmp_path) if case is e117 else case()
    assert lines_of(result, code) == expected


@pytest.mark.parametrize(
    ("code", "case"),
    [(code, case) for code, cases in MISSES.items() for case in cases],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_near_miss_does_not_fire(code: str, case: Callable[[], ReadResult]) -> None:
    assert lines_of(case(), code) == []


def test_a_repeated_tool_call_id_names_the_line_of_its_first_use() -> None:
    # x304's log, read by hand: start and complete of call_same at lines 7 and 8, again at 9
    # and 10.
    result, _ = x304()
    found = validate.check(result, select=["X304"])
    assert found.select("line", "message").rows() == [
        (9, "tool.execution_start repeats toolCallId call_same, already seen on line 7"),
        (10, "tool.execution_complete repeats toolCallId call_same, already seen on line 8"),
    ]


# --- the findings frame ------------------------------------------------------------------------


def test_finding_carries_location_rule_and_message() -> None:
    result, _ = t201()
    found = validate.check(result)
    turn_end = result.events.filter(pl.col("line") == 7)
    expected = pl.DataFrame(
        {
            "file": ["log.jsonl"],
            "line": [7],
            "event_id": turn_end["event_id"].to_list(),
            "code": ["T201"],
            "name": ["orphan-turn-end"],
            "severity": ["error"],
            "message": ["assistant.turn_end (turnId 0) with no open turn"],
            "session_id": [SESSION],
        },
        schema=validate.FINDINGS_SCHEMA,
    )
    assert_frame_equal(found, expected)


def test_findings_sorted_by_file_then_line() -> None:
    parts = [
        e116()[0],
        renamed(e104()[0], "b.jsonl"),
        read(synth.cut(builder().to_bytes()), "a.jsonl"),
    ]
    found = validate.check(ReadResult.concat(parts))
    keys = found.select("file", "line").rows()
    assert keys == sorted(keys, key=lambda key: (key[0], key[1] or 0))
    assert found["file"].unique().sort().to_list() == ["a.jsonl", "b.jsonl", "log.jsonl"]


def test_empty_input_gives_an_empty_typed_frame() -> None:
    found = validate.check(ReadResult.empty())
    assert found.schema == pl.Schema(validate.FINDINGS_SCHEMA)
    assert found.is_empty()


def test_unknown_type_reported_once_per_type_with_its_count() -> None:
    result, _ = e107()
    found = validate.check(result).filter(code="E107")
    assert found["message"].to_list() == [
        "unknown event type session.brand_new (2 lines in this file; first here)"
    ]


def test_turn_start_while_open_names_the_open_turn() -> None:
    result, _ = t202()
    message = validate.check(result).filter(code="T202")["message"].item()
    assert "line 5" in message
    assert lines_of(result, "T204") == []


def test_parent_chain_break_names_the_previous_line() -> None:
    result, _ = e104()
    message = validate.check(result).filter(code="E104")["message"].item()
    assert "on line 2" in message


def test_unclosed_subagent_tool_is_a_warning_not_an_error() -> None:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    tool(b, "start", "call_task", toolName="task")
    b.event("subagent.started", {"toolCallId": "call_task"}, agent_id="call_task")
    b.event("tool.execution_start", {"toolCallId": "call_sub"}, agent_id="call_task")
    found = validate.check(read(b.to_bytes()))
    assert sorted(found.select("code", "line").rows()) == [
        ("S401", 7),
        ("T204", 5),
        ("X303", 6),
        ("X303", 8),
    ]
    assert set(found["severity"]) == {"warning"}


def test_user_requested_complete_in_a_turn_is_not_an_orphan() -> None:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    tool(b, "complete", "call_shell", success=True, isUserRequested=True)
    turn_events(b, ("end", "0"))
    assert validate.check(read(b.to_bytes())).is_empty()


def test_complete_before_its_start_is_an_orphan() -> None:
    b = builder()
    b.user_message("hi")
    turn_events(b, ("start", "0"))
    tool(b, "complete", "call_x", success=True)
    tool(b, "start", "call_x", toolName="bash")
    turn_events(b, ("end", "0"))
    found = validate.check(read(b.to_bytes()))
    assert found.filter(code="X301")["line"].to_list() == [6]
    assert found.filter(code="X302")["line"].to_list() == [7]


# --- selection ---------------------------------------------------------------------------------


def test_codes_are_unique_stable_and_well_formed() -> None:
    codes = [rule.code for rule in RULES]
    names = [rule.name for rule in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in RULES:
        assert rule.code[0] in validate.FAMILIES
        assert rule.code[1:].isdigit() and len(rule.code) == 4
        assert rule.name == rule.name.lower() and " " not in rule.name
        assert rule.severity in validate.SEVERITIES
        assert rule.summary.endswith(".") and rule.explanation.endswith(".")
    # The families are numbered by hundreds: E1xx, T2xx, X3xx, S4xx, C5xx, R6xx.
    assert {rule.code[:2] for rule in RULES} == {"E1", "T2", "X3", "S4", "C5", "R6"}


def test_every_reader_kind_maps_to_its_own_rule() -> None:
    for kind, code in validate.DIAGNOSTIC_RULES.items():
        assert code in validate.RULES_BY_CODE, kind


@pytest.mark.parametrize(
    ("select", "ignore", "expected"),
    [
        (None, [], [rule.code for rule in RULES]),
        (["T2"], [], ["T201", "T202", "T203", "T204", "T205", "T206"]),
        (["t201,orphan-tool-complete"], [], ["T201", "X301"]),
        (["ALL"], ["E", "X", "S", "C", "R", "T20"], []),
        (
            ["X30"],
            ["tool-never-completed"],
            ["X301", "X302", "X304", "X305", "X306", "X307", "X308", "X309"],
        ),
    ],
)
def test_resolve(select: list[str] | None, ignore: list[str], expected: list[str]) -> None:
    assert [rule.code for rule in validate.resolve(select, ignore)] == expected


@pytest.mark.parametrize("bad", ["Z999", "E9", "no-such-rule", "E1x", "T2,Q"])
def test_unknown_selector_is_a_usage_error(bad: str) -> None:
    with pytest.raises(UnknownRuleError) as caught:
        validate.resolve([bad], [])
    assert caught.value.exit_code == 2
    with pytest.raises(UnknownRuleError):
        validate.resolve(None, [bad])


@pytest.mark.parametrize("bad", ["", "E1", "T", "ALL"])
def test_find_rule_takes_one_code_or_name(bad: str) -> None:
    with pytest.raises(UnknownRuleError):
        validate.find_rule(bad)


def test_select_and_ignore_filter_findings() -> None:
    result = ReadResult.concat([t201()[0], renamed(e116()[0], "other.jsonl")])
    assert set(validate.check(result)["code"]) == {"T201", "E116"}
    assert set(validate.check(result, select=["T"])["code"]) == {"T201"}
    assert set(validate.check(result, ignore=["blank-line"])["code"]) == {"T201"}


def test_find_rule_by_code_or_name() -> None:
    assert validate.find_rule("x301").name == "orphan-tool-complete"
    assert validate.find_rule("orphan-tool-complete").code == "X301"


# --- the gate ----------------------------------------------------------------------------------


def test_report_fails_on_errors_and_on_warnings_only_when_strict() -> None:
    warnings_only = t204()[0]
    assert not validate.validate(warnings_only).failed
    assert validate.validate(warnings_only, strict=True).failed
    info_only = e107()[0]
    assert not validate.validate(info_only, strict=True).failed
    assert validate.validate(t201()[0]).failed


def test_report_summary_and_statistics() -> None:
    parts = [t201()[0], read(clean().to_bytes(), "clean.jsonl"), renamed(e106()[0], "e.jsonl")]
    result = ReadResult.concat(parts)
    report = Report(
        validate.check(result), validate.checked_files(result), validate.resolve(), strict=False
    )
    assert report.summary() == {
        "files": 3,
        "sessions": 1,
        "findings": 3,
        "errors": 1,
        "warnings": 2,
        "info": 0,
        "failing": 1,
        "files_failing": 1,
        "strict": False,
        "failed": True,
    }
    assert report.statistics().rows() == [
        ("E106", "ephemeral-event", "warning", 2),
        ("T201", "orphan-turn-end", "error", 1),
    ]


def test_checked_files_lists_files_with_no_event() -> None:
    result = ReadResult.concat([read(b"", "empty.jsonl"), read(builder().to_bytes(), "b.jsonl")])
    assert validate.checked_files(result)["file"].to_list() == ["b.jsonl", "empty.jsonl"]


# --- real and bundled logs ---------------------------------------------------------------------


def test_real_samples_have_no_findings(real_samples: Path) -> None:
    paths = sorted(real_samples.glob("*.jsonl"))
    result = read_all([Source(path, path.stem) for path in paths])
    found = validate.check(result)
    assert found.is_empty(), found.to_dicts()
    # Their shutdowns record eventsFileSizeBytes, and it is each shutdown line's offset.
    shutdowns = result.events.filter(pl.col("type") == "session.shutdown")
    claimed = shutdowns["detail"].str.json_path_match("$.eventsFileSizeBytes").cast(pl.Int64)
    assert claimed.to_list() == shutdowns["offset"].to_list()
    assert len(claimed) == 3


def test_bundled_samples_validate_without_errors_except_the_damaged_one() -> None:
    from copilot_logs.ingest.discover import Selection, find_sources

    result = read_all(find_sources(Selection(selectors=[str(SAMPLES)])))
    found = validate.check(result).with_columns(
        folder=pl.col("file").str.extract(r"sample_sessions/([0-9a-f]{8})")
    )
    damaged = "4bbad07c"
    clean_files = found.filter(pl.col("folder") != damaged)
    assert clean_files.filter(severity="error").is_empty(), clean_files.to_dicts()
    # Only the session cut off mid-turn warns: its open turn and its running tool.
    assert sorted(clean_files.select("folder", "code", "line").rows()) == [
        ("18e7da49", "T204", 15),
        ("18e7da49", "X303", 17),
    ]
    assert not found.filter(
        (pl.col("folder") == damaged) & (pl.col("severity") == "error")
    ).is_empty()


def test_tool_call_with_explicit_success_false_is_not_a_finding() -> None:
    b = builder()
    b.user_message("hi")
    b.turn("run", [ToolCall("bash", {"command": "false"}, success=False, error="exit 1")])
    b.shutdown()
    assert validate.check(read(b.to_bytes())).is_empty()
