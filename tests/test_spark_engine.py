"""The Spark engine's plain-Python parts (no Spark needed): names, layout, batches, errors,
and the order of rows not depending on how the logs were batched."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

import synth
from copilot_logs.cli import main
from copilot_logs.commands import count
from copilot_logs.commands.usage import report, session_usage
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult, read_bytes, read_source
from copilot_logs.spark import engine
from copilot_logs.store import collect

from .conftest import SAMPLES, SPARK_EXTRA


def test_spark_names_and_ours_meet_on_one_key() -> None:
    """Hadoop names a local file ``file:/a/b c`` (unescaped); we name it by its path."""
    assert engine.key("file:/tmp/a b/events.jsonl") == "/tmp/a b/events.jsonl"
    assert engine.key("file:///tmp/x%5B1%5D.jsonl") == "/tmp/x[1].jsonl"
    assert engine.key("/tmp/./a//b.jsonl") == "/tmp/a/b.jsonl"
    assert engine.key("s3a://bucket/s/events.jsonl") == "s3a://bucket/s/events.jsonl"


def test_a_uri_gets_the_session_hint_of_its_layout() -> None:
    assert engine.session_hint("s3a://b/state/3fa85f64/events.jsonl") == "3fa85f64"
    assert engine.session_hint("s3a://b/state/3fa85f64.jsonl") == "3fa85f64"
    assert engine.is_uri("s3a://b/state") and not engine.is_uri("./state")


def test_a_remote_source_is_named_by_its_uri() -> None:
    source = engine.RemoteSource(None, "3fa", uri="s3a://b/3fa.jsonl")
    assert source.name == "s3a://b/3fa.jsonl"


def test_files_are_grouped_by_size_and_never_split() -> None:
    files = [
        (Source(Path(f"{n}.jsonl"), str(n)), b"x" * size) for n, size in enumerate([5, 5, 12, 1])
    ]
    groups = list(engine.grouped(files, limit=10))
    assert [[s.session_hint for s, _ in g] for g in groups] == [["0", "1"], ["2"], ["3"]]


def test_glob_characters_of_a_local_path_are_escaped_for_hadoop(tmp_path: Path) -> None:
    source = Source(tmp_path / "a[1]" / "b{x}.jsonl", "b")
    assert engine._location(source).endswith("/a\\[1\\]/b\\{x\\}.jsonl")
    assert engine._location(source).startswith("file:///")


def test_an_executor_traceback_becomes_its_exception_line() -> None:
    error = RuntimeError(
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in f\nValueError: bad \x1b[31mvalue\n'
    )
    assert engine.first_line(error) == "ValueError: bad \\x1b[31mvalue"
    assert engine.first_line(RuntimeError("one\ntwo")) == "one"
    py4j = RuntimeError(
        "An error occurred while calling o31.load.\n: java.lang.RuntimeException: "
        "Class org.apache.hadoop.fs.s3a.S3AFileSystem not found\n\tat org.apache.X(X.java:1)"
    )
    assert engine.first_line(py4j) == (
        "java.lang.RuntimeException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found"
    )


def _usage_of(data: bytes, name: str) -> pl.DataFrame:
    return session_usage(read_bytes(data, name=name))


def test_usage_rows_do_not_depend_on_the_order_of_batches() -> None:
    """Two sessions that started at the same instant, read in either order, give one order
    (worker processes and Spark tasks finish in any order)."""
    logs = []
    for seed in (1, 2):
        b = synth.SessionBuilder(seed=seed, start="2026-08-05T07:49:01.551Z")
        b.user_message("hi")
        b.turn("hello")
        b.shutdown()
        logs.append(_usage_of(b.to_bytes(), f"/logs/{seed}.jsonl"))
    forward = report(logs).rows
    backward = report(logs[::-1]).rows
    assert forward["file"].to_list() == ["/logs/1.jsonl", "/logs/2.jsonl"]
    assert backward.equals(forward)


def test_engine_options_are_on_the_commands_that_map_over_logs(tmp_path: Path) -> None:
    for command in ("sessions", "count", "audit", "validate", "usage"):
        help_text = CliRunner().invoke(main, [command, "--help"]).stdout
        assert "--engine [local|spark]" in help_text and "--master URL" in help_text
    local = CliRunner().invoke(main, ["sessions", str(tmp_path), "--engine", "local"])
    assert local.exit_code == 0 and "No sessions found" in local.stderr
    bad = CliRunner().invoke(main, ["sessions", "--engine", "hadoop"])
    assert bad.exit_code == 2
    assert (
        orjson.loads(
            CliRunner().invoke(main, ["sessions", str(tmp_path), "--format", "json"]).stdout
        )
        == []
    )


# --- the executors' work, without Spark: the local engine's own batch step ----------------

POISONED = "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071"
"""A bundled session the injected fault fails on."""


def _sample_logs() -> list[tuple[Source, bytes]]:
    paths = sorted(SAMPLES.rglob("*.jsonl"))
    return [
        (Source(p, p.parent.name if p.name == "events.jsonl" else p.stem), p.read_bytes())
        for p in paths
    ]


def _arrow_batch(logs: list[tuple[Source, bytes]]) -> Any:
    """What Spark's ``binaryFile`` hands a task: one row per file, its path and its bytes."""
    pa = pytest.importorskip("pyarrow", reason=SPARK_EXTRA)
    return pa.RecordBatch.from_pydict(
        {
            "path": [f"file:{source.path}" for source, _ in logs],
            "content": [data for _, data in logs],
        }
    )


def _run_task(logs: list[tuple[Source, bytes]], fn: Callable[[ReadResult], Any]) -> list[Any]:
    """The executors' function (``mapInArrow``'s) over the logs: each batch's Done."""
    named = engine.by_key(source for source, _ in logs)
    out = engine.task(fn, named)(iter([_arrow_batch(logs)]))
    return [pickle.loads(batch.column("result")[0].as_py()) for batch in out]


def _same(result: ReadResult) -> ReadResult:
    return result


def _events_per_file(result: ReadResult) -> dict[str, int]:
    if POISONED in result.events["session_id"].to_list():
        raise KeyError("boom")
    return dict(result.events.group_by("file").len().iter_rows())


def test_an_executor_reads_its_files_in_one_call_as_the_local_engine_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A task's batch is read by the local engine's batch reader, in one call (not file by
    file): the frames are those the local engine reads from the same files."""
    logs = _sample_logs()
    calls: list[int] = []
    real = collect.read_many_bytes

    def spy(jobs: Any) -> Any:
        calls.append(len(jobs))
        return real(jobs)

    monkeypatch.setattr(collect, "read_many_bytes", spy)
    (done,) = _run_task(logs, _same)
    assert calls == [len(logs)]  # the 11 samples, under 24 MB: one batch, one call
    local = collect.read_files([(source, None) for source, _ in logs])[0]
    assert_frame_equal(done.value.events, local.events)
    assert_frame_equal(done.value.diagnostics, local.diagnostics)
    expected = orjson.loads((SAMPLES / "expected.json").read_bytes())
    calls_per_session = count.count(done.value).select("session_id", "llm_calls").rows()
    assert dict(calls_per_session) == {k: v["llm_calls"] for k, v in expected.items()}
    assert done.names == [source.name for source, _ in logs]


def test_an_executor_leaves_out_only_the_log_its_function_fails_on() -> None:
    logs = _sample_logs()
    (done,) = _run_task(logs, _events_per_file)
    poisoned = str(SAMPLES / POISONED / "events.jsonl")
    local = {s.name: read_source(s).events.height for s, _ in logs if s.name != poisoned}
    assert done.value == local  # every other file, each whole
    failed = done.diagnostics.filter(pl.col("kind") == "unprocessable")
    assert failed.select("file", "session_id").rows() == [(poisoned, POISONED)]
    assert "KeyError: 'boom'" in failed["message"][0]
    assert poisoned not in done.files_with_events


def test_an_executor_reports_a_log_the_reader_fails_on_and_reads_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logs = _sample_logs()
    poisoned = str(SAMPLES / POISONED / "events.jsonl")
    real = collect.read_many_bytes

    def failing(jobs: Any) -> Any:
        if any(source.name == poisoned for source, _, _ in jobs):
            raise MemoryError("a stand-in for content that breaks the reader")
        return real(jobs)

    monkeypatch.setattr(collect, "read_many_bytes", failing)
    (done,) = _run_task(logs, _same)
    assert sorted(done.files_with_events) == sorted(s.name for s, _ in logs if s.name != poisoned)
    failed = done.diagnostics.filter(pl.col("kind") == "unprocessable")
    assert failed.select("file", "session_id").rows() == [(poisoned, POISONED)]
