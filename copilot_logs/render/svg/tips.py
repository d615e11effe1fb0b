"""The tooltips of a timeline picture's marks: what an interaction, a turn, a tool, a sub-agent
run, its calls and an event were, as raw text (the marks escape it)."""

from __future__ import annotations

from typing import Any

from copilot_logs.render.svg.marks import duration, offset, preview

Node = dict[str, Any]


def _timed(node: Node) -> str:
    """When a mark's node started, and how long it took."""
    return f"at {offset(node['offset_ms'])}, took {duration(node.get('duration_ms'))}"


def interaction_tip(node: Node) -> str:
    names = {"nudge": "autopilot nudge", "prompt": "prompt", "none": "no message"}
    trigger = names.get(node["trigger"], node["trigger"])
    lines = [
        f"Interaction #{node['interaction_index']} ({trigger})",
        _timed(node),
        f"{node.get('llm_calls', 0)} LLM calls, {node.get('tool_calls', 0)} tools "
        f"({node.get('failed_tool_calls', 0)} failed), "
        f"{node.get('subagent_calls', 0)} sub-agent calls",
    ]
    if node.get("task_complete"):
        lines.append("task_complete called")
    if node.get("text"):
        lines.append(f"“{preview(node['text'])}”")
    return "\n".join(lines)


def turn_tip(turn: Node, interaction: int) -> str:
    left = " at shutdown" if turn.get("open_at_shutdown") else ""  # the user quit while it ran
    state = f"open{left} (no turn_end)" if turn["open"] else f"took {duration(turn['duration_ms'])}"
    if turn.get("interrupted"):
        state = "interrupted: its run was killed or crashed, and the session resumed later"
    lines = [
        f"Turn {turn['turn_index']} (turn id {turn['turn_id']}), interaction #{interaction}",
        f"at {offset(turn['offset_ms'])}, {state}",
        f"model {turn.get('model') or '?'}, {turn.get('output_tokens') or 0} output tokens",
        f"{turn['tool_calls']} tools ({turn['failed_tool_calls']} failed)",
    ]
    if turn.get("requested_tools"):
        lines.append("requested: " + ", ".join(map(str, turn["requested_tools"][:12])))
    if turn.get("task_complete_event"):
        lines.append("task_complete")
    if turn.get("text"):
        lines.append(f"“{preview(turn['text'])}”")
    return "\n".join(lines)


def _tool_status(tool: Node) -> str:
    return "open at shutdown" if tool.get("open_at_shutdown") else str(tool["status"])


def tool_tip(tool: Node, where: str) -> str:
    lines = [
        f"{tool['name'] or '?'} ({_tool_status(tool)}), {where}",
        _timed(tool),
    ]
    if tool.get("arguments"):
        lines.append(f"arguments: {preview(tool['arguments'], 80)}")
    if tool.get("error"):
        lines.append(f"error: {preview(tool['error'])}")
    return "\n".join(lines)


def run_tip(run: Node, name: str, interaction: int) -> str:
    lines = [
        f"Sub-agent {name} ({run.get('status') or '?'}), interaction #{interaction}",
        _timed(run),
        f"{run['llm_calls']} LLM calls, {run['tool_calls']} tools "
        f"({run['failed_tool_calls']} failed)",
    ]
    if run.get("error"):
        lines.append(f"error: {preview(run['error'])}")
    if run.get("prompt"):
        lines.append(f"“{preview(run['prompt'])}”")
    return "\n".join(lines)


def call_tip(call: Node, name: str) -> str:
    lines = [
        f"{name} call {call['call_index']} (turn id {call['turn_id']})",
        _timed(call),
        f"model {call.get('model') or '?'}, {call['tool_calls']} tools "
        f"({call['failed_tool_calls']} failed)",
    ]
    if call.get("text"):
        lines.append(f"“{preview(call['text'])}”")
    return "\n".join(lines)


def event_tip(event: Node) -> str:
    lines = [f"{event['type']} (line {event['line']})", f"at {offset(event['offset_ms'])}"]
    if event.get("text"):
        lines.append(preview(event["text"]))
    return "\n".join(lines)
