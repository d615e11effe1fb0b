"""Bytes on disk -> an events frame and a diagnostics frame: the reader (no polars but where the
frames are built).

A file is read a block of whole lines at a time, split on ``b"\\n"`` only: runs of clean lines
(:func:`decode_run`) are decoded whole by msgspec, every other line recovered and reported by the
line reader (docs/damaged-logs.md); both ways give the same rows. ``count --total`` reads the
same way (:func:`count_calls`), keeping no rows.
"""

from __future__ import annotations

import codecs
import io
import os
import sys
from collections.abc import Generator, Iterable, Iterator, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import orjson

from copilot_logs.ingest import repair
from copilot_logs.ingest.calls import CALL_TYPES, CallCounter, CallTally, Count, DamageRow
from copilot_logs.ingest.decode import (
    DETAIL_TYPES,
    EVENT_LINES,
    EVENT_START,
    FULL_EVENT,
    NO_PAYLOAD,
    PAYLOAD_TYPES,
    RARE_TYPES,
    Common,
    Data,
    as_str,
    as_text,
    detail,
    envelope,
    from_json,
    payload,
    payload_columns,
)
from copilot_logs.ingest.events_frame import FLUSH_ROWS, Diagnostics, Rows, SessionMark, Span
from copilot_logs.ingest.logfile import Capped, Readable, Source, open_log, why_unreadable
from copilot_logs.ingest.repair import TOO_DEEP_MESSAGE, Repair, TooDeep

if TYPE_CHECKING:
    import polars as pl

CLEAN_BLOCK = 2 << 20
"""Bytes read at a time (memory stays bounded by a few blocks whatever the file's size)."""
FALLBACK_LINES = 16
"""Lines tried at a time in a block that is not clean as a whole; each line of a run that is not
clean is then tried alone, so that only the damaged lines go through the line reader."""
MAX_REJOIN_LINES = 16
"""How many following physical lines an event split by raw newlines may span."""
STDIN_CLOSED = "standard input is closed: pipe a log into it, or name the files to read"
EMPTY_FILE = ("empty-file", "the file is empty: it holds no event")
NO_EVENT = ("no-event", "no event could be read from the file: is it a Copilot CLI session log?")
BOM = ("bom", "a UTF-8 byte order mark starts the file (the CLI writes none); ignored")
START = "session.start"


class ReadState(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """How far a read of a log got: a read that goes on from here (the log grew) reads what a
    whole read would read after it. Nested in the store's entries."""

    end: Count = 0
    """Bytes read: up to and including the last newline."""
    next_line: Count = 1
    last_id: str | None = None
    session_id: str | None = None
    """The session the last rows belong to: appended rows continue it."""
    seen_ids: frozenset[str] = frozenset()
    """The event ids read so far (a replayed line is read once), where a read going on needs
    them: a count returns them, a read into frames none (its rows hold them)."""


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


class Sink(Protocol):
    """Where the reader puts the events it reads: :class:`Rows` (for frames) or
    :class:`CallTally` (only the calls are counted)."""

    @property
    def count(self) -> int: ...

    def append(self, row: Sequence[Any]) -> None: ...

    def extend(self, columns: Sequence[list[Any]]) -> None: ...


@dataclass(slots=True)
class Physical:
    number: int
    offset: int
    raw: bytes
    terminated: bool
    nuls: int = 0
    """NUL bytes of the line not held in ``raw``: the runs that began or ended a line longer
    than a block (a crash's padding can be gigabytes; see :class:`_LongLine`)."""

    @property
    def length(self) -> int:
        """Bytes of the line in the file, its newline excluded."""
        return len(self.raw) + self.nuls


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
        encoded = repair.dumps(data)  # once, for both the typed fields and `detail`
        extra = encoded.decode() if kind in DETAIL_TYPES else None
        try:
            return envelope + payload(kind, from_json(encoded), extra)
        except RecursionError:
            raise TooDeep(TOO_DEEP_MESSAGE) from None
    return envelope + NO_PAYLOAD


_PAYLOAD_TYPE_BYTES = frozenset(kind.encode() for kind in PAYLOAD_TYPES)


class FileReader:
    """The physical lines of one file -> events and diagnostics: whole runs of clean lines
    decoded at once, every other line recovered and reported by the line reader."""

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
        """A line that did not parse, waiting for the next (one event split by raw newlines?)."""

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

    def lines(self, stream: Readable) -> Iterator[Physical]:
        """The physical lines of the stream for :meth:`run`, read in blocks of whole lines: the
        clean runs of a block are added in one go and yield nothing; the lines of any other run,
        and every line while one is held, are yielded one by one."""
        long = _LongLine(b"")
        offset, number = self.end, self.next_line
        at_start = self.end == 0
        while more := stream.read(CLEAN_BLOCK):
            begin = 0  # where the block's own lines start
            if at_start:
                at_start = False
                if more.startswith(codecs.BOM_UTF8):
                    begin = self.end = len(codecs.BOM_UTF8)
                    self.diagnostics.add(1, 0, *BOM)
                offset += begin
            if long.length:
                newline = more.find(b"\n")
                if newline == -1:
                    long.add(more)
                    continue
                if long.nuls:  # its NULs are not held: the line goes alone to the reader
                    line = long.physical(number, offset, more[:newline], terminated=True)
                    yield line
                    length = line.length + 1
                else:  # the line the last block cut, whole (never the block copied after it)
                    head = long.take() + more[: newline + 1]
                    yield from self._block(head, len(head), offset, number)
                    length = len(head)
                offset, number, begin = offset + length, number + 1, newline + 1
                long = _LongLine(b"")
            cut = more.rfind(b"\n") + 1
            if cut <= begin:
                long.add(more[begin:])
                continue
            long.add(more[cut:])
            if isinstance(self.columns, Rows) and self.columns.held >= FLUSH_ROWS:
                self.columns.flush()
            lines = yield from self._block(more, cut, offset - begin, number, begin)
            offset, number = offset + cut - begin, number + lines
        if long.length:
            yield long.physical(number, offset, b"", terminated=False)

    def _block(
        self, block: bytes, cut: int, offset: int, number: int, begin: int = 0
    ) -> Generator[Physical, None, int]:
        """The lines of ``block`` from ``begin`` to ``cut`` that are not in a clean run;
        returns how many lines there are. ``offset`` is where ``block[0]`` is in the file."""
        ends = line_ends(block, cut, begin)
        view = memoryview(block)
        valid = block.isascii() or valid_utf8(view[begin:cut])
        if valid and self._clean_run(block, ends, (offset, number, begin)):
            return len(ends)
        many = len(ends) > FALLBACK_LINES
        for first in range(0, len(ends), FALLBACK_LINES):
            run = ends[first : first + FALLBACK_LINES]
            start = ends[first - 1] + 1 if first else begin
            clean = many and (valid or valid_utf8(view[start : run[-1]]))
            if clean and self._clean_run(block, run, (offset, number + first, start)):
                continue
            for line, end in enumerate(run, start=number + first):
                if not (
                    (valid or valid_utf8(view[start:end]))
                    and self._clean_run(block, [end], (offset, line, start))
                ):
                    yield Physical(line, offset + start, block[start:end], True)
                start = end + 1
        return len(ends)

    def _clean_run(self, block: bytes, ends: list[int], where: tuple[int, int, int]) -> bool:
        """Add the lines of ``block`` that end at ``ends`` in one go if they are clean (see
        :func:`decode_run`); adds nothing and returns False otherwise."""
        if self.held is not None:
            return False
        counting = isinstance(self.columns, CallTally)
        run = decode_run(block, ends, where, self.seen_ids, counting=counting)
        if run is None:
            return False
        columns, ids, sessions = run
        rows = self.columns.count
        for row, session_id in sessions:
            self._session(session_id, rows + row, where[1] + row)
        self.columns.extend(columns)
        self.seen_ids.update(ids)
        self.last_id = ids[-1]
        offset, number, _ = where
        self.end, self.next_line = offset + ends[-1] + 1, number + len(ends)
        return True

    def _note(self, physical: Physical, kind: str, message: str) -> None:
        self.diagnostics.add(physical.number, physical.offset, kind, message)

    def _clean(self, physical: Physical) -> bytes | None:
        """Strip what damage adds around a line; None when nothing is left."""
        raw = physical.raw
        if raw.endswith(b"\r"):
            raw = raw[:-1]
            self._note(physical, "crlf", "line ends with CRLF; read as LF")
        nuls = physical.nuls
        if b"\x00" in raw:
            stripped = raw.strip(b"\x00")
            nuls += len(raw) - len(stripped)
            raw = stripped
        padded = nuls > 0
        if padded:
            self._note(
                physical,
                "nul-bytes",
                f"{nuls} NUL bytes (a crash left padding); ignored",
            )
        if not raw.strip():
            if not padded and (raw or physical.terminated):
                self._note(physical, "blank-line", "blank line")
            return None
        return raw

    def _line(self, physical: Physical) -> Physical | None:
        """Handle one physical line; returns it when it must wait for the next one."""
        raw = self._clean(physical)
        if raw is None:
            return None
        if self._envelope_only(raw, physical):
            return None
        parsed = repair.try_loads(raw)
        if parsed is not None:
            self._event(parsed[0], physical, physical.length, repairs=parsed[1])
            return None
        physical.raw = raw
        if not physical.terminated:
            self._unparsable(physical, last=True)
            return None
        return physical

    def _envelope_only(self, raw: bytes, physical: Physical) -> bool:
        """Keep an event whose payload no command reads without decoding that payload: only a
        line :func:`copilot_logs.ingest.decode.envelope` vouches for, whose parentId is the id
        of the event before it and whose id is new."""
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
        self.columns.append(
            (
                physical.number,
                physical.offset,
                physical.length,
                shape.event_id,
                shape.parent_id,
                shape.type,
                shape.timestamp,
                shape.agent_id,
                *NO_PAYLOAD,
            )
        )
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
            parsed = None if nuls else repair.try_loads(candidate)
            if parsed is not None:
                span = followers[-1].offset + followers[-1].length - held.offset
                self._note(
                    held,
                    "split-event",
                    f"one event split over lines {held.number}-{followers[-1].number} by raw "
                    "newlines inside a string; rejoined",
                )
                for follower in followers:
                    self._note(
                        follower,
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
        # candidate continuation is read again by itself (no rejoining) so nothing is lost.
        self._unparsable(held, last=False)
        for follower in followers[:-1]:
            raw = self._clean(follower)
            if raw is None:
                continue
            parsed = repair.try_loads(raw)
            if parsed is not None:
                self._event(parsed[0], follower, follower.length, repairs=parsed[1])
                continue
            follower.raw = raw
            self._unparsable(follower, last=not follower.terminated)
        return followers[-1]

    def _unparsable(self, physical: Physical, *, last: bool) -> None:
        raw = physical.raw
        # A truncated event with a complete one glued on behind it: keep the complete one.
        start = raw.find(EVENT_START, 1)
        while start != -1:
            parsed = repair.try_loads(raw[start:])
            if parsed is not None and isinstance(parsed[0], dict):
                self._note(
                    physical,
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
            self._note(
                physical,
                "cut-line",
                f"the last line is cut off mid-event ({len(raw)} bytes, no newline): the session "
                "was still being written or crashed",
            )
        elif repair.too_deep(raw):
            self._note(physical, "too-deep", TOO_DEEP_MESSAGE)
        else:
            self._note(
                physical,
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
        numbers = repair.stored_numbers(obj["type"], obj.get("data"))
        if numbers:
            self.diagnostics.add(
                number, offset, "out-of-range-number", repair.message(numbers), event_id
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
        if obj["type"] == START:
            data = obj.get("data")
            named = as_text(data.get("sessionId")) if isinstance(data, dict) else None
            self._session(named, self.columns.count, number)
        self.columns.append(row)

    def _session(self, session_id: str | None, row: int, line: int) -> None:
        """A session.start with ``session_id`` is about to be added as row ``row`` of the
        batch (line ``line``). Another id than the session under way's starts a new session
        (two logs in one file, or ``cat a b``), and so does one without an id after a session
        (named ``no-id-line-N``): nothing of two sessions is merged. Events before a file's
        first session.start keep the file's hint; when it is the first event, it names the
        span, and damage reported before it joins its session."""
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


_ZEROS = bytes(CLEAN_BLOCK)


class _LongLine:
    """The start of a line that the blocks read so far have not ended, gathered in linear
    time. The NUL bytes that begin it, and a run of them that ends what has come so far, are
    counted instead of held: a crash can pad a log with gigabytes of them."""

    def __init__(self, start: bytes) -> None:
        self.parts: list[bytes] = []
        self.held = 0
        self.lead = 0
        self.trail = 0
        self.add(start)

    @property
    def nuls(self) -> int:
        return self.lead + self.trail

    @property
    def length(self) -> int:
        return self.lead + self.held + self.trail

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        if len(chunk) <= len(_ZEROS) and chunk == _ZEROS[: len(chunk)]:  # (a memcmp: fast)
            if self.parts:
                self.trail += len(chunk)
            else:
                self.lead += len(chunk)
            return
        if not self.parts:
            body = chunk.lstrip(b"\x00")
            self.lead += len(chunk) - len(body)
            chunk = body
            if not chunk:
                return
        body = chunk.rstrip(b"\x00")
        if body and self.trail:  # NULs inside the line: they are held after all
            self.parts.append(bytes(self.trail))
            self.held += self.trail
            self.trail = 0
        if body:
            self.parts.append(body)
            self.held += len(body)
        self.trail += len(chunk) - len(body)

    def take(self) -> bytes:
        """The line so far, all its bytes (when none were counted instead of held)."""
        return b"".join(self.parts)

    def physical(self, number: int, offset: int, end: bytes, *, terminated: bool) -> Physical:
        """The whole line, ending with ``end`` (the bytes of the block that ends it)."""
        self.add(end)
        return Physical(number, offset, self.take(), terminated, self.nuls)


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


CleanRun = tuple[list[list[Any]], list[str], list[tuple[int, str | None]]]
"""The rows of a run of clean lines (in ROW_FIELDS order; for a count, the types of the events
and the COUNT_FIELDS of those that may be calls), their ids, and (row, sessionId) of each
session.start."""
_READ_AGAIN = DETAIL_TYPES | RARE_TYPES
"""The types whose lines are read again, alone: for ``detail``, or the fields only :class:`Data`
holds (few lines are)."""


def decode_run(
    block: bytes,
    ends: list[int],
    where: tuple[int, int, int],
    seen_ids: Set[str],
    *,
    counting: bool = False,
) -> CleanRun | None:
    """The rows of the lines of ``block`` that end at ``ends`` (newline positions), or None
    when one of them is not clean: not an event of the usual shape alone on its line
    (:class:`copilot_logs.ingest.decode.Event`), an id seen before, or a number beyond what a
    column holds. ``where`` is the offset in the file of ``block[0]``, the first line's number
    and its start in ``block``. ``counting``: only the columns a count reads."""
    offset, number, start = where
    view = memoryview(block)
    try:
        events = EVENT_LINES.decode_lines(view[start : ends[-1] + 1])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    # Each line starts with { and ends with }: inside a JSON value } is never followed by {, so
    # as many events as lines means one a line (a blank line, two events on one, a CR: none).
    last = ends[-1]
    if (
        len(events) != len(ends)
        or block[start] != 123
        or not all(block[end - 1] == 125 and (end == last or block[end + 1] == 123) for end in ends)
    ):
        return None
    ids = [event.id for event in events]
    if len(set(ids)) != len(ids) or not seen_ids.isdisjoint(ids):
        return None
    kinds = [event.type for event in events]
    details: list[str | None] = [None] * len(kinds)
    rare: dict[int, Data] = {}
    for row in [row for row, kind in enumerate(kinds) if kind in _READ_AGAIN]:
        kind = kinds[row]
        line = view[ends[row - 1] + 1 if row else start : ends[row]]
        try:
            if kind in RARE_TYPES:
                rare[row] = FULL_EVENT.decode(line).data
            if kind in DETAIL_TYPES:
                text = detail(line)
                if repair.may_hold_big_numbers(text) and repair.clear_out_of_range(
                    orjson.loads(text), "data"
                ):
                    return None  # the line reader reports it
                details[row] = text
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None  # a value its fields refuse: the line reader reads it, and reports it
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            return None  # deep nesting: the line reader reports it
    sessions = [(row, data.sessionId) for row, data in rare.items() if kinds[row] == START]
    if counting:
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
        return [kinds, calls], ids, sessions
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
    return [*envelope, *payload_columns(kinds, datas, details)], ids, sessions


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
        # Only a 0-byte file has no diagnostic either (any byte yields an event or one): without
        # a row it would vanish from every frame, and the caller could not say it was read.
        empty = len(diagnostics.rows) == diagnostics_before
        diagnostics.add(0, 0, *(EMPTY_FILE if empty else NO_EVENT))
    span = Span(
        source.name,
        reader.first_session_id or source.session_hint,
        rows.count - events_before,
        len(diagnostics.rows) - diagnostics_before,
        reader.sessions,
    )
    return span, reader.state(with_ids=isinstance(rows, CallTally))


def _read_source_into(
    source: Source, resume: ReadState | None, rows: Sink, diagnostics: Diagnostics
) -> tuple[Span, ReadState | None]:
    """Read a file (or stdin) up to its size when opened; an unreadable file becomes a
    diagnostic, never an exception."""
    if source.path is None:
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


def _batch(
    rows: Rows, diagnostics: Diagnostics, done: list[tuple[Span, ReadState | None]]
) -> tuple[ReadResult, list[ReadState | None]]:
    """The frames of a batch, built once (building them per file costs more than reading a
    small file), and how far each read got."""
    spans = [span for span, _ in done]
    frames = ReadResult(rows.frame(spans), diagnostics.frame(spans))
    return frames, [state for _, state in done]


def read_many(
    jobs: Sequence[tuple[Source, ReadState | None]],
) -> tuple[ReadResult, list[ReadState | None]]:
    """Read several sources (each maybe resumed where an earlier read stopped) into one
    ReadResult, and say how far each read got (None for stdin or an unreadable file)."""
    rows, diagnostics = Rows(), Diagnostics()
    done = [_read_source_into(source, resume, rows, diagnostics) for source, resume in jobs]
    return _batch(rows, diagnostics, done)


def read_many_bytes(
    jobs: Sequence[tuple[Source, bytes, ReadState | None]],
) -> tuple[ReadResult, list[ReadState | None]]:
    """:func:`read_many` of logs held in memory (each maybe the bytes that follow where an
    earlier read stopped): what Spark's executors are handed, and what ``watch`` reads."""
    rows, diagnostics = Rows(), Diagnostics()
    done: list[tuple[Span, ReadState | None]] = [
        _read(io.BytesIO(data), source, rows, diagnostics, resume) for source, data, resume in jobs
    ]
    return _batch(rows, diagnostics, done)


def read_source(source: Source) -> ReadResult:
    """Read one session log; an unreadable file becomes a diagnostic, never an exception."""
    return read_many([(source, None)])[0]


def read_bytes(data: bytes, name: str = "<bytes>", session_hint: str = "") -> ReadResult:
    """Read a session log held in memory (tests, and callers who already have the bytes)."""
    return read_many_bytes([(Source(Path(name), session_hint or name), data, None)])[0]


def count_calls(
    source: Source, counter: CallCounter, resume: ReadState | None = None
) -> tuple[int, ReadState | None, tuple[DamageRow, ...]]:
    """Feed the LLM calls of a file (or stdin) to ``counter``, read as every command reads it
    but without frames (so without polars). ``resume`` goes on where an earlier read stopped
    (``counter`` then holds what that read counted). Returns how many events were read, how
    far (with the ids seen), and the damage."""
    tally, diagnostics = CallTally(counter), Diagnostics()
    _, state = _read_source_into(source, resume, tally, diagnostics)
    return tally.count, state, diagnostics.damage()
