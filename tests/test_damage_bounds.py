"""Damage costs bounded memory and linear time, and a log that grows while read is read as far
as it went when the command reached it.

- A file's first MAX_DETAILS problems are listed one by one; past them each kind is summed up
  in one row that says how many lines it stands for, so nothing is lost and memory stays flat
  however much of a file is damaged (issue 25: 30 MB of ``{}`` lines took 3.5 GB).
- A run of NUL bytes longer than a block is counted, not held, and gathered in linear time
  (400 MB of NUL took 28.6 s, 2 GB ran out of memory).
- A log appended to faster than it is read does not keep a command reading for ever.

The peaks are measured as in tests/test_memory_bounds.py (the kernel's ``ru_maxrss`` of a
command started by a launcher), in one process (COPILOT_LOGS_CPUS=1), and compared as a ratio
between two sizes of damage in the same run: nothing here measures time, and a hard timeout
stops a hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import synth
from benchmarks.peak import launched, read_report
from copilot_logs.cli import main
from copilot_logs.commands.sessions import summarize
from copilot_logs.ingest import reader
from copilot_logs.ingest.events_frame import MAX_DETAILS
from copilot_logs.ingest.reader import read_bytes
from synth import SessionBuilder, bash

# The bounds are measured on processes of their own, or over a GB (tier `process`), by one
# worker, one after another (group `concurrency`); the reports' own tests run in this process.

RSS_LIMIT_MB = 250


def session(turns: int = 2, seed: int = 0, output: str = "ok") -> SessionBuilder:
    """A session of ``turns`` + 1 LLM calls (each tool's output ``output``)."""
    builder = SessionBuilder(seed=seed)
    builder.user_message("go")
    for n in range(turns):
        builder.turn(f"step {n}", [bash(f"echo {n}", output)])
    builder.turn("done")
    builder.shutdown()
    return builder


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


# --- the first problems listed, the rest summed up -------------------------------------------


def test_a_files_first_problems_are_listed_and_the_rest_summed_up_per_kind(
    tmp_path: Path,
) -> None:
    lines = session().lines()
    good = len(lines)  # lines 1..good are the session; the damage follows
    lines += [b"{}"] * 150 + [b""] * 60  # not-an-event on 150 lines, then 60 blank lines
    data = synth.join_lines(lines)
    result = read_bytes(data, "s.jsonl")
    rows = result.diagnostics.sort("line", "kind")
    listed = rows.filter(pl.col("more_lines").is_null())
    summed = rows.filter(pl.col("more_lines").is_not_null())
    assert listed.height == MAX_DETAILS == 100
    assert listed["line"].to_list() == list(range(good + 1, good + 101))
    # by hand: 50 of the 150 not-an-event lines and the 60 blank lines are not listed
    assert summed.select("line", "kind", "more_lines", "new_lines").rows() == [
        (good + 101, "not-an-event", 50, 50),
        (good + 151, "blank-line", 60, 60),
    ]
    messages = summed["message"].to_list()
    assert "and 50 more damaged lines of this kind" in messages[0]
    assert f"to {good + 150:,}" in messages[0]
    assert "and 60 more damaged lines of this kind" in messages[1]
    assert summarize(result)["damaged_lines"].to_list() == [210]


def test_two_problems_on_each_line_count_each_line_once(tmp_path: Path) -> None:
    """``{}`` ending with CRLF: two problems a line (crlf, not-an-event), one damaged line."""
    data = synth.join_lines([*session().lines(), *[b"{}\r"] * 300])
    result = read_bytes(data, "s.jsonl")
    summed = result.diagnostics.filter(pl.col("more_lines").is_not_null())
    # 100 problems listed are the first 50 lines; each kind's row names the other 250 lines,
    # which only the first of them adds to the damaged lines
    assert sorted(summed.select("kind", "more_lines", "new_lines").rows()) == [
        ("crlf", 250, 250),
        ("not-an-event", 250, 0),
    ]
    assert all("and 250 more damaged lines" in text for text in summed["message"])
    assert summarize(result)["damaged_lines"].to_list() == [300]


def test_every_report_says_how_many_problems_were_not_listed(tmp_path: Path) -> None:
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(synth.join_lines([*session().lines(), *[b"{}"] * 1234]))
    for args in (["count", "--total"], ["sessions"]):
        code, _, err = invoke(*args, str(path), "--no-cache")
        assert code == 0, err
        assert "not-an-event: and 1,134 more damaged lines of this kind" in err, args
    code, out, _ = invoke("validate", str(path), "--format", "json", "--no-cache")
    messages = [f["message"] for f in orjson.loads(out)["findings"]]
    assert len(messages) == MAX_DETAILS + 1
    assert any("and 1,134 more damaged lines of this kind" in text for text in messages)
    code, out, _ = invoke("sessions", str(path), "--format", "json", "--no-cache")
    assert [row["damaged_lines"] for row in orjson.loads(out)] == [1234]


def test_a_summed_up_row_stays_with_the_session_it_is_about() -> None:
    """Two sessions in one file, the first damaged past the first problems listed: its summary
    row belongs to it, not to the session after it."""
    first = session(seed=1).lines() + [b"{}"] * (MAX_DETAILS + 40)
    data = synth.join_lines(first + session(seed=2).lines() + [b"{}"] * 5)
    result = read_bytes(data, "s.jsonl")
    per_session = summarize(result).select("started_at", "damaged_lines").sort("started_at")
    counts = sorted(per_session["damaged_lines"].to_list())
    assert counts == [5, MAX_DETAILS + 40]


# --- memory flat in the size of the damage ---------------------------------------------------


def peak_mb(args: list[str], report: Path) -> tuple[bytes, float]:
    command = [sys.executable, "-m", "copilot_logs", *args, "--no-cache"]
    env = {**os.environ, "COPILOT_LOGS_CPUS": "1"}
    done = subprocess.run(
        launched(command, report), capture_output=True, timeout=600, check=False, env=env
    )
    peak = read_report(report)
    assert peak.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout, peak.max_rss_mb


@pytest.mark.process
@pytest.mark.xdist_group("concurrency")
@pytest.mark.parametrize("command", [["count", "--total"], ["sessions", "--format", "json"]])
def test_memory_is_flat_in_the_size_of_the_damage(command: list[str], tmp_path: Path) -> None:
    """100,000 and 1,000,000 damaged lines (3 and 30 MB: both more than a block of the
    reader) give the same peak; the reader kept each one's details, about 350 bytes, before:
    1,000,000 lines took over 400 MB."""
    head = session().to_bytes()
    not_an_event = b'{"padding":"' + b"x" * 16 + b'"}\n'  # 30 bytes
    peaks = []
    for damaged in (100_000, 1_000_000):
        path = tmp_path / f"d{damaged}" / "events.jsonl"
        path.parent.mkdir()
        path.write_bytes(head + not_an_event * damaged)
        out, peak = peak_mb([*command, str(path)], tmp_path / "peak")
        if command[0] == "sessions":
            assert [row["damaged_lines"] for row in orjson.loads(out)] == [damaged]
        else:
            assert out == b"3\n"
        peaks.append(peak)
    small, big = peaks
    assert big < small * 1.5, f"{small:.0f} MB for 100,000 damaged lines, {big:.0f} MB for 10x"


@pytest.mark.process
@pytest.mark.xdist_group("concurrency")
def test_a_gigabyte_of_nul_bytes_is_read_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """A crash's NUL padding after a session: 1 GB (a sparse file: no disk used). Gathered by
    copying the line again at each block, 400 MB took 28.6 s and 2 GB ran out of memory."""
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    head = session().to_bytes()
    path.write_bytes(head)
    os.truncate(path, len(head) + (1 << 30))
    for command in (["count", "--total"], ["sessions", "--format", "json"]):
        out, peak = peak_mb([*command, str(path)], tmp_path / "peak")
        assert peak < RSS_LIMIT_MB, f"{command}: {peak:.0f} MB"
        if command[0] == "sessions":
            assert [row["llm_calls"] for row in orjson.loads(out)] == [3]
        else:
            assert out == b"3\n"


# --- NUL runs longer than a block read as if the file were one block -------------------------

nul_run = st.one_of(st.integers(0, 3), st.integers(60, 400))


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 50),
    runs=st.lists(
        st.tuples(
            st.integers(0, 40), st.sampled_from(["start", "end", "middle", "alone"]), nul_run
        ),
        max_size=5,
    ),
    cut_at_end=st.booleans(),
    block=st.integers(8, 96),
)
def test_nul_runs_read_the_same_whatever_the_block_size(
    seed: int, runs: list[tuple[int, str, int]], cut_at_end: bool, block: int
) -> None:
    """The lines of a block are split in it; a line longer than a block is gathered, its NUL
    runs counted instead of held. Read with small blocks, a log with NUL runs anywhere gives
    the frames it gives read as one block (where no line is longer than a block)."""
    lines = session(seed=seed).lines()
    for at, where, count in runs:
        at %= len(lines)
        nuls = b"\x00" * count
        line = lines[at]
        lines[at] = {
            "start": nuls + line,
            "end": line + nuls,
            "middle": line[:10] + nuls + line[10:],
            "alone": nuls,
        }[where]
    data = synth.join_lines(lines)
    if cut_at_end:
        data = data[:-30] + b"\x00" * 300
    whole = read_bytes(data, "s.jsonl")
    original = reader.CLEAN_BLOCK
    reader.CLEAN_BLOCK = block
    try:
        small = read_bytes(data, "s.jsonl")
    finally:
        reader.CLEAN_BLOCK = original
    assert len(data) > block
    assert_frame_equal(small.events, whole.events)
    assert_frame_equal(small.diagnostics, whole.diagnostics)


def test_an_event_split_over_two_lines_the_second_padded_with_nul_reads_the_same() -> None:
    """Its halves never rejoin (a NUL byte makes the JSON invalid), whether the NULs are held
    or, on a line longer than a block, counted."""
    lines = session().lines()
    first, second = synth.split_line(lines[3])
    lines[3:4] = [first, second + b"\x00" * 200]
    data = synth.join_lines(lines)
    whole = read_bytes(data, "s.jsonl")
    original = reader.CLEAN_BLOCK
    reader.CLEAN_BLOCK = 64
    try:
        small = read_bytes(data, "s.jsonl")
    finally:
        reader.CLEAN_BLOCK = original
    assert "split-event" not in whole.diagnostics["kind"].to_list()
    assert_frame_equal(small.events, whole.events)
    assert_frame_equal(small.diagnostics, whole.diagnostics)


def test_a_nul_run_longer_than_a_block_is_counted_at_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reader, "CLEAN_BLOCK", 64)
    lines = session().lines()
    padded = lines[2]
    lines[2] = b"\x00" * 1000 + padded  # a padded line, then the event goes on
    data = synth.join_lines(lines) + b"\x00" * 5000  # and the tail
    result = read_bytes(data, "s.jsonl")
    assert result.diagnostics.select("line", "kind", "message").rows() == [
        (3, "nul-bytes", "1000 NUL bytes (a crash left padding); ignored"),
        (len(lines) + 1, "nul-bytes", "5000 NUL bytes (a crash left padding); ignored"),
    ]
    third = result.events.row(2, named=True)
    assert (third["line"], third["offset"]) == (3, len(lines[0]) + len(lines[1]) + 2)
    assert third["length"] == 1000 + len(padded)
    assert result.events.height == len(lines)


# --- a log that grows while it is read -------------------------------------------------------


def open_by(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux: /proc/PID/fd)."""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return True
            except OSError:
                continue
    except OSError:
        pass
    return False


@contextmanager
def grown_once_opened(process: subprocess.Popen[bytes], path: Path) -> Iterator[list[int]]:
    """From the moment ``process`` first opens ``path``, extend it faster than any reader
    reads (sparse NUL bytes: no disk used), until the block ends. Yields [bytes added]."""
    added = [0]
    stop = threading.Event()

    def grow() -> None:
        while not stop.is_set() and not open_by(process.pid, path):
            if process.poll() is not None:
                return
            time.sleep(0.0005)
        size = path.stat().st_size
        while not stop.is_set() and added[0] < 1 << 42:
            added[0] += 64 << 20
            os.truncate(path, size + added[0])
            time.sleep(0.001)

    thread = threading.Thread(target=grow, daemon=True)
    thread.start()
    try:
        yield added
    finally:
        stop.set()
        thread.join()


@pytest.mark.process
@pytest.mark.xdist_group("concurrency")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watches /proc/PID/fd")
@pytest.mark.parametrize(
    "command",
    [["count", "--total"], ["sessions", "--format", "json"], ["validate", "--format", "json"]],
)
def test_a_log_growing_faster_than_it_is_read_is_read_as_far_as_it_went(
    command: list[str], tmp_path: Path
) -> None:
    """Reading a log up to its end while it grows at 64 GB/s never ends; read up to the size it
    had when the command reached it, the command answers for that, and says the log grew. (The
    log is 16 MB, so that the command is still reading it when the growing begins.)"""
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(session(output="x" * (4 << 20)).to_bytes())
    args = [sys.executable, "-m", "copilot_logs", *command, str(path), "--no-cache"]
    env = {**os.environ, "COPILOT_LOGS_CPUS": "1"}
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        with grown_once_opened(process, path) as added:
            out, err = process.communicate(timeout=120)
            assert added[0] > 0, "the log never grew while the command ran"
    finally:
        process.kill()
        process.communicate()
        path.unlink()
    assert process.returncode in (0, 1), err.decode(errors="replace")
    if command[0] == "count":
        assert out == b"3\n"
    elif command[0] == "sessions":
        assert [row["llm_calls"] for row in orjson.loads(out)] == [3]
    grew = [line for line in err.decode().splitlines() if "grew while being read" in line]
    assert grew == [
        f"warning: 1 log grew while being read ({path}): each was read as far as it went "
        "when the command reached it; run the command again to include the rest"
    ]
