"""`copilot-logs diff`: the gate over two sets of runs, through the real click group.

Truth from outside the code under test: the recordings' own scenarios (autopilot-complete
finishes, autopilot-loop loops to the cap: tests/recordings/*/truth.json), sessions written
here with a known number of calls and credits, p-values counted by brute force over every
split of the runs (itertools) and the textbook values of Fisher's test.
"""

from __future__ import annotations

import itertools
import math
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from copilot_logs.commands.diff import metrics
from copilot_logs.commands.diff.metrics import METRICS, ThresholdError, parse_threshold
from synth import SessionBuilder, bash
from tests.sarif import check_sarif

RECORDINGS = Path(__file__).parent / "recordings"
VERSIONS = sorted(path.name for path in RECORDINGS.iterdir() if path.is_dir())


def run(*args: str | Path, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, ["diff", *map(str, args)], input=input)


def as_json(result: Result) -> Any:
    return orjson.loads(result.stdout)


def rows_by_metric(document: Any, case: str | None = None) -> dict[str, Any]:
    return {row["metric"]: row for row in document["rows"] if case is None or row["case"] == case}


def recordings(tmp_path: Path, scenario: str, versions: Sequence[str] = VERSIONS) -> Path:
    """A folder of sessions: the recording of ``scenario`` by every version (one session
    folder each, as the CLI lays them out)."""
    root = tmp_path / scenario
    for version in versions:
        folder = root / version
        folder.mkdir(parents=True)
        shutil.copy(RECORDINGS / version / scenario / "events.jsonl", folder / "events.jsonl")
    return root


def autopilot_run(
    root: Path,
    seed: int,
    *,
    prompt: str = "Fix the failing test.",
    credits: float = 1.0,
    calls: int = 3,
    failing_tools: int = 0,
    complete: bool = True,
) -> Path:
    """One autopilot session: ``calls`` main-agent calls (the last calls task_complete when
    ``complete``), ``failing_tools`` of its tools failing, ``credits`` AI credits billed."""
    b = SessionBuilder(seed=seed, start=f"2026-08-05T07:{seed % 60:02d}:00.000Z")
    b.user_message(prompt, agent_mode="autopilot")
    for call in range(calls - 1):
        error = "permission denied" if call < failing_tools else None
        b.turn("Working.", [bash(f"make test-{call}", "output", error=error)])
    if complete:
        b.task_complete_turn("Done.")
    else:
        b.turn("Stopping here.")
    b.shutdown(nano_aiu=round(credits * 1_000_000_000))
    return b.write_to(root)


# --- the statistics ----------------------------------------------------------------------------


def brute_force_p(base: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided Mann-Whitney p by listing every split of the pooled values (the definition)."""
    pooled = [*base, *candidate]

    def u(mine: Sequence[float], theirs: Sequence[float]) -> float:
        return sum((a > b) + 0.5 * (a == b) for a in mine for b in theirs)

    centre = len(base) * len(candidate) / 2
    seen = abs(u(base, candidate) - centre)
    splits = list(itertools.combinations(range(len(pooled)), len(base)))
    extreme = 0
    for chosen in splits:
        mine = [pooled[i] for i in chosen]
        theirs = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        extreme += abs(u(mine, theirs) - centre) >= seen - 1e-9
    return extreme / len(splits)


def test_three_runs_a_side_all_apart_give_p_0_10() -> None:
    assert metrics.mann_whitney([1, 2, 3], [4, 5, 6]) == (pytest.approx(0.10), "exact")
    assert metrics.mann_whitney([4, 5, 6], [1, 2, 3]) == (pytest.approx(0.10), "exact")


@pytest.mark.parametrize("seed", range(12))
def test_the_exact_p_is_the_share_of_splits_at_least_as_extreme(seed: int) -> None:
    rng = random.Random(seed)
    base = [float(rng.randint(0, 6)) for _ in range(rng.randint(1, 6))]
    candidate = [float(rng.randint(0, 6)) for _ in range(rng.randint(1, 6))]
    found = metrics.mann_whitney(base, candidate)
    assert found is not None
    assert found[0] == pytest.approx(brute_force_p(base, candidate), abs=1e-12)


def test_fisher_matches_the_textbook_values() -> None:
    # The lady tasting tea (Fisher 1935): 3 of 4 right, p = 34/70.
    assert metrics.fisher_exact(3, 1, 1, 3) == pytest.approx(34 / 70)
    # Wikipedia's example (studying by sex): 1/9 against 11/3, p = 0.002759.
    assert metrics.fisher_exact(1, 9, 11, 3) == pytest.approx(0.0027594561852200836)
    assert metrics.fisher_exact(3, 0, 3, 0) == 1.0


def test_median_and_nearest_rank_p90() -> None:
    assert metrics.median([3, 1, 2]) == 2 and metrics.median([1, 2, 3, 4]) == 2.5
    assert metrics.percentile(list(range(1, 11)), 0.9) == 9
    assert metrics.median([]) is None and metrics.percentile([], 0.9) is None


def test_thresholds_are_read_or_refused() -> None:
    threshold = parse_threshold("ai_credits.median > +25% and +1.0")
    assert (threshold.relative, threshold.absolute) == (0.25, 1.0)
    assert threshold.fires(1.5, 0.30) and not threshold.fires(0.9, 0.30)
    assert not threshold.fires(1.5, 0.20)
    for bad in (
        "ai_credits > 1",
        "nope.median > +1",
        "completed.median < -1",
        "llm_calls.p90 < +1",
    ):
        with pytest.raises(ThresholdError):
            parse_threshold(bad)


# --- the done-when checks -------------------------------------------------------------------


@pytest.fixture
def three_runs(tmp_path: Path) -> Path:
    root = tmp_path / "x"
    for seed in range(3):
        autopilot_run(root, seed, credits=1.0 + seed, calls=3 + seed)
    return root


def test_a_side_against_itself_is_unchanged_on_every_row(three_runs: Path) -> None:
    result = run(three_runs, three_runs, "--format", "json")
    assert result.exit_code == 0, result.output
    document = as_json(result)
    assert document["rows"] and len(document["rows"]) == len(METRICS)
    assert {row["status"] for row in document["rows"]} == {"unchanged"}
    assert {row["change"] for row in document["rows"]} == {0}
    assert rows_by_metric(document)["ai_credits"]["base"]["median"] == 2.0  # 1, 2, 3 credits
    assert rows_by_metric(document)["llm_calls"]["base"]["median"] == 4  # 3, 4, 5 calls


@pytest.fixture
def complete_and_loop(tmp_path: Path) -> tuple[Path, Path]:
    return recordings(tmp_path, "autopilot-complete"), recordings(tmp_path, "autopilot-loop")


def test_a_loop_against_completions_fails_on_completion_and_looping(
    complete_and_loop: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, candidate = complete_and_loop
    result = run(base, candidate, "--key", "none", "--format", "json")
    assert result.exit_code == 1, result.output
    rows = rows_by_metric(as_json(result))
    # truth.json: every version's autopilot-complete completes, every autopilot-loop loops.
    assert rows["completed"]["status"] == "fail" and rows["looping"]["status"] == "fail"
    assert rows["completed"]["base"]["yes"] == len(VERSIONS) == rows["looping"]["candidate"]["yes"]
    assert rows["completed"]["candidate"]["yes"] == 0 == rows["looping"]["base"]["yes"]
    monkeypatch.chdir(base.parent)
    sarif = run(base.name, candidate.name, "--key", "none", "--format", "sarif")
    assert sarif.exit_code == 1
    results = check_sarif(as_json(sarif))
    failing = {item["ruleId"] for item in results if item["level"] == "error"}
    assert {"D401", "D402"} <= failing
    uris = [item["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for item in results]
    assert all(uri.startswith("autopilot-loop/") for uri in uris)


def test_the_deltas_of_b_against_a_are_minus_those_of_a_against_b(
    complete_and_loop: tuple[Path, Path],
) -> None:
    a, b = complete_and_loop
    forth = as_json(run(a, b, "--key", "none", "--format", "json"))
    back = as_json(run(b, a, "--key", "none", "--format", "json"))
    assert [row["metric"] for row in forth["rows"]] != []
    backs = {row["metric"]: row for row in back["rows"]}
    moved = 0
    for row in forth["rows"]:
        other = backs[row["metric"]]
        if row["change"] is None:
            assert other["change"] is None
            continue
        assert row["change"] == -other["change"]
        assert row["p_value"] == pytest.approx(other["p_value"])
        moved += row["change"] != 0
    assert moved >= 5


def test_a_saved_baseline_diffs_as_the_side_it_was_saved_from(
    complete_and_loop: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = complete_and_loop
    saved = tmp_path / "b.json"
    wrote = run("--save-baseline", saved, a)
    assert wrote.exit_code == 0, wrote.output
    stored = orjson.loads(saved.read_bytes())
    assert stored["schema"] == "copilot-logs/baseline" and len(stored["runs"]) == len(VERSIONS)
    direct = as_json(run(a, b, "--format", "json"))
    through = as_json(run(saved, b, "--format", "json"))
    assert through["rows"] == direct["rows"]
    assert through["cases"] == direct["cases"]
    assert through["base"] == direct["base"]
    assert through["summary"] == direct["summary"]


def test_two_runs_a_side_at_six_times_the_credits_are_insufficient(tmp_path: Path) -> None:
    for seed in range(2):
        autopilot_run(tmp_path / "base", seed, credits=1.0)
        autopilot_run(tmp_path / "candidate", 10 + seed, credits=6.0)
    result = run(tmp_path / "base", tmp_path / "candidate", "--format", "json")
    assert result.exit_code == 0, result.output
    credits = rows_by_metric(as_json(result))["ai_credits"]
    assert credits["change"] == 5.0 and credits["relative"] == 5.0
    assert credits["status"] == "insufficient" and not credits["failing"]
    assert credits["fired"] == ["ai_credits.median > +25% and +1.0"]
    third = run(tmp_path / "base", tmp_path / "candidate", "--min-runs", "2", "--format", "json")
    assert third.exit_code == 1
    assert rows_by_metric(as_json(third))["ai_credits"]["status"] == "fail"


@pytest.mark.parametrize("version", ["1.0.20", "1.0.102"])
def test_byok_recordings_show_credits_unknown_never_zero(tmp_path: Path, version: str) -> None:
    """The rig records against its own provider (BYOK): 1.0.102 says aiCreditsStatus
    unavailable, 1.0.20 writes no nano-AIU at all."""
    side = recordings(tmp_path, "autopilot-complete", [version])
    document = as_json(run(side, side, "--format", "json"))
    assert [run_["ai_credits"] for run_ in document["base"]["runs"]] == [None]
    credits = rows_by_metric(document)["ai_credits"]
    assert credits["base"]["known"] == 0 and credits["base"]["median"] is None
    assert credits["status"] == "unknown"
    table = run(side, side)
    assert "unknown" in table.stdout and "0.00" not in table.stdout


# --- pairing, sides and the gate's settings -----------------------------------------------


def test_cases_on_one_side_fail_only_with_fail_on_missing(tmp_path: Path) -> None:
    autopilot_run(tmp_path / "base", 1, prompt="Fix   the failing\ntest.")
    autopilot_run(tmp_path / "base", 2, prompt="Write the docs.")
    autopilot_run(tmp_path / "candidate", 3, prompt="Fix the failing test.")
    autopilot_run(tmp_path / "candidate", 4, prompt="Port it to Rust.")
    result = run(tmp_path / "base", tmp_path / "candidate", "--format", "json")
    assert result.exit_code == 0, result.output
    document = as_json(result)
    labels = {case["label"].split(" [")[0]: case for case in document["cases"]}
    # Whitespace does not split a case: the two "Fix the failing test." runs pair.
    assert labels["Fix the failing test."]["base_runs"] == 1
    assert labels["Fix the failing test."]["candidate_runs"] == 1
    statuses = sorted(row["status"] for row in document["rows"] if row["metric"] in ("new", "gone"))
    assert statuses == ["gone", "new"]
    strict = run(tmp_path / "base", tmp_path / "candidate", "--fail-on-missing", "--format", "json")
    assert strict.exit_code == 1
    assert sorted(row["metric"] for row in as_json(strict)["rows"][:2]) == ["gone", "new"]


def test_a_side_with_no_session_fails_unless_allowed(tmp_path: Path, three_runs: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(three_runs, empty).exit_code == 1
    allowed = run(three_runs, empty, "--allow-empty", "--format", "json")
    assert allowed.exit_code == 0
    assert as_json(allowed)["summary"]["candidate_runs"] == 0


def test_alpha_makes_significance_part_of_the_gate(tmp_path: Path) -> None:
    for seed in range(3):
        autopilot_run(tmp_path / "base", seed, credits=1.0 + seed / 10)
        autopilot_run(tmp_path / "candidate", 10 + seed, credits=5.0 + seed / 10)
    sides = (tmp_path / "base", tmp_path / "candidate")
    assert run(*sides).exit_code == 1
    # At 3 runs a side the smallest p is 0.10: below it nothing can fail.
    assert run(*sides, "--alpha", "0.05").exit_code == 0
    assert run(*sides, "--alpha", "0.2").exit_code == 1


def test_fail_if_replaces_the_defaults_and_is_checked(tmp_path: Path, three_runs: Path) -> None:
    for seed in range(3):
        autopilot_run(tmp_path / "more", 20 + seed, calls=4 + seed, credits=1.0 + seed)
    sides = (three_runs, tmp_path / "more")
    assert run(*sides).exit_code == 0  # one call more is under the default +2
    tight = run(*sides, "--fail-if", "llm_calls.median > +10% and +0.5", "--format", "json")
    assert tight.exit_code == 1
    assert [row["metric"] for row in as_json(tight)["rows"] if row["failing"]] == ["llm_calls"]
    bad = run(*sides, "--fail-if", "llm_calls.median > 10 calls")
    assert bad.exit_code == 2 and "not a threshold" in bad.stderr


def test_the_gate_pinned_in_pyproject(
    tmp_path: Path, three_runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed in range(3):
        autopilot_run(tmp_path / "more", 20 + seed, calls=4 + seed, credits=1.0 + seed)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.copilot-logs.diff]\nfail-if = ["llm_calls.median > +10% and +0.5"]\nkey = "none"\n'
    )
    monkeypatch.chdir(tmp_path)
    result = run(three_runs, tmp_path / "more", "--format", "json")
    assert result.exit_code == 1
    document = as_json(result)
    assert document["gate"]["key"] == "none"
    assert document["gate"]["thresholds"] == ["llm_calls.median > +10% and +0.5"]
    (tmp_path / "pyproject.toml").write_text('[tool.copilot-logs.diff]\nfail-if = ["x > 1"]\n')
    refused = run(three_runs, tmp_path / "more")
    assert refused.exit_code == 2 and "fail-if" in refused.stderr


def test_a_baseline_of_other_metric_definitions_is_a_usage_error(
    tmp_path: Path, three_runs: Path
) -> None:
    saved = tmp_path / "old.json"
    assert run("--save-baseline", saved, three_runs).exit_code == 0
    document = orjson.loads(saved.read_bytes())
    document["metrics_version"] = 999
    saved.write_bytes(orjson.dumps(document))
    result = run(saved, three_runs)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and "version 999" in result.stderr
    (tmp_path / "other.json").write_bytes(b'{"schema": "something else"}')
    assert run(tmp_path / "other.json", three_runs).exit_code == 2


def test_two_periods_of_one_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for seed in range(3):
        autopilot_run(root, seed, calls=3)  # 07:00-07:02
        autopilot_run(root, 30 + seed, calls=9)  # 07:30-07:32
    result = run(
        "--root", root, "--base-until", "2026-08-05T07:15Z",
        "--candidate-since", "2026-08-05T07:15Z", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    calls = rows_by_metric(as_json(result))["llm_calls"]
    assert (calls["base"]["median"], calls["candidate"]["median"]) == (3, 9)
    assert run("--root", root, "--base-until", "2026-08-05", root).exit_code == 2


def test_sessions_pair_by_name_from_the_workspace_file(tmp_path: Path) -> None:
    for side, seed in (("base", 1), ("candidate", 2)):
        log = autopilot_run(tmp_path / side, seed, prompt=f"prompt {side}")
        (log.parent / "workspace.yaml").write_text('id: x\nname: "nightly fix"\ncwd: /w\n')
    by_prompt = as_json(run(tmp_path / "base", tmp_path / "candidate", "--format", "json"))
    assert len(by_prompt["cases"]) == 2
    by_name = as_json(
        run(tmp_path / "base", tmp_path / "candidate", "--key", "name", "--format", "json")
    )
    assert [case["label"] for case in by_name["cases"]] == ["nightly fix"]


def test_each_task_a_run(tmp_path: Path) -> None:
    for side, calls in (("base", 2), ("candidate", 6)):
        b = SessionBuilder(seed=calls)
        for task in range(3):
            b.user_message(f"task {task}", agent_mode="autopilot")
            for _ in range(calls - 1):
                b.turn("Working.", [bash(f"make step-{_}", "ok")])
            b.task_complete_turn("Done.")
        b.shutdown()
        b.write_to(tmp_path / side)
    result = run(
        tmp_path / "base", tmp_path / "candidate", "--unit", "task", "--key", "none",
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    document = as_json(result)
    assert document["summary"]["base_runs"] == 3 == document["summary"]["candidate_runs"]
    calls = rows_by_metric(document)["llm_calls"]
    assert (calls["base"]["median"], calls["candidate"]["median"]) == (2, 6)
    assert rows_by_metric(document)["completed"]["base"]["yes"] == 3
    assert rows_by_metric(document)["looping"]["status"] == "unknown"  # not known per task


@pytest.mark.parametrize("fmt", ["table", "markdown", "github", "junit"])
def test_every_format_says_which_rows_fail(complete_and_loop: tuple[Path, Path], fmt: str) -> None:
    base, candidate = complete_and_loop
    result = run(base, candidate, "--key", "none", "--format", fmt)
    assert result.exit_code == 1
    assert "completed" in result.stdout and "looping" in result.stdout
    if fmt == "github":
        assert result.stdout.startswith("::error ")
    if fmt in ("table", "markdown"):
        assert "FAIL: 3 failing rows" in result.stdout
        assert result.stdout.index("looping") < result.stdout.index("input_tokens")


def test_wrong_number_of_sides_is_a_usage_error(three_runs: Path) -> None:
    assert run(three_runs).exit_code == 2
    assert run(three_runs, three_runs, three_runs).exit_code == 2
    assert run("--save-baseline", "x.json", three_runs, three_runs).exit_code == 2


def test_relative_change_from_zero_is_infinite_and_json_says_null(tmp_path: Path) -> None:
    for seed in range(3):
        autopilot_run(tmp_path / "base", seed, failing_tools=0)
        autopilot_run(tmp_path / "candidate", 10 + seed, failing_tools=2)
    rows = rows_by_metric(
        as_json(run(tmp_path / "base", tmp_path / "candidate", "--format", "json"))
    )
    failed = rows["failed_tool_calls"]
    assert failed["change"] == 2 and failed["relative"] is None and failed["status"] == "fail"
    # Two bash calls failed, of three tool calls (the two and task_complete).
    assert math.isclose(rows["tool_failure_rate"]["candidate"]["median"], 2 / 3)
