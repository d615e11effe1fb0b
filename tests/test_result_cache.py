"""The results cache: a batch whose files, function and options are unchanged is served
without reading; any change to them is computed again, and what is served equals a fresh run."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from copilot_logs import corpus, counting, overview, rules
from copilot_logs.cli import main
from copilot_logs.envelope import Source
from copilot_logs.result_cache import ResultCache, describe
from copilot_logs.synth import SessionBuilder

from .test_store import sample_sources


def summaries(sources: list[Source], *, use_cache: bool) -> pl.DataFrame:
    return overview.newest_first(
        [
            done.value
            for done in corpus.map_batches(sources, overview.summarize, use_cache=use_cache)
        ]
    )


def forbid_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus, "_run_batch", lambda *a, **k: pytest.fail("a batch was read"))


def session(folder: Path, name: str, turns: int) -> tuple[SessionBuilder, Source]:
    builder = SessionBuilder()
    builder.user_message("go")
    for _ in range(turns):
        builder.turn("done")
    return builder, Source(builder.write(folder / name / "events.jsonl"), name)


def test_unchanged_batches_are_served_unread_and_equal_a_fresh_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sources = sample_sources()
    fresh = summaries(sources, use_cache=False)
    assert_frame_equal(summaries(sources, use_cache=True), fresh)
    forbid_reading(monkeypatch)
    assert_frame_equal(summaries(sources, use_cache=True), fresh)


def test_damage_and_empty_files_are_still_reported_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sources = sample_sources()
    first = list(corpus.map_batches(sources, overview.summarize, use_cache=True))
    forbid_reading(monkeypatch)
    second = list(corpus.map_batches(sources, overview.summarize, use_cache=True))
    damage = pl.concat([done.diagnostics for done in first])
    assert damage.height > 0
    assert_frame_equal(pl.concat([done.diagnostics for done in second]), damage)
    assert {f for d in second for f in d.files_with_events} == {
        f for d in first for f in d.files_with_events
    }


def test_a_changed_file_is_computed_again(tmp_path: Path) -> None:
    builder, source = session(tmp_path, "a", 2)
    assert summaries([source], use_cache=True)["llm_calls"].to_list() == [2]
    assert source.path is not None
    builder.turn("more")
    builder.write(source.path)
    assert summaries([source], use_cache=True)["llm_calls"].to_list() == [3]
    os.utime(source.path, ns=(1, 1))  # same size, another time: computed again, all the same
    assert summaries([source], use_cache=True)["llm_calls"].to_list() == [3]


def test_other_options_are_other_entries(tmp_path: Path) -> None:
    sources = [session(tmp_path, "a", 1)[1], session(tmp_path, "b", 3)[1]]
    by_session = counting.combine(
        [d.value for d in corpus.map_batches(sources, counting.count, use_cache=True)]
    )
    by_day = partial(counting.count, by="day", zone="UTC")
    grouped = counting.combine(
        [d.value for d in corpus.map_batches(sources, by_day, use_cache=True)]
    )
    assert by_session.height == 2
    assert grouped.columns[0] == "day"


def test_a_damaged_entry_is_a_miss_not_an_error(tmp_path: Path) -> None:
    sources = [session(tmp_path, "a", 1)[1]]
    summaries(sources, use_cache=True)
    cache = ResultCache(overview.summarize)
    for entry in cache.folder.glob("*.pickle"):
        entry.write_bytes(b"not a pickle")
    assert summaries(sources, use_cache=True)["llm_calls"].to_list() == [1]


def test_no_cache_writes_no_results(tmp_path: Path) -> None:
    sources = [session(tmp_path, "a", 1)[1]]
    summaries(sources, use_cache=False)
    assert not ResultCache(overview.summarize).folder.exists()


def test_least_recently_used_entries_are_pruned(tmp_path: Path) -> None:
    cache = ResultCache(overview.summarize)
    for index in range(5):
        cache.put(f"k{index}", index)
        os.utime(cache.folder / f"k{index}.pickle", ns=(index, index))
    cache.prune(limit=3)
    assert sorted(p.stem for p in cache.folder.glob("*.pickle")) == ["k2", "k3", "k4"]


def test_options_are_described_the_same_in_every_process() -> None:
    first = partial(rules.check_batch, select={"E1", "X3", "T2"}, ignore=frozenset({"R6"}))
    second = partial(rules.check_batch, ignore={"R6"}, select={"T2", "E1", "X3"})
    assert describe(first) == describe(second)
    assert describe(first) != describe(partial(rules.check_batch, select={"E1"}, ignore=set()))
    assert describe(lambda result: result) is None
    assert describe(partial(counting.count, by=object())) is None


def test_the_cli_serves_a_second_run_from_the_results_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = CliRunner()
    samples = [str(s.path) for s in sample_sources()]
    first = runner.invoke(main, ["sessions", *samples, "--format", "json"])
    forbid_reading(monkeypatch)
    second = runner.invoke(main, ["sessions", *samples, "--format", "json"])
    assert (second.exit_code, second.stdout, second.stderr) == (
        first.exit_code,
        first.stdout,
        first.stderr,
    )
