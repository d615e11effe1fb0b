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
from copilot_logs.errors import CopilotLogsError
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


def ordered(rows: pl.DataFrame, sort: str | None = None, top: int | None = None) -> pl.DataFrame:
    """``rows`` sorted by ``sort`` and cut to the first ``top``. ``sort`` is a field of the
    rows, biggest first (``FIELD`` or ``FIELD:desc``; a missing figure last), or smallest first
    (``FIELD:asc``); a tie keeps the rows' own order. Raises :class:`CopilotLogsError` (a
    usage error) for a field the rows do not have or cannot be sorted by."""
    if sort:
        field, _, direction = sort.partition(":")
        sortable = [
            name
            for name, dtype in rows.schema.items()
            if not isinstance(dtype, pl.List | pl.Struct)
        ]
        if field not in sortable:
            raise CopilotLogsError(
                f"--sort {field}: no such field to sort by; choose one of {', '.join(sortable)}"
            )
        if direction not in ("", "asc", "desc"):
            raise CopilotLogsError(f"--sort {sort}: write FIELD, FIELD:desc or FIELD:asc")
        rows = rows.sort(field, descending=direction != "asc", nulls_last=True, maintain_order=True)
    return rows.head(top) if top is not None else rows
