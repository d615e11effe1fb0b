"""Time zones for day buckets: an IANA name the user gives, else the machine's local zone;
either known to polars, which buckets the days."""

from __future__ import annotations

import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from copilot_logs.errors import SelectionError


def local_zone_name() -> str:
    """The local IANA zone: $TZ, else what /etc/localtime points at, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name and _valid(name):
            return name
    return "UTC"


def _valid(name: str) -> bool:
    """Whether both Python and polars know the zone: the system's zone files also hold
    names polars' own database refuses (``posixrules``, ``localtime``, ``Factory``,
    ``posix/...``, ``right/...``)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    import polars as pl

    try:
        pl.Series([0], dtype=pl.Datetime("ms", "UTC")).dt.convert_time_zone(name)
    except pl.exceptions.PolarsError:
        return False
    return True


def resolve_zone(name: str | None) -> str:
    """An IANA zone name checked to exist; None means the local zone."""
    if name is None:
        return local_zone_name()
    if not _valid(name):
        raise SelectionError(
            f"--tz {name}: unknown time zone; use an IANA name like Europe/Berlin or UTC"
        )
    return name
