"""What can be known of a log line without decoding its payload (no polars, no JSON parse).

The CLI writes every event as one compact JSON object whose envelope has a fixed shape:
``{"type":"T","data":{...}[,"agentId":"A"],"id":"I","timestamp":"S","parentId":P}``. Quotes
inside JSON strings are escaped, so the head and tail patterns below can only match the real
envelope of a whole line. A line is vouched for without decoding when its head and tail have
that exact shape, its bytes are valid UTF-8 without a raw control character (JSON allows none
inside a string, and the CLI writes none between tokens), and (checked by the caller) its
parentId is the id of the event before it: a cut line, a glued line or a line split by a raw
newline breaks one of these, and is then decoded by the full reader, which reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

import orjson

from copilot_logs.ingest.logfile import display_name

STDIN = "<stdin>"
"""The name standard input goes by (in the file column, in messages)."""

EVENT_START = b'{"type":"'
ENVELOPE_HEAD = re.compile(rb'\{"type":"([^"\\]+)","data":\{')
ENVELOPE_TAIL = re.compile(
    rb'\},(?:"agentId":"([^"\\]*)",)?"id":"([^"\\]*)","timestamp":"([^"\\]*)",'
    rb'"parentId":(?:null|"([^"\\]*)")(?:,"agentId":"([^"\\]*)")?\}\Z'
)
"""Groups: agentId (where the CLI writes it, before ``id``), id, timestamp, parentId, agentId
(where older CLIs wrote it, after ``parentId``)."""
TAIL_WINDOW = 512
_CONTROL = re.compile(rb"[\x00-\x1f]")


@dataclass(frozen=True)
class Source:
    """One session log to read: a file on disk, or standard input when ``path`` is None."""

    path: Path | None
    session_hint: str
    """The id the layout gives (folder or file name), used when the log has no session.start."""
    only: tuple[str, ...] = ()
    """Session ids or id prefixes the user selected this log by: a command that reads sessions
    keeps only the log's sessions whose id starts with one of them, or all when none does (a
    file named by the prefix whose sessions are not). Empty: every session (a path given)."""

    @property
    def name(self) -> str:
        """The path as valid UTF-8 text (a name that is not UTF-8 shows ``\\xff`` escapes)."""
        return display_name(self.path) if self.path is not None else STDIN

    @property
    def size(self) -> int:
        """Bytes on disk now (0 for stdin or a file that cannot be stat'ed)."""
        try:
            return self.path.stat().st_size if self.path is not None else 0
        except OSError:
            return 0


class Envelope(NamedTuple):
    type: str
    agent_id: str | None
    event_id: str
    timestamp: str
    parent_id: str | None


Fields = tuple[bytes, "bytes | None", bytes, bytes, "bytes | None"]
"""type, agentId, id, timestamp, parentId of a line, as bytes."""


def envelope_at(buffer: bytes | bytearray, start: int, end: int) -> Fields | None:
    """The envelope of the line ``buffer[start:end]`` (no newline), or None when the line must
    be decoded. Nothing is copied for the usual line.

    The head and the tail must belong to one event: a line where a truncated event has a
    complete one glued behind it has the head of one and the tail of the other. So a line with
    a second ``{"type":"`` (a glued event, or a nested object with a ``type`` key) is vouched
    for only when it parses as one JSON object.
    """
    head = ENVELOPE_HEAD.match(buffer, start, end)
    if head is None:
        return None
    window = end - TAIL_WINDOW
    tail = ENVELOPE_TAIL.search(buffer, window if window > start else start, end)
    if tail is None:
        return None
    agent_id, event_id, stamp, parent_id, late_agent_id = tail.groups()
    if not event_id or (agent_id is not None and late_agent_id is not None):
        return None
    if buffer.find(EVENT_START, start + 1, end) != -1 and not _one_object(buffer[start:end]):
        return None
    return (
        head.group(1),
        agent_id if agent_id is not None else late_agent_id,
        event_id,
        stamp,
        parent_id,
    )


def _one_object(raw: bytes | bytearray) -> bool:
    try:
        return isinstance(orjson.loads(raw), dict)
    except orjson.JSONDecodeError:
        return False


def envelope(raw: bytes) -> Envelope | None:
    """The envelope of a whole, well-shaped line of valid UTF-8; None when the line must be
    decoded (see :func:`envelope_at`)."""
    fields = envelope_at(raw, 0, len(raw))
    if fields is None:
        return None
    kind, agent_id, event_id, stamp, parent_id = fields
    if not kind.isascii() or _CONTROL.search(raw) is not None:
        return None  # (a raw control character: the full reader finds the line invalid)
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return Envelope(
        kind.decode("ascii"),
        agent_id.decode() if agent_id is not None else None,
        event_id.decode(),
        stamp.decode(),
        parent_id.decode() if parent_id is not None else None,
    )


def as_int(value: object) -> int | None:
    """An integer field (integral floats too; never a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


class Readable(Protocol):
    """What the line splitter reads from: an open binary file, stdin, or a wrapper."""

    def read(self, size: int = -1, /) -> bytes: ...
