"""Hypothesis strategies for hostile session logs (used by tests/test_fuzz.py).

A log starts as a valid session written by ``synth.SessionBuilder`` whose every
free-text field (prompt, tool names and arguments, results, model, repository, branch, cwd,
session id, agent names, error messages, summaries) carries control characters and terminal
or CI escapes; then its bytes are damaged: numbers past int64 and past float written raw
(``1e999``), ~1,000-deep nesting, raw control bytes, latin-1 and invalid UTF-8, lone surrogate
escapes, BOMs, a second session in the same stream, lines cut, duplicated, dropped, swapped,
split and glued, NUL tails, CRLF and blank lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

from synth import SessionBuilder, Subagent, SubagentStep, ToolCall

C0 = [chr(code) for code in range(0x20)]
C1 = [chr(code) for code in range(0x80, 0xA0)]
CONTROLS = [*C0, "\x7f", *C1]

#: Text that drives a terminal, a CI log or a renderer when printed as is.
ESCAPES = [
    "\x1b[31mred\x1b[0m",  # CSI: colour
    "\x1b[2J\x1b[H",  # CSI: clear the screen
    "\x1b]52;c;aGFja2Vk\x07",  # OSC 52: write the clipboard
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # OSC 8: hyperlink
    "\x9b31m",  # 8-bit CSI
    "\x1bP1$r\x1b\\",  # DCS
    "\n::error::injected",  # a GitHub Actions workflow command on a line of its own
    "\r\n::warning file=x,line=1::injected",
    "\n::add-mask::secret",
    "::stop-commands::token",
    "%0A::error::encoded",
    "\u2028::error::after-line-separator",
    "[bold red]markup[/]",  # rich markup
    "[/]",
    "[link=https://evil.example]x[/link]",
    "| pipe | in | cell |",
    "<![CDATA[ ]]> <x/> &#27; &amp;",
    '"quoted", comma',
    "\\",
    "\u202e",  # right-to-left override
    "\ufeff",  # a BOM inside text
]

#: Every control character and every escape at once: the worst text a field can hold.
EVERYTHING = "".join(CONTROLS) + "".join(ESCAPES)

HOSTILE_TEXT = st.lists(
    st.one_of(
        st.sampled_from(CONTROLS),
        st.sampled_from(ESCAPES),
        st.text(max_size=4),
    ),
    min_size=1,
    max_size=5,
).map("".join)

#: Numbers no int64 or float holds, and other numbers readers trip on, as raw JSON text.
HOSTILE_NUMBERS = [
    b"1e999",
    b"-1e999",
    b"1E+400",
    b"1e-999",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"123456789012345678901234567890123456789",
    b"9" * 400,
    b"-0",
    b"0.1e400",
]
DEPTH = 1_000
DEEP = [b"[" * DEPTH + b"]" * DEPTH, b'{"a":' * DEPTH + b"1" + b"}" * DEPTH]
#: Other JSON values that stand where a field of another type is expected.
WRONG_TYPES = [b"null", b"true", b"[]", b"{}", b'""', b'"x"', b"[1,2]", *HOSTILE_NUMBERS[:2]]

#: Raw bytes put inside a JSON string: control bytes (invalid JSON), latin-1 and other invalid
#: UTF-8, lone surrogates (escaped and raw), a BOM, C1 characters as valid UTF-8.
RAW_IN_STRING = [
    *(bytes([code]) for code in (*range(0x20), 0x7F)),
    b"\x1b[31m",
    b"\x1b]52;c;aGFja2Vk\x07",
    "\x9b".encode(),
    "\x85".encode(),
    b"\xe9t\xe9",  # latin-1 "été"
    b"\xff\xfe",
    b"\xc0\xaf",  # overlong
    b"\xed\xa0\x80",  # a surrogate encoded as UTF-8
    b"\\ud800",
    b"\\udfff",
    b"\\ud83d x",
    b"\xef\xbb\xbf",
]

BOM = b"\xef\xbb\xbf"


def _maybe(draw: st.DrawFn, strategy: st.SearchStrategy[Any]) -> Any:
    return draw(st.one_of(st.none(), strategy))


@st.composite
def sessions(draw: st.DrawFn, text: st.SearchStrategy[str] = HOSTILE_TEXT) -> SessionBuilder:
    """A valid session whose text fields are all drawn from ``text``."""
    b = SessionBuilder(
        seed=draw(st.integers(0, 1 << 16)),
        session_id=_maybe(draw, text),
        model=draw(text),
        repository=draw(text),
        branch=draw(text),
        cwd=draw(text),
        copilot_version=draw(text),
    )
    if draw(st.booleans(), label="autopilot"):
        b.mode_changed("autopilot")
    b.user_message(draw(text))
    sub_tool = ToolCall(draw(text), {draw(text): draw(text)}, result=draw(text))
    sub = Subagent(
        prompt=draw(text),
        steps=(SubagentStep(draw(text), tools=(sub_tool,)),),
        error=_maybe(draw, text),
        agent_name=draw(text),
        display_name=draw(text),
        description=draw(text),
        model=_maybe(draw, text),
    )
    tools = [
        ToolCall(draw(text), {draw(text): draw(text)}, result=draw(text), error=_maybe(draw, text)),
        ToolCall("task", {"prompt": draw(text), "name": draw(text)}, subagent=sub),
    ]
    b.turn(draw(text), tools, parallel=draw(st.booleans()))
    b.turn(None)
    b.session_error(draw(text), draw(text))
    if b.mode == "autopilot":
        b.nudge()
    b.model_change(draw(text))
    b.info(draw(text), draw(text))
    b.task_complete_turn(draw(text), text=draw(text))
    if draw(st.booleans(), label="aborted"):
        b.abort(draw(text))
    b.shutdown(shutdown_type=draw(text))
    return b


# --- damage on lines (bytes without their newline) ---------------------------------------------

Lines = list[bytes]
_MARK = "\u2063mark\u2063"


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every leaf (and every object or list) below ``value``."""
    found: list[tuple[Any, ...]] = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_leaves(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_leaves(item, (*path, index)))
    return found


def _replace_at(draw: st.DrawFn, line: bytes, make: Callable[[Any], tuple[str, bytes]]) -> bytes:
    """``line`` with one value (drawn) replaced: ``make(old)`` gives the text to serialise in
    its place (holding a mark) and the raw bytes the mark becomes. A line that does not parse
    gets the raw bytes at a drawn offset instead."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = None
    paths = _leaves(event) if isinstance(event, dict) else []
    if not paths:
        at = draw(st.integers(0, len(line)))
        return line[:at] + make("")[1] + line[at:]
    path = draw(st.sampled_from(paths))
    container = event
    for key in path[:-1]:
        container = container[key]
    text, raw = make(container[path[-1]])
    container[path[-1]] = text
    return orjson.dumps(event).replace(_MARK.encode(), raw, 1)


def _pick(draw: st.DrawFn, lines: Lines) -> int:
    return draw(st.integers(0, len(lines) - 1), label="line")


def raw_value(draw: st.DrawFn, lines: Lines) -> Lines:
    """A value becomes a huge number, a deep nesting or a value of another type, raw."""
    raw = draw(st.sampled_from([*HOSTILE_NUMBERS, *DEEP, *WRONG_TYPES]))
    k = _pick(draw, lines)
    return [*lines[:k], _replace_at(draw, lines[k], lambda _old: (_MARK, raw)), *lines[k + 1 :]]


def raw_in_string(draw: st.DrawFn, lines: Lines) -> Lines:
    """Raw bytes (control, latin-1, invalid UTF-8, surrogates) inside a value's text."""
    raw = draw(st.sampled_from(RAW_IN_STRING))

    def make(old: Any) -> tuple[str, bytes]:
        text = old if isinstance(old, str) else ""
        at = draw(st.integers(0, len(text)))
        return text[:at] + _MARK + text[at:], raw

    k = _pick(draw, lines)
    return [*lines[:k], _replace_at(draw, lines[k], make), *lines[k + 1 :]]


def latin1_line(draw: st.DrawFn, lines: Lines) -> Lines:
    """A whole line written in latin-1 (a mixed-encoding file)."""
    k = _pick(draw, lines)
    text = lines[k].decode("utf-8", "replace")
    return [*lines[:k], text.encode("latin-1", "replace"), *lines[k + 1 :]]


def cut_line(draw: st.DrawFn, lines: Lines) -> Lines:
    k = _pick(draw, lines)
    return [*lines[:k], lines[k][: draw(st.integers(0, len(lines[k])))], *lines[k + 1 :]]


def duplicate_line(draw: st.DrawFn, lines: Lines) -> Lines:
    k = _pick(draw, lines)
    return [*lines[: k + 1], lines[k], *lines[k + 1 :]]


def drop_line(draw: st.DrawFn, lines: Lines) -> Lines:
    if len(lines) < 2:
        return lines
    k = _pick(draw, lines)
    return [*lines[:k], *lines[k + 1 :]]


def swap_lines(draw: st.DrawFn, lines: Lines) -> Lines:
    i, j = _pick(draw, lines), _pick(draw, lines)
    swapped = list(lines)
    swapped[i], swapped[j] = lines[j], lines[i]
    return swapped


def split_line(draw: st.DrawFn, lines: Lines) -> Lines:
    k = _pick(draw, lines)
    at = draw(st.integers(0, len(lines[k])))
    return [*lines[:k], lines[k][:at], lines[k][at:], *lines[k + 1 :]]


def glue_lines(draw: st.DrawFn, lines: Lines) -> Lines:
    if len(lines) < 2:
        return lines
    k = draw(st.integers(0, len(lines) - 2))
    keep = draw(st.integers(0, len(lines[k])))
    return [*lines[:k], lines[k][:keep] + lines[k + 1], *lines[k + 2 :]]


def blank_line(draw: st.DrawFn, lines: Lines) -> Lines:
    k = draw(st.integers(0, len(lines)))
    blank = draw(st.sampled_from([b"", b" ", b"\t", b"\r", b"\x00\x00", b"\x0c\x0b"]))
    return [*lines[:k], blank, *lines[k:]]


def crlf_line(draw: st.DrawFn, lines: Lines) -> Lines:
    if draw(st.booleans(), label="every line"):
        return [line + b"\r" for line in lines]
    k = _pick(draw, lines)
    return [*lines[:k], lines[k] + b"\r", *lines[k + 1 :]]


def bom_line(draw: st.DrawFn, lines: Lines) -> Lines:
    k = _pick(draw, lines)
    return [*lines[:k], BOM + lines[k], *lines[k + 1 :]]


LINE_DAMAGES: list[Callable[[st.DrawFn, Lines], Lines]] = [
    raw_value,
    raw_in_string,
    latin1_line,
    cut_line,
    duplicate_line,
    drop_line,
    swap_lines,
    split_line,
    glue_lines,
    blank_line,
    crlf_line,
    bom_line,
]


@st.composite
def hostile_logs(draw: st.DrawFn, text: st.SearchStrategy[str] = HOSTILE_TEXT) -> bytes:
    """The bytes of one hostile ``events.jsonl`` (maybe holding two sessions)."""
    lines = draw(sessions(text)).lines()
    second = draw(st.sampled_from(["none", "appended", "interleaved"]), label="second session")
    if second != "none":
        other = draw(sessions(text)).lines()
        if second == "appended":
            lines = lines + other
        else:
            lines = [line for pair in zip(lines, other, strict=False) for line in pair]
    for damage in draw(st.lists(st.sampled_from(LINE_DAMAGES), max_size=4), label="damages"):
        lines = damage(draw, lines)
    data = b"".join(line + b"\n" for line in lines)
    if draw(st.booleans(), label="BOM"):
        data = BOM + data
    if draw(st.booleans(), label="cut file"):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans(), label="NUL tail"):
        data += b"\x00" * draw(st.integers(1, 300))
    if draw(st.integers(0, 15), label="UTF-16") == 0:
        data = data.decode("utf-8", "replace").encode("utf-16")
    return data


# --- file names ----------------------------------------------------------------------------

#: Characters a file name may hold on a POSIX file system (not `/`, not NUL), control ones
#: included, plus undecodable bytes (kept by Python as surrogate escapes).
_NAME_CHARS = st.one_of(
    st.sampled_from([c for c in CONTROLS if c != "\x00"]),
    st.sampled_from(["\x1b[31m", "\x9b2J", "\n::error::x", ":", "|", ",", "%", " ", "[/]"]),
    st.sampled_from([os.fsdecode(bytes([b])) for b in (0xFF, 0xE9, 0xC0, 0x80)]),
    st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]),
)

FILE_NAMES = (
    st.lists(_NAME_CHARS, min_size=1, max_size=12)
    .map("".join)
    .filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) <= 200)
)


# --- hand-made hostile logs, checked on every run --------------------------------------------


def with_raw(line: bytes, edits: dict[tuple[str | int, ...], bytes]) -> bytes:
    """``line`` with the value at each path (keys into the event) replaced by raw JSON text."""
    event = orjson.loads(line)
    for number, path in enumerate(edits):
        container = event
        for key in path[:-1]:
            container = container[key]
        container[path[-1]] = f"{_MARK}{number}"
    out: bytes = orjson.dumps(event)
    for number, raw in enumerate(edits.values()):
        out = out.replace(orjson.dumps(f"{_MARK}{number}"), raw, 1)
    return out


def _plain_session(seed: int) -> SessionBuilder:
    b = SessionBuilder(seed=seed)
    b.user_message("fix the build")
    b.turn("looking", [ToolCall("bash", {"command": "make"}, result="ok")])
    b.shutdown()
    b.resume()
    b.user_message("and the tests")
    b.task_complete_turn("done")
    b.shutdown()
    return b


def _edit(lines: Lines, edits: dict[str, dict[tuple[str | int, ...], bytes]]) -> Lines:
    """Lines with raw values put in: ``edits`` maps an event type to its paths and values."""
    damaged = []
    for line in lines:
        kind = orjson.loads(line)["type"]
        damaged.append(with_raw(line, edits[kind]) if kind in edits else line)
    return damaged


def known_logs() -> dict[str, bytes]:
    """One hostile log per kind of trouble, named: what a reader must survive on every run,
    not only when hypothesis happens to draw it."""
    lines = _plain_session(1).lines()
    other = _plain_session(2).lines()
    metrics = ("data", "modelMetrics", "gpt-5-mini")
    logs = {
        "int-past-int64": _edit(
            lines,
            {
                "assistant.message": {("data", "outputTokens"): HOSTILE_NUMBERS[7]},
                "session.shutdown": {(*metrics, "usage", "inputTokens"): HOSTILE_NUMBERS[5]},
            },
        ),
        "float-past-double": _edit(
            lines,
            {
                "session.shutdown": {
                    (*metrics, "requests", "cost"): b"1e999",
                    ("data", "totalPremiumRequests"): b"-1e999",
                    ("data", "totalNanoAiu"): HOSTILE_NUMBERS[8],
                }
            },
        ),
        "times-past-double": _edit(
            lines,
            {
                "session.start": {("data", "startTime"): b"1e999"},
                "assistant.turn_start": {("timestamp",): b"1e999"},
            },
        ),
        "resume-counts-huge": _edit(
            lines,
            {
                "session.resume": {
                    ("data", "eventCount"): HOSTILE_NUMBERS[7],
                    ("data", "eventsFileSizeBytes"): b"1e999",
                }
            },
        ),
        "deep-nesting": _edit(
            lines,
            {
                "tool.execution_start": {("data", "arguments"): DEEP[0]},
                "assistant.turn_end": {("data",): DEEP[1]},
            },
        ),
        "wrong-types": _edit(
            lines,
            {
                "assistant.turn_start": {("data", "turnId"): b"[1]"},
                "user.message": {("data",): b'"text"'},
                "session.shutdown": {("data", "modelMetrics"): b"[1e999]"},
            },
        ),
        "bom-on-every-line": [BOM + line for line in lines],
        "two-sessions-interleaved": [
            line for pair in zip(lines, other, strict=False) for line in pair
        ],
        "bad-encodings": _edit(
            lines,
            {"user.message": {("data", "content"): b'"\xe9t\xe9 \xff \\ud800 \xed\xa0\x80"'}},
        ),
    }
    # A cut line before an event whose numbers and escapes a re-serialised line would change:
    # --repair relinks that event's parentId, and must change those bytes alone.
    at = next(
        i for i, line in enumerate(lines) if orjson.loads(line)["type"] == "assistant.message"
    )
    odd = with_raw(
        lines[at],
        {
            ("data", "outputTokens"): HOSTILE_NUMBERS[7],
            ("data", "chunkIndex"): b"1E2",
            ("data", "content"): '"a\u2028b \\/ \\u00e9"'.encode(),
        },
    )
    logs["cut-before-raw-values"] = [*lines[: at - 1], lines[at - 1][:20], odd, *lines[at + 1 :]]
    known = {name: b"".join(line + b"\n" for line in damaged) for name, damaged in logs.items()}
    known["utf-16"] = known["bom-on-every-line"].decode("utf-8").encode("utf-16")
    known["nul-tail-crlf-blank"] = b"".join(line + b"\r\n\n" for line in lines) + b"\x00" * 64
    return known


@st.composite
def damaged_sessions(draw: st.DrawFn, text: st.SearchStrategy[str] = HOSTILE_TEXT) -> bytes:
    """One hostile session whose first line (its session.start) is whole: everything after it
    may be damaged. Ends with a newline, so what follows it in a stream starts a line."""
    first, *rest = draw(sessions(text)).lines()
    for damage in draw(st.lists(st.sampled_from(LINE_DAMAGES), max_size=4), label="damages"):
        rest = damage(draw, rest) if rest else rest
    return b"".join(line + b"\n" for line in [first, *rest])


# --- autopilot runs whose loops are known ----------------------------------------------------


@dataclass(frozen=True)
class LoopRun:
    """A generated autopilot run and its truth, counted while it was written: whether a loop
    sign fires (with the default thresholds) and how many LLM calls it wastes."""

    builder: SessionBuilder
    looping: bool
    wasted_calls: int
    episodes: tuple[str, ...]


REPEAT_AT = 3
"""The default threshold of ``repeated-call`` (docs/audit.md), as the truth counts it."""


@st.composite
def loop_runs(draw: st.DrawFn, text: st.SearchStrategy[str] = HOSTILE_TEXT) -> LoopRun:
    """An autopilot task of episodes, no nudge: ``work`` (different commands), ``repeat`` (one
    command again and again, its description worded anew each time, the free text drawn from
    ``text`` and sometimes long enough that the arguments' preview cuts it), ``poll``
    (read_agent with the same arguments, still running until the last answer); a text turn may
    follow any episode; the run ends with an accepted task_complete or a final answer.

    The truth, by docs/audit.md: a run of the same call (tool, arguments but the description,
    success) ``REPEAT_AT`` times or more is a loop, unless it is polling and the task then
    completes; its wasted calls run from the call that asked for the second to the call that
    asked for another tool (or the end of the task)."""
    b = SessionBuilder(seed=draw(st.integers(0, 1 << 16)))
    b.mode_changed("autopilot")
    b.user_message("Do the work.")
    calls = 0
    asks: list[tuple[int, str, str]] = []  # (the call that asked, the call's identity, episode)
    kinds = draw(st.lists(st.sampled_from(["work", "repeat", "poll"]), min_size=1, max_size=4))
    for index, kind in enumerate(kinds):
        count = draw(st.integers(1, 3) if kind == "work" else st.integers(2, 5), label=kind)
        failing = draw(st.booleans(), label="fails")
        for step in range(count):
            calls += 1
            if kind == "work":
                tool = ToolCall("bash", {"command": f"make step{index}-{step}"}, result="ok")
                identity = f"work {index} {step}"
            elif kind == "repeat":
                words = draw(text) + "x" * draw(st.sampled_from([0, 200]))
                arguments = {"command": f"make check{index}", "description": words}
                tool = ToolCall("bash", arguments, result="1 failed", success=not failing)
                identity = f"repeat {index}"
            else:
                answer = "still running" if step < count - 1 else "The answer."
                tool = ToolCall("read_agent", {"agent_id": f"agent-{index}", "wait": True}, answer)
                identity = f"poll {index}"
            b.turn("Working.", [tool])
            asks.append((calls, identity, kind))
        if draw(st.booleans(), label="text turn"):
            calls += 1
            b.turn("Progress so far.")
    completed = draw(st.booleans(), label="completed")
    calls += 1
    if completed:
        b.turn("", [ToolCall("task_complete", {"summary": "Done."}, result="Done.")], end=False)
        b.event("session.task_complete", {"summary": "Done.", "success": True}, after_ms=1)
        b.end_turn()
    else:
        b.turn("I believe this is done.")
    b.shutdown()
    wasted: set[int] = set()
    at = 0
    while at < len(asks):
        end = at
        while end + 1 < len(asks) and asks[end + 1][1] == asks[at][1]:
            end += 1
        strength, kind = end - at + 1, asks[at][2]
        if strength >= REPEAT_AT and not (kind == "poll" and completed):
            until = asks[end + 1][0] if end + 1 < len(asks) else calls + 1
            wasted.update(range(asks[at + 1][0], until))
        at = end + 1
    return LoopRun(b, bool(wasted), len(wasted), tuple(kinds))
