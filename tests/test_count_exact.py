"""`count --total` equals `count`'s total on every kind of damage and every key order, and the
one counting kernel decides every count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import synth
from copilot_logs import store
from copilot_logs.cli import main
from copilot_logs.commands import count, count_total
from copilot_logs.ingest import calls
from copilot_logs.ingest.calls import CallCounter, Figures
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import read_bytes
from copilot_logs.store.collect import read_all

from .chained import calls_written, chunked, render, session_events


def full_count(data: bytes) -> tuple[int, int]:
    """The oracle: `count`'s figures (the full reader and the model)."""
    table = count.count(read_bytes(data))
    return int(table["llm_calls"].sum()), int(table["subagent_calls"].sum())


def written(tmp_path: Path, data: bytes, name: str = "events.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def clean_total(path: Path) -> Figures:
    """count --total's figures of a file it must read to the end without damage."""
    figures, state = count_total.count_file(Source(path, "s"))
    assert figures.damage == () and state is not None and state.end == path.stat().st_size
    return figures


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_truncated_event_glued_to_a_complete_one_is_not_clean(tmp_path: Path) -> None:
    """The head of a cut turn_start, the tail of the complete event glued behind it, whose
    parentId continues the chain (the cut event never made it): not one turn start."""
    events = session_events()
    at = next(i for i, e in enumerate(events) if e["type"] == "assistant.turn_start")
    cut_event = render(events)[at]
    lines = render(events[:at] + events[at + 1 :])
    lines[at] = synth.glue_truncated(cut_event, lines[at])
    data = synth.join_lines(lines)
    path = written(tmp_path, data)
    figures, _ = count_total.count_file(Source(path, "s"))
    assert [row[:2] for row in figures.damage] == [(at + 1, "truncated-event")]
    assert (figures.llm_calls, figures.subagent_calls) == full_count(data)
    assert cli("count", "--total", "--no-cache", str(path)) == f"{full_count(data)[0]}\n"


def test_agent_id_after_parent_id_is_read_as_clean(tmp_path: Path) -> None:
    """Older CLIs wrote agentId after parentId: those lines are clean too."""
    data = synth.join_lines(render(chunked(session_events()), late_agent_id=True))
    assert b'"parentId":"' in data and b'"},"agentId":' not in data
    figures = clean_total(written(tmp_path, data))
    assert (figures.llm_calls, figures.subagent_calls) == full_count(data) == calls_written()


def test_a_nested_object_with_a_type_key_is_still_clean(tmp_path: Path) -> None:
    events = session_events()
    for event in events:
        if event["type"] == "tool.execution_start":
            event["data"]["arguments"] = {"type": "assistant.turn_start", "n": 1}
    data = synth.join_lines(render(events))
    assert data.count(b'{"type":"assistant.turn_start"') > calls_written()[0]
    figures = clean_total(written(tmp_path, data))
    assert (figures.llm_calls, figures.subagent_calls) == calls_written()
    assert full_count(data) == calls_written()


def test_a_file_that_grew_inside_a_subagent_message_is_counted_once(tmp_path: Path) -> None:
    """The chunks of one sub-agent call span the point where the file was counted before."""
    lines = render(chunked(session_events(), chunks=3))
    first_chunk = next(i for i, line in enumerate(lines) if b'"chunkIndex":0' in line)
    path = written(tmp_path, synth.join_lines(lines[: first_chunk + 2]))
    cli("count", "--total", "--include-subagents", str(path))
    data = synth.join_lines(lines)
    path.write_bytes(data)
    expected = sum(calls_written())
    assert cli("count", "--total", "--include-subagents", str(path)) == f"{expected}\n"
    found = store.find(Source(path, "s"))
    assert found.state is store.State.FRESH and found.header is not None
    assert found.header.end == len(data)  # and the second run only read the new bytes


def test_a_blank_line_and_two_events_on_one_line_do_not_shift_the_lines() -> None:
    """The reader's block lane once saw as many events as lines (one line none, one line two)
    and took the block as clean: the events landed on the wrong lines, or it crashed."""
    lines = render(session_events())
    lines[1:3] = [b"", lines[1] + lines[2]]
    result = read_bytes(synth.join_lines(lines))
    kinds = result.diagnostics.select("line", "kind").rows()
    assert kinds == [(2, "blank-line"), (3, "truncated-event")]
    # The line reader keeps the second event of line 3 (the first is taken as cut off).
    second = orjson.loads(render(session_events())[2])
    assert result.events.filter(pl.col("line") == 3)["event_id"].to_list() == [second["id"]]
    assert result.events.height == len(lines) - 1


# --- The property: every damage, every key order ----------------------------------------------


def _glued_in_chain(lines: list[bytes], events: list[dict[str, Any]], at: int, late: bool) -> None:
    """Event ``at`` cut and the next glued behind it, the chain going on as if it never was."""
    if at + 1 >= len(events) or len(lines[at]) < 2:
        return
    rest = render(events[:at] + events[at + 1 :], late_agent_id=late)
    lines[at : at + 2] = [synth.glue_truncated(lines[at], rest[at])]


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("data"), dict) else None


def damage(
    lines: list[bytes], events: list[dict[str, Any]], kind: str, at: int, late: bool
) -> None:
    """Apply one kind of damage in place at line ``at`` (taken modulo the lines)."""
    at %= len(lines)
    if kind == "crlf":
        lines[at] = synth.crlf(lines[at])
    elif kind == "split":
        try:
            lines[at : at + 1] = list(synth.split_line(lines[at]))
        except ValueError:
            return
    elif kind == "glued" and at + 1 < len(lines) and len(lines[at]) > 1:
        lines[at : at + 2] = [synth.glue_truncated(lines[at], lines[at + 1])]
    elif kind == "glued-in-chain" and len(lines) == len(events):
        _glued_in_chain(lines, events, at, late)
    elif kind == "duplicate":
        lines.insert(at + 1, lines[at])
    elif kind == "blank":
        lines.insert(at, b"")
    elif kind == "not-an-event":
        lines.insert(at, b'{"hello":1}')
    elif kind == "dropped":
        del lines[at]
    elif kind == "invalid-utf8":
        try:
            lines[at] = synth.invalid_utf8(lines[at])
        except ValueError:
            return
    elif kind in ("nested-type", "quoted-type") and (event := _event(lines[at])) is not None:
        if kind == "nested-type":
            event["data"]["meta"] = {"type": "assistant.turn_start"}
        else:
            event["data"]["note"] = '{"type":"assistant.turn_start","data":{}}'
        lines[at] = orjson.dumps(event)
    else:
        _damage_json(lines, kind, at)


def _damage_json(lines: list[bytes], kind: str, at: int) -> None:
    """Lines that are JSON, or nearly, in ways the CLI never writes them."""
    event = _event(lines[at])
    if kind == "two-events" and at + 1 < len(lines):
        lines[at : at + 2] = [lines[at] + lines[at + 1]]  # both whole, on one line
    elif kind == "space-line":
        lines.insert(at, b" \t ")
    elif kind == "trailing-space":
        lines[at] += b" "
    elif kind == "newline-between-keys" and b',"data":' in lines[at]:
        lines[at : at + 1] = lines[at].replace(b',"data":', b',\n"data":', 1).split(b"\n")
    elif kind == "escaped-type":
        lines[at] = lines[at].replace(b'{"type":"assistant.', b'{"type":"assistant\\u002e', 1)
    elif kind == "raw-tab":
        try:
            lines[at] = synth.invalid_utf8(lines[at], b"\t")
        except ValueError:
            return
    elif event is not None and event["type"] == "assistant.message" and "agentId" in event:
        if kind == "numeric-message-id":
            event["data"]["messageId"] = 7  # old logs wrote ids as numbers
        elif kind == "huge-chunk-index":  # beyond 64 bits: msgspec and orjson differ
            event["data"]["chunkIndex"] = 12345
        line = orjson.dumps(event)
        lines[at] = line.replace(b'"chunkIndex":12345', b'"chunkIndex":%d' % 2**64)


KINDS = [
    "crlf",
    "split",
    "glued",
    "glued-in-chain",
    "duplicate",
    "blank",
    "not-an-event",
    "dropped",
    "invalid-utf8",
    "nested-type",
    "quoted-type",
    "two-events",
    "space-line",
    "trailing-space",
    "newline-between-keys",
    "escaped-type",
    "raw-tab",
    "numeric-message-id",
    "huge-chunk-index",
]
ENDINGS = ["newline", "cut", "nul-tail", "cut+nul-tail"]
LOSSLESS = frozenset(KINDS) - {
    "glued",
    "glued-in-chain",
    "dropped",
    "two-events",
    "newline-between-keys",
    "raw-tab",
    "numeric-message-id",
}
"""The kinds of damage after which every event is still read whole (the others lose one, or
with ``numeric-message-id`` change a chunk's messageId so that it counts as another call;
``raw-tab`` puts a raw tab inside a text value, which JSON forbids: the line is skipped, and a
call with it when it is a call's line)."""


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 50),
    subagent_calls=st.integers(1, 3),
    chunks=st.integers(1, 3),
    late_agent_id=st.booleans(),
    damages=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 400)), max_size=4),
    ending=st.sampled_from(ENDINGS),
)
def test_total_equals_counts_total_on_every_damage_and_key_order(
    tmp_path: Path,
    seed: int,
    subagent_calls: int,
    chunks: int,
    late_agent_id: bool,
    damages: list[tuple[str, int]],
    ending: str,
) -> None:
    events = chunked(session_events(seed, subagent_calls), chunks)
    lines = render(events, late_agent_id=late_agent_id)
    for kind, at in damages:
        damage(lines, events, kind, at, late_agent_id)
    data = synth.join_lines(lines)
    if "cut" in ending:
        data = synth.cut(data)
    if "nul-tail" in ending:
        data = synth.nul_tail(data)
    expected = full_count(data)
    # The truth, apart from the code under test: damage that loses no event (and no cut)
    # leaves the calls the generator wrote; any damage leaves no more than it wrote.
    written_calls = calls_written(seed, subagent_calls)
    if all(kind in LOSSLESS for kind, _ in damages) and "cut" not in ending:
        assert expected == written_calls
    elif not any(kind == "numeric-message-id" for kind, _ in damages):
        assert expected[0] <= written_calls[0] and expected[1] <= written_calls[1]
    path = written(tmp_path, data, f"{seed}-{len(data)}.jsonl")
    source = Source(path, "s")
    figures, _ = count_total.count_file(source)
    assert (figures.llm_calls, figures.subagent_calls) == expected
    # The store's figures, counted from the frames, agree too.
    read_all([source], use_cache=True)
    header = store.find(source).header
    assert header is not None
    assert (header.figures.llm_calls, header.figures.subagent_calls) == expected


# --- One kernel ------------------------------------------------------------------------------


def test_every_count_asks_the_one_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Change the rule in CallCounter and every way of counting follows it: count --total
    (clean lane and line reader), the store's figures and the model."""
    events = chunked(session_events(), 2)
    clean = synth.join_lines(render(events))
    damaged = synth.nul_tail(clean)
    assert full_count(clean) == calls_written() == (2, 2)

    def every_chunk(
        self: CallCounter,
        kind: str,
        agent_id: str | None,
        message_id: object = None,
        chunk_index: object = None,
    ) -> bool:
        """Another rule: every sub-agent message line is a call; no turn start is."""
        if kind == calls.MESSAGE and agent_id is not None:
            self.subagent_calls += 1
            return True
        return False

    monkeypatch.setattr(CallCounter, "add", every_chunk)
    expected = (0, 4)
    assert full_count(clean) == expected  # the model
    for data, name in ((clean, "clean.jsonl"), (damaged, "damaged.jsonl")):
        source = Source(written(tmp_path, data, name), "s")
        figures, _ = count_total.count_file(source)  # the clean lane, then the line reader
        assert (figures.llm_calls, figures.subagent_calls) == expected, name
        read_all([source], use_cache=True)
        header = store.find(source).header
        assert header is not None
        assert (header.figures.llm_calls, header.figures.subagent_calls) == expected, name
    assert msgspec.json.decode(cli("count", "--format", "json", "--no-cache", str(tmp_path)))
