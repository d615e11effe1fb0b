"""Reading many session logs: in batches, through the store, on several cores when it pays.

Every command's core function works per file, so a command maps it over batches of files
(``map_batches``) and keeps only its small result per batch: memory stays bounded by one batch
per worker (see :func:`copilot_logs.store.pool.plan`), or one larger file, not by the corpus.
Logs held in memory are read by the same batch reader, with the same fallback: ``watch``'s new
lines (:func:`read_held`) and a Spark executor's batch (:func:`map_held`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import polars as pl

from copilot_logs import store
from copilot_logs.errors import CopilotLogsError, failed_on_session
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult, ReadState, read_many, read_many_bytes
from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA, empty_events
from copilot_logs.store import pool as pool_store
from copilot_logs.store import recall

T = TypeVar("T")

OnRead = Callable[[Source], None]


def batches(
    sources: Sequence[Source], limit: int, sizes: Sequence[int] | None = None
) -> list[list[int]]:
    """The indexes of consecutive sources in batches of about ``limit`` bytes (``sizes``, else
    their size on disk), at least one source each."""
    groups: list[list[int]] = [[]]
    total = 0
    for index, size in enumerate(sizes if sizes is not None else [s.size for s in sources]):
        if groups[-1] and total + size > limit:
            groups.append([])
            total = 0
        groups[-1].append(index)
        total += size
    return [group for group in groups if group]


Parsed = tuple[ReadResult, list[ReadState | None]]
Job = TypeVar("Job", tuple[Source, ReadState | None], tuple[Source, bytes, ReadState | None])


def read_files(jobs: Sequence[tuple[Source, ReadState | None]]) -> Parsed:
    """Files, each maybe going on from where an earlier read stopped, read together (see
    :func:`_isolated`)."""
    return _isolated(jobs, read_many)


def read_held(jobs: Sequence[tuple[Source, bytes, ReadState | None]]) -> Parsed:
    """Logs held in memory (Spark's executors are handed each file's bytes; ``watch`` reads
    what was appended), each maybe going on from where an earlier read stopped, read together
    as a batch of files is (see :func:`_isolated`)."""
    return _isolated(jobs, read_many_bytes)


def _isolated(jobs: Sequence[Job], read: Callable[[Sequence[Job]], Parsed]) -> Parsed:
    """The jobs read together; when that raises, each alone, and a log whose reading still
    raises gives an ``unprocessable`` diagnostic instead of its events."""
    try:
        return read(jobs)
    except Exception:  # from one log's content: the other logs are still read
        if len(jobs) == 1:
            source = jobs[0][0]
            return ReadResult(empty_events(), unprocessable(source.name, source.session_hint)), [
                None
            ]
        parts = [_isolated([job], read) for job in jobs]
        return ReadResult.concat(p[0] for p in parts), [p[1][0] for p in parts]


UNPROCESSABLE = "unprocessable"
"""The diagnostic kind of a file copilot-logs failed on (rule E125)."""


def unprocessable(file: str, session_id: str) -> pl.DataFrame:
    """The diagnostic of a file whose events a command failed on (the exception being
    handled is named in it)."""
    return pl.DataFrame(
        [(session_id, file, 0, 0, UNPROCESSABLE, failed_on_session(), None, None, None)],
        schema=DIAGNOSTICS_SCHEMA,
        orient="row",
    )


@dataclass
class BatchResult(Generic[T]):
    """What one batch leaves behind: the mapped value and what to report about the read."""

    value: T
    diagnostics: pl.DataFrame
    files_with_events: list[str]


def _run_batch(
    sources: Sequence[Source],
    fn: Callable[[ReadResult], T],
    key: str | None,
    found: Sequence[store.Found] | None,
) -> BatchResult[T]:
    """``fn`` of a batch. Through the store (when ``found``, each source's entry, is given):
    the frames from the entries where they serve, and the entries written with ``fn``'s
    value (under ``key``, when it splits by file)."""
    if found is None:
        return _batch_result(read_files([(source, None) for source in sources])[0], fn)
    result, pending = store.read(sources, read_files, found)
    value, result, whole = _mapped(result, fn)
    store.keep(pending, key if whole else None, value)
    return BatchResult(value, result.diagnostics, _with_events(result))


def map_held(logs: Sequence[tuple[Source, bytes]], fn: Callable[[ReadResult], T]) -> BatchResult[T]:
    """``fn`` of a batch of logs held in memory (what a Spark executor is handed), read and
    mapped as a batch of files is read and mapped here without the store."""
    return _batch_result(read_held([(source, data, None) for source, data in logs])[0], fn)


def _batch_result(result: ReadResult, fn: Callable[[ReadResult], T]) -> BatchResult[T]:
    value, result, _ = _mapped(result, fn)
    return BatchResult(value, result.diagnostics, _with_events(result))


def _with_events(result: ReadResult) -> list[str]:
    return result.events["file"].unique().to_list()


def _mapped(result: ReadResult, fn: Callable[[ReadResult], T]) -> tuple[T, ReadResult, bool]:
    """``fn`` of a batch, what it was given, and whether that was the whole batch (see
    :func:`_file_by_file`)."""
    try:
        return fn(result), result, True
    except CopilotLogsError:
        raise  # raised on purpose (export cannot write its folder): no log's fault
    except Exception:  # from one log's content: the other sessions are still mapped
        value, rest = _file_by_file(result, fn)
        return value, rest, False


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
    found: Sequence[store.Found] | None = None,
) -> Iterator[BatchResult[T]]:
    """``fn`` applied to each batch of sources, in worker processes when there is a lot to
    parse. ``fn`` must be picklable for that (a module-level function or a partial of one).
    Results come in the order batches finish.

    With ``use_cache`` the batches are read through the store (:mod:`copilot_logs.store`),
    each log looked up once (``found``, when the caller did it already): unless ``remember``
    is false (a function whose work is a side effect, such as export's), the unchanged logs
    whose entry holds ``fn``'s value are answered from their headers alone, in this process;
    the others come from their entries' frames when unchanged, are read from where their entry
    stopped when they grew, are read whole otherwise, and their entries are written with
    ``fn``'s value when it splits by file.
    """
    if not sources:
        return
    looked = (found or store.look_up(sources)) if use_cache else None
    key = store.describe(fn) if use_cache and remember else None
    rest = list(range(len(sources)))
    if looked is not None and key is not None:
        recalled, rest = recall.recall(sources, looked, key)
        for done in recalled:
            _notify(done.sources, on_read)
            yield BatchResult(cast(T, done.value), done.diagnostics, done.files_with_events)
    todo = [sources[index] for index in rest]
    todo_found = [looked[index] for index in rest] if looked is not None else None
    yield from _map_rest(todo, fn, key, todo_found, on_read)


def _map_rest(
    sources: list[Source],
    fn: Callable[[ReadResult], T],
    key: str | None,
    found: list[store.Found] | None,
    on_read: OnRead | None,
) -> Iterator[BatchResult[T]]:
    """:func:`map_batches` of what the store did not answer."""
    if not sources:
        return
    stdin = any(source.path is None for source in sources)
    sizes = [f.stamp.size if f.stamp else 0 for f in found] if found is not None else None
    to_read = 0 if stdin else pool_store.to_read(sources, found)
    plan = pool_store.plan(to_read)
    groups = batches(sources, plan.batch_bytes, sizes)
    jobs = [
        ([sources[i] for i in group], [found[i] for i in group] if found is not None else None)
        for group in groups
    ]
    if plan.workers < 2 or len(groups) < 2:
        for group, looked in jobs:
            done = _run_batch(group, fn, key, looked)
            _notify(group, on_read)
            yield done
    else:
        with pool_store.executor(plan.workers, frames=True) as pool:
            futures = {
                pool.submit(_run_batch, group, fn, key, looked): group for group, looked in jobs
            }
            for future in pool_store.as_done(futures):
                _notify(futures[future], on_read)
                yield future.result()
    if found is not None and (to_read or stdin):
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
