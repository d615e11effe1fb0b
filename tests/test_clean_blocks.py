"""The reader decodes clean blocks of lines whole and hands the rest to the line reader: the
frames are the same as reading every line one by one, whatever the damage and wherever the
block boundaries fall."""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import synth
from copilot_logs.ingest import reader
from copilot_logs.ingest.decode import RARE_TYPES, READS, Common
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import Physical, ReadResult, read_bytes, read_many
from synth import SessionBuilder, bash, edit, glob, grep, view

from .conftest import REAL_SAMPLES, SAMPLES


def line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn the clean-block lane off: every line goes through the line reader."""
    monkeypatch.setattr(reader.FileReader, "_clean_run", lambda *args: False)


def assert_same(left: ReadResult, right: ReadResult) -> None:
    assert_frame_equal(left.events, right.events)
    assert_frame_equal(left.diagnostics, right.diagnostics)


def both_ways(data: bytes, block: int | None = None) -> tuple[ReadResult, ReadResult]:
    with pytest.MonkeyPatch.context() as patch:
        if block is not None:
            patch.setattr(reader, "CLEAN_BLOCK", block)
        fast = read_bytes(data, "s.jsonl")
        line_by_line(patch)
        slow = read_bytes(data, "s.jsonl")
    return fast, slow


def session(seed: int) -> SessionBuilder:
    b = SessionBuilder(seed=seed)
    b.user_message("How does caching work? « ünïcödé » 🚀")
    b.turn("Searching.", [grep("Cache", "src/cache.ts:1"), glob("src/**/*.ts")], parallel=True)
    b.turn("Reading.", [view("src/cache.ts", "export class Cache {}" * 40)])
    b.user_requested_shell("git status", "nothing to commit")
    b.usage_checkpoint()
    b.shutdown()
    b.resume()
    b.mode_changed("autopilot")
    b.model_change("claude-sonnet-4.5")
    b.user_message("Fix it.")
    b.subagent_run("Run the tests.", llm_calls=2, tool_calls=1)
    b.turn("Fixing.", [edit("src/a.ts", "a", "b"), bash("npm test", "x" * 3000, success=False)])
    b.session_error("rate limited", "rate_limit", 429)
    b.nudge()
    b.task_complete_turn("Fixed.")
    b.abort("user initiated")
    b.info("rewind", "Rewound 2 events")
    b.shutdown()
    return b


DAMAGE = st.sampled_from(
    [
        "none",
        "crlf",
        "utf8",
        "blank",
        "split",
        "glued",
        "duplicate",
        "not-an-event",
        "nul",
        "numeric-id",
        "no-data",
        "odd-payload",
    ]
)


def damaged(lines: list[bytes], kind: str, at: int) -> bytes:
    """``lines`` with one damage at about line ``at`` (left as they are where that damage
    does not apply, e.g. a split where no free text is)."""
    lines = list(lines)
    at = at % len(lines)
    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
        _damage(lines, kind, at)
    return synth.join_lines(lines)


def _damage(lines: list[bytes], kind: str, at: int) -> None:
    target = lines[at]
    if kind == "crlf":
        lines[at] = synth.crlf(target)
    elif kind == "utf8":
        # In a field no command reads: only a check of the whole line can see it.
        obj = orjson.loads(target)
        obj["data"]["unread"] = "x"
        lines[at] = orjson.dumps(obj).replace(b'"unread":"x"', b'"unread":"\xff"')
    elif kind == "blank":
        lines.insert(at, synth.blank_line(b"  "))
    elif kind == "split":
        lines[at : at + 1] = list(synth.split_line(target))
    elif kind == "glued":
        lines[at] = synth.glue_truncated(lines[at - 1], target)
    elif kind == "duplicate":
        lines.insert(at, lines[at - 1])
    elif kind == "not-an-event":
        lines.insert(at, synth.not_an_event("array"))
    elif kind == "nul":
        lines[at] = b"\x00" * 8 + target
    elif kind == "numeric-id":
        obj = orjson.loads(target)
        obj["id"] = 12345
        lines[at] = orjson.dumps(obj)
    elif kind == "no-data":
        obj = orjson.loads(target)
        obj.pop("data")
        lines[at] = orjson.dumps(obj)
    elif kind == "odd-payload":
        obj = orjson.loads(target)
        obj["data"].update(
            toolRequests=[1, {"toolCallId": 7, "name": None}],
            result="text",
            arguments={"command": ["not", "a", "string"]},
            content={"not": "a string"},
            turnId=3.5,
            success="yes",
        )
        lines[at] = orjson.dumps(obj)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 1000),
    damage=st.lists(st.tuples(DAMAGE, st.integers(1, 500)), max_size=3),
    block=st.sampled_from([None, 1, 200, 1000, 5000]),
    unterminated=st.booleans(),
)
def test_clean_blocks_read_the_same_as_line_by_line(
    seed: int, damage: list[tuple[str, int]], block: int | None, unterminated: bool
) -> None:
    data = synth.join_lines(session(seed).lines())
    for kind, at in damage:
        data = damaged(data.rstrip(b"\n").split(b"\n"), kind, at)
    if unterminated:
        data = data.rstrip(b"\n")
    fast, slow = both_ways(data, block)
    assert_same(fast, slow)


def test_invalid_utf8_in_an_unread_field_is_still_reported() -> None:
    lines = session(1).lines()
    data = damaged(lines, "utf8", 3)
    result = read_bytes(data, "s.jsonl")
    assert result.diagnostics.select("line", "kind").rows() == [(4, "invalid-utf8")]
    assert result.events.height == len(lines)


def test_damage_after_clean_blocks_is_found_at_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "CLEAN_BLOCK", 1000)
    lines = session(2).lines()
    at = len(lines) - 3
    result = read_bytes(damaged(lines, "crlf", at), "s.jsonl")
    assert result.diagnostics.select("line", "kind").rows() == [(at + 1, "crlf")]
    assert result.events["line"].to_list() == list(range(1, len(lines) + 1))


def test_a_resumed_read_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = session(3)
    lines = b.lines()
    path = tmp_path / "events.jsonl"
    path.write_bytes(synth.join_lines(lines[:10]))
    first, states = read_many([(Source(path, "s"), None)])
    state = states[0]
    assert state is not None
    path.write_bytes(synth.join_lines(lines))
    resume = msgspec.structs.replace(state, seen_ids=frozenset(first.events["event_id"].to_list()))
    fast = read_many([(Source(path, "s"), resume)])
    line_by_line(monkeypatch)
    slow = read_many([(Source(path, "s"), resume)])
    assert_same(fast[0], slow[0])
    assert fast[1] == slow[1]
    assert fast[0].events["line"].to_list() == list(range(11, len(lines) + 1))


@pytest.mark.parametrize("folder", [SAMPLES, REAL_SAMPLES], ids=["sample_sessions", "real-samples"])
def test_bundled_and_real_logs_read_the_same(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if folder == REAL_SAMPLES and not folder.is_dir():
        pytest.skip(f"{folder} is not here")  # sample_sessions/ is committed: never skipped
    jobs = [(Source(p, p.stem), None) for p in sorted(folder.rglob("*.jsonl"))]
    fast, fast_states = read_many(jobs)
    line_by_line(monkeypatch)
    slow, slow_states = read_many(jobs)
    assert_same(fast, slow)
    assert fast_states == slow_states
    assert fast.events.filter(pl.col("detail").is_not_null()).height > 0


def test_blocks_after_a_damaged_one_are_decoded_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "CLEAN_BLOCK", 1000)
    outcomes: list[bool] = []
    clean_run = reader.FileReader._clean_run

    def spy(
        self: reader.FileReader,
        block: bytes,
        ends: list[int],
        where: tuple[int, int, int],
    ) -> bool:
        outcomes.append(clean_run(self, block, ends, where))
        return outcomes[-1]

    monkeypatch.setattr(reader.FileReader, "_clean_run", spy)
    lines = session(4).lines()
    result = read_bytes(damaged(lines, "crlf", 5), "s.jsonl")
    assert result.events.height == len(lines)
    assert result.diagnostics.select("line", "kind").rows() == [(6, "crlf")]
    first_damaged = outcomes.index(False)
    after = outcomes[first_damaged + 1 :]
    assert after.count(True) > after.count(False)


def test_rows_turned_into_chunks_give_the_same_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [(Source(p, p.stem), None) for p in sorted(SAMPLES.rglob("*.jsonl"))]
    whole, _ = read_many(jobs)
    monkeypatch.setattr(reader, "FLUSH_ROWS", 7)
    monkeypatch.setattr(reader, "CLEAN_BLOCK", 500)
    chunked, _ = read_many(jobs)
    assert_same(chunked, whole)


def test_payload_fields_of_unusual_types_read_the_same_both_ways() -> None:
    lines = session(5).lines()
    odd = [orjson.loads(raw) for raw in lines]
    for event in odd:
        if event["type"] == "assistant.turn_start":
            event["data"]["turnId"] = 7
        if event["type"] == "assistant.message":
            event["data"]["outputTokens"] = 12.0
    fast, slow = both_ways(synth.join_lines([orjson.dumps(event) for event in odd]))
    assert_same(fast, slow)
    starts = fast.events.filter(pl.col("type") == "assistant.turn_start")
    assert starts["turn_id"].to_list() == ["7"] * starts.height
    messages = fast.events.filter(pl.col("type") == "assistant.message")
    assert messages["output_tokens"].to_list() == [12] * messages.height


def test_only_the_damaged_line_goes_through_the_line_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [raw for seed in range(4) for raw in session(seed).lines()]
    lines = [orjson.dumps({**orjson.loads(raw), "id": f"e{n}"}) for n, raw in enumerate(lines)]
    assert len(lines) > 6 * reader.FALLBACK_LINES
    data = damaged(lines, "crlf", len(lines) // 2)
    line_by_line_read: list[int] = []
    line = reader.FileReader._line

    def spy(self: reader.FileReader, physical: Physical) -> Physical | None:
        line_by_line_read.append(physical.number)
        return line(self, physical)

    monkeypatch.setattr(reader.FileReader, "_line", spy)
    fast = read_bytes(data, "s.jsonl")
    # The run of FALLBACK_LINES lines that holds it is not clean: each of its lines is then
    # tried alone, and the clean ones are decoded with the rest.
    assert line_by_line_read == [len(lines) // 2 + 1]
    line_by_line(monkeypatch)
    assert_same(fast, read_bytes(data, "s.jsonl"))


def every_rare_type(seed: int) -> list[bytes]:
    """A session holding an event of every type of RARE_TYPES."""
    b = session(seed)
    b.event("session.warning", {"warningType": "quota", "message": "near the limit"})
    b.event("session.auto_mode_resolved", {"chosenModel": "gpt-5-mini"})
    b.event(
        "subagent.failed",
        {"toolCallId": "call_x", "agentName": "explore", "error": "boom", "model": "m"},
    )
    lines = b.lines()
    assert {orjson.loads(raw)["type"] for raw in lines} >= RARE_TYPES
    return lines


def with_number(lines: list[bytes], kind: str, field: str, number: bytes) -> tuple[bytes, int]:
    """``lines`` with ``number`` (raw JSON) as the ``data`` field ``field`` of the first event
    of type ``kind``, and the number of that line."""
    out = list(lines)
    at = next(n for n, raw in enumerate(out) if orjson.loads(raw)["type"] == kind)
    event = orjson.loads(out[at])
    event["data"][field] = "@@number@@"
    out[at] = orjson.dumps(event).replace(b'"@@number@@"', number)
    return synth.join_lines(out), at + 1


@pytest.mark.parametrize(
    ("kind", "field"),
    sorted(
        (kind, field)
        for kind in RARE_TYPES
        for field in READS[kind]
        if field not in Common.__struct_fields__
    ),
)
def test_a_number_past_a_double_in_a_rare_field_is_reported_where_it_is_read(
    kind: str, field: str
) -> None:
    # The fields only rare types are read for are decoded on those types alone (a second
    # decode of their lines); 1e999 there is refused, so the line reader reads the line and
    # reports it, exactly as line by line.
    data, line = with_number(every_rare_type(6), kind, field, b"1e999")
    fast, slow = both_ways(data)
    assert_same(fast, slow)
    assert (line, "out-of-range-number") in fast.diagnostics.select("line", "kind").rows()


@pytest.mark.parametrize(
    "value", [b"1e300", b"[1e300]", b"[0,9223372036854775808]", b'{"a":[-1.5e19]}']
)
def test_a_number_beyond_64_bits_in_a_detail_is_found_wherever_it_stands(value: bytes) -> None:
    # The whole data of a DETAIL_TYPES line is its detail column: a number orjson reads but
    # no 64-bit column holds is found there whether it follows ":", "," or "[" (the three
    # searches of json_limits.may_hold_big_numbers), and reported as line by line.
    data, line = with_number(every_rare_type(8), "session.start", "extra", value)
    fast, slow = both_ways(data)
    assert_same(fast, slow)
    assert (line, "out-of-range-number") in fast.diagnostics.select("line", "kind").rows()


def test_a_rare_field_on_a_type_not_read_for_it_is_skipped_like_any_unread_field() -> None:
    # A summary on an assistant.turn_start is read by no command: 1e999 there is what it is in
    # a field of any other name, skipped by the clean lane (hand rule, docs/damaged-logs.md:
    # out-of-range numbers are reported in the fields a command reads).
    lines = every_rare_type(7)
    rare, line = with_number(lines, "assistant.turn_start", "summary", b"1e999")
    other, _ = with_number(lines, "assistant.turn_start", "unread", b"1e999")
    as_rare, as_other = read_bytes(rare, "s.jsonl"), read_bytes(other, "s.jsonl")
    assert_frame_equal(as_rare.diagnostics, as_other.diagnostics)
    assert as_rare.diagnostics.height == 0
    moved = ("offset", "length")  # "summary" and "unread" differ in length
    assert_frame_equal(as_rare.events.drop(moved), as_other.events.drop(moved))
    assert as_rare.events.height == len(lines)
    assert line == 5
