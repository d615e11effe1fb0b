"""The one rule for what is an LLM call (no polars here): the envelope scan of ``count
--total``, the reader's counting lane, the store's per-file totals and the model's
``subagent_call`` column all ask :class:`CallCounter`.

- A main-agent LLM call is an ``assistant.turn_start`` without ``agentId``.
- A sub-agent LLM call is a sub-agent's ``assistant.message``, once per call: the chunks of one
  call share a messageId, so the first line of each (agentId, messageId) counts (even when chunk
  0 was lost); a message without messageId counts unless it is a later chunk.

Counting must see the events of a file in order, once each (the reader drops replayed lines).
The messageIds already seen are the only state: a read that goes on where an earlier one
stopped (a file that grew) must start from the earlier read's ``messages``.
"""

from __future__ import annotations

from collections.abc import Iterable

from copilot_logs.ingest.decode.envelope import as_int

TURN_START = "assistant.turn_start"
MESSAGE = "assistant.message"


def needs_payload(kind: str, agent_id: str | None) -> bool:
    """Whether deciding if this event is a call needs its messageId and chunkIndex."""
    return kind == MESSAGE and agent_id is not None


class CallCounter:
    """Main-agent and sub-agent LLM calls of one file's events, fed in file order."""

    __slots__ = ("llm_calls", "messages", "subagent_calls")

    def __init__(self, messages: Iterable[tuple[str, str]] = ()) -> None:
        self.llm_calls = 0
        self.subagent_calls = 0
        self.messages: set[tuple[str, str]] = set(messages)
        """(agentId, messageId) of every sub-agent message counted so far."""

    def add(
        self,
        kind: str,
        agent_id: str | None,
        message_id: object = None,
        chunk_index: object = None,
    ) -> bool:
        """Count one event; whether it is an LLM call (of either agent)."""
        if kind == TURN_START:
            if agent_id is None:
                self.llm_calls += 1
                return True
            return False
        if kind != MESSAGE or agent_id is None:
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
