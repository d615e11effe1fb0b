"""Main-agent turns: ``assistant.turn_start``, the LLM call and its tools, ``turn_end``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from synth.calls import AgentCalls, Turn
from synth.tools import Subagent, ToolCall, task


@dataclass(frozen=True)
class TurnRecord:
    """What :meth:`SessionBuilder.turn` wrote: ids a test may want to look up."""

    turn_id: str
    interaction_id: str | None
    message_id: str | None
    tool_call_ids: tuple[str, ...]


class Turns(AgentCalls):
    """One LLM call of the main agent per turn; the turnId restarts at 0 in each interaction."""

    def _start_turn(self) -> str:
        if self._open_turn is not None:
            raise ValueError("a turn is still open: call end_turn() first")
        turn_id = str(self._next_turn)
        self._next_turn += 1
        data = {"turnId": turn_id}
        if self._interaction is not None:
            data["interactionId"] = self._interaction
        self.event("assistant.turn_start", data, after_ms=150)
        self.calls_written["main"] += 1
        self._open_turn = turn_id
        return turn_id

    def end_turn(self, *, after_ms: int = 120) -> None:
        """Write ``assistant.turn_end`` for the open turn."""
        if self._open_turn is None:
            raise ValueError("no open turn")
        self.event("assistant.turn_end", {"turnId": self._open_turn}, after_ms=after_ms)
        self._open_turn = None

    def turn(
        self,
        text: str | None,
        tools: Sequence[ToolCall] = (),
        *,
        parallel: bool = False,
        output_tokens: int | None = None,
        model: str | None = None,
        end: bool = True,
        duration_ms: int = 1500,
    ) -> TurnRecord:
        """One main-agent LLM call: ``turn_start``, ``assistant.message``, tools, ``turn_end``.

        ``text=None`` with no tools writes no ``assistant.message`` (the provider call
        failed); follow it with :meth:`session_error`. ``parallel=True`` writes all tool
        starts, then all completes. ``end=False`` leaves the turn open (a killed session) or
        lets the caller write more before :meth:`end_turn`.
        """
        at = Turn(self._start_turn(), model or self._model, self._interaction)
        message_id: str | None = None
        ids = self._ids_for(tools)
        if text is None and not tools:
            self.advance(duration_ms)
        else:
            message_id = self._assistant_message(
                text or "", tools, ids, at, output_tokens=output_tokens, duration_ms=duration_ms
            )
            self._run_tools(tools, ids, at, parallel=parallel)
        if end:
            self.end_turn()
        return TurnRecord(at.turn_id, at.interaction_id, message_id, tuple(ids))

    def task_complete_turn(
        self,
        summary: str,
        *,
        success: bool = True,
        text: str = "",
        output_tokens: int | None = None,
        model: str | None = None,
        duration_ms: int = 1500,
    ) -> TurnRecord:
        """A turn whose model calls ``task_complete``; ``session.task_complete`` before turn_end."""
        tool = ToolCall("task_complete", {"summary": summary}, result=summary, duration_ms=5)
        rec = self.turn(
            text,
            [tool],
            output_tokens=output_tokens,
            model=model,
            end=False,
            duration_ms=duration_ms,
        )
        self.event("session.task_complete", {"summary": summary, "success": success}, after_ms=1)
        self.end_turn()
        return rec

    def subagent_run(
        self,
        prompt: str,
        *,
        llm_calls: int = 1,
        tool_calls: int = 0,
        error: str | None = None,
        text: str = "Delegating this to a sub-agent.",
        subagent: Subagent | None = None,
        output_tokens: int | None = None,
        end: bool = True,
        scheme: str = "task-id",
    ) -> TurnRecord:
        """A main turn with one ``task`` call whose sub-agent makes ``llm_calls`` LLM calls and
        ``tool_calls`` tool calls (or runs ``subagent``), its lines marked by ``scheme`` (see
        :class:`synth.tools.Subagent`); ``error`` makes it fail.

        The task's toolCallId (the sub-agent's key) is ``tool_call_ids[0]``.
        """
        call = task(
            prompt,
            subagent=subagent,
            llm_calls=llm_calls,
            tool_calls=tool_calls,
            error=error,
            scheme=scheme,
        )
        return self.turn(text, [call], output_tokens=output_tokens, end=end)
