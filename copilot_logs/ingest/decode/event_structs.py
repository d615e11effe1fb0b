"""The msgspec types an event line is decoded into, and an event line or its ``detail`` decoded
for the commands that need one (no polars here).

``data`` differs per event type and between CLI versions; only a few of its fields are ever
read. :class:`Common` names those that the types on most lines are read for, and msgspec
decodes every line of a clean block straight into it, skipping every other field (system
prompts, tool outputs beyond their first characters, arguments) without building Python objects
for them; the long texts (message content, tool output, arguments) are kept as raw JSON, of
which only the first characters are ever decoded. The fields only a few rare types carry (an
error message, a summary, a model or agent name, a reason) are in :class:`Data` alone: the clean
lane decodes the lines of those types again into it, and the line reader decodes every payload
into it (see :data:`copilot_logs.ingest.decode.payload.RARE_TYPES`).

Both hold each field in the type the columns take (an id is a string, a token count an int64),
so that a whole block of lines decodes in C with no per-field check in Python. A payload of
another shape (an id written as a number, ``toolRequests`` holding a string) fails to decode as
one; :func:`from_json` then reads it as :class:`LooseData`, which accepts any JSON value, and
converts each field as the columns read it: a payload of an unexpected shape is read as far as
it makes sense, never rejected.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import orjson

from copilot_logs.ingest.decode.envelope import as_int

JSONScalar = str | int | float | bool | None
Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
"""An integer a 64-bit column holds (a larger one fails the decoding, see json_limits)."""

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
    """The fields of ``data`` that the types on most lines are read for (any other field is
    skipped), typed as the columns take them: what every line of a clean block is decoded
    into. ``error`` is here (a tool's completion carries it): reading it again would mean a
    second pass over the tool's output."""

    # Ids shared by many event types.
    turnId: str | None = None
    interactionId: str | None = None
    toolCallId: str | None = None
    messageId: str | None = None
    parentToolCallId: str | None = None
    # Per type: see copilot_logs.ingest.decode.payload.
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
    """Every field of ``data`` some command reads: :class:`Common` and the fields only a few
    rare event types carry (errors, summaries, model and agent names, reasons), read as any
    value. The line reader decodes every payload into it; the clean lane only the lines of
    those rare types (:data:`copilot_logs.ingest.decode.payload.RARE_TYPES`), in a second
    decode of those lines alone, so that their fields cost nothing on the other lines."""

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


def _loose(strict: type[msgspec.Struct], own: dict[str, Any]) -> Any:
    """A struct with the fields of ``strict``, each accepting any JSON value: a raw text stays
    raw, ``own`` gives a field a type of its own, any other field is Any. Built from the strict
    struct, so the two cannot name different fields."""
    fields = [
        (
            field.name,
            own.get(field.name, msgspec.Raw if field.type is msgspec.Raw else Any),
            field.default,
        )
        for field in msgspec.structs.fields(strict)
    ]
    return msgspec.defstruct(f"Loose{strict.__name__}", fields, gc=False, module=__name__)


class LooseRequest(msgspec.Struct, gc=False):
    """:class:`Request`, its fields accepting any JSON value."""

    toolCallId: Any = None
    name: Any = None


class LooseResult(msgspec.Struct, gc=False):
    """:class:`Result`, its fields accepting any JSON value."""

    content: msgspec.Raw = _ABSENT


LooseData = _loose(
    Data,
    {
        "toolRequests": list[LooseRequest | list[Any] | JSONScalar] | dict[str, Any] | JSONScalar,
        "result": LooseResult | list[Any] | JSONScalar,
    },
)
"""The fields of :class:`Data`, accepting any JSON value."""


class Event(msgspec.Struct, gc=False):
    """An event whose envelope has the shape the CLI writes: a string type, id and
    timestamp, an object ``data``; parentId and agentId strings or absent. A line of any other
    shape fails to decode as one and is read by the line reader, which reports it. ``data``
    holds the :class:`Common` fields."""

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
"""``FULL_EVENT.decode(line)``: a line of a rare type as a :class:`FullEvent`."""
_DATA = msgspec.json.Decoder(Data)
_LOOSE_DATA = msgspec.json.Decoder(LooseData)
_RAW_DATA = msgspec.json.Decoder(RawData)


def from_json(encoded: bytes) -> Data:
    """A ``data`` object given as JSON text, as :class:`Data` (its fields converted as the
    columns read them when they are not of the usual types)."""
    try:
        return _DATA.decode(encoded)
    except msgspec.ValidationError:
        return _tidy(_LOOSE_DATA.decode(encoded))


def from_dict(data: dict[str, Any]) -> Data:
    """A ``data`` object already decoded, as :class:`Data`."""
    return from_json(orjson.dumps(data))


def _tidy(loose: Any) -> Data:
    """The fields of ``loose`` in their column types: an id or a name written as a number is
    its text, anything else no value; a count an integer; a flag a bool; ``toolRequests``
    the entries that are objects; ``result`` an object."""
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
    result = values["result"]
    values["result"] = Result(result.content) if isinstance(result, LooseResult) else None
    return Data(**values)


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


def detail(line: bytes | memoryview) -> str:
    """The ``data`` object of one event line as compact JSON (as the line reader writes it)."""
    raw = _RAW_DATA.decode(line).data
    return orjson.dumps(orjson.loads(bytes(raw))).decode()


def parse_detail(text: str | None) -> dict[str, Any]:
    """The fields of an event's ``detail`` column (its ``data`` as JSON text, see
    :func:`detail`): a dict, empty when there is none or it is not an object."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One whole event line (a line ``doctor --repair`` writes, never a damaged one: the reader
    reads those) as a dict; None when it is not one JSON object."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


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
