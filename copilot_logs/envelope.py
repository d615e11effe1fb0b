"""What can be known of a log line without decoding its payload (no polars, no JSON parse).

The CLI writes every event as one compact JSON object whose envelope has a fixed shape:
``{"type":"T","data":{...}[,"agentId":"A"],"id":"I","timestamp":"S","parentId":P}``. Quotes
inside JSON strings are escaped, so the head and tail patterns below can only match the real
envelope of a whole line. A line is vouched for without decoding when its head and tail have
that exact shape, its bytes are valid UTF-8, and (checked by the caller) its parentId is the id
of the event before it: a cut line, a glued line or a line split by a raw newline breaks one of
these, and is then decoded by the full reader, which reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from copilot_logs.logfile import display_name

EVENT_START = b'{"type":"'
ENVELOPE_HEAD = re.compile(rb'\{"type":"([^"\\]+)","data":\{')
ENVELOPE_TAIL = re.compile(
    rb'\},(?:"agentId":"([^"\\]*)",)?"id":"([^"\\]*)","timestamp":"([^"\\]*)",'
    rb'"parentId":(?:null|"([^"\\]*)")\}\Z'
)
TAIL_WINDOW = 512


@dataclass(frozen=True)
class Source:
    """One session log to read: a file on disk, or standard input when ``path`` is None."""

    path: Path | None
    session_hint: str
    """The id the layout gives (folder or file name), used when the log has no session.start."""

    @property
    def name(self) -> str:
        """The path as valid UTF-8 text (a name that is not UTF-8 shows ``\\xff`` escapes)."""
        return display_name(self.path) if self.path is not None else "<stdin>"

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


def envelope(raw: bytes) -> Envelope | None:
    """The envelope of a whole, well-shaped line; None when the line must be decoded."""
    head = ENVELOPE_HEAD.match(raw)
    if head is None:
        return None
    kind = head.group(1)
    if not kind.isascii():
        return None
    tail = ENVELOPE_TAIL.search(raw, max(0, len(raw) - TAIL_WINDOW))
    if tail is None:
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    agent_id, event_id, stamp, parent_id = tail.groups()
    if not event_id:
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


def new_subagent_call(
    agent_id: str, message_id: object, chunk_index: object, seen: set[tuple[str, str]]
) -> bool:
    """Whether a sub-agent message starts a new LLM call, as ``model._subagent_call_flag``
    decides it: the first line of its messageId, or, without a messageId, not a later chunk."""
    if not isinstance(message_id, str):
        return as_int(chunk_index) in (None, 0)
    if (agent_id, message_id) in seen:
        return False
    seen.add((agent_id, message_id))
    return True


class Readable(Protocol):
    """What the line splitter reads from: an open binary file, stdin, or a wrapper."""

    def read(self, size: int = -1, /) -> bytes: ...
