"""What a decoded JSON value may hold for the frames: numbers a 64-bit column can hold.

JSON puts no bound on numbers: ``9223372036854775808`` (2^63) and ``1e999`` are valid JSON, but
no Int64 column holds the first, and the second is infinity as a double (orjson refuses the
line). The reader reads such a number as null and reports it as an out-of-range number, naming
the field, rather than calling the line invalid or failing while it builds the frames.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

LIMIT = 1 << 63
"""A number is out of range when its magnitude is at least this (or it is not finite)."""

MAX_SHOWN = 3
"""Fields named in one diagnostic; the rest are counted."""

_BIG_NUMBER = re.compile(r"[:,\[]-?(?:[0-9]{19}|[0-9.]+[eE])")
"""What a number of at least LIMIT looks like in compact JSON written by orjson (a value after
``:``, ``,`` or ``[``): 19 digits or more, or an exponent. Only a prefilter: a match is checked
on the decoded value."""


def out_of_range(value: Any) -> bool:
    """A number no 64-bit column holds: an integer outside [-2^63, 2^63), or a float that is
    not finite or whose magnitude reaches 2^63."""
    if value.__class__ is int:
        return not -LIMIT <= value < LIMIT
    if value.__class__ is float:
        return not math.isfinite(value) or abs(value) >= LIMIT
    return False


def clear_out_of_range(value: Any, path: str) -> list[tuple[str, Any]]:
    """Set every out-of-range number inside ``value`` (dicts and lists, changed in place) to
    None; returns where each was (``data.usage.inputTokens``, ``data.items[2]``, under
    ``path``) and what it was. Walks with a stack, not recursion: the value may be deeply nested."""
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
    return _BIG_NUMBER.search(text) is not None


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
