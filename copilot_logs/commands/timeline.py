"""Each session's agent loop, reconstructed: interactions -> turns -> tools and sub-agents.

``timeline(result)`` returns plain nested dicts, ready for JSON: one per session log, with
its interactions (what started each: a typed prompt or an autopilot nudge), their turns (one
per main-agent LLM call, open turns included) with the tools each turn ran and the
sub-agent runs its ``task`` calls spawned (each with its own LLM calls and tools), and the
lifecycle events (errors, compaction, resume, mode and model changes, aborts,
``session.task_complete``) at the place they happened. ``turn_rows(sessions)`` flattens it
to one row per LLM call, for ndjson and csv.

Times are ISO-8601 UTC strings; ``offset_ms`` is milliseconds since the session start.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from datetime import datetime
from typing import Any

import orjson
import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.ingest.reader import ReadResult

Node = dict[str, Any]

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


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _ms(later: datetime | None, earlier: datetime | None) -> int | None:
    if later is None or earlier is None:
        return None
    delta = later - earlier
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


SessionKey = tuple[str, str]
"""(file, session_id): one session log (see :data:`copilot_logs.derive.SESSION`)."""


def _by_session(frame: pl.DataFrame) -> dict[SessionKey, list[dict[str, Any]]]:
    grouped: dict[SessionKey, list[dict[str, Any]]] = defaultdict(list)
    for row in frame.iter_rows(named=True):
        grouped[(row["file"], row["session_id"])].append(row)
    return grouped


# --- the frames the tree is built from ------------------------------------------------------


def _tool_frame(annotated: pl.DataFrame) -> pl.DataFrame:
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


def _subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent LLM call (its first assistant.message chunk), with the time of
    the agent's previous line: sub-agents write no turn events, so a call is taken to start
    when the agent's previous line (its prompt, or the last tool result) was written."""
    agent_rows = annotated.filter(pl.col("agent_id").is_not_null())
    return (
        agent_rows.with_columns(
            previous_at=pl.col("timestamp").shift(1).over(*SESSION, "agent_id"),
            is_call=pl.col("subagent_call"),
        )
        .filter("is_call")
        .select(
            *SESSION,
            "agent_id",
            "line",
            "event_id",
            "timestamp",
            "previous_at",
            "turn_id",
            "model",
            "text",
            "output_tokens",
            requested_tools=pl.col("tool_requests").list.eval(pl.element().struct.field("name")),
        )
    )


def _events_frame(annotated: pl.DataFrame) -> pl.DataFrame:
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
        "detail",
        "stray_end",
    )


def _interaction_frame(annotated: pl.DataFrame) -> pl.DataFrame:
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


def _subagent_prompts(annotated: pl.DataFrame) -> dict[tuple[str, str, str], str | None]:
    prompts = (
        annotated.filter(pl.col("agent_id").is_not_null() & (TYPE == "user.message"))
        .group_by(*SESSION, "agent_id", maintain_order=True)
        .agg(prompt=pl.col("text").first())
    )
    return {
        (row["file"], row["session_id"], row["agent_id"]): row["prompt"]
        for row in prompts.iter_rows(named=True)
    }


# --- event texts -----------------------------------------------------------------------------


def _detail(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("detail")
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def event_text(row: dict[str, Any]) -> str:
    """A short line saying what a lifecycle event did."""
    kind = row["type"]
    data = _detail(row)
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
        label = data.get("infoType") or data.get("warningType")
        return f"{label}: {text}" if label else text
    if kind == "session.compaction_start":
        return "compaction started"
    if kind == "session.compaction_complete":
        if data.get("success") is False:
            return f"compaction failed: {data.get('error') or 'no reason given'}"
        removed = data.get("tokensRemoved")
        return f"compaction removed {removed:,} tokens" if isinstance(removed, int) else "compacted"
    if kind == "session.resume":
        count = data.get("eventCount")
        return f"resumed after {count:,} events" if isinstance(count, int) else "resumed"
    if kind == "session.shutdown":
        return f"shutdown ({data.get('shutdownType') or 'unknown'})"
    if kind == "session.mode_changed":
        new = data.get("newMode") or row.get("agent_mode")
        old = data.get("previousMode")
        return f"mode {old} -> {new}" if old else f"mode {new}"
    if kind == "session.model_change":
        new = data.get("newModel") or row.get("model")
        old = data.get("previousModel")
        return f"model {old} -> {new}" if old else f"model {new}"
    if kind == "session.auto_mode_resolved":
        return f"auto model resolved to {row.get('model')}"
    if kind == "session.task_complete":
        success = row.get("success")
        verdict = row.get("outcome") or (
            "done" if success is None else ("success" if success else "failure")
        )
        return f"task complete ({verdict}): {text}" if text else f"task complete ({verdict})"
    if kind == "abort":
        return f"aborted: {text}" if text else "aborted"
    return text or kind


# --- the tree ----------------------------------------------------------------------------------


class _Session:
    """Builds one session's tree from the rows of its file."""

    def __init__(self, facts: dict[str, Any], include_tools: bool) -> None:
        self.facts = facts
        self.start: datetime | None = facts["started_at"]
        self.include_tools = include_tools
        self.shutdown_line: int | None = None
        """The line of the session's last session.shutdown: what is open before it was left
        open when the user ended the session, not cut off."""

    def left_open(self, line: int | None) -> bool:
        """Whether something still open that began on ``line`` was open at a shutdown."""
        return self.shutdown_line is not None and line is not None and line < self.shutdown_line

    def offset(self, moment: datetime | None) -> int | None:
        return _ms(moment, self.start)

    def event(self, row: dict[str, Any]) -> Node:
        return {
            "type": row["type"],
            "line": row["line"],
            "event_id": row["event_id"],
            "timestamp": iso(row["timestamp"]),
            "offset_ms": self.offset(row["timestamp"]),
            "text": event_text(row),
        }

    def tool(self, row: dict[str, Any]) -> Node:
        if row["completed_at"] is None:
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
            "open_at_shutdown": status == "open" and self.left_open(row["line"]),
            "error": row["error"],
            "error_code": row["error_code"] if status == "failed" else None,
            "user_requested": row["is_user_requested"],
            "arguments": row["arguments"],
        }

    def tools(self, rows: list[dict[str, Any]]) -> list[Node]:
        return [self.tool(row) for row in rows] if self.include_tools else []

    def turn(
        self,
        row: dict[str, Any],
        tools: list[dict[str, Any]],
        events: list[dict[str, Any]],
        subagents: list[Node],
    ) -> Node:
        ended_at = row["ended_at"]
        node: Node = {
            "turn_index": row["turn_index"],
            "turn_id": row["turn_id"],
            "interaction_id": row["interaction_id"],
            "line": row["line"],
            "event_id": row["event_id"],
            "started_at": iso(row["started_at"]),
            "offset_ms": self.offset(row["started_at"]),
            "ended_at": iso(ended_at),
            "duration_ms": row["duration_ms"],
            "elapsed_ms": _ms(ended_at or row["last_event_at"], row["started_at"]),
            "open": row["open"],
            "open_at_shutdown": row["open"] and self.left_open(row["line"]),
            "model": row["model"],
            "text": row["text"],
            "messages": row["messages"],
            "output_tokens": row["output_tokens"],
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
        if not self.include_tools:
            del node["tools"]
        return node

    def subagent(
        self,
        run: dict[str, Any],
        prompt: str | None,
        calls: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        events: list[dict[str, Any]],
    ) -> Node:
        call_lines = [call["line"] for call in calls]
        tools_by_call: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for tool in tools:
            tools_by_call[bisect_right(call_lines, tool["line"])].append(tool)
        call_nodes = []
        for number, call in enumerate(calls, start=1):
            own_tools = tools_by_call.get(number, [])
            ends = [call["timestamp"], *(t["completed_at"] for t in own_tools)]
            ended_at = max((moment for moment in ends if moment is not None), default=None)
            started_at = call["previous_at"] or call["timestamp"]
            node: Node = {
                "call_index": number,
                "turn_id": call["turn_id"],
                "line": call["line"],
                "event_id": call["event_id"],
                "started_at": iso(started_at),
                "offset_ms": self.offset(started_at),
                "duration_ms": _ms(ended_at, started_at),
                "open": run["status"] == "running" and number == len(calls),
                "open_at_shutdown": run["status"] == "running"
                and number == len(calls)
                and self.left_open(call["line"]),
                "model": call["model"] or run["model"],
                "text": call["text"],
                "output_tokens": call["output_tokens"],
                "requested_tools": call["requested_tools"] or [],
                "tool_calls": sum(1 for t in own_tools if t["started_at"] is not None),
                "failed_tool_calls": sum(1 for t in own_tools if t["success"] is False),
                "ended_loop": not call["requested_tools"],
                "tools": self.tools(own_tools),
            }
            if not self.include_tools:
                del node["tools"]
            call_nodes.append(node)
        node = {
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
        if not self.include_tools:
            del node["tools"]
        return node


def _run_without_lifecycle(
    agent: str,
    calls: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> dict[str, Any]:
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


def _build_session(
    builder: _Session,
    turns: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    events: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    prompts: dict[tuple[str, str, str], str | None],
) -> Node:
    facts = builder.facts
    file = facts["file"]
    session_id = facts["session_id"]
    builder.shutdown_line = max(
        (e["line"] for e in events if e["type"] == "session.shutdown"), default=None
    )
    message_lines = [row["line"] for row in messages]

    def interaction_of(line: int) -> int:
        return bisect_right(message_lines, line)

    # Sub-agents first: each nests under the turn of the task call that spawned it (its
    # agentId is that call's toolCallId), which also holds for runs that outlive the turn.
    task_turn = {
        t["tool_call_id"]: t["turn_index"]
        for t in tools
        if t["agent_id"] is None and t["turn_index"] is not None
    }
    calls_by_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        calls_by_agent[call["agent_id"]].append(call)
    agent_tools: dict[str, list[dict[str, Any]]] = defaultdict(list)
    main_tools_by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
    loose_tools: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for tool in tools:
        if tool["agent_id"] is not None:
            agent_tools[tool["agent_id"]].append(tool)
        elif tool["turn_index"] is not None:
            main_tools_by_turn[tool["turn_index"]].append(tool)
        else:
            loose_tools[interaction_of(tool["line"])].append(tool)
    agent_events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    turn_events: dict[int, list[dict[str, Any]]] = defaultdict(list)
    loose_events: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["agent_id"] is not None:
            agent_events[event["agent_id"]].append(event)
        elif event["in_turn"]:
            turn_events[event["turn_index"]].append(event)
        else:
            loose_events[event["interaction_index"]].append(event)

    turn_subagents: dict[int, list[Node]] = defaultdict(list)
    loose_subagents: dict[int, list[Node]] = defaultdict(list)
    known = {run["tool_call_id"] for run in runs}
    unknown = [
        agent
        for agent in dict.fromkeys([*calls_by_agent, *agent_tools, *agent_events])
        if agent not in known
    ]
    runs = runs + [
        _run_without_lifecycle(
            agent, calls_by_agent[agent], agent_tools[agent], agent_events[agent]
        )
        for agent in unknown
    ]
    runs.sort(key=lambda run: run["start_line"] or run["end_line"])
    for run in runs:
        agent = run["tool_call_id"]
        node = builder.subagent(
            run,
            prompts.get((file, session_id, agent)),
            calls_by_agent.get(agent, []),
            agent_tools.get(agent, []),
            agent_events.get(agent, []),
        )
        turn_index = task_turn.get(agent, run["turn_index"])
        if turn_index is not None:
            turn_subagents[turn_index].append(node)
        else:
            loose_subagents[interaction_of(node["line"])].append(node)

    interactions: dict[int, Node] = {}
    for message in messages:
        index = message["interaction_index"]
        interactions[index] = {
            "interaction_index": index,
            "interaction_id": message["interaction_id"],
            "trigger": "nudge" if message["is_nudge"] else "prompt",
            "text": message["text"],
            "agent_mode": message["agent_mode"],
            "line": message["line"],
            "event_id": message["event_id"],
            "started_at": iso(message["timestamp"]),
            "offset_ms": builder.offset(message["timestamp"]),
        }
    turns_by_interaction: dict[int, list[Node]] = defaultdict(list)
    for row in turns:
        index = row["turn_index"]
        turns_by_interaction[row["interaction_index"]].append(
            builder.turn(
                row,
                main_tools_by_turn.get(index, []),
                turn_events.get(index, []),
                turn_subagents.get(index, []),
            )
        )
    # Turns or tools before any user message (a log whose start was lost): interaction 0.
    if turns_by_interaction.get(0) or loose_tools.get(0) or loose_subagents.get(0):
        interactions[0] = _empty_interaction(0)

    interaction_nodes = []
    for index in sorted(interactions):
        node = interactions[index]
        own_turns = turns_by_interaction.get(index, [])
        node.update(_interaction_figures(node, own_turns))
        node["events"] = [builder.event(e) for e in loose_events.get(index, [])]
        if builder.include_tools:
            node["tools"] = [builder.tool(t) for t in loose_tools.get(index, [])]
        node["subagents"] = loose_subagents.get(index, [])
        node["turns"] = own_turns
        interaction_nodes.append(node)

    before = [] if 0 in interactions else loose_events.get(0, [])
    main_turns = [t for nodes in turns_by_interaction.values() for t in nodes]
    return {
        "session_id": facts["session_id"],
        "file": file,
        "started_at": iso(facts["started_at"]),
        "ended_at": iso(facts["last_at"]),
        "duration_ms": _ms(facts["last_at"], facts["started_at"]),
        "cwd": facts["cwd"],
        "repository": facts["repository"],
        "branch": facts["branch"],
        "cli_version": facts["cli_version"],
        "model": facts["model"],
        "llm_calls": len(main_turns),
        "open_turns": sum(1 for t in main_turns if t["open"]),
        "tool_calls": sum(t["tool_calls"] for t in main_turns),
        "failed_tool_calls": sum(t["failed_tool_calls"] for t in main_turns),
        "subagent_calls": len(calls),
        "events": [builder.event(e) for e in before],
        "interactions": interaction_nodes,
    }


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


def timeline(result: ReadResult, *, include_tools: bool = True) -> list[Node]:
    """One nested dict per session log read, newest first (see the module docstring).

    ``include_tools=False`` leaves out the ``tools`` lists (the counts stay).
    """
    annotated = derive.annotate(result.events)
    models = annotated.group_by(*SESSION, maintain_order=True).agg(model=derive.session_model())
    facts_frame = derive.session_facts(annotated).join(models, on=SESSION, how="left")
    turns = _by_session(derive.turns(annotated))
    tools = _by_session(_tool_frame(annotated))
    runs = _by_session(derive.subagent_runs(annotated))
    calls = _by_session(_subagent_calls(annotated))
    events = _by_session(_events_frame(annotated))
    messages = _by_session(_interaction_frame(annotated))
    prompts = _subagent_prompts(annotated)
    sessions = []
    for facts in facts_frame.iter_rows(named=True):
        key = (facts["file"], facts["session_id"])
        sessions.append(
            _build_session(
                _Session(facts, include_tools),
                turns.get(key, []),
                tools.get(key, []),
                runs.get(key, []),
                calls.get(key, []),
                events.get(key, []),
                messages.get(key, []),
                prompts,
            )
        )
    sessions.sort(key=lambda s: (s["file"], s["session_id"]))
    sessions.sort(key=lambda s: s["started_at"] or "", reverse=True)
    return sessions


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
