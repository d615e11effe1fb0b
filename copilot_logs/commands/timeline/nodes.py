"""The nodes of a session's timeline: one plain dict per lifecycle event, tool, main-agent
turn, sub-agent run and sub-agent LLM call, ready for JSON.

Times are ISO-8601 UTC strings; ``offset_ms`` is milliseconds since the session start.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from datetime import datetime
from typing import Any

from copilot_logs import derive
from copilot_logs.commands.timeline.frames import CALL_FIGURES

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
