"""``disk`` and ``prune`` against the real Copilot CLI (the newest in the rig's cache, or
COPILOT_RIG_VERSION) and the rig's model server: what the CLI itself does with the locks prune
judges, a session it is writing, and the folders prune leaves. Skipped, with the fixture's one
reason, when no CLI is cached (`make test` fetches nothing).

Truth comes from the CLI: ``session.resume.alreadyInUse`` in the log it writes, its exit code
and what it sent the model (the rig's verdict of a resume), and the bytes of its own
``session-store.db``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from rig import record
from rig.resume import environment, first_prompt, resume_in, run, verdict
from rig.scenarios import BY_NAME, Script
from rig.server import ModelServer

from .folders import age, scaffold

pytestmark = [pytest.mark.live, pytest.mark.process]


def state(home: Path) -> Path:
    return home / ".copilot" / "session-state"


def real_session(binary: Path, version: str, home: Path) -> Path:
    """A session the real CLI wrote (the rig's one-tool scenario), ended cleanly."""
    (home / "work").mkdir(parents=True, exist_ok=True)
    scenario = BY_NAME["one-tool"]
    with ModelServer(Script(scenario)) as server:
        env = environment(home, server.url, version)
        done = run([str(binary), "-p", scenario.prompts[0], *scenario.flags], home / "work", env)
    assert done["exit_code"] == 0, done
    [folder] = [p for p in state(home).iterdir() if not p.name.startswith(".")]
    return folder


def already_in_use(log: bytes) -> list[bool]:
    """``alreadyInUse`` of each ``session.resume`` the CLI wrote, in order."""
    found = []
    for line in log.split(b"\n"):
        if b'"session.resume"' in line:
            found.append(json.loads(line)["data"]["alreadyInUse"])
    return found


def prune(home: Path, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["prune", "--root", str(state(home)), *args], catch_exceptions=False
    )


@contextmanager
def unrelated_process() -> Iterator[int]:
    child = subprocess.Popen(["sleep", "600"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_a_live_unrelated_pid_holds_the_session_until_prune_removes_its_lock(
    live_cli: tuple[str, Path], tmp_path: Path
) -> None:
    version, binary = live_cli
    home = tmp_path / "home"
    folder = real_session(binary, version, home)
    with unrelated_process() as pid:
        # A lock the CLI left before a reboot, naming a pid another process has now.
        lock = folder / f"inuse.{pid}.lock"
        lock.write_text(f"{pid}\n")
        written = time.time() - 120
        os.utime(lock, (written, written))
        seen = resume_in(binary, version, home, folder.name)
        assert already_in_use(seen["after"])[-1] is True
        assert lock.exists()  # the CLI keeps it

        plan = json.loads(
            prune(home, "--stale-locks", "--quiet-for", "0", "--format", "json").stdout
        )
        assert [row["session_id"] for row in plan["rows"]] == [folder.name]
        done = prune(home, "--stale-locks", "--quiet-for", "0", "--apply", "--no-export")
        assert done.exit_code == 0, done.stderr
        assert not lock.exists()

        again = resume_in(binary, version, home, folder.name)
    assert already_in_use(again["after"])[-1] is False
    assert again["resume"]["exit_code"] == 0


def test_a_session_a_running_cli_writes_is_never_selected(
    live_cli: tuple[str, Path], tmp_path: Path
) -> None:
    version, binary = live_cli
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    scenario = BY_NAME["one-tool"]
    with ModelServer(Script(scenario), delay=3.0) as server:
        env = environment(home, server.url, version)
        child = subprocess.Popen(
            [str(binary), "-p", scenario.prompts[0], *scenario.flags],
            cwd=home / "work",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            locks = _wait_for_lock(home, child)
            everything = ("--older-than", "0", "--larger-than", "0", "--scaffolds", "--empty")
            mild = ("--quiet-for", "0", "--keep-newest", "0", "--abandoned", "--stale-locks")
            plan = prune(home, *everything, *mild, "--format", "json")
            done = prune(home, *everything, *mild, "--apply", "--no-export", "--format", "json")
            code = child.wait(timeout=record.RUN_SECONDS)
        finally:
            record._end_group(child)
    assert code == 0
    folder = locks[0].parent
    for result in (plan, done):
        payload = json.loads(result.stdout)
        assert payload["rows"] == [], payload
        [kept] = payload["kept"]
        assert kept["session_id"] == folder.name
        assert kept["kept"].startswith("in use: pid"), kept
    assert (folder / "events.jsonl").is_file()


def _wait_for_lock(home: Path, child: subprocess.Popen[bytes]) -> list[Path]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        locks = sorted(state(home).glob("*/inuse.*.lock")) if state(home).is_dir() else []
        if locks and (locks[0].parent / "events.jsonl").is_file():
            return locks
        time.sleep(0.05)
    pytest.fail("the CLI wrote no lock")


def _store(home: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (home / ".copilot").glob("session-store.db*")}


def test_after_pruning_scaffolds_a_kept_session_resumes_and_the_store_is_untouched(
    live_cli: tuple[str, Path], tmp_path: Path
) -> None:
    version, binary = live_cli
    home = tmp_path / "home"
    folder = real_session(binary, version, home)
    scaffolds = [scaffold(state(home), number) for number in range(1, 4)]
    for made in scaffolds:
        age(made)
    before = _store(home)
    assert before  # the CLI keeps its database beside session-state
    log = (folder / "events.jsonl").read_bytes()

    done = prune(
        home, "--scaffolds", "--keep-newest", "0", "--apply", "--no-export", "--format", "json"
    )
    assert done.exit_code == 0, done.stderr
    gone: dict[str, Any] = json.loads(done.stdout)
    assert sorted(row["session_id"] for row in gone["rows"]) == sorted(s.name for s in scaffolds)
    assert not any(made.exists() for made in scaffolds)
    assert _store(home) == before  # byte-identical: prune never touches the CLI's database
    assert (folder / "events.jsonl").read_bytes() == log

    seen = resume_in(binary, version, home, folder.name)
    seen.pop("after")
    assert verdict({**seen, "dropped": []}, first_prompt(log)) == "resumed", seen["resume"]
