"""``watch``'s live view on a real terminal: tmux runs it, a log is fed line by line, and the
screen is read back with ``capture-pane``. Skipped only when tmux is absent (CI installs it
through .ci/run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import NO_TMUX, SAMPLES

# The live view in tmux (tier `process`).
pytestmark = pytest.mark.process

SUBAGENT_SAMPLE = SAMPLES / "e5b4a716-8f91-4a02-83b4-4e5f60718293" / "events.jsonl"


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Run tmux commands on a private server; killed at the end."""
    if shutil.which("tmux") is None:
        pytest.skip(NO_TMUX)
    socket = f"copilot-logs-test-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    yield run
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)


def _wait_for(check: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_live_view_shows_the_session_its_calls_and_a_running_tool(
    tmp_path: Path, tmux: Callable[..., str]
) -> None:
    root = tmp_path / "session-state"
    log = root / SUBAGENT_SAMPLE.parent.name / "events.jsonl"
    root.mkdir()
    exit_file = tmp_path / "exit-code"
    command = f"{sys.executable} -m copilot_logs watch --root {root}; echo $? > {exit_file}"
    env = {"COPILOT_HOME": os.environ["COPILOT_HOME"], "TERM": "xterm-256color"}
    tmux(
        "new-session", "-d", "-x", "100", "-y", "30", "-s", "watch",
        *[f"-e{name}={value}" for name, value in env.items()],
        command,
    )  # fmt: skip

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "watch")

    _wait_for(lambda: "copilot-logs watch: 0 sessions" in screen(), "the view to start")
    lines = SUBAGENT_SAMPLE.read_bytes().splitlines(keepends=True)
    # Stop inside the sub-agent, while its bash tool runs (started, not completed).
    stop = next(
        i
        for i, line in enumerate(lines, 1)
        if json.loads(line)["type"] == "tool.execution_start" and b'"agentId"' in line
    )
    log.parent.mkdir()
    with log.open("wb") as out:
        for line in lines[:stop]:
            out.write(line)
            out.flush()
            time.sleep(0.01)
    _wait_for(lambda: "▸ bash (sub-agent) running" in screen(), "the running tool")
    shown = screen()
    assert "e5b4a716" in shown
    assert "interaction 1, turn 1 (open)" in shown
    assert "LLM calls 1 main + 1 sub-agent" in shown
    assert "sub-agents 1 (running: task)" in shown
    assert "▸ task running" in shown  # the main agent's task call waits on its sub-agent
    assert "running  last event" in shown
    # The rest of the log: the session shuts down and is shown as ended.
    with log.open("ab") as out:
        out.writelines(lines[stop:])
    _wait_for(lambda: "ended  last event" in screen(), "the session to end")
    final = screen()
    assert "LLM calls 3 main + 3 sub-agent" in final
    assert "▸" not in final
    tmux("send-keys", "-t", "watch", "C-c")
    _wait_for(exit_file.exists, "watch to exit on Ctrl-C")
    _wait_for(lambda: exit_file.read_text().strip() != "", "the exit code")
    assert exit_file.read_text().strip() == "0"
