"""The conformance suite: what the commands say of every recording of the real Copilot CLI,
against the truth the rig's model server kept (docs/recordings.md, docs/compatibility.md).

The oracle is the server's record of the requests it answered, never copilot-logs itself: main
calls are the requests of the main agent it answered (status 200), sub-agent calls those of the
sub-agents, tools the calls its replies asked for, prompts the scenario's, nudges the main calls
that follow an answer without tools in autopilot. Audit's verdicts and usage's figures are
checked in their own conformance tests, on the same ``recording`` fixture (tests/recorded.py).

A test that takes ``read`` runs twice: on one batch over every recording (the fast tier) and on
its log alone (tier ``matrix``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from copilot_logs import api
from copilot_logs.cli import main
from copilot_logs.commands.watch import Follower
from copilot_logs.ingest import cli_format
from copilot_logs.ingest.reader import read_bytes

from .recorded import ALL, COMMITTED, RECORDED, Read, Recording, any_recording, read, recording

__all__ = ["any_recording", "read", "recording"]  # the fixtures, for pytest

pytestmark = pytest.mark.live

WRITTEN_OUT_OF_ORDER = {("1.0.78", "interrupted"): {"E104", "E105"}}
"""Findings the CLI's own log deserves: on SIGINT, 1.0.78 wrote a second abort after the
shutdown had taken its place in the parentId chain (docs/compatibility.md)."""

EPHEMERAL_OR_STREAM_ONLY = cli_format.EPHEMERAL_TYPES | {"result"}
"""What the stream prints beside the log's events: ephemeral events, and its closing
``result`` line."""

FIGURES = (
    "llm_calls",
    "subagent_calls",
    "tool_calls",
    "subagent_tool_calls",
    "user_prompts",
    "autopilot_nudges",
    "interactions",
)


def test_there_are_recordings_of_every_scenario() -> None:
    """The committed matrix is there (and so every test below ran on something)."""
    committed = [r for r in ALL if r.folder.is_relative_to(COMMITTED)]
    if not committed:
        pytest.skip("COPILOT_LOGS_RECORDINGS points elsewhere")
    assert len({r.version for r in committed}) >= 3
    assert {r.scenario for r in committed} >= {"one-tool", "subagent", "json-stream"}


def test_count_finds_what_the_server_served(recording: Recording, read: Read) -> None:
    (row,) = read(recording, "count")
    assert {name: row[name] for name in FIGURES} == recording.expected
    assert row["session_id"] == recording.truth["session_id"]


def test_count_total_finds_the_same_calls(recording: Recording) -> None:
    result = CliRunner().invoke(
        main, ["count", "--total", "--include-subagents", "--no-cache", str(recording.log)]
    )
    expected = recording.expected
    assert result.stdout == f"{expected['llm_calls'] + expected['subagent_calls']}\n"


def test_validate_finds_no_error_or_warning(recording: Recording, read: Read) -> None:
    """Every recording validates with --strict (an interrupted run has info findings: the
    tool it stopped), but for the lines a CLI version wrote out of order."""
    report = read(recording, "validate", "--strict")
    allowed = WRITTEN_OUT_OF_ORDER.get((recording.version, recording.scenario), set())
    failing = [
        (f["code"], f["line"], f["message"])
        for f in report["findings"]
        if f["severity"] != "info" and f["code"] not in allowed
    ]
    assert failing == []
    if recording.scenario != "interrupted":
        # R604 notes a CLI newer than the recorded ones (`make record-live` runs the newest).
        assert [f for f in report["findings"] if f["code"] != "R604"] == []


def test_timeline_shows_each_subagent_once_with_its_calls(recording: Recording, read: Read) -> None:
    (session,) = read(recording, "timeline")
    runs = [
        run
        for interaction in session["interactions"]
        for turn in interaction["turns"]
        for run in turn["subagents"]
    ]
    runs += [run for interaction in session["interactions"] for run in interaction["subagents"]]
    shown = {run["agent_id"]: len(run["calls"]) for run in runs}
    assert len(runs) == len(shown)  # each once
    assert shown == {key: calls for key, (_, calls) in recording.subagents.items()}
    assert all(run["status"] == "completed" for run in runs)
    assert session["subagent_calls"] == recording.expected["subagent_calls"]
    assert session["llm_calls"] == recording.expected["llm_calls"]


def test_sessions_lists_the_session_with_its_cli_version(recording: Recording, read: Read) -> None:
    (row,) = read(recording, "sessions")
    assert row["session_id"] == recording.truth["session_id"]
    assert row["copilot_version"] == recording.version
    expected = recording.expected
    assert (row["llm_calls"], row["subagent_calls"]) == (
        expected["llm_calls"],
        expected["subagent_calls"],
    )
    assert row["subagent_runs"] == len(recording.subagents)
    assert row["mode"] == ("autopilot" if recording.autopilot else "interactive")


@pytest.mark.matrix
def test_watch_replays_the_log_to_the_same_figures(recording: Recording, tmp_path: Path) -> None:
    """The log appended in four parts, as the CLI writes it: watch's running figures after
    the last record are the truth's."""
    replay(recording, tmp_path)


NEWEST_OF_EACH_SCENARIO = list({r.scenario: r for r in RECORDED}.values())
"""Each scenario recorded by the newest CLI that recorded it."""


@pytest.mark.parametrize("newest", NEWEST_OF_EACH_SCENARIO, ids=lambda r: r.id)
def test_watch_replays_each_scenario_to_the_same_figures(newest: Recording, tmp_path: Path) -> None:
    """The replay above, in the fast tier on each scenario's newest recording (a replay is a
    read of its own per log: the matrix replays every version's)."""
    replay(newest, tmp_path)


def replay(recording: Recording, tmp_path: Path) -> None:
    lines = recording.log.read_bytes().splitlines(keepends=True)
    grown = tmp_path / "events.jsonl"
    grown.write_bytes(b"")
    follower = Follower((grown,), recording.truth["session_id"])
    records: list[dict[str, object]] = []
    step = max(1, len(lines) // 4)
    for start in range(0, len(lines), step):
        with grown.open("ab") as log:
            log.write(b"".join(lines[start : start + step]))
        update = follower.poll()
        records += update.records if update else []
    last = records[-1]
    assert {name: last[name] for name in FIGURES} == recording.expected
    assert last["subagent_runs"] == len(recording.subagents)


STREAMED = [r for r in RECORDED if (r.folder / "stdout.jsonl").is_file()]


@pytest.mark.parametrize("recording", STREAMED, ids=lambda r: r.id)
def test_the_json_stream_is_the_log(recording: Recording) -> None:
    """``--output-format json`` prints the events as they happen: copilot-logs reads each
    event the log keeps as the same event there (the stream's tool results carry more detail,
    which no column holds), and counts the stream as it counts the log."""
    stream = recording.folder / "stdout.jsonl"
    logged = read_bytes(recording.log.read_bytes(), "events.jsonl").events
    streamed = read_bytes(stream.read_bytes(), "stdout.jsonl").events
    where = ["line", "offset", "length", "file", "session_id", "parent_id"]
    ids = logged["event_id"]
    kept = streamed.filter(pl.col("event_id").is_in(ids.implode())).drop(where)
    assert kept.height >= 4, "too few of the log's events in the stream"
    assert_frame_equal(
        kept, logged.filter(pl.col("event_id").is_in(kept["event_id"].implode())).drop(where)
    )
    others = streamed.filter(~pl.col("event_id").is_in(ids.implode()))
    assert set(others["type"]) <= EPHEMERAL_OR_STREAM_ONLY
    table = api.count(read_bytes(stream.read_bytes(), "stdout.jsonl"))
    assert {name: table[name][0] for name in FIGURES} == recording.expected


def test_usage_reads_the_tokens_the_server_reported(recording: Recording, read: Read) -> None:
    """The shutdown's token figures (what ``usage`` reads today) are the server's sums; a log
    without a shutdown has none. (Usage's own conformance, credits first, is in its tests.)"""
    served = recording.served
    (row,) = read(recording, "usage")["rows"]
    if not row["shutdowns"]:
        assert row["input_tokens"] is None, row  # nothing said: unknown, not 0
        return
    assert row["input_tokens"] == sum(r["prompt_tokens"] for r in served)
    assert row["output_tokens"] == sum(r["completion_tokens"] for r in served)
    assert row["cache_read_tokens"] == sum(r["cached_tokens"] for r in served)


def test_usage_records_are_the_calls_the_server_served(recording: Recording, read: Read) -> None:
    """CLI 1.0.102 on: one session.usage_record per call, with the server's tokens and call id,
    and each sub-agent's under the key of its task call."""
    rows = read.rows(
        recording, ("usage_records",), lambda logs: api.usage_records(api.read(*logs)).to_dicts()
    )
    if cli_format.version_key(recording.version) < (1, 0, 102):
        assert rows == []
        return
    names = {name: key for key, (name, _) in recording.subagents.items()}
    expected = sorted(
        (
            r["api_call_id"],
            r["prompt_tokens"],
            r["completion_tokens"],
            r["cached_tokens"],
            names.get(r["agent"]),
        )
        for r in recording.served
    )
    found = sorted(
        (
            r["api_call_id"],
            r["input_tokens"],
            r["output_tokens"],
            r["cache_read_tokens"],
            r["agent_id"],
        )
        for r in rows
    )
    assert found == expected


@pytest.mark.parametrize("name", ["subagent", "two-subagents"])
def test_logs_of_several_versions_read_together_keep_each_subagent_apart(name: str) -> None:
    """One scenario of every version, read in one batch: each sub-agent once, with its calls
    (a sub-agent is linked to its task call per session log)."""
    chosen = [r for r in ALL if r.scenario == name and r.outcome == "recorded"]
    if len(chosen) < 2:
        pytest.skip("fewer than two versions recorded this scenario")
    runs = api.subagent_runs(api.read(*[str(r.log) for r in chosen]))
    expected = sorted(calls for r in chosen for _, calls in r.subagents.values())
    assert sorted(runs["llm_calls"].to_list()) == expected
