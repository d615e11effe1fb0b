"""--since / --until on standard input: its sessions' starts are known only once it is read.

Files on disk are chosen before reading (see :mod:`copilot_logs.ingest.discover`, which skips
files too old to matter without opening them); a stream cannot be peeked at without consuming
it, so its sessions are kept or dropped here, on the events, by the same start time
(``session.start``'s startTime, else the first event's timestamp).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import polars as pl

from copilot_logs.ingest.decode.envelope import STDIN
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.schema import log_times

T = TypeVar("T")


def session_starts(events: pl.DataFrame) -> pl.DataFrame:
    """file, session_id and started_at of each session in ``events``."""
    start = pl.col("detail").filter(pl.col("type") == "session.start").first()
    return events.group_by("file", "session_id", maintain_order=True).agg(
        started_at=pl.coalesce(
            log_times(start.str.json_path_match("$.startTime")),
            pl.col("timestamp").min(),
        )
    )


def outside(result: ReadResult, since: datetime | None, until: datetime | None) -> pl.DataFrame:
    """file and session_id of the sessions of standard input that started before ``since`` or
    at or after ``until`` (a session whose start is unknown is kept: its damage is reported)."""
    starts = session_starts(result.events.filter(pl.col("file") == STDIN))
    early = pl.col("started_at") < since if since is not None else pl.lit(False)
    late = pl.col("started_at") >= until if until is not None else pl.lit(False)
    return starts.filter((early | late).fill_null(False)).select("file", "session_id")


def without(frame: pl.DataFrame, dropped: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``frame`` (events or diagnostics) not of the ``dropped`` sessions."""
    return frame.join(dropped, on=["file", "session_id"], how="anti")


def started_within(
    result: ReadResult, since: datetime | None, until: datetime | None
) -> ReadResult:
    """``result`` without the sessions of standard input that started outside the window."""
    if since is None and until is None:
        return result
    dropped = outside(result, since, until)
    if dropped.is_empty():
        return result
    return ReadResult(without(result.events, dropped), without(result.diagnostics, dropped))


def then(
    result: ReadResult,
    *,
    fn: Callable[[ReadResult], T],
    since: datetime | None,
    until: datetime | None,
) -> tuple[T, pl.DataFrame]:
    """``fn`` of the sessions that started within the window, and the sessions left out (whose
    damage is then not reported either): a picklable step for
    :meth:`copilot_logs.cli.options.Loaded.map`."""
    dropped = outside(result, since, until)
    kept = ReadResult(without(result.events, dropped), without(result.diagnostics, dropped))
    return fn(kept), dropped
