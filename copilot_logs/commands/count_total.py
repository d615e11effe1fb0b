"""``count --total``: exact, read by the reader every command reads with, without frames.

How it stays fast (the block reader, the store's entries without frames, worker processes):
docs/count.md, "How ``--total`` stays fast". The one
:class:`copilot_logs.ingest.calls.CallCounter` counts, so the figures and the warnings are
``count``'s. No polars is imported on this path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from copilot_logs import store
from copilot_logs.ingest import reader
from copilot_logs.ingest.calls import CallCounter, Figures
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadState

__all__ = ["Counted", "Totals", "count_file", "count_sources"]

Counted = tuple[Figures, "ReadState | None"]
"""A file's figures, and how far its read got (None for standard input or a file that cannot
be read)."""


def count_file(source: Source, since: store.Found | None = None) -> Counted:
    """A file's figures, read whole, or from where its entry stopped when the file only grew
    (``since``, its lookup in the store). Nothing past the size it has when opened is read: a
    log appended to faster than it is read cannot keep the count going."""
    resume = _resume(source, since)
    counter = CallCounter()
    if resume is not None and since is not None and since.header is not None:
        counter = CallCounter.going_on(since.header.figures)
    events, state, damage = reader.count_calls(source, counter, resume)
    unreadable = resume is None and events == 0 and bool(damage)
    return counter.figures(damage, unreadable), state


def _resume(source: Source, since: store.Found | None) -> ReadState | None:
    """Where the read of a file that only grew goes on (None: it is read whole)."""
    if since is None or since.header is None or since.state is not store.State.GROWN:
        return None
    seen = store.seen_ids(source, since)
    return None if seen is None else msgspec.structs.replace(since.header.read, seen_ids=seen)


Job = tuple[Source, "store.Found"]


def _count_and_keep(jobs: Sequence[Job], use_cache: bool) -> list[Figures]:
    results = []
    for source, found in jobs:
        figures, state = _count_one(source, found)
        if use_cache and found.stamp is not None and state is not None:
            store.write(source, found.stamp, state, figures, None, found=found)
        results.append(figures)
    return results


def _count_one(source: Source, found: store.Found) -> Counted:
    try:
        return count_file(source, since=found)
    except Exception:  # from one log's content: the other files are still counted
        from copilot_logs.errors import failed_on_session

        damage = ((0, "unprocessable", failed_on_session(), None, None),)
        return Figures(damage=damage, unreadable=True), None


@dataclass
class Totals:
    """The selection's totals, and the damage met on the way."""

    llm_calls: int = 0
    subagent_calls: int = 0
    damage: list[tuple[str, int, str, str, int | None, int | None]] = field(default_factory=list)
    unreadable: bool = False

    def add(self, source: Source, figures: Figures) -> None:
        self.llm_calls += figures.llm_calls
        self.subagent_calls += figures.subagent_calls
        if figures.damage:
            name = source.name
            self.damage.extend((name, *row) for row in figures.damage)
        self.unreadable = self.unreadable or figures.unreadable


def count_sources(sources: Iterable[Source], *, use_cache: bool = True) -> Totals:
    """Totals of every source: from the store's headers, or read (and written to the store
    unless ``use_cache`` is false)."""
    totals = Totals()
    jobs: list[Job] = []
    for source in sources:
        found = store.find(source) if use_cache else store.Found(store.State.MISS, None)
        if found.state is store.State.FRESH and found.header is not None:
            totals.add(source, found.header.figures)
            continue
        jobs.append((source, found))
    sizes = [
        source.size - found.header.end
        if found.state is store.State.GROWN and found.header is not None
        else source.size
        for source, found in jobs
    ]
    for (source, _), figures in zip(jobs, _run(jobs, sizes, use_cache), strict=True):
        totals.add(source, figures)
    if use_cache and jobs:
        store.prune()
    return totals


def _run(jobs: list[Job], sizes: list[int], use_cache: bool) -> list[Figures]:
    """Count the jobs, on ``plan.workers`` processes when there is enough to read: this one
    and ``plan.workers - 1`` workers. The pool takes batches from the first, two a worker at a
    time, and this process from the last. (No batch is handed out and then taken back: a
    future cancelled that way breaks Python 3.11's pool when a worker dies.)"""
    if not jobs:
        return []  # every file was in the store: no worker module to import
    from copilot_logs.store import pool as parallel

    plan = parallel.plan(sum(sizes), frames=False)
    if plan.workers < 2 or any(source.path is None for source, _ in jobs):
        return _count_and_keep(jobs, use_cache)
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    batches = parallel.balance(jobs, sizes, plan.workers * 32)
    done: list[list[Figures] | None] = [None] * len(batches)
    todo = list(range(len(batches)))
    with parallel.executor(plan.workers - 1, frames=False) as pool:
        # Handing a worker its first batch waits until it has started (its fork server imports
        # the reader first, a tenth of a second): the first batches are handed out from another
        # thread, and this process reads meanwhile.
        first = todo[: 2 * (plan.workers - 1)]
        del todo[: len(first)]

        def hand_first() -> dict[Future[list[Figures]], int]:
            return {pool.submit(_count_and_keep, batches[i], use_cache): i for i in first}

        with ThreadPoolExecutor(1) as starter:
            handed = starter.submit(hand_first)
            while todo and not handed.done():
                index = todo.pop()
                done[index] = _count_and_keep(batches[index], use_cache)
            running = handed.result()
        while todo or running:
            while todo and len(running) < 2 * (plan.workers - 1):
                index = todo.pop(0)
                running[pool.submit(_count_and_keep, batches[index], use_cache)] = index
            if todo:
                index = todo.pop()
                done[index] = _count_and_keep(batches[index], use_cache)
            else:  # (waking up now and then: see pool.as_done)
                wait(running, timeout=parallel.WAKE_SECONDS, return_when=FIRST_COMPLETED)
            for future in [future for future in running if future.done()]:
                done[running.pop(future)] = future.result()
    totals = {
        id(job): total
        for batch, counted in zip(batches, done, strict=True)
        for job, total in zip(batch, counted or [], strict=True)
    }
    return [totals[id(job)] for job in jobs]
