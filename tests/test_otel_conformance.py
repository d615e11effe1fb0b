"""``otel`` of every recording of the real CLI, against the truth the rig's model server kept
(the calls it answered, their tokens and ids), against what ``count`` and ``usage --by call``
say of the same log, and against the CLI's own spans where it wrote them (its file exporter,
``otel.jsonl`` beside the log: CLI 1.0.102 on in the committed recordings).

What a log cannot tell is left out of the comparison with the CLI's spans, and said here: a
model call that failed and was retried (the CLI's ``chat`` span with ``error.type``
``ModelCallError``) leaves no line in the log.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main

from .recorded import RECORDED, Recording, recording, version_key

__all__ = ["recording"]  # the fixture, for pytest

WITH_CLI_SPANS = [r for r in RECORDED if (r.folder / "otel.jsonl").is_file()]
"""The recordings made with the CLI's own file exporter on (1.0.102's, re-recorded with it)."""
WITH_RECORDS = [r for r in RECORDED if (version_key(r.version) or ()) >= (1, 0, 102)]
"""The recordings whose CLI writes a usage record per call (1.0.102 on)."""


pytestmark = pytest.mark.live

NOT_IN_A_LOG = {"ModelCallError"}
"""``error.type`` of the CLI's spans that stand for what a log does not hold."""
CLOSE_MS = 50


@cache
def ours(log: Path) -> list[dict[str, Any]]:
    """``otel --style copilot`` of the log: the spans in the CLI's own line shape."""
    done = CliRunner().invoke(
        main,
        [
            "otel",
            "--quiet",
            "--no-cache",
            "--include-open",
            "--style",
            "copilot",
            "--out",
            "-",
            str(log),
        ],
    )
    assert done.exit_code == 0, done.output
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def theirs(folder: Path) -> list[dict[str, Any]]:
    found = []
    for line in (folder / "otel.jsonl").read_bytes().splitlines():
        span = orjson.loads(line)
        if span["type"] == "span" and span["attributes"].get("error.type") not in NOT_IN_A_LOG:
            found.append(span)
    return found


def operation(span: dict[str, Any]) -> str | None:
    return span["attributes"].get("gen_ai.operation.name")


def chats(spans: list[dict[str, Any]], *, main: bool) -> list[dict[str, Any]]:
    parents = {s["spanId"]: s for s in spans}
    return [
        s
        for s in spans
        if operation(s) == "chat"
        and (parents[s["parentSpanId"]]["name"] in ("invoke_agent", "plan")) == main
    ]


def cli_json(*args: str) -> Any:
    done = CliRunner().invoke(main, [*args, "--no-cache", "--format", "json"])
    assert done.exit_code == 0, done.output
    return orjson.loads(done.stdout)


def test_the_spans_are_the_calls_tools_and_interactions_the_server_saw(
    recording: Recording,
) -> None:
    spans = ours(recording.log)
    expected = recording.expected
    assert len(chats(spans, main=True)) == expected["llm_calls"]
    assert len(chats(spans, main=False)) == expected["subagent_calls"]
    tools = [s for s in spans if operation(s) == "execute_tool"]
    assert len(tools) == expected["tool_calls"] + expected["subagent_tool_calls"]
    roots = [s for s in spans if "parentSpanId" not in s]
    assert len(roots) == expected["interactions"]
    assert {r["name"] for r in roots} <= {"invoke_agent"}
    agents = [s for s in spans if s["name"].startswith("invoke_agent ")]
    assert len(agents) == len(recording.subagents)


def test_the_spans_are_what_count_counts(recording: Recording) -> None:
    spans = ours(recording.log)
    (row,) = cli_json("count", str(recording.log))
    assert len(chats(spans, main=True)) == row["llm_calls"]
    assert len(chats(spans, main=False)) == row["subagent_calls"]
    tools = [s for s in spans if operation(s) == "execute_tool"]
    assert len(tools) == row["tool_calls"] + row["subagent_tool_calls"]
    assert len([s for s in spans if "parentSpanId" not in s]) == row["interactions"]


@pytest.mark.parametrize("recording", WITH_RECORDS, ids=[r.id for r in WITH_RECORDS])
def test_chat_tokens_are_the_servers_and_usage_by_calls(recording: Recording) -> None:
    """Where the CLI writes usage records (1.0.102 on): each chat span carries the tokens and
    the call id the server gave that call, and they sum to ``usage --by call``'s."""
    spans = [s for s in ours(recording.log) if operation(s) == "chat"]
    figures = {
        (
            a["gen_ai.response.id"],
            a["gen_ai.usage.input_tokens"],
            a["gen_ai.usage.output_tokens"],
            a["gen_ai.usage.cache_read.input_tokens"],
        )
        for a in (s["attributes"] for s in spans)
    }
    served = {
        (r["api_call_id"], r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"])
        for r in recording.served
    }
    assert figures == served and len(spans) == len(served)
    totals = cli_json("usage", "--by", "call", str(recording.log))["totals"]
    keys = {
        "input_tokens": "gen_ai.usage.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
        "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    }
    for name, key in keys.items():
        assert sum(s["attributes"][key] for s in spans) == totals[name], name


def _shape(spans: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """What the CLI's spans and ours must agree on, span by span."""
    parents = {s["spanId"]: s for s in spans}
    found: Counter[tuple[Any, ...]] = Counter()
    for span in spans:
        a = span["attributes"]
        parent = parents.get(span.get("parentSpanId", ""))
        reasons = a.get("gen_ai.response.finish_reasons")
        found[
            (
                span["name"],
                operation(span),
                operation(parent) if parent else None,
                a.get("gen_ai.tool.call.id"),
                a.get("gen_ai.response.id"),
                a.get("github.copilot.turn_id"),
                a.get("github.copilot.interaction_id"),
                a.get("github.copilot.initiator"),
                tuple(reasons) if reasons else None,
                a.get("gen_ai.usage.input_tokens"),
                a.get("gen_ai.usage.output_tokens"),
                a.get("gen_ai.usage.cache_read.input_tokens"),
            )
        ] += 1
    return found


def with_cli_spans(recording: Recording) -> None:
    assert (recording.folder / "otel.jsonl").is_file(), recording.id


@pytest.mark.parametrize("recording", WITH_CLI_SPANS, ids=[r.id for r in WITH_CLI_SPANS])
def test_the_spans_are_the_clis_own(recording: Recording) -> None:
    with_cli_spans(recording)
    expected, got = _shape(theirs(recording.folder)), _shape(ours(recording.log))
    assert got == expected, (sorted(expected - got), sorted(got - expected))


def _ms(pair: list[int]) -> float:
    return pair[0] * 1000 + pair[1] / 1e6


@pytest.mark.parametrize("recording", WITH_CLI_SPANS, ids=[r.id for r in WITH_CLI_SPANS])
def test_tool_spans_start_and_end_within_50_ms_of_the_clis(recording: Recording) -> None:
    """A tool span starts with its tool.execution_start and ends with its complete; the CLI's
    own starts and ends within 50 ms of those, but for a tool run in parallel with others,
    whose span the CLI ends when all their results are in (up to 135 ms after its complete
    line in the recordings): ours ends no later than the CLI's."""
    with_cli_spans(recording)
    cli = {
        s["attributes"]["gen_ai.tool.call.id"]: s
        for s in theirs(recording.folder)
        if operation(s) == "execute_tool"
    }
    spans = ours(recording.log)
    mine = {
        s["attributes"]["gen_ai.tool.call.id"]: s for s in spans if operation(s) == "execute_tool"
    }
    assert set(mine) == set(cli)
    for call, span in mine.items():
        other = cli[call]
        assert abs(_ms(span["startTime"]) - _ms(other["startTime"])) <= CLOSE_MS, call
        late = _ms(other["endTime"]) - _ms(span["endTime"])
        parallel = any(
            _ms(o["startTime"]) <= _ms(span["endTime"])
            and _ms(span["startTime"]) <= _ms(o["endTime"])
            for c, o in mine.items()
            if c != call and o["parentSpanId"] == span["parentSpanId"]
        )
        assert late >= -CLOSE_MS if parallel else abs(late) <= CLOSE_MS, (call, late)


@pytest.mark.parametrize("recording", WITH_CLI_SPANS, ids=[r.id for r in WITH_CLI_SPANS])
def test_each_root_says_the_prompt_or_nudge_as_the_clis_does(recording: Recording) -> None:
    """The root's ``github.copilot.user.message`` event: its source (``user``, ``autopilot``
    for a nudge), agent mode, interaction and turn ids, as in the CLI's own root."""
    with_cli_spans(recording)

    def said(spans: list[dict[str, Any]]) -> Counter[tuple[tuple[str, Any], ...]]:
        return Counter(
            tuple(sorted(event["attributes"].items()))
            for span in spans
            if "parentSpanId" not in span
            for event in span["events"]
            if event["name"] == "github.copilot.user.message"
        )

    expected = said(theirs(recording.folder))
    assert said(ours(recording.log)) == expected
    assert sum(expected.values()) == recording.expected["interactions"]
