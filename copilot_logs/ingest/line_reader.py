"""Physical lines -> events and diagnostics: the line reader, which recovers every event the known
kinds of damage leave behind (no polars here).

Each line is parsed with orjson (mended where it must be:
:mod:`copilot_logs.ingest.decode.json_repair`); a line that does not parse waits for the next, in
case a raw newline split one event over several lines. Every damaged physical line is reported with
its number and byte offset. An event whose payload no command reads is kept from its envelope alone
when the envelope vouches for the whole line (:mod:`copilot_logs.ingest.decode.envelope`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from copilot_logs.ingest.decode import json_limits
from copilot_logs.ingest.decode.envelope import EVENT_START, Envelope, envelope
from copilot_logs.ingest.decode.event_structs import from_json
from copilot_logs.ingest.decode.event_types import DETAIL_TYPES
from copilot_logs.ingest.decode.json_repair import (
    TOO_DEEP_MESSAGE,
    Repair,
    TooDeep,
    dumps,
    stored_numbers,
    too_deep,
    try_loads,
)
from copilot_logs.ingest.decode.payload import NO_PAYLOAD, PAYLOAD_TYPES, as_str, as_text, payload
from copilot_logs.ingest.events_frame import Diagnostics, SessionMark
from copilot_logs.ingest.progress import ReadState

MAX_REJOIN_LINES = 16
"""How many following physical lines an event split by raw newlines may span."""


@dataclass(slots=True)
class Physical:
    number: int
    offset: int
    raw: bytes
    terminated: bool
    nuls: int = 0
    """NUL bytes of the line not held in ``raw``: the runs that began or ended a line longer
    than a block (a crash's padding can be gigabytes; see
    :meth:`copilot_logs.ingest.block_reader.FileReader.lines`)."""

    @property
    def length(self) -> int:
        """Bytes of the line in the file, its newline excluded."""
        return len(self.raw) + self.nuls


class Sink(Protocol):
    """Where the reader puts the events it reads: :class:`copilot_logs.ingest.events_frame.Rows`
    (the frames are built from them) or :class:`copilot_logs.ingest.calls.CallTally` (only the
    calls are counted)."""

    @property
    def count(self) -> int: ...

    def append(self, row: Sequence[Any]) -> None: ...

    def extend(self, columns: Sequence[list[Any]]) -> None: ...


def _ordered(shape: Envelope) -> tuple[str | None, ...]:
    """An envelope in ENVELOPE_FIELDS order (after line, offset, length)."""
    return (shape.event_id, shape.parent_id, shape.type, shape.timestamp, shape.agent_id)


def event_row(obj: dict[str, Any], line: int, offset: int, length: int) -> tuple[Any, ...]:
    """The row of an event the line reader decoded; raises TooDeep when its payload nests too
    deep to be encoded again."""
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
        encoded = dumps(data)  # once, for both the typed fields and `detail`
        extra = encoded.decode() if kind in DETAIL_TYPES else None
        try:
            return envelope + payload(kind, from_json(encoded), extra)
        except RecursionError:
            raise TooDeep(TOO_DEEP_MESSAGE) from None
    return envelope + NO_PAYLOAD


_PAYLOAD_TYPE_BYTES = frozenset(kind.encode() for kind in PAYLOAD_TYPES)


class LineReader:
    """Turns the physical lines of one file into events and diagnostics."""

    def __init__(
        self, rows: Sink, diagnostics: Diagnostics, resume: ReadState | None = None
    ) -> None:
        self.columns = rows
        self.diagnostics = diagnostics
        resume = resume or ReadState()
        self.seen_ids: set[str] = set(resume.seen_ids)
        self.last_id: str | None = resume.last_id
        self.session_id: str | None = resume.session_id
        """The session the rows read now belong to (the last session.start's sessionId)."""
        self.first_session_id = self.session_id
        """The session of the first rows (None: the file's hint; see :meth:`_session`)."""
        self.sessions: list[SessionMark] = []
        self.rows_before = rows.count
        self.diagnostics_before = len(diagnostics.rows)
        self.end = resume.end
        self.next_line = resume.next_line
        self.held: Physical | None = None
        """A line that did not parse, waiting for the next (maybe one event split by raw
        newlines)."""

    def state(self, *, with_ids: bool = False) -> ReadState:
        """How far the read got, with the ids seen when asked (else they are in the rows)."""
        seen = frozenset(self.seen_ids) if with_ids else frozenset()
        return ReadState(self.end, self.next_line, self.last_id, self.session_id, seen)

    def run(self, lines: Iterator[Physical]) -> None:
        for physical in lines:
            if physical.terminated:
                self.end = physical.offset + physical.length + 1
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

    def _clean(self, physical: Physical) -> bytes | None:
        """Strip what damage adds around a line; None when nothing is left."""
        raw = physical.raw
        if raw.endswith(b"\r"):
            raw = raw[:-1]
            self.diagnostics.add(
                physical.number, physical.offset, "crlf", "line ends with CRLF; read as LF"
            )
        nuls = physical.nuls
        if b"\x00" in raw:
            stripped = raw.strip(b"\x00")
            nuls += len(raw) - len(stripped)
            raw = stripped
        padded = nuls > 0
        if padded:
            self.diagnostics.add(
                physical.number,
                physical.offset,
                "nul-bytes",
                f"{nuls} NUL bytes (a crash left padding); ignored",
            )
        if not raw.strip():
            if not padded and (raw or physical.terminated):
                self.diagnostics.add(physical.number, physical.offset, "blank-line", "blank line")
            return None
        return raw

    def _line(self, physical: Physical) -> Physical | None:
        """Handle one physical line; returns it when it must wait for the next one."""
        raw = self._clean(physical)
        if raw is None:
            return None
        if self._envelope_only(raw, physical):
            return None
        parsed = try_loads(raw)
        if parsed is not None:
            self._event(parsed[0], physical, physical.length, repairs=parsed[1])
            return None
        physical.raw = raw
        if not physical.terminated:
            self._unparsable(physical, last=True)
            return None
        return physical

    def _envelope_only(self, raw: bytes, physical: Physical) -> bool:
        """Keep an event whose payload no command reads without decoding that payload.

        Only a line :func:`copilot_logs.ingest.decode.envelope.envelope` vouches for, whose
        parentId is the id of the event before it and whose id is new; any other line is
        decoded.
        """
        type_end = raw.find(b'"', 9)
        if raw[9:type_end] in _PAYLOAD_TYPE_BYTES:
            return False  # decoded anyway: checking its envelope first would be wasted work
        shape = envelope(raw)
        if shape is None or shape.type in PAYLOAD_TYPES:
            return False
        if shape.parent_id != self.last_id or shape.event_id in self.seen_ids:
            return False
        self.seen_ids.add(shape.event_id)
        self.last_id = shape.event_id
        where = (physical.number, physical.offset, physical.length)
        self.columns.append((*where, *_ordered(shape), *NO_PAYLOAD))
        return True

    def _continue_split(
        self, held: Physical, nxt: Physical, lines: Iterator[Physical]
    ) -> Physical | None:
        """``held`` did not parse. Rejoin it with the lines after it when a raw newline split
        one event; else recover what it holds and hand ``nxt`` back to be read on its own."""
        pieces = [held.raw]
        followers = [nxt]
        nuls = False  # a line whose NUL runs were counted, not held, would make JSON invalid
        while True:
            nuls = nuls or followers[-1].nuls > 0
            candidate = b"\\n".join([*pieces, followers[-1].raw.rstrip(b"\r")])
            parsed = None if nuls else try_loads(candidate)
            if parsed is not None:
                span = followers[-1].offset + followers[-1].length - held.offset
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

    def _alone(self, physical: Physical) -> None:
        """Read a line by itself, with no rejoining."""
        raw = self._clean(physical)
        if raw is None:
            return
        parsed = try_loads(raw)
        if parsed is not None:
            self._event(parsed[0], physical, physical.length, repairs=parsed[1])
            return
        physical.raw = raw
        self._unparsable(physical, last=not physical.terminated)

    def _unparsable(self, physical: Physical, *, last: bool) -> None:
        raw = physical.raw
        # A truncated event with a complete one glued on behind it: keep the complete one.
        start = raw.find(EVENT_START, 1)
        while start != -1:
            parsed = try_loads(raw[start:])
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
                    Physical(physical.number, physical.offset + start, raw[start:], True),
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
        elif too_deep(raw):
            self.diagnostics.add(physical.number, physical.offset, "too-deep", TOO_DEEP_MESSAGE)
        else:
            self.diagnostics.add(
                physical.number,
                physical.offset,
                "invalid-json",
                f"not valid JSON ({len(raw)} bytes); the line was skipped",
            )

    def _event(
        self, obj: Any, physical: Physical, length: int, *, repairs: tuple[Repair, ...]
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
        numbers = stored_numbers(obj["type"], obj.get("data"))
        if numbers:
            self.diagnostics.add(
                number, offset, "out-of-range-number", json_limits.message(numbers), event_id
            )
        try:
            row = event_row(obj, number, offset, length)
        except TooDeep as exc:
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
            named = as_text(data.get("sessionId")) if isinstance(data, dict) else None
            self._session(named, self.columns.count, number)
        self.columns.append(row)

    def _session(self, session_id: str | None, row: int, line: int) -> None:
        """A session.start with ``session_id`` is about to be added as row ``row`` of the
        batch (line ``line``). One with another id than the session under way starts a new
        session (two logs in one file, or ``cat a b``), so that nothing of two sessions is
        merged; one without an id after a session under way is another session too, named
        after its line (``no-id-line-N``), so that its events never join the one before.
        Events before a file's first session.start keep the file's hint (they belong to no
        session the log names); when it is the first event, it names the span, and damage
        reported before it joins its session."""
        if not session_id:
            if self.session_id is None:
                return
            session_id = f"no-id-line-{line}"
        if session_id == self.session_id:
            return
        if self.session_id is None and row == self.rows_before:
            self.session_id = self.first_session_id = session_id
            return
        self.diagnostics.settle()  # the damage summed up so far is the last session's
        self.sessions.append(
            SessionMark(
                row - self.rows_before,
                len(self.diagnostics.rows) - self.diagnostics_before,
                session_id,
            )
        )
        self.session_id = session_id
