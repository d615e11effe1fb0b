"""Each session's agent loop, reconstructed: interactions -> turns -> tools and sub-agents.

``timeline(result)`` returns plain nested dicts, ready for JSON (docs/timeline.md, "JSON
fields"); ``turn_rows(sessions)`` flattens them to one row per LLM call. What no turn holds goes
straight under its interaction ("loose"); what comes before any user message, under an empty
interaction 0.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
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

Node = dict[str, Any]
Row = dict[str, Any]
Rows = dict[str, list[Row]]
Owner = tuple[str, Any]
"""Where a row goes: under a sub-agent (``agent``), a turn, or loose under an interaction."""

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


def rows_by_session(annotated: pl.DataFrame) -> dict[tuple[str, str], Rows]:
    """Every session log's rows of every kind, in file order (a log with none of a kind gets
    none). A queued message joins its interaction: it is an event there, not a new one."""
    usage = (
        call_usage(annotated)
        .rename({"source": "usage_source", "output_tokens": "record_output_tokens"})
        .select(*SESSION, "line", *CALL_FIGURES, "record_output_tokens")
        .unique(subset=[*SESSION, "line"], keep="first")
    )
    shown = TYPE.is_in(list(EVENT_TYPES)) | pl.col("stray_end") | pl.col("is_queued")
    frames = {
        "turns": derive.turns(annotated).join(usage, on=[*SESSION, "line"], how="left"),
        "tools": tool_frame(annotated),
        "runs": derive.subagent_runs(annotated),
        "calls": derive.subagent_calls(annotated).join(usage, on=[*SESSION, "line"], how="left"),
        "events": annotated.filter(shown),
        "messages": annotated.filter(MAIN & (TYPE == "user.message") & ~pl.col("is_queued")),
    }
    found: dict[tuple[str, str], Rows] = defaultdict(lambda: {kind: [] for kind in frames})
    for kind, frame in frames.items():
        for row in frame.iter_rows(named=True):
            found[(row["file"], row["session_id"])][kind].append(row)
    return found


def tool_frame(annotated: pl.DataFrame) -> pl.DataFrame:
    """Tool executions, with the name and command a ``!cmd`` shell escape gives in its
    tool.user_requested line (its complete has neither)."""
    keys = [*SESSION, "tool_call_id"]
    requested = (
        annotated.filter(TYPE == "tool.user_requested")
        .select(*keys, requested_name="tool_name", requested_text="text")
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    return (
        derive.tools(annotated)
        .join(requested, on=keys, how="left")
        .with_columns(
            tool_name=pl.coalesce("tool_name", "requested_name"),
            arguments=pl.coalesce("arguments", "requested_text"),
        )
    )


def subagent_prompts(annotated: pl.DataFrame) -> dict[tuple[str, str, str], str | None]:
    """Each sub-agent's prompt (its first user message), by (file, session_id, agent_id)."""
    prompts = (
        annotated.filter(pl.col("agent_id").is_not_null() & (TYPE == "user.message"))
        .group_by(*SESSION, "agent_id", maintain_order=True)
        .agg(prompt=pl.col("text").first())
    )
    return {(file, session, agent): prompt for file, session, agent, prompt in prompts.iter_rows()}


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def ms_between(later: datetime | None, earlier: datetime | None) -> int | None:
    if later is None or earlier is None:
        return None
    delta = later - earlier
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def event_text(row: Row) -> str:
    """A short line saying what a lifecycle event did."""
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
    if kind == "session.compaction_start":
        return "compaction started"
    if kind == "session.compaction_complete":
        removed = row.get("tokens_removed")
        if row.get("compaction_success") is False:
            return f"compaction failed: {row.get('compaction_error') or 'no reason given'}"
        if removed is None:
            return "compacted"
        if removed < 0:  # the summary was longer than what it replaced
            return f"compaction grew the context by {-removed:,} tokens"
        return f"compaction removed {removed:,} tokens"
    if kind == "session.resume":
        count = row.get("event_count")
        return f"resumed after {count:,.0f} events" if count is not None else "resumed"
    if kind == "session.shutdown":
        return f"shutdown ({row.get('shutdown_type') or 'unknown'})"
    changed = {"session.mode_changed": "mode", "session.model_change": "model"}.get(kind)
    if changed:
        new = row.get("agent_mode" if changed == "mode" else "model")
        previous = row.get(f"previous_{changed}")
        return f"{changed} {previous} -> {new}" if previous else f"{changed} {new}"
    if kind == "session.auto_mode_resolved":
        return f"auto model resolved to {row.get('model')}"
    if kind == "session.task_complete":
        success = row.get("outcome") or (
            "done" if row.get("success") is None else ("success" if row["success"] else "failure")
        )
        return f"task complete ({success}): {text}" if text else f"task complete ({success})"
    if kind == "abort":
        return f"aborted: {text}" if text else "aborted"
    return text or kind


def _call_usage(call: Row) -> dict[str, Any]:
    """A call's output tokens (its record's where it has one, else its messages') and its
    usage figures (null where the log has no record of the call)."""
    exact = call.get("usage_source") == "exact"
    return {
        "output_tokens": call.get("record_output_tokens") if exact else call["output_tokens"],
        **{name: call.get(name) for name in CALL_FIGURES},
    }


def _tool_counts(tools: list[Row]) -> dict[str, int]:
    return {
        "tool_calls": sum(1 for t in tools if t["started_at"] is not None),
        "failed_tool_calls": sum(1 for t in tools if t["success"] is False),
    }


class _Session:
    """The tree of one session log, its nodes timed from its start."""

    def __init__(self, facts: Row, rows: Rows, prompts: dict[Any, str | None], tools: bool) -> None:
        self.facts = facts
        self.start: datetime | None = facts["started_at"]
        self.rows = rows
        self.prompts = prompts
        self.include_tools = tools
        self.message_lines = [row["line"] for row in rows["messages"]]
        self.agent_calls: dict[str, list[Row]] = defaultdict(list)
        for call in rows["calls"]:
            self.agent_calls[call["agent_id"]].append(call)
        self.tools: dict[Owner, list[Row]] = defaultdict(list)
        for tool in rows["tools"]:
            self.tools[self._owner(tool["agent_id"], tool["turn_index"], tool["line"])].append(tool)
        self.events: dict[Owner, list[Row]] = defaultdict(list)
        for event in rows["events"]:
            turn = event["turn_index"] if event["in_turn"] else None
            owner = self._owner(event["agent_id"], turn, event["line"], event["interaction_index"])
            self.events[owner].append(event)
        self.subagents: dict[Owner, list[Node]] = defaultdict(list)

    def _owner(
        self, agent: str | None, turn: int | None, line: int, interaction: int | None = None
    ) -> Owner:
        if agent is not None:
            return ("agent", agent)
        if turn is not None:
            return ("turn", turn)
        if interaction is None:
            interaction = bisect_right(self.message_lines, line)
        return ("loose", interaction)

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

    def tool_nodes(self, rows: list[Row]) -> list[Node]:
        return [self.tool(row) for row in rows] if self.include_tools else []

    def turn(self, row: Row) -> Node:
        """A main-agent turn (one LLM call), with its tools, events and sub-agent runs."""
        owner = ("turn", row["turn_index"])
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
                **_call_usage(row),
                "requested_tools": row["requested_tools"],
                "tool_calls": row["tool_calls"],
                "failed_tool_calls": row["failed_tool_calls"],
                "task_complete_called": row["task_complete_called"],
                "task_complete_event": row["task_complete_event"],
                "ended_loop": row["ended_loop"],
                "events": [self.event(e) for e in self.events.get(owner, [])],
                "tools": self.tool_nodes(self.tools.get(owner, [])),
                "subagents": self.subagents.get(owner, []),
            }
        )

    def subagent(self, run: Row) -> Node:
        """A sub-agent run, with its LLM calls (each with the tools it ran) and events."""
        agent = run["tool_call_id"]
        calls = self.agent_calls.get(agent, [])
        # A sub-agent's tools by the number of the call before them (0: before its first).
        call_lines = [call["line"] for call in calls]
        tools_by_call: dict[int, list[Row]] = defaultdict(list)
        for tool in self.tools.get(("agent", agent), []):
            tools_by_call[bisect_right(call_lines, tool["line"])].append(tool)
        running = run["status"] == "running"
        call_nodes = [
            self.subagent_call(
                run,
                number,
                call,
                tools_by_call.get(number, []),
                call["open"] if call["open"] is not None else running and number == len(calls),
            )
            for number, call in enumerate(calls, start=1)
        ]
        return self._shaped(
            {
                "agent_id": agent,
                "agent_name": run["agent_name"],
                "status": run["status"],
                "error": run["error"],
                "model": run["model"],
                "line": run["start_line"] if run["start_line"] is not None else run["end_line"],
                "started_at": iso(run["started_at"]),
                "offset_ms": self.offset(run["started_at"]),
                "ended_at": iso(run["finished_at"]),
                "duration_ms": run["duration_ms"],
                "prompt": self.prompts.get((self.facts["file"], self.facts["session_id"], agent)),
                "llm_calls": len(calls),
                "tool_calls": run["tool_calls"],
                "failed_tool_calls": run["failed_tool_calls"],
                "output_tokens": run["output_tokens"],
                "events": [self.event(e) for e in self.events.get(("agent", agent), [])],
                "tools": self.tool_nodes(tools_by_call.get(0, [])),
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
                **_call_usage(call),
                "requested_tools": call["requested_tools"] or [],
                **_tool_counts(own_tools),
                "ended_loop": not call["requested_tools"],
                "tools": self.tool_nodes(own_tools),
            }
        )

    def all_runs(self) -> list[Row]:
        """The runs, with one of status ``unknown`` for every agent whose lines survive
        without its subagent.started/completed (lost lines), so none of its calls is dropped;
        in the order they start."""
        runs = self.rows["runs"]
        known = {run["tool_call_id"] for run in runs}
        seen = [*self.agent_calls]
        seen += [key for kind, key in [*self.tools, *self.events] if kind == "agent"]
        for agent in dict.fromkeys(agent for agent in seen if agent not in known):
            calls = self.agent_calls[agent]
            tools = self.tools[("agent", agent)]
            events = self.events[("agent", agent)]
            moments = [row["timestamp"] for row in [*calls, *events]]
            moments += [row["started_at"] for row in tools]
            known_moments = [moment for moment in moments if moment is not None]
            runs = [
                *runs,
                {
                    "tool_call_id": agent,
                    "agent_name": None,
                    "status": "unknown",
                    "error": None,
                    "model": None,
                    "start_line": min(row["line"] for row in [*calls, *tools, *events]),
                    "end_line": None,
                    "started_at": min(known_moments, default=None),
                    "finished_at": None,
                    "duration_ms": None,
                    **_tool_counts(tools),
                    "output_tokens": sum(call["output_tokens"] or 0 for call in calls),
                    "turn_index": None,
                },
            ]
        return sorted(runs, key=lambda run: run["start_line"] or run["end_line"])

    def node(self) -> Node:
        """The tree of the session (see :func:`timeline`)."""
        rows, facts = self.rows, self.facts
        task_turn = {
            t["tool_call_id"]: t["turn_index"]
            for t in rows["tools"]
            if t["agent_id"] is None and t["turn_index"] is not None
        }
        for run in self.all_runs():
            node = self.subagent(run)
            turn = task_turn.get(run["tool_call_id"], run["turn_index"])
            self.subagents[self._owner(None, turn, node["line"])].append(node)
        heads = {
            message["interaction_index"]: {
                "interaction_index": message["interaction_index"],
                "interaction_id": message["interaction_id"],
                "trigger": "nudge" if message["is_nudge"] else "prompt",
                "text": message["text"],
                "agent_mode": message["agent_mode"],
                **self.placed(message, message["timestamp"]),
            }
            for message in rows["messages"]
        }
        turns: dict[int, list[Node]] = defaultdict(list)
        for row in rows["turns"]:
            turns[row["interaction_index"]].append(self.turn(row))
        if turns.get(0) or self.tools.get(("loose", 0)) or self.subagents.get(("loose", 0)):
            heads[0] = {
                "interaction_index": 0,
                "interaction_id": None,
                "trigger": "none",
                **dict.fromkeys(("text", "agent_mode", "line", "event_id", "started_at")),
                "offset_ms": None,
            }
        interactions = [
            self.interaction(heads[index], turns.get(index, []), ("loose", index))
            for index in sorted(heads)
        ]
        before = [] if 0 in heads else self.events.get(("loose", 0), [])
        main_turns = [turn for own in turns.values() for turn in own]
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
            "subagent_calls": len(rows["calls"]),
            "events": [self.event(e) for e in before],
            "interactions": interactions,
        }

    def interaction(self, head: Node, own_turns: list[Node], owner: Owner) -> Node:
        last = own_turns[-1] if own_turns else None
        duration_ms = None
        if last is not None and head["offset_ms"] is not None and last["offset_ms"] is not None:
            duration_ms = last["offset_ms"] + (last["elapsed_ms"] or 0) - head["offset_ms"]
        head.update(
            ended_at=last["ended_at"] if last is not None else None,
            duration_ms=duration_ms,
            llm_calls=len(own_turns),
            tool_calls=sum(t["tool_calls"] for t in own_turns),
            failed_tool_calls=sum(t["failed_tool_calls"] for t in own_turns),
            subagent_calls=sum(s["llm_calls"] for t in own_turns for s in t["subagents"]),
            ended_loop=bool(last and last["ended_loop"]),
            task_complete=any(t["task_complete_event"] for t in own_turns),
            events=[self.event(e) for e in self.events.get(owner, [])],
        )
        if self.include_tools:
            head["tools"] = [self.tool(t) for t in self.tools.get(owner, [])]
        head["subagents"] = self.subagents.get(owner, [])
        head["turns"] = own_turns
        return head


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
    ``include_tools=False`` leaves out the ``tools`` lists (the counts stay)."""
    annotated = derive.annotate(result.events)
    rows = rows_by_session(annotated)
    prompts = subagent_prompts(annotated)
    sessions = [
        _Session(facts, rows[(facts["file"], facts["session_id"])], prompts, include_tools).node()
        for facts in derive.session_facts(annotated).iter_rows(named=True)
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
        mine: list[dict[str, Any]] = []
        base = {"session_id": session["session_id"], "file": session["file"]}
        for interaction in session["interactions"]:
            index = interaction["interaction_index"]
            for turn in interaction["turns"]:
                main = {k: turn[k] for k in TURN_ROW_SCHEMA if k in turn}
                mine.append({**base, **main, "interaction_index": index, "agent_id": None})
                mine += [
                    row
                    for run in turn["subagents"]
                    for row in _call_rows(base, index, turn["turn_index"], run)
                ]
            mine += [
                row
                for run in interaction["subagents"]
                for row in _call_rows(base, index, None, run)
            ]
        # A sub-agent's calls interleave with its parent turn's lines: order by where each
        # call starts in the file.
        rows += sorted(mine, key=lambda row: row["line"])
    return pl.DataFrame(rows, schema=TURN_ROW_SCHEMA)


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
