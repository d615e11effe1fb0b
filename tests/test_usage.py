"""``usage``: figures from session.shutdown, right across resumes, crashes and sub-agents."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from copilot_logs.cli import main
from copilot_logs.commands import usage
from copilot_logs.derive import usage as shutdown_usage
from copilot_logs.ingest.reader import ReadResult, read_bytes
from synth import SessionBuilder, bash, view
from tests.conftest import SAMPLES

AUTOPILOT = "7a2f9870-d353-4c15-8fd8-00cdc70debdc"
SESSION_ERROR = "8eae0f15-f4bf-4d6a-b3c4-d560fa43245f"
SUBAGENT = "fcf48e4f-66a8-4157-a7ea-69ef91674c6e"
FIGURES = (
    "premium_requests",
    "nano_aiu",
    "ai_credits",
    "requests",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "api_duration_ms",
    "lines_added",
    "lines_removed",
    "files_modified",
)


# --- helpers ---------------------------------------------------------------------------------


def read(*builders: SessionBuilder) -> ReadResult:
    return ReadResult.concat(
        read_bytes(b.to_bytes(), f"/logs/{b.session_id}.jsonl", b.session_id) for b in builders
    )


def session_row(*builders: SessionBuilder) -> dict[str, Any]:
    rows = usage.session_usage(read(*builders)).to_dicts()
    assert len(rows) == 1
    return rows[0]


def shutdowns(builder: SessionBuilder) -> list[dict[str, Any]]:
    return [e["data"] for e in builder.events if e["type"] == "session.shutdown"]


def model_sums(data: dict[str, Any]) -> dict[str, int]:
    """The per-model figures of one shutdown, summed by hand."""
    metrics = data["modelMetrics"].values()
    return {
        "requests": sum(m["requests"]["count"] for m in metrics),
        "input_tokens": sum(m["usage"]["inputTokens"] for m in metrics),
        "output_tokens": sum(m["usage"]["outputTokens"] for m in metrics),
        "cache_read_tokens": sum(m["usage"]["cacheReadTokens"] for m in metrics),
    }


def worked(builder: SessionBuilder, prompt: str = "fix the bug") -> None:
    """One interaction of three main-agent calls, two of them with tools."""
    builder.user_message(prompt)
    builder.turn("Looking at the code.", [view("/src/app.py", "print(1)")])
    builder.turn("Running the tests.", [bash("pytest -q", "1 passed")])
    builder.turn("Done: the bug is fixed.")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["usage", *args])


def json_report(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = orjson.loads(result.stdout)
    return report


# --- one session -----------------------------------------------------------------------------


def test_single_shutdown_figures_are_the_shutdowns() -> None:
    b = SessionBuilder(seed=1, model="claude-sonnet-4.5")
    worked(b)
    b.usage_checkpoint()
    b.shutdown(lines_added=12, lines_removed=3, files_modified=["/src/app.py", "/src/b.py"])
    data = shutdowns(b)[0]
    row = session_row(b)
    assert row["accounting"] == "single"
    assert row["shutdowns"] == 1
    assert row["complete"] is True
    assert row["premium_requests"] == data["totalPremiumRequests"] == 1
    assert row["nano_aiu"] == data["totalNanoAiu"]
    assert row["ai_credits"] == data["totalNanoAiu"] / 1e9
    assert row["api_duration_ms"] == data["totalApiDurationMs"]
    assert (row["lines_added"], row["lines_removed"], row["files_modified"]) == (12, 3, 2)
    assert {k: row[k] for k in model_sums(data)} == model_sums(data)
    [figures] = row["models"]
    metrics = data["modelMetrics"]["claude-sonnet-4.5"]
    assert figures["model"] == "claude-sonnet-4.5"
    assert figures["premium_requests"] == metrics["requests"]["cost"]
    assert figures["nano_aiu"] == metrics["totalNanoAiu"]
    assert figures["reasoning_tokens"] == metrics["usage"]["reasoningTokens"]


def test_input_tokens_already_hold_the_cache_tokens() -> None:
    b = SessionBuilder(seed=2)
    worked(b)
    b.shutdown()
    data = shutdowns(b)[0]["modelMetrics"]["gpt-5-mini"]["usage"]
    row = session_row(b)
    assert data["cacheReadTokens"] > 0
    assert row["input_tokens"] == data["inputTokens"]
    assert row["cache_read_tokens"] == data["cacheReadTokens"]


def test_cumulative_resume_takes_the_last_shutdown() -> None:
    b = SessionBuilder(seed=3)
    worked(b)
    b.usage_checkpoint()
    b.shutdown(lines_added=5, files_modified=["/a.py"])
    b.resume()
    worked(b, "and the other one")
    b.usage_checkpoint()
    b.shutdown(lines_added=9, files_modified=["/a.py", "/b.py"])
    first, last = shutdowns(b)
    row = session_row(b)
    assert row["accounting"] == "cumulative"
    assert row["requests"] == model_sums(last)["requests"] == 6
    assert row["input_tokens"] == model_sums(last)["input_tokens"]
    assert row["nano_aiu"] == last["totalNanoAiu"]
    assert row["nano_aiu"] != first["totalNanoAiu"] + last["totalNanoAiu"]
    assert (row["lines_added"], row["files_modified"]) == (9, 2)
    assert row["reconciliation"] == "exact"


def test_growing_shutdowns_without_checkpoints_are_cumulative() -> None:
    b = SessionBuilder(seed=4)
    worked(b)
    b.shutdown()
    b.resume()
    worked(b)
    b.shutdown()
    row = session_row(b)
    assert row["accounting"] == "cumulative"
    assert row["requests"] == 6


def test_per_segment_resume_sums_the_shutdowns() -> None:
    b = SessionBuilder(seed=5)
    worked(b)
    b.shutdown(per_segment=True, lines_added=4, files_modified=["/a.py"])
    b.resume()
    b.user_message("one more thing")
    b.turn("Done.")
    b.shutdown(per_segment=True, lines_added=1, files_modified=["/a.py", "/c.py"])
    first, second = shutdowns(b)
    row = session_row(b)
    assert row["accounting"] == "per-segment"
    assert row["requests"] == 4 == model_sums(first)["requests"] + model_sums(second)["requests"]
    assert (
        row["output_tokens"]
        == model_sums(first)["output_tokens"] + model_sums(second)["output_tokens"]
    )
    assert row["nano_aiu"] == first["totalNanoAiu"] + second["totalNanoAiu"]
    assert row["api_duration_ms"] == first["totalApiDurationMs"] + second["totalApiDurationMs"]
    assert row["lines_added"] == 5
    assert row["files_modified"] == 2  # /a.py once, not twice
    [figures] = row["models"]
    assert figures["requests"] == 4
    assert row["reconciliation"] == "exact"


def test_checkpoints_make_a_file_cumulative_whatever_the_figures() -> None:
    big = {"m": {"requests": {"count": 5, "cost": 1}, "usage": {"inputTokens": 100}}}
    small = {"m": {"requests": {"count": 2, "cost": 1}, "usage": {"inputTokens": 40}}}
    pair = [{"modelMetrics": big}, {"modelMetrics": small}]
    assert shutdown_usage.accounting(pair, has_checkpoints=False) == "per-segment"
    assert shutdown_usage.accounting(pair, has_checkpoints=True) == "cumulative"
    assert shutdown_usage.accounting(pair[::-1], has_checkpoints=False) == "cumulative"
    # A model missing from the later shutdown: that one reset.
    other = [{"modelMetrics": big}, {"modelMetrics": {"n": big["m"]}}]
    assert shutdown_usage.accounting(other, has_checkpoints=False) == "per-segment"
    assert shutdown_usage.accounting(pair[:1], has_checkpoints=False) == "single"
    assert shutdown_usage.accounting([], has_checkpoints=True) == "none"


def test_checkpoint_lines_in_a_log_make_its_shutdowns_cumulative() -> None:
    """A log whose second shutdown is smaller than its first reads as per-segment, unless it
    holds usage checkpoints: then the last shutdown is the session's usage."""
    b = SessionBuilder(seed=15)
    worked(b)
    b.usage_checkpoint()
    b.shutdown(per_segment=True)
    b.resume()
    b.user_message("one more thing")
    b.turn("Done.")
    b.shutdown(per_segment=True)
    first, second = shutdowns(b)
    assert shutdown_usage.accounting([first, second], has_checkpoints=False) == "per-segment"
    row = session_row(b)
    assert row["accounting"] == "cumulative"
    assert row["requests"] == model_sums(second)["requests"] == 1


def test_a_session_without_shutdown_is_unknown_not_zero() -> None:
    b = SessionBuilder(seed=6)
    worked(b)
    b.user_message("keep going")
    b.turn("Still working.", [bash("make", "ok")], end=False)  # killed mid-turn
    row = session_row(b)
    messages = [e["data"] for e in b.events if e["type"] == "assistant.message"]
    assert row["accounting"] == "none"
    assert row["shutdowns"] == 0
    assert row["complete"] is False
    assert row["output_tokens"] == sum(m["outputTokens"] for m in messages) > 0
    for name in (*FIGURES, "lines_added"):
        assert row[name] is None, name
    assert row["llm_calls"] == 4
    assert row["calls_after_shutdown"] == 4
    assert row["reconciliation"] == "unknown"
    [figures] = row["models"]
    assert figures["model"] == "gpt-5-mini"
    assert figures["output_tokens"] == row["output_tokens"]
    assert figures["requests"] is None
    assert figures["ai_credits"] is None


def test_failed_session_with_empty_model_metrics_is_a_real_zero() -> None:
    b = SessionBuilder(seed=7)
    b.user_message("hello")
    b.turn(None)  # the provider never answered
    b.session_error("Failed to get response from the AI model", "query")
    b.shutdown()
    assert shutdowns(b)[0]["modelMetrics"] == {}
    row = session_row(b)
    assert row["accounting"] == "single"
    assert row["models"] == []
    for name in ("requests", "premium_requests", "nano_aiu", "ai_credits", "input_tokens"):
        assert row[name] == 0, name
    assert row["output_tokens"] == 0
    assert row["reasoning_tokens"] == 0
    assert row["turns_without_reply"] == 1
    assert row["reconciliation"] == "unanswered"


def test_compaction_is_reported_apart() -> None:
    b = SessionBuilder(seed=8)
    worked(b)
    b.compaction(30_000)
    b.turn("Carrying on after the compaction.")
    b.shutdown()
    data = shutdowns(b)[0]
    [used] = [
        e["data"]["compactionTokensUsed"]
        for e in b.events
        if e["type"] == "session.compaction_complete"
    ]
    row = session_row(b)
    assert row["compactions"] == 1
    assert row["compaction_input_tokens"] == used["input"]
    assert row["compaction_output_tokens"] == used["output"]
    # The per-model figures leave the compaction call out; the credits keep it.
    assert row["requests"] == row["llm_calls"] == 4
    assert row["input_tokens"] == model_sums(data)["input_tokens"]
    assert row["output_tokens"] == model_sums(data)["output_tokens"]
    assert row["nano_aiu"] == data["totalNanoAiu"]
    assert row["reconciliation"] == "exact"


def test_compaction_without_token_details_falls_back_to_the_events() -> None:
    b = SessionBuilder(seed=9)
    worked(b)
    b.compaction(10_000)
    b.shutdown(token_details=False)
    [used] = [
        e["data"]["compactionTokensUsed"]
        for e in b.events
        if e["type"] == "session.compaction_complete"
    ]
    row = session_row(b)
    assert (row["compaction_input_tokens"], row["compaction_output_tokens"]) == (
        used["input"],
        used["output"],
    )


def test_no_compaction_means_zero_compaction_tokens() -> None:
    b = SessionBuilder(seed=10)
    worked(b)
    b.shutdown()
    row = session_row(b)
    assert (row["compactions"], row["compaction_input_tokens"]) == (0, 0)
    assert row["compaction_output_tokens"] == 0


def test_subagent_calls_are_in_the_requests_and_reconcile() -> None:
    b = SessionBuilder(seed=11)
    b.user_message("delegate it")
    b.subagent_run("run the tests", llm_calls=3, tool_calls=2)
    b.turn("The sub-agent ran the tests.")
    b.shutdown()
    row = session_row(b)
    assert (row["llm_calls"], row["subagent_calls"]) == (2, 3)
    assert row["requests"] == 5 == model_sums(shutdowns(b)[0])["requests"]
    assert row["reconciliation"] == "exact"


def test_a_wrong_request_count_is_a_mismatch() -> None:
    b = SessionBuilder(seed=12)
    worked(b)
    metrics = b.model_metrics()
    metrics["gpt-5-mini"]["requests"]["count"] = 9
    b.shutdown(metrics)
    assert session_row(b)["reconciliation"] == "mismatch"


def test_calls_after_the_last_shutdown_make_the_session_incomplete() -> None:
    b = SessionBuilder(seed=13)
    worked(b)
    b.shutdown()
    b.resume()
    b.user_message("more")
    b.turn("Working.", end=False)  # crashed before a second shutdown
    row = session_row(b)
    assert row["accounting"] == "single"
    assert row["requests"] == 3
    assert row["calls_after_shutdown"] == 1
    assert row["complete"] is False
    assert row["reconciliation"] == "exact"


def test_two_models_each_keep_their_figures() -> None:
    b = SessionBuilder(seed=14, model="gpt-5-mini")
    worked(b)
    b.model_change("claude-sonnet-4.5")
    worked(b, "now the hard part")
    b.shutdown()
    metrics = shutdowns(b)[0]["modelMetrics"]
    row = session_row(b)
    by_name = {m["model"]: m for m in row["models"]}
    assert set(by_name) == {"claude-sonnet-4.5", "gpt-5-mini"}
    for name, figures in by_name.items():
        assert figures["requests"] == metrics[name]["requests"]["count"]
        assert figures["premium_requests"] == metrics[name]["requests"]["cost"]
        assert figures["nano_aiu"] == metrics[name]["totalNanoAiu"]
    assert row["premium_requests"] == 1


def test_file_usage_marks_missing_fields_unknown() -> None:
    no_reasoning = {
        "totalNanoAiu": 5,
        "modelMetrics": {
            "a": {"requests": {"count": 1}, "usage": {"inputTokens": 10, "outputTokens": 2}},
        },
    }
    figures = shutdown_usage.file_usage([no_reasoning])
    assert figures["reasoning_tokens"] is None
    assert figures["premium_requests"] is None  # no total, no per-model cost
    assert figures["requests"] == 1
    assert figures["api_duration_ms"] is None
    assert figures["models"][0]["ai_credits"] is None


# --- property: never double count --------------------------------------------------------------

segments = st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=segments, checkpoints=st.booleans())
def test_cumulative_logs_count_every_call_once(calls: list[int], checkpoints: bool) -> None:
    b = SessionBuilder(seed=len(calls))
    for index, count in enumerate(calls):
        if index:
            b.resume()
        b.user_message(f"segment {index}")
        for call in range(count):
            b.turn(f"call {call}")
        if checkpoints:
            b.usage_checkpoint()
        b.shutdown()
    row = session_row(b)
    assert row["requests"] == sum(calls) == row["llm_calls"]
    assert row["accounting"] == ("single" if len(calls) == 1 else "cumulative")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=segments)
def test_per_segment_logs_count_every_call_once(calls: list[int]) -> None:
    b = SessionBuilder(seed=len(calls))
    for index, count in enumerate(calls):
        if index:
            b.resume()
        b.user_message(f"segment {index}")
        for call in range(count):
            b.turn(f"call {call}")
        b.shutdown(per_segment=True)
    row = session_row(b)
    # Even where a later segment uses at least as much as the one before (which looks
    # cumulative by the figures alone), the request counts against the calls written before
    # each shutdown tell a reset: every call is counted once.
    assert row["requests"] == sum(calls) == row["llm_calls"]
    readings_differ = len(calls) > 1 and any(calls[:-1])
    if readings_differ:
        assert row["accounting"] == "per-segment"


# --- grouping ---------------------------------------------------------------------------------


def _at(start: str, seed: int, *, model: str = "gpt-5-mini", shutdown: bool = True) -> Any:
    b = SessionBuilder(seed=seed, start=start, model=model)
    worked(b)
    if shutdown:
        b.shutdown()
    return b


def test_day_buckets_follow_the_time_zone() -> None:
    late = _at("2026-08-05T22:30:00.000Z", 20)
    early = _at("2026-08-06T00:30:00.000Z", 21)
    result = read(late, early)

    def days(zone: str) -> dict[date, int]:
        rows = usage.usage(result, by="day", zone=zone).rows
        return dict(zip(rows["day"].to_list(), rows["sessions"].to_list(), strict=True))

    assert days("UTC") == {date(2026, 8, 5): 1, date(2026, 8, 6): 1}
    assert days("Asia/Tokyo") == {date(2026, 8, 6): 2}
    assert days("America/New_York") == {date(2026, 8, 5): 2}


def test_week_and_month_buckets() -> None:
    result = read(
        _at("2026-08-31T23:30:00.000Z", 22),  # Monday in UTC, September in Tokyo
        _at("2026-09-02T10:00:00.000Z", 23),
    )
    weeks = usage.usage(result, by="week", zone="UTC").rows
    assert weeks["week"].to_list() == ["2026-W36"]
    months = usage.usage(result, by="month", zone="UTC").rows
    assert months["month"].to_list() == ["2026-08", "2026-09"]
    tokyo = usage.usage(result, by="month", zone="Asia/Tokyo").rows
    assert tokyo["month"].to_list() == ["2026-09"]
    assert tokyo["sessions"].to_list() == [2]


def test_week_buckets_take_the_iso_year_at_new_year() -> None:
    """2027-01-01 is a Friday: ISO week 53 of 2026, not a week 53 of 2027."""
    result = read(_at("2027-01-01T12:00:00.000Z", 24), _at("2027-01-04T12:00:00.000Z", 25))
    weeks = usage.usage(result, by="week", zone="UTC").rows
    assert weeks["week"].to_list() == ["2026-W53", "2027-W01"]


def test_a_bucket_sums_what_is_known_and_counts_the_rest() -> None:
    done = _at("2026-08-05T09:00:00.000Z", 24)
    crashed = _at("2026-08-05T11:00:00.000Z", 25, shutdown=False)
    alone = _at("2026-08-07T11:00:00.000Z", 26, shutdown=False)
    report = usage.usage(read(done, crashed, alone), by="day", zone="UTC")
    rows = {r["day"]: r for r in report.rows.to_dicts()}
    mixed, unknown = rows[date(2026, 8, 5)], rows[date(2026, 8, 7)]
    done_row = session_row(done)
    assert (mixed["sessions"], mixed["incomplete_sessions"]) == (2, 1)
    assert mixed["requests"] == done_row["requests"]
    assert (
        mixed["output_tokens"] == done_row["output_tokens"] + session_row(crashed)["output_tokens"]
    )
    assert unknown["incomplete_sessions"] == 1
    for name in ("requests", "premium_requests", "ai_credits", "input_tokens"):
        assert unknown[name] is None, name
    assert report.totals["sessions"] == 3
    assert report.totals["incomplete_sessions"] == 2
    assert report.totals["requests"] == done_row["requests"]


def test_by_model_sums_per_model_figures_across_sessions() -> None:
    one = _at("2026-08-05T09:00:00.000Z", 27, model="claude-sonnet-4.5")
    two = _at("2026-08-06T09:00:00.000Z", 28, model="claude-sonnet-4.5")
    three = _at("2026-08-06T10:00:00.000Z", 29, model="gpt-5-mini")
    rows = usage.usage(read(one, two, three), by="model").rows
    sonnet = rows.filter(model="claude-sonnet-4.5").to_dicts()[0]
    metrics = [shutdowns(b)[0]["modelMetrics"]["claude-sonnet-4.5"] for b in (one, two)]
    assert sonnet["sessions"] == 2
    assert sonnet["requests"] == sum(m["requests"]["count"] for m in metrics)
    assert sonnet["premium_requests"] == sum(m["requests"]["cost"] for m in metrics) == 2
    assert sonnet["nano_aiu"] == sum(m["totalNanoAiu"] for m in metrics)
    assert sonnet["ai_credits"] == sonnet["nano_aiu"] / 1e9
    assert rows["model"].to_list() == ["claude-sonnet-4.5", "gpt-5-mini"]


def test_by_repository_and_session_views() -> None:
    a = SessionBuilder(seed=30, repository="octo/a")
    worked(a)
    a.shutdown()
    b = SessionBuilder(seed=31, repository=None, cwd="/home/dev/scratch")
    worked(b)
    b.shutdown()
    result = read(a, b)
    rows = usage.usage(result, by="repository").rows
    assert rows["repository"].to_list() == ["/home/dev/scratch", "octo/a"]
    report = usage.usage(result, by="session")
    assert_frame_equal(report.rows, report.sessions)
    assert report.totals["requests"] == rows["requests"].sum()


def test_no_events_gives_an_empty_report() -> None:
    report = usage.usage(ReadResult.empty(), by="day")
    assert report.rows.is_empty()
    assert report.totals["sessions"] == 0
    assert report.totals["models"] == []


# --- the command -----------------------------------------------------------------------------


def test_real_samples_match_their_shutdown_lines(real_samples: Path) -> None:
    report = json_report(str(real_samples))
    rows = {row["session_id"]: row for row in report["rows"]}
    auto = rows[AUTOPILOT]
    assert auto["accounting"] == "single"
    assert auto["premium_requests"] == 0
    assert auto["ai_credits"] == pytest.approx(1.42639)
    assert auto["nano_aiu"] == 1_426_390_000
    [mini] = auto["models"]
    assert mini["model"] == "gpt-5-mini"
    assert (mini["requests"], mini["input_tokens"], mini["output_tokens"]) == (6, 75774, 3593)
    assert (mini["cache_read_tokens"], mini["reasoning_tokens"]) == (52736, 3136)
    assert auto["api_duration_ms"] == 58045
    assert (auto["llm_calls"], auto["subagent_calls"], auto["reconciliation"]) == (6, 0, "exact")

    error = rows[SESSION_ERROR]
    assert error["models"] == []
    assert (error["requests"], error["ai_credits"], error["premium_requests"]) == (0, 0, 0)
    assert error["reconciliation"] == "unanswered"

    sub = rows[SUBAGENT]
    assert (sub["requests"], sub["input_tokens"], sub["output_tokens"]) == (5, 91815, 2133)
    assert sub["cache_read_tokens"] == 60928
    assert sub["ai_credits"] == pytest.approx(1.351095)
    assert (sub["llm_calls"], sub["subagent_calls"], sub["reconciliation"]) == (4, 1, "exact")

    totals = report["totals"]
    assert (totals["sessions"], totals["requests"]) == (3, 11)
    assert totals["ai_credits"] == pytest.approx(2.777485)


def test_bundled_samples_match_their_expected_figures() -> None:
    expected_file = SAMPLES / "expected.json"
    # Committed with the project: its absence is a failure, never a skip.
    assert expected_file.is_file(), "sample_sessions/expected.json is lost: run `make samples`"
    expected = orjson.loads(expected_file.read_bytes())
    rows = {row["session_id"]: row for row in json_report(str(SAMPLES))["rows"]}
    assert set(rows) == set(expected)
    for session_id, figures in expected.items():
        row = rows[session_id]
        kind = figures["accounting"] or ("single" if figures["shutdowns"] == 1 else "none")
        assert row["accounting"] == kind, session_id
        for name in ("output_tokens", "requests", "premium_requests"):
            assert row[name] == figures[name], (session_id, name)
        assert {m["model"] for m in row["models"]} == set(figures["models"]), session_id


def test_verbose_reconciles_requests_with_counted_calls(real_samples: Path) -> None:
    result = invoke(str(real_samples), "--verbose", "--format", "json")
    assert result.exit_code == 0
    lines = {line[:8]: line for line in result.stderr.splitlines()}
    assert "requests 6 = 6 turns + 0 sub-agent calls" in lines[AUTOPILOT[:8]]
    assert "requests 5 = 4 turns + 1 sub-agent calls" in lines[SUBAGENT[:8]]
    assert "1 turns without a reply" in lines[SESSION_ERROR[:8]]
    orjson.loads(result.stdout)  # stdout stays machine-readable


def test_real_samples_split_over_days_in_tokyo(real_samples: Path) -> None:
    report = json_report(str(real_samples), "--by", "day", "--tz", "Asia/Tokyo")
    assert [(r["day"], r["sessions"]) for r in report["rows"]] == [
        ("2026-08-05", 1),
        ("2026-08-06", 2),
    ]
    assert report["zone"] == "Asia/Tokyo"
    assert report["rows"][0]["models"][0]["requests"] == 6


def test_json_fields(tmp_path: Path) -> None:
    _at("2026-08-05T09:00:00.000Z", 40).write_to(tmp_path)
    report = json_report("--root", str(tmp_path))
    [row] = report["rows"]
    for field in (
        "session_id",
        "premium_requests",
        "ai_credits",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "accounting",
        "models",
    ):
        assert field in row, field
    assert set(report) == {"by", "zone", "rows", "totals"}


def test_unknown_is_null_in_json_and_a_question_mark_in_the_table(tmp_path: Path) -> None:
    _at("2026-08-05T09:00:00.000Z", 41, shutdown=False).write_to(tmp_path)
    [row] = json_report("--root", str(tmp_path))["rows"]
    assert row["premium_requests"] is None
    assert row["ai_credits"] is None
    assert row["output_tokens"] > 0
    table = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["usage", "--root", str(tmp_path), "--tz", "UTC"]
    )
    assert table.exit_code == 0
    [line] = [x for x in table.stdout.splitlines() if x.startswith(row["session_id"][:8])]
    cells = line.split()
    assert cells[1:6] == ["2026-08-05", "09:00", "none", "?", "?"]  # accounting, premium, credits


def test_csv_breakdown_adds_a_row_per_model(tmp_path: Path) -> None:
    b = SessionBuilder(seed=42)
    worked(b)
    b.model_change("claude-sonnet-4.5")
    worked(b)
    b.shutdown()
    b.write_to(tmp_path)
    result = invoke("--root", str(tmp_path), "--by", "month", "--format", "csv", "--breakdown")
    assert result.exit_code == 0
    rows = pl.read_csv(result.stdout.encode())
    assert rows.columns[:2] == ["month", "model"]
    assert rows["model"].to_list() == [None, "claude-sonnet-4.5", "gpt-5-mini"]
    assert rows["requests"].to_list() == [6, 3, 3]
    plain = invoke("--root", str(tmp_path), "--by", "month", "--format", "csv")
    assert "model" not in pl.read_csv(plain.stdout.encode()).columns


def test_ndjson_and_markdown(tmp_path: Path) -> None:
    _at("2026-08-05T09:00:00.000Z", 43).write_to(tmp_path)
    _at("2026-08-06T09:00:00.000Z", 44).write_to(tmp_path)
    result = invoke("--root", str(tmp_path), "--format", "ndjson")
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [r["accounting"] for r in rows] == ["single", "single"]
    markdown = invoke("--root", str(tmp_path), "--format", "markdown", "--breakdown")
    lines = markdown.stdout.splitlines()
    assert lines[0].startswith("| session |")
    assert lines[-1].startswith("| total |")
    assert sum("gpt-5-mini" in line for line in lines) == 2


def test_since_reads_a_bare_date_in_the_chosen_zone(tmp_path: Path) -> None:
    _at("2026-08-05T16:00:00.000Z", 45).write_to(tmp_path)  # 2026-08-06 01:00 in Tokyo
    args = ("--root", str(tmp_path), "--since", "2026-08-06")
    assert len(json_report(*args, "--tz", "Asia/Tokyo")["rows"]) == 1
    utc = invoke(*args, "--tz", "UTC", "--format", "json")
    assert utc.exit_code == 0
    assert orjson.loads(utc.stdout)["rows"] == []
    assert "No sessions found" in utc.stderr


def test_a_bad_time_zone_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("--root", str(tmp_path), "--tz", "Mars/Olympus", "--by", "day")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --tz Mars/Olympus")
    assert result.stdout == ""


def test_help_explains_credits_and_has_examples() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "totalNanoAiu / 1e9" in result.output
    assert "Examples:" in result.output
    assert "copilot-logs usage --by day" in result.output
