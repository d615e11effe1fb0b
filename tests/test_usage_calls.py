"""`usage --by call|prompt|agent|task` against the truth of the rig's model server: what each
call reported (1.0.102 writes a session.usage_record per call: exact) and, before that, what
the shutdown says of whole groups (1.0.85's agentMetrics; a session's only prompt). Credits:
every recording is a bring-your-own-key run, which GitHub bills nothing (1.0.102 says
`unavailable`), so the credits come from the real logs GitHub billed (../shared/real-samples,
skipped when absent) for totals, and from schema-shaped usage records for per-call credits.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.commands.usage.breakdown import breakdown
from copilot_logs.ingest.cli_format import version_key
from copilot_logs.ingest.reader import read_bytes
from synth import SessionBuilder, bash, subagent_plan

from .recorded import RECORDED, Read, Recording, read

__all__ = ["read"]  # the fixture, for pytest

NEWEST = [r for r in RECORDED if version_key(r.version) >= (1, 0, 102)]
AGENT_METRICS = [r for r in RECORDED if (1, 0, 85) <= version_key(r.version) < (1, 0, 102)]
BEFORE_RECORDS = [r for r in RECORDED if version_key(r.version) < (1, 0, 102)]
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens")


def usage(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["usage", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    loaded: dict[str, Any] = orjson.loads(result.stdout)
    return loaded


def ids(recordings: list[Recording]) -> list[str]:
    return [r.id for r in recordings]


def served_tokens(requests: list[dict[str, Any]]) -> tuple[int, int, int]:
    """What the server reported, summed: (prompt tokens, which include the cached ones,
    completion tokens, cached tokens)."""
    return (
        sum(r["prompt_tokens"] for r in requests),
        sum(r["completion_tokens"] for r in requests),
        sum(r["cached_tokens"] for r in requests),
    )


def agent_names(recording: Recording) -> dict[str | None, str]:
    """The key every command gives each agent (None: main; a sub-agent: its task call's id)
    -> the agent the server saw asking (main, or the name in the task prompt's mark)."""
    names: dict[str | None, str] = {None: "main"}
    names.update({key: name for key, (name, _) in recording.subagents.items()})
    return names


def prompt_of_each_call(recording: Recording) -> list[int]:
    """The prompt each served call belongs to, from the server's record alone: a main-agent
    request after a main answer that ended the run starts the next prompt (an answer without
    tools ends it outside autopilot; in autopilot only task_complete does, the CLI nudges
    after a text answer)."""
    prompt, ended, found = 1, False, []
    for request in recording.served:
        if request["agent"] == "main":
            if ended:
                prompt += 1
            if recording.autopilot:
                ended = request["tools"] == ["task_complete"]
            else:
                ended = request["reply"] == "text"
        found.append(prompt)
    assert prompt == len(recording.truth["prompts"]), "the rule above missed a prompt"
    return found


# --- 1.0.102: every call exact -----------------------------------------------------------------


@pytest.mark.parametrize("recording", NEWEST, ids=ids(NEWEST))
def test_by_call_is_what_the_server_served_call_by_call(recording: Recording, read: Read) -> None:
    names = agent_names(recording)
    expected = sorted(
        (
            r["api_call_id"],
            r["agent"],
            r["prompt_tokens"],
            r["completion_tokens"],
            r["cached_tokens"],
        )
        for r in recording.served
    )
    rows = read(recording, "usage", "--by", "call")["rows"]
    found = sorted(
        (
            row["api_call_id"],
            names[row["agent_id"]],
            row["input_tokens"],
            row["output_tokens"],
            row["cache_read_tokens"],
        )
        for row in rows
    )
    assert found == expected
    assert {row["source"] for row in rows} == {"exact"}
    # A bring-your-own-key run: the CLI says no credits were reported. Not 0.
    assert {(row["ai_credits"], row["credits_status"]) for row in rows} == {(None, "unavailable")}
    assert all(row["ttft_ms"] is not None and row["model_time_ms"] is not None for row in rows)


@pytest.mark.parametrize("recording", NEWEST, ids=ids(NEWEST))
def test_by_agent_is_the_server_s_sums_per_agent(recording: Recording, read: Read) -> None:
    names = agent_names(recording)
    per_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in recording.served:
        per_agent[request["agent"]].append(request)
    rows = read(recording, "usage", "--by", "agent")["rows"]
    found = {names[row["agent_id"]]: tuple(row[name] for name in TOKENS) for row in rows}
    assert found == {agent: served_tokens(calls) for agent, calls in per_agent.items()}
    assert {row["agent"] for row in rows} == set(per_agent)  # named as the task call named it
    assert {row["source"] for row in rows} == {"exact"}


@pytest.mark.parametrize("recording", NEWEST, ids=ids(NEWEST))
def test_by_prompt_is_the_server_s_sums_per_prompt(recording: Recording, read: Read) -> None:
    per_prompt: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for prompt, request in zip(prompt_of_each_call(recording), recording.served, strict=True):
        per_prompt[prompt].append(request)
    rows = read(recording, "usage", "--by", "prompt")["rows"]
    found = {row["prompt_index"]: tuple(row[name] for name in TOKENS) for row in rows}
    assert found == {prompt: served_tokens(calls) for prompt, calls in per_prompt.items()}
    prompts = recording.truth["prompts"]
    for row in rows:  # fleet mode writes "Fleet deployed: " before the prompt typed
        assert row["prompt"].endswith(prompts[row["prompt_index"] - 1])
    assert [row["llm_calls"] for row in rows] == [len(per_prompt[p]) for p in sorted(per_prompt)]


def test_by_task_ends_a_task_at_its_accepted_completion() -> None:
    """1.0.102, autopilot-done-then-nudged: the first prompt's one call ends in task_complete;
    the second prompt's three calls (two of them after nudges) never complete."""
    chosen = [r for r in NEWEST if r.scenario == "autopilot-done-then-nudged"]
    if not chosen:
        pytest.skip("no autopilot-done-then-nudged recording of 1.0.102")
    recording = chosen[0]
    served = recording.served
    assert [r["tools"] for r in served] == [["task_complete"], [], [], []]
    rows = usage(str(recording.log), "--by", "task")["rows"]
    assert [(row["task_index"], row["completed"], row["llm_calls"]) for row in rows] == [
        (1, True, 1),
        (2, False, 3),
    ]
    assert rows[0]["summary"] == "The rig's task is done."
    assert tuple(rows[1][name] for name in TOKENS) == served_tokens(served[1:])


# --- before 1.0.102: the shutdown's figures for whole groups ----------------------------------


@pytest.mark.parametrize("recording", AGENT_METRICS, ids=ids(AGENT_METRICS))
def test_by_agent_from_the_shutdown_s_agent_metrics(recording: Recording, read: Read) -> None:
    """1.0.85 to 1.0.101 write no per-call record, but the shutdown's agentMetrics gives each
    agent's figures: they equal the server's sums per agent."""
    names = agent_names(recording)
    per_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in recording.served:
        per_agent[request["agent"]].append(request)
    rows = read(recording, "usage", "--by", "agent")["rows"]
    if not recording.shutdowns:  # 1.0.89/interrupted: stopped before it wrote one
        assert "from totals" not in {row["source"] for row in rows}
        return
    found = {names[row["agent_id"]]: tuple(row[name] for name in TOKENS) for row in rows}
    assert found == {agent: served_tokens(calls) for agent, calls in per_agent.items()}
    assert {row["source"] for row in rows} == {"from totals"}


@pytest.mark.parametrize("recording", BEFORE_RECORDS, ids=ids(BEFORE_RECORDS))
def test_by_prompt_before_the_records_is_the_shutdown_for_one_prompt_and_unknown_for_more(
    recording: Recording, read: Read
) -> None:
    rows = read(recording, "usage", "--by", "prompt")["rows"]
    if len(recording.truth["prompts"]) > 1:
        # The shutdown has one figure for the whole session: it is not shared out. The
        # prompts keep their messages' output tokens, and one row not attributable holds the
        # rest, so the rows add up to what the server served.
        prompts = [row for row in rows if row["source"] != "not attributable"]
        assert {row["source"] for row in prompts} == {"messages"}
        assert {row["input_tokens"] for row in prompts} == {None}
        (rest,) = [row for row in rows if row["source"] == "not attributable"]
        assert rest["reason"] == "no per-call records before CLI 1.0.102"
        summed = tuple(sum(row[name] or 0 for row in rows) for name in TOKENS)
        assert summed == served_tokens(recording.served)
        return
    (row,) = rows
    if not recording.shutdowns:  # 1.0.89/interrupted: stopped before it wrote one
        assert row["source"] == "messages"
        return
    assert row["source"] == "from totals"
    assert tuple(row[name] for name in TOKENS) == served_tokens(recording.served)
    assert row["llm_calls"] == len(recording.served)


# --- credits -----------------------------------------------------------------------------------


BILLED = {
    # real log: (session id prefix, the shutdown's totalNanoAiu / 1e9, read by hand)
    "irrlicht-1.0.78-autopilot-task_complete.events.jsonl": ("7a2f9870", 1.42639),
    "irrlicht-1.0.78-subagent.events.jsonl": ("fcf48e4f", 1.351095),
}


@pytest.mark.parametrize("name", sorted(BILLED))
def test_real_billed_logs_put_their_credits_on_their_one_prompt_and_task(
    real_samples: Path, name: str
) -> None:
    prefix, credits = BILLED[name]
    for by in ("prompt", "task"):
        report = usage(str(real_samples / name), "--by", by)
        (row,) = report["rows"]
        assert row["session_id"].startswith(prefix)
        assert (row["ai_credits"], row["source"]) == (credits, "from totals")
        assert report["totals"]["ai_credits"] == credits


def test_real_billed_log_with_a_sub_agent_cannot_split_its_credits_by_agent(
    real_samples: Path,
) -> None:
    """CLI 1.0.78 writes no agentMetrics: the main agent's and the sub-agent's shares of the
    1.351095 credits (the log's shutdown, read by hand) are not in the log, and are not
    guessed: they are one row not attributable, and the total is the session's."""
    rows = usage(str(real_samples / "irrlicht-1.0.78-subagent.events.jsonl"), "--by", "agent")
    assert [(row["agent"], row["ai_credits"], row["source"]) for row in rows["rows"]] == [
        ("main", None, "messages"),
        ("Task Agent", None, "messages"),
        ("not attributable", 1.351095, "not attributable"),
    ]
    assert (
        rows["rows"][-1]["reason"]
        == "no per-agent figures before CLI 1.0.85 (nor per-call records)"
    )
    assert rows["totals"]["ai_credits"] == 1.351095


def billed_record(call: int, nano: int, *, status: str = "complete") -> dict[str, Any]:
    """A usage_record shaped as the schema of CLI 1.0.102 says a GitHub-billed call's is."""
    return {
        "usage": {
            "model": "gpt-5",
            "inputTokens": 1000 * call,
            "outputTokens": 10 * call,
            "cacheReadTokens": 100 * call,
            "cacheWriteTokens": 0,
            "cost": 1.0,
            "duration": 900 + call,
            "timeToFirstTokenMs": 300.5 + call,
            "initiator": "user" if call == 1 else "agent",
            "apiCallId": f"chatcmpl-{call}",
            "aiCreditsStatus": status,
            "copilotUsage": {"totalNanoAiu": nano, "tokenDetails": []},
        }
    }


def groups(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows of a grouping but the session's not-attributable one: what the builder's own
    shutdown figures (not the calls' sums) leave beside the groups (tested in
    tests/test_session_model.py)."""
    return rows.filter(pl.col("source") != "not attributable")


def test_per_call_credits_from_schema_shaped_records() -> None:
    b = SessionBuilder(seed=40)
    b.user_message("Fix the flaky test.")
    b.turn("Looking.", [bash("pytest -x", "1 failed")])
    b.event("session.usage_record", billed_record(1, 125_000_000))
    b.turn("Fixed.", [bash("pytest -x", "ok")])
    b.event("session.usage_record", billed_record(2, 375_500_000))
    b.user_message("Thanks. Also the changelog.")
    b.turn("Done.")
    b.event("session.usage_record", billed_record(3, 40_000_000, status="unavailable"))
    b.shutdown()
    every = breakdown(read_bytes(b.to_bytes(), "billed.jsonl"), "call")
    # The builder's shutdown says 0.42622 credits for the session (its own figure, not the
    # records' sum): the row not attributable holds the difference, so the rows add up to it.
    (rest,) = every.filter(pl.col("source") == "not attributable")["ai_credits"].to_list()
    assert round(rest, 9) == round(0.42622 - (0.125 + 0.3755), 9)
    calls = every.filter(pl.col("source") != "not attributable")
    assert calls["ai_credits"].to_list() == [0.125, 0.3755, None]
    assert calls["credits_status"].to_list() == ["complete", "complete", "unavailable"]
    assert calls["ttft_ms"].to_list() == [301.5, 302.5, 303.5]
    prompts = breakdown(read_bytes(b.to_bytes(), "billed.jsonl"), "prompt")
    prompts = prompts.filter(pl.col("source") != "not attributable")
    assert prompts["ai_credits"].to_list() == [0.5005, None]
    assert prompts["credits_status"].to_list() == ["complete", "unavailable"]
    assert prompts["input_tokens"].to_list() == [3000, 3000]
    assert prompts["model_time_ms"].to_list() == [901 + 902, 903]


def test_a_call_without_a_record_leaves_its_group_unknown_not_partial() -> None:
    b = SessionBuilder(seed=41)
    b.user_message("One.")
    b.turn("First.")
    b.event("session.usage_record", billed_record(1, 10_000_000))
    b.turn("Second, with no record.")
    b.user_message("Two.")
    b.turn("Third.")
    b.event("session.usage_record", billed_record(3, 20_000_000))
    b.shutdown()
    prompts = breakdown(read_bytes(b.to_bytes(), "mixed.jsonl"), "prompt")
    prompts = prompts.filter(pl.col("source") != "not attributable")
    assert prompts["source"].to_list() == ["messages", "exact"]
    assert prompts["ai_credits"].to_list() == [None, 0.02]
    assert prompts["input_tokens"].to_list() == [None, 3000]


def test_agent_metrics_go_to_the_agent_whose_instance_id_they_name() -> None:
    """1.0.85's scheme (a sub-agent's lines carry its own instance id) and a shutdown whose
    agentMetrics give the main agent and the sub-agent figures nothing else could tell apart."""
    b = SessionBuilder(seed=42)
    b.user_message("Look into the build.")
    b.subagent_run("Explore.", subagent=subagent_plan(2, 1, scheme="instance"))
    b.turn("Done.")
    (started,) = [e for e in b.events if e["type"] == "subagent.started"]
    instance, key = started["agentId"], started["data"]["toolCallId"]

    def metrics(calls: int, tokens: int, nano: int, ms: int) -> dict[str, Any]:
        usage = {"inputTokens": tokens, "outputTokens": tokens // 100, "cacheReadTokens": 7}
        return {
            "totalApiDurationMs": ms,
            "totalNanoAiu": nano,
            "modelMetrics": {"gpt-5": {"requests": {"count": calls, "cost": 1}, "usage": usage}},
        }

    b.event(
        "session.shutdown",
        {
            "shutdownType": "routine",
            "totalNanoAiu": 1_000_000_000,
            "totalApiDurationMs": 2000,
            "modelMetrics": metrics(4, 12_000, 1_000_000_000, 2000)["modelMetrics"],
            "agentMetrics": {
                "main": metrics(2, 9_000, 700_000_000, 1500),
                instance: metrics(2, 3_000, 300_000_000, 500),
            },
        },
    )
    rows = groups(breakdown(read_bytes(b.to_bytes(), "agents.jsonl"), "agent")).to_dicts()
    found = {
        row["agent_id"]: (row["input_tokens"], row["ai_credits"], row["model_time_ms"])
        for row in rows
    }
    assert found == {None: (9_000, 0.7, 1500), key: (3_000, 0.3, 500)}
    assert {row["source"] for row in rows} == {"from totals"}


def test_a_rejected_completion_does_not_end_its_task() -> None:
    b = SessionBuilder(seed=43)
    b.mode_changed("autopilot")
    b.user_message("Ship it.")
    b.turn("", [bash("make", "ok")])  # call 1
    b.task_complete_turn("Shipped?", success=False)  # call 2: rejected, the task goes on
    b.turn("", [bash("make test", "ok")])  # call 3
    b.task_complete_turn("Shipped.")  # call 4: accepted
    b.turn("Anything else?")  # call 5: after the completion, a task of its own
    b.shutdown()
    rows = groups(breakdown(read_bytes(b.to_bytes(), "tasks.jsonl"), "task")).to_dicts()
    assert [(r["task_index"], r["llm_calls"], r["completed"], r["summary"]) for r in rows] == [
        (1, 4, True, "Shipped."),
        (2, 1, False, None),
    ]


# --- timeline: each call's figures ----------------------------------------------------------


def _call_nodes(node: Any) -> list[dict[str, Any]]:
    """Every turn and sub-agent call node under a timeline node."""
    found = []
    if isinstance(node, dict):
        if "usage_source" in node:
            found.append(node)
        for value in node.values():
            found += _call_nodes(value)
    elif isinstance(node, list):
        for value in node:
            found += _call_nodes(value)
    return found


@pytest.mark.parametrize("recording", NEWEST, ids=ids(NEWEST))
def test_timeline_shows_each_call_s_tokens_as_the_server_reported(
    recording: Recording, read: Read
) -> None:
    nodes = _call_nodes(read(recording, "timeline"))
    found = sorted(
        (n["api_call_id"], n["input_tokens"], n["output_tokens"], n["cache_read_tokens"])
        for n in nodes
        if n["usage_source"] == "exact"
    )
    expected = sorted(
        (r["api_call_id"], r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"])
        for r in recording.served
    )
    assert found == expected
    assert {n["credits_status"] for n in nodes if n["usage_source"] == "exact"} == {"unavailable"}


def test_timeline_text_names_a_call_s_figures() -> None:
    chosen = [r for r in NEWEST if r.scenario == "subagent"]
    if not chosen:
        pytest.skip("no subagent recording of 1.0.102")
    result = CliRunner().invoke(main, ["timeline", str(chosen[0].log)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    first = chosen[0].served[0]
    assert (
        f"[{first['prompt_tokens']:,} in ({first['cached_tokens']:,} cached), "
        f"{first['completion_tokens']:,} out, ttft" in result.output
    )
    assert "credits unavailable" in result.output


def test_a_record_with_a_figure_missing_or_impossible_leaves_that_figure_unknown() -> None:
    """A record whose inputTokens is no number and whose credits are negative (the schema
    allows neither): the call is still exact for what it says, and its group's sums of those
    figures are unknown, not 0."""
    b = SessionBuilder(seed=44)
    b.user_message("Go.")
    b.turn("One.")
    b.event(
        "session.usage_record",
        {"usage": {"inputTokens": "lots", "outputTokens": 5, "copilotUsage": {"totalNanoAiu": -5}}},
    )
    b.turn("Two.")
    b.event("session.usage_record", billed_record(2, 20_000_000))
    b.shutdown()
    calls = groups(breakdown(read_bytes(b.to_bytes(), "odd.jsonl"), "call"))
    assert calls["source"].to_list() == ["exact", "exact"]
    assert calls["input_tokens"].to_list() == [None, 2000]
    assert calls["ai_credits"].to_list() == [None, 0.02]
    (prompt,) = groups(breakdown(read_bytes(b.to_bytes(), "odd.jsonl"), "prompt")).to_dicts()
    assert (prompt["input_tokens"], prompt["ai_credits"], prompt["output_tokens"]) == (
        None,
        None,
        5 + 20,
    )
    assert prompt["credits_status"] == "partial"
