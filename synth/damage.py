"""Damage helpers: pure functions on clean lines (bytes without the newline) or whole files
that return damaged ones, each documented with what a reader is expected to report."""

from __future__ import annotations

from typing import Any, Literal

import orjson

_TEXT_KEYS = (
    "content",
    "transformedContent",
    "message",
    "summary",
    "detailedContent",
    "prompt",
    "command",
    "reason",
)
_MARK = "@@synth-damage-mark@@"


def _find_text(obj: Any) -> tuple[Any, str | int] | None:
    """First free-text string (depth-first, keys in ``_TEXT_KEYS``): (container, key)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _TEXT_KEYS and isinstance(v, str):
                return obj, k
        for v in obj.values():
            found = _find_text(v)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find_text(v)
            if found is not None:
                return found
    return None


def _with_payload(line: bytes, payload: bytes) -> bytes:
    """Re-serialise ``line`` with raw ``payload`` bytes in the middle of a free-text string."""
    ev = orjson.loads(line)
    if not isinstance(ev, dict):
        raise ValueError("not a JSON object")
    found = _find_text(ev.get("data"))
    if found is None:
        raise ValueError(f"no free-text string value in data (looked for {_TEXT_KEYS})")
    container, key = found
    text: str = container[key]
    mid = len(text) // 2
    container[key] = text[:mid] + _MARK + text[mid:]
    out: bytes = orjson.dumps(ev)
    return out.replace(_MARK.encode(), payload, 1)


def raw_line_separator(line: bytes) -> bytes:
    """Put a raw U+2028 and a raw U+2029 inside a text value of the event.

    Still valid JSON and valid UTF-8, one physical line: a reader must parse it as the same
    event and must NOT report it. A reader that splits with ``str.splitlines()`` breaks it.
    """
    return _with_payload(line, "\u2028".encode() + b" " + "\u2029".encode())


def split_line(line: bytes) -> tuple[bytes, bytes]:
    """A literal newline inside a text value: the event spread over two physical lines.

    Neither half parses alone. A reader must report both physical lines; it can recover the
    event by joining them with an escaped newline (``first + b"\\\\n" + second``).
    """
    damaged = _with_payload(line, b"\n")
    first, second = damaged.split(b"\n", 1)
    return first, second


def glue_truncated(
    truncated_line: bytes, complete_line: bytes, *, keep: int | None = None
) -> bytes:
    """The first ``keep`` bytes (default: half) of one event with a complete event glued on.

    One physical line that does not parse; its suffix ``complete_line`` does. A reader must
    report the line and recover the glued complete event; the truncated one is lost.
    """
    k = len(truncated_line) // 2 if keep is None else keep
    if not 0 < k < len(truncated_line):
        raise ValueError("keep must cut the first event strictly inside it")
    return truncated_line[:k] + complete_line


def cut(data: bytes, *, keep: int | None = None) -> bytes:
    """The file ends mid-event: the last line cut (to ``keep`` bytes, default half), no newline.

    A reader must report the last physical line as truncated (a session still running or
    killed) and recover every event before it.
    """
    body = data[:-1] if data.endswith(b"\n") else data
    start = body.rfind(b"\n") + 1
    last = body[start:]
    k = len(last) // 2 if keep is None else keep
    if not 0 < k < len(last):
        raise ValueError("keep must cut the last line strictly inside it")
    return body[:start] + last[:k]


def nul_tail(data: bytes, n: int = 64) -> bytes:
    """``n`` NUL bytes appended at the end of the file (the padding a crash leaves).

    When ``data`` ends with a newline the NULs form a last physical line of their own; after
    :func:`cut` they sit at the end of the cut line. A reader must report that line as NUL
    padding and recover nothing from the NULs.
    """
    return data + b"\x00" * n


def crlf(line: bytes) -> bytes:
    """A ``\\r`` before the line's newline (CRLF ending).

    The ``\\r`` is JSON whitespace, so the event parses: a reader must recover it and report
    the line as a CRLF line ending (a warning, not lost data).
    """
    return line + b"\r"


def invalid_utf8(line: bytes, bad: bytes = b"\xff") -> bytes:
    """A byte that is not UTF-8 inside a text value of the event.

    Strict UTF-8 JSON decoding fails: a reader must report the line; it may recover the event
    by decoding with replacement (the text then holds U+FFFD).
    """
    return _with_payload(line, bad)


def blank_line(whitespace: bytes = b"") -> bytes:
    """An empty (or whitespace-only) physical line: no event; a reader must report it."""
    return whitespace


def not_an_event(kind: Literal["object", "array", "scalar"] = "object") -> bytes:
    """Valid JSON that is not an event (``{"hello":1}``, ``[1,2]`` or ``42``).

    A reader must report the line as "not an event" and go on.
    """
    return {"object": b'{"hello":1}', "array": b"[1,2]", "scalar": b"42"}[kind]


def duplicate(line: bytes) -> tuple[bytes, bytes]:
    """A replayed line: the same event (same ``id``) written twice, one after the other.

    A reader must keep the first, report the second as a duplicate id, and count it once.
    """
    return line, bytes(line)
