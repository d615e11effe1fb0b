"""The events cache: every file's events and diagnostics frames, kept in one Arrow store.

One store rather than a file per session, because reading thousands of small files costs far
more than one contiguous read. Each file's rows are remembered with the file's size and
modification time (the index is a :class:`copilot_logs.cache.JsonCache`): an unchanged file is
served from the store; a file that only grew is read from where the cached part ended (its
first new event must continue the parentId chain, or the whole file is read again); any other
change means a full re-read. The store is rewritten only when something was read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from copilot_logs.cache import JsonCache, cache_dir
from copilot_logs.envelope import Source
from copilot_logs.reader import ReadResult, ReadState, Resume
from copilot_logs.schema import DIAGNOSTICS_SCHEMA, EVENTS_SCHEMA

NAME = "events"

Job = tuple[Source, Resume | None]
Parse = Callable[[Sequence[Job]], tuple[ReadResult, list[ReadState | None]]]


@dataclass(frozen=True)
class _Stat:
    source: Source
    key: str
    size: int
    mtime: int


class EventStore:
    """The store and its index in a cache folder (by default the user's cache folder)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or cache_dir()
        self.index = JsonCache(NAME, self.folder)
        self.events_path = self.folder / f"{NAME}-v1.arrow"
        self.diagnostics_path = self.folder / f"{NAME}-diagnostics-v1.arrow"

    def _load(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        try:
            events = pl.read_ipc(self.events_path)
            diagnostics = pl.read_ipc(self.diagnostics_path)
            if events.schema != EVENTS_SCHEMA or diagnostics.schema != DIAGNOSTICS_SCHEMA:
                raise ValueError("the store was written by another version")
        except (OSError, ValueError, pl.exceptions.PolarsError):
            self.index.entries = {}
            return pl.DataFrame(schema=EVENTS_SCHEMA), pl.DataFrame(schema=DIAGNOSTICS_SCHEMA)
        return events, diagnostics

    def read(self, sources: Sequence[Source], parse: Parse) -> ReadResult:
        """Every source's frames: from the store when unchanged, else via ``parse``."""
        fresh: dict[str, _Stat] = {}
        grown: dict[str, _Stat] = {}
        misses: list[Source] = []
        stats: dict[Source, _Stat] = {}
        for source in sources:
            stamp = JsonCache.stamp(source.path) if source.path is not None else None
            if stamp is None:
                misses.append(source)
                continue
            stat = _Stat(source, *stamp)
            stats[source] = stat
            entry = self.index.entries.get(stat.key)
            if entry is None:
                misses.append(source)
            elif entry["size"] == stat.size and entry["mtime_ns"] == stat.mtime:
                fresh[stat.key] = stat
            elif 0 < entry["size"] < stat.size and entry.get("end") == entry["size"]:
                grown[stat.key] = stat
            else:
                misses.append(source)
        events, diagnostics = self._load() if fresh or grown else (pl.DataFrame(), pl.DataFrame())
        held = _held(events, self.index.entries, [*fresh, *grown]) if fresh or grown else {}
        for table in (fresh, grown):
            for key in [k for k in table if k not in held]:
                misses.append(table.pop(key).source)  # store and index disagree: read again
        served = _rows_of(events, diagnostics, fresh)
        jobs: list[Job] = [(source, None) for source in misses]
        cached_parts: dict[Source, ReadResult] = {}
        for key, stat in grown.items():
            part = _rows_of(events, diagnostics, {key: stat})
            entry = self.index.entries[key]
            cached_parts[stat.source] = part
            resume = Resume(
                offset=entry["end"],
                line=entry["next_line"],
                last_id=entry["last_id"],
                seen_ids=frozenset(part.events["event_id"].drop_nulls().to_list()),
                session_id=entry["session_id"],
            )
            jobs.append((stat.source, resume))
        parsed, states = parse(jobs)
        broken = _broken_continuations(parsed, jobs)
        if broken:
            # The new bytes do not continue the cached part: read those files whole.
            again, again_states = parse([(source, None) for source in broken])
            parsed = ReadResult.concat([_without(parsed, {s.name for s in broken}), again])
            kept = [
                (job, state)
                for job, state in zip(jobs, states, strict=True)
                if job[0] not in broken
            ]
            jobs = [job for job, _ in kept] + [(source, None) for source in broken]
            states = [state for _, state in kept] + again_states
            for source in broken:
                del cached_parts[source]
        fresh_rows = ReadResult.concat([*cached_parts.values(), parsed])
        self._save(events, diagnostics, fresh_rows, jobs, states, stats)
        return ReadResult.concat([served, fresh_rows])

    def _save(
        self,
        events: pl.DataFrame,
        diagnostics: pl.DataFrame,
        read: ReadResult,
        jobs: list[Job],
        states: list[ReadState | None],
        stats: dict[Source, _Stat],
    ) -> None:
        """Rewrite the store with what was read; a store that cannot be written is simply not
        kept (the next run reads the files again)."""
        updates = [
            (stats[source], state)
            for (source, _), state in zip(jobs, states, strict=True)
            if source in stats and state is not None
        ]
        if not updates:
            return
        if events.width == 0:
            events, diagnostics = self._load()
        keys = {stat.source.name: stat.key for stat, _ in updates}
        counts = dict(read.events.group_by("file").len().iter_rows())

        def keyed(frame: pl.DataFrame) -> pl.DataFrame:
            return frame.filter(pl.col("file").is_in(list(keys))).with_columns(
                pl.col("file").replace_strict(keys, return_dtype=pl.String)
            )

        stale = list(keys.values())
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for frame, path in (
                (
                    pl.concat([events.filter(~pl.col("file").is_in(stale)), keyed(read.events)]),
                    self.events_path,
                ),
                (
                    pl.concat(
                        [diagnostics.filter(~pl.col("file").is_in(stale)), keyed(read.diagnostics)]
                    ),
                    self.diagnostics_path,
                ),
            ):
                temporary = path.with_suffix(f".{os.getpid()}.tmp")
                frame.write_ipc(temporary, compression="lz4")
                temporary.replace(path)
        except OSError:
            return
        for stat, state in updates:
            self.index.put(
                stat.key,
                stat.size,
                stat.mtime,
                end=state.end,
                next_line=state.next_line,
                last_id=state.last_id,
                session_id=state.session_id,
                events=counts.get(stat.source.name, 0),
            )
        self.index.save()


def _held(events: pl.DataFrame, entries: dict[str, Any], keys: list[str]) -> set[str]:
    """The keys whose rows in the store are all there (as many as the index says)."""
    counts = dict(events.filter(pl.col("file").is_in(keys)).group_by("file").len().iter_rows())
    return {key for key in keys if counts.get(key, 0) == entries[key].get("events")}


def _rows_of(
    events: pl.DataFrame, diagnostics: pl.DataFrame, stats: dict[str, _Stat]
) -> ReadResult:
    """The stored rows of some files, under the names the caller gave them."""
    if not stats:
        return ReadResult.concat([])
    names = {key: stat.source.name for key, stat in stats.items()}
    keys = list(names)

    def pick(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("file").is_in(keys)).with_columns(
            pl.col("file").replace_strict(names, return_dtype=pl.String)
        )

    return ReadResult(pick(events), pick(diagnostics))


def _broken_continuations(parsed: ReadResult, jobs: list[Job]) -> list[Source]:
    """Resumed sources whose appended part does not continue the cached one: its first
    event's parentId is not the cached part's last event id."""
    resumed = {source.name: (source, resume) for source, resume in jobs if resume is not None}
    if not resumed:
        return []
    first_parents = dict(
        parsed.events.filter(pl.col("file").is_in(list(resumed)))
        .group_by("file", maintain_order=True)
        .agg(pl.col("parent_id").first())
        .iter_rows()
    )
    return [
        source
        for name, (source, resume) in resumed.items()
        if name in first_parents and first_parents[name] != resume.last_id
    ]


def _without(result: ReadResult, names: set[str]) -> ReadResult:
    keep = ~pl.col("file").is_in(list(names))
    return ReadResult(result.events.filter(keep), result.diagnostics.filter(keep))
