"""The one rule for what is an LLM call (no polars here): the scan of ``count
--total``, the reader's counting lane, the store's per-file totals and the model's
``subagent_call`` column all ask :class:`CallCounter`.

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

from collections.abc import Iterable

from copilot_logs.ingest.decode.envelope import as_int

TURN_START = "assistant.turn_start"
MESSAGE = "assistant.message"
CALL_TYPES = frozenset({TURN_START, MESSAGE})
"""The only event types :meth:`CallCounter.add` can count: any other event is no LLM call."""

TURNS = "\x00turns"
"""In ``messages``, (agent, TURNS) says that sub-agent writes turn pairs. Kept in the same set
as the messageIds so that a read going on where another stopped (the store, ``count --total``)
carries it; no CLI writes a messageId starting with NUL."""


def needs_payload(kind: str, agent_id: str | None) -> bool:
    """Whether deciding if this event is a call needs its payload (parentToolCallId,
    messageId and chunkIndex)."""
    return kind in CALL_TYPES


class CallCounter:
    """Main-agent and sub-agent LLM calls of one file's events, fed in file order."""

    __slots__ = ("llm_calls", "messages", "subagent_calls")

    def __init__(self, messages: Iterable[tuple[str, str]] = ()) -> None:
        self.llm_calls = 0
        self.subagent_calls = 0
        self.messages: set[tuple[str, str]] = set(messages)
        """(agent, messageId) of every sub-agent message counted so far, and (agent, TURNS)
        of every sub-agent that wrote a turn_start."""

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
