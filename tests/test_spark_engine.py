"""The Spark engine's plain-Python parts (no Spark needed): names, layout, batches, errors,
and the order of rows not depending on how the logs were batched."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
from click.testing import CliRunner

import synth
from copilot_logs.cli import main
from copilot_logs.commands.usage import report, session_usage
from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.reader import read_bytes
from copilot_logs.spark import engine, tasks


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
    groups = list(tasks.grouped(files, limit=10))
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
