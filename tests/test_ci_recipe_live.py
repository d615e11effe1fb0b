"""docs/ci.md's background-agent recipe, run exactly as written, with the real Copilot CLI as
the agent (against the rig's model server) and `watch --until-done` as the gate."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rig.record import environment
from rig.scenarios import BY_NAME, Script
from rig.server import ModelServer
from tests.conftest import PROJECT, SAMPLES

# Runs the CI recipe in a shell, with the real Copilot CLI (tier `process`).
pytestmark = pytest.mark.process

HARD_TIMEOUT = 120
"""Seconds: the recipe ends within a few seconds; a hang fails the test here."""


def recipe() -> str:
    """The bash block of docs/ci.md that starts the agent in the background and watches it."""
    page = (PROJECT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", page, re.S)
    (block,) = [b for b in blocks if "watch --until-done" in b and "&\n" in b]
    return block


def run_group(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in a process group of its own; on a hang, end the whole group (the agent
    in the background too) and fail."""
    child = subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=HARD_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"the recipe did not end within {HARD_TIMEOUT} s")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(args, child.returncode, out, err)


OLD_RUNS = (
    SAMPLES / "d4c3f605-7e80-4f91-b2a3-3d4e5f607182.jsonl",  # nudge-cap: exit 1 if judged
    SAMPLES / "18e7da49-bc24-4d35-b6e7-718293a4b5c6" / "events.jsonl",  # cut off mid-turn
)


@pytest.mark.live
@pytest.mark.parametrize("folder", ["fresh", "holding-old-runs"])
def test_the_background_agent_recipe_gates_on_the_real_cli(
    live_cli: tuple[str, Path], tmp_path: Path, folder: str
) -> None:
    _, binary = live_cli
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "copilot").symlink_to(binary)
    (tools / "copilot-logs").symlink_to(Path(sys.executable).parent / "copilot-logs")
    work = tmp_path / "work"
    work.mkdir()
    # The model answers after a pause, so the recipe's watch starts before the log exists.
    with ModelServer(Script(BY_NAME["autopilot-complete"]), delay=1.0) as server:
        env = environment(tmp_path / "home", server.url)
        env["PATH"] = f"{tools}{os.pathsep}{env['PATH']}"
        env["RUNNER_TEMP"] = str(tmp_path / "runner")
        old_ids = set()
        if folder == "holding-old-runs":  # finished runs, there before the job (issue 33)
            state = tmp_path / "runner" / "copilot-home" / "session-state"
            for log in OLD_RUNS:
                old_id = log.parent.name if log.name == "events.jsonl" else log.stem
                (state / old_id).mkdir(parents=True)
                (state / old_id / "events.jsonl").write_bytes(log.read_bytes())
                old_ids.add(old_id)
        done = run_group(["bash", "-euo", "pipefail", "-c", recipe()], work, env)
        served = [r for r in server.truth.requests if r["status"] == 200]
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (work / "events.ndjson").read_text().splitlines()]
    assert len(served) == 3  # the script: two answers that get nudged, then task_complete
    assert sum(1 for r in records if r["kind"] == "turn_start") == len(served)
    assert records[-1]["kind"] == "shutdown" and records[-1]["llm_calls"] == len(served)
    assert len({r["session_id"] for r in records} - old_ids) == 1  # the new run's, alone
    assert not {r["session_id"] for r in records} & old_ids
    assert "verdict: completed" in done.stderr
