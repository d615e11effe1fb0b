"""``copilot-logs prune``: a dry run changes nothing, whatever it is asked; an apply does exactly
its plan, never what a rule keeps, checks everything again before each move, and leaves a
record; ``--delete`` never reaches outside the root.

Truth comes from the files on disk: snapshots of the tree (names, modes, contents, times), a
marker file outside the root, the sha256 of a log computed here, an export read back.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from copilot_logs.commands import disk
from copilot_logs.commands import prune as core
from copilot_logs.commands.prune import apply as applying
from copilot_logs.errors import ExitCode

from .folders import age, dead_pid, lock, new_id, scaffold, session, snapshot
from .test_disk import as_another_user, tempfile_dir, unrelated_process

TRASH = ".copilot-logs-trash"


def prune(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["prune", "--root", str(root), *args], catch_exceptions=False)


def planned(root: Path, *args: str) -> dict[str, Any]:
    result = prune(root, "--format", "json", *args)
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def mixed(root: Path) -> dict[str, Path]:
    """A root with a folder for every criterion, all old enough, plus a newest one."""
    made = {
        "scaffold": scaffold(root, 1),
        "empty": session(root, 2, "empty"),
        "abandoned": session(root, 3, "abandoned"),
        "ok": session(root, 4),
        "heavy": session(root, 5),
        "stale": session(root, 6),
    }
    (made["heavy"] / "files" / "big.bin").write_bytes(b"h" * 300_000)
    lock(made["stale"], dead_pid())
    for folder in made.values():
        age(folder)
    made["newest"] = scaffold(root, 7)
    age(made["newest"], time.time() - 3600)
    return made


EVERY = [
    ["--scaffolds"],
    ["--empty"],
    ["--abandoned"],
    ["--stale-locks"],
    ["--older-than", "1d"],
    ["--larger-than", "100K"],
    ["--files-larger-than", "100K"],
    ["--scaffolds", "--empty", "--abandoned", "--stale-locks", "--older-than", "0", "--delete"],
    ["--empty-trash"],
]


@pytest.mark.parametrize("criterion", EVERY, ids=lambda args: " ".join(args))
def test_a_dry_run_leaves_the_tree_identical(tmp_path: Path, criterion: list[str]) -> None:
    root = tmp_path / "session-state"
    mixed(root)
    (root / TRASH / "20260101T000000Z-0000abcd" / new_id(9)).mkdir(parents=True)
    before = snapshot(tmp_path)
    for extra in ([], ["--keep-newest", "0", "--quiet-for", "0"], ["--format", "json"]):
        result = prune(root, *criterion, *extra)
        assert result.exit_code == 0, result.stderr
        assert snapshot(tmp_path) == before
    assert "Nothing was removed" in prune(root, *criterion).stdout


def test_each_criterion_picks_its_folders(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    made = mixed(root)
    picks = {
        "--scaffolds": {"scaffold"},
        "--empty": {"empty"},
        "--abandoned": {"abandoned"},
        "--stale-locks": {"stale"},
        "--larger-than": {"heavy"},
        "--files-larger-than": {"heavy"},
    }
    names = {folder.name: key for key, folder in made.items()}
    for option, wanted in picks.items():
        extra = ["200K"] if "larger" in option else []
        rows = planned(root, option, *extra, "--keep-newest", "1")["rows"]
        assert {names[row["session_id"]] for row in rows} == wanted, option
    actions = {
        row["action"]
        for row in planned(root, "--files-larger-than", "200K", "--keep-newest", "1")["rows"]
    }
    assert actions == {"files"}
    old = planned(root, "--older-than", "2d", "--keep-newest", "0")["rows"]
    old = {names[row["session_id"]] for row in old}
    assert old == set(made) - {"newest"}  # three days quiet, all but the newest


def test_apply_needs_an_export_or_no_export(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    mixed(root)
    before = snapshot(tmp_path)
    for args in (["--apply"], ["--apply", "--export-to", str(tmp_path / "x"), "--no-export"], []):
        result = prune(root, "--scaffolds", *args) if args else prune(root)
        assert result.exit_code == ExitCode.USAGE, (args, result.stderr)
        assert result.stdout == ""
    assert snapshot(tmp_path) == before


def test_apply_moves_exactly_the_plan_into_the_trash_with_a_record(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    made = mixed(root)
    log = (made["empty"] / "events.jsonl").read_bytes()
    whole = snapshot(made["empty"])
    plan = planned(root, "--scaffolds", "--empty")
    result = prune(root, "--scaffolds", "--empty", "--apply", "--no-export", "--format", "json")
    assert result.exit_code == 0, result.stderr
    done = json.loads(result.stdout)
    assert [row["session_id"] for row in done["rows"]] == [
        row["session_id"] for row in plan["rows"]
    ]
    assert {row["status"] for row in done["rows"]} == {"done"}
    gone = {made["scaffold"].name, made["empty"].name}
    assert {p.name for p in root.iterdir()} == {TRASH, *(f.name for f in made.values())} - gone
    [record_path] = (root / TRASH).glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["format"] == "copilot-logs-prune"
    entries = {entry["session_id"]: entry for entry in record["done"]}
    assert set(entries) == gone
    assert entries[made["empty"].name]["log_sha256"] == hashlib.sha256(log).hexdigest()
    assert entries[made["empty"].name]["category"] == "empty"
    moved = Path(entries[made["empty"].name]["to"])
    assert moved.parent.parent == root / TRASH
    assert snapshot(moved) == whole  # moved whole, as it was
    moved.rename(root / made["empty"].name)  # undo: rename it back
    assert snapshot(root / made["empty"].name) == whole


def test_the_export_comes_first_and_keeps_what_the_archive_held(tmp_path: Path) -> None:
    import polars as pl

    root = tmp_path / "session-state"
    made = mixed(root)
    archive = tmp_path / "archive"
    first = prune(root, "--empty", "--keep-newest", "1", "--apply", "--export-to", str(archive))
    assert first.exit_code == 0, first.stderr
    second = prune(
        root, "--abandoned", "--keep-newest", "1", "--apply", "--export-to", str(archive)
    )
    assert second.exit_code == 0, second.stderr
    sessions = pl.read_parquet(archive / "sessions" / "**" / "*.parquet", hive_partitioning=True)
    assert set(sessions["session_id"]) == {made["empty"].name, made["abandoned"].name}
    assert not (root / made["abandoned"].name).exists()


def test_a_session_the_export_does_not_hold_whole_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "session-state"
    made = mixed(root)
    from copilot_logs.commands import export

    monkeypatch.setattr(export, "exported_whole", lambda out, sources: set())
    archive = str(tmp_path / "archive")
    result = prune(
        root, "--empty", "--keep-newest", "1", "--apply", "--export-to", archive, "--format", "json"
    )
    assert result.exit_code == ExitCode.FAILED
    [row] = json.loads(result.stdout)["rows"]
    assert row["status"] == "skipped"
    assert row["skipped"] == "its log is not in the export whole"
    assert (made["empty"] / "events.jsonl").is_file()


def test_what_a_rule_keeps_is_never_selected(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    active = scaffold(root, 1)
    age(active)
    lock(active, os.getpid())  # written after this process started: active
    unknown = scaffold(root, 2)
    (unknown / "inuse.77.lock").write_text("not a pid\n")
    age(unknown, time.time() - 7 * 86400)
    fresh = scaffold(root, 3)  # written just now
    link_target = scaffold(tmp_path / "elsewhere", 4)
    age(link_target)
    (root / new_id(5)).symlink_to(link_target)
    (root / "not-a-session").mkdir()
    age(scaffold(root, 6))
    plan = planned(root, "--scaffolds", "--older-than", "0", "--keep-newest", "3")
    kept = {row["session_id"]: row["kept"] for row in plan["kept"]}
    assert kept[active.name].startswith("in use: pid")
    assert kept[unknown.name].startswith("its lock cannot be judged")
    assert kept[fresh.name] == "written within --quiet-for"
    assert kept[new_id(5)] == "a link, never followed"
    # The three newest: the fresh one, the active one (its lock is new), then this one.
    assert kept[new_id(6)] == "one of the 3 newest"
    assert plan["rows"] == []
    assert "not-a-session" not in json.dumps(plan)


def test_other_users_files_and_other_mounts_are_never_selected(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file another user's needs root")
    root = tmp_path / "session-state"
    theirs = scaffold(root, 1)
    os.chown(theirs / "files", 12345, 12345)
    age(theirs)
    whose = scaffold(root, 2)
    os.chown(whose, 12345, 12345)
    age(whose)
    kept = {
        row["session_id"]: row["kept"]
        for row in planned(root, "--older-than", "0", "--keep-newest", "0")["kept"]
    }
    assert kept == {
        theirs.name: "holds files of another user (files)",
        whose.name: "holds files of another user (.)",
    }


def _plan_as_user(root: str) -> list[list[str]]:
    survey = disk.survey([(Path(root), None)])
    made = core.plan(survey, {}, core.Criteria(older_than=timedelta(0), keep_newest=0), time.time())
    return [[held.folder.name, held.reason] for held in made.held] + [
        [i.folder.name, "picked"] for i in made.items
    ]


def test_a_folder_not_read_whole_is_never_selected(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("as root only: the plan runs as another user over that user's tree")
    base = Path(tempfile_dir())
    try:
        root = base / "session-state"
        folder = scaffold(root, 1)
        (folder / "files" / "secret").mkdir()
        age(folder)
        assert _plan_as_user(str(root))  # imports what the child needs (it cannot read /root)
        for path in [base, *base.rglob("*")]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
        (folder / "files" / "secret").chmod(0)
        assert as_another_user(_plan_as_user, str(root)) == [
            [folder.name, "could not be read whole (files/secret)"]
        ]
    finally:
        shutil.rmtree(base)


def test_a_marker_outside_the_root_survives_delete(tmp_path: Path) -> None:
    # The links lead only to a folder made here, never to / (the issue's `files/x -> /`): a
    # removal that followed links would then empty the machine running the tests, as a
    # mutation of this code once did to /etc (docs/development.md, the ledger). The walk
    # of disk, which only reads, is tested with links to / (tests/test_disk.py).
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "marker.txt"
    marker.write_text("keep me")
    root = tmp_path / "session-state"
    folder = session(root, 1, "empty")
    (folder / "files" / "to-outside").symlink_to(outside)
    (folder / "files" / "to-marker").symlink_to(marker)
    age(folder)
    (root / new_id(2)).symlink_to(outside)  # a session folder that is a link
    before = snapshot(outside)
    result = prune(
        root,
        "--empty",
        "--older-than",
        "0",
        "--keep-newest",
        "0",
        "--apply",
        "--no-export",
        "--delete",
    )
    assert result.exit_code == 0, result.stderr
    assert not folder.exists()
    assert snapshot(outside) == before
    assert (root / new_id(2)).is_symlink()
    [record] = (root / TRASH).glob("*.json")
    assert json.loads(record.read_text())["done"][0]["deleted"] is True
    assert not [p for p in (root / TRASH).iterdir() if p.is_dir()]  # the run folder went too


def _plan(root: Path, clock: Any = None, **criteria: Any) -> tuple[disk.Survey, core.Plan]:
    survey = disk.survey([(root, None)], clock=clock)
    figures = {}
    for folder in survey.folders:
        figures[str(folder.log_path)] = {"user_prompts": 0, "llm_calls": 0, "replies": 0}
    return survey, core.plan(survey, figures, core.Criteria(keep_newest=0, **criteria), time.time())


def test_a_subfolder_swapped_for_a_link_between_plan_and_apply_is_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "marker.txt").write_text("keep me")
    root = tmp_path / "session-state"
    folder = scaffold(root, 1)
    age(folder)
    survey, plan = _plan(root, scaffolds=True)
    assert [item.folder.name for item in plan.items] == [folder.name]
    (folder / "files").rmdir()
    (folder / "files").symlink_to(outside)  # swapped after the plan
    os.utime(folder, (time.time() - 86400,) * 2)
    done = applying.apply(plan, survey, delete=True)
    assert done.done == []
    assert [skip.why for skip in done.skipped] == [
        "changed since the plan (written to, or something in it replaced)"
    ]
    assert (outside / "marker.txt").read_text() == "keep me"
    assert (folder / "files").is_symlink()


def test_a_session_resumed_during_the_apply_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1, "empty")
    age(folder)
    survey, plan = _plan(root, empty=True)
    real = os.rename
    seen: list[str] = []

    def resumed_first(src: Any, dst: Any, **kwargs: Any) -> None:
        # The CLI resumes the session just between the last check and the move: its lock
        # and a new line land in the folder, then the folder moves.
        if not seen:
            seen.append(str(src))
            lock(folder, os.getpid())
            with open(folder / "events.jsonl", "ab") as log:
                log.write(b'{"type":"session.resume"}\n')
        real(src, dst, **kwargs)

    monkeypatch.setattr(applying.os, "rename", resumed_first)
    done = applying.apply(plan, survey)
    assert done.done == []
    assert done.skipped[0].why.startswith("taken during the move, put back: in use now: pid")
    assert (folder / "events.jsonl").is_file()  # back in its place
    assert not [p for p in (root / TRASH).iterdir() if p.is_dir() and any(p.iterdir())]


def test_a_session_resumed_between_plan_and_apply_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1, "empty")
    age(folder)
    survey, plan = _plan(root, empty=True)
    lock(folder, os.getpid())
    done = applying.apply(plan, survey)
    assert done.done == []
    assert done.skipped[0].why.startswith("in use now: pid")


def test_stale_locks_are_unlinked_after_judging_them_again(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    dead = session(root, 1)
    dead_lock = lock(dead, dead_pid())
    with unrelated_process() as pid:
        reused = session(root, 2)
        reused_lock = lock(reused, pid, written=time.time() - 60)
        live = session(root, 3)
        for folder in (dead, reused, live):
            age(folder)
        live_lock = lock(live, os.getpid())  # written after this process started: held
        args = ("--stale-locks", "--quiet-for", "0", "--format", "json")
        assert planned(root, *args)["kept"] == []  # the live one is not even picked
        result = prune(root, *args, "--apply", "--no-export")
    assert result.exit_code == 0, result.stderr
    unlinked = {row["session_id"]: row["unlinked"] for row in json.loads(result.stdout)["rows"]}
    assert unlinked == {
        dead.name: [dead_lock.name, dead_lock.with_suffix(".hold").name],
        reused.name: [reused_lock.name, reused_lock.with_suffix(".hold").name],
    }
    for path in (dead_lock, reused_lock):
        assert not path.exists() and not path.with_suffix(".hold").exists()
    assert live_lock.exists()
    assert (dead / "events.jsonl").is_file()  # the sessions stay


def test_a_lock_rewritten_between_plan_and_apply_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1)
    path = lock(folder, dead_pid())
    age(folder)
    survey, plan = _plan(root, stale_locks=True)
    path.unlink()
    lock(folder, int(path.name.split(".")[1]))  # the same name, another file
    done = applying.apply(plan, survey)
    assert [skip.why for skip in done.skipped] == ["its lock changed since the plan"]
    assert path.exists()


def test_files_larger_than_moves_only_files(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    folder = session(root, 1)
    (folder / "files" / "DerivedData").mkdir()
    (folder / "files" / "DerivedData" / "big.bin").write_bytes(b"d" * 300_000)
    age(folder)
    log = (folder / "events.jsonl").read_bytes()
    result = prune(
        root, "--files-larger-than", "200K", "--keep-newest", "0", "--apply", "--no-export"
    )
    assert result.exit_code == 0, result.stderr
    assert (folder / "events.jsonl").read_bytes() == log
    assert list((folder / "files").iterdir()) == []
    [moved] = (root / TRASH).glob(f"*/{folder.name}.files")
    assert (moved / "DerivedData" / "big.bin").stat().st_size == 300_000


def test_empty_trash_removes_the_runs_and_keeps_the_records(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    age(scaffold(root, 1))
    age(scaffold(root, 2))
    assert prune(root, "--scaffolds", "--keep-newest", "0", "--apply", "--no-export").exit_code == 0
    records = sorted((root / TRASH).glob("*.json"))
    assert len(records) == 1 and [p for p in (root / TRASH).iterdir() if p.is_dir()]
    dry = planned(root, "--empty-trash")
    assert [run["name"] for run in dry["trash_runs"]] == [records[0].stem]
    result = prune(root, "--empty-trash", "--apply", "--no-export")
    assert result.exit_code == 0, result.stderr
    assert list((root / TRASH).iterdir()) == records


def test_a_trash_that_is_a_link_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    age(scaffold(root, 1))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / TRASH).symlink_to(elsewhere)
    result = prune(root, "--scaffolds", "--keep-newest", "0", "--apply", "--no-export")
    assert result.exit_code == ExitCode.UNREADABLE
    assert "must be a folder, not a link" in result.stderr
    assert list(elsewhere.iterdir()) == []
    assert (root / new_id(1)).is_dir()


def test_delete_is_refused_where_removal_follows_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "session-state"
    age(scaffold(root, 1))
    monkeypatch.setattr(shutil.rmtree, "avoids_symlink_attacks", False)
    for flag in ("--delete", "--empty-trash"):
        result = prune(root, "--scaffolds", "--keep-newest", "0", flag, "--apply", "--no-export")
        assert result.exit_code == ExitCode.USAGE
        assert "resist symlink attacks" in result.stderr
    assert (root / new_id(1)).is_dir()


def test_a_root_without_session_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "backup").mkdir()
    result = prune(tmp_path, "--older-than", "0", "--apply", "--no-export")
    assert result.exit_code == ExitCode.USAGE
    assert "holds no session folder" in result.stderr
    assert (tmp_path / "backup").is_dir()


def test_the_dry_run_table_says_what_and_why(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    mixed(root)
    result = prune(root, "--scaffolds", "--stale-locks")
    assert "--scaffolds" in result.stdout and "--stale-locks" in result.stdout
    assert "Nothing was removed" in result.stdout
    subprocess.run(["true"], check=True)


def test_a_lock_is_judged_again_before_it_is_unlinked(tmp_path: Path) -> None:
    """Planned as stale (a clock that says its process started after it), found held when
    judged again with this machine's clock: it stays."""
    from copilot_logs.commands.disk import locks

    root = tmp_path / "session-state"
    folder = session(root, 1)
    age(folder)
    path = lock(folder, os.getpid())  # held by this process
    fake = tmp_path / "proc"
    (fake / str(os.getpid())).mkdir(parents=True)
    fields = ["S", *["0"] * 18, str(10**9)]  # started long after the boot: after the lock
    (fake / str(os.getpid()) / "stat").write_text(f"{os.getpid()} (python) {' '.join(fields)}\n")
    clock = locks.Clock(boot=time.time() - 3600, ticks=100, proc=fake)
    survey, plan = _plan(root, clock, stale_locks=True, quiet_for=timedelta(0))
    assert [item.action for item in plan.items] == ["locks"]
    done = applying.apply(plan, survey)
    assert [skip.why for skip in done.skipped] == [
        f"its lock is no longer stale: pid {os.getpid()} has run since before the lock was written"
    ]
    assert path.exists()
