"""The repaired copy's events made whole again (see :mod:`~copilot_logs.commands.doctor.repair`):

- an open tool call is closed the way the CLI itself closes one when it resumes a log
  (recorded: :data:`~copilot_logs.commands.doctor.evidence.CLOSE_TOOL`): a
  ``tool.execution_complete`` with ``success: false`` and the error code ``interrupted``,
  added before the turn end (or shutdown) that left it open, else at the end of the log;
- an event whose ``parentId`` names bytes that were set aside (or that now follows an added
  event) names the event before it;
- ``session.resume``'s ``eventCount`` and ``eventsFileSizeBytes`` and
  ``session.shutdown``'s ``eventsFileSizeBytes`` are set to what the copy holds before them.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from copilot_logs.commands.doctor import evidence
from copilot_logs.commands.doctor.repair import Change, Repair, Unit
from copilot_logs.commands.validate import check
from copilot_logs.ingest.reader import ReadResult

CLOSE = "tool.execution_complete"
ENDS = {
    "X302": "assistant.turn_end",  # the turn ended without the tool's result
    "X307": "session.shutdown",  # the session shut down while it ran
    "X303": None,  # the log ends while it runs
}


def mended(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    units = _close_open_tools(units, result, done)
    _relink(units, done)
    _count(units, done)
    return units


def _close_open_tools(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    """A closing event for each tool validate finds open, placed where its turn (or the
    session) ended, else at the end."""
    found = check(result, select=sorted(ENDS)).sort("line")
    by_id = {unit.event_id: index for index, unit in enumerate(units) if unit.event_id}
    inserts: list[tuple[int, Unit]] = []
    for code, event_id in found.select("code", "event_id").iter_rows():
        start = by_id.get(event_id)
        if start is None:
            continue
        at = _closing_place(units, start, ENDS[code])
        opened = units[start]
        line = units[at].line if at < len(units) else units[-1].line + 1
        closing = Unit(line, b"", None, CLOSE, opened.agent_id, opened.tool_call_id, True)
        inserts.append((at, closing))
        done.changes.append(
            Change(
                line,
                f"added a tool.execution_complete closing {opened.tool_call_id} (started on "
                f"line {opened.line}) as interrupted",
                "the tool call was left open; the CLI closes one so when it resumes "
                f"(recorded with {evidence.CLOSE_VERSION})",
            )
        )
    for at, closing in sorted(inserts, key=lambda item: item[0], reverse=True):
        units.insert(at, closing)
        if at + 1 < len(units):
            units[at + 1].after_gap = True
    return units


def _closing_place(units: list[Unit], start: int, end_type: str | None) -> int:
    opened = units[start]
    for index in range(start + 1, len(units)):
        unit = units[index]
        if end_type and unit.type == end_type and unit.agent_id == opened.agent_id:
            return index
    return len(units)


def _relink(units: list[Unit], done: Repair) -> None:
    """Fill in the added events and keep the parent chain whole across what changed."""
    previous: dict[str, Any] | None = None
    for unit in units:
        if not unit.data:
            event = _closing_event(unit, previous)
            unit.data, unit.event_id = orjson.dumps(event), event["id"]
        elif unit.after_gap and previous is not None:
            event = _envelope(unit.data)
            if event is not None and event.get("parentId") != previous.get("id"):
                was = event.get("parentId")
                event["parentId"] = previous.get("id")
                unit.data = orjson.dumps(event)
                done.changes.append(
                    Change(
                        unit.line,
                        f"parentId {was} -> {previous.get('id')}",
                        f"the event it named is not in the copy; line {unit.line} now follows "
                        "the event before it",
                    )
                )
        previous = _envelope(unit.data)


def _envelope(data: bytes) -> dict[str, Any] | None:
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def _closing_event(unit: Unit, previous: dict[str, Any] | None) -> dict[str, Any]:
    """The CLI's own closing of an open tool call, at the time of the event before it."""
    event: dict[str, Any] = {
        "type": CLOSE,
        "data": {"toolCallId": unit.tool_call_id, **evidence.CLOSE_TOOL},
    }
    if unit.agent_id:
        event["agentId"] = unit.agent_id
    event["id"] = str(uuid.uuid4())
    event["timestamp"] = (previous or {}).get("timestamp")
    event["parentId"] = (previous or {}).get("id")
    return event


COUNTED = {"session.resume": ("eventCount", "eventsFileSizeBytes"), "session.shutdown": ("eventsFileSizeBytes",)}


def _count(units: list[Unit], done: Repair) -> None:
    """The resume and shutdown counters set to what the copy holds before each."""
    offset = 0
    for count, unit in enumerate(units):
        fields = COUNTED.get(unit.type)
        if fields:
            truth = {"eventCount": count, "eventsFileSizeBytes": offset}
            event = _envelope(unit.data)
            data = event.get("data") if event is not None else None
            wrong = [
                name
                for name in fields
                if isinstance(data, dict) and name in data and data[name] != truth[name]
            ]
            if wrong and isinstance(data, dict):
                for name in wrong:
                    done.changes.append(
                        Change(
                            unit.line,
                            f"{unit.type} {name} {data[name]} -> {truth[name]}",
                            "what the copy holds before this line",
                        )
                    )
                    data[name] = truth[name]
                unit.data = orjson.dumps(event)
        offset += len(unit.data) + 1
