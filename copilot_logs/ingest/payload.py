"""The typed payload columns of an event, from its ``data`` object (no polars here).

``data`` differs per event type and between CLI versions; only a few of its fields are ever
read. :class:`Data` names them, and msgspec decodes straight into it, skipping every other
field (system prompts, tool outputs beyond their first characters, arguments) without building
Python objects for them; the long texts (message content, tool output, arguments) are kept as
raw JSON, of which only the first characters are ever decoded. Every field accepts any JSON
value: a payload of an unexpected shape is read as far as it makes sense, never rejected.
:func:`payload` turns one decoded ``data`` into the columns of :data:`PAYLOAD_FIELDS`,
whichever way the line was read (a whole clean block of lines at once, or line by line with
damage recovery: see :mod:`copilot_logs.ingest.reader`).
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from copilot_logs.ingest.envelope import as_int
from copilot_logs.ingest.event_types import DETAIL_TYPES, NUDGE_TEXT, PREVIEW_CHARS

JSONScalar = str | int | float | bool | None


_ABSENT = msgspec.Raw(b"")
"""The value of a raw field the payload does not have."""


class Request(msgspec.Struct):
    """One entry of an assistant message's ``toolRequests``."""

    toolCallId: Any = None
    name: Any = None


class Result(msgspec.Struct):
    """A tool's ``result``."""

    content: msgspec.Raw = _ABSENT


class Data(msgspec.Struct):
    """The fields of ``data`` some command reads (any other field is skipped)."""

    # Ids shared by many event types.
    turnId: Any = None
    interactionId: Any = None
    toolCallId: Any = None
    messageId: Any = None
    parentToolCallId: Any = None
    sessionId: Any = None
    # Per type: see payload().
    toolName: Any = None
    model: Any = None
    content: msgspec.Raw = _ABSENT
    outputTokens: Any = None
    chunkIndex: Any = None
    toolRequests: list[Request | list[Any] | JSONScalar] | dict[str, Any] | JSONScalar = None
    arguments: msgspec.Raw = _ABSENT
    success: Any = None
    isUserRequested: Any = None
    error: Any = None
    result: Result | list[Any] | JSONScalar = None
    agentMode: Any = None
    isAutopilotContinuation: Any = None
    transformedContent: msgspec.Raw = _ABSENT
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


class Event(msgspec.Struct):
    """An event whose envelope has the shape the CLI writes: a string type, id and
    timestamp, an object ``data``; parentId and agentId strings or absent. A line of any other
    shape fails to decode as one and is read by the line reader, which reports it."""

    type: str
    id: str
    timestamp: str
    data: Data
    parentId: str | None = None
    agentId: str | None = None


class RawData(msgspec.Struct):
    """Just the ``data`` object of a line, undecoded (for the ``detail`` column)."""

    data: msgspec.Raw


EVENT_LINES = msgspec.json.Decoder(Event)
"""``EVENT_LINES.decode_lines(buffer)``: every line of a clean block as an :class:`Event`."""
_DATA = msgspec.json.Decoder(Data)
_STRING = msgspec.json.Decoder(str)
TEXT_HEAD = 1024
"""Bytes of a long raw JSON text decoded to preview it: more than PREVIEW_CHARS characters
unless most are escapes (then the whole text is decoded)."""
_RAW_DATA = msgspec.json.Decoder(RawData)

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
"""The columns :func:`payload` fills, in its order."""

NO_PAYLOAD: tuple[Any, ...] = tuple(
    False if name == "is_nudge" else None for name in PAYLOAD_FIELDS
)
"""The payload columns of an event whose payload is not read."""

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


def from_json(encoded: bytes) -> Data:
    """A ``data`` object given as JSON text, as :class:`Data`."""
    return _DATA.decode(encoded)


def from_dict(data: dict[str, Any]) -> Data:
    """A ``data`` object already decoded, as :class:`Data`."""
    return from_json(orjson.dumps(data))


def detail(line: bytes | memoryview) -> str:
    """The ``data`` object of one event line as compact JSON (as the line reader writes it)."""
    raw = _RAW_DATA.decode(line).data
    return orjson.dumps(orjson.loads(bytes(raw))).decode()


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


def preview(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= PREVIEW_CHARS else value[: PREVIEW_CHARS - 1] + "…"


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _error_fields(error: Any) -> tuple[str | None, str | None]:
    if isinstance(error, dict):
        return preview(error.get("message")), as_text(error.get("code"))
    return preview(error), None


def _tool_requests(value: Any) -> list[tuple[str | None, str | None]] | None:
    if not isinstance(value, list):
        return None
    return [(as_str(r.toolCallId), as_str(r.name)) for r in value if isinstance(r, Request)]


def _is(raw: msgspec.Raw, *literals: bytes) -> bool:
    """The raw JSON is one of ``literals`` (b"" when the field is absent)."""
    return len(raw) <= 4 and memoryview(raw).tobytes() in literals


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
    if _is(raw, b"", b"null"):
        return None
    return preview(memoryview(raw)[:TEXT_HEAD].tobytes().decode(errors="ignore"))


def _is_nudge(data: Data, content: str | None) -> bool:
    """``content`` is the preview of ``data.content``."""
    if data.isAutopilotContinuation is True:
        return True
    if content is not None and content.startswith(NUDGE_TEXT):
        return True
    if _is(data.content, b"", b"null", b'""'):
        transformed = memoryview(data.transformedContent).tobytes()
        if transformed[:1] == b'"' and (
            NUDGE_TEXT.encode() in transformed
            or (b"\\" in transformed and NUDGE_TEXT in raw_value(data.transformedContent))
        ):
            return True
        return bool(data.agentMode == "autopilot")
    return False


_TURN_TYPES = frozenset({"assistant.turn_start", "assistant.turn_end"})


def payload(kind: str, data: Data, detail: str | None) -> tuple[Any, ...]:
    """The payload columns of one event of a PAYLOAD_TYPES type, in PAYLOAD_FIELDS order;
    ``detail`` is its whole ``data`` as JSON for DETAIL_TYPES, else None."""
    tool_name = model = text = error = error_code = outcome = agent_mode = None
    success = is_user_requested = None
    is_nudge = False
    output_tokens = chunk_index = None
    requests = None
    # The most frequent types first; turn events have only the ids below.
    if kind in _TURN_TYPES:
        pass
    elif kind == "tool.execution_start":
        tool_name = as_str(data.toolName)
        model = as_str(data.model)
        text = raw_json_preview(data.arguments)
    elif kind == "tool.execution_complete":
        model = as_str(data.model)
        success = _bool(data.success)
        is_user_requested = _bool(data.isUserRequested)
        error, error_code = _error_fields(data.error)
        if isinstance(data.result, Result):
            text = raw_preview(data.result.content)
    elif kind == "assistant.message":
        model = as_str(data.model)
        text = raw_preview(data.content)
        output_tokens = as_int(data.outputTokens)
        chunk_index = as_int(data.chunkIndex)
        requests = _tool_requests(data.toolRequests)
    elif kind == "user.message":
        text = raw_preview(data.content)
        agent_mode = as_text(data.agentMode)
        is_nudge = _is_nudge(data, text)
    elif kind == "tool.user_requested":
        tool_name = as_text(data.toolName)
        arguments = raw_value(data.arguments)
        command = arguments.get("command") if isinstance(arguments, dict) else None
        text = preview(command or data.command or raw_value(data.content))
    elif kind == "session.error":
        error = preview(data.message)
        error_code = as_text(data.errorType)
        text = error
    elif kind == "session.task_complete":
        text = preview(data.summary)
        success = _bool(data.success)
        outcome = as_text(data.outcome)
    elif kind == "session.mode_changed":
        agent_mode = as_text(data.newMode)
    elif kind == "session.model_change":
        model = as_text(data.newModel)
    elif kind == "session.auto_mode_resolved":
        model = as_text(data.chosenModel)
    elif kind == "session.start":
        model = as_text(data.selectedModel)
    elif kind == "session.shutdown":
        model = as_text(data.currentModel)
    elif kind == "subagent.started":
        model = as_text(data.model)
        tool_name = as_text(data.agentName)
        text = preview(data.agentDisplayName or data.agentName)
    elif kind in ("subagent.completed", "subagent.failed"):
        model = as_text(data.model)
        tool_name = as_text(data.agentName)
        success = kind == "subagent.completed"
        error, error_code = _error_fields(data.error)
    elif kind in ("abort", "session.info", "session.warning"):
        text = preview(data.reason or data.message)
    return (
        as_str(data.turnId),
        as_str(data.interactionId),
        as_str(data.toolCallId),
        tool_name,
        as_str(data.messageId),
        as_str(data.parentToolCallId),
        success,
        is_user_requested,
        is_nudge,
        agent_mode,
        model,
        output_tokens,
        chunk_index,
        text,
        error,
        error_code,
        outcome,
        requests,
        detail,
    )
