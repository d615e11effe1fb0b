"""One session's tree: its rows placed under interactions, turns and sub-agent runs.

A sub-agent run nests under the turn of the ``task`` call that spawned it (its agentId is that
call's toolCallId), which also holds for runs that outlive the turn. A tool, event or run that
no turn holds is placed straight under its interaction ("loose"); what comes before any user
message (a log whose start was lost) goes under an empty interaction 0.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Any

from copilot_logs.commands.timeline.frames import Row, SessionRows
from copilot_logs.commands.timeline.nodes import (
    Node,
    SessionNodes,
    iso,
    ms_between,
    run_without_lifecycle,
)

Prompts = dict[tuple[str, str, str], str | None]


class _Placement:
    """Where each row of one session goes: under a sub-agent, under a turn, or loose under
    its interaction."""

    def __init__(self, rows: SessionRows) -> None:
        self.message_lines = [row["line"] for row in rows.messages]
        self.agent_calls: dict[str, list[Row]] = defaultdict(list)
        for call in rows.calls:
            self.agent_calls[call["agent_id"]].append(call)
        self.agent_tools: dict[str, list[Row]] = defaultdict(list)
        self.turn_tools: dict[int, list[Row]] = defaultdict(list)
        self.loose_tools: dict[int, list[Row]] = defaultdict(list)
        for tool in rows.tools:
            self._place_tool(tool)
        self.agent_events: dict[str, list[Row]] = defaultdict(list)
        self.turn_events: dict[int, list[Row]] = defaultdict(list)
        self.loose_events: dict[int, list[Row]] = defaultdict(list)
        for event in rows.events:
            self._place_event(event)
        self.turn_subagents: dict[int, list[Node]] = defaultdict(list)
        self.loose_subagents: dict[int, list[Node]] = defaultdict(list)

    def interaction_of(self, line: int) -> int:
        return bisect_right(self.message_lines, line)

    def _place_tool(self, tool: Row) -> None:
        if tool["agent_id"] is not None:
            self.agent_tools[tool["agent_id"]].append(tool)
        elif tool["turn_index"] is not None:
            self.turn_tools[tool["turn_index"]].append(tool)
        else:
            self.loose_tools[self.interaction_of(tool["line"])].append(tool)

    def _place_event(self, event: Row) -> None:
        if event["agent_id"] is not None:
            self.agent_events[event["agent_id"]].append(event)
        elif event["in_turn"]:
            self.turn_events[event["turn_index"]].append(event)
        else:
            self.loose_events[event["interaction_index"]].append(event)

    def all_runs(self, runs: list[Row]) -> list[Row]:
        """The runs, with one of status ``unknown`` for every agent whose lines survive
        without its lifecycle events, in the order they start."""
        known = {run["tool_call_id"] for run in runs}
        seen = dict.fromkeys([*self.agent_calls, *self.agent_tools, *self.agent_events])
        unknown = [agent for agent in seen if agent not in known]
        every = runs + [
            run_without_lifecycle(
                agent, self.agent_calls[agent], self.agent_tools[agent], self.agent_events[agent]
            )
            for agent in unknown
        ]
        every.sort(key=lambda run: run["start_line"] or run["end_line"])
        return every

    def add_subagent(self, node: Node, turn_index: int | None) -> None:
        if turn_index is not None:
            self.turn_subagents[turn_index].append(node)
        else:
            self.loose_subagents[self.interaction_of(node["line"])].append(node)


def build_session(nodes: SessionNodes, rows: SessionRows, prompts: Prompts) -> Node:
    """The tree of one session log (see :func:`copilot_logs.commands.timeline.timeline`)."""
    place = _Placement(rows)
    _place_subagents(nodes, rows, place, prompts)
    heads = _interaction_heads(nodes, rows.messages)
    turns = _turns_by_interaction(nodes, rows.turns, place)
    if turns.get(0) or place.loose_tools.get(0) or place.loose_subagents.get(0):
        heads[0] = _empty_interaction(0)
    interactions = [
        _interaction(nodes, heads[index], turns.get(index, []), place, index)
        for index in sorted(heads)
    ]
    before = [] if 0 in heads else place.loose_events.get(0, [])
    main_turns = [turn for own in turns.values() for turn in own]
    return _session(nodes, rows, main_turns, [nodes.event(e) for e in before], interactions)


def _place_subagents(
    nodes: SessionNodes, rows: SessionRows, place: _Placement, prompts: Prompts
) -> None:
    file, session_id = nodes.facts["file"], nodes.facts["session_id"]
    task_turn = {
        t["tool_call_id"]: t["turn_index"]
        for t in rows.tools
        if t["agent_id"] is None and t["turn_index"] is not None
    }
    for run in place.all_runs(rows.runs):
        agent = run["tool_call_id"]
        node = nodes.subagent(
            run,
            prompts.get((file, session_id, agent)),
            place.agent_calls.get(agent, []),
            place.agent_tools.get(agent, []),
            place.agent_events.get(agent, []),
        )
        place.add_subagent(node, task_turn.get(agent, run["turn_index"]))


def _interaction_heads(nodes: SessionNodes, messages: list[Row]) -> dict[int, Node]:
    """The start of each interaction: the prompt or nudge that began it."""
    return {
        message["interaction_index"]: {
            "interaction_index": message["interaction_index"],
            "interaction_id": message["interaction_id"],
            "trigger": "nudge" if message["is_nudge"] else "prompt",
            "text": message["text"],
            "agent_mode": message["agent_mode"],
            **nodes.placed(message, message["timestamp"]),
        }
        for message in messages
    }


def _empty_interaction(index: int) -> Node:
    return {
        "interaction_index": index,
        "interaction_id": None,
        "trigger": "none",
        "text": None,
        "agent_mode": None,
        "line": None,
        "event_id": None,
        "started_at": None,
        "offset_ms": None,
    }


def _turns_by_interaction(
    nodes: SessionNodes, turns: list[Row], place: _Placement
) -> dict[int, list[Node]]:
    by_interaction: dict[int, list[Node]] = defaultdict(list)
    for row in turns:
        index = row["turn_index"]
        by_interaction[row["interaction_index"]].append(
            nodes.turn(
                row,
                place.turn_tools.get(index, []),
                place.turn_events.get(index, []),
                place.turn_subagents.get(index, []),
            )
        )
    return by_interaction


def _interaction(
    nodes: SessionNodes, head: Node, own_turns: list[Node], place: _Placement, index: int
) -> Node:
    head.update(_interaction_figures(head, own_turns))
    head["events"] = [nodes.event(e) for e in place.loose_events.get(index, [])]
    if nodes.include_tools:
        head["tools"] = [nodes.tool(t) for t in place.loose_tools.get(index, [])]
    head["subagents"] = place.loose_subagents.get(index, [])
    head["turns"] = own_turns
    return head


def _interaction_figures(node: Node, own_turns: list[Node]) -> dict[str, Any]:
    last = own_turns[-1] if own_turns else None
    ended_at: str | None = None
    duration_ms = None
    if last is not None:
        ended_at = last["ended_at"]
        if node["offset_ms"] is not None and last["offset_ms"] is not None:
            duration_ms = last["offset_ms"] + (last["elapsed_ms"] or 0) - node["offset_ms"]
    return {
        "ended_at": ended_at,
        "duration_ms": duration_ms,
        "llm_calls": len(own_turns),
        "tool_calls": sum(t["tool_calls"] for t in own_turns),
        "failed_tool_calls": sum(t["failed_tool_calls"] for t in own_turns),
        "subagent_calls": sum(s["llm_calls"] for t in own_turns for s in t["subagents"]),
        "ended_loop": bool(last and last["ended_loop"]),
        "task_complete": any(t["task_complete_event"] for t in own_turns),
    }


def _session(
    nodes: SessionNodes,
    rows: SessionRows,
    main_turns: list[Node],
    before: list[Node],
    interactions: list[Node],
) -> Node:
    facts = nodes.facts
    return {
        "session_id": facts["session_id"],
        "file": facts["file"],
        "started_at": iso(facts["started_at"]),
        "ended_at": iso(facts["last_at"]),
        "duration_ms": ms_between(facts["last_at"], facts["started_at"]),
        "cwd": facts["cwd"],
        "repository": facts["repository"],
        "branch": facts["branch"],
        "copilot_version": facts["copilot_version"],
        "model": facts["model"],
        "llm_calls": len(main_turns),
        "open_turns": sum(1 for t in main_turns if t["open"]),
        "interrupted_turns": sum(1 for t in main_turns if t["interrupted"]),
        "tool_calls": sum(t["tool_calls"] for t in main_turns),
        "failed_tool_calls": sum(t["failed_tool_calls"] for t in main_turns),
        "subagent_calls": len(rows.calls),
        "events": before,
        "interactions": interactions,
    }
