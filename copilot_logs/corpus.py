"""Reading many session logs: in batches, through the store, on several cores when it pays.

Every command's core function works per file, so a command maps it over batches of files
(``map_batches``) and keeps only its small result per batch: memory stays bounded by one batch
per worker (see :func:`copilot_logs.parallel.plan`), or one larger file, not by the corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import polars as pl

from copilot_logs import parallel, store
from copilot_logs.envelope import Source
from copilot_logs.reader import ReadResult, read_many

T = TypeVar("T")

OnRead = Callable[[Source], None]


def batches(sources: Sequence[Source], limit: int) -> list[list[Source]]:
    """Consecutive sources in batches of about ``limit`` bytes, at least one source each."""
    groups: list[list[Source]] = [[]]
    total = 0
    for source in sources:
        size = source.size
        if groups[-1] and total + size > limit:
            groups.append([])
            total = 0
        groups[-1].append(source)
        total += size
    return [group for group in groups if group]


@dataclass
class BatchResult(Generic[T]):
    """What one batch leaves behind: the mapped value and what to report about the read."""

    value: T
    diagnostics: pl.DataFrame
    files_with_events: list[str]


def _run_batch(
    sources: Sequence[Source], fn: Callable[[ReadResult], T], use_cache: bool, remember: bool
) -> BatchResult[T]:
    """``fn`` of a batch. Through the store (``use_cache``): answered from the entries alone
    when they all hold ``fn``'s value (a value that splits by file is kept per log), else
    computed from the frames, and the entries written with the value."""
    if not use_cache:
        result = read_many([(source, None) for source in sources])[0]
        return BatchResult(fn(result), result.diagnostics, _with_events(result))
    key = store.describe(fn) if remember else None
    recalled = store.recall(sources, key) if key is not None else None
    if recalled is not None:
        value = cast(T, recalled.value)
        return BatchResult(value, recalled.diagnostics, recalled.files_with_events)
    result, pending = store.read(sources)
    value = fn(result)
    store.keep(pending, key, value)
    return BatchResult(value, result.diagnostics, _with_events(result))


def _with_events(result: ReadResult) -> list[str]:
    return result.events["file"].unique().to_list()


def map_batches(
    sources: Sequence[Source],
    fn: Callable[[ReadResult], T],
    *,
    use_cache: bool = False,
    on_read: OnRead | None = None,
    remember: bool = True,
) -> Iterator[BatchResult[T]]:
    """``fn`` applied to each batch of sources, in worker processes when there is a lot to
    parse. ``fn`` must be picklable for that (a module-level function or a partial of one).
    Results come in the order batches finish.

    With ``use_cache`` the batches are read through the store (:mod:`copilot_logs.store`):
    unchanged files come from their entries, grown ones are read from where their entry
    stopped, and what was read is written back; unless ``remember`` is false (a function
    whose work is a side effect, such as export's), ``fn``'s value is kept in the entries when
    it splits by file, and a later run with the same logs is answered from them.
    """
    if not sources:
        return
    stdin = any(source.path is None for source in sources)
    to_read = 0 if stdin else parallel.to_read(sources, use_cache)
    plan = parallel.plan(to_read)
    groups = batches(sources, plan.batch_bytes)
    if plan.workers < 2 or len(groups) < 2:
        for group in groups:
            done = _run_batch(group, fn, use_cache, remember)
            _notify(group, on_read)
            yield done
    else:
        with parallel.executor(plan.workers, frames=True) as pool:
            futures = {
                pool.submit(_run_batch, group, fn, use_cache, remember): group for group in groups
            }
            for future in as_completed(futures):
                _notify(futures[future], on_read)
                yield future.result()
    if use_cache and (to_read or stdin):
        store.prune()


def _notify(group: Sequence[Source], on_read: OnRead | None) -> None:
    if on_read is not None:
        for source in group:
            on_read(source)


def _same(result: ReadResult) -> ReadResult:
    return result


def read_all(
    sources: Sequence[Source], *, use_cache: bool = False, on_read: OnRead | None = None
) -> ReadResult:
    """Every source's events and diagnostics in one ReadResult (memory grows with the
    selection: commands use :func:`map_batches` instead).

    With ``use_cache`` unchanged files come from the store and grown ones are read from
    where their entry stopped (see :mod:`copilot_logs.store`).
    """
    return ReadResult.concat(
        done.value for done in map_batches(sources, _same, use_cache=use_cache, on_read=on_read)
    )
