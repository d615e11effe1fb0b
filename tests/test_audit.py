"""`audit`: the verdict of each session, what it cost, and the command's formats and exit codes."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from copilot_logs.cli import audit as audit_cli
from copilot_logs.cli import main
from copilot_logs.commands import audit as core
from copilot_logs.commands.audit import AUDIT_COLUMNS, audit
from copilot_logs.commands.sessions import summarize
from copilot_logs.ingest.reader import ReadResult, read_bytes
from synth import SessionBuilder, ToolCall, bash, edit, view

from .conftest import SAMPLES

LATER = datetime(2030, 1, 1, tzinfo=UTC)
"""Long after every synthetic session: nothing is still running."""

SAMPLE_VERDICTS = {
    # session id prefix: (mode, verdict, verdict with --require-task-complete)
    "a1f0c3e2": ("interactive", "interactive", "missing-task-complete"),
    "b2e1d4f3": ("interactive", "interactive", "missing-task-complete"),
    "c3d2e5f4": ("autopilot", "completed", "completed"),
    "d4c3f605": ("autopilot", "nudge-cap", "nudge-cap"),
    "e5b4a716": ("interactive", "interactive", "missing-task-complete"),
    "f6a5b827": ("interactive", "interactive", "missing-task-complete"),
    "07f6c938": ("interactive", "interactive", "errored"),
    "18e7da49": ("interactive", "interactive", "interrupted"),
    "29d8eb5a": ("interactive", "interactive", "missing-task-complete"),
    "3ac9fc6b": ("interactive", "interactive", "missing-task-complete"),
    "4bbad07c": ("interactive", "interactive", "interrupted"),
}

REAL_VERDICTS = {
    "7a2f9870": ("autopilot", "completed", "completed"),
    "8eae0f15": ("interactive", "interactive", "errored"),
    "fcf48e4f": ("interactive", "interactive", "missing-task-complete"),
}


# --- helpers --------------------------------------------------------------------------------


def read(*builders: SessionBuilder) -> ReadResult:
    return ReadResult.concat(read_bytes(b.to_bytes(), f"{b.session_id}.jsonl") for b in builders)


def judge(b: SessionBuilder, **options: Any) -> dict[str, Any]:
    options.setdefault("now", LATER)
    table = audit(read(b), **options)
    assert table.height == 1
    return table.row(0, named=True)


def autopilot(seed: int = 0, prompt: str = "Migrate the config loader to YAML.") -> SessionBuilder:
    b = SessionBuilder(seed=seed)
    b.mode_changed("autopilot")
    b.user_message(prompt)
    return b


def loop(b: SessionBuilder, tools: int = 1) -> None:
    """One agent loop that ends without task_complete: tool turns, then a final answer."""
    for index in range(tools):
        b.turn("Working on it.", [bash(f"make step{index}", "ok")])
    b.turn("I believe this is done.")


def task_complete(b: SessionBuilder, summary: str = "Done.", **data: Any) -> None:
    """A task_complete turn whose session.task_complete carries ``data`` (success, outcome)."""
    b.turn("", [ToolCall("task_complete", {"summary": summary}, result=summary)], end=False)
    b.event("session.task_complete", {"summary": summary, **data}, after_ms=1)
    b.end_turn()


def lines_of(b: SessionBuilder, kind: str) -> list[int]:
    return [number for number, event in enumerate(b.events, 1) if event["type"] == kind]


def by_prefix(table: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {row["session_id"][:8]: row for row in table.to_dicts()}


# --- the bundled and real samples -----------------------------------------------------------


@pytest.mark.parametrize("require", [False, True])
def test_sample_sessions_get_the_verdict_read_from_each_file(require: bool) -> None:
    from copilot_logs.api import read as read_all

    table = audit(read_all(SAMPLES), now=LATER, require_task_complete=require)
    rows = by_prefix(table)
    assert set(rows) == set(SAMPLE_VERDICTS)
    for prefix, (mode, verdict, required) in SAMPLE_VERDICTS.items():
        assert rows[prefix]["mode"] == mode, prefix
        assert rows[prefix]["verdict"] == (required if require else verdict), prefix


def test_sample_figures_after_the_first_nudge() -> None:
    from copilot_logs.api import read as read_all

    rows = by_prefix(audit(read_all(SAMPLES), now=LATER))
    capped = rows["d4c3f605"]
    # Five nudges, each answered by a tool turn and a text turn; the third edit failed.
    assert capped["autopilot_nudges"] == capped["task_nudges"] == 5
    assert capped["turns_after_first_nudge"] == 10
    assert capped["tool_calls_after_first_nudge"] == 5
    assert capped["last_failed_tool"] == "edit"
    assert "No match found" in capped["last_failed_tool_error"]
    assert capped["task_complete_summary"] is None
    done = rows["c3d2e5f4"]
    assert done["autopilot_nudges"] == 1
    assert (done["turns_after_first_nudge"], done["tool_calls_after_first_nudge"]) == (2, 2)
    assert done["task_complete_summary"] == (
        "Added --json to the export command; the export tests pass."
    )
    assert done["task_complete_success"] is True


@pytest.mark.parametrize("require", [False, True])
def test_real_samples_get_the_verdict_read_from_each_file(
    real_samples: Path, require: bool
) -> None:
    from copilot_logs.api import read as read_all

    rows = by_prefix(audit(read_all(real_samples), now=LATER, require_task_complete=require))
    assert set(rows) == set(REAL_VERDICTS)
    for prefix, (mode, verdict, required) in REAL_VERDICTS.items():
        assert rows[prefix]["mode"] == mode, prefix
        assert rows[prefix]["verdict"] == (required if require else verdict), prefix
    loop_run = rows["7a2f9870"]
    assert loop_run["autopilot_nudges"] == 2 and loop_run["user_prompts"] == 1
    assert (loop_run["turns_after_first_nudge"], loop_run["tool_calls_after_first_nudge"]) == (
        4,
        3,
    )
    assert loop_run["task_complete_summary"].startswith("Created loop1.txt, loop2.txt")
    assert loop_run["line"] == 39  # the session.task_complete line
    provider = rows["8eae0f15"]
    assert provider["session_error"].startswith("Could not connect to local model provider")
    assert provider["session_error_type"] == "query"
    assert rows["fcf48e4f"]["last_failed_tool"] == "read_agent"


# --- verdicts ---------------------------------------------------------------------------------


def test_completed_after_nudges_counts_the_cost_of_not_finishing() -> None:
    b = autopilot()
    loop(b, tools=2)  # 3 LLM calls, 2 tools before any nudge
    b.nudge()
    loop(b, tools=1)  # 2 calls, 1 tool
    b.nudge(flagged=False)  # an older log: only the text tells it apart
    task_complete(b, "Migrated the loader; tests pass.", success=True)  # 1 call, 1 tool
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "completed"
    assert row["mode"] == "autopilot"
    assert row["autopilot_nudges"] == row["task_nudges"] == 2
    assert row["user_prompts"] == 1
    assert (row["llm_calls"], row["tool_calls"]) == (6, 4)
    assert (row["turns_after_first_nudge"], row["tool_calls_after_first_nudge"]) == (3, 2)
    assert row["task_complete_summary"] == "Migrated the loader; tests pass."
    assert row["line"] == lines_of(b, "session.task_complete")[-1]


def test_the_full_task_complete_summary_is_kept() -> None:
    summary = "Changed the loader. " * 20  # longer than the 160-character preview
    b = autopilot()
    task_complete(b, summary)
    b.shutdown()
    assert judge(b)["task_complete_summary"] == summary


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        ({"success": False}, "completion-rejected"),
        ({"success": False, "outcome": "continue"}, "completion-rejected"),
        ({"outcome": "continue"}, "completion-rejected"),
        ({"success": True, "outcome": "blocked"}, "blocked"),
    ],
)
def test_a_rejected_task_complete_is_completion_rejected_or_blocked(
    data: dict[str, Any], verdict: str
) -> None:
    b = autopilot()
    loop(b)
    task_complete(b, "Blocked on credentials.", **data)
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == verdict
    assert row["task_complete_success"] == data.get("success")
    assert row["task_complete_outcome"] == data.get("outcome")


def test_work_after_a_rejected_task_complete_decides() -> None:
    b = autopilot()
    task_complete(b, "Not yet.", outcome="continue")
    loop(b)
    b.shutdown()
    assert judge(b)["verdict"] == "missing-task-complete"
    b2 = autopilot()
    task_complete(b2, "Not yet.", outcome="continue")
    loop(b2)
    task_complete(b2, "Now it is.", success=True)
    b2.shutdown()
    row = judge(b2)
    assert (row["verdict"], row["task_complete_summary"]) == ("completed", "Now it is.")


def test_ended_without_task_complete_is_missing_below_the_cap_and_nudge_cap_at_it() -> None:
    b = autopilot()
    loop(b)
    for _ in range(3):
        b.nudge()
        loop(b)
    b.shutdown()
    assert judge(b)["verdict"] == "missing-task-complete"
    assert judge(b, nudge_cap=3)["verdict"] == "nudge-cap"
    assert judge(b, nudge_cap=4)["verdict"] == "missing-task-complete"


def test_a_session_error_that_ends_the_task_is_errored_and_points_at_the_error() -> None:
    b = autopilot()
    loop(b)
    b.nudge()
    b.turn(None)  # the provider failed: a turn with no message
    b.session_error("rate limited", "rate_limit", 429)
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "errored"
    assert (row["session_error"], row["session_error_type"]) == ("rate limited", "rate_limit")
    assert row["line"] == lines_of(b, "session.error")[-1]


def test_an_error_then_a_successful_task_complete_after_a_retry_is_completed() -> None:
    b = autopilot()
    b.turn(None)
    b.session_error("rate limited", "rate_limit", 429)
    b.user_message("Try again.")  # a retry typed in autopilot mode
    task_complete(b, "Done on the second try.")
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "completed"
    assert row["session_error"] == "rate limited"  # still reported


def test_an_error_the_loop_recovered_from_does_not_decide() -> None:
    b = autopilot()
    b.turn(None)
    b.session_error("transient", "query")
    loop(b)  # the same loop went on after the error
    for _ in range(2):
        b.nudge()
        loop(b)
    b.shutdown()
    assert judge(b, nudge_cap=2)["verdict"] == "nudge-cap"
    assert judge(b)["verdict"] == "missing-task-complete"


def test_an_error_ending_the_last_nudged_loop_wins_over_the_cap() -> None:
    b = autopilot()
    loop(b)
    for _ in range(2):
        b.nudge()
        loop(b)
    b.turn(None)
    b.session_error("context window exceeded", "query")
    b.shutdown()
    assert judge(b, nudge_cap=2)["verdict"] == "errored"


def test_the_last_word_wins_an_error_after_task_complete() -> None:
    b = autopilot()
    task_complete(b)
    b.session_error("hook failed", "hook")
    b.shutdown()
    assert judge(b)["verdict"] == "errored"


def test_ended_inside_a_turn_is_interrupted_or_running_when_recent() -> None:
    b = autopilot()
    loop(b)
    b.nudge()
    b.turn("Building.", [bash("npm run build", never_completes=True)], end=False)
    last = datetime.fromisoformat(b.now)
    assert judge(b)["verdict"] == "interrupted"
    assert judge(b, now=last + timedelta(minutes=9))["verdict"] == "running"
    assert judge(b, now=last + timedelta(minutes=11))["verdict"] == "interrupted"
    assert (
        judge(b, now=last + timedelta(minutes=20), running_within=timedelta(minutes=30))["verdict"]
        == "running"
    )
    assert judge(b, now=last, running_within=timedelta(0))["verdict"] == "running"
    berlin = timezone(timedelta(hours=2))
    assert judge(b, now=(last + timedelta(minutes=5)).astimezone(berlin))["verdict"] == "running"
    naive = (last + timedelta(minutes=5)).replace(tzinfo=None)
    assert judge(b, now=naive)["verdict"] == "running"


def test_a_closed_loop_with_no_shutdown_is_interrupted_unless_recent() -> None:
    b = autopilot()
    loop(b)
    last = datetime.fromisoformat(b.now)
    assert judge(b)["verdict"] == "interrupted"
    assert judge(b, now=last + timedelta(minutes=1))["verdict"] == "running"
    b.shutdown()
    # Shut down: it cannot be running any more, however recent.
    assert judge(b, now=last + timedelta(minutes=1))["verdict"] == "missing-task-complete"


def test_an_abort_is_interrupted_even_when_recent() -> None:
    b = autopilot()
    b.turn("Working.", [bash("make")])
    b.abort()
    b.shutdown()
    assert judge(b)["verdict"] == "interrupted"
    assert judge(b, now=datetime.fromisoformat(b.now))["verdict"] == "interrupted"


def test_a_completed_session_stays_completed_while_open_and_recent() -> None:
    b = autopilot()
    task_complete(b)
    assert judge(b, now=datetime.fromisoformat(b.now))["verdict"] == "completed"


def test_interactive_sessions_get_a_verdict_only_when_task_complete_is_required() -> None:
    b = SessionBuilder(seed=3)
    b.user_message("Explain the cache.")
    b.turn("It is a map with a TTL.")
    b.shutdown()
    assert judge(b)["verdict"] == "interactive"
    assert judge(b, require_task_complete=True)["verdict"] == "missing-task-complete"
    done = SessionBuilder(seed=4)
    done.user_message("Fix it, then call task_complete.")
    task_complete(done)
    done.shutdown()
    assert judge(done)["verdict"] == "interactive"
    assert judge(done, require_task_complete=True)["verdict"] == "completed"


# --- which task is judged, and the mode --------------------------------------------------------


def test_the_last_autopilot_task_is_judged_not_a_later_interactive_one() -> None:
    b = autopilot()
    task_complete(b, "Autopilot part done.")
    b.mode_changed("interactive")
    b.user_message("Thanks, now explain what you did.", agent_mode="interactive")
    b.turn("I changed the loader.")
    b.shutdown()
    row = judge(b)
    assert (row["mode"], row["verdict"]) == ("autopilot", "completed")


def test_a_later_autopilot_task_without_task_complete_decides() -> None:
    b = autopilot()
    task_complete(b, "First task done.")
    b.user_message("Now migrate the tests too.")  # still in autopilot mode
    loop(b)
    b.shutdown()
    row = judge(b)
    assert row["verdict"] == "missing-task-complete"
    assert row["task_complete_summary"] is None


def test_the_nudge_cap_is_counted_per_task() -> None:
    b = autopilot()
    loop(b)
    for _ in range(3):
        b.nudge()
        loop(b)
    b.user_message("Keep going with the second half.")
    loop(b)
    for _ in range(3):
        b.nudge()
        loop(b)
    b.shutdown()
    row = judge(b, nudge_cap=5)
    assert (row["autopilot_nudges"], row["task_nudges"]) == (6, 3)
    assert row["verdict"] == "missing-task-complete"
    assert judge(b, nudge_cap=3)["verdict"] == "nudge-cap"


def test_an_unfinished_autopilot_task_followed_by_a_prompt_is_not_interrupted() -> None:
    b = autopilot()
    loop(b)
    b.mode_changed("interactive")
    b.user_message("Stop; I'll take it from here.", agent_mode="interactive")
    b.turn("OK.")
    assert judge(b)["verdict"] == "missing-task-complete"


def test_switching_to_autopilot_without_working_in_it_is_interactive() -> None:
    b = SessionBuilder(seed=5)
    b.user_message("Explain the cache.")
    b.turn("It is a map with a TTL.")
    b.mode_changed("autopilot")
    b.mode_changed("interactive")
    b.mode_changed("autopilot")
    b.shutdown()
    assert judge(b)["mode"] == "interactive"
    assert summarize(read(b))["mode"].to_list() == ["interactive"]


def test_a_prompt_with_agent_mode_autopilot_is_enough() -> None:
    b = SessionBuilder(seed=6)
    b.user_message("Do it.", agent_mode="autopilot")
    loop(b)
    b.shutdown()
    row = judge(b)
    assert (row["mode"], row["verdict"]) == ("autopilot", "missing-task-complete")


def test_switching_to_autopilot_mid_task_makes_the_task_autopilot() -> None:
    b = SessionBuilder(seed=7)
    b.user_message("Migrate the loader.")
    b.turn("Reading.", [view("src/loader.ts", "x")])
    b.mode_changed("autopilot")
    loop(b)
    b.shutdown()
    assert judge(b)["verdict"] == "missing-task-complete"


def test_every_kind_of_nudge_is_recognised_and_none_is_a_prompt() -> None:
    b = autopilot()
    loop(b)
    b.nudge()  # isAutopilotContinuation
    loop(b)
    b.nudge(flagged=False)  # the nudge text in transformedContent
    loop(b)
    # Oldest shape: empty content in autopilot mode, no flag, no text.
    b._begin_interaction()
    b.event(
        "user.message",
        {"content": "", "transformedContent": "", "agentMode": "autopilot"},
        after_ms=700,
    )
    loop(b)
    b.shutdown()
    row = judge(b)
    assert (row["autopilot_nudges"], row["task_nudges"], row["user_prompts"]) == (3, 3, 1)
    assert judge(b, nudge_cap=3)["verdict"] == "nudge-cap"
    session = summarize(read(b)).row(0, named=True)
    assert (session["autopilot_nudges"], session["user_prompts"]) == (3, 1)


def test_a_subagent_failure_is_not_the_main_agents_last_failed_tool() -> None:
    b = autopilot()
    b.turn("Editing.", [edit("a.ts", "x", "y", success=False, error="no match")])
    b.subagent_run("Run the tests.", llm_calls=1, tool_calls=1)
    task_complete(b)
    b.shutdown()
    row = judge(b)
    assert (row["last_failed_tool"], row["last_failed_tool_error"]) == ("edit", "no match")


# --- frame shape ------------------------------------------------------------------------------


def test_one_row_per_session_newest_first_with_the_documented_columns() -> None:
    old = autopilot(seed=1)
    task_complete(old)
    old.shutdown()
    new = SessionBuilder(seed=2, start="2026-08-06T10:00:00.000Z")
    new.user_message("Explain.")
    new.turn("Done.")
    new.shutdown()
    table = audit(read(old, new), now=LATER)
    assert table.columns == list(AUDIT_COLUMNS)
    expected = pl.DataFrame(
        {
            "session_id": [new.session_id, old.session_id],
            "mode": ["interactive", "autopilot"],
            "verdict": ["interactive", "completed"],
            "autopilot_nudges": [0, 0],
            "task_complete_summary": [None, "Done."],
        }
    )
    assert_frame_equal(table.select(expected.columns), expected)


def test_an_empty_read_gives_an_empty_frame_with_the_columns() -> None:
    table = audit(ReadResult.empty(), now=LATER)
    assert table.is_empty() and table.columns == list(AUDIT_COLUMNS)


def test_the_nudge_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="nudge_cap"):
        audit(ReadResult.empty(), nudge_cap=0)


def test_helpers_filter_and_count_verdicts() -> None:
    table = pl.DataFrame(
        {
            "verdict": ["completed", "interactive", "errored", "errored"],
            "looping": [True, False, True, False],
        }
    )
    assert core.failing(table, {"errored"}).height == 2
    assert core.failing(table, {"looping"})["verdict"].to_list() == ["completed", "errored"]
    assert core.failing(table, {"errored", "looping"}).height == 3
    assert core.judged(table).height == 3
    assert core.verdict_counts(table) == {"completed": 1, "errored": 2, "interactive": 1}


# --- the command ------------------------------------------------------------------------------


def write(tmp_path: Path, *builders: SessionBuilder) -> Path:
    for b in builders:
        b.write_to(tmp_path)
    return tmp_path


def capped_and_completed(tmp_path: Path) -> Path:
    capped = autopilot(seed=1)
    loop(capped)
    for _ in range(5):
        capped.nudge()
        loop(capped)
    capped.shutdown()
    done = autopilot(seed=2)
    task_complete(done, "All good.")
    done.shutdown()
    chat = SessionBuilder(seed=3)
    chat.user_message("Explain.")
    chat.turn("Done.")
    chat.shutdown()
    return write(tmp_path, capped, done, chat)


def run(*args: str) -> Any:
    return CliRunner().invoke(main, ["audit", *args])


def test_cli_json_rows_and_default_exit_code(tmp_path: Path) -> None:
    root = capped_and_completed(tmp_path)
    result = run("--root", str(root), "--format", "json")
    assert result.exit_code == 1, result.output
    rows = orjson.loads(result.stdout)
    assert sorted(row["verdict"] for row in rows) == ["completed", "nudge-cap"]
    for row in rows:
        assert {"session_id", "mode", "verdict", "autopilot_nudges", "task_complete_summary"} <= (
            row.keys()
        )
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("fail_on", "code"),
    [
        ("none", 0),
        ("", 2),  # empty is a usage error, never "fail on nothing" (issue 25)
        ("errored,interrupted", 0),
        ("nudge-cap", 1),
        ("completed", 1),
        (" Completed , running ", 1),
    ],
)
def test_cli_exit_code_follows_fail_on(tmp_path: Path, fail_on: str, code: int) -> None:
    result = run("--root", str(capped_and_completed(tmp_path)), "--fail-on", fail_on)
    assert result.exit_code == code, result.output


def test_cli_all_lists_interactive_sessions_and_require_judges_them(tmp_path: Path) -> None:
    root = capped_and_completed(tmp_path)
    shown = orjson.loads(run("--root", str(root), "--format", "json", "--all").stdout)
    assert sorted(row["verdict"] for row in shown) == ["completed", "interactive", "nudge-cap"]
    required = run(
        "--root", str(root), "--format", "json", "--require-task-complete", "--fail-on", "none"
    )
    assert required.exit_code == 0
    verdicts = sorted(row["verdict"] for row in orjson.loads(required.stdout))
    assert verdicts == ["completed", "missing-task-complete", "nudge-cap"]


def test_cli_nudge_cap_option(tmp_path: Path) -> None:
    root = capped_and_completed(tmp_path)
    result = run("--root", str(root), "--format", "json", "--nudge-cap", "6")
    assert result.exit_code == 1  # missing-task-complete fails by default too
    verdicts = sorted(row["verdict"] for row in orjson.loads(result.stdout))
    assert verdicts == ["completed", "missing-task-complete"]


def test_cli_running_within(tmp_path: Path) -> None:
    start = datetime.now(UTC) - timedelta(minutes=1)
    b = SessionBuilder(seed=9, start=start)
    b.mode_changed("autopilot")
    b.user_message("Go.")
    b.turn("Building.", [bash("make", never_completes=True)], end=False)
    root = write(tmp_path, b)
    running = run("--root", str(root), "--format", "json")
    assert running.exit_code == 0, running.output
    assert orjson.loads(running.stdout)[0]["verdict"] == "running"
    stale = run("--root", str(root), "--format", "json", "--running-within", "0")
    assert stale.exit_code == 1
    assert orjson.loads(stale.stdout)[0]["verdict"] == "interrupted"
    assert run("--root", str(root), "--running-within", "1h30m").exit_code == 0
    github = run("--root", str(root), "--format", "github").stdout.splitlines()
    assert github[0].startswith("::warning ")
    assert "is still running (last event at " in github[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-on", "finished"], "unknown verdict finished"),
        (["--fail-on", "interactive"], "unknown verdict interactive"),
        (["--running-within", "ten minutes"], "not a duration"),
        (["--running-within", "5x"], "not a duration"),
        (["--nudge-cap", "0"], "--nudge-cap"),
        (["--format", "xml"], "--format"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = run("--root", str(tmp_path), *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_cli_no_session_found_fails_the_gate(tmp_path: Path) -> None:
    result = run("--root", str(tmp_path), "--format", "json")
    assert result.exit_code == 1
    assert orjson.loads(result.stdout) == []
    assert "No sessions found" in result.stderr
    github = run("--root", str(tmp_path), "--format", "github")
    assert github.stdout.splitlines()[0].startswith("::error::No Copilot CLI session")


def test_cli_only_interactive_sessions_pass(tmp_path: Path) -> None:
    chat = SessionBuilder(seed=3)
    chat.user_message("Explain.")
    chat.turn("Done.")
    chat.shutdown()
    result = run("--root", str(write(tmp_path, chat)))
    assert result.exit_code == 0
    assert "no autopilot session among the 1 session read" in result.stdout


def test_cli_unreadable_file_exits_3_when_nothing_fails(tmp_path: Path) -> None:
    done = autopilot(seed=2)
    task_complete(done)
    done.shutdown()
    path = done.write_to(tmp_path)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not json at all\n")
    result = run(str(path), str(garbage), "--format", "json")
    assert result.exit_code == 3, result.output
    assert [row["verdict"] for row in orjson.loads(result.stdout)] == ["completed"]


def test_cli_github_annotations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = capped_and_completed(tmp_path)
    rejected = autopilot(seed=4)
    blocker = {"kind": "permission_recovery", "reason": "permission_denied", "resumable": True}
    task_complete(rejected, "Blocked.", outcome="blocked", blocker=blocker)
    rejected.shutdown()
    rejected.write_to(root)
    monkeypatch.chdir(tmp_path)
    result = run("--root", str(root), "--format", "github")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    annotations = [line for line in lines if line.startswith("::")]
    assert len(annotations) == 3  # one per judged session; the interactive one is left out
    by_level = {line.split(" ", 1)[0]: line for line in annotations}
    assert set(by_level) == {"::error", "::notice", "::warning"}
    # The capped run repeats `make step0` after every nudge: it loops too.
    assert "title=copilot-logs audit%3A nudge-cap%2C looping::" in by_level["::error"]
    assert "hit the nudge cap: 5 nudges" in by_level["::error"]
    assert "title=copilot-logs audit%3A blocked::" in by_level["::warning"]
    assert "permission_recovery: permission_denied" in by_level["::warning"]
    assert "All good." in by_level["::notice"]
    properties = by_level["::error"].split("::")[1]
    file = properties.split("file=")[1].split(",")[0]
    line = int(properties.split("line=")[1].split(",")[0])
    assert not file.startswith("/")  # relative to the working folder, which holds the logs
    events = (tmp_path / file).read_bytes().splitlines()
    assert line == len(events)  # the last event
    assert lines[-1].startswith("FAIL: 1 failing (3 sessions audited:")


def test_cli_markdown_is_a_summary_line_and_a_table(tmp_path: Path) -> None:
    result = run("--root", str(capped_and_completed(tmp_path)), "--format", "markdown")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(":x: **copilot-logs audit**: FAIL: 1 failing")
    table = [line for line in lines if line.startswith("|")]
    assert table[0].startswith("| Session | Verdict | Looping | Nudges |")  # the capped one loops
    assert len(table) == 2 + 2  # header, rule, two judged sessions
    done = tmp_path / "done"
    done.mkdir()
    completed = autopilot(seed=2)
    task_complete(completed, "All good.")
    completed.shutdown()
    ok = run("--root", str(write(done, completed)), "--format", "markdown")
    assert ok.stdout.startswith(":white_check_mark: **copilot-logs audit**: OK (1 session")


@pytest.mark.parametrize("fail_on", ["none", "missing-task-complete", "completion-rejected"])
def test_cli_markdown_headline_is_never_ok_for_a_run_the_default_gate_fails(
    tmp_path: Path, fail_on: str
) -> None:
    """docs/ci.md writes the summary with --fail-on none, then gates: a capped, looping run
    must not read OK above a red job (issue 33)."""
    root = capped_and_completed(tmp_path)
    result = run("--root", str(root), "--format", "markdown", "--fail-on", fail_on)
    assert result.exit_code == 0  # this gate passes...
    headline = result.stdout.splitlines()[0]
    # ...but the default gate fails the capped run, and the headline says so
    gate = "none" if fail_on == "none" else fail_on
    assert headline.startswith(
        ":x: **copilot-logs audit**: NOT OK: 1 failing by the default gate, passed by "
        f"--fail-on {gate} (2 sessions audited: 1 completed, 1 nudge-cap; 1 looping,"
    ), headline
    table = run("--root", str(root), "--fail-on", fail_on)
    assert table.stdout.splitlines()[-1].startswith("NOT OK: 1 failing by the default gate")


def test_cli_markdown_headline_warns_of_a_loop_in_a_completed_run(tmp_path: Path) -> None:
    b = autopilot()
    for _ in range(3):  # the same call again and again: repeated-call
        b.turn("Looking again.", [bash("ls", "a")])
    task_complete(b, "Done at last.")
    b.shutdown()
    result = run("--root", str(write(tmp_path, b)), "--format", "markdown")
    assert result.exit_code == 0
    assert result.stdout.startswith(":warning: **copilot-logs audit**: OK (1 session audited: ")
    assert "1 completed; 1 looping" in result.stdout.splitlines()[0]


def test_cli_markdown_cells_stay_on_one_line(tmp_path: Path) -> None:
    b = autopilot()
    task_complete(b, "Line one\nline | two")
    b.shutdown()
    result = run("--root", str(write(tmp_path, b)), "--format", "markdown")
    row = [line for line in result.stdout.splitlines() if line.startswith("| ")][-1]
    assert row.endswith("| Line one line \\| two |")


def test_cli_csv_and_ndjson(tmp_path: Path) -> None:
    root = capped_and_completed(tmp_path)
    rows = list(csv.DictReader(io.StringIO(run("--root", str(root), "--format", "csv").stdout)))
    assert list(rows[0]) == list(AUDIT_COLUMNS)
    assert sorted(row["verdict"] for row in rows) == ["completed", "nudge-cap"]
    ndjson = run("--root", str(root), "--format", "ndjson").stdout.splitlines()
    assert sorted(orjson.loads(line)["verdict"] for line in ndjson) == ["completed", "nudge-cap"]


def test_cli_table(tmp_path: Path) -> None:
    result = run("--root", str(capped_and_completed(tmp_path)))
    assert result.exit_code == 1
    assert "nudge-cap" in result.stdout and "completed" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        # The capped run repeats `make step0` after each of its 5 nudges: 2 calls each, wasted.
        "FAIL: 1 failing (2 sessions audited: 1 completed, 1 nudge-cap; 1 looping, "
        "10 LLM calls wasted; 1 interactive not judged)."
    )


def test_cli_help_lists_examples_and_the_verdicts_of_the_core() -> None:
    result = CliRunner().invoke(main, ["audit", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output
    assert "copilot-logs audit --latest 1 --format github" in result.output
    assert audit_cli.VERDICT_NAMES == core.FAILING_VERDICTS
    assert ",".join(core.DEFAULT_FAIL_ON) == audit_cli.DEFAULT_FAIL_ON
    assert "audit" in CliRunner().invoke(main, ["--help"]).output


@pytest.mark.process
def test_cli_help_does_not_import_polars() -> None:
    code = (
        "import sys; from copilot_logs.cli import main; "
        "main.get_command(None, 'audit'); print('polars' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
