"""Paths that cannot be read (a broken or looping link, a named pipe, a socket, a name that is
not UTF-8, permission denied) are unreadable sessions: a warning naming the path and what to
do, status `unreadable`, finding E117, exit code 3; never a traceback, never skipped in silence,
never a read that blocks."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.errors import ExitCode
from copilot_logs.ingest import logfile

from .conftest import SAMPLES

GOOD = "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f"


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


class PipeWatch:
    """Unblocks a reader stuck on the named pipe (by opening it for writing, then closing it,
    which gives the reader an end of file), and remembers that it had to: a regression that
    opens the pipe blocking then fails instead of hanging the suite."""

    def __init__(self, fifo: Path) -> None:
        self.fifo, self.blocked, self.done = fifo, False, threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.2):
            try:
                descriptor = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue  # no reader waits on it
            self.blocked = True
            os.close(descriptor)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


@pytest.fixture
def odd_root(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Path], PipeWatch]]:
    """A good session beside every kind of path that cannot be read."""
    root = tmp_path / "s"
    root.mkdir()
    shutil.copytree(SAMPLES / GOOD, root / GOOD)
    bad = {
        "broken symbolic link": root / "dangling.jsonl",
        "link that loops": root / "loop.jsonl",
        "named pipe": root / "pipe.jsonl",
        "broken link in a session folder": root / "d0d0" / "events.jsonl",
    }
    bad["broken symbolic link"].symlink_to(tmp_path / "nowhere.jsonl")
    bad["link that loops"].symlink_to("loop.jsonl")
    os.mkfifo(bad["named pipe"])
    bad["broken link in a session folder"].parent.mkdir()
    bad["broken link in a session folder"].symlink_to(tmp_path / "gone.jsonl")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock.jsonl"))
        bad["socket"] = root / "sock.jsonl"
    except OSError:  # a path too long for a socket on this machine
        pass
    try:
        odd = root / os.fsdecode(b"bad-\xff.jsonl")
        shutil.copy(root / GOOD / "events.jsonl", odd)
        bad["name that is not UTF-8"] = odd
    except (OSError, UnicodeError):  # a file system that refuses such names
        pass
    watch = PipeWatch(bad["named pipe"])
    yield root, bad, watch
    watch.stop()
    server.close()


ADVICE = {
    "broken symbolic link": "a broken symbolic link (its target does not exist): restore it",
    "link that loops": "a symbolic link that loops",
    "named pipe": "it is a named pipe (FIFO), not a regular file; give its content on standard",
    "broken link in a session folder": "a broken symbolic link",
    "socket": "it is a socket, not a regular file",
    "name that is not UTF-8": "its path is not valid UTF-8 (shown with \\x escapes): rename it",
}


def shown(path: Path) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


@pytest.mark.parametrize(
    "command", ["sessions", "count", "count --total", "timeline", "audit", "usage"]
)
def test_every_unreadable_path_is_reported_and_the_good_session_still_read(
    command: str, odd_root: tuple[Path, dict[str, Path], PipeWatch]
) -> None:
    root, bad, watch = odd_root
    result = run(*command.split(), str(root), "--format", "json")
    assert not watch.blocked
    assert result.exit_code == ExitCode.UNREADABLE
    warnings = result.stderr.splitlines()
    for what, path in bad.items():
        mine = [line for line in warnings if line.startswith(f"warning: {shown(path)}:0: ")]
        assert len(mine) == 1 and ADVICE[what] in mine[0], (what, warnings)
    assert len([line for line in warnings if ":0: " in line]) == len(bad), warnings
    if command == "sessions":
        rows = orjson.loads(result.stdout)
        status = {row["file"]: row["status"] for row in rows}
        assert status == {
            str(root / GOOD / "events.jsonl"): "ended",
            **{shown(path): "unreadable" for path in bad.values()},
        }
    if command == "count --total":
        alone = run("count", "--total", str(root / GOOD), "--format", "json")
        assert orjson.loads(result.stdout) == orjson.loads(alone.stdout)


def test_validate_finds_each_unreadable_path(
    odd_root: tuple[Path, dict[str, Path], PipeWatch],
) -> None:
    root, bad, watch = odd_root
    result = run("validate", str(root), "--format", "json")
    assert not watch.blocked
    assert result.exit_code == ExitCode.UNREADABLE
    found = {f["file"]: f["code"] for f in orjson.loads(result.stdout)["findings"]}
    assert found == {shown(path): "E117" for path in bad.values()}


def test_choosing_by_start_time_never_blocks_on_a_pipe(
    odd_root: tuple[Path, dict[str, Path], PipeWatch],
) -> None:
    root, _, watch = odd_root
    result = run("sessions", str(root), "--latest", "1", "--format", "json")
    assert not watch.blocked
    assert [row["session_id"] for row in orjson.loads(result.stdout)] == [GOOD]


def test_a_pipe_given_by_name_is_reported_not_waited_on(
    odd_root: tuple[Path, dict[str, Path], PipeWatch],
) -> None:
    _, bad, watch = odd_root
    result = run("count", str(bad["named pipe"]))
    assert not watch.blocked
    assert result.exit_code == ExitCode.UNREADABLE
    assert "named pipe (FIFO)" in result.stderr


def test_a_session_folder_we_may_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a folder without read and search permission gives (simulated: tests run as root,
    which ignores permissions): stat and open of its events file raise PermissionError."""
    root = tmp_path / "s"
    shutil.copytree(SAMPLES, root)
    locked = root / "b2e1d4f3-5c6e-4d7f-9081-1b2c3d4e5f60"
    real_stat, real_open = os.stat, os.open

    def denied(path: Any) -> bool:
        return Path(os.fsdecode(path)).is_relative_to(locked) and Path(path) != locked

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    def open_(path: Any, *args: Any, **kwargs: Any) -> Any:
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "open", open_)
    result = run("sessions", str(root), "--format", "json")
    assert result.exit_code == ExitCode.UNREADABLE
    events = locked / "events.jsonl"
    assert [x for x in result.stderr.splitlines() if "unreadable" in x] == [
        f"warning: {events}:0: unreadable: cannot read the file: permission denied; check its "
        "and its folder's permissions"
    ]
    rows = orjson.loads(result.stdout)
    assert {row["file"]: row["status"] for row in rows}[str(events)] == "unreadable"
    assert len(rows) == 11  # the ten others too


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_a_session_folder_without_permissions(tmp_path: Path) -> None:
    root = tmp_path / "s"
    shutil.copytree(SAMPLES / GOOD, root / GOOD)
    shutil.copytree(SAMPLES / GOOD, root / "locked")
    (root / "locked").chmod(0)
    try:
        result = run("validate", str(root), "--format", "json")
    finally:
        (root / "locked").chmod(0o755)
    assert result.exit_code == ExitCode.UNREADABLE
    found = orjson.loads(result.stdout)["findings"]
    assert [(f["file"], f["code"]) for f in found] == [
        (str(root / "locked" / "events.jsonl"), "E117")
    ]


def test_a_pyproject_that_is_not_utf8_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.copilot-logs]\nstrict = true\n# caf\xe9\n")
    monkeypatch.chdir(tmp_path)
    result = run("validate", str(SAMPLES / GOOD))
    assert result.exit_code == ExitCode.USAGE
    assert result.stderr.splitlines() == [
        f"Error: {tmp_path / 'pyproject.toml'}: not valid TOML (byte 39 is not UTF-8): save it "
        "as UTF-8"
    ]


def test_open_log_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(logfile.NotALogFile, match="named pipe"):
        logfile.open_log(fifo)  # returns at once: nothing writes to the pipe
    with pytest.raises(logfile.NotALogFile, match="folder"):
        logfile.open_log(tmp_path)


@pytest.mark.parametrize("buffered", [True, False])
def test_open_log_says_why_it_cannot_open_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buffered: bool
) -> None:
    """The kind of file is found after the open fails (a socket cannot be opened at all), and
    any other failure is the open's own."""
    monkeypatch.chdir(tmp_path)  # a socket's path is limited to about 100 bytes
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("s")
        with pytest.raises(logfile.NotALogFile, match="a socket, not a regular file"):
            logfile.open_log(Path("s"), buffered=buffered)
    with pytest.raises(FileNotFoundError):
        logfile.open_log(tmp_path / "missing", buffered=buffered)
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"x" * 70_000)
    with logfile.open_log(log, buffered=buffered) as stream:
        assert stream.read(65_536) + stream.read(10_000) == b"x" * 70_000


def test_a_sessions_folder_we_may_not_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "s"
    shutil.copytree(SAMPLES, root)
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path) == root:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = run("sessions", "--root", str(root))
    assert result.exit_code == ExitCode.UNREADABLE
    assert result.stderr.splitlines() == [
        f"Error: cannot list {root}: Permission denied; check the folder's permissions, or "
        "name the sessions to read"
    ]


def test_export_reports_unreadable_paths_and_never_waits_on_a_pipe(
    odd_root: tuple[Path, dict[str, Path], PipeWatch], tmp_path: Path
) -> None:
    root, bad, watch = odd_root
    result = run("export", str(tmp_path / "out"), str(root))
    assert not watch.blocked
    assert result.exit_code == ExitCode.UNREADABLE
    for path in bad.values():
        assert f"warning: {shown(path)}:0: unreadable: " in result.stderr
