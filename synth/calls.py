"""LLM calls and tool calls: ``assistant.message``, ``tool.execution_start``/``_complete``,
and the ``subagent.*`` lines (with the sub-agent's own calls) a ``task`` tool writes while it
runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from synth.events import JSONDict
from synth.prompts import SUBAGENT_SYSTEM_PROMPT, Conversation, transformed
from synth.tools import SCHEMES, Subagent, ToolCall


@dataclass(frozen=True)
class Outcome:
    """How a tool call ends: ``success``, and the result or the error it reports."""

    ok: bool
    result: str
    error: str | None


@dataclass(frozen=True)
class Turn:
    """Where a call is written: turn, model, interaction and, for a sub-agent, the envelope
    agentId of its lines (none in the ``parent`` scheme) and its task's toolCallId."""

    turn_id: str
    model: str
    interaction_id: str | None
    agent_id: str | None = None
    task_id: str | None = None

    @property
    def main(self) -> bool:
        return self.task_id is None

    def stamp(self, data: JSONDict) -> JSONDict:
        """``data`` with the sub-agent's ``parentToolCallId`` when there is one."""
        if self.task_id is not None:
            data["parentToolCallId"] = self.task_id
        return data


class AgentCalls(Conversation):
    """Writes what the model asks for and what the tools answer."""

    def _ids_for(self, tools: Sequence[ToolCall]) -> list[str]:
        return [t.tool_call_id or self._call_id() for t in tools]

    def _assistant_message(
        self,
        text: str,
        tools: Sequence[ToolCall],
        ids: Sequence[str],
        at: Turn,
        *,
        output_tokens: int | None,
        duration_ms: int,
    ) -> str:
        out = max(1, len(text) // 4) + 25 * len(tools) if output_tokens is None else output_tokens
        self._ledger.record_call(
            at.model,
            out,
            duration_ms,
            context_bytes=self._size,
            interaction=self._interaction,
            main=at.main,
        )
        message_id = self._uuid()
        requests = [
            {"toolCallId": cid, "name": t.name, "arguments": dict(t.arguments), "type": "function"}
            for t, cid in zip(tools, ids, strict=True)
        ]
        data: JSONDict = {
            "messageId": message_id,
            "model": at.model,
            "content": text,
            "toolRequests": requests,
        }
        if at.interaction_id is not None:
            data["interactionId"] = at.interaction_id
        data["turnId"] = at.turn_id
        data["outputTokens"] = out
        after = max(1, duration_ms)
        self.event("assistant.message", at.stamp(data), agent_id=at.agent_id, after_ms=after)
        return message_id

    def _tool_start(self, tool: ToolCall, cid: str, at: Turn) -> None:
        data: JSONDict = {
            "toolCallId": cid,
            "toolName": tool.name,
            "arguments": dict(tool.arguments),
            "turnId": at.turn_id,
            "model": at.model,
        }
        self.event("tool.execution_start", at.stamp(data), agent_id=at.agent_id, after_ms=2)

    def _tool_complete(self, tool: ToolCall, cid: str, at: Turn, end: Outcome) -> None:
        data: JSONDict = {"toolCallId": cid, "model": at.model}
        if at.interaction_id is not None:
            data["interactionId"] = at.interaction_id
        data["turnId"] = at.turn_id
        data["success"] = end.ok
        if end.ok:
            data["result"] = {"content": end.result, "detailedContent": end.result}
        else:
            message = end.error or end.result or "Tool failed"
            data["error"] = {"message": message, "code": tool.error_code}
        after = max(1, tool.duration_ms)
        self.event("tool.execution_complete", at.stamp(data), agent_id=at.agent_id, after_ms=after)

    def _run_tools(
        self, tools: Sequence[ToolCall], ids: Sequence[str], at: Turn, *, parallel: bool
    ) -> None:
        """Each tool's start and complete; ``parallel`` writes all starts, then all completes.

        A ``task`` call's sub-agent writes its lines between the start and the complete.
        """
        pairs = list(zip(tools, ids, strict=True))
        for group in [pairs] if parallel else [[p] for p in pairs]:
            for tool, cid in group:
                self._tool_start(tool, cid, at)
            for tool, cid in group:
                if tool.never_completes:
                    continue
                end = Outcome(tool.ok, tool.result, tool.error)
                if tool.subagent is not None:
                    if not at.main:
                        raise ValueError("sub-agents cannot start sub-agents")
                    end = self._run_subagent(tool.subagent, cid, tool)
                self._tool_complete(tool, cid, at, end)

    # ---- sub-agents -----------------------------------------------------------------------

    def _run_subagent(self, sub: Subagent, task_id: str, tool: ToolCall) -> Outcome:
        """``subagent.started``, the sub-agent's prompt and calls, then how it ended, its lines
        marked as ``sub.scheme`` says."""
        model = sub.model or self._model
        begun = self._clock
        mark = self._mark(sub.scheme, task_id)
        self.event(
            "subagent.started",
            {
                "toolCallId": task_id,
                "agentName": sub.agent_name,
                "agentDisplayName": sub.display_name,
                "agentDescription": sub.description,
                "model": model,
            },
            agent_id=mark,
            after_ms=15,
        )
        if sub.scheme == "instance":
            self.event("subagent.configured", {"model": model, "multiTurn": True}, agent_id=mark)
        tokens = 0
        if sub.steps:
            iid = self._subagent_prompt(sub, mark) if sub.scheme != "parent" else None
            tokens = self._subagent_steps(sub, model, iid, Turn("", model, iid, mark, task_id))
        ended: JSONDict = {
            "toolCallId": task_id,
            "agentName": sub.agent_name,
            "agentDisplayName": sub.display_name,
            "model": model,
            "totalToolCalls": sum(len(step.tools) for step in sub.steps),
        }
        if sub.error is not None:
            ended["durationMs"] = self._clock + 3 - begun
            ended["error"] = sub.error
            self.event("subagent.failed", ended, agent_id=mark, after_ms=3)
            return Outcome(False, "", sub.error)
        ended["totalTokens"] = tokens
        ended["durationMs"] = self._clock + 20 - begun
        self.event("subagent.completed", ended, agent_id=mark, after_ms=20)
        last_text = sub.steps[-1].text if sub.steps else ""
        return Outcome(tool.ok, tool.result or last_text, tool.error)

    def _mark(self, scheme: str, task_id: str) -> str | None:
        """The envelope agentId of a sub-agent's lines in ``scheme``."""
        if scheme not in SCHEMES:
            raise ValueError(f"unknown sub-agent scheme {scheme!r}: one of {SCHEMES}")
        if scheme == "parent":
            return None
        return task_id if scheme == "task-id" else self._uuid()

    def _subagent_prompt(self, sub: Subagent, mark: str | None) -> str:
        """The sub-agent's ``system.message`` and ``user.message``; returns its interactionId."""
        iid = self._uuid()
        self.event(
            "system.message",
            {"role": "system", "content": SUBAGENT_SYSTEM_PROMPT, "interactionId": iid},
            agent_id=mark,
            after_ms=900,
        )
        data: JSONDict = {
            "content": sub.prompt,
            "transformedContent": transformed(sub.prompt, self._clock + 6),
            "source": f"agent-{self._session_id}",
            "attachments": [],
            "supportedNativeDocumentMimeTypes": [],
            "delivery": "idle",
            "interactionId": iid,
            "parentAgentTaskId": self._uuid(),
        }
        self.event("user.message", data, agent_id=mark, after_ms=6)
        return iid

    def _subagent_steps(self, sub: Subagent, model: str, iid: str | None, agent: Turn) -> int:
        """Each step's LLM call and tools (turnIds 0, 1, ...), in a turn pair of its own in
        the ``instance`` scheme; returns the tokens they used."""
        tokens = 0
        turns = sub.scheme == "instance"
        for i, step in enumerate(sub.steps):
            at = Turn(str(i), model, iid, agent.agent_id, agent.task_id)
            if turns:
                started: JSONDict = {"turnId": at.turn_id, "interactionId": iid}
                self.event("assistant.turn_start", at.stamp(started), agent_id=at.agent_id)
            before = self._ledger.tokens()
            ids = self._ids_for(step.tools)
            self.calls_written["subagent"] += 1
            self._assistant_message(
                step.text,
                step.tools,
                ids,
                at,
                output_tokens=step.output_tokens,
                duration_ms=step.duration_ms,
            )
            tokens += self._ledger.tokens() - before
            self._run_tools(step.tools, ids, at, parallel=False)
            if turns:
                ended = at.stamp({"turnId": at.turn_id})
                self.event("assistant.turn_end", ended, agent_id=at.agent_id, after_ms=5)
        return tokens
