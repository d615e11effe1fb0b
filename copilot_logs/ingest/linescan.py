"""The scan of ``count --total``: each line of a file decoded for the few fields a count needs,
and vouched for when the full reader would read the same event from it.

The file is read a block at a time into one reused buffer, and each line is decoded by msgspec
into the fields a count needs (type, id, agentId, and the data's parentToolCallId, messageId
and chunkIndex),
skipping the rest of the payload at C speed. A line is vouched for, and fed to the one
:class:`copilot_logs.ingest.calls.CallCounter`, when all of these hold:

- msgspec decodes it whole, as ONE JSON object (text after the object is an error), with a
  string ``type`` and ``id``, an object ``data``, and ``agentId`` a string or absent: so the
  line is one event, and the full reader (which parses each line with orjson) reads the same
  event from it. JSON's escapes, key order (agentId before ``id`` or after ``parentId``),
  nested objects with a ``type`` key and quoted event types inside strings are all read as
  JSON, never matched as text, so none can be miscounted;
- its last byte is ``}`` (so no CR, NUL padding, blank line or other bytes after the event:
  the reader would report them);
- its id was not seen before in the file (the reader drops a replayed line);
- for an ``assistant.turn_start`` or ``assistant.message``, parentToolCallId and messageId are
  strings or absent and chunkIndex an integer a 64-bit column holds or absent (other values
  are read differently by orjson);
- its bytes are valid UTF-8 (checked a block at a time: the reader replaces and reports
  invalid bytes).

msgspec refuses what the reader cannot read as it is either: invalid JSON, a raw control
character or newline inside a string (an event split over lines), a line of two events glued
together, a lone surrogate escape, nesting deeper than the interpreter's recursion limit. A
number beyond 64 bits in a payload the reader does not keep as a column is not checked: it
changes no count, and ``validate`` reports it.

A line that starts with ``{`` and decodes as one object also ends whatever the reader was
holding (an event split over lines is never rejoined across it): so the reader can be handed
the damaged lines up to such a line alone, and the scan go on after it (see
:func:`window_end`).
"""

from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import msgspec

from copilot_logs.ingest.calls import CALL_TYPES, CallCounter
from copilot_logs.ingest.decode.cli_format import writer
from copilot_logs.ingest.decode.json_limits import out_of_range
from copilot_logs.ingest.logfile import display_name


class _CallData(msgspec.Struct):
    parentToolCallId: str | None = None  # any other value: not vouched (the reader reads it)
    messageId: object = None
    chunkIndex: object = None


class _Event(msgspec.Struct):
    """What a count reads of a line; every other key is skipped (but checked as JSON)."""

    type: str
    id: str
    data: _CallData
    agentId: str | None = None


_DECODE = msgspec.json.Decoder(_Event).decode
_NOT_VOUCHED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
_OPEN_BRACE, _CLOSE_BRACE = ord("{"), ord("}")
SCAN_BLOCK = 8 << 20
"""Bytes read at a time (a longer line grows the buffer)."""


@dataclass
class Scanned:
    """How far a scan vouched for the lines: to the end of the file (``whole``), or to the
    line it stopped at, with what the full reader needs to go on from there."""

    offset: int
    line: int
    last_id: str | None
    seen: set[str]
    whole: bool


def scan_file(
    path: Path,
    counter: CallCounter,
    *,
    start: int = 0,
    line: int = 1,
    last_id: str | None = None,
    seen: set[str] | None = None,
    limit: int | None = None,
) -> Scanned | None:
    """Feed the LLM calls of a file's lines to ``counter`` until a line needs the full reader
    (None when the file cannot be opened: the reader says why). ``start``, ``line`` and
    ``last_id`` go on where an earlier scan ended (``seen``: the ids read before). Nothing
    past byte ``limit`` is read (default: the file's size now), so a log appended to faster
    than it is read cannot keep the scan going."""
    descriptor = _open_regular(path)
    if descriptor is None:
        return None
    try:
        size = os.fstat(descriptor).st_size
        os.lseek(descriptor, start, os.SEEK_SET)
        scanned = Scanned(start, line, last_id, seen if seen is not None else set(), whole=False)
        left = (size if limit is None else min(limit, size)) - start
        _scan_descriptor(descriptor, counter, scanned, left)
        return scanned
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _open_regular(path: Path) -> int | None:
    """A descriptor of the file, or None when the reader would refuse it (and say why): a name
    that is not UTF-8, a named pipe (opened without blocking), a device, a folder."""
    name = os.fspath(path)
    if not name.isascii() and display_name(path) != name:
        return None
    try:
        descriptor = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            return descriptor
    except OSError:
        pass
    os.close(descriptor)
    return None


def _scan_descriptor(descriptor: int, counter: CallCounter, scanned: Scanned, left: int) -> None:
    """Read ``left`` bytes of the file into the reused buffer a block at a time and scan its
    whole lines; the bytes of a line cut by the block's end are moved to the front and read
    on."""
    buffer = _BUFFER
    if not buffer:
        buffer.extend(bytes(SCAN_BLOCK))
    held = 0
    while True:
        if held == len(buffer):  # one line longer than the buffer
            if buffer[0] != _OPEN_BRACE:
                return  # never vouched for (a crash's NUL padding): the reader counts it
            buffer.extend(bytes(len(buffer)))
        with memoryview(buffer) as whole:
            got = os.readv(descriptor, [whole[held : held + left]]) if left > 0 else 0
        left -= got
        if got == 0:
            break
        end = held + got
        stop = buffer.rfind(b"\n", 0, end) + 1
        valid = _valid_utf8_until(buffer, stop)
        if not _scan_lines(buffer, valid, counter, scanned) or valid != stop:
            return
        buffer[: end - stop] = buffer[stop:end]
        held = end - stop
    scanned.whole = held == 0 and scanned.offset > 0


def _valid_utf8_until(buffer: bytearray, stop: int) -> int:
    """``stop``, or the start of the first line before it holding bytes that are not UTF-8
    (the reader reports and replaces them: it reads that line)."""
    with memoryview(buffer) as whole, whole[:stop] as lines:
        try:
            codecs.utf_8_decode(lines, "strict", True)
        except UnicodeDecodeError as error:
            return buffer.rfind(b"\n", 0, error.start) + 1
    return stop


_BUFFER = bytearray()
"""One read buffer per process (allocated on first use): a fresh one per file would cost its
page faults again."""


def _scan_lines(view: bytearray, stop: int, counter: CallCounter, scanned: Scanned) -> bool:
    """Vouch for the lines of ``view`` before ``stop`` (see the module's docstring), counting
    as it goes; False at the first line that is not vouched for (``scanned`` then points at
    it). ``scanned.offset`` is where ``view`` starts in the file."""
    find, seen, add = view.find, scanned.seen, counter.add
    position, number, last_id = 0, scanned.line, scanned.last_id
    vouched = True
    with memoryview(view) as whole:
        while (newline := find(b"\n", position, stop)) != -1:
            if view[newline - 1] != _CLOSE_BRACE:  # (a blank line fails here or in msgspec)
                vouched = False
                break
            try:
                event = _DECODE(whole[position:newline])
            except _NOT_VOUCHED:
                vouched = False
                break
            event_id, kind = event.id, event.type
            if event_id in seen:
                vouched = False
                break
            if kind in CALL_TYPES:
                data = event.data
                if not _plain(data):
                    vouched = False
                    break
                mark = writer(event.agentId, data.parentToolCallId)
                add(kind, mark, data.messageId, data.chunkIndex)
            seen.add(event_id)
            last_id = event_id
            position = newline + 1
            number += 1
    scanned.offset += position
    scanned.line, scanned.last_id = number, last_id
    return vouched


def _plain(data: _CallData) -> bool:
    """messageId and chunkIndex of types that msgspec and orjson decode alike."""
    message_id, chunk_index = data.messageId, data.chunkIndex
    if message_id is not None and message_id.__class__ is not str:
        return False
    return chunk_index is None or (chunk_index.__class__ is int and not out_of_range(chunk_index))


WINDOW_LINES = 64
"""How many lines after a damaged one :func:`window_end` looks at for one the scan vouches for."""


def window_end(path: Path, offset: int, limit: int) -> bytes | None:
    """The lines of the file from ``offset`` (a line the scan did not vouch for) through the
    first line after it that is one whole object starting with ``{`` (see the module's
    docstring), before byte ``limit``; None when none comes within WINDOW_LINES lines or
    SCAN_BLOCK bytes."""
    descriptor = _open_regular(path)
    if descriptor is None:
        return None
    try:
        data = os.pread(descriptor, max(0, min(SCAN_BLOCK, limit - offset)), offset)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    start = data.find(b"\n") + 1
    for _ in range(WINDOW_LINES):
        newline = data.find(b"\n", start)
        if start == 0 or newline == -1:
            return None
        if data[start] == _OPEN_BRACE and data[newline - 1] == _CLOSE_BRACE:
            try:
                _DECODE(data[start:newline])
            except _NOT_VOUCHED:
                pass
            else:
                return data[: newline + 1]
        start = newline + 1
    return None
