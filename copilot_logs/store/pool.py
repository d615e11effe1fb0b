"""Worker processes: the one way copilot-logs reads on several cores, with a memory bound.

Workers come from a fork server (never a fork of a process whose polars thread pool has started,
which can deadlock the child). How many, and how much input each handles at a time, is
:func:`plan`: at most MAX_FRAME_WORKERS workers (MAX_WORKERS for ``count --total``, which builds no
frames) whatever the core count, and batches that shrink as workers are added, so that the memory
summed over all processes stays bounded (under 250 MB in the benchmarks) on any machine.
``COPILOT_LOGS_CPUS`` overrides the core count: to use fewer cores, or to see what copilot-logs
does on a bigger machine.
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

    from copilot_logs.store.key import Found

# multiprocessing and concurrent.futures are imported where workers start: a command that
# reads on one core (:func:`plan`) never pays for importing them.

T = TypeVar("T")

CPUS_VARIABLE = "COPILOT_LOGS_CPUS"
MAX_WORKERS = 4
"""Workers of ``count --total`` (they never import polars: a few MB each)."""
MAX_FRAME_WORKERS = 3
"""Workers that read into frames. Each costs about 35 MB summed PSS before its first batch
(polars, the interpreter): a fourth one took cold ``sessions --no-cache`` of 1 GB over 250 MB
summed at 4 cores and more, where three stay near 215 MB."""
IN_FLIGHT_BYTES = 36 << 20
"""Input held by all workers at once (a batch each): the part of memory that grows with the
number of workers; the rest is a fixed cost per process."""
MAX_BATCH_BYTES = 24 << 20
FRAMES_PARALLEL_BYTES = 96 << 20
"""Below this much to read into frames, starting worker processes costs more than it saves."""
SCAN_PARALLEL_BYTES = 32 << 20
"""The same for ``count --total`` (its workers do not import polars)."""


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
    cap = MAX_FRAME_WORKERS if frames else MAX_WORKERS
    workers = min(cores, cap) if to_read >= threshold else 1
    if workers < 2:
        return Plan(1, MAX_BATCH_BYTES)
    return Plan(workers, min(MAX_BATCH_BYTES, IN_FLIGHT_BYTES // workers))


def start_method() -> str:
    """``forkserver`` where the platform has it (Linux, macOS): the workers fork from a server
    that imported the reader but never ran polars. ``spawn`` where it has none (Windows). Never
    plain ``fork``: forking a process whose polars thread pool has started can deadlock the
    child, and macOS's system libraries do not survive a fork."""
    import multiprocessing

    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class WorkerLost(CopilotLogsError):
    """A worker process ended in the middle of its work (killed, or out of memory)."""

    exit_code = ExitCode.UNREADABLE


@contextmanager
def executor(workers: int, *, frames: bool) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes (see :func:`start_method`). Each imports
    copilot_logs.store.worker before any work (a spawned one through the initializer), then the
    reader, and polars too when ``frames`` (the workers build frames).

    The workers end with this process however it ends: each watches a pipe whose other end
    only this process holds (:func:`copilot_logs.store.worker.start`), which the kernel closes
    when this process dies, even by SIGKILL. Their parent cannot tell them: under a fork server
    it is the server, which outlives this process as long as a worker holds its pipe. On an
    error or Ctrl-C here the pipe is closed and nothing waits for their batches; a worker that
    dies raises :class:`WorkerLost` (one line, not a traceback)."""
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
"""How often a wait for the workers wakes up to let this process handle Ctrl-C."""


def as_done(futures: Iterable[Future[T]]) -> Iterator[Future[T]]:
    """The futures as they finish. The wait wakes up every WAKE_SECONDS: Ctrl-C can be handled
    by another thread than the waiting one, and then reaches it only when it wakes."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=WAKE_SECONDS, return_when=FIRST_COMPLETED)
        yield from done


def _stop(pool: ProcessPoolExecutor, held: Connection) -> None:
    """End the workers now (closing their lifeline) and drop the batches not started."""
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
    """When the sources will be read into frames by worker processes from a fork server,
    start it now: it imports polars on another core while this process imports it too.
    ``found`` is each source's entry in the store, when the caller looked them up."""
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
    """How much of the sources a read would parse: all of them without the store (``found``
    None), else what their entries cannot serve."""
    if found is None:
        return sum(source.size for source in sources)
    return sum(looked.to_parse() for looked in found)


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
