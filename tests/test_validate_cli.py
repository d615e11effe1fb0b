"""`copilot-logs validate` and `copilot-logs rules` through the real click group."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

import synth
from copilot_logs.cli import main
from copilot_logs.commands.validate import RULES
from synth import SessionBuilder, bash
from tests.conftest import SAMPLES
from tests.sarif import check_sarif

OPEN_SAMPLE = SAMPLES / "18e7da49-bc24-4d35-b6e7-718293a4b5c6" / "events.jsonl"
DAMAGED_SAMPLE = SAMPLES / "4bbad07c-ef57-4068-a9ba-a4b5c6d7e8f9" / "events.jsonl"
FINDING_FIELDS = {"file", "line", "event_id", "code", "name", "severity", "message", "session_id"}


def run(*args: str | Path, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args], input=input)


def as_json(result: Result) -> Any:
    return orjson.loads(result.stdout)


def whole_session(seed: int = 1) -> SessionBuilder:
    b = SessionBuilder(seed=seed)
    b.user_message("Fix the failing test.")
    b.turn("Running it.", [bash("pytest -q", "1 failed")])
    b.turn("Fixed.")
    b.shutdown()
    return b


@pytest.fixture
def logs(tmp_path: Path) -> dict[str, Path]:
    """Three sessions in the CLI layout: clean, open (warnings only), broken (errors)."""
    root = tmp_path / "session-state"
    clean = whole_session(1).write_to(root)
    running = SessionBuilder(seed=2)
    running.user_message("Go.")
    running.turn("Working.", end=False)
    open_ = running.write_to(root)
    broken_builder = whole_session(3)
    lines = broken_builder.lines()
    turn_end = next(i for i, line in enumerate(lines) if b'"assistant.turn_end"' in line)
    del lines[turn_end]
    broken = root / broken_builder.session_id / "events.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(synth.join_lines(lines))
    return {"root": root, "clean": clean, "open": open_, "broken": broken}


# --- text and exit codes -----------------------------------------------------------------------


def test_clean_log_passes_with_exit_0(logs: dict[str, Path]) -> None:
    result = run("validate", logs["clean"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "All checks passed: 1 file, no findings.\n"


def test_errors_fail_with_exit_1_and_text_lines(logs: dict[str, Path]) -> None:
    result = run("validate", logs["broken"])
    assert result.exit_code == 1
    *findings, blank, summary = result.stdout.splitlines()
    assert blank == ""
    assert summary.startswith("Found ") and "the gate failed" in summary
    pattern = re.compile(
        r"^(?P<path>.+):(?P<line>\d+): (?P<code>[A-Z]\d{3}) (?P<name>[a-z-]+): .+$"
    )
    parsed = [pattern.match(line) for line in findings]
    assert all(parsed), findings
    assert {(m["code"], m["name"]) for m in parsed if m} >= {("E104", "broken-parent-chain")}
    assert all(m["path"] == str(logs["broken"]) for m in parsed if m)
    # Damage is reported as findings, not again as reader warnings on stderr.
    assert result.stderr == ""


def test_findings_sorted_by_file_and_line(logs: dict[str, Path]) -> None:
    report = as_json(run("validate", "--root", logs["root"], "--format", "json"))
    keys = [(f["file"], f["line"]) for f in report["findings"]]
    assert keys == sorted(keys)
    assert len({f["file"] for f in report["findings"]}) == 2


def test_warnings_pass_unless_strict(logs: dict[str, Path]) -> None:
    assert run("validate", logs["open"]).exit_code == 0
    assert run("validate", logs["open"], "--strict").exit_code == 1


def test_json_findings_fields_and_summary(logs: dict[str, Path]) -> None:
    result = run("validate", "--root", logs["root"], "--format", "json")
    assert result.exit_code == 1
    report = as_json(result)
    assert report["findings"]
    for finding in report["findings"]:
        assert set(finding) == FINDING_FIELDS
        assert finding["severity"] in {"error", "warning", "info"}
    t204 = next(f for f in report["findings"] if f["code"] == "T204")
    assert t204["file"] == str(logs["open"])
    assert t204["line"] == 5 and t204["severity"] == "warning" and t204["name"] == "unclosed-turn"
    assert report["summary"]["files"] == 3
    assert report["summary"]["failed"] is True
    assert report["summary"]["files_failing"] == 1


def test_select_and_ignore_by_code_prefix_and_name(logs: dict[str, Path]) -> None:
    def codes(*options: str) -> set[str]:
        out = as_json(run("validate", "--root", logs["root"], "--format", "json", *options))
        return {f["code"] for f in out["findings"]}

    everything = codes()
    assert {"E104", "T202", "T204", "R602"} <= everything
    assert codes("--select", "T") == {c for c in everything if c.startswith("T")}
    assert codes("--select", "unclosed-turn,E104") == {"T204", "E104"}
    assert codes("--select", "T", "--select", "R6") == {"T202", "T204", "R602"}
    assert codes("--ignore", "E,R602") == {c for c in everything if c[0] != "E"} - {"R602"}


def test_exit_1_only_for_selected_rules(logs: dict[str, Path]) -> None:
    assert run("validate", logs["broken"], "--select", "T204").exit_code == 0
    assert run("validate", logs["broken"], "--ignore", "E,T,R").exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ["--select", "Z123"],
        ["--ignore", "no-such-rule"],
        ["--format", "yaml"],
        ["--statistics", "--format", "sarif"],
    ],
)
def test_usage_errors_exit_2(logs: dict[str, Path], args: list[str]) -> None:
    result = run("validate", logs["clean"], *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Error" in result.stderr


def test_unknown_rule_message_says_what_to_do(logs: dict[str, Path]) -> None:
    result = run("validate", logs["clean"], "--select", "Z123")
    assert result.stderr.startswith("Error: 'Z123' names no rule")
    assert "copilot-logs rules" in result.stderr


def test_missing_path_exits_2(tmp_path: Path) -> None:
    result = run("validate", tmp_path / "nope" / "events.jsonl")
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_no_sessions_exits_0_and_still_writes_a_document(tmp_path: Path) -> None:
    result = run("validate", "--root", tmp_path, "--format", "junit")
    assert result.exit_code == 0
    assert "No sessions found" in result.stderr
    suite = ET.fromstring(result.stdout).find("testsuite")
    assert suite is not None and suite.get("tests") == "0"


def test_stdin(logs: dict[str, Path]) -> None:
    result = run("validate", "-", "--format", "json", input=logs["broken"].read_bytes())
    assert result.exit_code == 1
    assert {f["file"] for f in as_json(result)["findings"]} == {"<stdin>"}


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = run("validate", empty, "--format", "json")
    assert result.exit_code == 3  # UNREADABLE: the file gave nothing to check
    [finding] = as_json(result)["findings"]
    assert (finding["code"], finding["line"]) == ("E118", None)


# --- statistics --------------------------------------------------------------------------------


def test_statistics_counts_per_rule(logs: dict[str, Path]) -> None:
    listed = as_json(run("validate", "--root", logs["root"], "--format", "json"))["findings"]
    result = run("validate", "--root", logs["root"], "--format", "json", "--statistics")
    assert result.exit_code == 1
    stats = as_json(result)["statistics"]
    counts: dict[str, int] = {}
    for finding in listed:
        counts[finding["code"]] = counts.get(finding["code"], 0) + 1
    assert {row["code"]: row["count"] for row in stats} == counts
    assert [row["count"] for row in stats] == sorted((row["count"] for row in stats), reverse=True)


def test_statistics_text(logs: dict[str, Path]) -> None:
    result = run("validate", logs["open"], "--statistics")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["1", "T204", "unclosed-turn", "[warning]"]
    assert lines[-1] == "Found 0 errors, 1 warning and 0 info in 1 file; the gate passed."


# --- CI formats --------------------------------------------------------------------------------


def test_github_annotations(logs: dict[str, Path]) -> None:
    result = run("validate", "--root", logs["root"], "--format", "github")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    pattern = re.compile(
        r"^::(?P<level>error|warning|notice) file=(?P<file>[^,]+),line=(?P<line>\d+),"
        r"title=(?P<code>[A-Z]\d{3}) (?P<name>[a-z-]+)::(?P<message>.+)$"
    )
    matches = [pattern.match(line) for line in lines]
    assert all(matches), lines
    t204 = next(m for m in matches if m and m["code"] == "T204")
    assert t204["level"] == "warning" and t204["line"] == "5"
    assert any(m and m["level"] == "error" for m in matches)
    # The summary goes to stderr so the log holds only workflow commands.
    assert "the gate failed" in result.stderr


def test_junit_one_testcase_per_session(logs: dict[str, Path]) -> None:
    result = run("validate", "--root", logs["root"], "--format", "junit")
    assert result.exit_code == 1
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    assert root.get("tests") == "3" and root.get("failures") == "1"
    by_name = {case.get("name"): case for case in cases}
    assert set(by_name) == {
        path.parent.name for path in (logs["clean"], logs["open"], logs["broken"])
    }
    broken = by_name[logs["broken"].parent.name]
    [failure] = broken.findall("failure")
    assert "E104" in (failure.get("message") or "")
    assert failure.text and "broken-parent-chain" in failure.text
    clean = by_name[logs["clean"].parent.name]
    assert list(clean) == []
    open_ = by_name[logs["open"].parent.name]
    assert open_.find("failure") is None
    out = open_.find("system-out")
    assert out is not None and "T204 unclosed-turn" in (out.text or "")


def test_junit_strict_fails_on_warnings(logs: dict[str, Path]) -> None:
    result = run("validate", logs["open"], "--format", "junit", "--strict")
    assert result.exit_code == 1
    case = ET.fromstring(result.stdout).find("testsuite/testcase")
    assert case is not None and case.find("failure") is not None


def test_sarif_structure(logs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(logs["root"].parent)
    result = run("validate", "--root", "session-state", "--format", "sarif")
    assert result.exit_code == 1
    document = as_json(result)
    results = check_sarif(document)
    driver = document["runs"][0]["tool"]["driver"]
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in RULES]
    assert results
    for item in results:
        [location] = item["locations"]
        physical = location["physicalLocation"]
        # Relative to the current folder, as code scanning resolves it against the checkout.
        assert physical["artifactLocation"]["uri"].startswith("session-state/")
        assert physical["region"]["startLine"] >= 1
    levels = {item["ruleId"]: item["level"] for item in results}
    assert levels["T204"] == "warning" and levels["E104"] == "error"


def test_sarif_and_json_agree(logs: dict[str, Path]) -> None:
    findings = as_json(run("validate", "--root", logs["root"], "--format", "json"))["findings"]
    results = as_json(run("validate", "--root", logs["root"], "--format", "sarif"))["runs"][0][
        "results"
    ]
    assert [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results
    ] == [(f["code"], f["line"]) for f in findings]


def test_sarif_file_level_finding_has_no_region(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    [item] = as_json(run("validate", empty, "--format", "sarif"))["runs"][0]["results"]
    assert "region" not in item["locations"][0]["physicalLocation"]
    assert item["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("file://")


# --- pyproject settings ------------------------------------------------------------------------


def pin(folder: Path, table: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(f'[project]\nname = "x"\n\n[tool.copilot-logs]\n{table}\n')
    return path


def test_pyproject_found_upward_pins_strict(
    logs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin(tmp_path, "strict = true")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    assert run("validate", logs["open"]).exit_code == 1
    assert run("validate", logs["open"], "--no-strict").exit_code == 0


def test_pyproject_select_and_ignore(
    logs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin(tmp_path, 'select = ["T", "E104"]\nignore = ["turn-start-while-open"]')
    monkeypatch.chdir(tmp_path)
    out = as_json(run("validate", "--root", logs["root"], "--format", "json"))
    assert {f["code"] for f in out["findings"]} == {"E104", "T204"}
    # --select replaces the pinned select; --ignore adds to the pinned ignore.
    out = as_json(run("validate", "--root", logs["root"], "--format", "json", "--select", "R"))
    assert {f["code"] for f in out["findings"]} == {"R602"}
    out = as_json(run("validate", "--root", logs["root"], "--format", "json", "--ignore", "T204"))
    assert {f["code"] for f in out["findings"]} == {"E104"}


def test_nearer_pyproject_without_the_table_is_passed_over(
    logs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin(tmp_path, "strict = true")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    monkeypatch.chdir(inner)
    assert run("validate", logs["open"]).exit_code == 1


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        ('select = ["Q1"]', "names no rule"),
        ("strict = 1", "strict must be true or false"),
        ("ignore = 5", "must be a list"),
        ("select = [", "not valid TOML"),
        ("select = []", "select is empty"),  # it would check no rule, and pass
        ('select = ", "', "select is empty"),
        ("select = " + "[" * 5000 + "]" * 5000, "nested too deep"),  # RecursionError in tomllib
    ],
)
def test_bad_pyproject_is_a_usage_error(
    logs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    complaint: str,
) -> None:
    path = pin(tmp_path, table)
    monkeypatch.chdir(tmp_path)
    result = run("validate", logs["clean"])
    assert result.exit_code == 2
    assert str(path) in result.stderr and complaint in result.stderr


# --- real and bundled logs ---------------------------------------------------------------------


def test_real_samples_pass_with_no_findings(real_samples: Path) -> None:
    result = run("validate", real_samples, "--strict", "--format", "json")
    assert result.exit_code == 0, result.output
    report = as_json(result)
    assert report["findings"] == []
    assert report["summary"]["files"] == 3


def test_bundled_samples_gate(tmp_path: Path) -> None:
    everything = run("validate", SAMPLES, "--format", "json")
    assert everything.exit_code == 1  # the sample that holds every kind of damage
    failing = {f["file"] for f in as_json(everything)["findings"] if f["severity"] == "error"}
    assert failing == {str(DAMAGED_SAMPLE)}
    assert run("validate", OPEN_SAMPLE).exit_code == 0
    assert run("validate", OPEN_SAMPLE, "--strict").exit_code == 1


# --- rules -------------------------------------------------------------------------------------


def test_rules_lists_every_rule() -> None:
    result = run("rules", "--format", "json")
    assert result.exit_code == 0
    listed = as_json(result)
    assert [row["code"] for row in listed] == [rule.code for rule in RULES]
    assert set(listed[0]) == {"code", "name", "severity", "family", "summary", "explanation"}


def test_rules_table_shows_codes_and_names() -> None:
    result = CliRunner().invoke(main, ["rules"], terminal_width=200)
    assert result.exit_code == 0
    for rule in RULES:
        assert rule.code in result.stdout and rule.name in result.stdout


@pytest.mark.parametrize("key", ["T201", "t201", "orphan-turn-end"])
def test_rules_explains_one(key: str) -> None:
    result = run("rules", key)
    assert result.exit_code == 0
    assert result.stdout.startswith("T201 orphan-turn-end (error, turns)")
    assert "Turn counts built on pairs are off" in result.stdout
    detail = as_json(run("rules", key, "--format", "json"))
    assert detail["code"] == "T201" and detail["explanation"].startswith("Every main-agent")


def test_rules_unknown_code_exits_2() -> None:
    result = run("rules", "Q999")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: no rule 'Q999'")


@pytest.mark.parametrize("command", ["validate", "rules"])
def test_help_has_examples(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout
    assert f"copilot-logs {command}" in result.stdout.split("Examples:")[1]
