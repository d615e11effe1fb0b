"""The tiers keep their promises (docs/development.md, "Tiers"): the markers are declared once
and CI runs every tier; a fast test cannot start Python unnoticed; a skip every clone meets is
one line of the summary, and no test writes past pytest's capture (no line among the dots)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest

from tests import conftest
from tests.conftest import PROJECT


def test_ci_runs_every_tier_and_the_tiers_are_declared_once() -> None:
    """The markers pyproject.toml declares are the live one and the slow tiers the Makefile
    leaves to `make test-slow` (and the fast tier's process check skips); CI runs `make test`
    and `make test-slow`."""
    ini = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    declared = {line.split(":")[0] for line in ini["pytest"]["ini_options"]["markers"]}
    makefile = (PROJECT / "Makefile").read_text(encoding="utf-8")
    [tiers] = re.findall(r"^SLOW_TIERS := (.+)$", makefile, re.M)
    assert declared - {"live"} == set(tiers.split()) == set(conftest.SLOW_TIERS)
    steps = (PROJECT / ".ci" / "run").read_text().splitlines()
    assert {"make test", "make test-slow", "make test-floors"} <= set(steps)


def test_a_fast_test_that_starts_python_fails_naming_the_marker() -> None:
    with pytest.raises(AssertionError, match="marked `process`"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(AssertionError, match="running Python"):
        subprocess.run(["sh", "-c", "copilot-logs --version"], check=False)
    assert subprocess.run(["sh", "-c", "exit 3"], check=False).returncode == 3  # a small tool


def _skipped(path: str, line: int, reason: str) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid=f"{path}::t",
        location=(path, line, "t"),
        keywords={},
        outcome="skipped",
        longrepr=(path, line, f"Skipped: {reason}"),
        when="call",
    )


def test_an_expected_skip_is_one_line_wherever_it_was_said() -> None:
    """The summary folds skips by where and why: an expected reason is said at one place."""
    said = [_skipped(f"tests/test_{n}.py", n, conftest.SPARK_EXTRA) for n in (3, 40)]
    other = [_skipped(f"tests/test_{n}.py", n, "something else") for n in (3, 40)]
    for report in said + other:
        conftest._fold(report)
    assert said[0].longrepr == said[1].longrepr
    assert other[0].longrepr != other[1].longrepr  # shown where it was said


def test_no_test_writes_past_the_capture() -> None:
    """A line printed among the dots alarms (issue 33): nothing bypasses pytest's capture."""
    bypass = re.compile(r"\bcap(sys|fd)\.disabled\(|sys\.__std(out|err)__")
    found = [
        f"{path.name}:{number}"
        for path in sorted((PROJECT / "tests").glob("*.py"))
        if path.name != "test_tiers.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if bypass.search(line)
    ]
    assert found == []
