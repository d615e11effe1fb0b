"""The one pool strategy: how many workers and how big a batch, whatever the core count."""

from __future__ import annotations

import os

import pytest

from copilot_logs import parallel

GB = 1 << 30


@pytest.mark.parametrize("cpus", [1, 2, 3, 4, 8, 16, 64, 256])
def test_the_plan_bounds_what_is_in_flight_at_any_core_count(cpus: int) -> None:
    for frames in (True, False):
        plan = parallel.plan(GB, cpus, frames=frames)
        assert 1 <= plan.workers <= min(cpus, parallel.MAX_WORKERS)
        assert plan.batch_bytes <= parallel.MAX_BATCH_BYTES
        if plan.workers > 1:
            assert plan.workers * plan.batch_bytes <= parallel.IN_FLIGHT_BYTES
    assert parallel.plan(GB, cpus).workers == min(cpus, parallel.MAX_WORKERS)


def test_little_to_read_is_read_in_this_process() -> None:
    assert parallel.plan(parallel.FRAMES_PARALLEL_BYTES - 1, 16).workers == 1
    assert parallel.plan(parallel.SCAN_PARALLEL_BYTES - 1, 16, frames=False).workers == 1
    assert parallel.plan(parallel.SCAN_PARALLEL_BYTES, 16, frames=False).workers == 4


def test_the_core_count_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parallel.CPUS_VARIABLE, "16")
    assert parallel.cpu_count() == 16
    assert parallel.plan(GB).workers == parallel.MAX_WORKERS
    monkeypatch.setenv(parallel.CPUS_VARIABLE, "1")
    assert parallel.plan(GB).workers == 1
    for junk in ("0", "-3", "many", ""):
        monkeypatch.setenv(parallel.CPUS_VARIABLE, junk)
        assert parallel.cpu_count() == (os.cpu_count() or 1)
