"""Worker processes: the one way copilot-logs reads on several cores, with a memory bound.

How many workers, and how much input each handles at a time, is :func:`plan`: a few whatever the
core count, and batches that shrink as workers are added, so that the memory summed over all
processes stays bounded (under 250 MB in the benchmarks) on any machine. ``COPILOT_LOGS_CPUS``
overrides the core count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from copilot_logs.errors import CopilotLogsError, ExitCode
from copilot_logs.ingest.logfile import Source

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext

    from copilot_logs.store.entry import Found

# multiprocessing and concurrent.futures are imported where workers start, never on one core.

T = TypeVar("T")

CPUS_VARIABLE = "COPILOT_LOGS_CPUS"
MAX_WORKERS = 4
"""Workers of ``count --total`` (they never import polars: a few MB each)."""
MAX_FRAME_WORKERS = 3
"""Workers that read into frames, each about 35 MB before its first batch: a fourth took cold
``sessions --no-cache`` of 1 GB over 250 MB summed, where three stay near 215 MB."""
IN_FLIGHT_BYTES = 36 << 20  # input held by all workers at once (a batch each)
MAX_BATCH_BYTES = 24 << 20
FRAMES_PARALLEL_BYTES = 96 << 20
SCAN_PARALLEL_BYTES = 32 << 20
"""Below this much to read (into frames; by ``count --total``, whose workers do not import
polars), starting worker processes costs more than it saves."""


def cpu_count() -> int:
    try:
        given = int(os.environ.get(CPUS_VARIABLE, ""))
    except ValueError:
        given = 0
    return given if given > 0 else os.cpu_count() or 1


@dataclass(frozen=True)
class Plan:
    workers: int  # 1: read in this process
    batch_bytes: int  # about how much input one batch holds (a larger file is one alone)


def plan(to_read: int, cpus: int | None = None, *, frames: bool = True) -> Plan:
    """How to read ``to_read`` bytes on ``cpus`` cores (default :func:`cpu_count`)."""
    cores = cpu_count() if cpus is None else cpus
    threshold = FRAMES_PARALLEL_BYTES if frames else SCAN_PARALLEL_BYTES
    cap = MAX_FRAME_WORKERS if frames else MAX_WORKERS
    workers = min(cores, cap) if to_read >= threshold else 1
    if workers < 2:
        return Plan(1, MAX_BATCH_BYTES)
    return Plan(workers, min(MAX_BATCH_BYTES, IN_FLIGHT_BYTES // workers))


def start_method() -> str:
    """``forkserver`` where the platform has it (a server that imported the reader but never
    ran polars), else ``spawn``. Never plain ``fork``: forking a process whose polars thread
    pool has started can deadlock the child, and macOS's libraries do not survive a fork."""
    import multiprocessing

    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class WorkerLost(CopilotLogsError):
    """A worker process ended in the middle of its work (killed, or out of memory)."""

    exit_code = ExitCode.UNREADABLE


@contextmanager
def executor(workers: int, *, frames: bool) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes (:func:`start_method`), which import
    copilot_logs.store.worker first, then the reader (and polars, for ``frames``).

    The workers end with this process however it ends, even by SIGKILL: each watches a pipe
    whose other end only this process holds (:func:`copilot_logs.store.worker.start`); their
    parent, the fork server, outlives it. On an error or Ctrl-C here the pipe is closed and
    nothing waits for their batches; a worker that dies raises :class:`WorkerLost`."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from copilot_logs.store import worker

    context = _context(frames)
    lifeline, held = context.Pipe(duplex=False)
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=worker.start,
        initargs=(lifeline,),
    )
    try:
        yield pool
    except BrokenProcessPool:
        _stop(pool, held)
        raise WorkerLost(
            "a worker process reading the logs was killed (out of memory?) before it was "
            f"done: run the command again, or with {CPUS_VARIABLE}=1 to read in this process"
        ) from None
    except BaseException:
        _stop(pool, held)
        raise
    else:
        pool.shutdown(wait=True)
        held.close()
    finally:
        lifeline.close()


WAKE_SECONDS = 0.2


def as_done(futures: Iterable[Future[T]]) -> Iterator[Future[T]]:
    """The futures as they finish, waking every WAKE_SECONDS: Ctrl-C handled by another thread
    reaches the waiting one only when it wakes."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=WAKE_SECONDS, return_when=FIRST_COMPLETED)
        yield from done


def _stop(pool: ProcessPoolExecutor, held: Connection) -> None:
    held.close()
    pool.shutdown(wait=False, cancel_futures=True)


def _context(frames: bool) -> BaseContext:
    from multiprocessing import get_context
    from multiprocessing.context import ForkServerContext

    context = get_context(start_method())
    if isinstance(context, ForkServerContext):
        modules = (
            ["copilot_logs.store.collect"] if frames else ["copilot_logs.commands.count_total"]
        )
        context.set_forkserver_preload(["copilot_logs.store.worker", *modules])
    return context


def start_workers_early(
    sources: Sequence[Source], use_cache: bool, found: Sequence[Found] | None = None
) -> None:
    """When the sources will be read into frames by workers from a fork server, start it now:
    it imports polars on another core while this process imports it too."""
    if start_method() != "forkserver" or any(source.path is None for source in sources):
        return
    if use_cache and found is None:
        from copilot_logs.store import look_up

        found = look_up(sources)
    if plan(to_read(sources, found if use_cache else None)).workers >= 2:
        from multiprocessing import forkserver

        _context(frames=True)
        forkserver.ensure_running()


def to_read(sources: Sequence[Source], found: Sequence[Found] | None) -> int:
    """How much of the sources a read would parse (through the store when ``found``)."""
    if found is None:
        return sum(source.size for source in sources)
    return sum(looked.to_parse() for looked in found)


def balance(items: Sequence[T], sizes: Sequence[int], count: int) -> list[list[T]]:
    """At most ``count`` batches of about equal total size, biggest first: one huge file does
    not leave the other workers idle at the end."""
    batches: list[list[T]] = [[] for _ in range(max(1, count))]
    loads = [0] * len(batches)
    for size, item in sorted(zip(sizes, items, strict=True), key=lambda pair: -pair[0]):
        lightest = loads.index(min(loads))
        batches[lightest].append(item)
        loads[lightest] += size
    return [batch for batch in batches if batch]
