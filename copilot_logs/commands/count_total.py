"""``count --total``: exact, at close to the speed of reading the bytes.

Each file is scanned by :mod:`copilot_logs.ingest.linescan`, which decodes every line for the few
fields a count needs and vouches for it when the full reader would read the same event from
it. At a line it cannot vouch for, the full reader reads the damaged lines, up to the next line
the scan vouches for, and the scan goes on after them with the reader's state (the ids seen,
the last id, the counter): so the damage is recovered and reported as ``count`` does, and the
figures are ``count``'s. Both feed the one :class:`copilot_logs.ingest.calls.CallCounter`.

Each file's figures are kept in the store (a header without frames, see
:mod:`copilot_logs.store`): an unchanged file is not opened again, and a clean file that grew
is scanned from where the entry stopped. Many bytes to count are shared between this process
and worker processes (see :func:`_run`). No polars is imported on this path, and the full
reader and the worker pool are imported only when needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from copilot_logs import store
from copilot_logs.ingest.calls import CallCounter
from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.linescan import Scanned, scan_file, window_end

if TYPE_CHECKING:
    from copilot_logs.ingest.events_frame import Diagnostics
    from copilot_logs.ingest.line_reader import Resume

__all__ = ["FileTotals", "Scan", "Scanned", "count_file", "scan_file", "scan_sources"]

Damage = tuple[tuple[int, str, str, "int | None", "int | None"], ...]
"""(line, kind, message, more_lines, new_lines) of each problem the full reader reported (a
file's first problems one by one, then a row per kind that sums up the rest: see
DIAGNOSTICS_SCHEMA)."""


@dataclass(frozen=True)
class FileTotals:
    """A file's figures, and what the store keeps to go on when the file grows."""

    llm_calls: int
    subagent_calls: int
    damage: Damage
    unreadable: bool
    """Nothing could be read: no event at all, only damage."""
    progress: store.Progress | None
    """None for standard input or a file that cannot be read."""


def count_file(source: Source, since: store.Header | None = None) -> FileTotals:
    """A file's figures: by the scan as far as it vouches for the lines (going on from an
    earlier read's entry ``since`` when the file only grew), and by the full reader, which
    recovers and reports damage, over the lines it does not (see :func:`_recover`). Nothing
    past the size the file has now is read: a log appended to faster than it is read cannot
    keep the count going (the command says when a log grew)."""
    limit = source.size
    if source.path is not None and since is not None:
        counter = CallCounter(since.messages)
        counter.llm_calls, counter.subagent_calls = since.llm_calls, since.subagent_calls
        scanned = _scan(source, counter, limit, since.end, since.next_line, since.last_id)
        if scanned is not None and scanned.whole:
            return _totals(counter, scanned, since.session_id)
    counter = CallCounter()
    scanned = _scan(source, counter, limit) if source.path is not None else None
    if scanned is not None and scanned.whole:
        return _totals(counter, scanned, None)
    return _recover(source, counter, scanned, limit)


MAX_WINDOWS = 16
"""Runs of damaged lines handed to the full reader one at a time before it reads the rest."""


def _recover(
    source: Source, counter: CallCounter, scanned: Scanned | None, limit: int
) -> FileTotals:
    """From the first line the scan did not vouch for: the full reader reads each run of
    damaged lines, through the next line the scan vouches for (where the reader holds nothing,
    see :func:`copilot_logs.ingest.linescan.window_end`), and the scan goes on after it with the
    reader's state; after MAX_WINDOWS runs, or when no such line follows, the reader reads the
    rest. ``counter`` holds what the scan counted."""
    from copilot_logs.ingest.events_frame import Diagnostics
    from copilot_logs.ingest.reader import count_calls

    diagnostics = Diagnostics()  # one for the file: its first problems listed, then counted
    diagnostics.start_file(source.name)
    events = scanned.line - 1 if scanned is not None else 0
    for _ in range(MAX_WINDOWS):
        if scanned is None or scanned.whole:
            break
        read = _window(source, counter, scanned, diagnostics, limit)
        if read is None:
            break
        scanned, more_events = read
        events += more_events
    if scanned is not None and scanned.whole:
        diagnostics.settle()
        damage = diagnostics.damage()
        progress = _progress(counter, scanned.offset, scanned.line, scanned.last_id, damage)
        return FileTotals(counter.llm_calls, counter.subagent_calls, damage, False, progress)
    resume = _resume_at(scanned) if scanned is not None and scanned.offset else None
    calls, damage = count_calls(source, counter, resume, diagnostics, limit)
    unreadable = events + calls.events == 0 and bool(damage)
    if calls.state is None:
        return FileTotals(counter.llm_calls, counter.subagent_calls, damage, unreadable, None)
    state = calls.state
    progress = dataclasses.replace(
        _progress(counter, state.end, state.next_line, state.last_id, damage),
        session_id=state.session_id,
        unreadable=unreadable,
    )
    return FileTotals(counter.llm_calls, counter.subagent_calls, damage, unreadable, progress)


def _window(
    source: Source, counter: CallCounter, scanned: Scanned, diagnostics: Diagnostics, limit: int
) -> tuple[Scanned, int] | None:
    """The full reader over one run of damaged lines, then the scan from after it: where that
    got, and how many events both read (None when the run has no end the scan vouches for)."""
    from copilot_logs.ingest.reader import count_window

    assert source.path is not None
    lines = window_end(source.path, scanned.offset, limit)
    if lines is None:
        return None
    read = count_window(lines, counter, _resume_at(scanned), diagnostics)
    state = read.state
    after = Scanned(state.end, state.next_line, state.last_id, read.seen_ids, whole=False)
    more = scan_file(
        source.path,
        counter,
        start=state.end,
        line=state.next_line,
        last_id=state.last_id,
        seen=read.seen_ids,
        limit=limit,
    )
    after = more if more is not None else after
    return after, read.events + after.line - state.next_line


def _resume_at(scanned: Scanned) -> Resume:
    """Where the full reader goes on after the scan."""
    from copilot_logs.ingest.line_reader import Resume

    return Resume(
        offset=scanned.offset,
        line=scanned.line,
        last_id=scanned.last_id,
        seen_ids=frozenset(scanned.seen),
        session_id=None,
    )


def _progress(
    counter: CallCounter,
    end: int,
    next_line: int,
    last_id: str | None,
    damage: Damage,
) -> store.Progress:
    """What the store keeps of a damaged file (it is read again whole if it grows)."""
    return store.Progress(
        end=end,
        next_line=next_line,
        last_id=last_id,
        session_id=None,
        clean=False,
        llm_calls=counter.llm_calls,
        subagent_calls=counter.subagent_calls,
        messages=counter.messages,
        damage=damage,
        unreadable=False,
    )


def _scan(
    source: Source,
    counter: CallCounter,
    limit: int,
    start: int = 0,
    line: int = 1,
    last_id: str | None = None,
) -> Scanned | None:
    """:func:`scan_file` of a source, up to byte ``limit``."""
    assert source.path is not None
    return scan_file(source.path, counter, start=start, line=line, last_id=last_id, limit=limit)


def _totals(counter: CallCounter, scanned: Scanned, session_id: str | None) -> FileTotals:
    progress = store.Progress(
        end=scanned.offset,
        next_line=scanned.line,
        last_id=scanned.last_id,
        session_id=session_id,
        clean=True,
        llm_calls=counter.llm_calls,
        subagent_calls=counter.subagent_calls,
        messages=counter.messages,
        damage=(),
        unreadable=False,
    )
    return FileTotals(counter.llm_calls, counter.subagent_calls, (), False, progress)


Job = tuple[Source, "store.Found", "store.Header | None"]
"""A file to count, its lookup in the store before the count, and its entry when the file
only grew."""


def _count_and_keep(jobs: Sequence[Job], use_cache: bool) -> list[FileTotals]:
    """Count each file (in a worker process when there are several) and write its entry."""
    results = []
    for source, found, since in jobs:
        totals = _count_one(source, since)
        if use_cache and found.stamp is not None and totals.progress is not None:
            store.write(source, found.stamp, totals.progress, None, found=found)
        results.append(totals)
    return results


def _count_one(source: Source, since: store.Header | None) -> FileTotals:
    try:
        return count_file(source, since=since)
    except Exception:  # from one log's content: the other files are still counted
        from copilot_logs.errors import failed_on_session

        damage: Damage = ((0, "unprocessable", failed_on_session(), None, None),)
        return FileTotals(0, 0, damage, unreadable=True, progress=None)


@dataclass
class Scan:
    """The selection's totals, and the damage met on the way (file, line, kind, message,
    more_lines, new_lines)."""

    llm_calls: int = 0
    subagent_calls: int = 0
    damage: list[tuple[str, int, str, str, int | None, int | None]] = field(default_factory=list)
    unreadable: bool = False

    def add(self, source: Source, totals: FileTotals | store.Header) -> None:
        self.llm_calls += totals.llm_calls
        self.subagent_calls += totals.subagent_calls
        if totals.damage:
            name = source.name
            self.damage.extend((name, *row) for row in totals.damage)
        self.unreadable = self.unreadable or totals.unreadable


def scan_sources(sources: Iterable[Source], *, use_cache: bool = True) -> Scan:
    """Totals of every source: from the store, scanned, or read in full, whichever each file
    allows; what was counted is written to the store (unless ``use_cache`` is false)."""
    scan = Scan()
    jobs: list[Job] = []
    for source in sources:
        found = store.find(source) if use_cache else store.Found(store.State.MISS, None)
        if found.state is store.State.FRESH and found.header is not None:
            scan.add(source, found.header)
            continue
        since = found.header if found.state is store.State.GROWN else None
        jobs.append((source, found, since))
    sizes = [_to_read(source, since) for source, _, since in jobs]
    for (source, _, _), totals in zip(jobs, _run(jobs, sizes, use_cache), strict=True):
        scan.add(source, totals)
    if use_cache and jobs:
        store.prune()
    return scan


def _to_read(source: Source, since: store.Header | None) -> int:
    return source.size - (since.end if since is not None else 0)


def _run(jobs: list[Job], sizes: list[int], use_cache: bool) -> list[FileTotals]:
    """Count the jobs, on ``plan.workers`` processes when there is enough to read: this one
    and ``plan.workers - 1`` workers. The pool takes batches from the first, two a worker at a
    time, and this process from the last, so it works while the workers start. (No batch is
    handed out and then taken back: a future cancelled that way breaks Python 3.11's pool when
    a worker dies, with a traceback.)"""
    if not jobs:
        return []  # every file was in the store: no worker module to import
    from concurrent.futures import FIRST_COMPLETED, Future, wait

    from copilot_logs.store import pool as parallel

    plan = parallel.plan(sum(sizes), frames=False)
    if plan.workers < 2 or any(source.path is None for source, _, _ in jobs):
        return _count_and_keep(jobs, use_cache)
    batches = parallel.balance(jobs, sizes, plan.workers * 8)
    done: list[list[FileTotals] | None] = [None] * len(batches)
    todo = list(range(len(batches)))
    with parallel.executor(plan.workers - 1, frames=False) as pool:
        running: dict[Future[list[FileTotals]], int] = {}
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
