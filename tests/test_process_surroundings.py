"""What surrounds the process (issue 25): standard streams closed, full or unable to encode the
text, the working directory deleted, a hostile pyproject.toml. The CLI runs as a subprocess,
since each case is about the process's own descriptors, encoding or folder; the output gate's
part of each, on every command and encoding, runs in-process in tests/test_output_streams.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT, SAMPLES
from tests.test_output_streams import ALL_CALLS, REPOSITORY, foreign_root

__all__ = ["foreign_root"]  # the fixture, for pytest

# Each case starts `python -m copilot_logs` (tier `process`: make test-all, CI).
pytestmark = pytest.mark.process


def cli(
    args: list[str | Path],
    home: Path,
    *,
    redirect: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    prefix: str = "",
) -> subprocess.CompletedProcess[bytes]:
    """``python -m copilot_logs ARGS`` with a shell ``redirect`` (``>&-``, ``>/dev/full``),
    after a shell ``prefix``."""
    environment = {
        **os.environ,
        "COPILOT_HOME": str(home),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "PYTHONPATH": str(PROJECT),
        **(env or {}),
    }
    script = f'{prefix}exec "$0" -m copilot_logs "$@" {redirect}'
    return subprocess.run(
        ["sh", "-c", script, sys.executable, *map(str, args)],
        capture_output=True,
        env=environment,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def error_lines(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    text = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in text and "Exception ignored" not in text, text
    return [line for line in text.splitlines() if line.startswith("Error:")]


# --- standard output closed or full ------------------------------------------------------------


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"])
@pytest.mark.parametrize(
    "args",
    [
        ["count", "--total", SAMPLES],
        ["sessions", SAMPLES],
        ["count", "--format", "csv", SAMPLES],
        ["rules"],
    ],
    ids=lambda v: " ".join(map(str, v)).replace(str(SAMPLES), "SAMPLES"),
)
def test_output_that_cannot_be_written_is_one_error_line(
    args: list[str | Path], redirect: str, tmp_path: Path
) -> None:
    if redirect == ">/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    done = cli(args, tmp_path, redirect=redirect)
    assert done.returncode == 3, done.stderr.decode()
    [line] = error_lines(done)
    assert "cannot write the output" in line


@pytest.mark.parametrize("args", [["--help"], ["count", "--help"], ["--version"]])
def test_click_s_own_text_on_a_full_disk_is_one_error_line(args: list[str], tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    done = cli(args, tmp_path, redirect=">/dev/full")
    assert done.returncode == 3, done.stderr.decode()
    assert len(error_lines(done)) == 1


# --- standard error closed or full: the output is never lost -----------------------------------


@pytest.mark.parametrize("redirect", ["2>&-", "2>/dev/full"])
@pytest.mark.parametrize(
    "args",
    [
        ["count", "--total", SAMPLES],  # the damaged sample warns on stderr first
        ["sessions", SAMPLES],
        ["count", "--total", "--root", "/nonexistent"],  # an error that cannot be said
    ],
    ids=lambda v: " ".join(map(str, v)).replace(str(SAMPLES), "SAMPLES"),
)
def test_stderr_closed_or_full_keeps_the_output_and_the_exit_code(
    args: list[str | Path], redirect: str, tmp_path: Path
) -> None:
    if "full" in redirect and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    plain = cli(args, tmp_path)
    done = cli(args, tmp_path, redirect=redirect)
    assert done.returncode == plain.returncode
    assert done.stdout == plain.stdout
    assert done.stderr == b""


def test_standard_input_closed_is_an_unreadable_input(tmp_path: Path) -> None:
    done = cli(["count", "--total", "-"], tmp_path, redirect="<&-")
    assert done.returncode == 3
    assert done.stdout == b"0\n"
    assert b"standard input is closed" in done.stderr
    error_lines(done)


# --- an output encoding that cannot show the text --------------------------------------------
# Every command and encoding is tested in-process (tests/test_output_streams.py); here, that a
# real process's stream (PYTHONIOENCODING: errors strict) behaves as the one given there.


@pytest.mark.parametrize(
    ("args", "encoding"),
    [(["count", "--by", "repository"], "ascii"), (["count", "--by", "repository"], "cp1252")],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_an_encoding_that_lacks_a_character_shows_an_escape(
    foreign_root: Path, tmp_path: Path, encoding: str, args: list[str]
) -> None:
    done = cli([*args, foreign_root], tmp_path, env={"PYTHONIOENCODING": encoding})
    assert done.returncode == 0, done.stderr.decode()
    assert error_lines(done) == []
    expected = REPOSITORY.encode(encoding, "backslashreplace").decode(encoding)
    assert expected[:20] in done.stdout.decode(encoding)  # every byte is the encoding's own


def test_json_in_ascii_reads_back_as_the_exact_text(foreign_root: Path, tmp_path: Path) -> None:
    """A character the encoding lacks is a JSON \\u escape: the same value, exactly."""
    args = ["count", "--by", "repository", "--format", "json", foreign_root]
    done = cli(args, tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr.decode()
    assert [row["repository"] for row in json.loads(done.stdout.decode("ascii"))] == [REPOSITORY]


def test_an_ascii_table_still_counts_every_call(tmp_path: Path) -> None:
    done = cli(["count", "--total", SAMPLES], tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert done.stdout == f"{ALL_CALLS}\n".encode()


# --- the working directory ---------------------------------------------------------------------


def in_deleted_folder(args: list[str | Path], home: Path) -> subprocess.CompletedProcess[bytes]:
    """The command run from a folder deleted before it starts (``os.getcwd()`` fails)."""
    gone = home / "gone"
    gone.mkdir()
    return cli(
        args, home, redirect="", env={"GONE": str(gone)}, prefix='cd "$GONE" && rmdir "$GONE" && '
    )


def test_a_deleted_working_folder_still_answers_for_absolute_paths(tmp_path: Path) -> None:
    done = in_deleted_folder(["count", "--total", SAMPLES], tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == f"{ALL_CALLS}\n".encode()
    assert error_lines(done) == []


@pytest.mark.parametrize(
    "args",
    [
        ["validate", SAMPLES],
        ["export", "relative-out", SAMPLES],
        ["report", "-o", "r.html", SAMPLES],
    ],
    ids=lambda v: str(v[0]),
)
def test_a_deleted_working_folder_it_needs_is_one_error_line(
    args: list[str | Path], tmp_path: Path
) -> None:
    done = in_deleted_folder(args, tmp_path)
    assert done.returncode == 2, done.stderr.decode()
    [line] = error_lines(done)
    assert "current folder no longer exists" in line
