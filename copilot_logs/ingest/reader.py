"""Bytes on disk -> an events frame and a diagnostics frame: the reader's entry points.

The frames are built once per batch of files (:mod:`copilot_logs.ingest.events_frame`) from what
the block reader (:mod:`copilot_logs.ingest.block_reader`) reads of each file: whole runs of clean
lines decoded at once, and every other line through the line reader, which recovers every event the
known kinds of damage leave behind and reports each damaged physical line. ``count --total`` reads
through the same block reader (:func:`count_calls`), counting the calls instead of keeping rows.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import polars as pl

from copilot_logs.ingest.block_reader import FileReader
from copilot_logs.ingest.calls import CallCounter, CallTally
from copilot_logs.ingest.decode.envelope import Readable, Source
from copilot_logs.ingest.decode.payload import PAYLOAD_FIELDS, PAYLOAD_TYPES
from copilot_logs.ingest.events_frame import ENVELOPE_FIELDS, Diagnostics, Rows, Span
from copilot_logs.ingest.line_reader import Sink
from copilot_logs.ingest.logfile import Capped, open_log, why_unreadable
from copilot_logs.ingest.progress import DamageRow, ReadState

__all__ = [
    "ENVELOPE_FIELDS",
    "PAYLOAD_FIELDS",
    "PAYLOAD_TYPES",
    "ReadResult",
    "ReadState",
    "count_calls",
    "read_many",
    "read_many_bytes",
]


@dataclass(frozen=True)
class ReadResult:
    """What reading gives: one row per event, and one row per problem met on the way."""

    events: pl.DataFrame
    diagnostics: pl.DataFrame

    @staticmethod
    def concat(parts: Iterable[ReadResult]) -> ReadResult:
        import polars as pl

        parts = list(parts)
        if not parts:
            return ReadResult.empty()
        return ReadResult(
            pl.concat([p.events for p in parts], how="vertical"),
            pl.concat([p.diagnostics for p in parts], how="vertical"),
        )

    @staticmethod
    def empty() -> ReadResult:
        from copilot_logs.ingest.schema import empty_diagnostics, empty_events

        return ReadResult(empty_events(), empty_diagnostics())


def _read(
    stream: Readable,
    source: Source,
    rows: Sink,
    diagnostics: Diagnostics,
    resume: ReadState | None = None,
) -> tuple[Span, ReadState]:
    """Read one stream into shared row lists (or a count); returns its span and how far it
    got (with the ids it saw when it was a count: no rows keep them)."""
    events_before, diagnostics_before = rows.count, len(diagnostics.rows)
    diagnostics.start_file(source.name)
    reader = FileReader(rows, diagnostics, resume)
    reader.run(reader.lines(stream))
    diagnostics.settle()
    if resume is None and rows.count == events_before:
        if len(diagnostics.rows) == diagnostics_before:
            # Only a 0-byte file gets here (any byte yields an event or a diagnostic): without
            # a row it would vanish from every frame, and the caller could not say it was read.
            diagnostics.add(0, 0, "empty-file", "the file is empty: it holds no event")
        else:
            diagnostics.add(
                0,
                0,
                "no-event",
                "no event could be read from the file: is it a Copilot CLI session log?",
            )
    span = Span(
        source.name,
        reader.first_session_id or source.session_hint,
        rows.count - events_before,
        len(diagnostics.rows) - diagnostics_before,
        reader.sessions,
    )
    return span, reader.state(with_ids=isinstance(rows, CallTally))


STDIN_CLOSED = "standard input is closed: pipe a log into it, or name the files to read"


def _read_source_into(
    source: Source,
    resume: ReadState | None,
    rows: Sink,
    diagnostics: Diagnostics,
) -> tuple[Span, ReadState | None]:
    """Read a file (or stdin) up to its size when opened; an unreadable file becomes a
    diagnostic, never an exception."""
    if source.path is None:
        import sys

        if sys.stdin is None:  # closed (`<&-`) when the command started
            diagnostics.add(0, 0, "unreadable", STDIN_CLOSED)
            return Span(source.name, source.session_hint, 0, 1), None
        return _read(sys.stdin.buffer, source, rows, diagnostics)[0], None
    try:
        with open_log(source.path, buffered=False) as stream:  # (read in large blocks)
            at = stream.seek(resume.end) if resume is not None else 0
            # Up to the size the file has now: a log appended to faster than it is read
            # would keep the reader going for ever (the command says when one grew).
            capped = Capped(stream, os.fstat(stream.fileno()).st_size, at)
            return _read(capped, source, rows, diagnostics, resume)
    except OSError as exc:
        before = len(diagnostics.rows)
        diagnostics.add(0, 0, "unreadable", why_unreadable(source.path, exc))
        return Span(source.name, source.session_hint, 0, len(diagnostics.rows) - before), None


def read_many(
    jobs: Sequence[tuple[Source, ReadState | None]],
) -> tuple[ReadResult, list[ReadState | None]]:
    """Read several sources (each maybe resumed where an earlier read stopped) into one
    ReadResult, and say how far each read got (None for stdin or an unreadable file).

    The frames are built once for the whole batch: building them per file costs more than
    reading a small file.
    """
    rows, diagnostics = Rows(), Diagnostics()
    spans: list[Span] = []
    states: list[ReadState | None] = []
    for source, resume in jobs:
        span, state = _read_source_into(source, resume, rows, diagnostics)
        spans.append(span)
        states.append(state)
    return ReadResult(rows.frame(spans), diagnostics.frame(spans)), states


def read_many_bytes(
    jobs: Sequence[tuple[Source, bytes, ReadState | None]],
) -> tuple[ReadResult, list[ReadState | None]]:
    """:func:`read_many` of logs held in memory (each maybe the bytes that follow where an
    earlier read stopped): what Spark's executors are handed, and what ``watch`` reads."""
    rows, diagnostics = Rows(), Diagnostics()
    spans: list[Span] = []
    states: list[ReadState | None] = []
    for source, data, resume in jobs:
        span, state = _read(io.BytesIO(data), source, rows, diagnostics, resume)
        spans.append(span)
        states.append(state)
    return ReadResult(rows.frame(spans), diagnostics.frame(spans)), states


def read_source(source: Source) -> ReadResult:
    """Read one session log; an unreadable file becomes a diagnostic, never an exception."""
    return read_many([(source, None)])[0]


def read_stream(
    stream: BinaryIO, source: Source, *, resume: ReadState | None = None
) -> tuple[ReadResult, ReadState]:
    """Read one session log from an open binary stream (positioned at ``resume.end`` when
    continuing an earlier read)."""
    rows, diagnostics = Rows(), Diagnostics()
    span, state = _read(stream, source, rows, diagnostics, resume)
    return ReadResult(rows.frame([span]), diagnostics.frame([span])), state


def read_bytes(data: bytes, name: str = "<bytes>", session_hint: str = "") -> ReadResult:
    """Read a session log held in memory (tests, and callers who already have the bytes)."""
    return read_stream(io.BytesIO(data), Source(Path(name), session_hint or name))[0]


def count_calls(
    source: Source, counter: CallCounter, resume: ReadState | None = None
) -> tuple[int, ReadState | None, tuple[DamageRow, ...]]:
    """Feed the main-agent and sub-agent LLM calls of a file (or stdin) to ``counter``, read
    as every command reads it but without building frames (so without polars): the clean lane
    keeps only the fields a count needs. ``resume`` goes on where an earlier read stopped
    (``counter`` then holds what that read counted). Returns how many events were read, how
    far (with the ids seen), and the damage (reported as for every command)."""
    tally, diagnostics = CallTally(counter), Diagnostics()
    _, state = _read_source_into(source, resume, tally, diagnostics)
    return tally.count, state, diagnostics.damage()
