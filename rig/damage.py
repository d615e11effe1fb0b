"""The ways users' session logs are damaged, done to a recording's ``events.jsonl`` (bytes in,
bytes out), for the resume harness (:mod:`rig.resume`) and the tests of ``doctor --repair``.

Each damage copies one report against the CLI: a crash's NUL tail (copilot-cli#2217), a cut
last line and a truncated event with the next one glued behind it (#4098), a raw newline
inside a string (#2649), a raw U+2028 (#2490), a tool call left open (#3366, #3183), a session
that ended without its shutdown (#3994); and three the reader reports that no issue names
(invalid UTF-8, a blank line, a replayed line). ``kill-9`` is not done to bytes: the harness kills a
real CLI while its tool runs, and the log it leaves is the damage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Damage:
    name: str
    about: str
    base: str
    """The recorded scenario damaged (tests/recordings/<version>/<base>/events.jsonl)."""
    apply: Callable[[bytes], bytes] | None
    """None for ``kill-9``: the log a killed CLI left is the damage."""


def lines_of(data: bytes) -> list[bytes]:
    """The lines of a log, each with its newline (the last one maybe without)."""
    parts = data.split(b"\n")
    out = [part + b"\n" for part in parts[:-1]]
    return [*out, parts[-1]] if parts[-1] else out


def _type(line: bytes) -> str | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value.get("type") if isinstance(value, dict) else None


def _index(
    lines: list[bytes], kind: str, test: Callable[[dict[str, object]], bool] | None = None
) -> int:
    for index, line in enumerate(lines):
        if _type(line) == kind and (test is None or test(json.loads(line))):
            return index
    raise ValueError(f"the recording holds no {kind} line to damage")


def cut_last_line(data: bytes) -> bytes:
    """The last line cut in half, with no newline: a crash in the middle of a write."""
    lines = lines_of(data)
    last = lines[-1].rstrip(b"\n")
    return b"".join(lines[:-1]) + last[: len(last) // 2]


def nul_tail(data: bytes) -> bytes:
    """4 KiB of NUL bytes after the last line: what a crash leaves where the file system had
    already made the file longer than the data written."""
    return data + b"\x00" * 4096


def glued_line(data: bytes) -> bytes:
    """The first ``assistant.turn_end`` cut in half, the event after it glued on behind it on
    the same line: what a resume appends behind a cut last line."""
    lines = lines_of(data)
    at = _index(lines, "assistant.turn_end")
    cut = lines[at].rstrip(b"\n")
    return b"".join([*lines[:at], cut[: len(cut) // 2], *lines[at + 1 :]])


_ESCAPED_NEWLINE = re.compile(rb"(?<!\\)((?:\\\\)*)\\n")


def raw_newline(data: bytes) -> bytes:
    """The first ``\\n`` escape inside a string of the first ``user.message`` written as a raw
    newline: one event over two physical lines."""
    lines = lines_of(data)
    at = _index(lines, "user.message")
    mended, count = _ESCAPED_NEWLINE.subn(rb"\1" + b"\n", lines[at], count=1)
    if not count:
        raise ValueError("the first user.message holds no \\n escape")
    return b"".join([*lines[:at], mended, *lines[at + 1 :]])


def u2028(data: bytes) -> bytes:
    """A raw U+2028 LINE SEPARATOR inside the first ``user.message``'s content (valid JSON; a
    reader that splits lines with ``str.splitlines()`` breaks the event there)."""
    lines = lines_of(data)
    at = _index(lines, "user.message")
    mark = b'"content":"'
    where = lines[at].find(mark)
    if where < 0:
        raise ValueError("the first user.message has no content")
    where += len(mark)
    line = lines[at][:where] + "\u2028".encode() + lines[at][where:]
    return b"".join([*lines[:at], line, *lines[at + 1 :]])


def _requests_tools(event: dict[str, object]) -> bool:
    data = event.get("data")
    return isinstance(data, dict) and bool(data.get("toolRequests"))


def orphan_request(data: bytes) -> bytes:
    """The log ends right after the first ``assistant.message`` that asks for tools: the tool
    was requested, never started."""
    lines = lines_of(data)
    return b"".join(lines[: _index(lines, "assistant.message", _requests_tools) + 1])


def orphan_start(data: bytes) -> bytes:
    """The log ends right after the first ``tool.execution_start``: a tool left running."""
    lines = lines_of(data)
    return b"".join(lines[: _index(lines, "tool.execution_start") + 1])


def orphan_mid(data: bytes) -> bytes:
    """The first ``tool.execution_complete`` removed while the log goes on: a tool call left
    open in the middle of the history (a later prompt was answered after it)."""
    lines = lines_of(data)
    at = _index(lines, "tool.execution_complete")
    return b"".join([*lines[:at], *lines[at + 1 :]])


def invalid_utf8(data: bytes) -> bytes:
    """A byte 0xFF (never valid UTF-8) inside the first ``user.message``'s content."""
    lines = lines_of(data)
    at = _index(lines, "user.message")
    mark = b'"content":"'
    where = lines[at].find(mark) + len(mark)
    line = lines[at][:where] + b"\xff" + lines[at][where:]
    return b"".join([*lines[:at], line, *lines[at + 1 :]])


def blank_line(data: bytes) -> bytes:
    """An empty line after the first ``user.message``."""
    lines = lines_of(data)
    at = _index(lines, "user.message")
    return b"".join([*lines[: at + 1], b"\n", *lines[at + 1 :]])


def duplicate_line(data: bytes) -> bytes:
    """The first ``assistant.turn_start`` written twice (a replayed line: the same event id
    on two lines)."""
    lines = lines_of(data)
    at = _index(lines, "assistant.turn_start")
    return b"".join([*lines[: at + 1], lines[at], *lines[at + 1 :]])


def no_shutdown(data: bytes) -> bytes:
    """Every ``session.shutdown`` line removed: the session ended without writing its usage
    (a crash, or ``/new`` in the versions that skip it)."""
    return b"".join(line for line in lines_of(data) if _type(line) != "session.shutdown")


DAMAGES: tuple[Damage, ...] = (
    Damage("kill-9", "SIGKILL to the CLI while its tool runs (a real run)", "interrupted", None),
    Damage("cut-last-line", "the last line cut in half, no newline", "one-tool", cut_last_line),
    Damage("nul-tail", "4 KiB of NUL bytes after the last line", "one-tool", nul_tail),
    Damage(
        "glued-line",
        "the first assistant.turn_end cut in half, the next event glued behind it",
        "one-tool",
        glued_line,
    ),
    Damage(
        "raw-newline",
        "a raw newline inside the first user.message (one event on two lines)",
        "one-tool",
        raw_newline,
    ),
    Damage("u2028", "a raw U+2028 inside the first user.message's content", "one-tool", u2028),
    Damage(
        "orphan-request",
        "ends after an assistant.message asking for a tool (never started)",
        "one-tool",
        orphan_request,
    ),
    Damage(
        "orphan-start",
        "ends after a tool.execution_start (the tool never completed)",
        "one-tool",
        orphan_start,
    ),
    Damage(
        "orphan-mid",
        "a tool.execution_complete removed, the session going on after it",
        "resume",
        orphan_mid,
    ),
    Damage("no-shutdown", "the session.shutdown removed", "one-tool", no_shutdown),
    Damage(
        "invalid-utf8",
        "a byte 0xFF (not UTF-8) inside the first user.message's content",
        "one-tool",
        invalid_utf8,
    ),
    Damage("blank-line", "an empty line after the first user.message", "one-tool", blank_line),
    Damage(
        "duplicate-line",
        "the first assistant.turn_start written twice (one event id on two lines)",
        "one-tool",
        duplicate_line,
    ),
)

BY_NAME = {damage.name: damage for damage in DAMAGES}
