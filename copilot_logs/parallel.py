"""Worker processes: both cores when there is a lot to parse (no polars here, so that the
workers can be started before this process imports it)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from multiprocessing import get_context
from multiprocessing.context import ForkServerContext
from typing import TYPE_CHECKING, TypeVar

from copilot_logs.envelope import Source

if TYPE_CHECKING:
    from copilot_logs.store import EventStore

T = TypeVar("T")

PARALLEL_BYTES = 96 << 20
"""Below this much to parse, starting worker processes costs more than it saves."""


def worker_count(jobs: int) -> int:
    return max(1, min(os.cpu_count() or 1, jobs))


def worker_context() -> ForkServerContext:
    """Workers come from a fork server that imported the reader but never ran polars: forking a
    process whose polars thread pool has started can deadlock the child."""
    context = get_context("forkserver")
    context.set_forkserver_preload(["copilot_logs.worker"])
    return context


def bytes_to_parse(sources: Sequence[Source], store: EventStore | None) -> int:
    """How much of the sources a read would parse: what the events cache (None: no cache)
    cannot serve."""
    if store is None:
        return sum(source.size for source in sources)
    return store.uncached_bytes(sources)


def start_workers_early(sources: Sequence[Source], use_cache: bool) -> None:
    """When the sources will be parsed by worker processes, start their fork server now: it
    imports polars on the other core while this process imports it too."""
    if worker_count(2) < 2 or any(source.path is None for source in sources):
        return
    from copilot_logs.store import EventStore

    if bytes_to_parse(sources, EventStore() if use_cache else None) >= PARALLEL_BYTES:
        from multiprocessing import forkserver

        worker_context()
        forkserver.ensure_running()


def balance(items: Sequence[T], sizes: Sequence[int], count: int) -> list[list[T]]:
    """Split items into at most ``count`` non-empty batches of about equal total size, biggest
    first, so that one huge file does not leave the other workers idle at the end."""
    batches: list[list[T]] = [[] for _ in range(max(1, count))]
    loads = [0] * len(batches)
    for size, item in sorted(zip(sizes, items, strict=True), key=lambda pair: -pair[0]):
        lightest = loads.index(min(loads))
        batches[lightest].append(item)
        loads[lightest] += size
    return [batch for batch in batches if batch]
