"""``copilot-logs disk``: its bytes are du's, each category comes from a folder built for it, and
the hostile folders of issue 38 (links, pipes, sockets, unreadable folders, other users' files,
other mounts, hostile names, ``ulimit -n 64``, a root of ``/`` or ``$HOME``) are survived.

Truth comes from outside the code: ``du -sb`` and ``du -sB1`` on the same tree, the folders as
written by hand, processes started for the lock cases.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from copilot_logs.cli import main
from copilot_logs.commands import disk
from copilot_logs.commands.disk import locks
from copilot_logs.errors import ExitCode

from .conftest import PROJECT
from .folders import OLD, age, dead_pid, lock, new_id, scaffold, session, snapshot

RAW_CONTROL = "\x1b"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, ["disk", *args], catch_exceptions=False)


def rows(root: Path, *extra: str) -> dict[str, dict[str, Any]]:
    result = run("--root", str(root), "--format", "json", *extra)
    assert result.exit_code in (0, 3), result.stderr
    return {row["session_id"]: row for row in json.loads(result.stdout)["rows"]}


def du(flag: str, *paths: Path) -> list[int]:
    """What ``du -s<flag>`` says of each path, in order (hard links counted once over all)."""
    done = subprocess.run(["du", "-s" + flag, *map(str, paths)], capture_output=True, check=True)
    return [int(line.split(b"\t", 1)[0]) for line in done.stdout.splitlines()]


# --- bytes, as du counts them ---------------------------------------------------------------


def hard_and_sparse(root: Path) -> list[Path]:
    """Three sessions: hard links inside one and across two, sparse files, links, nesting."""
    first = session(root, 1)
    second = scaffold(root, 2)
    third = session(root, 3, "empty")
    big = first / "files" / "sparse.bin"
    with open(big, "wb") as out:
        out.seek(50 << 20)
        out.write(b"end")
    with open(second / "files" / "holes.bin", "wb") as out:
        out.write(b"x" * 5000)
        out.seek(1 << 20, os.SEEK_CUR)
        out.write(b"y" * 7000)
    (first / "files" / "deep" / "er").mkdir(parents=True)
    (first / "files" / "deep" / "er" / "data.txt").write_bytes(b"d" * 12345)
    os.link(first / "files" / "deep" / "er" / "data.txt", first / "files" / "again.txt")
    os.link(first / "events.jsonl", second / "files" / "log-copy.jsonl")  # across sessions
    (third / "files" / "to-root").symlink_to("/")
    (third / "research" / "notes.md").write_text("notes\n" * 300)
    return [first, second, third]


def test_bytes_equal_du_with_hard_links_and_sparse_files(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    folders = hard_and_sparse(root)
    found = rows(root)
    for flag, field in (("b", "bytes"), ("B1", "allocated_bytes")):
        # du counts a file of several links once over its arguments, in their order: the
        # folders in the order disk walks them (by name).
        assert [found[f.name][field] for f in folders] == du(flag, *folders), field
        parts = [p for p in disk.PARTS]
        suffix = "_bytes" if field == "bytes" else "_allocated"
        for folder in folders:
            assert sum(found[folder.name][p + suffix] for p in parts) == found[folder.name][field]
    # The parts, each as du counts that part alone (no link crosses them in the first folder).
    first = found[folders[0].name]
    assert first["files_bytes"] == du("b", folders[0] / "files")[0]
    assert first["log_allocated"] == du("B1", folders[0] / "events.jsonl")[0]
    # workspace.yaml, .workspace-fork.lock, index.md, tracking.json, events.jsonl, sparse.bin,
    # data.txt, again.txt: the non-folders of the first, by name (a hard link counts as a name)
    assert first["files"] == 8


TREES = st.recursive(
    st.lists(st.sampled_from(["file", "empty", "sparse", "link", "hard"]), max_size=4),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=12,
)


def build(folder: Path, spec: Any, made: list[Path], depth: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index, item in enumerate(spec):
        path = folder / f"{depth}-{index}"
        if isinstance(item, list):
            build(path, item, made, depth + 1)
        elif item == "file":
            path.write_bytes(b"z" * (index * 3001 + 1))
            made.append(path)
        elif item == "empty":
            path.write_bytes(b"")
        elif item == "sparse":
            with open(path, "wb") as out:
                out.seek((index + 1) << 16)
                out.write(b"!")
        elif item == "link":
            path.symlink_to("../" * (depth + 3))
        elif item == "hard" and made:
            os.link(made[-1], path)


@settings(max_examples=8)
@given(spec=TREES, spec2=TREES)
def test_any_tree_is_counted_as_du_counts_it(tmp_path_factory: Any, spec: Any, spec2: Any) -> None:
    root = tmp_path_factory.mktemp("trees") / "session-state"
    made: list[Path] = []
    first, second = scaffold(root, 1), scaffold(root, 2)
    build(first / "files", spec, made)
    build(second / "research", spec2, made)  # hard links may cross into the first
    found = rows(root)
    for flag, field in (("b", "bytes"), ("B1", "allocated_bytes")):
        assert [found[f.name][field] for f in (first, second)] == du(flag, first, second)


# --- categories -----------------------------------------------------------------------------


@contextmanager
def unrelated_process() -> Iterator[int]:
    """A live process started just now: the pid a reboot hands to something else."""
    child = subprocess.Popen(["sleep", "60"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_every_category_comes_from_its_fixture(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    age(scaffold(root, 1))
    log_missing = scaffold(root, 2)
    (log_missing / "files" / "notes.txt").write_text("the agent wrote this\n")
    age(log_missing)
    age(session(root, 3, "empty"))
    age(session(root, 4, "abandoned"))
    heavy = session(root, 5)
    (heavy / "files" / "DerivedData.bin").write_bytes(b"\1" * 300_000)
    age(heavy)
    age(session(root, 6))
    active = session(root, 7)
    lock(active, os.getpid())  # this process started before it wrote the lock
    dead = session(root, 8)
    lock(dead, dead_pid())
    with unrelated_process() as pid:
        reused = session(root, 9)
        lock(reused, pid, written=time.time() - 60)  # the lock is older than the process
        found = rows(root, "--heavy", "200K")
    category = {name: row["category"] for name, row in found.items()}
    assert category == {
        new_id(1): "scaffold",
        new_id(2): "log-missing",
        new_id(3): "empty",
        new_id(4): "abandoned",
        new_id(5): "heavy-files",
        new_id(6): "ok",
        new_id(7): "active",
        new_id(8): "stale-lock",
        new_id(9): "stale-lock",
    }
    assert found[new_id(6)]["lock"] == "none"
    assert found[new_id(8)]["why"].endswith("is not running")
    assert "started after the lock was written" in found[new_id(9)]["why"]
    assert (found[new_id(4)]["user_prompts"], found[new_id(4)]["replies"]) == (1, 0)
    assert (found[new_id(6)]["user_prompts"], found[new_id(6)]["llm_calls"]) == (1, 1)
    assert found[new_id(1)]["name"] == "Do it."
    assert found[new_id(1)]["host"] == "github/cli"


def test_a_lock_written_before_the_last_boot_is_stale(tmp_path: Path) -> None:
    folder = session(tmp_path / "session-state", 1)
    lock(folder, 1, written=time.time() - 3 * 365 * 86400)  # pid 1 runs, since the boot
    assert rows(tmp_path / "session-state")[folder.name]["lock"] == "stale"


def test_pid_1_since_the_boot_holds_a_lock_written_after_it(tmp_path: Path) -> None:
    folder = session(tmp_path / "session-state", 1)
    lock(folder, 1)  # pid 1 started at the boot, before this lock: it may hold it
    assert rows(tmp_path / "session-state")[folder.name]["lock"] == "active"


def test_a_lock_is_unknown_where_start_times_cannot_be_known(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    lock(session(root, 1), dead_pid())
    odd = session(root, 2)
    (odd / f"inuse.{os.getpid()}.lock").write_text("12\n")  # not its own pid
    nowhere = locks.Clock(boot=None, ticks=100)  # another OS: no /proc
    found = disk.survey([(root, None)], clock=nowhere)
    by_name = {folder.name: folder for folder in found.folders}
    assert by_name[new_id(1)].lock == "unknown"
    here = disk.survey([(root, None)])
    assert {f.name: f.lock for f in here.folders} == {new_id(1): "stale", new_id(2): "unknown"}


def test_a_network_file_system_makes_every_lock_unknown(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    device = os.stat(tmp_path).st_dev
    number = f"{os.major(device)}:{os.minor(device)}"
    line = f"36 35 {number} / {tmp_path} rw,relatime shared:1 - nfs4 server:/export rw\n"
    (proc / "self" / "mountinfo").write_text(line)
    assert locks.network_file_system(str(tmp_path), device, proc) is True
    (proc / "self" / "mountinfo").write_text(line.replace("nfs4", "ext4"))
    assert locks.network_file_system(str(tmp_path), device, proc) is False


# --- workspace.yaml ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "value"),
    [
        # what the CLI 1.0.102 wrote for three prompts (seen: docs/disk.md)
        ("name: '[rig:main] Do the rig''s task.'", "[rig:main] Do the rig's task."),
        (
            'name: "[rig:main] two\\nlines\\ttab \\"quoted\\" \\e[31mred: #x"',
            '[rig:main] two\nlines\ttab "quoted" \x1b[31mred: #x',
        ),
        (
            "name: '[rig:main] - dash: colon {brace} [x] & *star ! %'",
            "[rig:main] - dash: colon {brace} [x] & *star ! %",
        ),
        ("cwd: /tmp/disk-home/work", "/tmp/disk-home/work"),
        ('name: "\\x1b\\u2028\\U0001F600\\\\"', "\x1b\u2028\U0001f600\\"),
        ("name: |", None),  # a block scalar: not read
        ("name: 'not closed", None),
        ("name: 'one ' two'", None),
        ('name: "bad \\q escape"', None),
        ('name: "a " quote"', None),
        ("name: a: b", None),
        ("name: [a, b]", None),
        ("name:", None),
        ("name: ~", None),
    ],
)
def test_workspace_values_are_read_strictly(line: str, value: str | None) -> None:
    assert disk.parse_workspace([line], ["name", "cwd"])[line.split(":")[0]] == value


def test_a_key_given_twice_or_indented_is_not_guessed() -> None:
    assert disk.parse_workspace(["name: a", "name: b"], ["name"]) == {"name": None}
    assert disk.parse_workspace(["other:", "  name: inner"], ["name"]) == {"name": None}


# --- the hostile folders ----------------------------------------------------------------------


@pytest.mark.process
def test_pipes_and_sockets_are_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1)
    os.mkfifo(folder / "files" / "pipe")
    os.mkfifo(folder / "research" / "pipe2")
    other = scaffold(root, 3)
    (other / "workspace.yaml").unlink()
    os.mkfifo(other / "workspace.yaml")
    os.mkfifo(other / "events.jsonl")
    os.mkfifo(other / f"inuse.{os.getpid()}.lock")
    listener = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(folder / "files")  # a socket's path is limited to about 100 bytes
    listener.bind("sock")
    try:
        # Opening a pipe nobody writes to blocks for ever: a run that ends opened none.
        done = subprocess.run(
            [sys.executable, "-m", "copilot_logs", "disk", "--root", str(root), "--format", "json"],
            capture_output=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(PROJECT)},
        )
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    found = {row["session_id"]: row for row in json.loads(done.stdout)["rows"]}
    assert found[folder.name]["bytes"] == du("b", folder)[0]
    assert found[other.name]["category"] == "log-missing"  # its log is a pipe
    assert found[other.name]["lock"] == "unknown"  # its lock is a pipe
    assert found[other.name]["name"] is None


def test_links_are_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"b" * 100_000)
    folder = session(root, 1)
    (folder / "files" / "x").symlink_to("/")
    (folder / "files" / "y").symlink_to(outside)
    (root / new_id(2)).symlink_to(outside)  # a session folder that is a link
    found = rows(root)
    assert found[folder.name]["bytes"] == du("b", folder)[0]  # du -s does not follow either
    assert found[new_id(2)]["bytes"] == 0
    assert found[new_id(2)]["why"] == "a link, never followed"


def as_another_user(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a child process running as uid/gid 65534 (root only)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            result = fn(*args)
        except BaseException as error:
            result = {"error": repr(error)}
        try:
            os.write(write, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        data = stream.read()
    os.waitpid(child, 0)
    return json.loads(data)


def _survey_rows(root: str) -> list[dict[str, Any]]:
    found = disk.survey([(Path(root), None)])
    return [
        {"name": f.name, "partial": f.tree.partial, "why": f.refusal(), "bytes": f.tree.bytes}
        for f in found.folders
    ]


def test_an_unreadable_subfolder_makes_the_sizes_partial(tmp_path_factory: Any) -> None:
    if os.geteuid() != 0:
        root = tmp_path_factory.mktemp("unreadable") / "session-state"
        folder = session(root, 1)
        (folder / "files" / "secret").mkdir()
        (folder / "files" / "secret").chmod(0)
        try:
            found = _survey_rows(str(root))
        finally:
            (folder / "files" / "secret").chmod(0o700)
    else:
        # Root reads every folder: the survey runs as another user, over that user's tree.
        base = Path(tempfile_dir())
        root = base / "session-state"
        folder = session(root, 1)
        (folder / "files" / "secret").mkdir()
        (folder / "files" / "secret" / "x").write_text("x")
        # The child cannot read /root, where Python's modules are: import all it needs here.
        assert _survey_rows(str(root))[0]["partial"] is False
        for path in [base, *base.rglob("*")]:
            os.chown(path, 65534, 65534)
        (folder / "files" / "secret").chmod(0)
        try:
            found = as_another_user(_survey_rows, str(root))
        finally:
            shutil.rmtree(base)
    assert found == [
        {
            "name": folder.name,
            "partial": True,
            "why": "could not be read whole (files/secret)",
            "bytes": found[0]["bytes"],
        }
    ]


def tempfile_dir() -> str:
    import tempfile

    base = tempfile.mkdtemp(prefix="copilot-logs-disk-")
    os.chmod(base, 0o755)
    return base


def test_files_of_another_user_are_named(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1)
    (folder / "files" / "theirs.txt").write_text("not yours")
    if os.geteuid() != 0:
        pytest.skip("making a file another user's needs root")
    os.chown(folder / "files" / "theirs.txt", 12345, 12345)
    found = rows(root)
    assert found[folder.name]["why"] == "holds files of another user (files/theirs.txt)"


@pytest.mark.process
def test_another_mount_is_not_entered(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1)
    mount = folder / "files" / "mounted"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        (mount / "inside.bin").write_bytes(b"i" * 50_000)
        found = rows(root)
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    assert found[folder.name]["why"] == "holds another file system (files/mounted)"
    assert found[folder.name]["bytes"] < 50_000


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    evil = "evil\x1b]52;c;aGFja2Vk\x07\n::error::x\x1b[31m"
    root = tmp_path / f"state{evil}" / "session-state"
    folder = scaffold(root, 1)
    (folder / "workspace.yaml").write_text(
        f'id: {folder.name}\nname: "a\\nb\\e[31mred\\x07"\ncwd: /x\nclient_name: "\\e]0;t\\a"\n'
    )
    (folder / "files" / f"{evil}.txt").write_text("x")
    result = CliRunner().invoke(main, ["disk", "--root", str(root)], color=True)
    assert result.exit_code == 0, result.stderr
    for text in (result.stdout, result.stderr):
        assert "\x1b" not in text and "\x07" not in text
        assert not [line for line in text.splitlines() if line.lstrip().startswith("::")]
    found = rows(root)
    assert found[folder.name]["name"] == "a\nb\x1b[31mred\x07"  # exact in json
    csv = run("--root", str(root), "--format", "csv")
    assert "\x1b" not in csv.stdout and len(csv.stdout.splitlines()) == 2


@pytest.mark.parametrize("where", ["/", "home"])
def test_a_root_of_slash_or_home_is_refused(where: str, copilot_home: Path) -> None:
    root = "/" if where == "/" else str(copilot_home)  # HOME is copilot_home in the tests
    for command in (["disk"], ["prune", "--scaffolds"]):
        result = CliRunner().invoke(main, [*command, "--root", root])
        assert result.exit_code == ExitCode.USAGE, result.stderr
        assert "not a folder of sessions" in result.stderr
        result = CliRunner().invoke(main, [*command, root])
        assert result.exit_code == ExitCode.USAGE


def test_a_root_without_session_folders_is_said(tmp_path: Path) -> None:
    (tmp_path / "backup").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    result = run("--root", str(tmp_path))
    assert result.exit_code == 0
    assert "No session folders found in" in result.stderr


@pytest.mark.process
def test_deep_and_wide_trees_under_ulimit_n_64(tmp_path: Path) -> None:
    """One folder open at a time: a tree 300 deep and 40 sessions wide, under 64 descriptors."""
    root = tmp_path / "session-state"
    folders = [scaffold(root, number) for number in range(1, 41)]
    deep = folders[0] / "files"
    for level in range(300):
        deep = deep / f"d{level}"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("bottom")
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)); "
        "from copilot_logs.cli import main; sys.argv = ['copilot-logs', 'disk', '--root', "
        f"{str(root)!r}, '--format', 'json']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )
    assert done.returncode == 0, done.stderr
    found = {row["session_id"]: row for row in json.loads(done.stdout)["rows"]}
    assert [found[f.name]["bytes"] for f in folders] == du("b", *folders)


def test_beside_the_sessions_is_totalled_and_never_touched(tmp_path: Path) -> None:
    home = tmp_path / ".copilot"
    root = home / "session-state"
    age(scaffold(root, 1))
    (home / "session-store.db").write_bytes(b"s" * 4096)
    (home / "session-store.db-wal").write_bytes(b"w" * 10_000)
    (home / "logs").mkdir()
    (home / "logs" / "process-1.log").write_text("log\n")
    (root / ".session-operation-locks").mkdir()
    (root / ".session-operation-locks" / f"{new_id(1)}.lock").write_bytes(b"")
    before = snapshot(home)
    result = run("--root", str(root), "--format", "json")
    beside = {row["name"]: row for row in json.loads(result.stdout)["beside"]}
    assert beside["session-store.db-wal"]["bytes"] == 10_000
    assert beside["logs"]["bytes"] == du("b", home / "logs")[0]
    assert beside[".session-operation-locks"]["files"] == 1
    assert snapshot(home) == before


def test_sorting_and_min_size_and_by_category(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    small = scaffold(root, 1)
    age(small, OLD - 86400)
    big = session(root, 2)
    (big / "files" / "big.bin").write_bytes(b"b" * 200_000)
    age(big)
    result = run("--root", str(root), "--format", "json", "--sort", "age")
    assert [row["session_id"] for row in json.loads(result.stdout)["rows"]] == [
        small.name,
        big.name,
    ]
    result = run("--root", str(root), "--format", "json", "--min-size", "100K")
    assert [row["session_id"] for row in json.loads(result.stdout)["rows"]] == [big.name]
    result = run("--root", str(root), "--format", "json", "--by", "category")
    by = {row["category"]: row["sessions"] for row in json.loads(result.stdout)["rows"]}
    assert by == {"scaffold": 1, "ok": 1}


def test_a_lock_written_before_the_boot_is_stale_even_when_its_process_is_hidden(
    tmp_path: Path,
) -> None:
    """A process /proc does not show (hidepid) but alive: its start is unknown, yet a lock
    written before the boot cannot be its."""
    proc = tmp_path / "proc"
    proc.mkdir()
    clock = locks.Clock(boot=time.time() - 100, ticks=100, proc=proc)  # no /proc/<pid> here
    before_boot = int((time.time() - 1000) * 1e9)
    after_boot = int((time.time() - 10) * 1e9)
    pid = os.getpid()  # alive
    judged = locks.judge(
        f"inuse.{pid}.lock", f"{pid}\n".encode(), 1, before_boot, clock, time.time()
    )
    assert (judged.state, judged.why) == ("stale", "written before the last boot")
    judged = locks.judge(
        f"inuse.{pid}.lock", f"{pid}\n".encode(), 1, after_boot, clock, time.time()
    )
    assert judged.state == "unknown"


def test_every_lock_on_a_network_file_system_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "session-state"
    lock(session(root, 1), dead_pid())
    monkeypatch.setattr(disk.lock_files, "network_file_system", lambda path, device: True)
    [folder] = disk.survey([(root, None)]).folders
    assert (folder.lock, folder.lock_why) == ("unknown", "on a network file system")


def test_a_folder_swapped_while_it_is_walked_is_never_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``files`` becomes a link to a folder elsewhere just before ``files/deep`` is opened: the
    path then leads elsewhere through a link no O_NOFOLLOW sees (it is not the last part)."""

    root = tmp_path / "session-state"
    folder = scaffold(root, 1)
    (folder / "files" / "deep").mkdir()
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "big.bin").write_bytes(b"o" * 100_000)
    real_open = os.open

    def swapping(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("files/deep") and not (folder / "files").is_symlink():
            (folder / "files" / "deep").rmdir()
            (folder / "files").rmdir()
            (folder / "files").symlink_to(outside)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping)
    [found] = disk.survey([(root, None)]).folders
    assert found.tree.changed == ["files/deep"]
    assert found.tree.bytes < 100_000
    assert found.refusal() == "changed while it was read (files/deep)"


@pytest.mark.parametrize(
    ("given", "size"),
    [
        ("500M", 500 * 1024**2),
        ("1.5G", 3 * 1024**3 // 2),
        ("20GiB", 20 * 1024**3),
        ("10MB", 10 * 1000**2),
        ("5kb", 5000),
        (" .5G ", 1024**3 // 2),
        ("4096", 4096),
        ("1024P", 1024**6),
    ],
)
def test_a_size_is_read_as_du_reads_it(given: str, size: int) -> None:
    from copilot_logs.cli.options import parse_size

    assert parse_size(click.Context(main), click.Option(["--min-size"]), given) == size


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("5X", "'5X' is not a size like 500M, 1.5G, 20GiB, 10MB or 4096 (bytes)"),
        ("1e3", "'1e3' is not a size like 500M, 1.5G, 20GiB, 10MB or 4096 (bytes)"),
        ("2048P", "'2048P' is larger than the largest size taken, 1EiB"),
    ],
)
def test_a_size_that_is_none_is_a_usage_error(tmp_path: Path, given: str, why: str) -> None:
    result = run("--root", str(tmp_path), "--min-size", given)
    assert result.exit_code == ExitCode.USAGE
    assert why in result.stderr
