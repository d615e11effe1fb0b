"""Sizes the user gives: ``500M``, ``1.5G``, ``20GiB``, ``10MB`` or a bare number of bytes, read
as ``du`` and ``ls`` read them: K, M, G, T (and KiB ... TiB) are powers of 1024, KB, MB, GB,
TB powers of 1000."""

from __future__ import annotations

import re

LARGEST = 1 << 60
"""The largest size taken (an exbibyte): more than any disk, and still an int64."""

_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(i?b?)", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str) -> int:
    """``text`` as a number of bytes; raises ValueError saying what is wrong."""
    found = _SIZE.fullmatch(text.strip())
    if found is None or (found[2] == "" and found[3].lower() not in ("", "b")):
        raise ValueError(f"{text!r} is not a size like 500M, 1.5G, 20GiB, 10MB or 4096 (bytes)")
    number, prefix, suffix = found[1], found[2].lower(), found[3].lower()
    base = 1000 if suffix == "b" and prefix else 1024
    size = float(number) * base ** _POWER[prefix]
    if size > LARGEST:
        raise ValueError(f"{text!r} is larger than the largest size taken, 1EiB")
    return int(size)
