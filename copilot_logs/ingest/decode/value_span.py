"""Where a field's value sits in an event line's bytes, so that a repair changes that value and
no other byte (no polars, no re-serialising: numbers, escapes and key order stay as written).

Only for lines that are valid JSON objects (what the reader decoded whole). A key is found as a
JSON parser finds it: its escapes decoded, the last of repeated keys winning.
"""

from __future__ import annotations

import re

import orjson

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SPACE = re.compile(rb"[ \t\r\n]*")
_SCALAR_END = re.compile(rb"[,}\] \t\r\n]")
_OPEN = frozenset(b"{[")
_CLOSE = frozenset(b"}]")
_QUOTE = ord('"')


def _space(line: bytes, at: int) -> int:
    match = _SPACE.match(line, at)
    return match.end() if match else at


def _value_end(line: bytes, at: int) -> int:
    """The end of the JSON value starting at ``at`` (no recursion: nesting may be deep)."""
    if line[at] == _QUOTE:
        string = _STRING.match(line, at)
        if string is None:
            raise ValueError("an unterminated string")
        return string.end()
    if line[at] not in _OPEN:
        scalar = _SCALAR_END.search(line, at)
        return scalar.start() if scalar else len(line)
    depth = 0
    while at < len(line):
        byte = line[at]
        if byte == _QUOTE:
            string = _STRING.match(line, at)
            if string is None:
                raise ValueError("an unterminated string")
            at = string.end()
            continue
        if byte in _OPEN:
            depth += 1
        elif byte in _CLOSE:
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    raise ValueError("an unclosed object or array")


def _members(line: bytes, start: int) -> tuple[dict[str, tuple[int, int]], int]:
    """The members of the object starting at ``start``: each key's value span (the last of a
    repeated key), and the offset of the object's closing brace."""
    spans: dict[str, tuple[int, int]] = {}
    at = _space(line, start + 1)
    if line[at : at + 1] == b"}":
        return spans, at
    while True:
        key_end = _value_end(line, at)
        key = orjson.loads(line[at:key_end])
        at = _space(line, _space(line, key_end) + 1)  # past the colon
        end = _value_end(line, at)
        spans[str(key)] = (at, end)
        at = _space(line, end)
        if line[at : at + 1] == b"}":
            return spans, at
        at = _space(line, at + 1)  # past the comma


def value_span(line: bytes, path: tuple[str, ...]) -> tuple[int, int] | None:
    """The byte span of the value at ``path`` (keys from the top-level object down), or None
    when a key is missing or a value on the way is not an object."""
    try:
        at = _space(line, 0)
        span: tuple[int, int] | None = None
        for key in path:
            if line[at : at + 1] != b"{":
                return None
            span = _members(line, at)[0].get(key)
            if span is None:
                return None
            at = span[0]
        return span
    except (ValueError, IndexError, orjson.JSONDecodeError):
        return None


def with_value(line: bytes, path: tuple[str, ...], value: bytes) -> bytes | None:
    """``line`` with the value at ``path`` written as ``value`` (JSON text) and every other
    byte as it was. A missing last key is added at the end of its object; None when the
    object on the way is missing or the line is not a JSON object."""
    span = value_span(line, path)
    if span is not None:
        return line[: span[0]] + value + line[span[1] :]
    parent = value_span(line, path[:-1]) if len(path) > 1 else (_space(line, 0), len(line))
    if parent is None or line[parent[0] : parent[0] + 1] != b"{":
        return None
    try:
        members, close = _members(line, parent[0])
    except (ValueError, IndexError, orjson.JSONDecodeError):
        return None
    comma = b"," if members else b""
    return line[:close] + comma + orjson.dumps(path[-1]) + b":" + value + line[close:]
