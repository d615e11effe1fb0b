"""The recordings of the real Copilot CLI and the truth the rig's model server kept of each
(docs/recordings.md), for the conformance tests (test helper, not a test module).

``COPILOT_LOGS_RECORDINGS`` points at another folder of recordings (``make record-live`` sets
it to the logs the newest CLI has just written); by default the committed ones.

``ALL`` leaves out the scenarios of :data:`HELD_APART` (a CLI run killed and resumed:
``kill-resume``): the whole-log checks of the other scenarios (no finding at all, every served
token in a shutdown) do not hold for a log whose first run was killed. tests/test_kill_resume.py
checks those, from ``KILLED_AND_RESUMED``, run by run against the server's truth.

Conformance tests of other commands (audit's verdicts, usage's figures) take the same
``recording`` fixture: ``from tests.recorded import Recording, recording`` and a test per
figure, each comparing the command's output with :class:`Recording`'s truth. They get the
command's answer through the ``read`` fixture (:class:`Read`): each such test runs twice, once
on the answer of one batch over every recording (the fast tier: every recording is read once
in all) and once on the log read alone (tier ``matrix``: each test reads its log again).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from rig.scenarios import BY_NAME
from tests.conftest import UNSUPPORTED

COMMITTED = Path(__file__).resolve().parent / "recordings"
RECORDINGS = Path(os.environ.get("COPILOT_LOGS_RECORDINGS") or COMMITTED)
SUB_MARK = re.compile(r"\[rig:sub:([\w-]+)\]")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


@dataclass(frozen=True)
class Recording:
    """One scenario recorded with one CLI version: its log and the server's truth."""

    version: str
    scenario: str
    folder: Path
    truth: dict[str, Any] = field(repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.version}/{self.scenario}"

    @property
    def log(self) -> Path:
        return self.folder / "events.jsonl"

    @property
    def outcome(self) -> str:
        return str(self.truth["outcome"])

    @property
    def why_not_recorded(self) -> str:
        errors = [run["error"] for run in self.truth.get("runs", []) if run.get("error")]
        return f"{self.id}: {self.outcome}" + (f" ({errors[-1]})" if errors else "")

    @property
    def served(self) -> list[dict[str, Any]]:
        """The requests the server answered with a reply (status 200): the LLM calls."""
        return [r for r in self.truth["requests"] if r["status"] == 200]

    @property
    def runs(self) -> list[dict[str, Any]]:
        """One per CLI run, in order (a resume is a second run): how it ended, and the log's
        size and lines and what sat beside it once it had (``killed``, ``log_lines``, ...)."""
        runs: list[dict[str, Any]] = self.truth["runs"]
        return runs

    def served_in(self, run: int) -> list[dict[str, Any]]:
        """The LLM calls the server answered during that run (its index in :attr:`runs`)."""
        return [r for r in self.served if r.get("run", 0) == run]

    @property
    def shutdowns(self) -> int:
        """The session.shutdown lines of the log, found by hand (a byte search)."""
        return self.log.read_bytes().count(b'"type":"session.shutdown"')

    @property
    def autopilot(self) -> bool:
        return "--autopilot" in self.truth["flags"]

    @cached_property
    def expected(self) -> dict[str, int]:
        """The figures ``count`` must find, from the server's truth alone."""
        main = [r for r in self.served if r["agent"] == "main"]
        subs = [r for r in self.served if r["agent"] != "main"]
        # In autopilot, a main-agent answer without tool calls ends the loop, and the CLI
        # nudges it on: each main call after such an answer follows a nudge.
        nudges = (
            sum(1 for before in main[:-1] if before["reply"] == "text") if self.autopilot else 0
        )
        prompts = len(self.truth["prompts"])
        return {
            "llm_calls": len(main),
            "subagent_calls": len(subs),
            "tool_calls": sum(len(r["tools"]) for r in main),
            "subagent_tool_calls": sum(len(r["tools"]) for r in subs),
            "user_prompts": prompts,
            "autopilot_nudges": nudges,
            "interactions": prompts + nudges,
        }

    @cached_property
    def subagents(self) -> dict[str, tuple[str, int]]:
        """Each sub-agent by the toolCallId of the task call that started it: its name (the
        mark in the task's prompt) and the calls the server answered it."""
        scenario = BY_NAME[self.scenario]
        calls = Counter(r["agent"] for r in self.served if r["agent"] != "main")
        found: dict[str, tuple[str, int]] = {}
        for request in self.served:
            if request["agent"] != "main" or request["reply"] != "tools":
                continue
            steps, step = scenario.steps.get("main", ()), request["step"]
            if step >= len(steps):
                continue  # past the script: the scenario's cycle, which starts no sub-agent
            reply = steps[step]
            for call_id, call in zip(request["tool_call_ids"], reply.calls, strict=True):
                mark = SUB_MARK.search(str(call.args.get("prompt", "")))
                if call.tool == "task" and mark:
                    found[call_id] = (mark.group(1), calls[mark.group(1)])
        return found


def recordings(root: Path = RECORDINGS) -> list[Recording]:
    """Every recording under ``root``, by version (oldest first), then scenario."""
    if not root.is_dir():
        return []
    # Only the rig's scenarios: doctor's resume evidence (resume-<damage>/) is no clean log.
    found = [
        Recording(truth_file.parent.parent.name, truth_file.parent.name, truth_file.parent, {})
        for truth_file in root.glob("*/*/truth.json")
        if truth_file.parent.name in BY_NAME
    ]
    found.sort(key=lambda r: (version_key(r.version), r.scenario))
    return [
        Recording(
            r.version, r.scenario, r.folder, json.loads((r.folder / "truth.json").read_text())
        )
        for r in found
    ]


HELD_APART = frozenset({"kill-resume"})
"""Scenarios whose log holds a killed CLI run and its resume (tests/test_kill_resume.py)."""
_EVERY = recordings()
ALL = [r for r in _EVERY if r.scenario not in HELD_APART]
KILLED_AND_RESUMED = [r for r in _EVERY if r.scenario in HELD_APART]


@pytest.fixture(params=ALL, ids=[r.id for r in ALL])
def any_recording(request: pytest.FixtureRequest) -> Recording:
    """Each recording, whatever its outcome (for the matrix)."""
    recording: Recording = request.param
    return recording


@pytest.fixture(params=ALL, ids=[r.id for r in ALL])
def recording(request: pytest.FixtureRequest) -> Recording:
    """Each recording the CLI wrote a log for; the others are skipped with the reason (a
    version that refused the scenario's flags is ``unsupported``)."""
    recording: Recording = request.param
    if recording.outcome == "unsupported":
        pytest.skip(UNSUPPORTED)
    if recording.outcome != "recorded":
        pytest.skip(recording.why_not_recorded)
    return recording


RECORDED = [r for r in ALL if r.outcome == "recorded"]
"""The recordings the CLI wrote a log for."""

Rows = list[dict[str, Any]]


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--no-cache", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return orjson.loads(result.stdout)


def _about(answer: Any, log: Path) -> Any:
    """The part of a command's json answer about one log: the rows (a list of them, or a
    dict's ``rows`` or ``findings``) whose ``file`` is ``log``. A dict's other keys (totals, a
    summary) are of the whole batch: left out."""
    if isinstance(answer, list):
        return [row for row in answer if Path(row["file"]).resolve() == log]
    return {key: _about(value, log) for key, value in answer.items() if key in ("rows", "findings")}


_BATCHES: dict[tuple[str, ...], Any] = {}
"""Each answer over every recording, by what was asked: computed once in a process."""


class Read:
    """What a command answers about one recording. ``batch``: the command run once on every
    recording (the first test that asks runs it) and the part about this log kept;
    ``alone``: the command run on this log alone, as the matrix did before the batch."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __call__(self, recording: Recording, *args: str) -> Any:
        """``copilot-logs ARGS LOG --no-cache --format json``'s answer about the recording."""
        return self.rows(recording, args, lambda logs: cli_json(*args, *map(str, logs)))

    def rows(
        self, recording: Recording, key: tuple[str, ...], compute: Callable[[list[Path]], Any]
    ) -> Any:
        """``compute(logs)``'s answer (rows with a ``file``) about the recording; ``key``
        names what ``compute`` asks, for the batch's cache."""
        log = recording.log.resolve()
        if self.mode == "alone":
            return _about(compute([log]), log)
        if key not in _BATCHES:
            _BATCHES[key] = compute([r.log.resolve() for r in RECORDED])
        return _about(_BATCHES[key], log)


@pytest.fixture(
    params=[
        pytest.param("batch", marks=pytest.mark.xdist_group("recordings")),
        pytest.param("alone", marks=pytest.mark.matrix),
    ]
)
def read(request: pytest.FixtureRequest) -> Read:
    """A command's answer about a recording: from one batch over every recording (the fast
    tier), and from its log read alone (tier ``matrix``)."""
    return Read(request.param)
