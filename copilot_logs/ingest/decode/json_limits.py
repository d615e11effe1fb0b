"""What a decoded JSON value may hold for the frames: numbers a 64-bit column can hold, and
times from the year 1000 to 9998.

JSON puts no bound on numbers: ``9223372036854775808`` (2^63) and ``1e999`` are valid JSON, but
no Int64 column holds the first, and the second is infinity as a double (orjson refuses the
line). The reader reads such a number as null and reports it as an out-of-range number, naming
the field, rather than calling the line invalid or failing while it builds the frames.

A timestamp is ISO-8601, which also writes ``0001-01-01``, ``-0001-01-01`` and
``+10000-01-01``; polars holds them, but Python's datetime (every row a command prints) holds
only the years 1 to 9999, and a day added or a zone applied at either end leaves it. No CLI
writes such a time: one outside [EARLIEST_TIME, LATEST_TIME) is read as no time (null), which
``validate`` reports as E119 invalid-timestamp, and the rest of the event is kept.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

LIMIT = 1 << 63
"""A number is out of range when its magnitude is at least this (or it is not finite)."""

EARLIEST_TIME = datetime(1000, 1, 1, tzinfo=UTC)
"""The earliest time a log may hold (years below 1000 are not written with four digits)."""
LATEST_TIME = datetime(9999, 1, 1, tzinfo=UTC)
"""The first time past what a log may hold: the year 9999 is left out, so that a day added or
a time zone applied never leaves what Python's datetime holds."""

MAX_SHOWN = 3
"""Fields named in one diagnostic; the rest are counted."""

_AFTER_COLON, _AFTER_COMMA, _AFTER_BRACKET = (
    re.compile(re.escape(before) + r"-?(?:[0-9]{19}|[0-9.]+[eE])").search for before in ":,["
)
"""What a number of at least LIMIT looks like in compact JSON written by orjson (a value after
``:``, ``,`` or ``[``): 19 digits or more, or an exponent. Only a prefilter: a match is checked
on the decoded value. One pattern for each character a value follows: a pattern that starts
with a character is searched for faster than one that starts with a set of them (the three
searches take three quarters of the time the one took)."""


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
    """Set every out-of-range number inside ``value`` (dicts and lists, changed in place) to
    None; returns where each was (``data.usage.inputTokens``, ``data.items[2]``, under
    ``path``) and what it was. Walks with a stack, not recursion: the value may be deeply
    nested."""
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
        # orjson reads an integer past 2^64 as a double: shown as the integer it holds
        # (2**64 as 18446744073709551616, not 1.8446744073709552e+19).
        value = int(value)
    if value.__class__ is int and abs(value) >= 10**24:
        return f"{'-' if value < 0 else ''}about 1e{len(str(abs(value))) - 1}"
    return repr(value)


def loads_lenient(text: str) -> Any:
    """Parse JSON with the standard library, which holds integers of any size and reads 1e999
    as infinity (orjson refuses both); NaN and Infinity, which are not JSON, still fail.
    Raises ValueError when the text is not JSON, RecursionError when it nests too deep."""
    return json.loads(text, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
