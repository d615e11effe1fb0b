"""The one pool strategy: how many workers and how big a batch, whatever the core count."""

from __future__ import annotations

import os
import sys

import pytest

from copilot_logs.store import pool

GB = 1 << 30


@pytest.mark.parametrize("cpus", [1, 2, 3, 4, 8, 16, 64, 256])
def test_the_plan_bounds_what_is_in_flight_at_any_core_count(cpus: int) -> None:
    for frames in (True, False):
        plan = pool.plan(GB, cpus, frames=frames)
        assert 1 <= plan.workers <= min(cpus, pool.MAX_WORKERS)
        assert plan.batch_bytes <= pool.MAX_BATCH_BYTES
        if plan.workers > 1:
            assert plan.workers * plan.batch_bytes <= pool.IN_FLIGHT_BYTES
    assert pool.plan(GB, cpus).workers == min(cpus, pool.MAX_WORKERS)


def test_little_to_read_is_read_in_this_process() -> None:
    assert pool.plan(pool.FRAMES_PARALLEL_BYTES - 1, 16).workers == 1
    assert pool.plan(pool.SCAN_PARALLEL_BYTES - 1, 16, frames=False).workers == 1
    assert pool.plan(pool.SCAN_PARALLEL_BYTES, 16, frames=False).workers == 4


def test_the_core_count_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.CPUS_VARIABLE, "16")
    assert pool.cpu_count() == 16
    assert pool.plan(GB).workers == pool.MAX_WORKERS
    monkeypatch.setenv(pool.CPUS_VARIABLE, "1")
    assert pool.plan(GB).workers == 1
    for junk in ("0", "-3", "many", ""):
        monkeypatch.setenv(pool.CPUS_VARIABLE, junk)
        assert pool.cpu_count() == (os.cpu_count() or 1)


@pytest.mark.parametrize(
    ("platform", "method"), [("linux", "forkserver"), ("darwin", "forkserver"), ("win32", "spawn")]
)
def test_workers_start_the_way_each_platform_supports(
    monkeypatch: pytest.MonkeyPatch, platform: str, method: str
) -> None:
    """Never plain fork (it deadlocks under a running polars pool, and macOS forbids it)."""
    monkeypatch.setattr(sys, "platform", platform)
    assert pool.start_method() == method
    assert pool._context(frames=True).get_start_method() == method


def test_spawned_workers_read_what_one_process_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on Windows: each worker is a fresh interpreter that must import what it runs."""
    from copilot_logs.store.collect import read_all
    from tests.test_store import assert_same, sample_sources

    sources = sample_sources()
    alone = read_all(sources)
    monkeypatch.setattr(pool, "start_method", lambda: "spawn")
    monkeypatch.setenv(pool.CPUS_VARIABLE, "2")
    monkeypatch.setattr(pool, "FRAMES_PARALLEL_BYTES", 0)
    monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 1)  # a batch per log: the pool is used
    assert_same(read_all(sources), alone)
