"""Build logs event by event for tests: chunked sub-agent messages, older key orders, and a
parentId chain that stays whole after lines are added (test helper, not a test module)."""

from __future__ import annotations

from typing import Any

import orjson

from synth import SessionBuilder, task


def _session(seed: int, subagent_calls: int) -> SessionBuilder:
    builder = SessionBuilder(seed=seed)
    builder.user_message("go")
    builder.turn("delegating", [task("sub", llm_calls=subagent_calls)])
    builder.turn("done")
    builder.shutdown()
    return builder


def session_events(seed: int = 0, subagent_calls: int = 2) -> list[dict[str, Any]]:
    """A session with a sub-agent, as event dicts in file order."""
    return [orjson.loads(line) for line in _session(seed, subagent_calls).lines()]


def calls_written(seed: int = 0, subagent_calls: int = 2) -> tuple[int, int]:
    """(main-agent, sub-agent) LLM calls :func:`session_events` wrote, from the test-data
    generator's manifest: the truth a count must find, known without reading the log."""
    written = _session(seed, subagent_calls).calls_written
    return written["main"], written["subagent"]


def chunked(events: list[dict[str, Any]], chunks: int = 3) -> list[dict[str, Any]]:
    """Every sub-agent assistant.message as ``chunks`` lines sharing its messageId."""
    out: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "assistant.message" and "agentId" in event:
            for index in range(chunks):
                copy = orjson.loads(orjson.dumps(event))
                copy["data"]["chunkIndex"] = index
                copy["id"] = f"{event['id']}-chunk{index}"
                out.append(copy)
        else:
            out.append(event)
    return out


def render(events: list[dict[str, Any]], *, late_agent_id: bool = False) -> list[bytes]:
    """Each event as the CLI writes it, the parentId chain rebuilt over the list. With
    ``late_agent_id`` agentId comes after parentId, as older CLIs wrote it."""
    lines = []
    previous = None
    for event in events:
        agent = event.get("agentId")
        shaped: dict[str, Any] = {"type": event["type"], "data": event["data"]}
        if agent is not None and not late_agent_id:
            shaped["agentId"] = agent
        shaped.update(id=event["id"], timestamp=event["timestamp"], parentId=previous)
        if agent is not None and late_agent_id:
            shaped["agentId"] = agent
        lines.append(orjson.dumps(shaped))
        previous = event["id"]
    return lines
