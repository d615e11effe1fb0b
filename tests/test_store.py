"""The events cache: same frames as a fresh read, unchanged files not read again, grown files
read from where the cache stopped, and parallel parsing equal to sequential."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from copilot_logs import corpus, parallel, reader
from copilot_logs.cli import main
from copilot_logs.corpus import read_all
from copilot_logs.envelope import Source
from copilot_logs.reader import ReadResult
from copilot_logs.store import EventStore
from copilot_logs.synth import SessionBuilder, bash, nul_tail

from .conftest import SAMPLES


def ordered(result: ReadResult) -> tuple[pl.DataFrame, pl.DataFrame]:
    return result.events.sort("file", "line"), result.diagnostics.sort("file", "line", "kind")


def assert_same(left: ReadResult, right: ReadResult) -> None:
    for a, b in zip(ordered(left), ordered(right), strict=True):
        assert_frame_equal(a, b)


def sample_sources() -> list[Source]:
    return [
        Source(p, p.parent.name if p.name == "events.jsonl" else p.stem)
        for p in sorted(SAMPLES.rglob("*.jsonl"))
    ]


def test_cached_read_equals_fresh_read(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    fresh = read_all(sources)
    first = read_all(sources, use_cache=True)
    assert_same(first, fresh)
    monkeypatch.setattr(reader, "read_many", lambda *a, **k: pytest.fail("read again"))
    monkeypatch.setattr(corpus, "read_many", lambda *a, **k: pytest.fail("read again"))
    second = read_all(sources, use_cache=True)
    assert_same(second, fresh)


def test_file_names_follow_the_caller(tmp_path: Path) -> None:
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("done")
    path = builder.write(tmp_path / "s" / "events.jsonl")
    read_all([Source(path, "s")], use_cache=True)
    relative = Path(os.path.relpath(path))
    again = read_all([Source(relative, "s")], use_cache=True)
    assert again.events["file"].unique().to_list() == [str(relative)]


def grow(tmp_path: Path) -> tuple[Path, SessionBuilder, int]:
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one", [bash("ls", "a")])
    path = builder.write(tmp_path / "s" / "events.jsonl")
    size = path.stat().st_size
    read_all([Source(path, "s")], use_cache=True)
    builder.turn("two")
    builder.turn("three")
    path.write_bytes(builder.to_bytes())
    return path, builder, size


def test_grown_file_reads_only_new_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, builder, size = grow(tmp_path)
    offsets: list[Any] = []
    real = corpus.read_many

    def spy(jobs: Any) -> Any:
        offsets.extend(resume.offset if resume else 0 for _, resume in jobs)
        return real(jobs)

    monkeypatch.setattr(corpus, "read_many", spy)
    grown = read_all([Source(path, "s")], use_cache=True)
    assert offsets == [size]
    assert_same(grown, read_all([Source(path, "s")]))
    assert grown.events["line"].to_list() == list(range(1, len(builder.lines()) + 1))


def test_rewritten_file_is_read_whole(tmp_path: Path) -> None:
    path, _, _ = grow(tmp_path)
    other = SessionBuilder(seed=5)
    other.user_message("something else")
    for n in range(6):
        other.turn(f"step {n}")
    path.write_bytes(other.to_bytes())  # longer, but not a continuation
    assert_same(read_all([Source(path, "s")], use_cache=True), read_all([Source(path, "s")]))


def test_changed_file_is_read_again(tmp_path: Path) -> None:
    path, _, _ = grow(tmp_path)
    read_all([Source(path, "s")], use_cache=True)
    path.write_bytes(nul_tail(path.read_bytes()))
    os.utime(path, ns=(1, 1))
    result = read_all([Source(path, "s")], use_cache=True)
    assert "nul-bytes" in result.diagnostics["kind"].to_list()


def test_store_and_index_disagreeing_means_a_fresh_read(tmp_path: Path) -> None:
    sources = sample_sources()
    read_all(sources, use_cache=True)
    store = EventStore()
    [segment] = {entry["segment"] for entry in store.index.entries.values()}
    events_path, _ = store._paths(segment)
    pl.read_ipc(events_path).head(10).write_ipc(events_path)  # another run rewrote it
    assert_same(read_all(sources, use_cache=True), read_all(sources))


def test_dead_segments_are_deleted(tmp_path: Path) -> None:
    path, _, _ = grow(tmp_path)
    read_all([Source(path, "s")], use_cache=True)  # the grown file goes to a new segment
    store = EventStore()
    live = {entry["segment"] for entry in store.index.entries.values()}
    on_disk = {p.name.split(".")[0] for p in store.folder.glob("*.arrow")}
    assert on_disk == live


def test_batches_give_the_same_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    whole = read_all(sources)
    monkeypatch.setattr(corpus, "BATCH_BYTES", 4000)
    assert len(corpus.batches(sources)) > 3
    assert_same(read_all(sources), whole)
    assert_same(read_all(sources, use_cache=True), whole)
    assert_same(read_all(sources, use_cache=True), whole)


def test_cli_no_cache_writes_nothing(copilot_home: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", str(SAMPLES), "--no-cache", "--format", "json"])
    assert result.exit_code == 0
    assert not (copilot_home / "cache").exists()
    CliRunner().invoke(main, ["sessions", str(SAMPLES), "--format", "json"])
    assert list(EventStore().folder.glob("*.arrow"))


def test_parallel_parse_equals_sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    sequential = read_all(sources)
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)
    seen: list[Source] = []
    in_workers = read_all(sources, on_read=seen.append)
    assert_same(in_workers, sequential)
    assert sorted(s.name for s in seen) == sorted(s.name for s in sources)


def test_rewritten_longer_file_with_the_same_beginning_is_read_whole(tmp_path: Path) -> None:
    """A /rewind rewrites the file: the same first lines, then something else, longer."""
    builder = SessionBuilder()
    builder.user_message("go")
    for n in range(4):
        builder.turn(f"step {n}", [bash("ls", "a")])
    path = builder.write(tmp_path / "s" / "events.jsonl")
    read_all([Source(path, "s")], use_cache=True)
    lines = builder.lines()
    rewritten = b"\n".join(lines[:6]) + b"\n" + b"x" * (path.stat().st_size) + b"\n"
    path.write_bytes(rewritten)
    assert_same(read_all([Source(path, "s")], use_cache=True), read_all([Source(path, "s")]))


def test_event_split_across_the_cached_end_is_rejoined(tmp_path: Path) -> None:
    from copilot_logs.synth import split_line

    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one")
    builder.user_message("second prompt")
    lines = builder.lines()
    first, second = split_line(lines[-1])
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join([*lines[:-1], first]) + b"\n")  # the writer is mid-event
    read_all([Source(path, "s")], use_cache=True)
    path.write_bytes(b"\n".join([*lines[:-1], first, second]) + b"\n")
    cached = read_all([Source(path, "s")], use_cache=True)
    assert_same(cached, read_all([Source(path, "s")]))
    assert "split-event" in cached.diagnostics["kind"].to_list()


def test_workers_start_early_only_when_there_is_a_lot_to_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from multiprocessing import forkserver

    started: list[bool] = []
    monkeypatch.setattr(forkserver, "ensure_running", lambda: started.append(True))
    monkeypatch.setattr(parallel, "worker_count", lambda jobs: 2)
    sources = sample_sources()
    total = sum(s.size for s in sources)
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", total + 1)
    parallel.start_workers_early(sources, use_cache=False)
    assert started == []
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", total)
    parallel.start_workers_early([*sources, Source(None, "stdin")], use_cache=False)
    assert started == []  # standard input is read here, never by a worker
    parallel.start_workers_early(sources, use_cache=False)
    assert started == [True]
    read_all(sources, use_cache=True)  # now cached: nothing left to parse
    started.clear()
    parallel.start_workers_early(sources, use_cache=True)
    assert started == []
