"""Worker processes end with the command that started them, and their end is one clear line.

Each case runs a command on logs slow to read (a million damaged lines each) with worker
processes forced (the size thresholds set to 0, three cores), waits until its workers are at
work, then: kills a worker (one ``Error:`` line and exit 3, no traceback), kills the command
with SIGKILL as a CI runner's timeout does (no worker, fork server or resource tracker may
outlive it), or presses Ctrl-C (SIGINT to its process group: it ends at once, no traceback, no
process left). The processes are found in /proc, so these run on Linux only. Nothing here
measures time: the bounds only stop a hang.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from synth import SessionBuilder, bash

# The command and its workers as processes (tier `process`).
pytestmark = [
    pytest.mark.process,
    pytest.mark.xdist_group(
        "concurrency"
    ),  # one worker runs the tests that race processes, one after another
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="finds the worker processes in /proc"
    ),
]

FORCE_WORKERS = (
    # Ctrl-C as in a terminal, also when pytest runs in the background: a shell starts a
    # background job with SIGINT ignored, and the command would inherit that.
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from copilot_logs.store import pool; "
    "pool.FRAMES_PARALLEL_BYTES = pool.SCAN_PARALLEL_BYTES = 0; "
    "from copilot_logs.cli import main; main()"
)
COMMANDS = [["sessions"], ["count", "--total"]]


@pytest.fixture(scope="module")
def slow_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("slow")
    for index in range(4):
        builder = SessionBuilder(seed=index)
        builder.user_message("go")
        builder.turn("step", [bash("echo", "ok")])
        builder.shutdown()
        path = builder.write(root / f"s{index}" / "events.jsonl")
        with path.open("ab") as stream:
            stream.write(b'{"padding":"xxxxxxxxxxxx"}\n' * 1_000_000)
    return root


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[1])  # a zombie has ended


def descendants(pid: int) -> list[int]:
    parents = {int(name): parent_of(int(name)) for name in os.listdir("/proc") if name.isdigit()}
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if parent_of(pid) is not None]


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as text:
            return text.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def start(command: list[str], root: Path, err: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    """The command, started in a session of its own (its stderr to ``err``: a pipe would stay
    open as long as a process left behind holds it), once its workers are at work; and its
    processes (the fork server, the resource tracker, the workers)."""
    args = [sys.executable, "-c", FORCE_WORKERS, *command, str(root), "--no-cache"]
    env = {**os.environ, "COPILOT_LOGS_CPUS": "3"}
    with err.open("wb") as stderr:
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=stderr, env=env, start_new_session=True
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        tree = descendants(process.pid)
        servers = [pid for pid in tree if "multiprocessing.forkserver" in cmdline(pid)]
        workers = [pid for pid in tree if parent_of(pid) in servers]
        if workers:
            time.sleep(0.5)  # at work on their batches
            return process, descendants(process.pid)
        assert process.poll() is None, err.read_text(errors="replace")
        time.sleep(0.05)
    process.kill()
    pytest.fail("no worker process started")


def wait_gone(pids: list[int], seconds: float = 30) -> list[int]:
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = alive(pids)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def ended(process: subprocess.Popen[bytes], seconds: float) -> None:
    try:
        process.wait(timeout=seconds)
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_worker_killed_under_a_command_is_one_error_line(
    command: list[str], slow_logs: Path, tmp_path: Path
) -> None:
    process, tree = start(command, slow_logs, tmp_path / "err")
    server = next(pid for pid in tree if "multiprocessing.forkserver" in cmdline(pid))
    victim = next(pid for pid in tree if parent_of(pid) == server)
    os.kill(victim, signal.SIGKILL)
    try:
        ended(process, 120)
    finally:
        left = wait_gone(tree)
    text = (tmp_path / "err").read_text(errors="replace")
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "worker process" in errors[0], text
    assert process.returncode == 3
    assert left == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_killed_with_sigkill_leaves_no_process_behind(
    command: list[str], slow_logs: Path, tmp_path: Path
) -> None:
    """As a CI runner's timeout kills it: its workers, fork server and resource tracker end
    too (they ran on, orphaned, at full CPU)."""
    process, tree = start(command, slow_logs, tmp_path / "err")
    assert len(tree) >= 3
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert wait_gone(tree) == [], [cmdline(pid) for pid in alive(tree)]


@pytest.mark.parametrize("command", COMMANDS)
def test_ctrl_c_ends_a_command_and_its_workers_at_once(
    command: list[str], slow_logs: Path, tmp_path: Path
) -> None:
    """Ctrl-C in a terminal signals the whole process group. The command was blocked waiting
    for a batch while another thread took the signal, and went on for as long as the batch
    took (once 35 minutes)."""
    process, tree = start(command, slow_logs, tmp_path / "err")
    os.killpg(process.pid, signal.SIGINT)
    try:
        ended(process, 30)
    finally:
        left = wait_gone(tree, 10)
    text = (tmp_path / "err").read_text(errors="replace")
    assert "Traceback" not in text, text
    assert process.returncode in (1, 130), text
    assert left == []
