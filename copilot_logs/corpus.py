"""Reading many session logs at once: through the events cache, on every core when it pays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

from copilot_logs.envelope import Source
from copilot_logs.parallel import balance, worker_count
from copilot_logs.reader import ReadResult, ReadState, read_many
from copilot_logs.store import EventStore, Job

PARALLEL_BYTES = 96 << 20
"""Below this much to parse, starting worker processes costs more than it saves."""
SEQUENTIAL_BATCH_BYTES = 64 << 20
"""Files read in one process are turned into frames in batches of about this much input."""

OnRead = Callable[[Source], None]


def _parse_batch(jobs: Sequence[Job]) -> tuple[ReadResult, list[ReadState | None]]:
    return read_many(jobs)


def _size(job: Job) -> int:
    source, resume = job
    try:
        size = source.path.stat().st_size if source.path is not None else 0
    except OSError:
        return 0
    return size - (resume.offset if resume else 0)


def parse(
    jobs: Sequence[Job], on_read: OnRead | None = None
) -> tuple[ReadResult, list[ReadState | None]]:
    """Read each job (a source, maybe resumed), in worker processes when there is a lot."""
    sizes = [_size(job) for job in jobs]
    workers = worker_count(len(jobs))
    if workers < 2 or sum(sizes) < PARALLEL_BYTES or any(s.path is None for s, _ in jobs):
        parts, states = [], []
        for batch in _chunks(list(jobs), sizes, SEQUENTIAL_BATCH_BYTES):
            result, batch_states = read_many(batch)
            parts.append(result)
            states.extend(batch_states)
            for source, _ in batch:
                if on_read is not None:
                    on_read(source)
        return ReadResult.concat(parts), states
    # Workers come from a fork server that imported the reader but never ran polars: forking
    # a process whose polars thread pool has started can deadlock the child.
    context = get_context("forkserver")
    context.set_forkserver_preload(["copilot_logs.reader"])
    order = {id(job): index for index, job in enumerate(jobs)}
    states_by_index: dict[int, ReadState | None] = {}
    results = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            pool.submit(_parse_batch, batch): batch
            for batch in balance(list(jobs), sizes, workers * 4)
        }
        for future in as_completed(futures):
            batch = futures[future]
            result, batch_states = future.result()
            results.append(result)
            for job, state in zip(batch, batch_states, strict=True):
                states_by_index[order[id(job)]] = state
                if on_read is not None:
                    on_read(job[0])
    return ReadResult.concat(results), [states_by_index[i] for i in range(len(jobs))]


def _chunks(jobs: list[Job], sizes: list[int], limit: int) -> list[list[Job]]:
    """Consecutive jobs in batches of about ``limit`` bytes (at least one job each)."""
    batches: list[list[Job]] = [[]]
    total = 0
    for job, size in zip(jobs, sizes, strict=True):
        if batches[-1] and total + size > limit:
            batches.append([])
            total = 0
        batches[-1].append(job)
        total += size
    return [batch for batch in batches if batch]


def read_all(
    sources: Sequence[Source], *, use_cache: bool = False, on_read: OnRead | None = None
) -> ReadResult:
    """Every source's events and diagnostics in one ReadResult.

    With ``use_cache`` unchanged files come from the events cache and grown ones are read from
    where the cache stopped (see :mod:`copilot_logs.store`).
    """
    if not use_cache:
        return parse([(s, None) for s in sources], on_read)[0]
    return EventStore().read(sources, lambda jobs: parse(jobs, on_read))
