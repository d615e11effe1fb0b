"""The one rule for what is an LLM call (no polars here): ``count --total`` (through
:class:`CallTally`), the store's per-file figures and the model's ``subagent_call`` column all
ask :class:`CallCounter`.

A main-agent call is a main-agent ``assistant.turn_start``. A sub-agent call is a sub-agent's
``turn_start`` where it writes turn pairs (CLI 1.0.85 on), else the first line of each of its
``assistant.message`` (agent, messageId), or a message without messageId that is no later chunk;
once a sub-agent wrote a turn_start its messages are never calls. Events are fed in file order,
once each, with their writer's mark (:func:`copilot_logs.ingest.cli_format.writer`); the pairs in
``messages`` are the only state a read going on where another stopped must start from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import msgspec

from copilot_logs.ingest.cli_format import writer
from copilot_logs.ingest.decode import as_int
from copilot_logs.ingest.events_frame import ROW_FIELDS

TURN_START = "assistant.turn_start"
MESSAGE = "assistant.message"
CALL_TYPES = frozenset({TURN_START, MESSAGE})
"""The only event types :meth:`CallCounter.add` can count."""
TURNS = "\x00turns"
"""In ``messages``, (agent, TURNS) says that sub-agent writes turn pairs (no CLI writes a
messageId starting with NUL)."""

Count = Annotated[int, msgspec.Meta(ge=0)]
DamageRow = tuple[Count, str, str, Count | None, Count | None]
"""(line, kind, message, more_lines, new_lines) of a problem the reader reported (see
DIAGNOSTICS_SCHEMA)."""


class Figures(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a count of a log's calls found, with the damage the read met (nested in the
    store's entries)."""

    llm_calls: Count = 0
    subagent_calls: Count = 0
    messages: tuple[tuple[str, str], ...] = ()
    """The counter's memory (sorted): a count going on where this one stopped starts from it."""
    damage: tuple[DamageRow, ...] = ()
    unreadable: bool = False
    """Nothing could be read: no event at all, only damage."""


class CallCounter:
    """Main-agent and sub-agent LLM calls of one file's events, fed in file order."""

    __slots__ = ("llm_calls", "messages", "subagent_calls")

    def __init__(self, messages: Iterable[tuple[str, str]] = ()) -> None:
        self.llm_calls = 0
        self.subagent_calls = 0
        self.messages: set[tuple[str, str]] = set(messages)

    @classmethod
    def going_on(cls, figures: Figures) -> CallCounter:
        """A counter that goes on where the count that found ``figures`` stopped."""
        counter = cls(figures.messages)
        counter.llm_calls, counter.subagent_calls = figures.llm_calls, figures.subagent_calls
        return counter

    def figures(self, damage: Iterable[DamageRow] = (), unreadable: bool = False) -> Figures:
        return Figures(
            self.llm_calls,
            self.subagent_calls,
            tuple(sorted(self.messages)),
            tuple(damage),
            unreadable,
        )

    def add(
        self,
        kind: str,
        agent_id: str | None,
        message_id: object = None,
        chunk_index: object = None,
    ) -> bool:
        """Count one event; whether it is an LLM call (of either agent). ``agent_id`` is the
        writer's mark (None: the main agent)."""
        if kind == TURN_START:
            if agent_id is None:
                self.llm_calls += 1
            else:
                self.messages.add((agent_id, TURNS))
                self.subagent_calls += 1
            return True
        if kind != MESSAGE or agent_id is None or (agent_id, TURNS) in self.messages:
            return False
        if isinstance(message_id, str):
            key = (agent_id, message_id)
            if key in self.messages:
                return False
            self.messages.add(key)
        elif as_int(chunk_index) not in (None, 0):
            return False
        self.subagent_calls += 1
        return True


COUNT_FIELDS = ("type", "agent_id", "parent_tool_call_id", "message_id", "chunk_index")
"""What a count reads of an event that may be a call (a CALL_TYPES one)."""
_COUNTED = tuple(map(ROW_FIELDS.index, COUNT_FIELDS))


class CallTally:
    """Where the reader puts the events when only their calls are counted (``count --total``):
    each is fed to the counter as it comes and nothing is kept (no frame, no polars)."""

    __slots__ = ("count", "counter")

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter
        self.count = 0

    def append(self, row: Sequence[Any]) -> None:
        """One event, as a row in ROW_FIELDS order (the line reader's)."""
        self.count += 1
        kind, agent_id, parent, message_id, chunk_index = map(row.__getitem__, _COUNTED)
        if kind in CALL_TYPES:
            self.counter.add(kind, writer(agent_id, parent), message_id, chunk_index)

    def extend(self, columns: Sequence[list[Any]]) -> None:
        """Many events: their types, and the COUNT_FIELDS of those that may be calls (what the
        clean lane gives a count)."""
        kinds, calls = columns
        self.count += len(kinds)
        add = self.counter.add
        for kind, agent_id, parent, message_id, chunk_index in calls:
            add(kind, writer(agent_id, parent), message_id, chunk_index)
