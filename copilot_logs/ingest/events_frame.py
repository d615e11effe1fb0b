"""Rows of events and diagnostics -> the polars frames the reader returns (polars imported only
where a frame is built: ``count --total`` builds none)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

from copilot_logs.ingest.decode import PAYLOAD_FIELDS
from copilot_logs.ingest.repair import held_time

_TS_FORMAT = "%Y-%m-%dT%H:%M:%S%.fZ"

ENVELOPE_FIELDS = (
    "line",
    "offset",
    "length",
    "event_id",
    "parent_id",
    "type",
    "timestamp",
    "agent_id",
)
ROW_FIELDS = (*ENVELOPE_FIELDS, *PAYLOAD_FIELDS)
"""The columns of a row as the reader adds it (the frame adds session_id and file)."""

FLUSH_ROWS = 50_000
"""Rows kept as Python values before they are turned into a frame chunk (see Rows.flush)."""


class Rows:
    """The events read so far, one list per column of ROW_FIELDS, turned into frame chunks at
    the end of a batch and every FLUSH_ROWS rows (Python values take several times the memory
    of the columns)."""

    def __init__(self) -> None:
        self.columns: list[list[Any]] = [[] for _ in ROW_FIELDS]
        self.chunks: list[pl.DataFrame] = []
        self.flushed = 0

    @property
    def held(self) -> int:
        """Rows not yet turned into a chunk."""
        return len(self.columns[0])

    @property
    def count(self) -> int:
        return self.flushed + self.held

    def append(self, row: Sequence[Any]) -> None:
        for column, value in zip(self.columns, row, strict=True):
            column.append(value)

    def extend(self, columns: Sequence[list[Any]]) -> None:
        for column, values in zip(self.columns, columns, strict=True):
            column.extend(values)

    def flush(self) -> None:
        """A frame chunk of the rows held (session_id and file are added by :meth:`frame`)."""
        if self.held:
            self.chunks.append(self._chunk())
            self.flushed += self.held
            self.columns = [[] for _ in ROW_FIELDS]

    def _chunk(self) -> pl.DataFrame:
        import polars as pl

        from copilot_logs.ingest.schema import EVENTS_SCHEMA

        height = self.held
        columns: dict[str, Any] = dict(zip(ROW_FIELDS, self.columns, strict=True))
        stamps = columns.pop("timestamp")
        requests = columns.pop("tool_requests")
        columns["timestamp"] = [None] * height
        columns["tool_requests"] = [None] * height
        schema = {k: v for k, v in EVENTS_SCHEMA.items() if k not in ("session_id", "file")}
        frame = pl.DataFrame(columns, schema=schema)
        return frame.with_columns(_parse_timestamps(stamps), _requests_column(requests))

    def frame(self, spans: list[Span]) -> pl.DataFrame:
        """All rows as one events frame; ``spans`` say which file each run of rows is from."""
        import polars as pl

        from copilot_logs.ingest.schema import EVENTS_SCHEMA

        self.flush()
        if not self.chunks:
            self.chunks.append(self._chunk())  # no event: an empty frame with the columns
        body = self.chunks[0] if len(self.chunks) == 1 else pl.concat(self.chunks)
        files, sessions = _of_spans(spans, events=True)
        return body.with_columns(
            pl.Series("session_id", sessions, dtype=pl.String),
            pl.Series("file", files, dtype=pl.String),
        ).select(list(EVENTS_SCHEMA))


@dataclass
class Span:
    """One file's share of a batch's rows."""

    name: str
    session_id: str
    events: int
    diagnostics: int
    sessions: list[SessionMark] = field(default_factory=list)
    """Where later sessions begin in the file: a file (or stdin) can hold several."""


@dataclass(frozen=True)
class SessionMark:
    """A session.start whose sessionId differs from the session before it: from this span's
    ``events``-th event and ``diagnostics``-th diagnostic on, rows belong to ``session_id``."""

    events: int
    diagnostics: int
    session_id: str


def _of_spans(spans: list[Span], *, events: bool) -> tuple[list[str], list[str]]:
    """The file and the session id of every event (or diagnostic) row: each session.start's
    sessionId from its line on; rows before the first session.start take the span's id."""
    files: list[str] = []
    sessions: list[str] = []
    for span in spans:
        total = span.events if events else span.diagnostics
        files.extend([span.name] * total)
        current, done = span.session_id, 0
        for mark in span.sessions:
            upto = mark.events if events else mark.diagnostics
            sessions.extend([current] * (upto - done))
            current, done = mark.session_id, upto
        sessions.extend([current] * (total - done))
    return files, sessions


def _requests_column(values: list[list[tuple[str | None, str | None]] | None]) -> pl.Series:
    """Tool requests as a list-of-struct column, built from flat columns (polars builds nested
    values from Python objects slowly)."""
    import polars as pl

    from copilot_logs.ingest.schema import EVENTS_SCHEMA

    rows: list[int] = []
    ids: list[str | None] = []
    names: list[str | None] = []
    present: list[int] = []
    for row, requests in enumerate(values):
        if requests is None:
            continue
        present.append(row)
        for call_id, name in requests:
            rows.append(row)
            ids.append(call_id)
            names.append(name)
    dtype = EVENTS_SCHEMA["tool_requests"]
    flat = pl.DataFrame(
        {"row": rows, "tool_call_id": ids, "name": names},
        schema={"row": pl.Int64, "tool_call_id": pl.String, "name": pl.String},
    )
    nested = flat.group_by("row").agg(tool_requests=pl.struct("tool_call_id", "name"))
    placed = (
        pl.DataFrame({"row": present}, schema={"row": pl.Int64})
        .join(nested, on="row", how="left")
        .with_columns(pl.col("tool_requests").fill_null(pl.lit([], dtype=dtype)))
    )
    return (
        pl.DataFrame({"row": range(len(values))}, schema={"row": pl.Int64})
        .join(placed, on="row", how="left", maintain_order="left")
        .get_column("tool_requests")
        .cast(dtype)
    )


def _parse_timestamps(values: list[str | None]) -> pl.Series:
    """ISO-8601 strings -> UTC datetimes: the usual shape vectorised, any other by Python; null
    for a time no log may hold (see :func:`copilot_logs.ingest.repair.held_time`)."""
    import polars as pl

    from copilot_logs.ingest.schema import held_times

    raw = pl.Series("timestamp", values, dtype=pl.String)
    parsed = raw.str.to_datetime(_TS_FORMAT, strict=False, time_unit="ms", time_zone="UTC")
    fast = parsed.to_frame().select(held_times(pl.col("timestamp"))).to_series()
    if fast.null_count() == raw.null_count():
        return fast
    slow = [
        moment if moment is not None else _parse_iso(text)
        for moment, text in zip(fast.to_list(), values, strict=True)
    ]
    return pl.Series("timestamp", slow, dtype=pl.Datetime("ms", "UTC"))


def _parse_iso(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return held_time(datetime.fromisoformat(text))
    except ValueError:
        return None


MAX_DETAILS = 100
"""Problems of a file listed one by one; past them, each kind's are summed up in one row, so
memory stays flat however much of a file is damaged (docs/damaged-logs.md)."""

Diagnostic = tuple[int, int, str, str, str | None, int | None, int | None]
"""line, offset, kind, message, event_id, more_lines, new_lines (see DIAGNOSTICS_SCHEMA)."""


@dataclass(slots=True)
class _Tally:
    """The problems of one kind past a file's first MAX_DETAILS, not listed one by one."""

    line: int
    offset: int
    last_line: int
    lines: int = 1
    new_lines: int = 0
    """Damaged lines no listed row, nor a tally of another kind, names (so the rows of a file
    sum to its damaged lines exactly)."""


class Diagnostics:
    """The problems met while reading, as rows: the first MAX_DETAILS of each file one by one,
    then per kind one row that sums up the rest; problems about a whole file (line 0) are
    always listed. A reader calls :meth:`start_file` before a file and :meth:`settle` where a
    session ends and after the file."""

    def __init__(self) -> None:
        self.rows: list[Diagnostic] = []
        self._file: object = None
        self._listed = 0
        self._last_line = 0
        self._tallies: dict[str, _Tally] = {}

    def start_file(self, name: object) -> None:
        """Count the problems of file ``name`` from now on (the same name again goes on
        counting: a file read in several windows)."""
        if name != self._file:
            self.settle()
            self._file, self._listed, self._last_line = name, 0, 0

    def add(
        self, line: int, offset: int, kind: str, message: str, event_id: str | None = None
    ) -> None:
        if self._listed < MAX_DETAILS or line == 0:
            self._listed += line != 0
            self._last_line = max(self._last_line, line)
            self.rows.append((line, offset, kind, message, event_id, None, None))
            return
        tally = self._tallies.get(kind)
        if tally is None:
            tally = self._tallies[kind] = _Tally(line, offset, line)
        elif line != tally.last_line:
            tally.lines += 1
            tally.last_line = line
        if line > self._last_line:
            tally.new_lines += 1
            self._last_line = line

    def settle(self) -> None:
        """Add the rows that sum up the problems not listed so far (at the end of a file, and
        of each session in it: their rows must belong to the session they are about)."""
        for kind, tally in sorted(self._tallies.items()):
            message = (
                f"and {tally.lines:,} more damaged lines of this kind, from line "
                f"{tally.line:,} to {tally.last_line:,}: not listed one by one (the first "
                f"{MAX_DETAILS} problems of a file are)"
            )
            row = (tally.line, tally.offset, kind, message, None, tally.lines, tally.new_lines)
            self.rows.append(row)
        self._tallies.clear()

    def damage(self) -> tuple[tuple[int, str, str, int | None, int | None], ...]:
        """(line, kind, message, more_lines, new_lines) of each row, for ``count --total``."""
        return tuple((row[0], row[2], row[3], row[5], row[6]) for row in self.rows)

    def frame(self, spans: list[Span]) -> pl.DataFrame:
        import polars as pl

        from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA

        files, sessions = _of_spans(spans, events=False)
        names = ("line", "offset", "kind", "message", "event_id", "more_lines", "new_lines")
        columns = [list(column) for column in zip(*self.rows, strict=True)] or [[]] * len(names)
        return pl.DataFrame(
            {"session_id": sessions, "file": files, **dict(zip(names, columns, strict=True))},
            schema=DIAGNOSTICS_SCHEMA,
        )
