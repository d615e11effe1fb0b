"""The repaired copy's events made whole again: open tool calls closed as the CLI closes them,
a lost turn end added, the parent chain and the resume and shutdown counters kept true (see
:mod:`~copilot_logs.commands.doctor.repair`).

- an open tool call is closed the way the CLI itself closes one when it resumes a log
  (recorded: :data:`~copilot_logs.commands.doctor.resumes.CLOSE_TOOL`): a
  ``tool.execution_complete`` with ``success: false`` and the error code ``interrupted``,
  added before the turn end (or shutdown) that left it open, else at the end of the log;
- a turn whose ``assistant.turn_end`` was set aside with damaged bytes gets one, right before
  the next turn starts;
- an event whose ``parentId`` names bytes that were set aside (or that now follows an added
  event) names the event before it;
- ``session.resume``'s ``eventCount`` and ``eventsFileSizeBytes`` and
  ``session.shutdown``'s ``eventsFileSizeBytes`` are set to what the copy holds before them.

A value is changed in place (:func:`~copilot_logs.ingest.decode.value_span.with_value`): every
other byte of the line stays as written (numbers, escapes, key order), and each changed value
is listed with what it was and what it became.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from copilot_logs.commands.doctor import resumes as evidence
from copilot_logs.commands.doctor.repair import Change, Repair, Unit
from copilot_logs.commands.validate import check
from copilot_logs.ingest.decode.event_structs import parse_line
from copilot_logs.ingest.decode.value_span import value_span, with_value
from copilot_logs.ingest.reader import ReadResult

Insert = tuple[int, Unit, Change]
"""An event the repair adds: where, the event, and the change listed for it."""
CLOSE = "tool.execution_complete"
TURN_START = "assistant.turn_start"
TURN_END = "assistant.turn_end"
SHUTDOWN = "session.shutdown"
SUBAGENT_STARTED = "subagent.started"
SUBAGENT_ENDS = ("subagent.completed", "subagent.failed")
ENDS = {
    "X302": "assistant.turn_end",  # the turn ended without the tool's result
    "X307": "session.shutdown",  # the session shut down while it ran
    "X303": None,  # the log ends while it runs
}


def mended(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    units = _close_open_tools(units, result, done)
    units = _close_lost_turn_ends(units, result, done)
    _relink(units, done)
    _count(units, done)
    return units


def _close_open_tools(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    """A closing event for each tool validate finds open, placed where its turn (or the
    session) ended, else at the end."""
    found = check(result, select=sorted(ENDS)).sort("line")
    by_id = {unit.event_id: index for index, unit in enumerate(units) if unit.event_id}
    tasks = {u.agent_id: u.tool_call_id for u in units if u.type == SUBAGENT_STARTED}
    inserts: list[Insert] = []
    for code, event_id in found.select("code", "event_id").iter_rows():
        start = by_id.get(event_id)
        if start is None:
            continue
        at = _closing_place(units, start, ENDS[code], tasks)
        opened = units[start]
        line = units[at].line if at < len(units) else units[-1].line + 1
        closing = Unit(
            line,
            b"",
            _id_closing(event_id),
            CLOSE,
            opened.agent_id,
            opened.tool_call_id,
            marks=_marks(opened),
        )
        change = Change(
            line,
            f"added a tool.execution_complete closing {opened.tool_call_id} (started on "
            f"line {opened.line}) as interrupted",
            "the tool call was left open; the CLI closes one so when it resumes "
            f"(recorded with {evidence.CLOSE_VERSION})",
        )
        inserts.append((at, closing, change))
    return _inserted(units, inserts, done)


def _inserted(units: list[Unit], inserts: list[Insert], done: Repair) -> list[Unit]:
    """``units`` with each added event in its place (its change listed), the event after it
    marked as following a gap."""
    for at, added, _change in sorted(inserts, key=lambda item: item[0], reverse=True):
        units.insert(at, added)
        if at + 1 < len(units):
            units[at + 1].after_gap = True
    done.changes.extend(change for _, _, change in inserts)
    return units


def _close_lost_turn_ends(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    """An ``assistant.turn_end`` for a turn whose end was lost (set aside with damaged bytes):
    validate finds the next turn starting while it is open (T202); the end is added right
    before that start, so the turns pair again."""
    found = check(result, select=["T202"])
    by_id = {unit.event_id: index for index, unit in enumerate(units) if unit.event_id}
    inserts: list[Insert] = []
    for event_id in found["event_id"].to_list():
        at = by_id.get(event_id)
        opened = (
            next(
                (u for u in reversed(units[:at]) if u.type == TURN_START and u.agent_id is None),
                None,
            )
            if at is not None
            else None
        )
        if at is None or opened is None:
            continue
        line = units[at].line
        closing = Unit(line, b"", _id_closing(f"turn:{event_id}"), TURN_END, turn_id=opened.turn_id)
        change = Change(
            line,
            f"added an assistant.turn_end closing turn {opened.turn_id} (started on line "
            f"{opened.line})",
            "a new turn starts here while that one is open: its turn_end was lost",
        )
        inserts.append((at, closing, change))
    return _inserted(units, inserts, done)


def _id_closing(start_id: str) -> str:
    """The id of the event closing the tool started by ``start_id``: the same in every repair
    of the log (a name-based UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"copilot-logs:doctor:close:{start_id}"))


def _closing_place(
    units: list[Unit], start: int, end_type: str | None, tasks: dict[str | None, str | None]
) -> int:
    """Where the tool started at ``start`` is closed: before ``end_type`` of its own agent;
    a sub-agent's tool also before its sub-agent ends (its ``task`` call completes, or
    ``subagent.completed`` / ``failed``) and before the main agent's turn ends or the
    session shuts down; else at the end."""
    opened = units[start]
    task = tasks.get(opened.agent_id, opened.agent_id) if opened.agent_id else None
    for index in range(start + 1, len(units)):
        unit = units[index]
        if end_type and unit.type == end_type and unit.agent_id == opened.agent_id:
            return index
        if task is not None and (
            (unit.type in (*SUBAGENT_ENDS, CLOSE) and unit.tool_call_id == task)
            or (unit.type == TURN_END and unit.agent_id is None)
            or unit.type == SHUTDOWN
        ):
            return index
    return len(units)


def _marks(opened: Unit) -> dict[str, Any]:
    """The sub-agent marks of the event ``opened`` as it carries them: the envelope
    ``agentId`` (1.0.3x on) and ``data.parentToolCallId`` (1.0.2x has only this one)."""
    event = parse_line(opened.data) or {}
    data = event.get("data")
    marks: dict[str, Any] = {}
    if "agentId" in event:
        marks["agentId"] = event["agentId"]
    if isinstance(data, dict) and "parentToolCallId" in data:
        marks["parentToolCallId"] = data["parentToolCallId"]
    return marks


def _relink(units: list[Unit], done: Repair) -> None:
    """Fill in the added events and keep the parent chain whole across what changed."""
    previous: dict[str, Any] | None = None
    for unit in units:
        if not unit.data:
            unit.data = orjson.dumps(_closing_event(unit, previous))
        elif unit.after_gap and previous is not None:
            event = parse_line(unit.data)
            relinked = with_value(unit.data, ("parentId",), orjson.dumps(previous.get("id")))
            if (
                event is not None
                and event.get("parentId") != previous.get("id")
                and relinked is not None
            ):
                was = event.get("parentId")
                unit.data = relinked
                done.changes.append(
                    Change(
                        unit.line,
                        f"parentId {was} -> {previous.get('id')}",
                        f"the event it named is not in the copy; line {unit.line} now follows "
                        "the event before it",
                    )
                )
        previous = parse_line(unit.data)


def _closing_event(unit: Unit, previous: dict[str, Any] | None) -> dict[str, Any]:
    """An added event at the time of the event before it: the CLI's own closing of an open
    tool call, or the end of a turn."""
    data = (
        {"toolCallId": unit.tool_call_id, **evidence.CLOSE_TOOL}
        if unit.type == CLOSE
        else {"turnId": unit.turn_id}
    )
    if "parentToolCallId" in unit.marks:
        data["parentToolCallId"] = unit.marks["parentToolCallId"]
    event: dict[str, Any] = {"type": unit.type, "data": data}
    if "agentId" in unit.marks:
        event["agentId"] = unit.marks["agentId"]
    event["id"] = unit.event_id
    event["timestamp"] = (previous or {}).get("timestamp")
    event["parentId"] = (previous or {}).get("id")
    return event


COUNTED = {
    "session.resume": ("eventCount", "eventsFileSizeBytes"),
    "session.shutdown": ("eventsFileSizeBytes",),
}


def _count(units: list[Unit], done: Repair) -> None:
    """The resume and shutdown counters set to what the copy holds before each."""
    offset = 0
    for count, unit in enumerate(units):
        fields = COUNTED.get(unit.type)
        if fields:
            truth = {"eventCount": count, "eventsFileSizeBytes": offset}
            event = parse_line(unit.data)
            data = event.get("data") if event is not None else None
            wrong = [
                name
                for name in fields
                if isinstance(data, dict) and name in data and data[name] != truth[name]
            ]
            for name in wrong:
                span = value_span(unit.data, ("data", name))
                counted = with_value(unit.data, ("data", name), str(truth[name]).encode())
                if span is None or counted is None:
                    continue
                was = unit.data[span[0] : span[1]].decode("utf-8", "replace")
                unit.data = counted
                done.changes.append(
                    Change(
                        unit.line,
                        f"{unit.type} {name} {was} -> {truth[name]}",
                        "what the copy holds before this line",
                    )
                )
        offset += len(unit.data) + 1
