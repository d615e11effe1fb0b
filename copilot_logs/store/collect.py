"""Reading many session logs: in batches, through the store, on several cores when it pays.

Every command's core function works per file, so a command maps it over batches of files
(``map_batches``) and keeps only its small result per batch: memory stays bounded by one batch
per worker (see :func:`copilot_logs.store.pool.plan`), or one larger file, not by the corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import polars as pl

from copilot_logs import store
from copilot_logs.errors import failed_on_session
from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.reader import ReadResult, ReadState, Resume, read_many
from copilot_logs.ingest.schema import DIAGNOSTICS_SCHEMA, empty_events
from copilot_logs.store import pool as pool_store

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


def _parse(
    jobs: Sequence[tuple[Source, Resume | None]],
) -> tuple[ReadResult, list[ReadState | None]]:
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


def _run_batch(
    sources: Sequence[Source], fn: Callable[[ReadResult], T], use_cache: bool, remember: bool
) -> BatchResult[T]:
    """``fn`` of a batch. Through the store (``use_cache``): answered from the entries alone
    when they all hold ``fn``'s value (a value that splits by file is kept per log), else
    computed from the frames, and the entries written with the value."""
    if not use_cache:
        result = _parse([(source, None) for source in sources])[0]
        value, result, _ = _mapped(result, fn)
        return BatchResult(value, result.diagnostics, _with_events(result))
    key = store.describe(fn) if remember else None
    recalled = store.recall(sources, key) if key is not None else None
    if recalled is not None:
        value = cast(T, recalled.value)
        return BatchResult(value, recalled.diagnostics, recalled.files_with_events)
    result, pending = store.read(sources, _parse)
    value, result, whole = _mapped(result, fn)
    store.keep(pending, key if whole else None, value)
    return BatchResult(value, result.diagnostics, _with_events(result))


def _with_events(result: ReadResult) -> list[str]:
    return result.events["file"].unique().to_list()


def _mapped(result: ReadResult, fn: Callable[[ReadResult], T]) -> tuple[T, ReadResult, bool]:
    """``fn`` of a batch, what it was given, and whether that was the whole batch (see
    :func:`_file_by_file`)."""
    try:
        return fn(result), result, True
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
    to_read = 0 if stdin else pool_store.to_read(sources, use_cache)
    plan = pool_store.plan(to_read)
    groups = batches(sources, plan.batch_bytes)
    if plan.workers < 2 or len(groups) < 2:
        for group in groups:
            done = _run_batch(group, fn, use_cache, remember)
            _notify(group, on_read)
            yield done
    else:
        with pool_store.executor(plan.workers, frames=True) as pool:
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
