"""Bytes on disk -> an events frame and a diagnostics frame, one file at a time.

The reader streams: it holds one block of lines (CLEAN_BLOCK bytes) and the line being
assembled, never the file. It splits on ``b"\\n"`` only (a raw U+2028 inside a string is not a
line break). A block whose every line is an event of the usual shape is decoded whole by msgspec
into the fields commands read (:mod:`copilot_logs.ingest.payload`); the lines of any other block go
through the line reader, which parses each with orjson and recovers every event the known kinds
of damage leave behind, reporting each damaged physical line with its number and byte offset.
Both ways give the same rows (a property test checks it).
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

if TYPE_CHECKING:
    import polars as pl

import msgspec
import orjson

from copilot_logs.ingest import json_limits
from copilot_logs.ingest.calls import CallCounter, needs_payload
from copilot_logs.ingest.envelope import (
    EVENT_START,
    Envelope,
    Readable,
    Source,
    envelope,
)
from copilot_logs.ingest.event_types import DETAIL_TYPES
from copilot_logs.ingest.logfile import open_log, why_unreadable
from copilot_logs.ingest.payload import (
    EVENT_LINES,
    NO_PAYLOAD,
    PAYLOAD_FIELDS,
    PAYLOAD_TYPES,
    Data,
    as_str,
    as_text,
    detail,
    from_json,
    payload,
)

MAX_REJOIN_LINES = 16
"""How many following physical lines an event split by raw newlines may span."""
_TS_FORMAT = "%Y-%m-%dT%H:%M:%S%.fZ"


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


@dataclass(slots=True)
class _Physical:
    number: int
    offset: int
    raw: bytes
    terminated: bool


def _ordered(shape: Envelope) -> tuple[str | None, ...]:
    """An envelope in ENVELOPE_FIELDS order (after line, offset, length)."""
    return (shape.event_id, shape.parent_id, shape.type, shape.timestamp, shape.agent_id)


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
_TYPE, _AGENT = ENVELOPE_FIELDS.index("type"), ENVELOPE_FIELDS.index("agent_id")
_CHUNK = len(ENVELOPE_FIELDS) + PAYLOAD_FIELDS.index("chunk_index")
_MESSAGE_ID = len(ENVELOPE_FIELDS) + PAYLOAD_FIELDS.index("message_id")
__all__ = ["ENVELOPE_FIELDS", "PAYLOAD_FIELDS", "PAYLOAD_TYPES", "ReadResult", "read_many"]


FLUSH_ROWS = 50_000
"""Rows kept as Python tuples before they are turned into a frame chunk (see _Rows.flush)."""


class _Rows:
    """One tuple per event (envelope then payload columns), turned into columns in chunks:
    at the end of a batch, and every FLUSH_ROWS rows of a long file when frames are built."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.chunks: list[pl.DataFrame] = []
        self.flushed = 0

    @property
    def count(self) -> int:
        """Rows added so far."""
        return self.flushed + len(self.rows)

    def flush(self) -> None:
        """Turn the rows held as tuples into a frame chunk (without session_id and file, which
        are known once each file is read): Python tuples take several times the memory of the
        columns."""
        if self.rows:
            self.chunks.append(self._chunk())
            self.flushed += len(self.rows)
            self.rows = []

    @staticmethod
    def row(obj: dict[str, Any], line: int, offset: int, length: int) -> tuple[Any, ...]:
        """The row of an event the line reader decoded; raises _TooDeep when its payload
        nests too deep to be encoded again."""
        kind = obj["type"]
        stamp = obj.get("timestamp")
        envelope = (
            line,
            offset,
            length,
            as_str(obj.get("id")),
            as_str(obj.get("parentId")),
            kind,
            stamp if isinstance(stamp, str) else None,
            as_str(obj.get("agentId")),
        )
        data = obj.get("data")
        if kind in PAYLOAD_TYPES and isinstance(data, dict):
            encoded = _dumps(data)  # once, for both the typed fields and `detail`
            extra = encoded.decode() if kind in DETAIL_TYPES else None
            try:
                return envelope + payload(kind, from_json(encoded), extra)
            except RecursionError:
                raise _TooDeep(_TOO_DEEP_MESSAGE) from None
        return envelope + NO_PAYLOAD

    def add_envelope(self, envelope: tuple[Any, ...]) -> None:
        """An event verified from its envelope alone (a type whose payload is not read)."""
        self.rows.append(envelope + NO_PAYLOAD)

    def _chunk(self) -> pl.DataFrame:
        import polars as pl

        from copilot_logs.ingest.schema import EVENTS_SCHEMA

        names = (*ENVELOPE_FIELDS, *PAYLOAD_FIELDS)
        height = len(self.rows)
        columns: dict[str, Any] = (
            dict(zip(names, (list(c) for c in zip(*self.rows, strict=True)), strict=True))
            if height
            else {name: [] for name in names}
        )
        stamps = columns.pop("timestamp")
        requests = columns.pop("tool_requests")
        columns["timestamp"] = [None] * height
        columns["tool_requests"] = [None] * height
        schema = {k: v for k, v in EVENTS_SCHEMA.items() if k not in _SPAN_COLUMNS}
        frame = pl.DataFrame(columns, schema=schema)
        return frame.with_columns(_parse_timestamps(stamps), _requests_column(requests))

    def frame(self, spans: list[_Span]) -> pl.DataFrame:
        """All rows as one events frame; ``spans`` say which file each run of rows is from."""
        import polars as pl

        from copilot_logs.ingest.schema import EVENTS_SCHEMA

        self.flush()
        if not self.chunks:
            self.chunks.append(self._chunk())  # no event: an empty frame with the columns
        body = self.chunks[0] if len(self.chunks) == 1 else pl.concat(self.chunks)
        return body.with_columns(
            pl.Series("session_id", _session_ids(spans, events=True), dtype=pl.String),
            pl.Series("file", _spread(spans, "name", "events"), dtype=pl.String),
        ).select(list(EVENTS_SCHEMA))


_SPAN_COLUMNS = ("session_id", "file")


@dataclass
class _Span:
    """One file's share of a batch's rows."""

    name: str
    session_id: str
    events: int
    diagnostics: int
    sessions: list[_SessionMark] = field(default_factory=list)
    """Where later sessions begin in the file: a file (or stdin) can hold several."""


@dataclass(frozen=True)
class _SessionMark:
    """A session.start whose sessionId differs from the session before it: from this span's
    ``events``-th event and ``diagnostics``-th diagnostic on, rows belong to ``session_id``."""

    events: int
    diagnostics: int
    session_id: str


def _spread(spans: list[_Span], name: str, count: str) -> list[str]:
    values: list[str] = []
    for span in spans:
        values.extend([getattr(span, name)] * getattr(span, count))
    return values


def _session_ids(spans: list[_Span], *, events: bool) -> list[str]:
    """The session id of every event (or diagnostic) row: each session.start's sessionId
    from its line on; rows before the first session.start take the span's id."""
    values: list[str] = []
    for span in spans:
        total = span.events if events else span.diagnostics
        current, done = span.session_id, 0
        for mark in span.sessions:
            upto = mark.events if events else mark.diagnostics
            values.extend([current] * (upto - done))
            current, done = mark.session_id, upto
        values.extend([current] * (total - done))
    return values


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
    """ISO-8601 strings -> UTC datetimes: the usual shape vectorised, any other by Python."""
    import polars as pl

    raw = pl.Series("timestamp", values, dtype=pl.String)
    fast = raw.str.to_datetime(_TS_FORMAT, strict=False, time_unit="ms", time_zone="UTC")
    if fast.null_count() == raw.null_count():
        return fast
    slow = [
        parsed if parsed is not None else _parse_iso(text)
        for parsed, text in zip(fast.to_list(), values, strict=True)
    ]
    return pl.Series("timestamp", slow, dtype=pl.Datetime("ms", "UTC"))


def _parse_iso(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Diagnostics:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, str, str, str | None]] = []

    def add(
        self, line: int, offset: int, kind: str, message: str, event_id: str | None = None
    ) -> None:
        self.rows.append((line, offset, kind, message, event_id))

    def frame(self, spans: list[_Span]) -> pl.DataFrame:
        import polars as pl

        from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA

        return pl.DataFrame(
            {
                "session_id": _session_ids(spans, events=False),
                "file": _spread(spans, "name", "diagnostics"),
                "line": [r[0] for r in self.rows],
                "offset": [r[1] for r in self.rows],
                "kind": [r[2] for r in self.rows],
                "message": [r[3] for r in self.rows],
                "event_id": [r[4] for r in self.rows],
            },
            schema=DIAGNOSTICS_SCHEMA,
        )


Repair = tuple[str, str]
"""A diagnostic (kind, message) for what had to be mended to read a line."""

_INVALID_UTF8: Repair = ("invalid-utf8", "invalid UTF-8 bytes, replaced by U+FFFD")
_LONE_SURROGATE: Repair = (
    "lone-surrogate",
    "a lone UTF-16 surrogate escape (a string cut inside a character such as an emoji), "
    "replaced by U+FFFD",
)
_TOO_DEEP_MESSAGE = (
    "JSON nested too deep to read (about 1,000 levels or more); the line was skipped"
)

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _TooDeep(ValueError):
    """Valid JSON nested deeper than the parsers go."""


def _loads(raw: bytes) -> tuple[Any, tuple[Repair, ...]]:
    """Parse one JSON text, with what had to be mended to read it: invalid UTF-8 bytes, lone
    surrogate escapes and out-of-range numbers (valid JSON that orjson refuses). Raises
    ValueError when it is not JSON (_TooDeep when it nests too deep to read)."""
    try:
        return orjson.loads(raw), ()
    except orjson.JSONDecodeError:
        pass
    repairs: list[Repair] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        repairs.append(_INVALID_UTF8)
        try:
            return orjson.loads(text), tuple(repairs)
        except orjson.JSONDecodeError:
            pass
    try:
        value = json_limits.loads_lenient(text)
        mended, found = _mend(value) if _SURROGATE_ESCAPE.search(text) else (value, False)
    except RecursionError:
        raise _TooDeep(_TOO_DEEP_MESSAGE) from None
    numbers = json_limits.clear_out_of_range(mended, "") if isinstance(mended, dict | list) else []
    if not found and not numbers:
        raise orjson.JSONDecodeError("not valid JSON", text, 0)
    if found:
        repairs.append(_LONE_SURROGATE)
    if numbers:
        repairs.append(("out-of-range-number", json_limits.message(numbers)))
    return mended, tuple(repairs)


def _dumps(data: dict[str, Any]) -> bytes:
    """``data`` as compact JSON: by orjson, or by the standard library when it nests deeper
    than orjson writes (255 levels)."""
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        pass
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    except RecursionError:
        raise _TooDeep(_TOO_DEEP_MESSAGE) from None


def _stored_numbers(kind: str, data: Any) -> list[tuple[str, Any]]:
    """Out-of-range numbers in the fields of ``data`` that reach a numeric or JSON column (the
    whole payload of DETAIL_TYPES, an assistant message's outputTokens and chunkIndex), set to
    None in place. The clean-block lane checks the same fields (see _FileReader._clean_block)."""
    if not isinstance(data, dict):
        return []
    if kind in DETAIL_TYPES:
        return json_limits.clear_out_of_range(data, "data")
    found = []
    if kind == "assistant.message":
        for key in ("outputTokens", "chunkIndex"):
            if json_limits.out_of_range(data.get(key)):
                found.append((f"data.{key}", data[key]))
                data[key] = None
    return found


def _mend(value: Any) -> tuple[Any, bool]:
    """``value`` with every lone surrogate replaced by U+FFFD (pairs are joined), and whether
    there was one."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value, False
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), True
    if isinstance(value, dict):
        found = False
        mended = {}
        for key, item in value.items():
            new_key, key_found = _mend(key)
            mended[new_key], item_found = _mend(item)
            found = found or key_found or item_found
        return mended, found
    if isinstance(value, list):
        items = [_mend(item) for item in value]
        return [item for item, _ in items], any(found for _, found in items)
    return value, False


def _too_deep(raw: bytes) -> bool:
    """Whether a line that did not parse is JSON nested too deep to read."""
    if raw.count(b"[") + raw.count(b"{") < 900:
        return False  # the parsers read more levels than that
    try:
        _loads(raw)
    except _TooDeep:
        return True
    except ValueError:
        return False
    return False


def _try_loads(raw: bytes) -> tuple[Any, tuple[Repair, ...]] | None:
    try:
        return _loads(raw)
    except ValueError:  # orjson's and json's decode errors alike
        return None


_PAYLOAD_TYPE_BYTES = frozenset(kind.encode() for kind in PAYLOAD_TYPES)


def _reads_payload(kind: str, _agent_id: str | None) -> bool:
    return kind in PAYLOAD_TYPES


CLEAN_BLOCK = 2 << 20
"""Bytes the reader decodes at a time when the lines are clean (memory stays bounded by a few
blocks whatever the file's size)."""


def _clean_detail(line: memoryview) -> str | Literal[False]:
    """:func:`copilot_logs.ingest.payload.detail` of a line in a clean block; False when its payload
    holds what only the line reader handles (an out-of-range number, deep nesting)."""
    try:
        text = detail(line)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return False
    if json_limits.may_hold_big_numbers(text) and json_limits.clear_out_of_range(
        orjson.loads(text), "data"
    ):
        return False
    return text


def _big_counts(data: Data) -> bool:
    """An assistant message's outputTokens or chunkIndex is out of range (see _stored_numbers)."""
    return json_limits.out_of_range(data.outputTokens) or json_limits.out_of_range(data.chunkIndex)


def _valid_utf8(view: memoryview) -> bool:
    try:
        codecs.utf_8_decode(view, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


class _FileReader:
    """Turns the physical lines of one file into events and diagnostics."""

    def __init__(
        self,
        rows: _Rows,
        diagnostics: _Diagnostics,
        resume: Resume | None = None,
        wants_payload: Callable[[str, str | None], bool] | None = None,
    ) -> None:
        self.columns = rows
        self.diagnostics = diagnostics
        self.wants_payload = wants_payload or _reads_payload
        self.always_decoded = _PAYLOAD_TYPE_BYTES if wants_payload is None else frozenset()
        self.seen_ids: set[str] = set(resume.seen_ids) if resume else set()
        self.last_id: str | None = resume.last_id if resume else None
        self.session_id: str | None = resume.session_id if resume else None
        """The session the rows read now belong to (the last session.start's sessionId)."""
        self.first_session_id = self.session_id
        """The session of the first rows (None: the file's hint; see :meth:`_session`)."""
        self.sessions: list[_SessionMark] = []
        self.rows_before = rows.count
        self.diagnostics_before = len(diagnostics.rows)
        self.end = resume.offset if resume else 0
        self.next_line = resume.line if resume else 1
        self.held: _Physical | None = None
        """A line that did not parse, waiting for the next (maybe one event split by raw
        newlines)."""
        self.clean_lane = wants_payload is None
        """Whether clean blocks are decoded whole (every payload is read then)."""

    def lines(self, stream: Readable) -> Iterator[_Physical]:
        """The physical lines of the stream for :meth:`run`, read in blocks of whole lines.

        A block whose every line is an event of the shape the CLI writes is added in one go
        (see :meth:`_clean_block`) and yields nothing; the lines of any other block are yielded
        one by one, for the line reader to recover and report. While the line reader holds a
        line (an event split over several lines), blocks are yielded line by line too.
        """
        pending = self._skip_bom(stream) if self.end == 0 else b""
        offset, number = self.end, self.next_line
        while True:
            more = stream.read(CLEAN_BLOCK)
            block = pending + more if pending else more
            if not more:
                if block:
                    yield _Physical(number, offset, block, False)
                return
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                pending = block  # one line longer than a block: read on
                continue
            pending = block[cut:]
            if self.clean_lane and len(self.columns.rows) >= FLUSH_ROWS:
                self.columns.flush()
            if self.clean_lane and self.held is None and self._clean_block(block, cut):
                offset, number = self.end, self.next_line
                continue
            for raw in block[: cut - 1].split(b"\n"):
                yield _Physical(number, offset, raw, True)
                offset += len(raw) + 1
                number += 1

    def _skip_bom(self, stream: Readable) -> bytes:
        """Step over a UTF-8 byte order mark at the start of the file (reported); returns the
        bytes read that are not one."""
        head = stream.read(len(codecs.BOM_UTF8))
        if head != codecs.BOM_UTF8:
            return head
        self.end = len(head)
        self.diagnostics.add(
            1, 0, "bom", "a UTF-8 byte order mark starts the file (the CLI writes none); ignored"
        )
        return b""

    def _clean_block(self, block: bytes, cut: int) -> bool:
        """Add the lines of ``block`` before ``cut`` (whole lines) in one go, if each is a
        well-formed event on its own line: valid UTF-8, no CR, no blank line, an envelope of the
        usual types, an id not seen before. Adds nothing and returns False otherwise."""
        view = memoryview(block)[:cut]
        ends = []
        find = block.find
        at = find(b"\n", 0, cut)
        while at != -1:
            ends.append(at)
            at = find(b"\n", at + 1, cut)
        try:
            if not block.isascii() and not _valid_utf8(view):
                return False
            events = EVENT_LINES.decode_lines(view)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return False
        if len(events) != len(ends) or any(view[end - 1] == 13 for end in ends):
            return False
        ids = [event.id for event in events]
        if len(set(ids)) != len(ids) or not self.seen_ids.isdisjoint(ids):
            return False
        rows = self.columns.rows
        before = len(rows)
        sessions_before = (self.session_id, self.first_session_id, len(self.sessions))
        offset, number, start = self.end, self.next_line, 0
        for event, end in zip(events, ends, strict=True):
            kind = event.type
            envelope = (
                number,
                offset + start,
                end - start,
                event.id,
                event.parentId,
                kind,
                event.timestamp,
                event.agentId,
            )
            if kind in PAYLOAD_TYPES:
                extra = _clean_detail(view[start:end]) if kind in DETAIL_TYPES else None
                if extra is False or (kind == "assistant.message" and _big_counts(event.data)):
                    del rows[before:]  # the line reader reads this block, and reports it
                    self._restore_sessions(sessions_before)
                    return False
                if kind == "session.start":
                    self._session(as_text(event.data.sessionId))
                rows.append(envelope + payload(kind, event.data, extra))
            else:
                rows.append(envelope + NO_PAYLOAD)
            number += 1
            start = end + 1
        self.seen_ids.update(ids)
        self.last_id = ids[-1]
        self.end, self.next_line = offset + len(view), number
        return True

    def run(self, lines: Iterator[_Physical]) -> None:
        for physical in lines:
            if physical.terminated:
                self.end = physical.offset + len(physical.raw) + 1
                self.next_line = physical.number + 1
            if self.held is not None:
                physical_or_none = self._continue_split(self.held, physical, lines)
                self.held = None
                if physical_or_none is None:
                    continue
                physical = physical_or_none
            self.held = self._line(physical)
        if self.held is not None:
            self._unparsable(self.held, last=True)
            self.held = None

    def _clean(self, physical: _Physical) -> bytes | None:
        """Strip what damage adds around a line; None when nothing is left."""
        raw = physical.raw
        if raw.endswith(b"\r"):
            raw = raw[:-1]
            self.diagnostics.add(
                physical.number, physical.offset, "crlf", "line ends with CRLF; read as LF"
            )
        padded = False
        if b"\x00" in raw:
            stripped = raw.strip(b"\x00")
            padded = len(stripped) != len(raw)
            if padded:
                self.diagnostics.add(
                    physical.number,
                    physical.offset,
                    "nul-bytes",
                    f"{len(raw) - len(stripped)} NUL bytes (a crash left padding); ignored",
                )
                raw = stripped
        if not raw.strip():
            if not padded and (raw or physical.terminated):
                self.diagnostics.add(physical.number, physical.offset, "blank-line", "blank line")
            return None
        return raw

    def _line(self, physical: _Physical) -> _Physical | None:
        """Handle one physical line; returns it when it must wait for the next one."""
        raw = self._clean(physical)
        if raw is None:
            return None
        if self._envelope_only(raw, physical):
            return None
        parsed = _try_loads(raw)
        if parsed is not None:
            self._event(parsed[0], physical, len(physical.raw), repairs=parsed[1])
            return None
        physical.raw = raw
        if not physical.terminated:
            self._unparsable(physical, last=True)
            return None
        return physical

    def _envelope_only(self, raw: bytes, physical: _Physical) -> bool:
        """Keep an event whose payload no command reads without decoding that payload.

        Only a line :func:`copilot_logs.ingest.envelope.envelope` vouches for, whose parentId is the
        id of the event before it and whose id is new; any other line is decoded.
        """
        type_end = raw.find(b'"', 9)
        if raw[9:type_end] in self.always_decoded:
            return False  # decoded anyway: checking its envelope first would be wasted work
        shape = envelope(raw)
        if shape is None or self.wants_payload(shape.type, shape.agent_id):
            return False
        if shape.parent_id != self.last_id or shape.event_id in self.seen_ids:
            return False
        self.seen_ids.add(shape.event_id)
        self.last_id = shape.event_id
        where = (physical.number, physical.offset, len(physical.raw))
        self.columns.add_envelope((*where, *_ordered(shape)))
        return True

    def _continue_split(
        self, held: _Physical, nxt: _Physical, lines: Iterator[_Physical]
    ) -> _Physical | None:
        """``held`` did not parse. Rejoin it with the lines after it when a raw newline split
        one event; else recover what it holds and hand ``nxt`` back to be read on its own."""
        pieces = [held.raw]
        followers = [nxt]
        while True:
            candidate = b"\\n".join([*pieces, followers[-1].raw.rstrip(b"\r")])
            parsed = _try_loads(candidate)
            if parsed is not None:
                span = followers[-1].offset + len(followers[-1].raw) - held.offset
                self.diagnostics.add(
                    held.number,
                    held.offset,
                    "split-event",
                    f"one event split over lines {held.number}-{followers[-1].number} by raw "
                    "newlines inside a string; rejoined",
                )
                for follower in followers:
                    self.diagnostics.add(
                        follower.number,
                        follower.offset,
                        "split-event",
                        f"continues the event split at line {held.number}; rejoined",
                    )
                self._event(parsed[0], held, span, repairs=parsed[1])
                return None
            last = followers[-1]
            stripped = last.raw.lstrip(b"\x00")
            if (
                stripped.startswith(b"{")
                or not last.terminated
                or len(followers) >= MAX_REJOIN_LINES
            ):
                break
            pieces.append(last.raw)
            nxt_line = next(lines, None)
            if nxt_line is None:
                break
            followers.append(nxt_line)
        # Not a split event: the held line is damaged on its own. Every line taken as a
        # candidate continuation is read again by itself so nothing is lost.
        self._unparsable(held, last=False)
        for follower in followers[:-1]:
            self._alone(follower)
        return followers[-1]

    def _alone(self, physical: _Physical) -> None:
        """Read a line by itself, with no rejoining."""
        raw = self._clean(physical)
        if raw is None:
            return
        parsed = _try_loads(raw)
        if parsed is not None:
            self._event(parsed[0], physical, len(physical.raw), repairs=parsed[1])
            return
        physical.raw = raw
        self._unparsable(physical, last=not physical.terminated)

    def _unparsable(self, physical: _Physical, *, last: bool) -> None:
        raw = physical.raw
        # A truncated event with a complete one glued on behind it: keep the complete one.
        start = raw.find(EVENT_START, 1)
        while start != -1:
            parsed = _try_loads(raw[start:])
            if parsed is not None and isinstance(parsed[0], dict):
                self.diagnostics.add(
                    physical.number,
                    physical.offset,
                    "truncated-event",
                    f"a truncated event ({start} bytes) with a complete event glued behind it; "
                    "the complete one was kept",
                )
                self._event(
                    parsed[0],
                    _Physical(physical.number, physical.offset + start, raw[start:], True),
                    len(raw) - start,
                    repairs=parsed[1],
                )
                return
            start = raw.find(EVENT_START, start + 1)
        if last and not physical.terminated:
            self.diagnostics.add(
                physical.number,
                physical.offset,
                "cut-line",
                f"the last line is cut off mid-event ({len(raw)} bytes, no newline): the session "
                "was still being written or crashed",
            )
        elif _too_deep(raw):
            self.diagnostics.add(physical.number, physical.offset, "too-deep", _TOO_DEEP_MESSAGE)
        else:
            self.diagnostics.add(
                physical.number,
                physical.offset,
                "invalid-json",
                f"not valid JSON ({len(raw)} bytes); the line was skipped",
            )

    def _event(
        self, obj: Any, physical: _Physical, length: int, *, repairs: tuple[Repair, ...]
    ) -> None:
        number, offset = physical.number, physical.offset
        for kind, message in repairs:
            self.diagnostics.add(number, offset, kind, message)
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            shape = type(obj).__name__ if not isinstance(obj, dict) else "object without type"
            self.diagnostics.add(
                number, offset, "not-an-event", f"valid JSON but not an event ({shape}); skipped"
            )
            return
        event_id = as_str(obj.get("id"))
        if "id" not in obj or "timestamp" not in obj or "data" not in obj:
            missing = [key for key in ("id", "timestamp", "data") if key not in obj]
            self.diagnostics.add(
                number,
                offset,
                "incomplete-envelope",
                f"{obj['type']} event lacks {', '.join(missing)}; kept",
                event_id,
            )
        numbers = _stored_numbers(obj["type"], obj.get("data"))
        if numbers:
            self.diagnostics.add(
                number, offset, "out-of-range-number", json_limits.message(numbers), event_id
            )
        try:
            row = self.columns.row(obj, number, offset, length)
        except _TooDeep as exc:
            self.diagnostics.add(number, offset, "too-deep", str(exc), event_id)
            return
        if event_id is not None:
            if event_id in self.seen_ids:
                self.diagnostics.add(
                    number,
                    offset,
                    "duplicate-id",
                    f"event id {event_id} already read (a replayed line); counted once",
                    event_id,
                )
                return
            self.seen_ids.add(event_id)
        self.last_id = event_id
        if obj["type"] == "session.start":
            data = obj.get("data")
            if isinstance(data, dict):
                self._session(as_text(data.get("sessionId")))
        self.columns.rows.append(row)

    def _restore_sessions(self, state: tuple[str | None, str | None, int]) -> None:
        """Forget the sessions a block began before it was handed to the line reader."""
        self.session_id, self.first_session_id, marks = state
        del self.sessions[marks:]

    def _session(self, session_id: str | None) -> None:
        """A session.start with ``session_id`` is about to be added. One with another id than
        the session under way starts a new session (two logs in one file, or ``cat a b``), so
        that nothing of two sessions is merged. Events before a file's first session.start
        keep the file's hint (they belong to no session the log names); when it is the first
        event, it names the span, and damage reported before it joins its session."""
        if not session_id or session_id == self.session_id:
            return
        if self.session_id is None and self.columns.count == self.rows_before:
            self.session_id = self.first_session_id = session_id
            return
        self.sessions.append(
            _SessionMark(
                self.columns.count - self.rows_before,
                len(self.diagnostics.rows) - self.diagnostics_before,
                session_id,
            )
        )
        self.session_id = session_id


@dataclass(frozen=True)
class Resume:
    """Where an earlier read of a file that has since grown stopped: its last whole line."""

    offset: int
    line: int
    last_id: str | None
    seen_ids: frozenset[str]
    session_id: str | None


@dataclass(frozen=True)
class ReadState:
    """How far a read got, so that a cache can later read only what was appended."""

    end: int
    """Bytes up to and including the last newline."""
    next_line: int
    last_id: str | None
    session_id: str | None
    """The session the last rows belong to: appended rows continue it."""


def _read(
    stream: BinaryIO,
    source: Source,
    rows: _Rows,
    diagnostics: _Diagnostics,
    resume: Resume | None = None,
    wants_payload: Callable[[str, str | None], bool] | None = None,
) -> tuple[_Span, ReadState]:
    """Read one stream into shared row lists; returns its span and how far it got."""
    events_before, diagnostics_before = rows.count, len(diagnostics.rows)
    reader = _FileReader(rows, diagnostics, resume, wants_payload)
    reader.run(reader.lines(stream))
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
    span = _Span(
        source.name,
        reader.first_session_id or source.session_hint,
        rows.count - events_before,
        len(diagnostics.rows) - diagnostics_before,
        reader.sessions,
    )
    return span, ReadState(reader.end, reader.next_line, reader.last_id, reader.session_id)


def _read_source_into(
    source: Source,
    resume: Resume | None,
    rows: _Rows,
    diagnostics: _Diagnostics,
    wants_payload: Callable[[str, str | None], bool] | None = None,
) -> tuple[_Span, ReadState | None]:
    """Read a file (or stdin); an unreadable file becomes a diagnostic, never an exception."""
    if source.path is None:
        import sys

        return _read(sys.stdin.buffer, source, rows, diagnostics, None, wants_payload)[0], None
    try:
        with open_log(source.path) as stream:
            if resume is not None:
                stream.seek(resume.offset)
            return _read(stream, source, rows, diagnostics, resume, wants_payload)
    except OSError as exc:
        before = len(diagnostics.rows)
        diagnostics.add(0, 0, "unreadable", why_unreadable(source.path, exc))
        return _Span(source.name, source.session_hint, 0, len(diagnostics.rows) - before), None


def read_many(
    jobs: Sequence[tuple[Source, Resume | None]],
) -> tuple[ReadResult, list[ReadState | None]]:
    """Read several sources (each maybe resumed where an earlier read stopped) into one
    ReadResult, and say how far each read got (None for stdin or an unreadable file).

    The frames are built once for the whole batch: building them per file costs more than
    reading a small file.
    """
    rows, diagnostics = _Rows(), _Diagnostics()
    spans: list[_Span] = []
    states: list[ReadState | None] = []
    for source, resume in jobs:
        span, state = _read_source_into(source, resume, rows, diagnostics)
        spans.append(span)
        states.append(state)
    return ReadResult(rows.frame(spans), diagnostics.frame(spans)), states


def read_source(source: Source) -> ReadResult:
    """Read one session log; an unreadable file becomes a diagnostic, never an exception."""
    return read_many([(source, None)])[0]


def read_stream(
    stream: BinaryIO, source: Source, *, resume: Resume | None = None
) -> tuple[ReadResult, ReadState]:
    """Read one session log from an open binary stream (positioned at ``resume.offset`` when
    continuing an earlier read)."""
    rows, diagnostics = _Rows(), _Diagnostics()
    span, state = _read(stream, source, rows, diagnostics, resume)
    return ReadResult(rows.frame([span]), diagnostics.frame([span])), state


def read_bytes(data: bytes, name: str = "<bytes>", session_hint: str = "") -> ReadResult:
    """Read a session log held in memory (tests, and callers who already have the bytes)."""
    return read_stream(io.BytesIO(data), Source(Path(name), session_hint or name))[0]


@dataclass(frozen=True)
class Calls:
    """What :func:`count_calls` read of a file: how many events, its damage, how far it got."""

    events: int
    damage: tuple[tuple[int, str, str], ...]
    """(line, kind, message) of each diagnostic."""
    state: ReadState | None


def count_calls(source: Source, counter: CallCounter, resume: Resume | None = None) -> Calls:
    """Feed the main-agent and sub-agent LLM calls of a file to ``counter``, read with full
    recovery but without building frames (so without polars): only the lines that need it are
    decoded. ``resume`` goes on where an envelope scan stopped (``counter`` then holds what the
    scan counted)."""
    rows, diagnostics = _Rows(), _Diagnostics()
    _, state = _read_source_into(source, resume, rows, diagnostics, needs_payload)
    for row in rows.rows:
        counter.add(row[_TYPE], row[_AGENT], row[_MESSAGE_ID], row[_CHUNK])
    damage = tuple((line, kind, message) for line, _, kind, message, _ in diagnostics.rows)
    return Calls(len(rows.rows), damage, state)
