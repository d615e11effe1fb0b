"""Answering a command from the store's headers alone: a warm run reads no events.

The logs whose entry is fresh and holds the command's value (kept by
:func:`copilot_logs.store.keep` as rows of plain values) give one frame per command, built from
all their rows at once (one per schema their rows have); the others are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from copilot_logs.ingest.logfile import Source
from copilot_logs.store.entry import Header, Result, Rows, diagnostics_of, frame_of, rows_of
from copilot_logs.store.key import Found, State, no_gc

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class Recalled:
    """Logs answered from their headers alone: the value and what to report about the read."""

    value: object
    diagnostics: pl.DataFrame
    files_with_events: list[str]
    sources: list[Source]


Member = tuple[Source, Header, bool, list[Rows]]
"""A log answered from its header: its header, and whether the value is a tuple of frames
and each frame's rows."""


def recall(
    sources: Sequence[Source], found: Sequence[Found], key: str
) -> tuple[list[Recalled], list[int]]:
    """The value the function described by ``key`` gave for the unchanged logs whose entry
    holds it, from their headers (one value per schema the logs' rows have); and the indexes
    of the other sources, to be read."""
    with no_gc():
        return _recall(sources, found, key)


def _recall(
    sources: Sequence[Source], found: Sequence[Found], key: str
) -> tuple[list[Recalled], list[int]]:
    groups: dict[object, list[tuple[int, Member]]] = {}
    rest: list[int] = []
    for index, (source, looked) in enumerate(zip(sources, found, strict=True)):
        result = _result(looked, key)
        frames = rows_of(result) if result is not None else None
        if result is None or frames is None or looked.header is None:
            rest.append(index)
            continue
        shape = (result.is_tuple, *(tuple(rows.schema) for rows in frames))
        groups.setdefault(shape, []).append(
            (index, (source, looked.header, result.is_tuple, frames))
        )
    recalled = []
    for members in groups.values():
        built = _build([member for _, member in members])
        if built is None:
            rest.extend(index for index, _ in members)
        else:
            recalled.append(built)
    return recalled, sorted(rest)


def _result(found: Found, key: str) -> Result | None:
    header = found.header
    if found.state is not State.FRESH or header is None or header.body is None:
        return None
    return next((result for result in header.results if result.key == key), None)


def _build(members: list[Member]) -> Recalled | None:
    """The value of logs whose rows have one schema; None when the rows do not fit it."""
    import polars as pl

    names = [source.name for source, _, _, _ in members]
    headers = [header for _, header, _, _ in members]
    rows = [frames for _, _, _, frames in members]
    try:
        frames = [
            frame_of([(name, mine[at]) for name, mine in zip(names, rows, strict=True)])
            for at in range(len(rows[0]))
        ]
        diagnostics = diagnostics_of(zip(names, headers, strict=True))
    except (ValueError, TypeError, OverflowError, RecursionError, pl.exceptions.PolarsError):
        return None
    if not frames:
        return None
    value: object = tuple(frames) if members[0][2] else frames[0]
    with_events = [name for name, header in zip(names, headers, strict=True) if _rows(header)]
    return Recalled(value, diagnostics, with_events, [source for source, _, _, _ in members])


def _rows(header: Header) -> int:
    return header.body[2] if header.body is not None else 0
