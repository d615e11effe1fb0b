"""The tree of ``copilot-logs disk``'s benchmark row (issue 38): 10,000 scaffold folders, as the
CLI 1.0.102 leaves an aborted start, and one session folder (with a log) whose ``files/`` holds
200,000 small files. Built once into the temporary folder and kept (``--rebuild`` builds it
again); ``python -m benchmarks.disk_tree`` builds it and prints its root. No test runs this.

The row itself (``make bench``, ``benchmarks/run.py``) runs ``disk --format json`` on it under
``ulimit -n 64``, on two cores; the target is under 60 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from synth import SessionBuilder

SCAFFOLDS = 10_000
SMALL_FILES = 200_000
VERSION = 1
"""Bumped when the tree changes: a kept tree of another version is built again."""
_INDEX = b"# Checkpoint History\n\n| # | Title | File |\n|---|-------|------|\n"
_DONE = ".built"


def default_folder() -> Path:
    return Path(tempfile.gettempdir()) / "copilot-logs-bench" / f"disk-tree-v{VERSION}"


def ensure_tree(folder: Path | None = None, *, rebuild: bool = False) -> tuple[Path, int]:
    """The root of the tree (``<folder>/session-state``), built when missing; and the number of
    session folders in it."""
    folder = folder or default_folder()
    root = folder / "session-state"
    if (folder / _DONE).is_file() and not rebuild:
        return root, SCAFFOLDS + 1
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    _build(partial / "session-state")
    (partial / _DONE).write_text("built\n")
    if folder.exists():
        shutil.rmtree(folder)
    partial.rename(folder)
    return root, SCAFFOLDS + 1


def _build(root: Path) -> None:
    root.mkdir(parents=True)
    for number in range(SCAFFOLDS):
        folder = root / str(uuid.UUID(int=number + 1, version=4))
        os.mkdir(folder)
        for sub in ("checkpoints", "files", "research", "rewind-file-snapshots"):
            os.mkdir(folder / sub)
        (folder / "checkpoints" / "index.md").write_bytes(_INDEX)
        (folder / "rewind-file-snapshots" / "tracking.json").write_bytes(b'{"schema":1}')
        (folder / ".workspace-fork.lock").write_bytes(b"")
        (folder / "workspace.yaml").write_text(f"id: {folder.name}\ncwd: /w\nname: 'aborted'\n")
    heavy = root / str(uuid.UUID(int=SCAFFOLDS + 1, version=4))
    builder = SessionBuilder(session_id=heavy.name, copilot_version="1.0.102")
    builder.user_message("Build it.")
    builder.turn("Built.")
    builder.shutdown()
    builder.write(heavy / "events.jsonl")
    files = heavy / "files"
    files.mkdir()
    payload = b"x" * 200
    for number in range(SMALL_FILES):
        fd = os.open(files / f"obj-{number:06d}.o", os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, payload)
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.disk_tree", description=__doc__)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--rebuild", action="store_true")
    options = parser.parse_args(argv)
    root, _ = ensure_tree(options.folder, rebuild=options.rebuild)
    print(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
