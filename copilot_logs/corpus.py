"""Reading many session logs: in batches, through the events cache, on every core when it pays.

Every command's core function works per file, so a command maps it over batches of files
(``map_batches``) and keeps only its small result per batch: memory stays bounded by one batch
(about BATCH_BYTES of input, or one larger file), not by the corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import polars as pl

from copilot_logs import parallel
from copilot_logs.envelope import Source
from copilot_logs.errors import failed_on_session
from copilot_logs.parallel import bytes_to_parse, worker_context, worker_count
from copilot_logs.reader import ReadResult, ReadState, read_many
from copilot_logs.result_cache import ResultCache
from copilot_logs.schema import DIAGNOSTICS_SCHEMA, empty_events
from copilot_logs.store import EventStore, Job, Updates

T = TypeVar("T")

BATCH_BYTES = 24 << 20
"""Files are read and reduced in batches of about this much input."""

OnRead = Callable[[Source], None]


def batches(sources: Sequence[Source], limit: int | None = None) -> list[list[Source]]:
    """Consecutive sources in batches of about ``limit`` (BATCH_BYTES) bytes, at least one
    source each. (A new or grown file seldom moves more than one or two batch ends: the
    results cache still serves the other batches.)"""
    limit = limit or BATCH_BYTES
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


def _parse(jobs: Sequence[Job]) -> tuple[ReadResult, list[ReadState | None]]:
    """The jobs read together; when that raises, each alone, and a file whose reading still
    raises gives an ``unprocessable`` diagnostic instead of its events."""
    try:
        return read_many(jobs)
    except Exception:  # from one log's content: the other logs are still read
        if len(jobs) == 1:
            source = jobs[0][0]
            return ReadResult(empty_events(), unprocessable(source.name, source.session_hint)), [
                None
            ]
        parts = [_parse([job]) for job in jobs]
        return ReadResult.concat(p[0] for p in parts), [p[1][0] for p in parts]


UNPROCESSABLE = "unprocessable"
"""The diagnostic kind of a file copilot-logs failed on (rule E125)."""


def unprocessable(file: str, session_id: str) -> pl.DataFrame:
    """The diagnostic of a file whose events a command failed on (the exception being
    handled is named in it)."""
    return pl.DataFrame(
        [(session_id, file, 0, 0, UNPROCESSABLE, failed_on_session(), None)],
        schema=DIAGNOSTICS_SCHEMA,
        orient="row",
    )


@dataclass
class BatchResult(Generic[T]):
    """What one batch leaves behind: the mapped value and what to report about the read."""

    value: T
    diagnostics: pl.DataFrame
    files_with_events: list[str]
    updates: Updates = field(default_factory=dict)


def _run_batch(
    sources: Sequence[Source], fn: Callable[[ReadResult], T], use_cache: bool
) -> BatchResult[T]:
    if use_cache:
        result, updates = EventStore().read(sources, _parse)
    else:
        result, updates = _parse([(s, None) for s in sources])[0], {}
    try:
        value = fn(result)
    except Exception:  # from one log's content: the other sessions are still mapped
        value, result = _file_by_file(result, fn)
    return BatchResult(value, result.diagnostics, result.events["file"].unique().to_list(), updates)


def _file_by_file(result: ReadResult, fn: Callable[[ReadResult], T]) -> tuple[T, ReadResult]:
    """``fn`` of a batch it raised on: each file is tried alone, and the files it still raises
    on are left out, each with an ``unprocessable`` diagnostic (their other diagnostics are
    kept, so that they are still listed). Returns fn of the rest, and what it was given."""
    failed: list[pl.DataFrame] = []
    for (file,), events in result.events.group_by("file", maintain_order=True):
        diagnostics = result.diagnostics.filter(pl.col("file") == file)
        try:
            fn(ReadResult(events, diagnostics))
        except Exception:
            failed.append(unprocessable(str(file), str(events["session_id"][0])))
    left_out = [frame["file"][0] for frame in failed]
    rest = ReadResult(
        result.events.filter(~pl.col("file").is_in(left_out)),
        pl.concat([result.diagnostics, *failed]),
    )
    return fn(rest), rest


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
    Results come in the order batches finish; the cache index is updated at the end.

    With ``use_cache`` the batches are read through the events cache (:mod:`copilot_logs.store`)
    and, unless ``remember`` is false, a batch whose files and function are unchanged since an
    earlier run is served from the results cache (:mod:`copilot_logs.result_cache`) unread.
    """
    memo = ResultCache(fn) if use_cache and remember else None
    pending: list[list[Source]] = []
    keys: list[str | None] = []
    for group in batches(sources):
        key = memo.key(group) if memo is not None else None
        hit = memo.get(key) if memo is not None else None
        if isinstance(hit, BatchResult):
            _notify(group, on_read)
            yield hit
        else:
            pending.append(group)
            keys.append(key)
    for index, done in _computed(pending, fn, use_cache, on_read):
        if memo is not None:
            memo.put(keys[index], BatchResult(done.value, done.diagnostics, done.files_with_events))
        yield done
    if memo is not None and pending:
        memo.prune()


def _computed(
    groups: list[list[Source]],
    fn: Callable[[ReadResult], T],
    use_cache: bool,
    on_read: OnRead | None,
) -> Iterator[tuple[int, BatchResult[T]]]:
    """``fn`` of each group (with the group's index), read through the events cache when
    ``use_cache``, in the order they finish. The events cache index is updated at the end."""
    if not groups:
        return
    store = EventStore() if use_cache else None
    sources = [source for group in groups for source in group]
    workers = worker_count(len(groups))
    updates: Updates = {}
    if (
        workers < 2
        or any(s.path is None for s in sources)
        or bytes_to_parse(sources, store) < parallel.PARALLEL_BYTES
    ):
        for index, group in enumerate(groups):
            done = _run_batch(group, fn, use_cache)
            updates.update(done.updates)
            _notify(group, on_read)
            yield index, done
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=worker_context()) as pool:
            futures = {
                pool.submit(_run_batch, group, fn, use_cache): index
                for index, group in enumerate(groups)
            }
            for future in as_completed(futures):
                done = future.result()
                updates.update(done.updates)
                _notify(groups[futures[future]], on_read)
                yield futures[future], done
    if store is not None:
        store.apply(updates)


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

    With ``use_cache`` unchanged files come from the events cache and grown ones are read from
    where the cache stopped (see :mod:`copilot_logs.store`).
    """
    return ReadResult.concat(
        done.value
        for done in map_batches(
            sources, _same, use_cache=use_cache, on_read=on_read, remember=False
        )
    )
