"""JSON text -> a value, mending what damage leaves that a strict parser refuses (no polars).

orjson parses a line when it is clean; otherwise the line is read again with what had to be
mended to read it: invalid UTF-8 bytes, lone surrogate escapes, out-of-range numbers. Each
repair is a diagnostic (kind, message) for the line.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from copilot_logs.ingest.decode import json_limits
from copilot_logs.ingest.decode.event_types import DETAIL_TYPES

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


def loads(raw: bytes) -> tuple[Any, tuple[Repair, ...]]:
    """Parse one JSON text, with what had to be mended to read it: invalid UTF-8 bytes, lone
    surrogate escapes and out-of-range numbers (valid JSON that orjson refuses). Raises
    ValueError when it is not JSON (TooDeep when it nests too deep to read)."""
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
        value = json_limits.loads_lenient(text)
        mended, found = _mend(value) if _SURROGATE_ESCAPE.search(text) else (value, False)
    except RecursionError:
        raise TooDeep(TOO_DEEP_MESSAGE) from None
    numbers = json_limits.clear_out_of_range(mended, "") if isinstance(mended, dict | list) else []
    if not found and not numbers:
        raise orjson.JSONDecodeError("not valid JSON", text, 0)
    if found:
        repairs.append(LONE_SURROGATE)
    if numbers:
        repairs.append(("out-of-range-number", json_limits.message(numbers)))
    return mended, tuple(repairs)


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
    None in place. The clean-block lane checks the same fields (see
    copilot_logs.ingest.clean_blocks)."""
    if not isinstance(data, dict):
        return []
    if kind in DETAIL_TYPES:
        return json_limits.clear_out_of_range(data, "data")
    found = []
    if kind == "assistant.message":
        for key in ("outputTokens", "chunkIndex"):
            if json_limits.out_of_range(data.get(key)):
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


def try_loads(raw: bytes) -> tuple[Any, tuple[Repair, ...]] | None:
    try:
        return loads(raw)
    except ValueError:  # orjson's and json's decode errors alike
        return None
