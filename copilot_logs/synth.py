"""Deterministic builder of real-shaped Copilot CLI session logs (``events.jsonl``).

Used by the bundled samples (``tests/make_samples.py``), the property tests and the benchmark
corpus generator. Every id comes from ``random.Random(seed)`` and every timestamp from a
simulated clock, so the same calls with the same seed give the same bytes.

The envelope of each line is written in the on-disk key order
``type, data, [agentId,] id, timestamp, parentId``; ``parentId`` chains each line to the one
before it. Every event is serialised (compact, orjson) the moment it is appended, so the
builder always knows the byte size and event count of the file so far: that is what
``session.resume.eventsFileSizeBytes``/``eventCount`` and ``session.shutdown.eventsFileSizeBytes``
are computed from.

The second half of the module holds pure *damage helpers* that take clean lines or bytes and
return damaged ones, each documented with what a reader is expected to report.

This module never prints and imports neither click nor rich.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson

__all__ = [
    "NUDGE_TEXT",
    "SessionBuilder",
    "Subagent",
    "SubagentStep",
    "ToolCall",
    "TurnRecord",
    "bash",
    "blank_line",
    "create",
    "crlf",
    "cut",
    "duplicate",
    "edit",
    "glob",
    "glue_truncated",
    "grep",
    "invalid_utf8",
    "join_lines",
    "not_an_event",
    "nul_tail",
    "raw_line_separator",
    "split_line",
    "subagent_plan",
    "task",
    "view",
]

JSONDict = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CALL_ID_ALPHABET = string.ascii_letters + string.digits

#: Text of an autopilot continuation ("nudge"). Readers of older logs (before
#: ``isAutopilotContinuation`` existed) detect nudges by the first sentence.
NUDGE_TEXT = (
    "You have not yet marked the task as complete using the task_complete tool. "
    "If you were planning, stop planning and start implementing. "
    "Keep working on your own until the task is finished, then call task_complete."
)

_SYSTEM_PROMPT = (
    "You are a coding agent running in a terminal (synthetic stand-in for the Copilot CLI "
    "system prompt, which is 40-56 KB in real logs and written again before every user "
    "message)."
)
_SUBAGENT_SYSTEM_PROMPT = (
    "You are a sub-agent that runs development commands and reports results briefly "
    "(synthetic stand-in for the sub-agent system prompt)."
)
_FILLER = (
    "\n- Prefer small, verifiable changes; read files before editing them; run the tests "
    "that cover the code you touched; report what you changed and why."
)

#: Premium-request multiplier per model, used for the synthetic usage figures.
PREMIUM_MULTIPLIER: dict[str, float] = {
    "gpt-5-mini": 0.0,
    "gpt-4.1": 0.0,
    "gpt-4o": 0.0,
    "claude-haiku-4.5": 0.33,
    "claude-sonnet-4": 1.0,
    "claude-sonnet-4.5": 1.0,
    "gpt-5": 1.0,
    "claude-opus-4.1": 10.0,
}


# --------------------------------------------------------------------------------------------
# Plain data describing what to write
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubagentStep:
    """One LLM call of a sub-agent: an ``assistant.message`` and the tools it requests."""

    text: str
    tools: Sequence[ToolCall] = ()
    output_tokens: int | None = None
    duration_ms: int = 1200


@dataclass(frozen=True)
class Subagent:
    """What a ``task`` tool's sub-agent writes while the tool runs.

    With ``steps`` empty the sub-agent writes no lines of its own (it failed before its first
    LLM call, as in the real log). ``error`` set means ``subagent.failed`` instead of
    ``subagent.completed`` and a failed ``task`` tool.
    """

    prompt: str
    steps: Sequence[SubagentStep] = ()
    error: str | None = None
    agent_name: str = "task"
    display_name: str = "Task Agent"
    description: str = "Runs development commands and returns a brief summary."
    model: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """One tool call of the main agent (or of a sub-agent, inside a :class:`SubagentStep`).

    The call fails (``success: false`` with ``error {message, code}``) when ``success`` is
    false or ``error`` is set. ``never_completes`` writes the start and no complete (a killed
    session). ``subagent`` (only for a main-agent ``task`` call) writes the sub-agent's lines
    between the start and the complete.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    result: str = ""
    success: bool = True
    error: str | None = None
    duration_ms: int = 120
    never_completes: bool = False
    subagent: Subagent | None = None
    tool_call_id: str | None = None
    error_code: str = "failure"

    @property
    def ok(self) -> bool:
        return self.success and self.error is None


@dataclass(frozen=True)
class TurnRecord:
    """What :meth:`SessionBuilder.turn` wrote: ids a test may want to look up."""

    turn_id: str
    interaction_id: str | None
    message_id: str | None
    tool_call_ids: tuple[str, ...]


# Tool-call factories with the argument names the CLI uses.


def bash(command: str, output: str = "", *, exit_code: int = 0, **kw: Any) -> ToolCall:
    """A ``bash`` call; a non-zero ``exit_code`` still counts as a successful tool call."""
    result = (
        f"{output}\n<exited with exit code {exit_code}>"
        if output
        else (f"<exited with exit code {exit_code}>")
    )
    return ToolCall("bash", {"command": command, "description": command[:60]}, result=result, **kw)


def view(path: str, content: str = "", **kw: Any) -> ToolCall:
    numbered = "\n".join(f"{i}. {line}" for i, line in enumerate(content.split("\n"), 1))
    return ToolCall("view", {"path": path}, result=numbered, **kw)


def grep(pattern: str, output: str = "", *, path: str | None = None, **kw: Any) -> ToolCall:
    args: JSONDict = {"pattern": pattern}
    if path is not None:
        args["path"] = path
    return ToolCall("grep", args, result=output or "No matches found.", **kw)


def glob(pattern: str, output: str = "", **kw: Any) -> ToolCall:
    return ToolCall("glob", {"pattern": pattern}, result=output or "No files matched.", **kw)


def edit(path: str, old_str: str, new_str: str, **kw: Any) -> ToolCall:
    args = {"path": path, "old_str": old_str, "new_str": new_str}
    return ToolCall("edit", args, result=f"File {path} updated with changes.", **kw)


def create(path: str, file_text: str, **kw: Any) -> ToolCall:
    args = {"path": path, "file_text": file_text}
    result = f"Created file {path} with {len(file_text)} characters"
    return ToolCall("create", args, result=result, **kw)


def subagent_plan(
    llm_calls: int,
    tool_calls: int = 0,
    *,
    prompt: str = "Run the test suite and summarise any failures.",
    error: str | None = None,
    tool_name: str = "bash",
    output_tokens: int | None = None,
) -> Subagent:
    """A sub-agent that makes ``llm_calls`` LLM calls and ``tool_calls`` tool calls.

    Tools go on the first ``llm_calls - 1`` messages round-robin (all on the only message when
    ``llm_calls == 1``), so the last message is the sub-agent's final answer.
    """
    if llm_calls < 0 or tool_calls < 0:
        raise ValueError("llm_calls and tool_calls must be >= 0")
    if tool_calls and not llm_calls:
        raise ValueError("a sub-agent needs an LLM call to request a tool")
    buckets: list[list[ToolCall]] = [[] for _ in range(llm_calls)]
    carriers = max(1, llm_calls - 1)
    for j in range(tool_calls):
        call = ToolCall(
            tool_name,
            {"command": f"npm test -- --shard={j + 1}", "description": "Run a test shard"},
            result=f"Tests: {12 + j} passed, 0 failed\n<exited with exit code 0>",
        )
        buckets[j % carriers].append(call)
    steps = [
        SubagentStep(
            text=(
                "All shards pass; no failures to report."
                if i == llm_calls - 1
                else f"Running test shard batch {i + 1}."
            ),
            tools=tuple(buckets[i]),
            output_tokens=output_tokens,
        )
        for i in range(llm_calls)
    ]
    return Subagent(prompt=prompt, steps=tuple(steps), error=error)


def task(
    prompt: str,
    *,
    description: str = "Run tests and summarise",
    name: str = "test-runner",
    subagent: Subagent | None = None,
    llm_calls: int = 1,
    tool_calls: int = 0,
    error: str | None = None,
    result: str = "",
    duration_ms: int = 300,
) -> ToolCall:
    """A main-agent ``task`` call whose sub-agent is ``subagent`` (or a :func:`subagent_plan`)."""
    sub = subagent or subagent_plan(llm_calls, tool_calls, prompt=prompt, error=error)
    args = {
        "description": description,
        "prompt": prompt,
        "agent_type": sub.agent_name,
        "name": name,
        "mode": "sync",
    }
    return ToolCall("task", args, result=result, subagent=sub, duration_ms=duration_ms)


# --------------------------------------------------------------------------------------------
# Usage accounting (synthetic but self-consistent)
# --------------------------------------------------------------------------------------------


@dataclass
class _Usage:
    requests: int = 0
    cost: float = 0.0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    nano: int = 0
    api_ms: int = 0
    # The compaction call: in tokenDetails and totalNanoAiu, not in usage or requests.
    compact_input: int = 0
    compact_output: int = 0
    compact_nano: int = 0

    def minus(self, other: _Usage) -> _Usage:
        return _Usage(
            **{k: getattr(self, k) - getattr(other, k) for k in self.__dataclass_fields__}
        )

    def copy(self) -> _Usage:
        return _Usage(**{k: getattr(self, k) for k in self.__dataclass_fields__})

    def empty(self) -> bool:
        return self.requests == 0 and self.compact_input == 0 and self.compact_output == 0

    def token_details(self) -> JSONDict:
        return {
            "input": {
                "tokenCount": self.input - self.cache_read - self.cache_write + self.compact_input
            },
            "cache_read": {"tokenCount": self.cache_read},
            "cache_write": {"tokenCount": self.cache_write},
            "output": {"tokenCount": self.output + self.compact_output},
        }


def _nano(uncached: int, cache_read: int, output: int) -> int:
    return uncached * 25_000 + cache_read * 2_500 + output * 200_000


def _num(x: float) -> int | float:
    """Whole numbers as ints (the CLI writes ``0``, not ``0.0``)."""
    return int(x) if float(x).is_integer() else round(x, 4)


def _to_ms(value: datetime | str) -> int:
    dt = datetime.fromisoformat(value) if isinstance(value, str) else value
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _iso(ms: int) -> str:
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def _iso_offset(ms: int) -> str:
    """The ``<current_datetime>`` form: local time with offset (here UTC, ``+00:00``)."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}+00:00"


def _padded(text: str, size: int) -> str:
    if size <= len(text):
        return text
    reps = (size - len(text)) // len(_FILLER) + 1
    return (text + _FILLER * reps)[:size]


# --------------------------------------------------------------------------------------------
# The builder
# --------------------------------------------------------------------------------------------


class SessionBuilder:
    """Appends real-shaped events to an in-memory ``events.jsonl``.

    The constructor writes ``session.start`` and ``session.model_change``. Then use the high
    level helpers (:meth:`user_message`, :meth:`turn`, :meth:`task_complete_turn`, ...) or the
    low level :meth:`event`. ``system_prompt_size`` pads each main-agent ``system.message`` to
    that many characters (real ones are 40-56 KB), for benchmark corpora.
    """

    def __init__(
        self,
        *,
        session_id: str | None = None,
        seed: int = 0,
        start: datetime | str = "2026-08-05T07:49:01.551Z",
        copilot_version: str = "1.0.78",
        model: str = "gpt-5-mini",
        cwd: str = "/home/dev/project",
        repository: str | None = "octo/project",
        branch: str | None = "main",
        system_prompt_size: int = 0,
    ) -> None:
        self._rng = random.Random(seed)
        self._session_id = session_id if session_id is not None else self._uuid()
        self._start_ms = _to_ms(start)
        self._clock = self._start_ms
        self._lines: list[bytes] = []
        self._events: list[JSONDict] = []
        self._size = 0
        self._last_id: str | None = None
        self._model = model
        self._mode = "interactive"
        self._cwd = cwd
        self._system_prompt = _padded(_SYSTEM_PROMPT, system_prompt_size)
        self._interaction: str | None = None
        self._next_turn = 0
        self._open_turn: str | None = None
        self._charged_interaction: str | None = None
        self._calls_in_interaction = 0
        self._usage: dict[str, _Usage] = {}
        self._at_last_shutdown: dict[str, _Usage] = {}
        self._last_input = 0

        context: JSONDict = {"cwd": cwd, "gitRoot": cwd}
        if repository is not None:
            context["repository"] = repository
            context["hostType"] = "github"
            context["repositoryHost"] = "github.com"
        if branch is not None:
            context["branch"] = branch
        context["headCommit"] = f"{self._rng.getrandbits(160):040x}"
        self.event(
            "session.start",
            {
                "sessionId": self._session_id,
                "version": 1,
                "producer": "copilot-agent",
                "copilotVersion": copilot_version,
                "startTime": _iso(self._start_ms),
                "context": context,
                "alreadyInUse": False,
            },
            after_ms=120,
        )
        self.event("session.model_change", {"newModel": model}, after_ms=400)

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
    def model(self) -> str:
        return self._model

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def now(self) -> str:
        """Timestamp of the last event written."""
        return _iso(self._clock)

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
        ev["timestamp"] = _iso(self._clock)
        ev["parentId"] = self._last_id
        line = orjson.dumps(ev)
        self._lines.append(line)
        self._events.append(ev)
        self._size += len(line) + 1
        self._last_id = ev["id"]
        return ev

    # ---- usage ----------------------------------------------------------------------------

    def _record_call(self, model: str, output_tokens: int, duration_ms: int, *, main: bool) -> None:
        u = self._usage.setdefault(model, _Usage())
        input_tokens = 6_000 + self._size // 6
        cache_read = 0
        if self._calls_in_interaction > 0 or not main:
            cache_read = (input_tokens * 3 // 5) // 128 * 128
        u.requests += 1
        u.input += input_tokens
        u.output += output_tokens
        u.cache_read += cache_read
        u.reasoning += output_tokens // 3
        u.nano += _nano(input_tokens - cache_read, cache_read, output_tokens)
        u.api_ms += duration_ms
        if main:
            self._calls_in_interaction += 1
            self._last_input = input_tokens
            if self._interaction is not None and self._charged_interaction != self._interaction:
                self._charged_interaction = self._interaction
                u.cost += PREMIUM_MULTIPLIER.get(model, 1.0)

    def _totals(self, usage: Mapping[str, _Usage]) -> tuple[int, float, int]:
        nano = sum(u.nano + u.compact_nano for u in usage.values())
        premium = sum(u.cost for u in usage.values())
        api_ms = sum(u.api_ms for u in usage.values())
        return nano, premium, api_ms

    # ---- conversation ---------------------------------------------------------------------

    def _system_message(self, interaction_id: str, *, after_ms: int) -> None:
        self.event(
            "system.message",
            {"role": "system", "content": self._system_prompt, "interactionId": interaction_id},
            after_ms=after_ms,
        )

    def _begin_interaction(self) -> str:
        if self._open_turn is not None:
            raise ValueError("a turn is still open: call end_turn() first")
        iid = self._uuid()
        self._interaction = iid
        self._next_turn = 0
        self._calls_in_interaction = 0
        return iid

    def user_message(
        self, content: str, *, agent_mode: str | None = None, after_ms: int = 4000
    ) -> str:
        """A typed prompt: ``system.message`` then ``user.message``; returns the interactionId.

        ``agentMode`` is written when given, or when the session's mode (see
        :meth:`mode_changed`) is not "interactive" (interactive prompts carry none).
        """
        iid = self._begin_interaction()
        self._system_message(iid, after_ms=after_ms)
        mode = (
            agent_mode
            if agent_mode is not None
            else (self._mode if self._mode != "interactive" else None)
        )
        ts = self._clock + 6
        data: JSONDict = {
            "content": content,
            "transformedContent": f"<current_datetime>{_iso_offset(ts)}</current_datetime>"
            f"\n\n{content}",
            "attachments": [],
            "supportedNativeDocumentMimeTypes": [],
        }
        if mode is not None:
            data["agentMode"] = mode
        data["delivery"] = "idle"
        data["interactionId"] = iid
        data["parentAgentTaskId"] = self._uuid()
        self.event("user.message", data, after_ms=6)
        return iid

    def nudge(self, *, flagged: bool = True, after_ms: int = 700) -> str:
        """An autopilot continuation (not typed by the user); returns the interactionId.

        ``flagged=False`` omits ``isAutopilotContinuation`` (logs before CLI 1.0.63, where only
        the text tells a nudge apart).
        """
        iid = self._begin_interaction()
        self._system_message(iid, after_ms=after_ms)
        ts = self._clock + 6
        data: JSONDict = {
            "content": "",
            "transformedContent": f"<current_datetime>{_iso_offset(ts)}</current_datetime>"
            f"\n\n{NUDGE_TEXT}",
            "attachments": [],
            "supportedNativeDocumentMimeTypes": [],
            "agentMode": "autopilot",
        }
        if flagged:
            data["isAutopilotContinuation"] = True
        data["delivery"] = "idle"
        data["interactionId"] = iid
        data["parentAgentTaskId"] = self._uuid()
        self.event("user.message", data, after_ms=6)
        return iid

    def mode_changed(self, new_mode: str, *, after_ms: int = 2000) -> None:
        self.event(
            "session.mode_changed",
            {"previousMode": self._mode, "newMode": new_mode},
            after_ms=after_ms,
        )
        self._mode = new_mode

    def model_change(self, new_model: str, *, after_ms: int = 1500) -> None:
        self.event(
            "session.model_change",
            {"previousModel": self._model, "newModel": new_model},
            after_ms=after_ms,
        )
        self._model = new_model

    # ---- turns ----------------------------------------------------------------------------

    def _start_turn(self) -> str:
        if self._open_turn is not None:
            raise ValueError("a turn is still open: call end_turn() first")
        turn_id = str(self._next_turn)
        self._next_turn += 1
        data: JSONDict = {"turnId": turn_id}
        if self._interaction is not None:
            data["interactionId"] = self._interaction
        self.event("assistant.turn_start", data, after_ms=150)
        self._open_turn = turn_id
        return turn_id

    def end_turn(self, *, after_ms: int = 120) -> None:
        """Write ``assistant.turn_end`` for the open turn."""
        if self._open_turn is None:
            raise ValueError("no open turn")
        self.event("assistant.turn_end", {"turnId": self._open_turn}, after_ms=after_ms)
        self._open_turn = None

    def _assistant_message(
        self,
        text: str,
        tools: Sequence[ToolCall],
        ids: Sequence[str],
        *,
        model: str,
        output_tokens: int | None,
        duration_ms: int,
        interaction_id: str | None,
        turn_id: str,
        agent_id: str | None = None,
    ) -> str:
        out = (
            output_tokens
            if output_tokens is not None
            else (max(1, len(text) // 4) + 25 * len(tools))
        )
        self._record_call(model, out, duration_ms, main=agent_id is None)
        message_id = self._uuid()
        data: JSONDict = {
            "messageId": message_id,
            "model": model,
            "content": text,
            "toolRequests": [
                {
                    "toolCallId": cid,
                    "name": t.name,
                    "arguments": dict(t.arguments),
                    "type": "function",
                }
                for t, cid in zip(tools, ids, strict=True)
            ],
        }
        if interaction_id is not None:
            data["interactionId"] = interaction_id
        data["turnId"] = turn_id
        data["outputTokens"] = out
        if agent_id is not None:
            data["parentToolCallId"] = agent_id
        self.event("assistant.message", data, agent_id=agent_id, after_ms=max(1, duration_ms))
        return message_id

    def _tool_start(
        self, tool: ToolCall, cid: str, *, turn_id: str, model: str, agent_id: str | None
    ) -> None:
        data: JSONDict = {
            "toolCallId": cid,
            "toolName": tool.name,
            "arguments": dict(tool.arguments),
            "turnId": turn_id,
            "model": model,
        }
        if agent_id is not None:
            data["parentToolCallId"] = agent_id
        self.event("tool.execution_start", data, agent_id=agent_id, after_ms=2)

    def _tool_complete(
        self,
        tool: ToolCall,
        cid: str,
        *,
        turn_id: str,
        model: str,
        interaction_id: str | None,
        agent_id: str | None,
        ok: bool,
        result: str,
        error: str | None,
        after_ms: int,
    ) -> None:
        data: JSONDict = {"toolCallId": cid, "model": model}
        if interaction_id is not None:
            data["interactionId"] = interaction_id
        data["turnId"] = turn_id
        data["success"] = ok
        if ok:
            data["result"] = {"content": result, "detailedContent": result}
        else:
            data["error"] = {"message": error or result or "Tool failed", "code": tool.error_code}
        if agent_id is not None:
            data["parentToolCallId"] = agent_id
        self.event("tool.execution_complete", data, agent_id=agent_id, after_ms=max(1, after_ms))

    def _run_tools(
        self,
        tools: Sequence[ToolCall],
        ids: Sequence[str],
        *,
        parallel: bool,
        turn_id: str,
        model: str,
        interaction_id: str | None,
        agent_id: str | None = None,
    ) -> None:
        pairs = list(zip(tools, ids, strict=True))
        groups = [pairs] if parallel else [[p] for p in pairs]
        for group in groups:
            for tool, cid in group:
                self._tool_start(tool, cid, turn_id=turn_id, model=model, agent_id=agent_id)
            for tool, cid in group:
                if tool.never_completes:
                    continue
                ok, result, error = tool.ok, tool.result, tool.error
                if tool.subagent is not None:
                    if agent_id is not None:
                        raise ValueError("sub-agents cannot start sub-agents")
                    ok, result, error = self._run_subagent(tool.subagent, cid, tool)
                self._tool_complete(
                    tool,
                    cid,
                    turn_id=turn_id,
                    model=model,
                    interaction_id=interaction_id,
                    agent_id=agent_id,
                    ok=ok,
                    result=result,
                    error=error,
                    after_ms=tool.duration_ms,
                )

    def _ids_for(self, tools: Sequence[ToolCall]) -> list[str]:
        return [t.tool_call_id or self._call_id() for t in tools]

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
        turn_id = self._start_turn()
        iid = self._interaction
        use_model = model or self._model
        message_id: str | None = None
        ids = self._ids_for(tools)
        if text is None and not tools:
            self.advance(duration_ms)
        else:
            message_id = self._assistant_message(
                text or "",
                tools,
                ids,
                model=use_model,
                output_tokens=output_tokens,
                duration_ms=duration_ms,
                interaction_id=iid,
                turn_id=turn_id,
            )
            self._run_tools(
                tools,
                ids,
                parallel=parallel,
                turn_id=turn_id,
                model=use_model,
                interaction_id=iid,
            )
        if end:
            self.end_turn()
        return TurnRecord(turn_id, iid, message_id, tuple(ids))

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
    ) -> TurnRecord:
        """A main turn with one ``task`` call whose sub-agent makes ``llm_calls`` LLM calls and
        ``tool_calls`` tool calls (or runs ``subagent``); ``error`` makes it fail.

        The task's toolCallId (= the sub-agent lines' ``agentId``) is ``tool_call_ids[0]``.
        """
        call = task(
            prompt, subagent=subagent, llm_calls=llm_calls, tool_calls=tool_calls, error=error
        )
        return self.turn(text, [call], output_tokens=output_tokens, end=end)

    def _run_subagent(
        self, sub: Subagent, task_id: str, tool: ToolCall
    ) -> tuple[bool, str, str | None]:
        model = sub.model or self._model
        begun = self._clock
        self.event(
            "subagent.started",
            {
                "toolCallId": task_id,
                "agentName": sub.agent_name,
                "agentDisplayName": sub.display_name,
                "agentDescription": sub.description,
                "model": model,
            },
            agent_id=task_id,
            after_ms=15,
        )
        total_tools = 0
        total_tokens = 0
        last_text = ""
        if sub.steps:
            sub_iid = self._uuid()
            self.event(
                "system.message",
                {"role": "system", "content": _SUBAGENT_SYSTEM_PROMPT, "interactionId": sub_iid},
                agent_id=task_id,
                after_ms=900,
            )
            ts = self._clock + 6
            self.event(
                "user.message",
                {
                    "content": sub.prompt,
                    "transformedContent": f"<current_datetime>{_iso_offset(ts)}"
                    f"</current_datetime>\n\n{sub.prompt}",
                    "source": f"agent-{self._session_id}",
                    "attachments": [],
                    "supportedNativeDocumentMimeTypes": [],
                    "delivery": "idle",
                    "interactionId": sub_iid,
                    "parentAgentTaskId": self._uuid(),
                },
                agent_id=task_id,
                after_ms=6,
            )
            for i, step in enumerate(sub.steps):
                before = sum(u.input + u.output for u in self._usage.values())
                ids = self._ids_for(step.tools)
                self._assistant_message(
                    step.text,
                    step.tools,
                    ids,
                    model=model,
                    output_tokens=step.output_tokens,
                    duration_ms=step.duration_ms,
                    interaction_id=sub_iid,
                    turn_id=str(i),
                    agent_id=task_id,
                )
                total_tokens += sum(u.input + u.output for u in self._usage.values()) - before
                self._run_tools(
                    step.tools,
                    ids,
                    parallel=False,
                    turn_id=str(i),
                    model=model,
                    interaction_id=sub_iid,
                    agent_id=task_id,
                )
                total_tools += len(step.tools)
                last_text = step.text
        common: JSONDict = {
            "toolCallId": task_id,
            "agentName": sub.agent_name,
            "agentDisplayName": sub.display_name,
            "model": model,
            "totalToolCalls": total_tools,
        }
        if sub.error is None:
            common["totalTokens"] = total_tokens
            common["durationMs"] = self._clock + 20 - begun
            self.event("subagent.completed", common, agent_id=task_id, after_ms=20)
            return tool.ok, tool.result or last_text, tool.error
        common["durationMs"] = self._clock + 3 - begun
        common["error"] = sub.error
        self.event("subagent.failed", common, agent_id=task_id, after_ms=3)
        return False, "", sub.error

    # ---- session level --------------------------------------------------------------------

    def session_error(
        self,
        message: str,
        error_type: str = "query",
        status_code: int | None = None,
        *,
        after_ms: int = 6,
    ) -> None:
        data: JSONDict = {"errorType": error_type, "message": message}
        if status_code is not None:
            data["statusCode"] = status_code
        self.event("session.error", data, after_ms=after_ms)

    def abort(self, reason: str = "user initiated", *, after_ms: int = 50) -> None:
        self.event("abort", {"reason": reason}, after_ms=after_ms)

    def info(self, info_type: str, message: str, *, after_ms: int = 5) -> None:
        """``session.info`` (e.g. ``info_type="rewind"``)."""
        self.event("session.info", {"infoType": info_type, "message": message}, after_ms=after_ms)

    def compaction(self, tokens_removed: int, *, after_ms: int = 300) -> None:
        """``session.compaction_start`` then ``session.compaction_complete``.

        The compaction LLM call goes into tokenDetails and totalNanoAiu of the next shutdown,
        not into modelMetrics usage or requests.
        """
        pre = max(self._last_input, 0) + max(tokens_removed, 0) + 4_000
        post = pre - tokens_removed
        self.event("session.compaction_start", {}, after_ms=after_ms)
        c_in, c_out = pre, 900
        u = self._usage.setdefault(self._model, _Usage())
        u.compact_input += c_in
        u.compact_output += c_out
        u.compact_nano += _nano(c_in, 0, c_out)
        self.event(
            "session.compaction_complete",
            {
                "success": True,
                "preCompactionTokens": pre,
                "postCompactionTokens": post,
                "tokensRemoved": tokens_removed,
                "messagesRemoved": 12,
                "summaryContent": "<summary>Earlier work: read the code, made the first "
                "change, tests pass.</summary>",
                "compactionTokensUsed": {"input": c_in, "output": c_out, "cachedInput": 0},
            },
            after_ms=4_000,
        )

    def usage_checkpoint(
        self,
        total_nano_aiu: int | None = None,
        premium: float | None = None,
        *,
        after_ms: int = 150,
    ) -> None:
        """``session.usage_checkpoint``: running totals for the whole session (never decrease)."""
        nano, prem, _ = self._totals(self._usage)
        expires = _iso(self._clock + after_ms + 86_400_000)
        self.event(
            "session.usage_checkpoint",
            {
                "totalNanoAiu": nano if total_nano_aiu is None else total_nano_aiu,
                "totalPremiumRequests": _num(prem if premium is None else premium),
                "modelCacheState": [
                    {"modelId": m, "cacheExpiresAt": expires, "cacheTtlSeconds": 86_400}
                    for m, u in self._usage.items()
                    if u.requests
                ],
            },
            after_ms=after_ms,
        )

    def model_metrics(self, *, per_segment: bool = False) -> JSONDict:
        """The ``modelMetrics`` a shutdown written now would carry."""
        usage = self._segment_usage() if per_segment else self._usage
        metrics: JSONDict = {}
        for model, u in usage.items():
            if u.empty():
                continue
            metrics[model] = {
                "requests": {"count": u.requests, "cost": _num(u.cost)},
                "usage": {
                    "inputTokens": u.input,
                    "outputTokens": u.output,
                    "cacheReadTokens": u.cache_read,
                    "cacheWriteTokens": u.cache_write,
                    "reasoningTokens": u.reasoning,
                },
                "totalNanoAiu": u.nano + u.compact_nano,
                "tokenDetails": u.token_details(),
            }
        return metrics

    def _segment_usage(self) -> dict[str, _Usage]:
        return {
            m: u.minus(self._at_last_shutdown[m]) if m in self._at_last_shutdown else u.copy()
            for m, u in self._usage.items()
        }

    def shutdown(
        self,
        model_metrics: Mapping[str, Any] | None = None,
        *,
        premium_requests: float | None = None,
        nano_aiu: int | None = None,
        api_ms: int | None = None,
        lines_added: int = 0,
        lines_removed: int = 0,
        files_modified: Sequence[str] = (),
        token_details: Mapping[str, Any] | bool | None = None,
        per_segment: bool = False,
        shutdown_type: str = "routine",
        after_ms: int = 2000,
    ) -> None:
        """``session.shutdown``; ``eventsFileSizeBytes`` is the byte offset of this line.

        By default usage is cumulative for the whole session (CLI 1.0.7x); ``per_segment=True``
        reports only what happened since the previous shutdown (older CLIs). Explicit
        arguments override the computed figures. ``token_details``: None = computed when
        there was usage, False = omitted, True = computed, a mapping = written as is.
        """
        usage = self._segment_usage() if per_segment else self._usage
        nano, prem, ms = self._totals(usage)
        metrics = (
            dict(model_metrics)
            if model_metrics is not None
            else self.model_metrics(per_segment=per_segment)
        )
        data: JSONDict = {
            "shutdownType": shutdown_type,
            "totalPremiumRequests": _num(prem if premium_requests is None else premium_requests),
            "totalNanoAiu": nano if nano_aiu is None else nano_aiu,
        }
        if isinstance(token_details, Mapping):
            data["tokenDetails"] = dict(token_details)
        elif token_details is True or (token_details is None and metrics):
            total = _Usage()
            for u in usage.values():
                for k in (
                    "input",
                    "cache_read",
                    "cache_write",
                    "output",
                    "compact_input",
                    "compact_output",
                ):
                    setattr(total, k, getattr(total, k) + getattr(u, k))
            data["tokenDetails"] = total.token_details()
        data["totalApiDurationMs"] = ms if api_ms is None else api_ms
        data["sessionStartTime"] = self._start_ms
        data["eventsFileSizeBytes"] = self._size
        data["codeChanges"] = {
            "linesAdded": lines_added,
            "linesRemoved": lines_removed,
            "filesModified": list(files_modified),
        }
        data["modelMetrics"] = metrics
        if metrics:
            data["currentModel"] = self._model
        system_tokens = 10_900 + len(self._system_prompt) // 4
        data["currentTokens"] = max(self._last_input, system_tokens)
        data["systemTokens"] = system_tokens
        data["conversationTokens"] = max(0, self._last_input - system_tokens)
        data["toolDefinitionsTokens"] = 7_582
        self.event("session.shutdown", data, after_ms=after_ms)
        self._at_last_shutdown = {m: u.copy() for m, u in self._usage.items()}

    def resume(self, *, after_ms: int = 60_000) -> None:
        """``session.resume`` with ``eventCount``/``eventsFileSizeBytes`` of the file before it."""
        if after_ms < 1:
            raise ValueError("after_ms must be >= 1")
        self.event(
            "session.resume",
            {
                "resumeTime": _iso(self._clock + after_ms),
                "eventCount": len(self._lines),
                "eventsFileSizeBytes": self._size,
                "selectedModel": self._model,
                "context": {"cwd": self._cwd, "gitRoot": self._cwd},
            },
            after_ms=after_ms,
        )

    def user_requested_shell(self, command: str, output: str, *, exit_code: int = 0) -> str:
        """A ``!cmd`` shell escape: ``tool.user_requested`` + a complete with no start."""
        cid = self._uuid()
        self.event(
            "tool.user_requested",
            {"toolCallId": cid, "toolName": "bash", "arguments": {"command": command}},
            after_ms=3000,
        )
        result = f"{output}\n<exited with exit code {exit_code}>"
        self.event(
            "tool.execution_complete",
            {
                "toolCallId": cid,
                "success": True,
                "result": {"content": result, "detailedContent": result},
                "isUserRequested": True,
            },
            after_ms=250,
        )
        return cid


# --------------------------------------------------------------------------------------------
# Damage helpers: pure functions on lines (bytes without the newline) or whole files
# --------------------------------------------------------------------------------------------

_TEXT_KEYS = (
    "content",
    "transformedContent",
    "message",
    "summary",
    "detailedContent",
    "prompt",
    "command",
    "reason",
)
_MARK = "@@synth-damage-mark@@"


def join_lines(lines: Sequence[bytes]) -> bytes:
    """Lines joined with ``\\n`` plus the trailing ``\\n``, as the CLI appends them."""
    return b"".join(line + b"\n" for line in lines)


def _find_text(obj: Any) -> tuple[Any, str | int] | None:
    """First free-text string (depth-first, keys in ``_TEXT_KEYS``): (container, key)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _TEXT_KEYS and isinstance(v, str):
                return obj, k
        for v in obj.values():
            found = _find_text(v)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find_text(v)
            if found is not None:
                return found
    return None


def _with_payload(line: bytes, payload: bytes) -> bytes:
    """Re-serialise ``line`` with raw ``payload`` bytes in the middle of a free-text string."""
    ev = orjson.loads(line)
    if not isinstance(ev, dict):
        raise ValueError("not a JSON object")
    found = _find_text(ev.get("data"))
    if found is None:
        raise ValueError(f"no free-text string value in data (looked for {_TEXT_KEYS})")
    container, key = found
    text: str = container[key]
    mid = len(text) // 2
    container[key] = text[:mid] + _MARK + text[mid:]
    out: bytes = orjson.dumps(ev)
    return out.replace(_MARK.encode(), payload, 1)


def raw_line_separator(line: bytes) -> bytes:
    """Put a raw U+2028 and a raw U+2029 inside a text value of the event.

    Still valid JSON and valid UTF-8, one physical line: a reader must parse it as the same
    event and must NOT report it. A reader that splits with ``str.splitlines()`` breaks it.
    """
    return _with_payload(line, "\u2028".encode() + b" " + "\u2029".encode())


def split_line(line: bytes) -> tuple[bytes, bytes]:
    """A literal newline inside a text value: the event spread over two physical lines.

    Neither half parses alone. A reader must report both physical lines; it can recover the
    event by joining them with an escaped newline (``first + b"\\\\n" + second``).
    """
    damaged = _with_payload(line, b"\n")
    first, second = damaged.split(b"\n", 1)
    return first, second


def glue_truncated(
    truncated_line: bytes, complete_line: bytes, *, keep: int | None = None
) -> bytes:
    """The first ``keep`` bytes (default: half) of one event with a complete event glued on.

    One physical line that does not parse; its suffix ``complete_line`` does. A reader must
    report the line and recover the glued complete event; the truncated one is lost.
    """
    k = len(truncated_line) // 2 if keep is None else keep
    if not 0 < k < len(truncated_line):
        raise ValueError("keep must cut the first event strictly inside it")
    return truncated_line[:k] + complete_line


def cut(data: bytes, *, keep: int | None = None) -> bytes:
    """The file ends mid-event: the last line cut (to ``keep`` bytes, default half), no newline.

    A reader must report the last physical line as truncated (a session still running or
    killed) and recover every event before it.
    """
    body = data[:-1] if data.endswith(b"\n") else data
    start = body.rfind(b"\n") + 1
    last = body[start:]
    k = len(last) // 2 if keep is None else keep
    if not 0 < k < len(last):
        raise ValueError("keep must cut the last line strictly inside it")
    return body[:start] + last[:k]


def nul_tail(data: bytes, n: int = 64) -> bytes:
    """``n`` NUL bytes appended at the end of the file (the padding a crash leaves).

    When ``data`` ends with a newline the NULs form a last physical line of their own; after
    :func:`cut` they sit at the end of the cut line. A reader must report that line as NUL
    padding and recover nothing from the NULs.
    """
    return data + b"\x00" * n


def crlf(line: bytes) -> bytes:
    """A ``\\r`` before the line's newline (CRLF ending).

    The ``\\r`` is JSON whitespace, so the event parses: a reader must recover it and report
    the line as a CRLF line ending (a warning, not lost data).
    """
    return line + b"\r"


def invalid_utf8(line: bytes, bad: bytes = b"\xff") -> bytes:
    """A byte that is not UTF-8 inside a text value of the event.

    Strict UTF-8 JSON decoding fails: a reader must report the line; it may recover the event
    by decoding with replacement (the text then holds U+FFFD).
    """
    return _with_payload(line, bad)


def blank_line(whitespace: bytes = b"") -> bytes:
    """An empty (or whitespace-only) physical line: no event; a reader must report it."""
    return whitespace


def not_an_event(kind: Literal["object", "array", "scalar"] = "object") -> bytes:
    """Valid JSON that is not an event (``{"hello":1}``, ``[1,2]`` or ``42``).

    A reader must report the line as "not an event" and go on.
    """
    return {"object": b'{"hello":1}', "array": b"[1,2]", "scalar": b"42"}[kind]


def duplicate(line: bytes) -> tuple[bytes, bytes]:
    """A replayed line: the same event (same ``id``) written twice, one after the other.

    A reader must keep the first, report the second as a duplicate id, and count it once.
    """
    return line, bytes(line)
