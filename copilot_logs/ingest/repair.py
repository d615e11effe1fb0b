"""JSON that damage left behind -> a value (no polars): mend what a strict parser refuses, hold
numbers and times to what the frames hold, and rewrite one value of a line in place.

What is mended and what is reported is in docs/damaged-logs.md: invalid UTF-8 and lone surrogates
become U+FFFD; a number no 64-bit column holds (``2**63``, ``1e999``) is read as null; a time
outside [EARLIEST_TIME, LATEST_TIME) (what Python's datetime holds, with a day's margin) is no
time.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import orjson

from copilot_logs.ingest.decode import DETAIL_TYPES

LIMIT = 1 << 63
"""A number is out of range when its magnitude is at least this (or it is not finite)."""
EARLIEST_TIME = datetime(1000, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(9999, 1, 1, tzinfo=UTC)
MAX_SHOWN = 3
"""Fields named in one diagnostic; the rest are counted."""

_AFTER_COLON, _AFTER_COMMA, _AFTER_BRACKET = (
    re.compile(re.escape(before) + r"-?(?:[0-9]{19}|[0-9.]+[eE])").search for before in ":,["
)
"""A number of at least LIMIT in compact JSON (a value after ``:``, ``,`` or ``[``): 19 digits
or more, or an exponent. A prefilter only; one pattern a character, as a pattern that starts
with one character is searched for faster than one that starts with a set."""

Repair = tuple[str, str]
"""A diagnostic (kind, message) for what had to be mended to read a line."""
INVALID_UTF8: Repair = ("invalid-utf8", "invalid UTF-8 bytes, replaced by U+FFFD")
LONE_SURROGATE: Repair = (
    "lone-surrogate",
    "a lone UTF-16 surrogate escape (a string cut inside a character such as an emoji), "
    "replaced by U+FFFD",
)
TOO_DEEP_MESSAGE = "JSON nested too deep to read (about 1,000 levels or more); the line was skipped"
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class TooDeep(ValueError):
    """Valid JSON nested deeper than the parsers go."""


def out_of_range(value: Any) -> bool:
    """A number no 64-bit column holds: an integer outside [-2^63, 2^63), or a float that is
    not finite or whose magnitude reaches 2^63."""
    if value.__class__ is int:
        return not -LIMIT <= value < LIMIT
    if value.__class__ is float:
        return not math.isfinite(value) or abs(value) >= LIMIT
    return False


def held_time(moment: datetime) -> datetime | None:
    """``moment`` in UTC (naive: taken as UTC) when a log may hold it, else None."""
    try:
        utc = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except OverflowError:
        return None
    return utc if EARLIEST_TIME <= utc < LATEST_TIME else None


def clear_out_of_range(value: Any, path: str) -> list[tuple[str, Any]]:
    """Set every out-of-range number inside ``value`` (changed in place) to None; returns where
    each was (``data.usage.inputTokens``, ``data.items[2]``, under ``path``) and what it was.
    Walks with a stack: the value may be deeply nested."""
    found: list[tuple[str, Any]] = []
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            at = f"{where}[{key}]" if isinstance(node, list) else f"{where}.{key}".lstrip(".")
            if isinstance(item, dict | list):
                stack.append((item, at))
            elif out_of_range(item):
                node[key] = None
                found.append((at, item))
    return found


def may_hold_big_numbers(text: str) -> bool:
    """Whether compact JSON text (as orjson writes it) may hold an out-of-range number."""
    return bool(_AFTER_COLON(text) or _AFTER_COMMA(text) or _AFTER_BRACKET(text))


def message(found: list[tuple[str, Any]]) -> str:
    """The diagnostic for the out-of-range numbers of one line."""
    shown = ", ".join(f"{where} ({_short(value)})" for where, value in found[:MAX_SHOWN])
    more = f" and {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
    return (
        f"out-of-range number at {shown}{more}: beyond what a 64-bit column holds; "
        "read as null, the rest of the event kept"
    )


def _short(value: Any) -> str:
    if value.__class__ is float and not math.isfinite(value):
        return f"{'-' if value < 0 else ''}infinite as a double, like 1e999"
    if value.__class__ is float and value.is_integer():
        # orjson reads an integer past 2^64 as a double: shown as the integer it holds.
        value = int(value)
    if value.__class__ is int and abs(value) >= 10**24:
        return f"{'-' if value < 0 else ''}about 1e{len(str(abs(value))) - 1}"
    return repr(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(raw: bytes) -> tuple[Any, tuple[Repair, ...]]:
    """Parse one JSON text, with what had to be mended to read it: invalid UTF-8 bytes, lone
    surrogate escapes and out-of-range numbers (valid JSON that orjson refuses: the standard
    library reads them). Raises ValueError when it is not JSON (TooDeep when it nests too
    deep to read)."""
    try:
        return orjson.loads(raw), ()
    except orjson.JSONDecodeError:
        pass
    repairs: list[Repair] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        repairs.append(INVALID_UTF8)
        try:
            return orjson.loads(text), tuple(repairs)
        except orjson.JSONDecodeError:
            pass
    try:
        value = json.loads(text, parse_constant=_no_constant)  # NaN, Infinity: not JSON
        mended, found = _mend(value) if _SURROGATE_ESCAPE.search(text) else (value, False)
    except RecursionError:
        raise TooDeep(TOO_DEEP_MESSAGE) from None
    numbers = clear_out_of_range(mended, "") if isinstance(mended, dict | list) else []
    if not found and not numbers:
        raise orjson.JSONDecodeError("not valid JSON", text, 0)
    if found:
        repairs.append(LONE_SURROGATE)
    if numbers:
        repairs.append(("out-of-range-number", message(numbers)))
    return mended, tuple(repairs)


def try_loads(raw: bytes) -> tuple[Any, tuple[Repair, ...]] | None:
    try:
        return loads(raw)
    except ValueError:  # orjson's and json's decode errors alike
        return None


def dumps(data: dict[str, Any]) -> bytes:
    """``data`` as compact JSON: by orjson, or by the standard library when it nests deeper
    than orjson writes (255 levels)."""
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        pass
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    except RecursionError:
        raise TooDeep(TOO_DEEP_MESSAGE) from None


def stored_numbers(kind: str, data: Any) -> list[tuple[str, Any]]:
    """Out-of-range numbers in the fields of ``data`` that reach a numeric or JSON column (the
    whole payload of DETAIL_TYPES, an assistant message's outputTokens and chunkIndex), set to
    None in place. The clean lane checks the same fields."""
    if not isinstance(data, dict):
        return []
    if kind in DETAIL_TYPES:
        return clear_out_of_range(data, "data")
    found = []
    if kind == "assistant.message":
        for key in ("outputTokens", "chunkIndex"):
            if out_of_range(data.get(key)):
                found.append((f"data.{key}", data[key]))
                data[key] = None
    return found


def _mend(value: Any) -> tuple[Any, bool]:
    """``value`` with every lone surrogate replaced by U+FFFD (pairs are joined), and whether
    there was one."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value, False
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), True
    if isinstance(value, dict):
        found = False
        mended = {}
        for key, item in value.items():
            new_key, key_found = _mend(key)
            mended[new_key], item_found = _mend(item)
            found = found or key_found or item_found
        return mended, found
    if isinstance(value, list):
        items = [_mend(item) for item in value]
        return [item for item, _ in items], any(found for _, found in items)
    return value, False


def too_deep(raw: bytes) -> bool:
    """Whether a line that did not parse is JSON nested too deep to read."""
    if raw.count(b"[") + raw.count(b"{") < 900:
        return False  # the parsers read more levels than that
    try:
        loads(raw)
    except TooDeep:
        return True
    except ValueError:
        return False
    return False


# Where a value sits in a valid event line's bytes, so that doctor --repair changes that value
# and no other byte. A key is found as a JSON parser finds it: escapes decoded, the last of
# repeated keys winning.
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
    if line[at] != _QUOTE and line[at] not in _OPEN:
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
            if depth == 0:
                return at
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
