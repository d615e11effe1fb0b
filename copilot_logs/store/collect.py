"""Reading many session logs: in batches, through the store, on several cores when it pays.

Every command's core function works per file, so a command maps it over batches of files
(``map_batches``) and keeps only its small result per batch: memory stays bounded by one batch
per worker (:func:`copilot_logs.store.pool.plan`), not by the corpus. Logs held in memory
(``watch``'s new lines, a Spark executor's batch) are read by the same batch reader. A warm run
answers from the store's headers alone (:func:`recall`): it reads no events.
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
from copilot_logs.store.entry import (
    Found,
    Header,
    Result,
    Rows,
    State,
    diagnostics_of,
    frame_of,
    no_gc,
    rows_of,
)

T = TypeVar("T")

OnRead = Callable[[Source], None]


def batches(
    sources: Sequence[Source], limit: int, sizes: Sequence[int] | None = None
) -> list[list[int]]:
    """The indexes of consecutive sources in batches of about ``limit`` bytes (``sizes``, else
    their size on disk)."""
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
    """Files, each maybe going on from where an earlier read stopped, read together."""
    return _isolated(jobs, read_many)


def read_held(jobs: Sequence[tuple[Source, bytes, ReadState | None]]) -> Parsed:
    """Logs held in memory (a Spark executor's, ``watch``'s new lines), read as files are."""
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


UNPROCESSABLE = "unprocessable"  # the diagnostic of a file copilot-logs failed on (E125)


def unprocessable(file: str, session_id: str) -> pl.DataFrame:
    """The diagnostic of a file a command failed on, naming the exception being handled."""
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
    """``fn`` of a batch; through the store when ``found`` (each source's entry) is given, the
    entries written with ``fn``'s value under ``key``."""
    if found is None:
        return _batch_result(read_files([(source, None) for source in sources])[0], fn)
    result, pending = store.read(sources, read_files, found)
    value, result, whole = _mapped(result, fn)
    store.keep(pending, key if whole else None, value)
    return BatchResult(value, result.diagnostics, _with_events(result))


def map_held(logs: Sequence[tuple[Source, bytes]], fn: Callable[[ReadResult], T]) -> BatchResult[T]:
    """``fn`` of a batch of logs held in memory (a Spark executor's), as of a batch of files."""
    return _batch_result(read_held([(source, data, None) for source, data in logs])[0], fn)


def _batch_result(result: ReadResult, fn: Callable[[ReadResult], T]) -> BatchResult[T]:
    value, result, _ = _mapped(result, fn)
    return BatchResult(value, result.diagnostics, _with_events(result))


def _with_events(result: ReadResult) -> list[str]:
    return result.events["file"].unique().to_list()


def _mapped(result: ReadResult, fn: Callable[[ReadResult], T]) -> tuple[T, ReadResult, bool]:
    """``fn`` of a batch, what it was given, and whether that was the whole batch."""
    try:
        return fn(result), result, True
    except CopilotLogsError:
        raise  # raised on purpose (export cannot write its folder): no log's fault
    except Exception:  # from one log's content: the other sessions are still mapped
        value, rest = _file_by_file(result, fn)
        return value, rest, False


def _file_by_file(result: ReadResult, fn: Callable[[ReadResult], T]) -> tuple[T, ReadResult]:
    """``fn`` of a batch it raised on: each file is tried alone, and those it still raises on
    are left out with an ``unprocessable`` diagnostic (their others kept, so they are listed)."""
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
    """``fn`` (picklable: a module-level function or a partial of one) applied to each batch of
    sources, in worker processes when there is a lot to parse; results in the order batches
    finish. With ``use_cache`` the batches are read through the store (``found``: each log's
    :func:`~copilot_logs.store.look_up`, when the caller has it), and unless ``remember`` is
    false (a function whose work is a side effect, export's) the unchanged logs whose entry
    holds ``fn``'s value are answered from their headers alone (:func:`recall`)."""
    if not sources:
        return
    looked = (found or store.look_up(sources)) if use_cache else None
    key = store.describe(fn) if use_cache and remember else None
    rest = list(range(len(sources)))
    if looked is not None and key is not None:
        recalled, rest = recall(sources, looked, key)
        for done, logs in recalled:
            _notify(logs, on_read)
            yield cast(BatchResult[T], done)
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
    """Every source's events and diagnostics in one ReadResult, through the store with
    ``use_cache`` (memory grows with the selection: commands use :func:`map_batches`)."""
    return ReadResult.concat(
        done.value for done in map_batches(sources, _same, use_cache=use_cache, on_read=on_read)
    )


Member = tuple[Source, Header, bool, list[Rows]]  # a log, its header, is_tuple, its frames' rows


def recall(
    sources: Sequence[Source], found: Sequence[Found], key: str
) -> tuple[list[tuple[BatchResult[object], list[Source]]], list[int]]:
    """The value the function described by ``key`` gave for the unchanged logs whose entry
    holds it, from their headers (one value per schema the logs' rows have), with those logs;
    and the indexes of the other sources, to be read."""
    groups: dict[object, list[tuple[int, Member]]] = {}
    rest: list[int] = []
    recalled = []
    with no_gc():
        for index, (source, looked) in enumerate(zip(sources, found, strict=True)):
            result = _result(looked, key)
            frames = rows_of(result) if result is not None else None
            if result is None or frames is None or looked.header is None:
                rest.append(index)
                continue
            shape = (result.is_tuple, *(tuple(rows.schema) for rows in frames))
            groups.setdefault(shape, []).append(
                (index, (source, looked.header, result.is_tuple, frames))
            )
        for members in groups.values():
            built = _build([member for _, member in members])
            if built is None:
                rest.extend(index for index, _ in members)
            else:
                recalled.append((built, [member[0] for _, member in members]))
    return recalled, sorted(rest)


def _result(found: Found, key: str) -> Result | None:
    header = found.header
    if found.state is not State.FRESH or header is None or header.body is None:
        return None
    return next((result for result in header.results if result.key == key), None)


def _build(members: list[Member]) -> BatchResult[object] | None:
    """The value of logs whose rows have one schema; None when the rows do not fit it."""
    names = [source.name for source, _, _, _ in members]
    headers = [header for _, header, _, _ in members]
    rows = [frames for _, _, _, frames in members]
    try:
        frames = [
            frame_of([(name, mine[at]) for name, mine in zip(names, rows, strict=True)])
            for at in range(len(rows[0]))
        ]
        diagnostics = diagnostics_of(zip(names, headers, strict=True))
    except (ValueError, TypeError, OverflowError, RecursionError, pl.exceptions.PolarsError):
        return None
    if not frames:
        return None
    value: object = tuple(frames) if members[0][2] else frames[0]
    with_events = [
        name for name, header in zip(names, headers, strict=True) if header.body and header.body[2]
    ]
    return BatchResult(value, diagnostics, with_events)
