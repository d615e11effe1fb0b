"""Hostile but valid JSON (numbers no column holds, deep nesting) and a byte order mark: one
clear diagnostic naming file, line and field, never a traceback, and every other session is
still listed, counted and judged exactly as without the bad file."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.ingest.reader import read_bytes
from synth import SessionBuilder, bash

from .conftest import SAMPLES

HOSTILE_ID = "0badf00d-0000-4000-8000-000000000001"
TURNS = 3
"""Main-agent LLM calls in the hostile session."""


def hostile_session() -> list[bytes]:
    b = SessionBuilder(session_id=HOSTILE_ID, seed=3)
    b.user_message("go")
    b.turn("Looking.", [bash("ls", "a")])
    b.turn("Done.")
    b.shutdown()
    b.resume()
    b.user_message("again")
    b.turn("Ok.")
    b.shutdown()
    return b.lines()


def _edit(lines: list[bytes], kind: str, pattern: bytes, value: bytes, last: bool = False) -> int:
    """Replace the number after ``pattern`` in the first (or last) ``kind`` line; its index."""
    indexes = [i for i, raw in enumerate(lines) if f'"type":"{kind}"'.encode() in raw]
    index = indexes[-1] if last else indexes[0]
    lines[index], count = re.subn(
        pattern + rb"-?[0-9.eE+]+", pattern + value, lines[index], count=1
    )
    assert count == 1
    return index


def big_output(lines: list[bytes]) -> int:
    return _edit(lines, "assistant.message", b'"outputTokens":', b"9223372036854775808")


def infinite_output(lines: list[bytes]) -> int:
    return _edit(lines, "assistant.message", b'"outputTokens":', b"1e999")


def big_requests(lines: list[bytes]) -> int:
    return _edit(lines, "session.shutdown", b'"count":', b"18446744073709551616", last=True)


def big_usage(lines: list[bytes]) -> int:
    return _edit(lines, "session.shutdown", b'"inputTokens":', b"18446744073709551616")


def big_event_count(lines: list[bytes]) -> int:
    return _edit(lines, "session.resume", b'"eventCount":', b"18446744073709551616")


def big_file_size(lines: list[bytes]) -> int:
    return _edit(lines, "session.shutdown", b'"eventsFileSizeBytes":', b"-1e999", last=True)


def deep_nesting(lines: list[bytes]) -> int:
    index = next(i for i, raw in enumerate(lines) if b'"type":"user.message"' in raw)
    deep = b"[" * 1000 + b"]" * 1000
    lines[index] = lines[index].replace(b'"data":{', b'"data":{"nested":' + deep + b",", 1)
    return index


HOSTILE: dict[str, tuple[Callable[[list[bytes]], int], str, str]] = {
    # name: (damage, diagnostic kind, what its message names)
    "big-output": (big_output, "out-of-range-number", "data.outputTokens (9223372036854775808)"),
    "infinite-output": (infinite_output, "out-of-range-number", "data.outputTokens"),
    "big-requests": (big_requests, "out-of-range-number", "requests.count"),
    "big-usage": (big_usage, "out-of-range-number", "usage.inputTokens"),
    "big-event-count": (big_event_count, "out-of-range-number", "data.eventCount"),
    "infinite-file-size": (big_file_size, "out-of-range-number", "data.eventsFileSizeBytes"),
    "deep-nesting": (deep_nesting, "too-deep", "nested too deep"),
}

COMMANDS = ["sessions", "count", "count --total", "timeline", "audit", "validate", "usage"]


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def others(command: str, output: str, root: Path) -> Any:
    """What a command's JSON says about every session but the hostile one (under ``root``)."""
    data = orjson.loads(output.replace(str(root), "ROOT"))
    if command == "count --total":
        return data
    if command == "validate":
        return [f for f in data["findings"] if HOSTILE_ID not in f["file"]]
    rows = data["rows"] if command == "usage" else data
    return [row for row in rows if row.get("session_id") != HOSTILE_ID]


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """The bundled sessions (eleven) and each command's output on them alone."""
    root = tmp_path_factory.mktemp("root") / "sessions"
    shutil.copytree(SAMPLES, root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        return {c: (root, others(c, run(*c.split(), str(root)).stdout, root)) for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_number_or_nesting_is_reported_and_hides_no_other_session(
    name: str, command: str, alone: dict[str, tuple[Path, Any]], tmp_path: Path
) -> None:
    damage, kind, named = HOSTILE[name]
    sample_root, before = alone[command]
    root = tmp_path / "sessions"
    shutil.copytree(sample_root, root)
    lines = hostile_session()
    index = damage(lines)
    folder = root / HOSTILE_ID
    folder.mkdir()
    (folder / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")

    result = run(*command.split(), str(root))

    assert result.exit_code in (0, 1)  # a gate may fail on the damage; nothing is unreadable
    where = f"{folder / 'events.jsonl'}:{index + 1}"
    if command == "validate":
        findings = orjson.loads(result.stdout)["findings"]
        code = {"out-of-range-number": "E122", "too-deep": "E123"}[kind]
        hits = [f for f in findings if f["code"] == code]
        assert [(f["file"], f["line"]) for f in hits] == [(str(folder / "events.jsonl"), index + 1)]
        assert named in hits[0]["message"]
    elif command != "count --total":  # which reads no payload of a well-formed line
        line = next(x for x in result.stderr.splitlines() if f"{where}: {kind}:" in x)
        assert named in line
        assert "not valid JSON" not in result.stderr
    after = others(command, result.stdout, root)
    if command == "count --total":
        assert after == before + TURNS
    else:
        assert after == before
        if command not in ("validate", "audit"):  # audit lists autopilot runs only
            data = orjson.loads(result.stdout)
            rows = data["rows"] if command == "usage" else data
            assert HOSTILE_ID in [row["session_id"] for row in rows]


def test_an_out_of_range_number_reads_as_null_and_keeps_the_event() -> None:
    lines = hostile_session()
    index = big_output(lines)
    result = read_bytes(b"\n".join(lines) + b"\n")
    row = result.events.filter(result.events["line"] == index + 1)
    assert row["type"].to_list() == ["assistant.message"]
    assert row["output_tokens"].to_list() == [None]
    assert len(result.events) == len(lines)


def test_the_largest_64_bit_number_is_kept() -> None:
    lines = hostile_session()
    _edit(lines, "assistant.message", b'"outputTokens":', b"9223372036854775807")
    result = read_bytes(b"\n".join(lines) + b"\n")
    assert 9223372036854775807 in result.events["output_tokens"].to_list()
    assert result.diagnostics.is_empty()


BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_is_a_warning_and_every_event_is_read() -> None:
    data = b"\n".join(hostile_session()) + b"\n"
    plain, marked = read_bytes(data), read_bytes(BOM + data)
    assert marked.events.drop("offset").equals(plain.events.drop("offset"))
    assert (marked.events["offset"] - plain.events["offset"]).unique().to_list() == [3]
    assert marked.diagnostics.select("line", "offset", "kind").rows() == [(1, 0, "bom")]


def test_a_byte_order_mark_fails_validate_only_with_strict(tmp_path: Path) -> None:
    log = tmp_path / f"{HOSTILE_ID}.jsonl"
    log.write_bytes(BOM + b"\n".join(hostile_session()) + b"\n")
    lenient = run("validate", str(log))
    strict = run("validate", "--strict", str(log))
    codes = [f["code"] for f in orjson.loads(lenient.stdout)["findings"]]
    assert codes == ["E124"]  # not a truncated event, and eventsFileSizeBytes still agrees
    assert (lenient.exit_code, strict.exit_code) == (0, 1)
    sessions = run("sessions", str(log))
    assert "bom" in sessions.stderr and "truncated" not in sessions.stderr


def test_the_message_names_each_field_and_its_value() -> None:
    lines = hostile_session()
    index = _edit(lines, "session.shutdown", b'"inputTokens":', b"-1e999")
    lines[index] = re.sub(rb'"outputTokens":\d+', b'"outputTokens":' + b"9" * 30, lines[index])
    result = read_bytes(b"\n".join(lines) + b"\n")
    [message] = result.diagnostics.filter(result.diagnostics["line"] == index + 1)["message"]
    usage = next(iter(json.loads(lines[index])["data"]["modelMetrics"]))
    assert message.startswith(
        f"out-of-range number at data.modelMetrics.{usage}.usage.inputTokens (-infinite as a "
        f"double, like 1e999), data.modelMetrics.{usage}.usage.outputTokens (about 1e29): "
    )
