"""Values as people read them: counts with their noun, durations, times, short ids, paths.

The one home of these small formats, so every command, table, page and picture words them
alike. Nothing here prints; log text in a result is shown through
:mod:`copilot_logs.render.output`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from copilot_logs.render.escape import one_line

MINUTE = "%Y-%m-%d %H:%M"


def plural(count: int, noun: str, *, grouped: bool = False) -> str:
    """``1 file``, ``3 files``; ``grouped`` writes the count with thousands separators."""
    number = f"{count:,}" if grouped else str(count)
    return f"{number} {noun}{'' if count == 1 else 's'}"


def human_duration(ms: Any) -> str:
    """``14.2s``, ``3m05s``, ``2h10m``; blank for an unknown duration."""
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def took_text(ms: float) -> str:
    """Milliseconds under a second (tools are often that quick), else as everywhere else."""
    return f"{ms:.0f}ms" if 0 <= ms < 1000 else human_duration(ms)


def signed_offset(offset_ms: float) -> str:
    """A start offset: ``+14.2s`` after the session start, ``-14.2s`` before it."""
    return "-" + human_duration(-offset_ms) if offset_ms < 0 else "+" + human_duration(offset_ms)


def human_bytes(value: Any) -> str:
    """``512 B``, ``12.0 KiB``, ``3.4 GiB``: powers of 1024, as ``du -h`` counts; blank when
    unknown."""
    if value is None:
        return ""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return ""  # pragma: no cover - the loop returns at TiB


def local_time(value: Any) -> str:
    """A moment to the minute in this machine's zone; blank when it is not a datetime."""
    if not isinstance(value, datetime):
        return ""
    return value.astimezone().strftime(MINUTE)


def minute(value: Any) -> str:
    """A moment to the minute in its own zone (already converted); blank when not a datetime."""
    return value.strftime(MINUTE) if isinstance(value, datetime) else ""


def count_or_unknown(value: Any) -> str:
    """A count with thousands separators; ``?`` when it is unknown (never 0)."""
    return "?" if value is None else f"{value:,}"


def decimal_or_unknown(value: Any) -> str:
    """Two decimals with thousands separators; ``?`` when it is unknown (never 0)."""
    return "?" if value is None else f"{value:,.2f}"


def credits_text(row: dict[str, Any]) -> str:
    """A row's AI credits; ``unavailable`` when the log says none were reported."""
    if row.get("ai_credits") is None and row.get("credits_status") == "unavailable":
        return "unavailable"
    return decimal_or_unknown(row.get("ai_credits"))


def yes_no(value: Any) -> str:
    return "yes" if value else ("no" if value is not None else "")


def short_id(value: Any) -> str:
    """A session id's first eight characters, on one line."""
    return one_line(str(value)[:8]) if value else ""


def display_path(file: str) -> str:
    """``file`` relative to the working folder when it lies under it (what CI annotations and
    code scanning expect), else as given; ``<stdin>`` stays as it is."""
    if file.startswith("<"):
        return file
    try:
        relative = Path(file).resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a link loop (3.11)
        return file
    return relative.as_posix()
