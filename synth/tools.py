"""The tool calls a turn makes, as plain data, and factories with the CLI's argument names.

A :class:`ToolCall` says what to write; :class:`Subagent` and :class:`SubagentStep` say what
the sub-agent of a ``task`` call writes while the tool runs. Nothing here writes an event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JSONDict = dict[str, Any]


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

    ``scheme`` is how the CLI version marks the sub-agent's lines (docs/compatibility.md):
    ``task-id`` (1.0.3x to 1.0.80: envelope agentId = the task's toolCallId),
    ``parent`` (1.0.2x: no agentId, ``data.parentToolCallId``; no prompt lines of its own) or
    ``instance`` (1.0.85 on: agentId = an instance id its ``subagent.started`` links to the
    task; ``subagent.configured``; each call in its own turn pair).
    """

    prompt: str
    steps: Sequence[SubagentStep] = ()
    error: str | None = None
    agent_name: str = "task"
    display_name: str = "Task Agent"
    description: str = "Runs development commands and returns a brief summary."
    model: str | None = None
    scheme: str = "task-id"


SCHEMES = ("parent", "task-id", "instance")
"""The ways CLI versions mark a sub-agent's lines, oldest first (see :class:`Subagent`)."""


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
    scheme: str = "task-id",
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
    return Subagent(prompt=prompt, steps=tuple(steps), error=error, scheme=scheme)


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
    scheme: str = "task-id",
) -> ToolCall:
    """A main-agent ``task`` call whose sub-agent is ``subagent`` (or a :func:`subagent_plan`
    marked by ``scheme``)."""
    sub = subagent or subagent_plan(
        llm_calls, tool_calls, prompt=prompt, error=error, scheme=scheme
    )
    args = {
        "description": description,
        "prompt": prompt,
        "agent_type": sub.agent_name,
        "name": name,
        "mode": "sync",
    }
    return ToolCall("task", args, result=result, subagent=sub, duration_ms=duration_ms)
