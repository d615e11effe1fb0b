"""Session folders for the tests of ``disk`` and ``prune``, shaped as the CLI 1.0.102 leaves them
(seen by running it: docs/disk.md), written to a temporary root."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from synth import SessionBuilder

WORKSPACE = """id: {id}
cwd: /home/dev/project
client_name: github/cli
name: '{name}'
user_named: false
summary_count: 0
fork_count: 0
created_at: 2026-08-05T07:49:01.551Z
updated_at: 2026-08-05T07:49:02.551Z
"""
INDEX = (
    "# Checkpoint History\n\nCheckpoints are listed in chronological order. Checkpoint 1 is the "
    "oldest, higher numbers are more recent.\n\n| # | Title | File |\n|---|-------|------|\n"
)
OLD = time.time() - 3 * 86400
"""When the folders are last written, unless a test says otherwise: three days ago."""


def new_id(number: int) -> str:
    return str(uuid.UUID(int=number, version=4))


def scaffold(root: Path, number: int, *, name: str = "Do it.") -> Path:
    """A folder as the CLI makes it before the first event."""
    folder = root / new_id(number)
    for sub in ("checkpoints", "files", "research", "rewind-file-snapshots"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "checkpoints" / "index.md").write_text(INDEX)
    (folder / "rewind-file-snapshots" / "tracking.json").write_text('{"schema":1,"tracking":true}')
    (folder / ".workspace-fork.lock").write_bytes(b"")
    (folder / "workspace.yaml").write_text(WORKSPACE.format(id=folder.name, name=name))
    (folder / "workspace.yaml").chmod(0o600)
    return folder


def session(root: Path, number: int, kind: str = "ok", **workspace: Any) -> Path:
    """A session folder whose log is ``kind``: ``ok`` (a prompt and a reply), ``empty`` (no
    prompt, no call), ``abandoned`` (a prompt, a call that never answered)."""
    folder = scaffold(root, number, **workspace)
    builder = SessionBuilder(session_id=folder.name, seed=number, copilot_version="1.0.102")
    if kind in ("ok", "abandoned"):
        builder.user_message("Do the task.")
        builder.turn("Done." if kind == "ok" else None)
    if kind == "ok":
        builder.shutdown()
    (folder / "events.jsonl").write_bytes(builder.to_bytes())
    (folder / "events.jsonl").chmod(0o600)
    return folder


def age(folder: Path, when: float = OLD) -> None:
    """Every entry of ``folder`` (and itself) last written at ``when``."""
    for path in sorted(folder.rglob("*"), reverse=True):
        os.utime(path, (when, when), follow_symlinks=False)
    os.utime(folder, (when, when))


def dead_pid() -> int:
    """A pid no process has now (one that just ended)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def lock(folder: Path, pid: int, *, written: float | None = None) -> Path:
    """``inuse.<pid>.lock`` (0644, the pid) and its empty ``.hold``, as the CLI writes them."""
    path = folder / f"inuse.{pid}.lock"
    path.write_text(f"{pid}\n")
    path.chmod(0o644)
    hold = folder / f"inuse.{pid}.hold"
    hold.write_bytes(b"")
    if written is not None:
        os.utime(path, (written, written))
        os.utime(hold, (written, written))
    return path


def snapshot(root: Path) -> dict[str, Any]:
    """Every path under ``root`` (itself included): its type and mode, a link's target, a
    file's contents' hash, and its times: what no dry run may change."""
    found: dict[str, Any] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(path)
        entry: dict[str, Any] = {"mode": st.st_mode, "mtime": st.st_mtime_ns, "ino": st.st_ino}
        if stat.S_ISLNK(st.st_mode):
            entry["target"] = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            entry["sha"] = hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(root))] = entry
    return found
