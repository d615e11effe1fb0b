"""The reader: every event recovered, every damaged line reported at its line and offset."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import read_bytes, read_source


def event(
    kind: str, number: int, data: dict[str, Any] | None = None, **envelope: Any
) -> dict[str, Any]:
    return {
        "type": kind,
        "data": data or {},
        **envelope,
        "id": f"id-{number}",
        "timestamp": f"2026-08-05T07:49:{number % 60:02d}.{number % 1000:03d}Z",
        "parentId": f"id-{number - 1}" if number > 1 else None,
    }


def line(obj: Any) -> bytes:
    return orjson.dumps(obj)


def clean_lines(n: int = 5) -> list[bytes]:
    kinds = [
        "session.start",
        "user.message",
        "assistant.turn_start",
        "assistant.message",
        "assistant.turn_end",
    ]
    return [
        line(
            event(kinds[i % len(kinds)], i + 1, {"sessionId": "s-1"} if i == 0 else {"turnId": "0"})
        )
        for i in range(n)
    ]


def join(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


def kinds_at(diagnostics: pl.DataFrame) -> list[tuple[int, str]]:
    return [(row["line"], row["kind"]) for row in diagnostics.sort("line").iter_rows(named=True)]


def test_clean_file_reads_every_event_in_order() -> None:
    result = read_bytes(join(clean_lines(5)), "s.jsonl")
    assert result.events["line"].to_list() == [1, 2, 3, 4, 5]
    assert result.events["event_id"].to_list() == [f"id-{i}" for i in range(1, 6)]
    assert result.events["session_id"].unique().to_list() == ["s-1"]
    assert result.diagnostics.is_empty()
    offsets = result.events["offset"].to_list()
    assert offsets[1] == len(clean_lines(5)[0]) + 1


def test_raw_line_separators_do_not_split_a_line() -> None:
    lines = clean_lines(3)
    lines[1] = line(event("user.message", 2, {"content": "a\u2028b\u2029c"}))
    result = read_bytes(join(lines))
    assert result.events.height == 3
    assert result.diagnostics.is_empty()
    assert result.events["text"][1] == "a\u2028b\u2029c"


def test_nul_tail_is_reported_and_ignored() -> None:
    data = join(clean_lines(3)) + b"\x00" * 100
    result = read_bytes(data)
    assert result.events.height == 3
    assert kinds_at(result.diagnostics) == [(4, "nul-bytes")]


def test_nul_padding_before_an_appended_event_keeps_the_event() -> None:
    lines = clean_lines(3)
    lines[2] = b"\x00" * 10 + lines[2]
    result = read_bytes(join(lines))
    assert result.events.height == 3
    assert kinds_at(result.diagnostics) == [(3, "nul-bytes")]


def test_event_split_by_raw_newline_is_rejoined() -> None:
    lines = clean_lines(4)
    split = line(event("assistant.message", 3, {"content": "first" + "\u0000NL" + "second"}))
    first, second = split.split(b"\\u0000NL")
    lines[2:3] = [first, second]
    result = read_bytes(join(lines))
    assert result.events["event_id"].to_list() == ["id-1", "id-2", "id-3", "id-4"]
    assert result.events.filter(pl.col("event_id") == "id-3")["text"][0] == "first\nsecond"
    assert kinds_at(result.diagnostics) == [(3, "split-event"), (4, "split-event")]
    assert result.events["line"].to_list() == [1, 2, 3, 5]


def test_event_split_over_three_lines_with_a_blank_inside() -> None:
    lines = clean_lines(3)
    split = line(event("assistant.message", 2, {"content": "a<NL><NL>b"}))
    lines[1:2] = split.split(b"<NL>")
    result = read_bytes(join(lines))
    assert result.events.height == 3
    assert result.events["text"][1] == "a\n\nb"
    assert kinds_at(result.diagnostics) == [
        (2, "split-event"),
        (3, "split-event"),
        (4, "split-event"),
    ]


def test_truncated_event_with_complete_event_glued_on() -> None:
    lines = clean_lines(4)
    truncated = lines[1][:25]
    lines[1:3] = [truncated + lines[2]]
    result = read_bytes(join(lines))
    assert result.events["event_id"].to_list() == ["id-1", "id-3", "id-4"]
    assert kinds_at(result.diagnostics) == [(2, "truncated-event")]
    glued = result.events.filter(pl.col("event_id") == "id-3")
    assert glued["offset"][0] == len(lines[0]) + 1 + 25


def test_cut_last_line_is_reported() -> None:
    lines = clean_lines(4)
    data = join(lines[:3]) + lines[3][:30]
    result = read_bytes(data)
    assert result.events.height == 3
    assert kinds_at(result.diagnostics) == [(4, "cut-line")]


def test_last_line_without_newline_but_complete_is_an_event() -> None:
    data = b"\n".join(clean_lines(3))
    result = read_bytes(data)
    assert result.events.height == 3
    assert result.diagnostics.is_empty()


def test_blank_lines_and_crlf() -> None:
    lines = clean_lines(3)
    data = lines[0] + b"\r\n\n  \n" + lines[1] + b"\n" + lines[2] + b"\n"
    result = read_bytes(data)
    assert result.events.height == 3
    assert kinds_at(result.diagnostics) == [(1, "crlf"), (2, "blank-line"), (3, "blank-line")]


def test_invalid_utf8_is_replaced_and_reported() -> None:
    lines = clean_lines(3)
    lines[1] = line(event("user.message", 2, {"content": "caf<BAD>"})).replace(b"<BAD>", b"\xff")
    result = read_bytes(join(lines))
    assert result.events.height == 3
    assert result.events["text"][1] == "caf\ufffd"
    assert kinds_at(result.diagnostics) == [(2, "invalid-utf8")]


def test_json_that_is_not_an_event() -> None:
    lines = clean_lines(2)
    data = join([lines[0], b'{"hello": 1}', b"[1, 2]", lines[1]])
    result = read_bytes(data)
    assert result.events.height == 2
    assert kinds_at(result.diagnostics) == [(2, "not-an-event"), (3, "not-an-event")]


def test_event_missing_envelope_fields_is_kept_and_reported() -> None:
    lines = clean_lines(2)
    data = join([lines[0], b'{"type":"assistant.turn_start","data":{"turnId":"0"}}', lines[1]])
    result = read_bytes(data)
    assert result.events["type"].to_list()[1] == "assistant.turn_start"
    assert kinds_at(result.diagnostics) == [(2, "incomplete-envelope")]


def test_duplicate_event_ids_are_kept_once() -> None:
    lines = clean_lines(4)
    data = join([*lines[:3], lines[2], lines[3]])
    result = read_bytes(data)
    assert result.events["event_id"].to_list() == ["id-1", "id-2", "id-3", "id-4"]
    assert kinds_at(result.diagnostics) == [(4, "duplicate-id")]
    assert result.diagnostics["event_id"][0] == "id-3"


def test_garbage_line_is_reported_and_the_rest_read() -> None:
    lines = clean_lines(3)
    data = join([lines[0], b"{not json at all", lines[1], lines[2]])
    result = read_bytes(data)
    assert result.events.height == 3
    assert kinds_at(result.diagnostics) == [(2, "invalid-json")]


def test_unreadable_file_is_a_diagnostic(tmp_path: Path) -> None:
    result = read_source(Source(tmp_path / "missing.jsonl", "missing"))
    assert result.events.is_empty()
    assert result.diagnostics["kind"].to_list() == ["unreadable"]


def test_every_damage_kind_in_one_file() -> None:
    lines = clean_lines(10)
    split_source = line(event("assistant.message", 5, {"content": "x<NL>y"}))
    damaged = [
        lines[0],
        lines[1] + b"\r",  # 2 crlf
        b"",  # 3 blank
        lines[2][:20] + lines[3],  # 4 truncated + glued (id-4 kept, id-3 lost)
        *split_source.split(b"<NL>"),  # 5-6 split event (id-5)
        lines[5].replace(b'"turnId":"0"', b'"content":"\xfe"', 1),  # 7 invalid utf-8
        b'{"not":"an event"}',  # 8
        lines[5],  # 9 duplicate of id-6
        lines[6],
        lines[7],
    ]
    data = b"\n".join(damaged) + b"\n" + b"\x00" * 16 + b"\n" + lines[8][:40]
    result = read_bytes(data)
    assert result.events["event_id"].to_list() == [
        "id-1",
        "id-2",
        "id-4",
        "id-5",
        "id-6",
        "id-7",
        "id-8",
    ]
    assert kinds_at(result.diagnostics) == [
        (2, "crlf"),
        (3, "blank-line"),
        (4, "truncated-event"),
        (5, "split-event"),
        (6, "split-event"),
        (7, "invalid-utf8"),
        (8, "not-an-event"),
        (9, "duplicate-id"),
        (12, "nul-bytes"),
        (13, "cut-line"),
    ]


def test_reading_streams_in_blocks_across_huge_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from copilot_logs.ingest import reader

    monkeypatch.setattr(reader, "CLEAN_BLOCK", 7)
    lines = clean_lines(3)
    lines[1] = line(event("user.message", 2, {"content": "z" * 5000}))
    result = read_bytes(join(lines))
    assert result.events.height == 3
    assert result.events["offset"].to_list() == [
        0,
        len(lines[0]) + 1,
        len(lines[0]) + len(lines[1]) + 2,
    ]


json_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@settings(max_examples=60, deadline=None)
@given(
    contents=st.lists(json_text, min_size=1, max_size=12),
    block=st.integers(min_value=1, max_value=64),
)
def test_round_trip_any_valid_stream(contents: list[str], block: int) -> None:
    """Any valid event stream written as JSONL reads back to the same events, whatever the
    line sizes and read block size."""
    from copilot_logs.ingest import reader

    original = reader.CLEAN_BLOCK
    reader.CLEAN_BLOCK = block
    try:
        events = [event("session.start", 1, {"sessionId": "s"})] + [
            event("user.message", i + 2, {"content": text}) for i, text in enumerate(contents)
        ]
        result = read_bytes(join([line(e) for e in events]))
    finally:
        reader.CLEAN_BLOCK = original
    assert result.diagnostics.is_empty()
    assert result.events["event_id"].to_list() == [e["id"] for e in events]
    assert result.events["type"].to_list() == [e["type"] for e in events]
    previews = result.events["text"].to_list()[1:]
    for text, preview in zip(contents, previews, strict=True):
        assert preview == (text if len(text) <= 160 else text[:159] + "…")


def test_shell_escape_command_is_previewed() -> None:
    from synth import SessionBuilder

    builder = SessionBuilder()
    builder.user_message("go")
    builder.user_requested_shell("git status", "clean")
    events = read_bytes(builder.to_bytes()).events
    requested = events.filter(pl.col("type") == "tool.user_requested")
    assert requested["text"].to_list() == ["git status"]
    assert requested["tool_name"].to_list() == ["bash"]


def test_lone_surrogate_escapes_are_mended_and_reported() -> None:
    """JSON.stringify writes a string cut inside an emoji with a lone \\udXXX escape: valid
    JSON that strict parsers refuse. The event is kept, the lone half becomes U+FFFD."""
    lines = clean_lines(3)
    cut = event("user.message", 4, {"content": "cut here"})
    pair = event("user.message", 5, {"content": "a pair"})
    lines.append(line(cut).replace(b"cut here", b"cut \\ud83d here"))
    lines.append(line(pair).replace(b"a pair", b"a pair \\ud83d\\ude00"))
    lines.append(line(event("user.message", 6, {"content": "x"})).replace(b'"x"', b"NaN"))
    # JSON orjson cannot hold: a 100-bit integer (read as null), 5,000 nested arrays (skipped).
    lone = b"a \\ud83d"
    huge = line(event("user.message", 7, {"content": "a X", "n": 1})).replace(b"a X", lone)
    lines.append(huge.replace(b'"n":1', b'"n":' + b"9" * 30))
    deep = line(event("user.message", 8, {"content": "a X", "n": 1})).replace(b"a X", lone)
    lines.append(deep.replace(b'"n":1', b'"n":' + b"[" * 5000 + b"]" * 5000))
    result = read_bytes(join(lines))
    assert kinds_at(result.diagnostics) == [
        (4, "lone-surrogate"),
        (6, "invalid-json"),
        (7, "lone-surrogate"),
        (7, "out-of-range-number"),
        (8, "too-deep"),
    ]
    texts = result.events["text"].to_list()
    assert texts[3:] == ["cut \ufffd here", "a pair 😀", "a \ufffd"]


@pytest.mark.parametrize(
    "prefix", [b"\n", b"\x00\n", b"\n\n", b" \n", codecs.BOM_UTF8, codecs.BOM_UTF8 + b"\n"]
)
def test_lines_before_the_first_event_keep_every_line_number(prefix: bytes) -> None:
    """Blank lines or a byte order mark before the first event: the events after them keep
    their own line numbers and offsets (each counted by hand)."""
    events = [
        b'{"type":"session.start","id":"a","timestamp":"2026-01-01T00:00:00Z","data":{}}',
        b'{"type":"user.message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:01Z",'
        b'"data":{"content":"hi"}}',
        b'{"type":"assistant.turn_start","id":"c","parentId":"b",'
        b'"timestamp":"2026-01-01T00:00:02Z","data":{"turnId":"0"}}',
    ]
    blank = prefix.count(b"\n")
    result = read_bytes(prefix + b"\n".join(events) + b"\n")
    assert result.events["line"].to_list() == [blank + 1, blank + 2, blank + 3]
    assert result.events["offset"].to_list() == [
        len(prefix),
        len(prefix) + len(events[0]) + 1,
        len(prefix) + len(events[0]) + len(events[1]) + 2,
    ]
