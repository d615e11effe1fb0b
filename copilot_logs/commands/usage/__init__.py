"""What sessions used and cost (``copilot-logs usage``), from the session model's usage.

The session rows are the model's (:mod:`copilot_logs.derive.usage`: the shutdowns' figures,
each run of the CLI, the calls no shutdown holds); a session is counted whole in the day it
started. How they are grouped is :mod:`copilot_logs.commands.usage.grouping`; the rows per
call, prompt, agent and task are :mod:`copilot_logs.commands.usage.breakdown`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.usage.grouping import group, totals
from copilot_logs.derive import usage as derive_usage
from copilot_logs.ingest.reader import ReadResult

SESSION_SCHEMA = derive_usage.SESSION_SCHEMA


@dataclass(frozen=True)
class UsageReport:
    """What ``usage`` prints: the grouped rows, the per-session rows they come from, totals."""

    by: str
    zone: str
    rows: pl.DataFrame
    sessions: pl.DataFrame
    totals: dict[str, Any]


def session_usage(result: ReadResult) -> pl.DataFrame:
    """One row per session log (``SESSION_SCHEMA``, the session model's usage rows), newest
    first."""
    if result.events.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    return derive_usage.session_rows(derive.annotate(result.events))


def usage(result: ReadResult, *, by: str = "session", zone: str = "UTC") -> UsageReport:
    """The ``usage`` command's report: rows grouped ``by``, the session rows, the totals."""
    return report([session_usage(result)], by=by, zone=zone)


def report(parts: list[pl.DataFrame], *, by: str = "session", zone: str = "UTC") -> UsageReport:
    """The report over the session rows of several batches (see :func:`session_usage`)."""
    sessions = pl.concat(parts).sort(
        "started_at", "file", "session_id", descending=[True, False, False], nulls_last=True
    )
    return UsageReport(
        by=by,
        zone=zone,
        rows=group(sessions, by, zone),
        sessions=sessions,
        totals=totals(sessions),
    )
