"""`report`'s "Where the credits went": the biggest prompts and agents first, each with the
calls behind it; checked against the real logs GitHub billed (../shared/real-samples, skipped
when absent) and the model server's truth of the recordings."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot_logs.api import read
from copilot_logs.cli import main
from copilot_logs.commands import report

from .recorded import ALL
from .test_usage_calls import agent_names

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def assembled(*paths: Path) -> report.Report:
    result = read(*paths)
    return report.assemble(
        [report.part(result, zone="UTC", drawn=frozenset())], zone="UTC", now=NOW
    )


def test_billed_prompts_biggest_first_with_their_calls(real_samples: Path) -> None:
    """The two real logs GitHub billed: 1.42639 credits (6 calls) and 1.351095 (5 calls, a
    sub-agent's among them), read by hand from their shutdowns."""
    page = assembled(real_samples)
    billed = [row for row in page.credits_by_prompt if row["ai_credits"]]
    assert [(row["ai_credits"], row["llm_calls"]) for row in billed] == [
        (1.42639, 6),
        (1.351095, 5),
    ]
    assert [len(row["calls"]) for row in billed] == [6, 5]
    assert [call["agent"] for call in billed[1]["calls"]].count("Task Agent") == 1


def test_the_page_shows_the_credits_section_in_that_order(
    real_samples: Path, tmp_path: Path
) -> None:
    out = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["report", str(real_samples), "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    section = html[html.index('<section id="credits">') : html.index('<section id="usage">')]
    assert "1.43" in section and "1.35" in section
    assert section.index("1.43") < section.index("1.35")
    # One list of calls per row: three sessions of one prompt each; three main agents and
    # one sub-agent.
    assert section.count("<details>") == 3 + 4


def test_the_calls_behind_each_agent_are_the_server_s_calls_of_that_agent() -> None:
    chosen = [r for r in ALL if r.id == "1.0.102/two-subagents" and r.outcome == "recorded"]
    if not chosen:
        pytest.skip("no two-subagents recording of 1.0.102")
    recording = chosen[0]
    names = agent_names(recording)
    page = assembled(recording.log)
    found = {
        names[row["agent_id"]]: sorted(call["api_call_id"] for call in row["calls"])
        for row in page.credits_by_agent
    }
    expected: dict[str, list[str]] = {}
    for request in recording.served:
        expected.setdefault(request["agent"], []).append(request["api_call_id"])
    assert found == {agent: sorted(ids) for agent, ids in expected.items()}
    # Biggest first: BYOK credits are unavailable, so by input tokens.
    inputs = [row["input_tokens"] for row in page.credits_by_agent]
    assert inputs == sorted(inputs, reverse=True)


def test_a_long_prompt_shows_its_twenty_biggest_calls_in_file_order(tmp_path: Path) -> None:
    from synth import SessionBuilder

    b = SessionBuilder(seed=50)
    b.user_message("Do many things.")
    sizes = [(index * 7) % 25 + 1 for index in range(25)]  # 25 distinct sizes, shuffled
    for size in sizes:
        b.turn(f"step of {size}", output_tokens=size)
    b.shutdown()
    b.write_to(tmp_path)
    (row,) = assembled(tmp_path).credits_by_prompt
    assert row["llm_calls"] == 25 and row["more_calls"] == 5
    shown = [call["output_tokens"] for call in row["calls"]]
    assert sorted(shown) == list(range(6, 26))  # the 20 biggest
    assert [call["line"] for call in row["calls"]] == sorted(c["line"] for c in row["calls"])
