"""Bytes on disk -> an events frame and a diagnostics frame, one file at a time.

The reader streams: it holds one read block and the line being assembled, never the file. It
splits on ``b"\\n"`` only (a raw U+2028 inside a string is not a line break), parses each line
with orjson, and recovers every event the known kinds of damage leave behind, reporting each
damaged physical line with its number and byte offset.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from copilot_logs.envelope import (
    EVENT_START,
    Envelope,
    Source,
    as_int,
    envelope,
    split_lines,
)
from copilot_logs.schema import (
    DETAIL_TYPES,
    DIAGNOSTICS_SCHEMA,
    EVENTS_SCHEMA,
    NUDGE_TEXT,
    PREVIEW_CHARS,
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
        parts = list(parts)
        if not parts:
            return ReadResult(
                pl.DataFrame(schema=EVENTS_SCHEMA), pl.DataFrame(schema=DIAGNOSTICS_SCHEMA)
            )
        return ReadResult(
            pl.concat([p.events for p in parts], how="vertical"),
            pl.concat([p.diagnostics for p in parts], how="vertical"),
        )


@dataclass
class _Physical:
    number: int
    offset: int
    raw: bytes
    terminated: bool


def _ordered(shape: Envelope) -> tuple[str | None, ...]:
    """An envelope in ENVELOPE_FIELDS order (after line, offset, length)."""
    return (shape.event_id, shape.parent_id, shape.type, shape.timestamp, shape.agent_id)


def _physical_lines(
    stream: BinaryIO, read_block: int | None = None, *, offset: int = 0, first_line: int = 1
) -> Iterator[_Physical]:
    """Physical lines with their 1-based numbers and byte offsets."""
    for number, (raw, terminated) in enumerate(split_lines(stream, read_block), start=first_line):
        yield _Physical(number, offset, raw, terminated)
        offset += len(raw) + 1


def _text(value: Any) -> str | None:
    """A scalar as a string (ids are sometimes numbers in old logs), else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def _preview(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= PREVIEW_CHARS else value[: PREVIEW_CHARS - 1] + "…"


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _error_fields(error: Any) -> tuple[str | None, str | None]:
    if isinstance(error, dict):
        return _preview(error.get("message")), _text(error.get("code"))
    return _preview(error), None


def _tool_requests(value: Any) -> list[tuple[str | None, str | None]] | None:
    if not isinstance(value, list):
        return None
    return [
        (_text(r.get("toolCallId")), _text(r.get("name"))) for r in value if isinstance(r, dict)
    ]


def _is_nudge(data: dict[str, Any]) -> bool:
    if data.get("isAutopilotContinuation") is True:
        return True
    content = data.get("content")
    transformed = data.get("transformedContent")
    if isinstance(content, str) and content.startswith(NUDGE_TEXT):
        return True
    if content == "" or content is None:
        if isinstance(transformed, str) and NUDGE_TEXT in transformed:
            return True
        return data.get("agentMode") == "autopilot"
    return False


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
PAYLOAD_FIELDS = tuple(
    name for name in EVENTS_SCHEMA if name not in (*ENVELOPE_FIELDS, "session_id", "file")
)
_NO_PAYLOAD: tuple[Any, ...] = tuple(
    False if name == "is_nudge" else None for name in PAYLOAD_FIELDS
)

# The types whose payload some command reads. Every other type (system prompts, permission and
# hook events, notifications, types added by newer CLIs) is kept with its envelope only, so its
# payload, often the largest part of a log, never needs decoding.
PAYLOAD_TYPES = frozenset(
    {
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.message",
        "tool.execution_start",
        "tool.execution_complete",
        "tool.user_requested",
        "user.message",
        "session.error",
        "session.auto_mode_resolved",
        "abort",
        *DETAIL_TYPES,
    }
)


def _payload(kind: str, data: dict[str, Any]) -> tuple[Any, ...]:
    """The typed payload columns of one event, in PAYLOAD_FIELDS order."""
    tool_name = model = text = error = error_code = outcome = agent_mode = None
    success = is_user_requested = None
    is_nudge = False
    output_tokens = chunk_index = None
    requests = None
    if kind == "assistant.message":
        model = _text(data.get("model"))
        text = _preview(data.get("content"))
        output_tokens = as_int(data.get("outputTokens"))
        chunk_index = as_int(data.get("chunkIndex"))
        requests = _tool_requests(data.get("toolRequests"))
    elif kind == "tool.execution_start":
        tool_name = _text(data.get("toolName"))
        model = _text(data.get("model"))
        arguments = data.get("arguments")
        if arguments is not None:
            text = _preview(orjson.dumps(arguments).decode())
    elif kind == "tool.execution_complete":
        model = _text(data.get("model"))
        success = _bool(data.get("success"))
        is_user_requested = _bool(data.get("isUserRequested"))
        error, error_code = _error_fields(data.get("error"))
        result = data.get("result")
        if isinstance(result, dict):
            text = _preview(result.get("content"))
    elif kind == "user.message":
        text = _preview(data.get("content"))
        agent_mode = _text(data.get("agentMode"))
        is_nudge = _is_nudge(data)
    elif kind == "tool.user_requested":
        tool_name = _text(data.get("toolName"))
        text = _preview(data.get("command") or data.get("content"))
    elif kind == "session.error":
        error = _preview(data.get("message"))
        error_code = _text(data.get("errorType"))
        text = error
    elif kind == "session.task_complete":
        text = _preview(data.get("summary"))
        success = _bool(data.get("success"))
        outcome = _text(data.get("outcome"))
    elif kind == "session.mode_changed":
        agent_mode = _text(data.get("newMode"))
    elif kind == "session.model_change":
        model = _text(data.get("newModel"))
    elif kind == "session.auto_mode_resolved":
        model = _text(data.get("chosenModel"))
    elif kind == "session.start":
        model = _text(data.get("selectedModel"))
    elif kind == "session.shutdown":
        model = _text(data.get("currentModel"))
    elif kind == "subagent.started":
        model = _text(data.get("model"))
        tool_name = _text(data.get("agentName"))
        text = _preview(data.get("agentDisplayName") or data.get("agentName"))
    elif kind in ("subagent.completed", "subagent.failed"):
        model = _text(data.get("model"))
        tool_name = _text(data.get("agentName"))
        success = kind == "subagent.completed"
        error, error_code = _error_fields(data.get("error"))
    elif kind in ("abort", "session.info", "session.warning"):
        text = _preview(data.get("reason") or data.get("message"))
    return (
        _text(data.get("turnId")),
        _text(data.get("interactionId")),
        _text(data.get("toolCallId")),
        tool_name,
        _text(data.get("messageId")),
        _text(data.get("parentToolCallId")),
        success,
        is_user_requested,
        is_nudge,
        agent_mode,
        model,
        output_tokens,
        chunk_index,
        text,
        error,
        error_code,
        outcome,
        requests,
        orjson.dumps(data).decode() if kind in DETAIL_TYPES else None,
    )


class _Rows:
    """One tuple per event (envelope then payload columns); columns are made once, at the end."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def add(self, obj: dict[str, Any], line: int, offset: int, length: int) -> None:
        kind = obj["type"]
        stamp = obj.get("timestamp")
        envelope = (
            line,
            offset,
            length,
            _text(obj.get("id")),
            _text(obj.get("parentId")),
            kind,
            stamp if isinstance(stamp, str) else None,
            _text(obj.get("agentId")),
        )
        data = obj.get("data")
        if kind in PAYLOAD_TYPES and isinstance(data, dict):
            self.rows.append(envelope + _payload(kind, data))
        else:
            self.rows.append(envelope + _NO_PAYLOAD)

    def add_envelope(self, envelope: tuple[Any, ...]) -> None:
        """An event verified from its envelope alone (a type whose payload is not read)."""
        self.rows.append(envelope + _NO_PAYLOAD)

    def frame(self, session_id: str, file: str) -> pl.DataFrame:
        names = (*ENVELOPE_FIELDS, *PAYLOAD_FIELDS)
        height = len(self.rows)
        columns: dict[str, Any] = (
            dict(zip(names, (list(c) for c in zip(*self.rows, strict=True)), strict=True))
            if height
            else {name: [] for name in names}
        )
        stamps = columns.pop("timestamp")
        requests = columns.pop("tool_requests")
        columns["session_id"] = [session_id] * height
        columns["file"] = [file] * height
        columns["timestamp"] = [None] * height
        columns["tool_requests"] = [None] * height
        frame = pl.DataFrame(columns, schema=EVENTS_SCHEMA)
        return frame.with_columns(_parse_timestamps(stamps), _requests_column(requests))


def _requests_column(values: list[list[tuple[str | None, str | None]] | None]) -> pl.Series:
    """Tool requests as a list-of-struct column, built from flat columns (polars builds nested
    values from Python objects slowly)."""
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
    def __init__(self, file: str) -> None:
        self.file = file
        self.rows: list[tuple[int, int, str, str, str | None]] = []

    def add(
        self, line: int, offset: int, kind: str, message: str, event_id: str | None = None
    ) -> None:
        self.rows.append((line, offset, kind, message, event_id))

    def frame(self, session_id: str) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "session_id": [session_id] * len(self.rows),
                "file": [self.file] * len(self.rows),
                "line": [r[0] for r in self.rows],
                "offset": [r[1] for r in self.rows],
                "kind": [r[2] for r in self.rows],
                "message": [r[3] for r in self.rows],
                "event_id": [r[4] for r in self.rows],
            },
            schema=DIAGNOSTICS_SCHEMA,
        )


def _loads(raw: bytes) -> tuple[Any, bool]:
    """Parse one JSON text; the flag says invalid UTF-8 had to be replaced first."""
    try:
        return orjson.loads(raw), False
    except orjson.JSONDecodeError:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return orjson.loads(raw.decode("utf-8", "replace")), True
        raise


def _try_loads(raw: bytes) -> tuple[Any, bool] | None:
    try:
        return _loads(raw)
    except orjson.JSONDecodeError:
        return None


class _FileReader:
    """Turns the physical lines of one file into events and diagnostics."""

    def __init__(self, file: str, resume: Resume | None = None) -> None:
        self.columns = _Rows()
        self.diagnostics = _Diagnostics(file)
        self.seen_ids: set[str] = set(resume.seen_ids) if resume else set()
        self.last_id: str | None = resume.last_id if resume else None
        self.session_id: str | None = resume.session_id if resume else None
        self.end = resume.offset if resume else 0
        self.next_line = resume.line if resume else 1

    def run(self, lines: Iterator[_Physical]) -> None:
        held: _Physical | None = None
        for physical in lines:
            if physical.terminated:
                self.end = physical.offset + len(physical.raw) + 1
                self.next_line = physical.number + 1
            if held is not None:
                physical_or_none = self._continue_split(held, physical, lines)
                held = None
                if physical_or_none is None:
                    continue
                physical = physical_or_none
            held = self._line(physical)
        if held is not None:
            self._unparsable(held, last=True)

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
            self._event(parsed[0], physical, len(physical.raw), replaced=parsed[1])
            return None
        physical.raw = raw
        if not physical.terminated:
            self._unparsable(physical, last=True)
            return None
        return physical

    def _envelope_only(self, raw: bytes, physical: _Physical) -> bool:
        """Keep an event whose payload no command reads without decoding that payload.

        Only a line :func:`copilot_logs.envelope.envelope` vouches for, whose parentId is the
        id of the event before it and whose id is new; any other line is decoded.
        """
        shape = envelope(raw)
        if shape is None or shape.type in PAYLOAD_TYPES:
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
                self._event(parsed[0], held, span, replaced=parsed[1])
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
            self._event(parsed[0], physical, len(physical.raw), replaced=parsed[1])
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
                    replaced=parsed[1],
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
        else:
            self.diagnostics.add(
                physical.number,
                physical.offset,
                "invalid-json",
                f"not valid JSON ({len(raw)} bytes); the line was skipped",
            )

    def _event(self, obj: Any, physical: _Physical, length: int, *, replaced: bool) -> None:
        number, offset = physical.number, physical.offset
        if replaced:
            self.diagnostics.add(
                number, offset, "invalid-utf8", "invalid UTF-8 bytes, replaced by U+FFFD"
            )
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            shape = type(obj).__name__ if not isinstance(obj, dict) else "object without type"
            self.diagnostics.add(
                number, offset, "not-an-event", f"valid JSON but not an event ({shape}); skipped"
            )
            return
        event_id = _text(obj.get("id"))
        missing = [key for key in ("id", "timestamp", "data") if key not in obj]
        if missing:
            self.diagnostics.add(
                number,
                offset,
                "incomplete-envelope",
                f"{obj['type']} event lacks {', '.join(missing)}; kept",
                event_id,
            )
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
        if self.session_id is None and obj["type"] == "session.start":
            data = obj.get("data")
            if isinstance(data, dict):
                self.session_id = _text(data.get("sessionId"))
        self.columns.add(obj, number, offset, length)


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


def read_stream(
    stream: BinaryIO, source: Source, *, resume: Resume | None = None
) -> tuple[ReadResult, ReadState]:
    """Read one session log from an open binary stream (positioned at ``resume.offset`` when
    continuing an earlier read)."""
    reader = _FileReader(source.name, resume)
    start, first_line = (resume.offset, resume.line) if resume else (0, 1)
    reader.run(_physical_lines(stream, offset=start, first_line=first_line))
    if resume is None and not reader.columns.rows and not reader.diagnostics.rows:
        # Only a 0-byte file gets here (any byte yields an event or a diagnostic): without a
        # row it would vanish from every frame, and the caller could not say it was read.
        reader.diagnostics.add(0, 0, "empty-file", "the file is empty: it holds no event")
    session_id = reader.session_id or source.session_hint
    result = ReadResult(
        reader.columns.frame(session_id, source.name), reader.diagnostics.frame(session_id)
    )
    return result, ReadState(reader.end, reader.next_line, reader.last_id, reader.session_id)


def read_source(source: Source) -> ReadResult:
    """Read one session log; an unreadable file becomes a diagnostic, never an exception."""
    return read_with_state(source)[0]


def read_with_state(
    source: Source, resume: Resume | None = None
) -> tuple[ReadResult, ReadState | None]:
    """:func:`read_source`, also telling how far the read got (None for stdin or an
    unreadable file)."""
    if source.path is None:
        import sys

        return read_stream(sys.stdin.buffer, source)[0], None
    try:
        with source.path.open("rb") as stream:
            if resume is not None:
                stream.seek(resume.offset)
            return read_stream(stream, source, resume=resume)
    except OSError as exc:
        diagnostics = _Diagnostics(source.name)
        diagnostics.add(0, 0, "unreadable", f"cannot read the file: {exc.strerror or exc}")
        return ReadResult(
            pl.DataFrame(schema=EVENTS_SCHEMA), diagnostics.frame(source.session_hint)
        ), None


def read_bytes(data: bytes, name: str = "<bytes>", session_hint: str = "") -> ReadResult:
    """Read a session log held in memory (tests, and callers who already have the bytes)."""
    return read_stream(io.BytesIO(data), Source(Path(name), session_hint or name))[0]
