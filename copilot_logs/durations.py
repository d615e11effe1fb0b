"""Durations the user gives: ``90s``, ``10m``, ``1h30m``, ``2d``, or a bare number of seconds as
coreutils ``timeout`` reads it (``60`` is a minute), held to at most a hundred years."""

from __future__ import annotations

import re
from datetime import timedelta

LONGEST = timedelta(days=36_500)
"""The longest duration taken: a hundred years is "for ever" for a log, and subtracted from
now it stays within what a date holds (``99999999999d`` would not)."""

_NUMBER = r"\d+(?:\.\d*)?|\.\d+"
_PART = re.compile(rf"({_NUMBER})([smhd])")
_BARE = re.compile(rf"(?:{_NUMBER})")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``text`` as a timedelta; raises ValueError saying what is wrong (not a duration, or
    longer than :data:`LONGEST`)."""
    compact = text.strip().lower().replace(" ", "")
    if _BARE.fullmatch(compact):
        seconds = float(compact)
    else:
        parts = _PART.findall(compact)
        if not parts or "".join(number + unit for number, unit in parts) != compact:
            raise ValueError(f"{text!r} is not a duration like 90s, 10m, 1h30m, 2d or 60 (seconds)")
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds > LONGEST.total_seconds():
        raise ValueError(
            f"{text!r} is longer than the longest duration taken, {LONGEST.days}d (a hundred years)"
        )
    return timedelta(seconds=seconds)
