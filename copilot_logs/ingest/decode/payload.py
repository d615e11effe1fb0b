"""The typed payload columns of events, from their decoded ``data`` (no polars here).

:func:`payload_columns` turns the ``data`` of many events (a block of clean lines, or one line
read with damage recovery: see :mod:`copilot_logs.ingest.reader`) into the columns of
:data:`PAYLOAD_FIELDS`, type by type, a column at a time. The long texts are raw JSON
(:mod:`copilot_logs.ingest.decode.event_structs`), of which only the head is decoded for a preview.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from operator import attrgetter
from typing import Any

import msgspec

from copilot_logs.ingest.decode.event_structs import (
    Common,
    Data,
    as_str,
    as_text,
    from_dict,
    from_json,
)
from copilot_logs.ingest.decode.event_types import DETAIL_TYPES, NUDGE_TEXT, PREVIEW_CHARS

__all__ = [
    "IDS",
    "NO_PAYLOAD",
    "PAYLOAD_FIELDS",
    "PAYLOAD_TYPES",
    "RARE_TYPES",
    "READS",
    "TEXT_HEAD",
    "as_str",
    "as_text",
    "from_dict",
    "from_json",
    "payload",
    "payload_columns",
    "preview",
    "raw_preview",
]

_STRING = msgspec.json.Decoder(str)
TEXT_HEAD = 1024
"""Bytes of a long raw JSON text decoded to preview it: more than PREVIEW_CHARS characters
unless most are escapes (then the whole text is decoded)."""

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
"""The columns :func:`payload_columns` fills, in its order."""

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

_NO_DATA = Common()
_IDS = {
    "turn_id": "turnId",
    "interaction_id": "interactionId",
    "tool_call_id": "toolCallId",
    "message_id": "messageId",
    "parent_tool_call_id": "parentToolCallId",
}
"""The columns every payload type fills, from the ``data`` field of the same meaning."""


def payload_columns(
    kinds: Sequence[str], datas: Sequence[Common | None], details: Sequence[str | None]
) -> list[list[Any]]:
    """The PAYLOAD_FIELDS columns of events of types ``kinds``: ``datas[i]`` is None when the
    payload is not read (not a PAYLOAD_TYPES type, or not an object); ``details[i]`` the
    whole ``data`` as JSON for DETAIL_TYPES, else None."""
    height = len(kinds)
    present = [_NO_DATA if data is None else data for data in datas]
    columns: dict[str, list[Any]] = {
        name: list(map(attrgetter(field), present)) for name, field in _IDS.items()
    }
    for name in PAYLOAD_FIELDS:
        if name not in columns:
            columns[name] = [False] * height if name == "is_nudge" else [None] * height
    columns["detail"] = list(details)
    for kind, rows in _rows_by_kind(kinds, datas):
        values = _BY_KIND[kind](kind, list(map(present.__getitem__, rows)))
        for name, column in values.items():
            deque(map(columns[name].__setitem__, rows, column), maxlen=0)
    return [columns[name] for name in PAYLOAD_FIELDS]


def payload(kind: str, data: Common | None, detail: str | None) -> tuple[Any, ...]:
    """The payload columns of one event, in PAYLOAD_FIELDS order: :func:`payload_columns`
    of one row, without its cost per call."""
    row = dict(zip(PAYLOAD_FIELDS, NO_PAYLOAD, strict=True))
    row["detail"] = detail
    if data is not None:
        row.update((name, getattr(data, field)) for name, field in _IDS.items())
        fill = _BY_KIND.get(kind)
        if fill is not None:
            row.update((name, column[0]) for name, column in fill(kind, [data]).items())
    return tuple(row.values())


def _rows_by_kind(
    kinds: Sequence[str], datas: Sequence[Common | None]
) -> Iterator[tuple[str, list[int]]]:
    """The rows of each type that fills more than the ids, in order."""
    keys = [kind if data is not None else "" for kind, data in zip(kinds, datas, strict=True)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    for kind, rows in groupby(order, key=keys.__getitem__):
        if kind in _BY_KIND:
            yield kind, list(rows)


def preview(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= PREVIEW_CHARS else value[: PREVIEW_CHARS - 1] + "…"


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
    if _is(data.content, b"", b"null", b'""'):
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
"""The columns of the events of one type (given as the type and the events' ``data``: a
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


def _one_by_one(
    fill: Callable[[str, Data], dict[str, Any]],
) -> Fill:
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


IDS = tuple(_IDS.values())
"""The ``data`` fields every payload type is read for (the columns of :data:`_IDS`)."""

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
"""The types read for a field that :class:`Common` does not hold (an error message, a
summary, a model or agent name, a reason): the clean lane decodes their lines again, alone,
into :class:`Data`. A malformed value in such a field (``1e999``) is refused there, so the
line goes to the line reader, which reports it, as in a field of :class:`Common` on any line;
on a type that is not read for it, the field is skipped, as every field no command reads."""
