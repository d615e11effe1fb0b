"""Sub-agents in the three ways CLI versions mark their lines (docs/compatibility.md): every
command sees each sub-agent once, keyed by its task call's toolCallId, with its calls.

The truth is the test-data generator's: the sub-agents it was asked for, their calls and tools
(``calls_written``), and the toolCallIds of their task calls. The recordings of the real CLI
check the same against the model server's truth (tests/test_conformance.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import synth
from copilot_logs import api, store
from copilot_logs.cli import main
from copilot_logs.commands import count_total, validate, watch
from copilot_logs.ingest import cli_format
from copilot_logs.ingest.calls import CallCounter
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import read_bytes
from copilot_logs.store.collect import read_all

PLAN = (("tests", 2, 1), ("lint", 3, 2))
"""(prompt, LLM calls, tool calls) of each sub-agent the session starts."""


def session(scheme: str) -> tuple[bytes, list[str], dict[str, int]]:
    """A session with the sub-agents of PLAN, one after the other, then a final turn; the
    log, the toolCallIds of the task calls, and what the generator wrote."""
    builder = synth.SessionBuilder(seed=11)
    builder.user_message("split the work")
    keys = [
        builder.subagent_run(
            prompt, llm_calls=calls, tool_calls=tools, scheme=scheme
        ).tool_call_ids[0]
        for prompt, calls, tools in PLAN
    ]
    builder.turn("both are done")
    builder.shutdown()
    return builder.to_bytes(), keys, dict(builder.calls_written)


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return orjson.loads(result.stdout)


def test_the_generator_writes_each_scheme_as_the_cli_versions_do() -> None:
    """The three markings, as seen in the recordings of CLI 1.0.20, 1.0.78 and 1.0.102."""
    marks = {}
    for scheme in synth.SCHEMES:
        data, keys, _ = session(scheme)
        lines = [orjson.loads(line) for line in data.splitlines()]
        bash = next(e for e in lines if e["data"].get("toolName") == "bash")
        starts = [e for e in lines if e["type"] == "subagent.started"]
        sub_turns = [e for e in lines if e["type"] == "assistant.turn_start" and "agentId" in e]
        marks[scheme] = (bash.get("agentId"), bash["data"]["parentToolCallId"], len(sub_turns))
        assert [start["data"]["toolCallId"] for start in starts] == keys
    parent, task_id, instance = (marks[s] for s in synth.SCHEMES)
    assert parent[0] is None and parent[2] == 0
    assert task_id[0] == task_id[1] and task_id[2] == 0
    assert instance[0] not in (None, instance[1]) and instance[2] == 2 + 3


@pytest.mark.parametrize("scheme", synth.SCHEMES)
def test_count_finds_every_call_in_every_scheme(scheme: str, tmp_path: Path) -> None:
    data, _, written = session(scheme)
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    (row,) = cli_json("count", "--no-cache", str(path))
    assert (row["llm_calls"], row["subagent_calls"]) == (written["main"], written["subagent"])
    assert row["tool_calls"] == len(PLAN)  # the task calls: the main agent's only tools
    assert row["subagent_tool_calls"] == sum(tools for _, _, tools in PLAN)
    assert row["user_prompts"] == 1  # the sub-agents' own prompts are not the user's
    # count --total, and the store's figures, count the same.
    figures, _ = count_total.count_file(Source(path, "s"))
    assert (figures.llm_calls, figures.subagent_calls) == (written["main"], written["subagent"])
    read_all([Source(path, "s")], use_cache=True)
    header = store.find(Source(path, "s")).header
    assert header is not None
    figures = header.figures
    assert (figures.llm_calls, figures.subagent_calls) == (written["main"], written["subagent"])


@pytest.mark.parametrize("scheme", synth.SCHEMES)
def test_validate_finds_nothing_in_every_scheme(scheme: str) -> None:
    data, _, _ = session(scheme)
    assert validate.check(read_bytes(data, "s.jsonl")).height == 0


@pytest.mark.parametrize("scheme", synth.SCHEMES)
def test_timeline_shows_each_subagent_once_with_its_calls(scheme: str) -> None:
    data, keys, _ = session(scheme)
    (timeline,) = api.timeline(read_bytes(data, "s.jsonl"))
    runs = [
        run
        for interaction in timeline["interactions"]
        for turn in interaction["turns"]
        for run in turn["subagents"]
    ]
    runs += [run for interaction in timeline["interactions"] for run in interaction["subagents"]]
    assert [run["agent_id"] for run in runs] == keys
    assert [run["status"] for run in runs] == ["completed", "completed"]
    assert [len(run["calls"]) for run in runs] == [calls for _, calls, _ in PLAN]
    assert [run["tool_calls"] for run in runs] == [tools for _, _, tools in PLAN]
    tools_by_call = [[call["tool_calls"] for call in run["calls"]] for run in runs]
    assert [sum(counts) for counts in tools_by_call] == [tools for _, _, tools in PLAN]


@pytest.mark.parametrize("scheme", synth.SCHEMES)
def test_every_frame_keys_a_subagent_by_its_task_call(scheme: str) -> None:
    data, keys, _ = session(scheme)
    result = read_bytes(data, "s.jsonl")
    runs = api.subagent_runs(result)
    assert runs["tool_call_id"].to_list() == keys
    assert runs["llm_calls"].to_list() == [calls for _, calls, _ in PLAN]
    assert set(api.tools(result)["agent_id"].drop_nulls()) == set(keys)
    watched = watch.records(result.events)
    sub_calls = watched.filter(
        (watched["kind"] == "turn_start") & watched["agent_id"].is_not_null()
    )
    assert sub_calls["agent_id"].to_list() == [keys[0]] * 2 + [keys[1]] * 3


def test_a_subagent_turn_start_is_a_subagent_call_never_a_main_one() -> None:
    """CLI 1.0.85 on: a sub-agent writes its own turn pairs, inside the main agent's open
    turn. Each of its turn_starts is one of its calls, and its messages are no second count."""
    counter = CallCounter()
    instance = "6acc76eb-054a-47f2-aed1-db476add218a"
    assert counter.add("assistant.turn_start", None)
    assert counter.add("assistant.turn_start", instance)
    assert not counter.add("assistant.message", instance, "m-1", 0)
    assert not counter.add("assistant.message", instance, "m-2")
    assert counter.add("assistant.turn_start", instance)
    assert (counter.llm_calls, counter.subagent_calls) == (1, 2)
    # A read that goes on where this one stopped knows the agent writes turns.
    resumed = CallCounter(counter.messages)
    assert not resumed.add("assistant.message", instance, "m-3")


def test_the_writer_of_a_line_in_each_scheme() -> None:
    assert cli_format.writer(None, None) is None  # the main agent
    assert cli_format.writer(None, "call_1") == "call_1"  # 1.0.2x
    assert cli_format.writer("call_1", "call_1") == "call_1"  # 1.0.3x to 1.0.80
    assert cli_format.writer("6acc76eb", "call_1") == "6acc76eb"  # 1.0.85 on, linked later


@pytest.mark.parametrize("scheme", synth.SCHEMES)
def test_a_log_that_grew_inside_a_subagent_run_is_counted_once(scheme: str, tmp_path: Path) -> None:
    """The store's entry carries what the count knew of each sub-agent (that it writes turn
    pairs, the messages counted): a count that reads on from it where the log grew, inside a
    sub-agent's run, gives the whole log's figures."""
    data, _, written = session(scheme)
    lines = data.splitlines(keepends=True)
    message = next(i for i, line in enumerate(lines) if b'"Running test shard batch 2.' in line)
    # Between a sub-agent's turn_start and its message where it writes turn pairs.
    inside = message if b'"assistant.turn_start"' in lines[message - 1] else message + 1
    path = tmp_path / "events.jsonl"
    runner = CliRunner()
    for end in (inside // 2, inside):  # two counts: the second entry can be read on from
        path.write_bytes(b"".join(lines[:end]))
        counted = runner.invoke(main, ["count", "--total", "--include-subagents", str(path)])
        assert counted.exit_code == 0, counted.output
    path.write_bytes(data)
    assert store.find(Source(path, "s")).state is store.State.GROWN
    again = runner.invoke(main, ["count", "--total", "--include-subagents", str(path)])
    assert again.stdout == f"{written['main'] + written['subagent']}\n"
