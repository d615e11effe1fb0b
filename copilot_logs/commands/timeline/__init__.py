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

from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.timeline.frames import SessionRows, rows_by_session, subagent_prompts
from copilot_logs.commands.timeline.nodes import Node as Node
from copilot_logs.commands.timeline.nodes import SessionNodes
from copilot_logs.commands.timeline.tree import build_session
from copilot_logs.derive import SESSION
from copilot_logs.ingest.reader import ReadResult

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
