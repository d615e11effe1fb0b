"""``watch --until-done`` as docs/ci.md uses it: the recipe run exactly as written, beside an
agent that writes its session log in the background, and ``--timeout`` in every state.

The agent here is a stand-in: ``copilot`` on the PATH replays a recorded log into
``$COPILOT_HOME/session-state/<id>/``, as Copilot CLI lays it out (a lock folder, the session
folder and its ``workspace.yaml`` first, ``events.jsonl`` line by line later), so the records
are known in advance. tests/test_ci_recipe_live.py runs the same recipe with the real CLI.

Every process runs under a hard timeout: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from copilot_logs.commands import watch
from copilot_logs.ingest.discover import Selection

from .conftest import PROJECT
from .test_watch import COMPLETED_SAMPLE, NUDGE_CAP_SAMPLE, OPEN_SAMPLE, _oracle

HARD_LIMIT = 60.0
"""Seconds any process of these tests may run: far above what the work needs, far below
the 30 minutes of the recipe's own --timeout."""
SESSION = COMPLETED_SAMPLE.parent.name


def ci_recipe() -> str:
    """The bash block of docs/ci.md that starts the agent in the background and gates on
    ``watch --until-done``, exactly as the page shows it."""
    page = (PROJECT / "docs" / "ci.md").read_text()
    section = page.split("## GitHub Actions: start the agent in the background", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "docs/ci.md lost its background-agent recipe"
    return block.group(1)


def _run(
    args: list[str], *, cwd: Path, env: dict[str, str], limit: float = HARD_LIMIT
) -> subprocess.CompletedProcess[str]:
    """Run to the end, or kill the whole process group after ``limit`` seconds and fail."""
    with subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            pytest.fail(f"hung: killed after {limit:g}s\nstdout: {out[-2000:]}\nstderr: {err}")
    return subprocess.CompletedProcess(args, process.returncode, out, err)


# --- the agent: a replayed log now, the real CLI later --------------------------------------


@dataclass(frozen=True)
class Agent:
    """What ``copilot`` on the PATH does in the recipe, and the log it leaves."""

    bin_dir: Path
    """Holds the ``copilot`` executable the recipe starts."""
    log: Path | None
    """The log it writes (its records are known in advance), or None for the real CLI."""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def replaying_agent(bin_dir: Path, log: Path, session: str, *, delay: float = 1.5) -> Agent:
    """A ``copilot`` that creates a lock folder, its session folder and ``workspace.yaml`` at
    once (as the real CLI does), then after ``delay`` seconds writes ``log`` into its
    ``events.jsonl`` line by line."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = f"""#!{sys.executable}
import os, sys, time
from pathlib import Path

assert "-p" in sys.argv, sys.argv  # started as the recipe starts Copilot CLI
state = Path(os.environ["COPILOT_HOME"]) / "session-state"
# As Copilot CLI 1.0.102 does: a lock folder first, then the session's folder, its log later.
(state / ".session-operation-locks").mkdir(parents=True, exist_ok=True)
(state / ".session-operation-locks" / "{session}.lock").write_text("")
folder = state / {session!r}
folder.mkdir(parents=True, exist_ok=True)
(folder / "workspace.yaml").write_text("id: {session}\\n")
time.sleep({delay})
with (folder / "events.jsonl").open("ab") as out:
    for line in Path({str(log)!r}).read_bytes().splitlines(keepends=True):
        out.write(line)
        out.flush()
        time.sleep(0.01)
print("replayed", {str(log)!r})
"""
    _executable(bin_dir / "copilot", script)
    return Agent(bin_dir, log)


AGENTS: dict[str, Callable[[Path], Agent]] = {
    "replayed-log": lambda bin_dir: replaying_agent(bin_dir, COMPLETED_SAMPLE, SESSION),
}
"""The agents the recipe runs beside here. The real Copilot CLI (against the recording rig's
model server) runs the same recipe in tests/test_ci_recipe_live.py."""


@pytest.fixture(params=sorted(AGENTS))
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Agent:
    """Each way of running the agent in the background (see :data:`AGENTS`)."""
    return AGENTS[request.param](tmp_path / "bin")


def _environment(agent: Agent, runner_temp: Path) -> dict[str, str]:
    """What a CI runner gives the recipe: RUNNER_TEMP, and on the PATH the agent's
    ``copilot`` and this checkout's ``copilot-logs``."""
    _executable(
        agent.bin_dir / "copilot-logs", f'#!/bin/sh\nexec {sys.executable} -m copilot_logs "$@"\n'
    )
    env = dict(os.environ)
    env.pop("COPILOT_HOME")  # the recipe sets its own
    env["RUNNER_TEMP"] = str(runner_temp)
    env["PATH"] = f"{agent.bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(PROJECT)
    return env


# --- the recipe ------------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize("before", ["session-folder-exists", "fresh-home"])
def test_the_ci_recipe_follows_the_agents_session_to_its_verdict(
    tmp_path: Path, agent: Agent, before: str
) -> None:
    runner_temp, job = tmp_path / "runner-temp", tmp_path / "job"
    runner_temp.mkdir()
    job.mkdir()
    if before == "session-folder-exists":
        # The CLI creates its folder (and workspace.yaml) first: here before watch starts.
        folder = runner_temp / "copilot-home" / "session-state" / SESSION
        folder.mkdir(parents=True)
        (folder / "workspace.yaml").write_text(f"id: {SESSION}\n")
    done = _run(["bash", "-c", ci_recipe()], cwd=job, env=_environment(agent, runner_temp))
    assert done.returncode == 0, done.stderr
    assert "verdict: completed: " in done.stderr
    records = [json.loads(line) for line in (job / "events.ndjson").read_text().splitlines()]
    if agent.log is not None:
        expected = _oracle(agent.log.read_bytes())
        got = [(r["kind"], r["line"], r.get("tool_name"), r.get("agent_id")) for r in records]
        assert got == expected
    assert {r["session_id"] for r in records} == {SESSION}
    assert (job / "agent.log").exists()


def _session_of(log: Path) -> str:
    return log.parent.name if log.name == "events.jsonl" else log.stem


def _old_run(state: Path, log: Path, *, hours_ago: float) -> None:
    """A run that ended before the job started, left in the sessions folder."""
    copy = state / _session_of(log) / "events.jsonl"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(log.read_bytes())
    then = time.time() - hours_ago * 3600
    os.utime(copy, (then, then))


@pytest.mark.process
@pytest.mark.parametrize(
    ("new_run", "old_runs", "code", "verdict"),
    [
        # issue 33: an old nudge-capped run was judged (exit 1) before the new run wrote a line
        (COMPLETED_SAMPLE, [NUDGE_CAP_SAMPLE, OPEN_SAMPLE], 0, "completed"),
        (NUDGE_CAP_SAMPLE, [COMPLETED_SAMPLE], 1, "nudge-cap"),
    ],
    ids=["new-completed-old-capped", "new-capped-old-completed"],
)
def test_the_ci_recipe_judges_the_new_run_beside_old_ones(
    tmp_path: Path, new_run: Path, old_runs: list[Path], code: int, verdict: str
) -> None:
    """The recipe as written, in a sessions folder that already holds finished runs (one
    written a minute ago, newer than the new run's start): the verdict is the new run's."""
    runner_temp, job = tmp_path / "runner-temp", tmp_path / "job"
    job.mkdir()
    state = runner_temp / "copilot-home" / "session-state"
    for age, log in enumerate(old_runs):
        _old_run(state, log, hours_ago=age / 60)
    agent = replaying_agent(tmp_path / "bin", new_run, _session_of(new_run))
    done = _run(["bash", "-c", ci_recipe()], cwd=job, env=_environment(agent, runner_temp))
    assert done.returncode == code, done.stderr
    assert f"verdict: {verdict}: " in done.stderr
    records = [json.loads(line) for line in (job / "events.ndjson").read_text().splitlines()]
    assert {r["session_id"] for r in records} == {_session_of(new_run)}
    got = [(r["kind"], r["line"], r.get("tool_name"), r.get("agent_id")) for r in records]
    assert got == _oracle(new_run.read_bytes())


def test_a_run_already_writing_when_the_watch_starts_is_followed_from_its_first_line(
    tmp_path: Path,
) -> None:
    root = tmp_path / "session-state"
    _old_run(root, NUDGE_CAP_SAMPLE, hours_ago=2)
    lines = COMPLETED_SAMPLE.read_bytes().splitlines(keepends=True)
    log = root / SESSION / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"".join(lines[:5]))  # the agent started before the watch
    watcher = watch.choose(Selection(root=root), started=datetime.now(UTC), new_only=True)
    assert watcher.followers == [] and watcher.wanted == 1
    assert _scan_now(watcher) == []  # nothing written since: nothing judged
    with log.open("ab") as out:
        out.write(b"".join(lines[5:]))
    changes = _scan_now(watcher)
    assert [f.session_hint for f, _ in changes] == [SESSION]
    assert [(r["kind"], r["line"]) for r in changes[0][1].records] == [
        (kind, line) for kind, line, _, _ in _oracle(COMPLETED_SAMPLE.read_bytes())
    ]


@pytest.mark.process
def test_until_done_waits_a_moment_for_the_shutdown_after_task_complete(tmp_path: Path) -> None:
    """The CLI writes its shutdown (with the session's usage) as it exits, just after the
    task_complete turn: the stream ends with it."""
    lines = COMPLETED_SAMPLE.read_bytes().splitlines(keepends=True)
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[-1] == "session.shutdown" and "session.task_complete" in kinds
    log = tmp_path / "s.jsonl"
    log.write_bytes(b"".join(lines[:-1]))
    command = [sys.executable, "-m", "copilot_logs", "watch", str(log), "--until-done"]
    with subprocess.Popen(
        [*command, "--format", "ndjson"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    ) as process:
        # A hang ends here: the whole group is killed, and the reads below see the end.
        watchdog = threading.Timer(HARD_LIMIT, os.killpg, (process.pid, signal.SIGKILL))
        watchdog.start()
        try:
            assert process.stdout is not None
            seen: list[str] = []
            while "task_complete" not in seen or seen[-1] != "turn_end":  # that turn ends
                seen.append(json.loads(process.stdout.readline())["kind"])
            with log.open("ab") as out:
                out.write(lines[-1])
            rest = [json.loads(line)["kind"] for line in process.stdout]
            process.wait()
        finally:
            watchdog.cancel()
    assert process.returncode == 0
    assert "task_complete" in seen and rest == ["shutdown"]


# --- --timeout in every state -----------------------------------------------------------------


def _watch(*args: str, cwd: Path, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COPILOT_HOME": str(home)} if home else dict(os.environ)
    command = [sys.executable, "-m", "copilot_logs", "watch", *args]
    return _run(command, cwd=cwd, env=env, limit=30)


@pytest.mark.process
@pytest.mark.parametrize("root_state", ["empty", "missing", "session-folder-without-log"])
def test_the_timeout_fires_while_there_is_nothing_to_follow_yet(
    tmp_path: Path, root_state: str
) -> None:
    root = tmp_path / "session-state"
    if root_state != "missing":
        root.mkdir()
    if root_state == "session-folder-without-log":
        (root / SESSION).mkdir()
        (root / SESSION / "workspace.yaml").write_text("id: x\n")
    # COPILOT_HOME=tmp_path: the root is its session-state/, as in the recipe.
    done = _watch(
        "--latest", "1", "--until-done", "--timeout", "1s", "--format", "ndjson",
        cwd=tmp_path, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 124, done.stderr
    assert done.stdout == ""
    assert "gave up waiting" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.process
def test_the_timeout_fires_on_a_named_session_that_never_appears(tmp_path: Path) -> None:
    done = _watch(SESSION, "--root", str(tmp_path), "--until-done", "--timeout", "1s", cwd=tmp_path)
    assert done.returncode == 124, done.stderr
    assert "gave up waiting" in done.stderr


# --- the root's watch: sessions that start writing while it runs ------------------------------


def _scan_now(watcher: watch.Watcher) -> list[tuple[watch.Follower, watch.Update]]:
    watcher._next_scan = 0  # list the root in this round
    return watcher.tick()


def test_a_session_folder_there_before_its_log_is_followed_once_the_log_comes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "session-state"
    (root / SESSION).mkdir(parents=True)
    (root / SESSION / "workspace.yaml").write_text("id: x\n")
    for selection in (Selection(root=root), Selection(root=root, latest=1)):
        watcher = watch.choose(selection, started=datetime.now(UTC))
        assert watcher.followers == []
        assert _scan_now(watcher) == []
        (root / SESSION / "events.jsonl").write_bytes(COMPLETED_SAMPLE.read_bytes())
        changes = _scan_now(watcher)
        assert [f.session_hint for f, _ in changes] == [SESSION]
        assert [f.session_hint for f in watcher.shown()] == [SESSION]
        records = changes[0][1].records
        assert [(r["kind"], r["line"]) for r in records] == [
            (kind, line) for kind, line, _, _ in _oracle(COMPLETED_SAMPLE.read_bytes())
        ]
        (root / SESSION / "events.jsonl").unlink()


def test_a_folder_that_holds_no_session_does_not_take_the_latest_slot(tmp_path: Path) -> None:
    """The real CLI makes ``session-state/.session-operation-locks/`` before the session's
    folder: --latest 1 must wait for a log, not follow the first folder it sees."""
    root = tmp_path / "session-state"
    root.mkdir()
    watcher = watch.choose(Selection(root=root, latest=1), started=datetime.now(UTC))
    (root / ".session-operation-locks").mkdir()
    (root / ".session-operation-locks" / f"{SESSION}.lock").write_text("")
    (root / SESSION).mkdir()
    assert _scan_now(watcher) == []
    assert watcher.followers == [] and watcher.wanted == 1
    (root / SESSION / "events.jsonl").write_bytes(COMPLETED_SAMPLE.read_bytes())
    changes = _scan_now(watcher)
    assert [f.session_hint for f, _ in changes] == [SESSION] and watcher.wanted == 0


def test_an_old_session_resumed_while_watching_joins_the_view_with_its_new_events(
    tmp_path: Path,
) -> None:
    root = tmp_path / "session-state"
    log = root / "old" / "events.jsonl"
    log.parent.mkdir(parents=True)
    lines = OPEN_SAMPLE.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-2]))
    hour_ago = time.time() - 3600
    os.utime(log, (hour_ago, hour_ago))
    watcher = watch.choose(Selection(root=root), started=datetime.now(UTC))
    assert watcher.followers == []  # older than ten minutes: not followed
    assert _scan_now(watcher) == []
    with log.open("ab") as out:  # resumed: appended to
        out.write(b"".join(lines[-2:]))
    changes = _scan_now(watcher)
    assert [f.session_hint for f, _ in changes] == ["old"]
    assert [f.session_hint for f in watcher.shown()] == ["old"]
    # The live state is the whole session; the records are what was appended.
    follower, update = changes[0]
    state = watch.state(follower)
    assert state is not None and state.llm_calls == 3  # sample_sessions/expected.json
    assert [r["line"] for r in update.records] == [
        line for _, line, _, _ in _oracle(OPEN_SAMPLE.read_bytes()) if line > len(lines) - 2
    ]


def test_a_session_followed_from_the_start_is_not_picked_up_again(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    (root / SESSION).mkdir(parents=True)
    (root / SESSION / "events.jsonl").write_bytes(COMPLETED_SAMPLE.read_bytes())
    watcher = watch.choose(Selection(root=root), started=datetime.now(UTC))
    assert len(watcher.followers) == 1
    _scan_now(watcher)
    with (root / SESSION / "events.jsonl").open("ab") as out:
        out.write(OPEN_SAMPLE.read_bytes().splitlines(keepends=True)[-1])
    _scan_now(watcher)
    assert len(watcher.followers) == 1
