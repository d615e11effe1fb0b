"""The one rule for what is an LLM call (no polars here): ``count --total`` (through
:class:`CallTally`), the store's per-file figures and the model's ``subagent_call`` column all
ask :class:`CallCounter`.

Each event is fed with its writer's mark (:func:`copilot_logs.ingest.decode.cli_format.writer`:
None for the main agent, else the sub-agent's agentId, or the parentToolCallId of a 1.0.2x
sub-agent's line).

- A main-agent LLM call is an ``assistant.turn_start`` of the main agent.
- A sub-agent LLM call is a sub-agent's ``assistant.turn_start`` where it writes turn pairs
  (CLI 1.0.85 on), else its ``assistant.message``, once per call: the chunks of one call share a
  messageId, so the first line of each (agent, messageId) counts (even when chunk 0 was lost);
  a message without messageId counts unless it is a later chunk. Once a sub-agent has written a
  turn_start, its messages are never calls (its turns counted them).

Counting must see the events of a file in order, once each (the reader drops replayed lines).
The pairs in ``messages`` are the only state: a read that goes on where an earlier one
stopped (a file that grew) must start from the earlier read's ``messages``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from copilot_logs.ingest.decode.cli_format import writer
from copilot_logs.ingest.decode.envelope import as_int
from copilot_logs.ingest.events_frame import ROW_FIELDS
from copilot_logs.ingest.progress import DamageRow, Figures

TURN_START = "assistant.turn_start"
MESSAGE = "assistant.message"
CALL_TYPES = frozenset({TURN_START, MESSAGE})
"""The only event types :meth:`CallCounter.add` can count: any other event is no LLM call."""

TURNS = "\x00turns"
"""In ``messages``, (agent, TURNS) says that sub-agent writes turn pairs. Kept in the same set
as the messageIds so that a read going on where another stopped (the store, ``count --total``)
carries it; no CLI writes a messageId starting with NUL."""


class CallCounter:
    """Main-agent and sub-agent LLM calls of one file's events, fed in file order."""

    __slots__ = ("llm_calls", "messages", "subagent_calls")

    def __init__(self, messages: Iterable[tuple[str, str]] = ()) -> None:
        self.llm_calls = 0
        self.subagent_calls = 0
        self.messages: set[tuple[str, str]] = set(messages)
        """(agent, messageId) of every sub-agent message counted so far, and (agent, TURNS)
        of every sub-agent that wrote a turn_start."""

    @classmethod
    def going_on(cls, figures: Figures) -> CallCounter:
        """A counter that goes on where the count that found ``figures`` stopped."""
        counter = cls(figures.messages)
        counter.llm_calls, counter.subagent_calls = figures.llm_calls, figures.subagent_calls
        return counter

    def figures(self, damage: Iterable[DamageRow] = (), unreadable: bool = False) -> Figures:
        """What was counted, with the damage the read met."""
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
    """Where the reader puts the events it reads when only their calls are counted (``count
    --total``): each is fed to the counter as it comes, and nothing is kept, so no frame is
    built (and no polars imported)."""

    __slots__ = ("count", "counter")

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter
        self.count = 0
        """Events read."""

    def append(self, row: Sequence[Any]) -> None:
        """One event, as a row in ROW_FIELDS order (the line reader's)."""
        self.count += 1
        kind, agent_id, parent, message_id, chunk_index = map(row.__getitem__, _COUNTED)
        if kind in CALL_TYPES:
            self.counter.add(kind, writer(agent_id, parent), message_id, chunk_index)

    def extend(self, columns: Sequence[list[Any]]) -> None:
        """Many events: their types, and the COUNT_FIELDS of those that may be calls (what
        the clean lane gives for a count, see
        :func:`copilot_logs.ingest.clean_blocks.decode_run`)."""
        kinds, calls = columns
        self.count += len(kinds)
        add = self.counter.add
        for kind, agent_id, parent, message_id, chunk_index in calls:
            add(kind, writer(agent_id, parent), message_id, chunk_index)
