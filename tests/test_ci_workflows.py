"""The workflows docs/ci.md gives, parsed as GitHub Actions and GitLab CI read them: no report
is skipped because a gate failed before it (issue 33: the SARIF upload and the JUnit step of
the validate recipe were skipped in every failing run).

A step that can fail the job (the agent, or a copilot-logs command, without
``continue-on-error``) skips every later step that has no ``if: always()``; GitLab keeps a
job's artifacts only ``when: always`` if the job fails."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from .conftest import PROJECT

CI_PAGE = PROJECT / "docs" / "ci.md"


def yaml_blocks(text: str) -> list[Any]:
    """Each ```yaml block of the page, parsed."""
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def github_step_lists(text: str) -> list[list[dict[str, Any]]]:
    """The steps of every GitHub Actions workflow (each job's) or list of steps on the page."""
    found = []
    for block in yaml_blocks(text):
        if isinstance(block, dict) and "jobs" in block:
            found += [job["steps"] for job in block["jobs"].values() if "steps" in job]
        elif isinstance(block, list) and all("run" in s or "uses" in s for s in block):
            found.append(block)
    return found


def can_fail(step: dict[str, Any]) -> bool:
    """Whether the step can fail the job: it runs the agent or copilot-logs, and is not
    ``continue-on-error``."""
    command = str(step.get("run", ""))
    runs = re.search(r"(^|\s)(copilot|copilot-logs)\s", command) is not None
    return runs and step.get("continue-on-error") is not True


def runs_anyway(step: dict[str, Any]) -> bool:
    return "always()" in str(step.get("if", ""))


def skipped_after_a_gate(steps: list[dict[str, Any]]) -> list[str]:
    """The steps a failing gate before them would skip."""
    skipped, gated = [], False
    for step in steps:
        if gated and not runs_anyway(step):
            skipped.append(str(step.get("name") or step.get("run") or step.get("uses")))
        gated = gated or can_fail(step)
    return skipped


def test_every_github_step_after_a_gate_still_runs() -> None:
    step_lists = github_step_lists(CI_PAGE.read_text())
    assert len(step_lists) >= 2  # the agent's workflow, the validate steps
    for steps in step_lists:
        assert skipped_after_a_gate(steps) == [], steps


def test_the_check_finds_a_report_step_after_a_gate() -> None:
    """The validate recipe as it was: the gate first, the reports after it without
    ``if: always()``."""
    before = """```yaml
- run: copilot-logs validate recordings/ --format github
- run: copilot-logs validate recordings/ --format sarif > validate.sarif
  continue-on-error: true
- uses: github/codeql-action/upload-sarif@v3
  with: {sarif_file: validate.sarif}
```"""
    (steps,) = github_step_lists(before)
    assert skipped_after_a_gate(steps) == [
        "copilot-logs validate recordings/ --format sarif > validate.sarif",
        "github/codeql-action/upload-sarif@v3",
    ]


def test_gitlab_keeps_its_reports_when_the_job_fails() -> None:
    (gitlab,) = [
        b
        for b in yaml_blocks(CI_PAGE.read_text())
        if isinstance(b, dict) and "jobs" not in b and "repos" not in b
    ]
    reporting = {name: job for name, job in gitlab.items() if "reports" in job.get("artifacts", {})}
    assert reporting
    for name, job in reporting.items():
        assert job["artifacts"].get("when") == "always", name


@pytest.mark.parametrize("name", ["Audit summary", "Gate on the audit"])
def test_the_agent_workflow_reports_and_gates_after_the_agent_whatever_it_did(name: str) -> None:
    (agent,) = [b for b in yaml_blocks(CI_PAGE.read_text()) if isinstance(b, dict) and "jobs" in b]
    steps = {step.get("name"): step for step in agent["jobs"]["agent"]["steps"]}
    assert runs_anyway(steps[name])
