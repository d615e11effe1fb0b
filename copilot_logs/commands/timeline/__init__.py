"""Each session's agent loop, reconstructed: interactions -> turns -> tools and sub-agents.

``timeline(result)`` returns plain nested dicts, ready for JSON (docs/timeline.md, "JSON
fields"): one per session log, its interactions, their turns (one per main-agent LLM call)
with their tools and the sub-agent runs their ``task`` calls spawned, and the lifecycle events
where they happened; ``turn_rows(sessions)`` flattens it to one row per LLM call. What no turn
holds goes straight under its interaction ("loose"); what comes before any user message, under
an empty interaction 0.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.derive.calls import call_usage
from copilot_logs.ingest.reader import ReadResult

# Lifecycle events shown where they happened. A stray assistant.turn_end (one with no open
# turn) is shown too: it is where a log lost or repeated lines.
EVENT_TYPES = frozenset(
    {
        "session.error",
        "session.warning",
        "session.info",
        "session.compaction_start",
        "session.compaction_complete",
        "session.resume",
        "session.shutdown",
        "session.mode_changed",
        "session.model_change",
        "session.auto_mode_resolved",
        "session.task_complete",
        "session.truncation",
        "abort",
    }
)

SessionKey = tuple[str, str]
"""(file, session_id): one session log (see :data:`copilot_logs.derive.SESSION`)."""


@dataclass(frozen=True)
class SessionRows:
    """The rows of one session log, from each frame, in file order."""

    turns: list[Row]
    tools: list[Row]
    runs: list[Row]
    calls: list[Row]
    events: list[Row]
    messages: list[Row]

    @classmethod
    def empty(cls) -> SessionRows:
        return cls([], [], [], [], [], [])


def rows_by_session(annotated: pl.DataFrame) -> dict[SessionKey, SessionRows]:
    """Every session log's rows of every frame (a log with none of a kind gets none)."""
    usage = call_figures(annotated)
    frames = [
        _by_session(derive.turns(annotated).join(usage, on=[*SESSION, "line"], how="left")),
        _by_session(tool_frame(annotated)),
        _by_session(derive.subagent_runs(annotated)),
        _by_session(subagent_calls(annotated).join(usage, on=[*SESSION, "line"], how="left")),
        _by_session(events_frame(annotated)),
        _by_session(interaction_frame(annotated)),
    ]
    keys = dict.fromkeys(key for frame in frames for key in frame)
    return {key: SessionRows(*(frame.get(key, []) for frame in frames)) for key in keys}


CALL_FIGURES = (
    "input_tokens",
    "cache_read_tokens",
    "ai_credits",
    "credits_status",
    "ttft_ms",
    "api_call_id",
    "usage_source",
)
"""What a call node shows of its usage (:mod:`copilot_logs.derive.calls`)."""


def call_figures(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per LLM call (by its line), the figures of its usage record, where it has one."""
    return (
        call_usage(annotated)
        .rename({"source": "usage_source", "output_tokens": "record_output_tokens"})
        .select(*SESSION, "line", *CALL_FIGURES, "record_output_tokens")
        .unique(subset=[*SESSION, "line"], keep="first")
    )


def _by_session(frame: pl.DataFrame) -> dict[SessionKey, list[Row]]:
    grouped: dict[SessionKey, list[Row]] = defaultdict(list)
    for row in frame.iter_rows(named=True):
        grouped[(row["file"], row["session_id"])].append(row)
    return grouped


def tool_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """Tool executions, with their error code, and the name and command a ``!cmd`` shell
    escape gives in its tool.user_requested line (its complete has neither)."""
    keys = [*SESSION, "tool_call_id"]
    requested = (
        annotated.filter(TYPE == "tool.user_requested")
        .select(*keys, requested_name="tool_name", requested_text="text")
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    codes = (
        annotated.filter(TYPE == "tool.execution_complete")
        .select(*keys, "error_code")
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    return (
        derive.tools(annotated)
        .join(requested, on=keys, how="left")
        .join(codes, on=keys, how="left")
        .with_columns(
            tool_name=pl.coalesce("tool_name", "requested_name"),
            arguments=pl.coalesce("arguments", "requested_text"),
        )
    )


def subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent LLM call (:func:`copilot_logs.derive.subagent_calls`)."""
    return derive.subagent_calls(annotated).select(
        *SESSION,
        "agent_id",
        "line",
        "event_id",
        "timestamp",
        "previous_at",
        "ended_at",
        "open",
        "state",
        "turn_id",
        "model",
        "text",
        "output_tokens",
        "requested_tools",
    )


def events_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """The lifecycle events (:data:`EVENT_TYPES`), stray turn ends and queued messages."""
    shown = TYPE.is_in(list(EVENT_TYPES)) | pl.col("stray_end") | pl.col("is_queued")
    return annotated.filter(shown).select(
        *SESSION,
        "line",
        "event_id",
        "type",
        "timestamp",
        "agent_id",
        "in_turn",
        "turn_index",
        "interaction_index",
        "turn_id",
        "text",
        "error",
        "error_code",
        "model",
        "agent_mode",
        "success",
        "outcome",
        "stray_end",
        "info_type",
        "warning_type",
        "event_count",
        "shutdown_type",
        "tokens_removed",
        "compaction_success",
        "compaction_error",
        "previous_mode",
        "previous_model",
    )


def interaction_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """The main agent's user messages, each starting an interaction."""
    # A queued message joins its interaction: it is shown as an event there, not as a new one.
    return annotated.filter(MAIN & (TYPE == "user.message") & ~pl.col("is_queued")).select(
        *SESSION,
        "line",
        "event_id",
        "timestamp",
        "interaction_index",
        "interaction_id",
        "text",
        "is_nudge",
        "agent_mode",
    )


def subagent_prompts(annotated: pl.DataFrame) -> dict[tuple[str, str, str], str | None]:
    """Each sub-agent's prompt (its first user message), by (file, session_id, agent_id)."""
    prompts = (
        annotated.filter(pl.col("agent_id").is_not_null() & (TYPE == "user.message"))
        .group_by(*SESSION, "agent_id", maintain_order=True)
        .agg(prompt=pl.col("text").first())
    )
    return {
        (row["file"], row["session_id"], row["agent_id"]): row["prompt"]
        for row in prompts.iter_rows(named=True)
    }


Node = dict[str, Any]
Row = dict[str, Any]


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def ms_between(later: datetime | None, earlier: datetime | None) -> int | None:
    if later is None or earlier is None:
        return None
    delta = later - earlier
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


# --- event texts -----------------------------------------------------------------------------


def event_text(row: Row) -> str:
    """A short line saying what a lifecycle event did (its payload fields as the session model
    reads them: :data:`copilot_logs.derive.events.LIFECYCLE`)."""
    kind = row["type"]
    text = row.get("text") or ""
    if row.get("stray_end") or kind == derive.TURN_END:
        return f"turn_end with no open turn (turn id {row.get('turn_id')})"
    if kind == "user.message":
        return f"queued message: {text}" if text else "queued message"
    if kind == "session.error":
        code = row.get("error_code")
        message = row.get("error") or text
        return f"{code}: {message}" if code else message
    if kind in ("session.warning", "session.info"):
        label = row.get("info_type") or row.get("warning_type")
        return f"{label}: {text}" if label else text
    if kind in ("session.compaction_start", "session.compaction_complete"):
        return _compaction_text(kind, row)
    if kind == "session.resume":
        count = row.get("event_count")
        return f"resumed after {count:,.0f} events" if count is not None else "resumed"
    if kind == "session.shutdown":
        return f"shutdown ({row.get('shutdown_type') or 'unknown'})"
    if kind == "session.mode_changed":
        return _change_text("mode", row.get("agent_mode"), row.get("previous_mode"))
    if kind == "session.model_change":
        return _change_text("model", row.get("model"), row.get("previous_model"))
    if kind == "session.auto_mode_resolved":
        return f"auto model resolved to {row.get('model')}"
    if kind == "session.task_complete":
        return _task_complete_text(row, text)
    if kind == "abort":
        return f"aborted: {text}" if text else "aborted"
    return text or kind


def _compaction_text(kind: str, row: Row) -> str:
    if kind == "session.compaction_start":
        return "compaction started"
    if row.get("compaction_success") is False:
        return f"compaction failed: {row.get('compaction_error') or 'no reason given'}"
    removed = row.get("tokens_removed")
    if removed is None:
        return "compacted"
    if removed < 0:  # the summary was longer than what it replaced
        return f"compaction grew the context by {-removed:,} tokens"
    return f"compaction removed {removed:,} tokens"


def _change_text(label: str, new: str | None, previous: str | None) -> str:
    return f"{label} {previous} -> {new}" if previous else f"{label} {new}"


def _task_complete_text(row: Row, text: str) -> str:
    success = row.get("success")
    verdict = row.get("outcome") or (
        "done" if success is None else ("success" if success else "failure")
    )
    return f"task complete ({verdict}): {text}" if text else f"task complete ({verdict})"


# --- the nodes ---------------------------------------------------------------------------------


class SessionNodes:
    """Makes the nodes of one session log, timed from its start."""

    def __init__(self, facts: Row, include_tools: bool) -> None:
        self.facts = facts
        self.start: datetime | None = facts["started_at"]
        self.include_tools = include_tools

    def offset(self, moment: datetime | None) -> int | None:
        return ms_between(moment, self.start)

    def placed(self, row: Row, moment: datetime | None, name: str = "started_at") -> Node:
        """Where a node's event is: its line and id, ``moment`` (as ``name``) and its offset."""
        return {
            "line": row["line"],
            "event_id": row["event_id"],
            name: iso(moment),
            "offset_ms": self.offset(moment),
        }

    def _shaped(self, node: Node) -> Node:
        """``node`` without its ``tools`` list when tools are left out (the counts stay)."""
        if not self.include_tools:
            del node["tools"]
        return node

    def event(self, row: Row) -> Node:
        return {
            "type": row["type"],
            **self.placed(row, row["timestamp"], "timestamp"),
            "text": event_text(row),
        }

    def tool(self, row: Row) -> Node:
        if row["state"] == derive.INTERRUPTED:
            status = "interrupted"
        elif row["completed_at"] is None:
            status = "open"
        else:
            status = "failed" if row["success"] is False else "ok"
        return {
            "tool_call_id": row["tool_call_id"],
            "name": row["tool_name"],
            "line": row["line"],
            "started_at": iso(row["started_at"]),
            "offset_ms": self.offset(row["started_at"] or row["completed_at"]),
            "completed_at": iso(row["completed_at"]),
            "duration_ms": row["duration_ms"],
            "status": status,
            "open_at_shutdown": row["state"] == derive.OPEN_AT_SHUTDOWN,
            "error": row["error"],
            "error_code": row["error_code"] if status == "failed" else None,
            "user_requested": row["is_user_requested"],
            "arguments": row["arguments"],
        }

    def tools(self, rows: list[Row]) -> list[Node]:
        return [self.tool(row) for row in rows] if self.include_tools else []

    def turn(self, row: Row, tools: list[Row], events: list[Row], subagents: list[Node]) -> Node:
        """A main-agent turn (one LLM call), with its tools, events and sub-agent runs."""
        ended_at = row["ended_at"]
        return self._shaped(
            {
                "turn_index": row["turn_index"],
                "turn_id": row["turn_id"],
                "interaction_id": row["interaction_id"],
                **self.placed(row, row["started_at"]),
                "ended_at": iso(ended_at),
                "duration_ms": row["duration_ms"],
                "elapsed_ms": ms_between(ended_at or row["last_event_at"], row["started_at"]),
                "open": row["open"],
                "open_at_shutdown": row["state"] == derive.OPEN_AT_SHUTDOWN,
                "interrupted": row["state"] == derive.INTERRUPTED,
                "model": row["model"],
                "text": row["text"],
                "messages": row["messages"],
                "output_tokens": _output_tokens(row),
                **_figures(row),
                "requested_tools": row["requested_tools"],
                "tool_calls": row["tool_calls"],
                "failed_tool_calls": row["failed_tool_calls"],
                "task_complete_called": row["task_complete_called"],
                "task_complete_event": row["task_complete_event"],
                "ended_loop": row["ended_loop"],
                "events": [self.event(e) for e in events],
                "tools": self.tools(tools),
                "subagents": subagents,
            }
        )

    def subagent(
        self, run: Row, prompt: str | None, calls: list[Row], tools: list[Row], events: list[Row]
    ) -> Node:
        """A sub-agent run, with its LLM calls (each with the tools it ran) and events."""
        tools_by_call = _tools_by_call(calls, tools)
        running = run["status"] == "running"
        call_nodes = [
            self.subagent_call(
                run,
                number,
                call,
                tools_by_call.get(number, []),
                call["open"] if call["open"] is not None else running and last,
            )
            for number, call, last in _numbered(calls)
        ]
        return self._shaped(
            {
                "agent_id": run["tool_call_id"],
                "agent_name": run["agent_name"],
                "status": run["status"],
                "error": run["error"],
                "model": run["model"],
                "line": run["start_line"] if run["start_line"] is not None else run["end_line"],
                "started_at": iso(run["started_at"]),
                "offset_ms": self.offset(run["started_at"]),
                "ended_at": iso(run["finished_at"]),
                "duration_ms": run["duration_ms"],
                "prompt": prompt,
                "llm_calls": len(calls),
                "tool_calls": run["tool_calls"],
                "failed_tool_calls": run["failed_tool_calls"],
                "output_tokens": run["output_tokens"],
                "events": [self.event(e) for e in events],
                "tools": self.tools(tools_by_call.get(0, [])),
                "calls": call_nodes,
            }
        )

    def subagent_call(
        self, run: Row, number: int, call: Row, own_tools: list[Row], is_open: bool
    ) -> Node:
        """One LLM call of a sub-agent: from its turn_start (or, where it writes no turn
        pair, its previous line) to its turn_end or its last tool's end."""
        ends = [call["ended_at"] or call["timestamp"], *(t["completed_at"] for t in own_tools)]
        ended_at = max((moment for moment in ends if moment is not None), default=None)
        started_at = call["previous_at"] or call["timestamp"]
        return self._shaped(
            {
                "call_index": number,
                "turn_id": call["turn_id"],
                **self.placed(call, started_at),
                "duration_ms": ms_between(ended_at, started_at),
                "open": is_open,
                "open_at_shutdown": is_open and call["state"] == derive.OPEN_AT_SHUTDOWN,
                "interrupted": is_open and call["state"] == derive.INTERRUPTED,
                "model": call["model"] or run["model"],
                "text": call["text"],
                "output_tokens": _output_tokens(call),
                **_figures(call),
                "requested_tools": call["requested_tools"] or [],
                "tool_calls": sum(1 for t in own_tools if t["started_at"] is not None),
                "failed_tool_calls": sum(1 for t in own_tools if t["success"] is False),
                "ended_loop": not call["requested_tools"],
                "tools": self.tools(own_tools),
            }
        )


def _output_tokens(call: Row) -> Any:
    """The record's output tokens where the call has one, else its messages'."""
    if call.get("usage_source") == "exact":
        return call.get("record_output_tokens")
    return call["output_tokens"]


def _figures(call: Row) -> dict[str, Any]:
    """A call's usage figures (null where the log has no record of the call)."""
    return {name: call.get(name) for name in CALL_FIGURES}


def _numbered(calls: list[Row]) -> list[tuple[int, Row, bool]]:
    """Each call with its number (from 1) and whether it is the run's last."""
    return [(number, call, number == len(calls)) for number, call in enumerate(calls, start=1)]


def _tools_by_call(calls: list[Row], tools: list[Row]) -> dict[int, list[Row]]:
    """A sub-agent's tools by the number of the call before them (0: before its first call)."""
    call_lines = [call["line"] for call in calls]
    tools_by_call: dict[int, list[Row]] = defaultdict(list)
    for tool in tools:
        tools_by_call[bisect_right(call_lines, tool["line"])].append(tool)
    return tools_by_call


def run_without_lifecycle(agent: str, calls: list[Row], tools: list[Row], events: list[Row]) -> Row:
    """A sub-agent whose lines survive but whose subagent.started/completed do not (lost
    lines): still shown, with status ``unknown``, so none of its calls is dropped."""
    lines = [row["line"] for row in [*calls, *tools, *events]]
    moments = [row["timestamp"] for row in [*calls, *events]]
    moments += [row["started_at"] for row in tools]
    known_moments = [moment for moment in moments if moment is not None]
    return {
        "tool_call_id": agent,
        "agent_name": None,
        "status": "unknown",
        "error": None,
        "model": None,
        "start_line": min(lines, default=None),
        "end_line": None,
        "started_at": min(known_moments, default=None),
        "finished_at": None,
        "duration_ms": None,
        "tool_calls": sum(1 for t in tools if t["started_at"] is not None),
        "failed_tool_calls": sum(1 for t in tools if t["success"] is False),
        "output_tokens": sum(call["output_tokens"] or 0 for call in calls),
        "turn_index": None,
    }


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


TURN_ROW_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "interaction_index": pl.Int64(),
    "turn_index": pl.Int64(),
    "turn_id": pl.String(),
    "agent_id": pl.String(),
    "parent_turn_index": pl.Int64(),
    "started_at": pl.String(),
    "offset_ms": pl.Int64(),
    "duration_ms": pl.Int64(),
    "open": pl.Boolean(),
    "open_at_shutdown": pl.Boolean(),
    "model": pl.String(),
    "tool_calls": pl.Int64(),
    "failed_tool_calls": pl.Int64(),
    "ended_loop": pl.Boolean(),
    "task_complete_called": pl.Boolean(),
    "task_complete_event": pl.Boolean(),
    "output_tokens": pl.Int64(),
    "text": pl.String(),
    "line": pl.Int64(),
    "file": pl.String(),
}


def timeline(result: ReadResult, *, include_tools: bool = True) -> list[Node]:
    """One nested dict per session log read, newest first (see the module docstring).

    ``include_tools=False`` leaves out the ``tools`` lists (the counts stay).
    """
    annotated = derive.annotate(result.events)
    models = annotated.group_by(*SESSION, maintain_order=True).agg(model=derive.session_model())
    facts_frame = derive.session_facts(annotated).join(models, on=SESSION, how="left")
    rows = rows_by_session(annotated)
    prompts = subagent_prompts(annotated)
    sessions = [
        build_session(
            SessionNodes(facts, include_tools),
            rows.get((facts["file"], facts["session_id"])) or SessionRows.empty(),
            prompts,
        )
        for facts in facts_frame.iter_rows(named=True)
    ]
    return newest_first([sessions])


def newest_first(parts: list[list[Node]]) -> list[Node]:
    """The timelines of several batches as one list, newest session first."""
    sessions = [session for part in parts for session in part]
    sessions.sort(key=lambda s: (s["file"], s["session_id"]))
    sessions.sort(key=lambda s: s["started_at"] or "", reverse=True)
    return sessions


def turn_rows(sessions: list[Node]) -> pl.DataFrame:
    """One row per LLM call: main-agent turns (``agent_id`` null) and sub-agent calls
    (``agent_id`` = the spawning task's toolCallId, ``turn_index`` = the call's number in its
    run, ``parent_turn_index`` = the main turn that spawned it), in the order they started."""
    rows: list[dict[str, Any]] = []
    for session in sessions:
        rows.extend(_session_rows(session))
    return pl.DataFrame(rows, schema=TURN_ROW_SCHEMA)


def _session_rows(session: Node) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base = {"session_id": session["session_id"], "file": session["file"]}
    for interaction in session["interactions"]:
        index = interaction["interaction_index"]
        for turn in interaction["turns"]:
            main = {k: turn[k] for k in TURN_ROW_SCHEMA if k in turn}
            rows.append({**base, **main, "interaction_index": index, "agent_id": None})
            for run in turn["subagents"]:
                rows.extend(_call_rows(base, index, turn["turn_index"], run))
        for run in interaction["subagents"]:
            rows.extend(_call_rows(base, index, None, run))
    # A sub-agent's calls interleave with its parent turn's lines: order by where each
    # call starts in the file.
    return sorted(rows, key=lambda row: row["line"])


def _call_rows(
    base: dict[str, Any], interaction_index: int, parent: int | None, run: Node
) -> list[dict[str, Any]]:
    return [
        {
            **base,
            **{k: call[k] for k in TURN_ROW_SCHEMA if k in call},
            "interaction_index": interaction_index,
            "turn_index": call["call_index"],
            "agent_id": run["agent_id"],
            "parent_turn_index": parent,
            "task_complete_called": "task_complete" in call["requested_tools"],
            "task_complete_event": False,
        }
        for call in run["calls"]
    ]
