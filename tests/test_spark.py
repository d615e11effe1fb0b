"""The Spark engine gives exactly what the local engine gives (docs/spark.md).

Every command's ``--format json`` output, stderr and exit code are compared between
``--engine local`` and ``--engine spark --master local[2]`` on sample_sessions/ and on a
generated corpus holding every kind of damage in resumed sessions. One Spark session (local
mode) serves the whole file. Skipped where pyspark or Java is absent.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner, Result
from polars.testing import assert_frame_equal

from tests.conftest import NO_JAVA, NO_TMUX, SPARK_EXTRA

pytest.importorskip("pyspark", reason=SPARK_EXTRA)
pytest.importorskip("pyarrow", reason=SPARK_EXTRA)
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip(NO_JAVA, allow_module_level=True)

import copilot_logs as cl
import synth
from benchmarks.corpus import DAMAGE_KINDS, _damage
from copilot_logs.cli import main
from copilot_logs.ingest.logfile import Source
from copilot_logs.spark import engine

from .conftest import SAMPLES

# Starts Spark (a JVM) and the CLI (tier `process`; `make test-spark` runs them).
pytestmark = pytest.mark.process

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One quiet local[2] session for the file: the CLI's --engine spark finds it running."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("spark-log")))
        session = engine.session("local[2]")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    session.conf.set("spark.sql.session.timeZone", "UTC")
    yield session
    session.stop()


def resumed_session(seed: int) -> synth.SessionBuilder:
    """A session shut down, resumed and shut down again, with tools, a sub-agent and a
    completed task."""
    b = synth.SessionBuilder(seed=seed, start=f"2026-08-{5 + seed % 20:02d}T07:49:01.551Z")
    b.user_message("Fix the failing test and explain why.")
    b.turn("Looking.", [synth.bash("pytest -x", "1 failed", exit_code=1)])
    b.turn("The fixture is stale.", [synth.view("tests/conftest.py", "def fixture(): ...")])
    b.turn("Fixed: the fixture now resets the clock.")
    b.shutdown()
    b.resume()
    b.user_message("Now add a regression test.")
    b.turn("Adding it.", [synth.create("tests/test_clock.py", "def test_clock(): ...")])
    b.task_complete_turn("Added tests/test_clock.py.")
    b.shutdown()
    return b


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One resumed session per kind of damage (as the bench corpus applies it), an intact
    one, a flat ``<id>.jsonl``, and a file holding two sessions."""
    folder = tmp_path_factory.mktemp("damaged")
    for index, kind in enumerate(DAMAGE_KINDS):
        b = resumed_session(index)
        data, _ = _damage(b.lines(), b.events, [kind], random.Random(index))
        target = folder / b.session_id / "events.jsonl"
        target.parent.mkdir()
        target.write_bytes(data)
    resumed_session(100).write_to(folder)
    resumed_session(101).write_to(folder, layout="flat")
    two = resumed_session(102).to_bytes() + resumed_session(103).to_bytes()
    (folder / "two-sessions.jsonl").write_bytes(two)
    return folder


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def both(*args: str | Path) -> tuple[Result, Result]:
    local = run(*args, "--no-cache")
    on_spark = run(*args, "--engine", "spark", "--master", "local[2]")
    return local, on_spark


COMMANDS = [
    ("sessions", "--format", "json"),
    ("count", "--format", "json"),
    ("count", "--by", "day", "--tz", "UTC", "--format", "json"),
    ("count", "--by", "model", "--format", "json"),
    ("audit", "--all", "--format", "json"),
    ("validate", "--format", "json"),
    ("validate", "--statistics", "--format", "json"),
    ("usage", "--format", "json"),
    ("usage", "--by", "model", "--tz", "UTC", "--format", "json"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_gives_the_local_rows(
    spark: SparkSession, damaged: Path, command: tuple[str, ...]
) -> None:
    local, on_spark = both(*command, SAMPLES, damaged)
    assert local.stdout.strip(), local.stderr
    if command[0] != "validate":  # validate reports damage as findings, not on stderr
        # Damage over many files is one summary line that counts the problems.
        problems = re.search(r"\((\d+) problems\), each read", local.stderr)
        assert problems is not None and int(problems[1]) >= len(DAMAGE_KINDS), local.stderr
    assert orjson.loads(on_spark.stdout) == orjson.loads(local.stdout)
    assert on_spark.stderr == local.stderr  # every damaged line reported the same way
    assert on_spark.exit_code == local.exit_code


def test_the_comparison_sees_damage_and_resumes(damaged: Path) -> None:
    """The corpus holds what the comparison is meant to cover (checked on the bytes)."""
    logs = [p.read_bytes() for p in damaged.rglob("*.jsonl")]
    assert sum(b"session.resume" in data for data in logs) == len(DAMAGE_KINDS) + 3
    assert any(data.endswith(b"\x00") for data in logs)  # nul-tail
    assert any(b"\r\n" in data for data in logs)  # crlf
    assert any(b"\xe2\x80\xa8" in data for data in logs)  # raw U+2028


def test_a_log_that_cannot_be_opened_is_reported_as_locally(
    spark: SparkSession, damaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A selected log that cannot be read (gone since it was found) is named on stderr and
    makes the command exit 3, as with the local engine."""
    from copilot_logs.cli import options

    gone = Source(tmp_path / "gone" / "events.jsonl", "gone")
    find = options.find
    monkeypatch.setattr(options, "find", lambda *a, **k: [*find(*a, **k), gone])
    local, on_spark = both("sessions", "--format", "json", damaged)
    assert local.exit_code == on_spark.exit_code == 3
    assert f"{gone.name}:0: unreadable: cannot read the file" in on_spark.stderr
    assert on_spark.stderr == local.stderr
    assert orjson.loads(on_spark.stdout) == orjson.loads(local.stdout)


@pytest.mark.parametrize(
    "name",
    ["ctl\x01\x1b[31m", "bad-\udce9-byte", "pct%41", "glob[1]{a,b}*?", "sp ace", "co:lon"],
)
def test_a_log_with_a_hostile_name_gives_the_local_rows(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    """Names Hadoop cannot take (control characters, undecodable bytes, a colon) are read
    here; names it takes (globs, %, spaces) are read by Spark and named as locally."""
    resumed_session(11).write_to(tmp_path)
    log = tmp_path / name / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(resumed_session(12).to_bytes() + b'{"cut')
    local, on_spark = both("sessions", "--format", "json", tmp_path)
    # 0, or 3 for a path that is not UTF-8 (the local engine refuses to read it: rename it)
    assert on_spark.exit_code == local.exit_code
    assert local.exit_code == (3 if "\udce9" in name else 0)
    assert orjson.loads(on_spark.stdout) == orjson.loads(local.stdout)
    assert on_spark.stderr == local.stderr
    assert "cut-line" in local.stderr or "not valid UTF-8" in local.stderr


def test_an_empty_log_exits_3_as_locally(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    resumed_session(7).write_to(tmp_path)
    local, on_spark = both("sessions", "--format", "json", tmp_path)
    assert local.exit_code == on_spark.exit_code == 3
    assert "empty-file" in on_spark.stderr and on_spark.stderr == local.stderr
    assert orjson.loads(on_spark.stdout) == orjson.loads(local.stdout)


def test_a_log_gone_before_spark_lists_it_is_reported_as_locally(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log gone between the check and Spark's listing failed the whole job, no session
    listed; the job runs again without it, which is then reported as locally (one warning, exit
    3) while the rest is answered."""
    kept = resumed_session(8).write_to(tmp_path)
    gone = resumed_session(18).write_to(tmp_path)
    local = {
        row["file"]: row
        for row in orjson.loads(run("sessions", tmp_path, "--format", "json", "--no-cache").stdout)
    }
    monkeypatch.setattr(engine, "opens", lambda source: source.path != gone or not gone.unlink())
    on_spark = run("sessions", tmp_path, "--format", "json", "--engine", "spark")
    assert on_spark.exit_code == 3
    assert on_spark.stderr.startswith(f"warning: {gone}:0: unreadable: cannot read the file")
    rows = {row["file"]: row for row in orjson.loads(on_spark.stdout)}
    assert rows[str(kept)] == local[str(kept)]
    assert rows[str(gone)]["status"] == "unreadable"


def test_a_failed_spark_job_is_one_error_line_and_exit_3(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that fails, and not on one file it names: one line, exit 3."""
    log = resumed_session(8).write_to(tmp_path)
    monkeypatch.setattr(engine, "opens", lambda _source: log.unlink() or True)
    monkeypatch.setattr(engine, "failed_file", lambda *_: None)
    result = CliRunner().invoke(main, ["sessions", str(tmp_path), "--engine", "spark"])
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: the Spark job failed: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


class Hung(Exception):
    """Not an OSError (as TimeoutError is), which the code under test may catch."""


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (rather than hang) when the block takes longer: SIGALRM interrupts a blocking
    open or read in this thread."""

    def expired(*_: Any) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_among_the_logs_is_reported_as_locally(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A FIFO named like a log hung --engine spark (killed at 300 s): opening it waits for a
    writer. Locally it is stat'ed first and reported; on Spark too."""
    resumed_session(19).write_to(tmp_path)
    (tmp_path / "pipe").mkdir()
    os.mkfifo(tmp_path / "pipe" / "events.jsonl")
    with deadline(600):
        local, on_spark = both("sessions", "--format", "json", tmp_path)
    assert local.exit_code == on_spark.exit_code == 3
    assert "a named pipe (FIFO)" in on_spark.stderr and on_spark.stderr == local.stderr
    assert orjson.loads(on_spark.stdout) == orjson.loads(local.stdout)


def test_a_log_too_big_for_spark_is_read_here_and_the_rest_answered(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log over 2 GiB (Spark's binaryFile holds no more: the job failed, no session
    listed; here a session and 3 GB of NUL padding, sparse) is read by the local reader. And
    a file Spark fails to read (the limit raised, so that it does) is left out of the job,
    which runs again without it, and read here."""
    resumed_session(20).write_to(tmp_path)
    big = resumed_session(21).write_to(tmp_path)
    os.truncate(big, big.stat().st_size + (3 << 30))
    local = run("sessions", tmp_path, "--format", "json", "--no-cache")
    assert local.exit_code == 0 and "nul-bytes" in local.stderr
    assert len(orjson.loads(local.stdout)) == 2
    for limit in (engine.MAX_FILE_BYTES, 1 << 40):
        monkeypatch.setattr(engine, "MAX_FILE_BYTES", limit)
        on_spark = run("sessions", tmp_path, "--format", "json", "--engine", "spark")
        assert on_spark.exit_code == 0, on_spark.stderr
        assert orjson.loads(on_spark.stdout) == orjson.loads(local.stdout)
        assert on_spark.stderr == local.stderr


def test_an_executor_error_becomes_one_error_line(spark: SparkSession, tmp_path: Path) -> None:
    log = resumed_session(9).write_to(tmp_path)

    def broken(_result: Any) -> int:
        raise RuntimeError("boom\n  File traceback line")

    with pytest.raises(engine.SparkJobError) as caught:
        list(engine.map_batches([Source(log, "x")], broken))
    assert "\n" not in str(caught.value) and "boom" in str(caught.value)
    assert caught.value.exit_code == 3


def test_without_java_spark_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk"), "XDG_CACHE_HOME": str(tmp_path)}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "java").exists()
    )
    done = subprocess.run(
        [sys.executable, "-m", "copilot_logs", "sessions", str(SAMPLES), "--engine", "spark"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("Error: could not start Spark on local[*]")
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_standard_input_and_total_are_usage_errors(spark: SparkSession) -> None:
    stdin = run("sessions", "-", "--engine", "spark")
    total = run("count", "--total", str(SAMPLES), "--engine", "spark")
    assert stdin.exit_code == total.exit_code == 2
    assert "standard input" in stdin.stderr and "--total" in total.stderr


@pytest.mark.parametrize("table", ["events", "turns", "tools", "sessions", "findings", "usage"])
def test_the_api_tables_are_the_export_tables(
    spark: SparkSession, damaged: Path, table: str
) -> None:
    from copilot_logs import spark as cls

    expected = cl.frames(cl.read(SAMPLES, damaged))[table]
    frame = getattr(cls, table)(spark, [str(SAMPLES), str(damaged)])
    got = pl.from_arrow(frame.toArrow())
    assert isinstance(got, pl.DataFrame)
    assert got.columns == expected.columns
    order = [c for c in ("file", "line", "session_id", "code", "tool_call_id") if c in got.columns]
    assert_frame_equal(
        got.cast(dict(expected.schema)).sort(order, nulls_last=True),
        expected.sort(order, nulls_last=True),
    )
    assert got.height > 0


def test_the_api_reads_uris(spark: SparkSession, damaged: Path) -> None:
    """A file: URI is listed by Spark with the layout rules; rows are named by the URI."""
    sessions = pl.from_arrow(cl_spark().sessions(spark, f"file://{damaged}").toArrow())
    assert isinstance(sessions, pl.DataFrame)
    local = cl.frames(cl.read(damaged))["sessions"]
    assert sessions.height == local.height
    assert sorted(sessions["session_id"]) == sorted(local["session_id"])
    assert all(name.startswith("file:") for name in sessions["file"])


def cl_spark() -> Any:
    from copilot_logs import spark as cls

    return cls


def test_the_docs_example_runs(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first Python example of docs/spark.md, against sample_sessions/."""
    text = (SAMPLES.parent / "docs" / "spark.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(SAMPLES.parent)
    namespace: dict[str, Any] = {"spark": spark}
    exec(example, namespace)
    shown = namespace["per_model"].collect()
    turns = cl.frames(cl.read(SAMPLES))["turns"]
    expected = turns.group_by("model").len().sort("model", nulls_last=False)
    assert [(r["model"], r["count"]) for r in shown] == expected.rows()
    assert "octo/shopfront" in capsys.readouterr().out


# --- what Spark is doing, on a terminal (issue 24) ---------------------------------------------


class Recorder:
    """A :class:`copilot_logs.spark.engine.Progress` that notes what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def starting(self, master: str) -> None:
        self.calls.append(("starting", (master,)))

    def tasks(self, done: int, total: int) -> None:
        self.calls.append(("tasks", (done, total)))

    def finished(self) -> None:
        self.calls.append(("finished", ()))


def test_starting_a_session_is_announced(spark: SparkSession, monkeypatch: Any) -> None:
    from pyspark.sql import SparkSession

    recorder = Recorder()
    assert engine.session("local[2]", recorder) is spark  # running already: nothing to say
    assert recorder.calls == []
    monkeypatch.setattr(SparkSession, "getActiveSession", lambda: None)
    engine.session("local[2]", recorder)  # a new session (getOrCreate finds the context)
    assert recorder.calls == [("starting", ("local[2]",))]


def test_the_job_reports_its_tasks_then_finishes(spark: SparkSession, monkeypatch: Any) -> None:
    from copilot_logs.store.collect import map_batches

    def events(result: Any) -> int:
        return int(result.events.height)

    monkeypatch.setattr(engine, "POLL_SECONDS", 0.01)
    recorder = Recorder()
    sources = [Source(path, path.parent.name) for path in sorted(SAMPLES.glob("*/events.jsonl"))]
    on_spark = list(engine.map_batches(sources, events, progress=recorder))
    local = list(map_batches(sources, events, use_cache=False))
    assert sum(b.value for b in on_spark) == sum(b.value for b in local) > 0
    kinds = [kind for kind, _ in recorder.calls]
    assert kinds[-1] == "finished" and kinds.count("finished") == 1
    tasks = [args for kind, args in recorder.calls if kind == "tasks"]
    assert tasks, "no progress while the job ran"
    assert all(0 <= done <= total for done, total in tasks)  # type: ignore[operator]


def test_a_failed_job_still_finishes_the_progress(spark: SparkSession, tmp_path: Path) -> None:
    def broken(_result: Any) -> int:
        raise RuntimeError("boom")

    recorder = Recorder()
    log = resumed_session(10).write_to(tmp_path)
    with pytest.raises(engine.SparkJobError):
        list(engine.map_batches([Source(log, "x")], broken, progress=recorder))
    assert recorder.calls[-1] == ("finished", ())


def test_on_a_terminal_spark_says_it_is_starting(tmp_path: Path) -> None:
    """A new JVM in its own process, in tmux: the line shows while Spark starts, and is gone
    (transient) when the table is printed."""
    if shutil.which("tmux") is None:
        pytest.skip(NO_TMUX)
    socket = f"copilot-logs-spark-{os.getpid()}"
    done = tmp_path / "done"
    command = (
        f"XDG_CACHE_HOME={tmp_path} {sys.executable} -m copilot_logs count --engine spark "
        f"--master local[1] {SAMPLES} 2>&1; echo $? > {done}; sleep 60"
    )
    tmux = ["tmux", "-L", socket]
    subprocess.run([*tmux, "new-session", "-d", "-x", "150", "-y", "30", command], check=True)
    screens: list[str] = []
    try:
        deadline = time.monotonic() + 600
        while not (done.exists() and done.read_text().strip()) and time.monotonic() < deadline:
            shown = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=False
            )
            screens.append(shown.stdout)
            time.sleep(0.2)
        final = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
    assert done.read_text().strip() == "0"
    assert any("Starting Spark on local[1]" in screen for screen in screens)
    assert "total" in final.stdout and "Starting Spark" not in final.stdout
