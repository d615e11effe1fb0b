"""The event log under construction: ids, the simulated clock, the envelope, the output.

Every id comes from ``random.Random(seed)`` and every timestamp from a simulated clock, so the
same calls with the same seed give the same bytes. The envelope of each line is written in the
on-disk key order ``type, data, [agentId,] id, timestamp, parentId``; ``parentId`` chains each
line to the one before it. Every event is serialised (compact, orjson) the moment it is
appended, so the log always knows the byte size and event count of the file so far.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson

JSONDict = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CALL_ID_ALPHABET = string.ascii_letters + string.digits


def to_ms(value: datetime | str) -> int:
    """Milliseconds since the epoch; a naive datetime (or string) is taken as UTC."""
    dt = datetime.fromisoformat(value) if isinstance(value, str) else value
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def iso(ms: int) -> str:
    """The envelope's ``timestamp`` form: UTC with milliseconds and ``Z``."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def iso_offset(ms: int) -> str:
    """The ``<current_datetime>`` form: local time with offset (here UTC, ``+00:00``)."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}+00:00"


def join_lines(lines: Sequence[bytes]) -> bytes:
    """Lines joined with ``\\n`` plus the trailing ``\\n``, as the CLI appends them."""
    return b"".join(line + b"\n" for line in lines)


class EventLog:
    """An in-memory ``events.jsonl``: appends events and writes the file."""

    def __init__(self, *, seed: int, start: datetime | str, session_id: str | None) -> None:
        self._rng = random.Random(seed)
        self._session_id = session_id if session_id is not None else self._uuid()
        self._start_ms = to_ms(start)
        self._clock = self._start_ms
        self._lines: list[bytes] = []
        self._events: list[JSONDict] = []
        self._size = 0
        self._last_id: str | None = None

    # ---- properties -----------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def events(self) -> list[JSONDict]:
        """The events written so far (dicts as serialised; do not mutate)."""
        return list(self._events)

    @property
    def size(self) -> int:
        """Bytes written so far, newlines included: the offset of the next line."""
        return self._size

    @property
    def event_count(self) -> int:
        return len(self._lines)

    @property
    def now(self) -> str:
        """Timestamp of the last event written."""
        return iso(self._clock)

    # ---- output ---------------------------------------------------------------------------

    def lines(self) -> list[bytes]:
        """Each event as one compact JSON object, without the newline."""
        return list(self._lines)

    def to_bytes(self) -> bytes:
        return join_lines(self._lines)

    def write(self, path: Path) -> Path:
        """Write the file to ``path`` (parents created) and return ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.to_bytes())
        return path

    def write_to(self, root: Path, *, layout: Literal["dir", "flat"] = "dir") -> Path:
        """Write in the CLI layout: ``root/<sessionId>/events.jsonl`` or ``root/<id>.jsonl``."""
        root = Path(root)
        if layout == "dir":
            return self.write(root / self._session_id / "events.jsonl")
        return self.write(root / f"{self._session_id}.jsonl")

    # ---- low level ------------------------------------------------------------------------

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _call_id(self) -> str:
        return "call_" + "".join(self._rng.choice(_CALL_ID_ALPHABET) for _ in range(24))

    def advance(self, ms: int) -> None:
        """Move the clock forward without writing (idle time, a pause before a resume)."""
        if ms < 0:
            raise ValueError("the clock only moves forward")
        self._clock += ms

    def event(
        self,
        type: str,
        data: JSONDict,
        *,
        agent_id: str | None = None,
        after_ms: int = 5,
    ) -> JSONDict:
        """Append one event ``after_ms`` milliseconds after the previous one and return it."""
        if after_ms < 1:
            raise ValueError("after_ms must be >= 1: timestamps strictly increase")
        self._clock += after_ms
        ev: JSONDict = {"type": type, "data": data}
        if agent_id is not None:
            ev["agentId"] = agent_id
        ev["id"] = self._uuid()
        ev["timestamp"] = iso(self._clock)
        ev["parentId"] = self._last_id
        line = orjson.dumps(ev)
        self._lines.append(line)
        self._events.append(ev)
        self._size += len(line) + 1
        self._last_id = ev["id"]
        return ev
