"""The fast lane: a run of clean lines -> their rows, decoded whole by msgspec (no polars).

A run of lines is clean when each is an event of the usual shape on a line of its own: valid
UTF-8, no CR, no blank line, an envelope and payload fields of the usual types
(:class:`copilot_logs.ingest.decode.event_structs.Event`), an id not seen before, no number
beyond what a column holds. Such a run gives the same rows as the line reader would (a property
test checks it), without a Python step per field; any other run is read by the line reader,
which recovers what it can and reports the damage. This is the one definition of a clean line:
``count --total`` asks it too, and then gets only the columns a count reads
(:data:`copilot_logs.ingest.calls.COUNT_FIELDS`).
"""

from __future__ import annotations

import codecs
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import orjson

from copilot_logs.ingest.calls import CALL_TYPES
from copilot_logs.ingest.decode import json_limits
from copilot_logs.ingest.decode.event_structs import (
    EVENT_LINES,
    FULL_EVENT,
    Common,
    Data,
    Event,
    detail,
)
from copilot_logs.ingest.decode.event_types import DETAIL_TYPES
from copilot_logs.ingest.decode.payload import PAYLOAD_TYPES, RARE_TYPES, payload_columns

CLEAN_BLOCK = 2 << 20
"""Bytes the reader decodes at a time when the lines are clean (memory stays bounded by a few
blocks whatever the file's size)."""
FALLBACK_LINES = 16
"""Lines tried at a time in a block that is not clean as a whole; each line of a run that is not
clean is then tried alone, so that only the damaged lines go through the line reader."""


@dataclass(frozen=True)
class CleanRun:
    """The rows of a run of clean lines."""

    columns: list[list[Any]]
    """In ROW_FIELDS order (copilot_logs.ingest.events_frame); for a count, the types of the
    events and the COUNT_FIELDS of those that may be calls (copilot_logs.ingest.calls)."""
    ids: list[str]
    sessions: list[tuple[int, str | None]]
    """(row in the run, sessionId) of each session.start."""


def line_ends(block: bytes, cut: int, begin: int = 0) -> list[int]:
    """The positions of the newlines of ``block`` from ``begin`` to ``cut``."""
    ends = []
    find = block.find
    at = find(b"\n", begin, cut)
    while at != -1:
        ends.append(at)
        at = find(b"\n", at + 1, cut)
    return ends


def valid_utf8(view: memoryview) -> bool:
    try:
        codecs.utf_8_decode(view, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def decode_run(
    block: bytes,
    ends: list[int],
    where: tuple[int, int, int],
    seen_ids: Set[str],
    *,
    counting: bool = False,
) -> CleanRun | None:
    """The rows of the lines of ``block`` that end at ``ends`` (newline positions), or None
    when one of them is not clean. ``where`` is the offset in the file of ``block[0]``, the
    first line's number and its start in ``block`` (the others start after the newline
    before them). ``counting``: only the columns a count reads (the same lines are clean)."""
    offset, number, start = where
    view = memoryview(block)
    try:
        events = EVENT_LINES.decode_lines(view[start : ends[-1] + 1])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if len(events) != len(ends) or not _one_object_a_line(block, start, ends):
        return None
    ids = [event.id for event in events]
    if len(set(ids)) != len(ids) or not seen_ids.isdisjoint(ids):
        return None
    kinds = [event.type for event in events]
    lines = _Lines(view, start, ends)
    rows = [row for row, kind in enumerate(kinds) if kind in _READ_AGAIN]
    details = _details(lines, kinds, rows)
    if details is None:
        return None
    rare = _rare_fields(lines, kinds, rows)
    if rare is None:
        return None
    sessions = [(row, data.sessionId) for row, data in rare.items() if kinds[row] == START]
    if counting:
        return CleanRun(_count_columns(events, kinds), ids, sessions)
    datas: list[Common | None] = [
        event.data if kind in PAYLOAD_TYPES else None
        for event, kind in zip(events, kinds, strict=True)
    ]
    for row, data in rare.items():
        datas[row] = data
    starts = [start, *(end + 1 for end in ends[:-1])]
    envelope: list[list[Any]] = [
        list(range(number, number + len(events))),
        [offset + at for at in starts],
        [end - at for at, end in zip(starts, ends, strict=True)],
        ids,
        [event.parentId for event in events],
        kinds,
        [event.timestamp for event in events],
        [event.agentId for event in events],
    ]
    return CleanRun([*envelope, *payload_columns(kinds, datas, details)], ids, sessions)


START = "session.start"
_READ_AGAIN = DETAIL_TYPES | RARE_TYPES
"""The types whose lines are read again, alone: for the ``detail`` column, or the fields
only :class:`copilot_logs.ingest.decode.event_structs.Data` holds (few lines are)."""


class _Lines:
    """The lines of a run by row, each cut out only when asked for (few are): its newline
    excluded."""

    __slots__ = ("ends", "start", "view")

    def __init__(self, view: memoryview, start: int, ends: list[int]) -> None:
        self.view, self.start, self.ends = view, start, ends

    def __getitem__(self, row: int) -> memoryview:
        return self.view[self.ends[row - 1] + 1 if row else self.start : self.ends[row]]


def _rare_fields(lines: _Lines, kinds: list[str], rows: list[int]) -> dict[int, Data] | None:
    """The whole ``data`` of each line of RARE_TYPES among ``rows``, by row: each of those
    lines decoded again, alone (:data:`copilot_logs.ingest.decode.event_structs.FULL_EVENT`);
    None when one of them holds a value its fields refuse (the line reader then reads it, and
    reports it)."""
    decode = FULL_EVENT.decode
    try:
        return {row: decode(lines[row]).data for row in rows if kinds[row] in RARE_TYPES}
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _count_columns(events: list[Event], kinds: list[str]) -> list[list[Any]]:
    """What a count reads of a run: every event's type, and the COUNT_FIELDS of each event
    that may be a call."""
    calls = [
        (
            kind,
            event.agentId,
            event.data.parentToolCallId,
            event.data.messageId,
            event.data.chunkIndex,
        )
        for event, kind in zip(events, kinds, strict=True)
        if kind in CALL_TYPES
    ]
    return [kinds, calls]


def _one_object_a_line(block: bytes, start: int, ends: list[int]) -> bool:
    """Whether each line starts with ``{`` and ends with ``}``. Inside a JSON value ``}`` is
    never followed by ``{``, so each line then starts a new event, and as many events as lines
    means one a line: a blank line and a line of two events cannot shift them against the
    lines (nor a CR end a line)."""
    last = ends[-1]
    if block[start] != 123:
        return False
    return all(block[end - 1] == 125 and (end == last or block[end + 1] == 123) for end in ends)


def _details(lines: _Lines, kinds: list[str], rows: list[int]) -> list[str | None] | None:
    """The ``detail`` column of the run (its DETAIL_TYPES are among ``rows``); None when a
    payload holds what only the line reader handles."""
    details: list[str | None] = [None] * len(kinds)
    for row in rows:
        if kinds[row] in DETAIL_TYPES:
            text = _clean_detail(lines[row])
            if text is False:
                return None
            details[row] = text
    return details


def _clean_detail(line: memoryview) -> str | Literal[False]:
    """:func:`copilot_logs.ingest.decode.event_structs.detail` of a clean line; False when its
    payload holds what only the line reader handles (an out-of-range number, deep nesting)."""
    try:
        text = detail(line)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return False
    if json_limits.may_hold_big_numbers(text) and json_limits.clear_out_of_range(
        orjson.loads(text), "data"
    ):
        return False
    return text
