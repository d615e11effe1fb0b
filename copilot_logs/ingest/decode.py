"""One event line -> its envelope and typed payload columns (no polars): the msgspec structs a
clean line decodes into, and what the reader keeps of each event type."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from itertools import groupby
from operator import attrgetter
from typing import Annotated, Any, NamedTuple

import msgspec
import orjson

PREVIEW_CHARS = 160
"""Longest text kept per event: whole system prompts and tool outputs are never kept."""
TEXT_HEAD = 1024
"""Bytes of a long raw JSON text decoded to preview it: more than PREVIEW_CHARS characters
unless most are escapes (then the whole text is decoded)."""
NUDGE_TEXT = "You have not yet marked the task as complete"

# Events whose whole (small) payload is kept in the ``detail`` column, for usage and audit.
DETAIL_TYPES = frozenset(
    {
        "session.start",
        "session.resume",
        "session.shutdown",
        "session.usage_checkpoint",
        "session.compaction_start",
        "session.compaction_complete",
        "session.mode_changed",
        "session.model_change",
        "session.info",
        "session.warning",
        "session.task_complete",
        "session.completion_receipt",
        "session.autopilot_stopped",
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "session.usage_record",
        "session.fusion_completed",
    }
)

# The types whose payload some command reads. Every other type (system prompts, permission and
# hook events, notifications, types added by newer CLIs) is kept with its envelope only.
PAYLOAD_TYPES = frozenset(
    {
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.message",
        "tool.execution_start",
        "tool.execution_complete",
        "tool.user_requested",
        "user.message",
        "session.error",
        "session.auto_mode_resolved",
        "abort",
        *DETAIL_TYPES,
    }
)

# The envelope the CLI writes: {"type":"T","data":{...}[,"agentId":"A"],"id":"I",
# "timestamp":"S","parentId":P}. Quotes inside strings are escaped, so these match only the real
# envelope of a whole line.
EVENT_START = b'{"type":"'
ENVELOPE_HEAD = re.compile(rb'\{"type":"([^"\\]+)","data":\{')
ENVELOPE_TAIL = re.compile(
    rb'\},(?:"agentId":"([^"\\]*)",)?"id":"([^"\\]*)","timestamp":"([^"\\]*)",'
    rb'"parentId":(?:null|"([^"\\]*)")(?:,"agentId":"([^"\\]*)")?\}\Z'
)
"""Groups: agentId (where the CLI writes it, before ``id``), id, timestamp, parentId, agentId
(where older CLIs wrote it, after ``parentId``)."""
TAIL_WINDOW = 512
_CONTROL = re.compile(rb"[\x00-\x1f]")


class Envelope(NamedTuple):
    type: str
    agent_id: str | None
    event_id: str
    timestamp: str
    parent_id: str | None


def envelope(raw: bytes) -> Envelope | None:
    """The envelope of a whole line, without decoding its payload; None when the line must be
    decoded: its head and tail are not the CLI's shape, it is not valid UTF-8, or it holds a
    raw control character. A line with a second ``{"type":"`` (a glued event, or a nested
    ``type`` key) is vouched for only when it parses as one object: a head and a tail must
    belong to one event."""
    end = len(raw)
    head = ENVELOPE_HEAD.match(raw)
    if head is None:
        return None
    tail = ENVELOPE_TAIL.search(raw, max(end - TAIL_WINDOW, 0))
    if tail is None:
        return None
    agent_id, event_id, stamp, parent_id, late_agent_id = tail.groups()
    if not event_id or (agent_id is not None and late_agent_id is not None):
        return None
    if raw.find(EVENT_START, 1) != -1 and not isinstance(parse_line(raw), dict):
        return None
    kind = head.group(1)
    if not kind.isascii() or _CONTROL.search(raw) is not None:
        return None  # (a raw control character: the full reader finds the line invalid)
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    agent_id = agent_id if agent_id is not None else late_agent_id
    return Envelope(
        kind.decode("ascii"),
        agent_id.decode() if agent_id is not None else None,
        event_id.decode(),
        stamp.decode(),
        parent_id.decode() if parent_id is not None else None,
    )


def as_int(value: object) -> int | None:
    """An integer field (integral floats too; never a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def as_str(value: Any) -> str | None:
    """:func:`as_text` with the common case (already a string) first."""
    return value if value is None or value.__class__ is str else as_text(value)


def as_text(value: Any) -> str | None:
    """A scalar as a string (ids are sometimes numbers in old logs), else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


# The structs: only the fields some command reads are decoded, each in its column's type, so a
# whole clean block decodes in C; long texts stay raw JSON, of which only the head is decoded.
# A payload of another shape is read as LooseData and converted field by field (from_json).
JSONScalar = str | int | float | bool | None
Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
"""An integer a 64-bit column holds (a larger one fails the decoding)."""
_ABSENT = msgspec.Raw(b"")
"""The value of a raw field the payload does not have."""


class Request(msgspec.Struct, gc=False):
    """One entry of an assistant message's ``toolRequests``."""

    toolCallId: str | None = None
    name: str | None = None


class Result(msgspec.Struct, gc=False):
    """A tool's ``result``."""

    content: msgspec.Raw = _ABSENT


class Common(msgspec.Struct, gc=False):
    """The fields of ``data`` the types on most lines are read for: what every line of a clean
    block is decoded into (``error`` too: reading it again would mean a second pass over the
    tool's output)."""

    turnId: str | None = None
    interactionId: str | None = None
    toolCallId: str | None = None
    messageId: str | None = None
    parentToolCallId: str | None = None
    toolName: str | None = None
    model: str | None = None
    content: msgspec.Raw = _ABSENT
    outputTokens: Int64 | None = None
    chunkIndex: Int64 | None = None
    toolRequests: list[Request] | None = None
    arguments: msgspec.Raw = _ABSENT
    success: bool | None = None
    isUserRequested: bool | None = None
    error: Any = None
    result: Result | None = None
    agentMode: str | None = None
    isAutopilotContinuation: bool | None = None
    transformedContent: msgspec.Raw = _ABSENT


class Data(Common, gc=False):
    """:class:`Common` and the fields only a few rare types carry (:data:`RARE_TYPES`): the
    line reader decodes every payload into it, the clean lane only the lines of those types."""

    sessionId: str | None = None
    summary: Any = None
    outcome: Any = None
    message: Any = None
    errorType: Any = None
    command: Any = None
    newMode: Any = None
    newModel: Any = None
    chosenModel: Any = None
    selectedModel: Any = None
    currentModel: Any = None
    agentName: Any = None
    agentDisplayName: Any = None
    reason: Any = None


class LooseRequest(msgspec.Struct, gc=False):
    """:class:`Request`, its fields accepting any JSON value."""

    toolCallId: Any = None
    name: Any = None


# Data's fields, each accepting any JSON value (built from Data: the two name the same fields).
LooseData = msgspec.defstruct(
    "LooseData",
    [
        (
            field.name,
            {
                "toolRequests": list[LooseRequest | list[Any] | JSONScalar]
                | dict[str, Any]
                | JSONScalar,
                "result": Result | list[Any] | JSONScalar,
            }.get(field.name, msgspec.Raw if field.type is msgspec.Raw else Any),
            field.default,
        )
        for field in msgspec.structs.fields(Data)
    ],
    gc=False,
    module=__name__,
)


class Event(msgspec.Struct, gc=False):
    """An event whose envelope has the shape the CLI writes (any other line fails to decode as
    one and goes to the line reader); ``data`` holds the :class:`Common` fields."""

    type: str
    id: str
    timestamp: str
    data: Common
    parentId: str | None = None
    agentId: str | None = None


class FullEvent(Event, gc=False):
    """:class:`Event` with every field of :class:`Data`: a line of a rare type."""

    data: Data


class RawData(msgspec.Struct, gc=False):
    """Just the ``data`` object of a line, undecoded (for the ``detail`` column)."""

    data: msgspec.Raw


EVENT_LINES = msgspec.json.Decoder(Event)
"""``EVENT_LINES.decode_lines(buffer)``: every line of a clean block as an :class:`Event`."""
FULL_EVENT = msgspec.json.Decoder(FullEvent)
_DATA = msgspec.json.Decoder(Data)
_LOOSE_DATA = msgspec.json.Decoder(LooseData)
_RAW_DATA = msgspec.json.Decoder(RawData)
_STRING = msgspec.json.Decoder(str)
_TEXT_FIELDS = (
    "turnId",
    "interactionId",
    "toolCallId",
    "messageId",
    "parentToolCallId",
    "sessionId",
    "toolName",
    "model",
    "agentMode",
)


def from_json(encoded: bytes) -> Data:
    """A ``data`` object given as JSON text, as :class:`Data`: a field not of its column's type
    (an id written as a number) converted as the columns read it, never rejected."""
    try:
        return _DATA.decode(encoded)
    except msgspec.ValidationError:
        pass
    loose = _LOOSE_DATA.decode(encoded)
    values = {name: getattr(loose, name) for name in Data.__struct_fields__}
    for name in _TEXT_FIELDS:
        values[name] = as_text(values[name])
    for name in ("outputTokens", "chunkIndex"):
        values[name] = as_int(values[name])
    for name in ("success", "isUserRequested", "isAutopilotContinuation"):
        values[name] = values[name] if isinstance(values[name], bool) else None
    requests = values["toolRequests"]
    values["toolRequests"] = (
        [
            Request(as_text(r.toolCallId), as_text(r.name))
            for r in requests
            if isinstance(r, LooseRequest)
        ]
        if isinstance(requests, list)
        else None
    )
    if not isinstance(values["result"], Result):
        values["result"] = None
    return Data(**values)


def from_dict(data: dict[str, Any]) -> Data:
    """A ``data`` object already decoded, as :class:`Data`."""
    return from_json(orjson.dumps(data))


def detail(line: bytes | memoryview) -> str:
    """The ``data`` object of one event line as compact JSON (as the line reader writes it)."""
    raw = _RAW_DATA.decode(line).data
    return orjson.dumps(orjson.loads(bytes(raw))).decode()


def parse_line(line: bytes | bytearray | str) -> dict[str, Any] | None:
    """One whole event line (never a damaged one: the reader reads those) as a dict; None when
    it is not one JSON object."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def parse_detail(text: str | None) -> dict[str, Any]:
    """The fields of an event's ``detail`` column: a dict, empty when there is none."""
    return (parse_line(text) or {}) if text else {}


# The payload columns, filled type by type, a column at a time.
PAYLOAD_FIELDS = (
    "turn_id",
    "interaction_id",
    "tool_call_id",
    "tool_name",
    "message_id",
    "parent_tool_call_id",
    "success",
    "is_user_requested",
    "is_nudge",
    "agent_mode",
    "model",
    "output_tokens",
    "chunk_index",
    "text",
    "error",
    "error_code",
    "outcome",
    "tool_requests",
    "detail",
)
NO_PAYLOAD: tuple[Any, ...] = tuple(
    False if name == "is_nudge" else None for name in PAYLOAD_FIELDS
)
"""The payload columns of an event whose payload is not read."""
_NO_DATA = Common()
_IDS = {
    "turn_id": "turnId",
    "interaction_id": "interactionId",
    "tool_call_id": "toolCallId",
    "message_id": "messageId",
    "parent_tool_call_id": "parentToolCallId",
}
"""The columns every payload type fills, from the ``data`` field of the same meaning."""
IDS = tuple(_IDS.values())


def payload_columns(
    kinds: Sequence[str], datas: Sequence[Common | None], details: Sequence[str | None]
) -> list[list[Any]]:
    """The PAYLOAD_FIELDS columns of events of types ``kinds``: ``datas[i]`` is None when the
    payload is not read; ``details[i]`` the whole ``data`` as JSON for DETAIL_TYPES."""
    height = len(kinds)
    present = [_NO_DATA if data is None else data for data in datas]
    columns: dict[str, list[Any]] = {
        name: list(map(attrgetter(field), present)) for name, field in _IDS.items()
    }
    for name in PAYLOAD_FIELDS:
        if name not in columns:
            columns[name] = [False] * height if name == "is_nudge" else [None] * height
    columns["detail"] = list(details)
    # The rows of each type that fills more than the ids, a type at a time.
    keys = [kind if data is not None else "" for kind, data in zip(kinds, datas, strict=True)]
    for kind, group in groupby(sorted(range(height), key=keys.__getitem__), keys.__getitem__):
        if kind in _BY_KIND:
            rows = list(group)
            values = _BY_KIND[kind](kind, list(map(present.__getitem__, rows)))
            for name, column in values.items():
                deque(map(columns[name].__setitem__, rows, column), maxlen=0)
    return [columns[name] for name in PAYLOAD_FIELDS]


def payload(kind: str, data: Common | None, detail: str | None) -> tuple[Any, ...]:
    """:func:`payload_columns` of one event."""
    return tuple(column[0] for column in payload_columns([kind], [data], [detail]))


def preview(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= PREVIEW_CHARS else value[: PREVIEW_CHARS - 1] + "…"


def raw_value(raw: msgspec.Raw) -> Any:
    """A raw field decoded (None when absent)."""
    return msgspec.json.decode(raw) if raw else None


def raw_preview(raw: msgspec.Raw) -> str | None:
    """:func:`preview` of a raw field, decoding only the head of a long string."""
    view = memoryview(raw)
    if not view or view[0] != 0x22:  # absent, or not a string
        return None
    if len(view) <= TEXT_HEAD:
        return preview(_STRING.decode(raw))
    head = view[:TEXT_HEAD].tobytes()
    # The head may end inside an escape or a multi-byte character: cut it a little shorter.
    for cut in range(len(head), len(head) - 8, -1):
        try:
            text = _STRING.decode(head[:cut] + b'"')
        except msgspec.DecodeError:
            continue
        if len(text) > PREVIEW_CHARS:
            return text[: PREVIEW_CHARS - 1] + "…"
        break
    return preview(_STRING.decode(raw))


def raw_json_preview(raw: msgspec.Raw) -> str | None:
    """The start of a raw field's JSON text (tool arguments), as a preview."""
    head = memoryview(raw)[:TEXT_HEAD].tobytes()
    if head == b"" or head == b"null":
        return None
    return preview(head.decode(errors="ignore"))


def _is_nudge(data: Common, content: str | None) -> bool:
    """``content`` is the preview of ``data.content``."""
    if data.isAutopilotContinuation is True:
        return True
    if content is not None and content.startswith(NUDGE_TEXT):
        return True
    raw = data.content
    if len(raw) <= 4 and memoryview(raw).tobytes() in (b"", b"null", b'""'):
        transformed = memoryview(data.transformedContent).tobytes()
        if transformed[:1] == b'"' and (
            NUDGE_TEXT.encode() in transformed
            or (b"\\" in transformed and NUDGE_TEXT in raw_value(data.transformedContent))
        ):
            return True
        return bool(data.agentMode == "autopilot")
    return False


def _error_fields(error: Any) -> tuple[str | None, str | None]:
    if isinstance(error, dict):
        return preview(error.get("message")), as_text(error.get("code"))
    return preview(error), None


Columns = dict[str, list[Any]]
"""Some payload columns of the events of one type, by name."""
Fill = Callable[[str, list[Any]], Columns]
"""The columns of the events of one type, from the type and the events' ``data`` (a
:class:`Common`, or a :class:`Data` for RARE_TYPES)."""


def _tool_start(_kind: str, datas: list[Common]) -> Columns:
    return {
        "tool_name": [d.toolName for d in datas],
        "model": [d.model for d in datas],
        "text": [raw_json_preview(d.arguments) for d in datas],
    }


def _tool_complete(_kind: str, datas: list[Common]) -> Columns:
    errors = [_error_fields(d.error) for d in datas]
    return {
        "model": [d.model for d in datas],
        "success": [d.success for d in datas],
        "is_user_requested": [d.isUserRequested for d in datas],
        "error": [error for error, _ in errors],
        "error_code": [code for _, code in errors],
        "text": [None if d.result is None else raw_preview(d.result.content) for d in datas],
    }


def _assistant_message(_kind: str, datas: list[Common]) -> Columns:
    return {
        "model": [d.model for d in datas],
        "text": [raw_preview(d.content) for d in datas],
        "output_tokens": [d.outputTokens for d in datas],
        "chunk_index": [d.chunkIndex for d in datas],
        "tool_requests": [
            None if d.toolRequests is None else [(r.toolCallId, r.name) for r in d.toolRequests]
            for d in datas
        ],
    }


def _user_message(_kind: str, datas: list[Common]) -> Columns:
    texts = [raw_preview(d.content) for d in datas]
    return {
        "text": texts,
        "agent_mode": [d.agentMode for d in datas],
        "is_nudge": [_is_nudge(d, text) for d, text in zip(datas, texts, strict=True)],
    }


def _one_by_one(fill: Callable[[str, Data], dict[str, Any]]) -> Fill:
    """The columns of a rare type from a function of one event."""

    def columns(kind: str, datas: list[Data]) -> Columns:
        rows = [fill(kind, data) for data in datas]
        return {name: [row[name] for row in rows] for name in rows[0]}

    return columns


def _user_requested(_kind: str, data: Data) -> dict[str, Any]:
    arguments = raw_value(data.arguments)
    command = arguments.get("command") if isinstance(arguments, dict) else None
    return {
        "tool_name": data.toolName,
        "text": preview(command or data.command or raw_value(data.content)),
    }


def _session_error(_kind: str, data: Data) -> dict[str, Any]:
    error = preview(data.message)
    return {"error": error, "error_code": as_text(data.errorType), "text": error}


def _task_complete(_kind: str, data: Data) -> dict[str, Any]:
    return {
        "text": preview(data.summary),
        "success": data.success,
        "outcome": as_text(data.outcome),
    }


def _subagent_started(_kind: str, data: Data) -> dict[str, Any]:
    return {
        "model": data.model,
        "tool_name": as_text(data.agentName),
        "text": preview(data.agentDisplayName or data.agentName),
    }


def _subagent_ended(kind: str, data: Data) -> dict[str, Any]:
    error, code = _error_fields(data.error)
    return {
        "model": data.model,
        "tool_name": as_text(data.agentName),
        "success": kind == "subagent.completed",
        "error": error,
        "error_code": code,
    }


def _reason(_kind: str, data: Data) -> dict[str, Any]:
    return {"text": preview(data.reason or data.message)}


def _field(column: str, field: str) -> Fill:
    """The columns of a type that fills one column with one field's text."""
    return lambda _kind, datas: {column: [as_text(getattr(d, field)) for d in datas]}


# The types that fill more than the ids (turn events have only the ids).
_BY_KIND: dict[str, Fill] = {
    "tool.execution_start": _tool_start,
    "tool.execution_complete": _tool_complete,
    "assistant.message": _assistant_message,
    "user.message": _user_message,
    "tool.user_requested": _one_by_one(_user_requested),
    "session.error": _one_by_one(_session_error),
    "session.task_complete": _one_by_one(_task_complete),
    "session.mode_changed": _field("agent_mode", "newMode"),
    "session.model_change": _field("model", "newModel"),
    "session.auto_mode_resolved": _field("model", "chosenModel"),
    "session.start": _field("model", "selectedModel"),
    "session.shutdown": _field("model", "currentModel"),
    "subagent.started": _one_by_one(_subagent_started),
    "subagent.completed": _one_by_one(_subagent_ended),
    "subagent.failed": _one_by_one(_subagent_ended),
    "abort": _one_by_one(_reason),
    "session.info": _one_by_one(_reason),
    "session.warning": _one_by_one(_reason),
}

READS: dict[str, tuple[str, ...]] = {
    "tool.execution_start": ("toolName", "model", "arguments"),
    "tool.execution_complete": ("model", "success", "isUserRequested", "error", "result"),
    "assistant.message": ("model", "content", "outputTokens", "chunkIndex", "toolRequests"),
    "user.message": ("content", "agentMode", "isAutopilotContinuation", "transformedContent"),
    "tool.user_requested": ("toolName", "arguments", "command", "content"),
    "session.error": ("message", "errorType"),
    "session.task_complete": ("summary", "success", "outcome"),
    "session.mode_changed": ("newMode",),
    "session.model_change": ("newModel",),
    "session.auto_mode_resolved": ("chosenModel",),
    # sessionId: the reader starts a new session at a session.start of another id.
    "session.start": ("selectedModel", "sessionId"),
    "session.shutdown": ("currentModel",),
    "subagent.started": ("model", "agentName", "agentDisplayName"),
    "subagent.completed": ("model", "agentName", "error"),
    "subagent.failed": ("model", "agentName", "error"),
    "abort": ("reason", "message"),
    "session.info": ("reason", "message"),
    "session.warning": ("reason", "message"),
}
"""The ``data`` fields each type's columns are filled from, beside :data:`IDS` (its fill in
:data:`_BY_KIND` reads no other: tests/test_payload.py holds it)."""

RARE_TYPES = frozenset(
    kind for kind, fields in READS.items() if not set(fields) <= set(Common.__struct_fields__)
)
"""The types read for a field :class:`Common` lacks: the clean lane decodes their lines again,
alone, into :class:`Data`, where a malformed value (``1e999``) sends the line to the line
reader, which reports it."""
