"""`copilot-logs export` and its folder: one export at a time, a damaged file of an earlier
export found and written again, and whatever cannot be written there one clear `Error:` line
with a documented exit code, never a traceback, never a temporary file left behind."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner, Result

import copilot_logs as cl
from copilot_logs import api, modes
from copilot_logs.cli import main
from copilot_logs.commands import export

from .conftest import SAMPLES
from .test_export import assert_same_tables, scan


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    copy = tmp_path / "logs"
    shutil.copytree(SAMPLES, copy)
    return copy


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def errors(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error: ")]


def temporaries(out: Path) -> list[Path]:
    return sorted(path for path in out.rglob("*") if path.name.endswith(".tmp"))


def contents(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def logs_of(samples: Path) -> list[Path]:
    return sorted(samples.rglob("*.jsonl"))


def rows_once(out: Path, samples: Path) -> None:
    """Each table holds every log's rows exactly once: what a fresh read gives."""
    assert_same_tables(out, cl.frames(cl.read(samples)))


# --- One export at a time ------------------------------------------------------------------------


def export_process(out: Path, samples: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "copilot_logs", "export", str(out), str(samples), "--no-cache"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.process
@pytest.mark.xdist_group("concurrency")
def test_an_export_waits_while_another_holds_the_folder(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with export.exporting(out):
        waiting = export_process(out, samples)
        assert waiting.stderr is not None
        first = waiting.stderr.readline()  # blocks until it says it waits (or it ends)
        assert first.startswith(b"Waiting for another export into "), first
        assert waiting.poll() is None  # still waiting: nothing written under our lock
        assert not (out / export.MANIFEST).exists()
    _, rest = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, rest
    rows_once(out, samples)


@pytest.mark.process
@pytest.mark.xdist_group("concurrency")
def test_exports_started_together_leave_each_row_once(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    runs = [export_process(out, samples) for _ in range(4)]
    for process in runs:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0 and b"Traceback" not in err, err
    rows_once(out, samples)
    summaries = run("export", out, samples)
    assert "0 written, 11 unchanged, 0 removed." in summaries.stderr


def test_files_left_by_exports_that_raced_are_removed(samples: Path, tmp_path: Path) -> None:
    """An export before the lock could leave a second copy of every row in files that the
    manifest does not list; the next export removes them (they are named as export names its
    files: no other file is touched)."""
    out = tmp_path / "out"
    api.export(out, samples)
    listed = sorted(out.rglob("part-*.parquet"))
    for path in listed:
        shutil.copy(path, path.with_name(f"part-{'a' * 16}-{'b' * 12}.parquet"))
    (out / "events" / "notes.parquet").write_bytes(b"mine")
    result = run("export", out, samples)
    assert result.exit_code == 0
    assert "0 written, 11 unchanged, 0 removed." in result.stderr
    assert sorted(out.rglob("part-*.parquet")) == listed
    assert (out / "events" / "notes.parquet").read_bytes() == b"mine"
    (out / "events" / "notes.parquet").unlink()
    rows_once(out, samples)


# --- A damaged file of an earlier export ----------------------------------------------------------


def largest(out: Path, table: str) -> Path:
    return max((out / table).rglob("*.parquet"), key=lambda path: path.stat().st_size)


DAMAGES = {
    "cut in half": lambda data: data[: len(data) // 2],
    "overwritten, same size": lambda data: bytes(len(data)),
    "empty": lambda data: b"",
    "its pages scrambled (the footer whole)": lambda data: (
        data[:64] + bytes(b ^ 0x55 for b in data[64 : len(data) // 2]) + data[len(data) // 2 :]
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("touched", [False, True], ids=["nothing changed", "a log changed"])
def test_a_damaged_file_of_the_manifest_is_written_again(
    damage: str, touched: bool, samples: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    api.export(out, samples)
    damaged = largest(out, "events")
    damaged.write_bytes(DAMAGES[damage](damaged.read_bytes()))
    if touched:
        logs_of(samples)[-1].touch()
    result = run("export", out, samples)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    if damage.startswith("its pages") and not touched:
        return  # the footer reads: found the next time a log of its batch changes (below)
    assert not damaged.exists() or export.readable(damaged)
    assert temporaries(out) == []
    rows_once(out, samples)


def test_something_else_where_a_listed_file_was_is_left_alone(
    samples: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    api.export(out, samples)
    planted = largest(out, "turns")
    planted.unlink()
    planted.mkdir()
    (planted / "mine.txt").write_bytes(b"mine")
    result = run("export", out, samples)
    assert result.exit_code == 0, result.output
    assert (planted / "mine.txt").read_bytes() == b"mine"
    shutil.rmtree(planted)
    rows_once(out, samples)


# --- What cannot be written: one clear line, a documented code, nothing left behind ---------


@pytest.mark.parametrize("where", ["a partition folder", "a table folder"])
def test_a_file_where_a_folder_should_be(where: str, samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    api.export(out, samples)
    day = sorted((out / "turns").iterdir())[0]
    in_the_way = day if where == "a partition folder" else out / "tools"
    shutil.rmtree(in_the_way)
    in_the_way.write_bytes(b"mine")
    before = contents(out)
    result = run("export", out, samples)
    assert result.exit_code == 2
    assert errors(result) == [
        f"Error: {in_the_way}: a file where export keeps a folder, or a folder where it writes "
        f"a file; move it out of {out}"
    ]
    assert "Traceback" not in result.output
    assert contents(out) == before and temporaries(out) == []


def fail_with(code: int) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


def test_a_folder_that_cannot_be_written(
    samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    real = os.open

    def denied(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(str(out)):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(export.os, "open", denied)
    result = run("export", out, samples)
    assert result.exit_code == 2
    assert errors(result) == [
        f"Error: {out / export.LOCK}: cannot write there (Permission denied); give a folder "
        "you can write"
    ]


@pytest.mark.parametrize("code", [errno.EACCES, errno.ENOSPC])
def test_a_part_that_cannot_be_written_leaves_the_earlier_export(
    code: int, samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk (simulated: every write of a Parquet file fails with ENOSPC) or a folder of
    OUT that may not be written: the earlier export as it was, no temporary file."""
    out = tmp_path / "out"
    api.export(out, *logs_of(samples)[:3])
    before = contents(out)
    monkeypatch.setattr(export._Written, "write", fail_with(code))
    result = run("export", out, samples)
    assert result.exit_code == (3 if code == errno.ENOSPC else 2)
    [line] = errors(result)
    reason = os.strerror(code)
    assert line.startswith(f"Error: {out}")
    if code == errno.ENOSPC:
        assert line.endswith(
            f": cannot write ({reason}); free some space and export again ({out} is as the last "
            "finished export left it)"
        )
    else:
        assert line.endswith(f": cannot write there ({reason}); give a folder you can write")
    assert "Traceback" not in result.output
    assert contents(out) == before and temporaries(out) == []


def test_a_full_disk_while_the_manifest_is_saved(
    samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    api.export(out, *logs_of(samples)[:3])
    before = contents(out)

    def full(*args: Any, **kwargs: Any) -> Iterator[Any]:
        raise OSError(errno.ENOSPC, "No space left on device", str(out / export.MANIFEST))

    monkeypatch.setattr(modes, "atomic", full)
    result = run("export", out, samples)
    assert result.exit_code == 3
    assert errors(result) == [
        f"Error: {out / export.MANIFEST}: cannot write (No space left on device); free some "
        f"space and export again ({out} is as the last finished export left it)"
    ]
    assert contents(out) == before and temporaries(out) == []


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 96 KB file system (tmpfs), where the samples' export cannot fit: a real full disk.
    Skipped where the tests may not mount one (not root, or a container without the right)."""
    where = tmp_path / "tiny"
    where.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.process
@pytest.mark.parametrize("workers", [False, True], ids=["in this process", "in worker processes"])
def test_a_real_full_disk(
    workers: bool, tiny_disk: Path, samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot_logs.store import pool

    if workers:  # small batches, read by two worker processes
        monkeypatch.setattr(pool, "FRAMES_PARALLEL_BYTES", 0)
        monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 20_000)
        monkeypatch.setenv(pool.CPUS_VARIABLE, "2")
    out = tiny_disk / "out"
    result = run("export", out, samples, "--no-cache")
    assert result.exit_code == 3, result.output
    [line] = errors(result)
    assert ": cannot write (No space left on device); free some space and export again" in line
    assert "Traceback" not in result.output
    assert temporaries(out) == [] and not (out / export.MANIFEST).exists()
    assert list(out.rglob("*.parquet")) == []


def test_the_lock_file_alone_is_an_empty_export_folder(samples: Path, tmp_path: Path) -> None:
    """An export that failed before its first manifest leaves OUT taken as empty."""
    out = tmp_path / "out"
    (out / "events" / "date=2026-08-05").mkdir(parents=True)
    (out / export.LOCK).write_bytes(b"")
    (out / "events" / "date=2026-08-05" / f".part-{'a' * 16}-{'b' * 12}.parquet.{'a' * 16}.tmp")
    result = run("export", out, samples)
    assert result.exit_code == 0, result.output
    rows_once(out, samples)


def test_a_foreign_folder_gets_no_lock_file(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_bytes(b"mine")
    result = run("export", out, samples)
    assert result.exit_code == 2
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]


def test_the_api_waits_and_exports_the_same(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = api.export(out, samples)
    assert (summary.written, summary.files > 0) == (11, True)
    assert scan(out, "sessions").height == 11
    assert pl.read_parquet_schema(largest(out, "sessions"))


def test_a_write_error_is_not_taken_for_a_logs_failure(
    samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OUT's failure ends the export at once: the batch is not tried again log by log, as a
    failure caused by a log's content is (store/collect.py)."""
    attempts: list[int] = []

    def full(*args: Any, **kwargs: Any) -> list[str]:
        attempts.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "write_tables", full)
    result = run("export", tmp_path / "out", samples)
    assert result.exit_code == 3
    assert attempts == [1]
    assert "unprocessable" not in result.stderr
