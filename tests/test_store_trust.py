"""The store is used only when it is the user's own, and nothing but its own files is ever
opened, chmod-ed or deleted there (docs/cache.md, "What the store trusts")."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result

from copilot_logs import store
from copilot_logs.cli import main
from copilot_logs.store import SWEPT

from .conftest import SAMPLES
from .test_store import header_of, sample_sources, with_header

SAMPLE_TOTAL = 53
"""``count --total`` of sample_sessions/ (sample_sessions/README.md)."""
OTHER_UID = 54321

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="owners and modes: POSIX")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


def store_warnings(result: Result) -> list[str]:
    return [line for line in warnings(result) if "(docs/cache.md)" in line]


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Each thing in a folder: its mode, owner and (for a regular file) its bytes."""
    seen = {}
    for path in sorted(folder.iterdir()):
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        seen[path.name] = (info.st_mode, info.st_uid, data)
    return seen


def users_folder(tmp_path: Path) -> Path:
    """A folder of the user's own files, some named as the store names its files."""
    folder = tmp_path / "my-documents"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "thesis.tex").write_bytes(b"\\chapter{One}")
    (folder / ("0" * 32 + ".entry")).write_bytes(b"not an entry")
    stale = folder / ".k3j_9x2a.tmp"
    stale.write_bytes(store.MAGIC)
    os.utime(stale, (1, 1))
    return folder


def warm_store() -> None:
    result = run("count", "--total", str(SAMPLES))
    assert (result.exit_code, result.stdout.strip()) == (0, str(SAMPLE_TOTAL))


# --- A link is never followed ------------------------------------------------------------------


@pytest.mark.parametrize("linked", ["store", "copilot-logs"])
def test_a_symlinked_store_folder_is_never_followed(linked: str, tmp_path: Path) -> None:
    mine = users_folder(tmp_path)
    before = snapshot(mine)
    where = store.folder()
    link = where if linked == "store" else where.parent
    link.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    link.symlink_to(mine, target_is_directory=True)
    for args in (
        ["count", "--total", str(SAMPLES)],
        ["sessions", "--format", "json", str(SAMPLES)],
        ["cache", "info", "--format", "json"],
        ["cache", "clear"],
    ):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert len(store_warnings(result)) == 1, result.stderr
        assert "symbolic link" in store_warnings(result)[0]
        if args[:2] == ["count", "--total"]:
            assert result.stdout.strip() == str(SAMPLE_TOTAL)
        if args[:2] == ["cache", "info"]:
            held = msgspec.json.decode(result.stdout)
            assert (held["entries"], held["trusted"]) == (0, False)
        assert snapshot(mine) == before  # no file added, changed, chmod-ed or deleted
        assert stat.S_IMODE(mine.stat().st_mode) == 0o755
    assert link.is_symlink()


@pytest.mark.process
def test_an_entry_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    log = tmp_path / "s" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(sorted(SAMPLES.rglob("*.jsonl"))[0].read_bytes())
    warm_store()
    entry = store.entry_path(log)
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.symlink_to("/dev/zero")
    result = subprocess.run(
        [sys.executable, "-m", "copilot_logs", "count", "--total", str(log)],
        capture_output=True,
        timeout=60,
        env={**os.environ},
    )
    assert result.returncode == 0, result.stderr
    assert entry.is_symlink() and os.readlink(entry) == "/dev/zero"


# --- Another user's store, or one others can write, is not trusted ------------------------------


def forge(count: int) -> None:
    """Make every entry claim ``count`` LLM calls (a valid header: only trust can tell)."""
    for entry in sorted(store.folder().glob("*.entry")):
        header, body = header_of(entry)
        figures = {**header["figures"], "llm_calls": count}
        entry.write_bytes(with_header({**header, "figures": figures}, body))


def test_a_forged_store_is_served_only_when_it_is_the_users_own() -> None:
    """The control: an entry of the user's own is served as it is (the forgery shows), so the
    tests below prove that trust, not something else, keeps it out."""
    warm_store()
    forge(999)
    assert run("count", "--total", str(SAMPLES)).stdout.strip() == str(999 * len(sample_sources()))


@pytest.mark.parametrize(
    "distrust",
    [
        "store owned by another user",
        "copilot-logs owned by another user",
        "store writable by others",
        "store writable by its group",
        "cache folder writable by others",
        "cache folder of another user",
    ],
)
def test_a_store_that_is_not_the_users_own_is_not_trusted(distrust: str) -> None:
    warm_store()
    forge(999)
    where = store.folder()
    target = {"store": where, "copilot-logs": where.parent, "cache": where.parent.parent}[
        distrust.split()[0]
    ]
    if "another user" in distrust:
        os.chown(target, OTHER_UID, OTHER_UID)
    else:
        target.chmod(0o770 if "group" in distrust else 0o777)
    before = snapshot(where)
    for args in (["count", "--total", str(SAMPLES)], ["count", "--total", str(SAMPLES)]):
        result = run(*args)
        assert (result.exit_code, result.stdout.strip()) == (0, str(SAMPLE_TOTAL))
        assert len(store_warnings(result)) == 1, result.stderr
    assert snapshot(where) == before  # neither used nor changed


def test_a_sticky_shared_cache_folder_is_trusted(tmp_path: Path) -> None:
    """A cache folder like /tmp (others may write, the sticky bit keeps them from renaming
    what is ours): the user's own store in it is used."""
    where = store.folder()
    where.parent.parent.mkdir(parents=True)
    where.parent.parent.chmod(0o1777)
    warm_store()
    forge(999)
    result = run("count", "--total", str(SAMPLES))
    assert result.stdout.strip() == str(999 * len(sample_sources()))
    assert store_warnings(result) == []


@pytest.mark.parametrize("distrust", ["owned by another user", "writable by others"])
def test_an_entry_that_is_not_the_users_own_is_neither_served_nor_replaced(
    distrust: str,
) -> None:
    warm_store()
    forge(999)
    entries = sorted(store.folder().glob("*.entry"))
    foreign = entries[0]
    for entry in entries[1:]:
        entry.unlink()
    if distrust == "owned by another user":
        os.chown(foreign, OTHER_UID, OTHER_UID)
    else:
        foreign.chmod(0o666)
    forged = foreign.read_bytes()
    for args in (["count", "--total", str(SAMPLES)], ["sessions", str(SAMPLES)]):
        result = run(*args)
        assert result.exit_code == 0
        assert len(store_warnings(result)) == 1, result.stderr
    assert run("count", "--total", str(SAMPLES)).stdout.strip() == str(SAMPLE_TOTAL)
    assert foreign.read_bytes() == forged  # not ours to replace or delete
    os.utime(store.folder() / SWEPT, (1, 1))
    run("cache", "clear")
    assert foreign.read_bytes() == forged
    assert len(list(store.folder().glob("*.entry"))) == 1


def test_a_readable_store_of_the_users_own_is_made_private_again() -> None:
    warm_store()
    store.folder().chmod(0o755)
    store.folder().parent.chmod(0o755)
    run("sessions", str(SAMPLES), "--format", "json")  # a run that writes an entry
    assert stat.S_IMODE(store.folder().stat().st_mode) == 0o700
    assert stat.S_IMODE(store.folder().parent.stat().st_mode) == 0o700


# --- Things in the store that we did not put there ----------------------------------------------


@pytest.mark.process
def test_things_we_did_not_put_in_the_store_are_never_opened_or_deleted(tmp_path: Path) -> None:
    """A folder named like an entry (of a log read now, and not), a named pipe and a link to
    /dev/zero as entries, stray folders and files: each command answers right and on time,
    and every one of them is still there, untouched, after the store was tidied."""
    root = tmp_path / "root"
    logs = []
    for path in sorted(SAMPLES.rglob("*.jsonl"))[:4]:
        copy = root / path.parent.name / "events.jsonl"
        copy.parent.mkdir(parents=True)
        copy.write_bytes(path.read_bytes())
        logs.append(copy)
    where = store.folder()
    where.mkdir(parents=True)
    where.parent.chmod(0o700)
    where.chmod(0o700)
    store.entry_path(logs[0]).mkdir()
    os.mkfifo(store.entry_path(logs[1]))
    store.entry_path(logs[2]).symlink_to("/dev/zero")
    (where / ("f" * 32 + ".entry")).mkdir()
    (where / "subfolder").mkdir()
    (where / "notes.txt").write_bytes(b"mine")
    strays = snapshot(where)
    expected = run("count", "--total", "--no-cache", str(root)).stdout
    for _ in range(2):
        for command in (["count", "--total"], ["sessions", "--format", "json"], ["validate"]):
            (where / SWEPT).unlink(missing_ok=True)  # every run tidies the whole store
            done = subprocess.run(
                [sys.executable, "-m", "copilot_logs", *command, str(root)],
                capture_output=True,
                timeout=120,
            )
            assert b"Traceback" not in done.stderr, done.stderr
            assert done.returncode == 0, done.stderr
            if command == ["count", "--total"]:
                assert done.stdout.decode() == expected
    left = snapshot(where)
    assert {name: left[name] for name in strays} == strays
    result = run("cache", "clear")
    assert result.exit_code == 0
    assert snapshot(where) == strays


# --- Tidying: only entries of logs that are gone, and not on every run ---------------------------


def test_the_tidying_keeps_another_builds_entries_of_logs_that_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second venv (another code stamp) that reads one log replaces that log's entry and
    leaves the others: they are this build's, for logs that exist."""
    root = tmp_path / "root"
    for path in sorted(SAMPLES.rglob("*.jsonl")):
        copy = root / path.parent.name / "events.jsonl"
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())
    run("count", "--total", str(root))
    before = sorted(store.folder().glob("*.entry"))
    assert len(before) == len(sample_sources())
    store.code_stamp.cache_clear()
    monkeypatch.setattr(store.entry, "code_stamp", lambda: "another build")
    monkeypatch.setattr(store, "code_stamp", lambda: "another build")
    one = sorted(root.rglob("events.jsonl"))[0]
    gone = sorted(root.rglob("events.jsonl"))[1]
    gone.unlink()
    os.utime(store.folder() / SWEPT, (1, 1))  # the daily sweep is due
    result = run("count", "--total", str(one))
    assert result.exit_code == 0
    after = sorted(store.folder().glob("*.entry"))
    assert after == [entry for entry in before if entry != store.entry_path(gone)]
    assert header_of(store.entry_path(one))[0]["code"] == "another build"


def test_a_run_that_reads_does_not_read_every_entrys_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    for path in sorted(SAMPLES.rglob("*.jsonl")):
        copy = root / path.parent.name / "events.jsonl"
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())
    run("count", "--total", str(root))
    opened: list[str] = []
    real = store._first_bytes

    def spy(path: str, count: int) -> bytes | None:
        opened.append(path)
        return real(path, count)

    monkeypatch.setattr(store, "_first_bytes", spy)
    changed = sorted(root.rglob("events.jsonl"))[0]
    changed.write_bytes(changed.read_bytes() + b"\n")
    assert run("count", "--total", str(root)).exit_code == 0
    assert opened == []  # the sweep ran with the first run: not again today
    os.utime(store.folder() / SWEPT, (1, 1))
    changed.write_bytes(changed.read_bytes() + b"\n")
    assert run("count", "--total", str(root)).exit_code == 0
    assert len(opened) == len(sample_sources())


# --- cache clear says what it did ---------------------------------------------------------------


def test_cache_clear_reports_only_what_it_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    warm_store()
    where = store.folder()
    (where / "notes.txt").write_bytes(b"mine")
    stuck = sorted(where.glob("*.entry"))[0]
    real = os.unlink

    def unlink(path: str | Path, *args: object, **kwargs: object) -> None:
        if Path(path) == stuck:
            raise PermissionError(1, "Operation not permitted")
        real(path)

    monkeypatch.setattr(os, "unlink", unlink)
    result = run("cache", "clear")
    removed = len(sample_sources()) - 1
    assert f"Removed {removed} entries (" in result.stderr
    assert result.exit_code == 3
    assert [line for line in result.stderr.splitlines() if line.startswith("Error: ")] == [
        f"Error: could not remove {stuck} from the store; check the folder's permissions, or "
        "remove them yourself"
    ]
    assert sorted(p.name for p in where.iterdir()) == sorted([stuck.name, "notes.txt"])
