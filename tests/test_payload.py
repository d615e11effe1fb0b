"""Payload columns from raw JSON: a long text's preview is decoded from its head alone, and
equals the preview of the whole decoded text whatever escapes or characters it holds."""

from __future__ import annotations

import json

import msgspec
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from copilot_logs.ingest.decode import (
    IDS,
    NUDGE_TEXT,
    PAYLOAD_FIELDS,
    PAYLOAD_TYPES,
    PREVIEW_CHARS,
    RARE_TYPES,
    READS,
    TEXT_HEAD,
    Common,
    Data,
    from_dict,
    payload,
    preview,
    raw_preview,
)

TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3 * TEXT_HEAD
)
LONG = st.builds(
    lambda unit, n, tail: unit * n + tail,
    st.sampled_from(["a", "é", "€", "😀", '"', "\\", "\n", "\u2028", "\x01", "ab\\u"]),
    st.integers(150, 1200),
    TEXT,
)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(TEXT, LONG), ascii_only=st.booleans())
def test_the_preview_of_raw_json_equals_the_preview_of_the_text(
    text: str, ascii_only: bool
) -> None:
    # orjson writes UTF-8; json.dumps(ensure_ascii=True) writes every non-ASCII character as
    # an escape, astral ones as surrogate pairs: both must give the same preview.
    raw = json.dumps(text, ensure_ascii=True).encode() if ascii_only else orjson.dumps(text)
    assert raw_preview(msgspec.Raw(raw)) == preview(text)


@given(value=st.one_of(st.none(), st.integers(), st.booleans(), st.lists(st.integers())))
def test_a_raw_value_that_is_no_text_has_no_preview(value: object) -> None:
    assert raw_preview(msgspec.Raw(json.dumps(value).encode())) is None


def test_long_texts_are_previewed_from_their_head() -> None:
    text = "x" * (PREVIEW_CHARS - 1) + "y" * 10_000
    assert raw_preview(msgspec.Raw(orjson.dumps(text))) == "x" * (PREVIEW_CHARS - 1) + "…"


def user_message(**data: object) -> tuple[object, ...]:
    return payload("user.message", from_dict(data), None)


def test_nudges_are_found_in_raw_content() -> None:
    is_nudge = 8
    long_tail = " and more" * 500
    assert user_message(content=NUDGE_TEXT + long_tail)[is_nudge] is True
    assert user_message(content="", transformedContent="x" * 5000 + NUDGE_TEXT)[is_nudge] is True
    escaped = json.dumps("é" + NUDGE_TEXT, ensure_ascii=True)
    data = msgspec.json.decode(
        b'{"content":"","transformedContent":' + escaped.encode() + b"}",
        type=type(from_dict({})),
    )
    assert payload("user.message", data, None)[is_nudge] is True
    assert user_message(content="please go on", transformedContent=NUDGE_TEXT)[is_nudge] is False
    assert user_message(content=None, agentMode="autopilot")[is_nudge] is True
    assert user_message(content="hi", agentMode="autopilot")[is_nudge] is False


def test_tool_arguments_are_previewed_as_json() -> None:
    data = from_dict({"toolName": "bash", "arguments": {"command": "ls -la " + "x" * 2000}})
    text = payload("tool.execution_start", data, None)[13]
    assert text is not None
    assert text.startswith('{"command":"ls -la xxx')
    assert len(text) == PREVIEW_CHARS and text.endswith("…")
    assert payload("tool.execution_start", from_dict({"arguments": None}), None)[13] is None


def test_a_text_of_exactly_the_preview_length_is_kept_whole() -> None:
    # 160 characters written as 1,023 bytes of escapes: the head holds all of it.
    text = "😀" * 13 + "\x01" * 144 + "abc"
    raw = json.dumps(text, ensure_ascii=True).encode()
    assert (len(text), len(raw)) == (PREVIEW_CHARS, TEXT_HEAD + 1)
    assert raw_preview(msgspec.Raw(raw)) == text


def test_fields_of_unusual_types_are_read_as_the_columns_take_them() -> None:
    # An id written as a number is its text, a bool no id; an integral float is a count, a
    # string none; toolRequests keeps the entries that are objects; a result that is no
    # object has no text. Written out by hand: the oracle is the documented rule.
    data = from_dict(
        {
            "turnId": 5,
            "messageId": 1.5,
            "toolCallId": True,
            "model": ["m"],
            "outputTokens": 7.0,
            "chunkIndex": "3",
            "toolRequests": [{"toolCallId": 9, "name": "bash"}, "x", [1], {"name": False}],
        }
    )
    row = dict(zip(PAYLOAD_FIELDS, payload("assistant.message", data, None), strict=True))
    assert (row["turn_id"], row["message_id"], row["tool_call_id"]) == ("5", "1.5", None)
    assert (row["model"], row["output_tokens"], row["chunk_index"]) == (None, 7, None)
    assert row["tool_requests"] == [("9", "bash"), (None, None)]
    complete = from_dict({"success": 1, "isUserRequested": False, "result": ["x"]})
    row = dict(zip(PAYLOAD_FIELDS, payload("tool.execution_complete", complete, None), strict=True))
    assert (row["success"], row["is_user_requested"], row["text"]) == (None, False, None)
    assert from_dict({"toolRequests": "bash"}).toolRequests is None


ODD_VALUES = [{"nested": [1, {"x": None}]}, [1, "two"], "text", -3, 2.5, True, None]


def test_every_field_of_a_payload_is_read_whatever_its_json_type() -> None:
    # Each field msgspec decodes (the strict Data), given a value of every JSON shape: never an
    # error, and a field whose value is an object or a list is no id or count (hand rule: an id
    # or a count is a scalar; anything else is not).
    for field in msgspec.structs.fields(Data):
        for value in ODD_VALUES:
            data = from_dict({field.name: value, "turnId": {"not": "an id"}})
            assert data.turnId is None, (field.name, value)
            if field.name in ("interactionId", "toolCallId", "outputTokens") and not isinstance(
                value, str | int | float
            ):
                assert getattr(data, field.name) is None, (field.name, value)


class Reading:
    """A ``data`` that notes every field read of it (each of Data's defaults)."""

    def __init__(self) -> None:
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> object:
        self.read.add(name)
        return getattr(Data(), name)


def test_each_type_is_read_for_the_fields_it_names_and_no_other() -> None:
    # The clean lane decodes a line of a frequent type into Common alone, and the fields of
    # READS[kind] only on the types that name them: a column filled from a field not named
    # would read a field that was never decoded.
    for kind in sorted(PAYLOAD_TYPES):
        data = Reading()
        payload(kind, data, None)  # type: ignore[arg-type]
        assert data.read <= set(IDS) | set(READS.get(kind, ())), kind
    assert set(READS) <= PAYLOAD_TYPES


def test_the_rare_types_are_those_read_for_a_field_common_lacks() -> None:
    common = set(Common.__struct_fields__)
    # Written out by hand: the types whose columns come from an error message, a summary, a
    # model or agent name or a reason, or (session.start) the session's id.
    assert {
        "abort",
        "session.auto_mode_resolved",
        "session.error",
        "session.info",
        "session.mode_changed",
        "session.model_change",
        "session.shutdown",
        "session.start",
        "session.task_complete",
        "session.warning",
        "subagent.completed",
        "subagent.failed",
        "subagent.started",
        "tool.user_requested",
    } == RARE_TYPES
    for kind in PAYLOAD_TYPES - RARE_TYPES:
        assert set(READS.get(kind, ())) <= common, kind
    assert common < set(Data.__struct_fields__)
