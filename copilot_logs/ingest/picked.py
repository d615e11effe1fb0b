"""Sessions picked by id inside a log that holds several (a recorder's file, a copy): the log
is read whole, as every log is, and its other sessions are left out before the command's core
function sees the events (see :attr:`copilot_logs.ingest.decode.envelope.Source.only`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import polars as pl

from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.reader import ReadResult

T = TypeVar("T")

Picks = tuple[tuple[str, tuple[str, ...]], ...]
"""(a log's name, the ids or prefixes it was selected by), for each log selected by id."""


def picks(sources: Iterable[Source]) -> Picks:
    """What the sources were selected by, in a stable order (a key of the store's values)."""
    return tuple(sorted((source.name, source.only) for source in sources if source.only))


def dropped(frame: pl.DataFrame, chosen: Picks) -> pl.Expr:
    """The rows of ``frame`` (events or diagnostics) of sessions not picked: in a log picked
    by id, those of its sessions whose id starts with none of its ids or prefixes (none, when
    no session of that log does: the log's name was what matched)."""
    out = pl.lit(False)
    for name, prefixes in chosen:
        mine = pl.col("file") == name
        starts = pl.any_horizontal(pl.col("session_id").str.starts_with(p) for p in prefixes)
        if frame.select((mine & starts).any()).item():
            out = out | (mine & ~starts.fill_null(False))
    return out


def kept(result: ReadResult, chosen: Picks) -> ReadResult:
    """``result`` without the sessions that were not picked."""
    if not chosen:
        return result
    drop = dropped(result.events, chosen)
    return ReadResult(result.events.filter(~drop), result.diagnostics.filter(~drop))


def then(result: ReadResult, *, fn: Callable[[ReadResult], T], chosen: Picks) -> T:
    """``fn`` of the picked sessions: a picklable step for
    :meth:`copilot_logs.cli.options.Loaded.map`."""
    return fn(kept(result, chosen))
