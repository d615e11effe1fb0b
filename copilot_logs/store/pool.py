"""Worker processes: the one way copilot-logs reads on several cores, with a memory bound.

Workers come from a fork server (never a fork of a process whose polars thread pool has
started, which can deadlock the child). How many, and how much input each handles at a time,
is :func:`plan`: at most MAX_WORKERS workers whatever the core count, and batches that shrink
as workers are added, so that the memory summed over all processes stays bounded (under 250 MB
in the benchmarks) on any machine. ``COPILOT_LOGS_CPUS`` overrides the core count: to use fewer
cores, or to see what copilot-logs does on a bigger machine.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.context import BaseContext, ForkServerContext
from typing import TypeVar

from copilot_logs.ingest.decode.envelope import Source

T = TypeVar("T")

CPUS_VARIABLE = "COPILOT_LOGS_CPUS"
MAX_WORKERS = 4
IN_FLIGHT_BYTES = 48 << 20
"""Input held by all workers at once (a batch each): the part of memory that grows with the
number of workers; the rest is a fixed cost per process."""
MAX_BATCH_BYTES = 24 << 20
FRAMES_PARALLEL_BYTES = 96 << 20
"""Below this much to read into frames, starting worker processes costs more than it saves."""
SCAN_PARALLEL_BYTES = 32 << 20
"""The same for ``count --total``'s scan (its workers do not import polars)."""


def cpu_count() -> int:
    """``$COPILOT_LOGS_CPUS`` when set to a positive integer, else the machine's core count."""
    try:
        given = int(os.environ.get(CPUS_VARIABLE, ""))
    except ValueError:
        given = 0
    return given if given > 0 else os.cpu_count() or 1


@dataclass(frozen=True)
class Plan:
    workers: int
    """1: read in this process."""
    batch_bytes: int
    """About how much input one batch holds (a larger file is a batch of its own)."""


def plan(to_read: int, cpus: int | None = None, *, frames: bool = True) -> Plan:
    """How to read ``to_read`` bytes on ``cpus`` cores (default :func:`cpu_count`)."""
    cores = cpu_count() if cpus is None else cpus
    threshold = FRAMES_PARALLEL_BYTES if frames else SCAN_PARALLEL_BYTES
    workers = min(cores, MAX_WORKERS) if to_read >= threshold else 1
    if workers < 2:
        return Plan(1, MAX_BATCH_BYTES)
    return Plan(workers, min(MAX_BATCH_BYTES, IN_FLIGHT_BYTES // workers))


def start_method() -> str:
    """``forkserver`` where the platform has it (Linux, macOS): the workers fork from a server
    that imported the reader but never ran polars. ``spawn`` where it has none (Windows). Never
    plain ``fork``: forking a process whose polars thread pool has started can deadlock the
    child, and macOS's system libraries do not survive a fork."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def executor(workers: int, *, frames: bool) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes (see :func:`start_method`). Each imports
    copilot_logs.store.worker before any work (a spawned one through the initializer), then the
    reader, and polars too when ``frames`` (the workers build frames)."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_context(frames),
        initializer=importlib.import_module,
        initargs=("copilot_logs.store.worker",),
    )


def _context(frames: bool) -> BaseContext:
    context = get_context(start_method())
    if isinstance(context, ForkServerContext):
        modules = (
            ["copilot_logs.store.collect"] if frames else ["copilot_logs.commands.count_total"]
        )
        context.set_forkserver_preload(["copilot_logs.store.worker", *modules])
    return context


def start_workers_early(sources: Sequence[Source], use_cache: bool) -> None:
    """When the sources will be read into frames by worker processes from a fork server,
    start it now: it imports polars on another core while this process imports it too."""
    if start_method() != "forkserver" or any(source.path is None for source in sources):
        return
    if plan(to_read(sources, use_cache)).workers >= 2:
        from multiprocessing import forkserver

        _context(frames=True)
        forkserver.ensure_running()


def to_read(sources: Sequence[Source], use_cache: bool) -> int:
    """How much of the sources a read would parse: what the store cannot serve."""
    if not use_cache:
        return sum(source.size for source in sources)
    from copilot_logs import store

    total = 0
    for source in sources:
        found = store.find(source)
        if found.state is store.State.FRESH and found.header and found.header.body:
            continue  # (a fresh entry without frames, written by count --total, is read)
        grown = found.state is store.State.GROWN and found.header and found.header.body
        total += source.size - (found.header.end if grown and found.header else 0)
    return total


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
