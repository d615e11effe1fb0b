"""The events cache: every file's events and diagnostics frames, kept in Arrow segments.

Files are read in batches (see :mod:`copilot_logs.corpus`); what one batch read is written as
one segment, so a later run reads a few segments instead of thousands of small files, and never
more than the segments its batch needs. Each file's rows are remembered with the file's size
and modification time (the index is a :class:`copilot_logs.cache.JsonCache`): an unchanged file
is served from its segment; a file that only grew is read from where the cached part ended
(its first new event must continue the parentId chain, or the whole file is read again); any
other change means a full re-read. A segment none of whose files still points at it is deleted.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from copilot_logs.cache import JsonCache, cache_dir
from copilot_logs.envelope import Source
from copilot_logs.reader import ReadResult, ReadState, Resume

if TYPE_CHECKING:
    import polars as pl

NAME = "events"
VERSION = 3

Job = tuple[Source, Resume | None]
Parse = Callable[[Sequence[Job]], tuple[ReadResult, list[ReadState | None]]]
Updates = dict[str, dict[str, Any]]
"""Index entries by file key, as :meth:`EventStore.read` returns them."""


@dataclass(frozen=True)
class _Stat:
    source: Source
    key: str
    size: int
    mtime: int


class EventStore:
    """The segments and their index in a cache folder (by default the user's cache folder)."""

    def __init__(self, folder: Path | None = None) -> None:
        base = folder or cache_dir()
        self.folder = base / f"{NAME}-v{VERSION}"
        self.index = JsonCache(NAME, self.folder)

    def _paths(self, segment: str) -> tuple[Path, Path]:
        return self.folder / f"{segment}.arrow", self.folder / f"{segment}.diagnostics.arrow"

    def _segment(self, segment: str, keys: list[str]) -> ReadResult | None:
        """The rows of ``keys`` in a segment (None when it cannot be read as written)."""
        import polars as pl

        from copilot_logs.schema import DIAGNOSTICS_SCHEMA, EVENTS_SCHEMA

        events_path, diagnostics_path = self._paths(segment)
        try:
            events = pl.read_ipc(events_path)
            diagnostics = pl.read_ipc(diagnostics_path)
        except (OSError, pl.exceptions.PolarsError):
            return None
        if events.schema != EVENTS_SCHEMA or diagnostics.schema != DIAGNOSTICS_SCHEMA:
            return None
        mine = pl.col("file").is_in(keys)
        return ReadResult(events.filter(mine), diagnostics.filter(mine))

    def _cached(self, stats: dict[str, _Stat]) -> tuple[ReadResult, set[str]]:
        """The stored rows of the keys whose rows are all there (as many events as the index
        says), under the names the caller gave the files, and those keys; the other keys are
        read again."""
        import polars as pl

        by_segment: dict[str, list[str]] = {}
        for key in stats:
            by_segment.setdefault(self.index.entries[key]["segment"], []).append(key)
        parts: list[ReadResult] = []
        held: set[str] = set()
        for segment, keys in by_segment.items():
            rows = self._segment(segment, keys)
            if rows is None:
                continue
            counts = dict(rows.events.group_by("file").len().iter_rows())
            good = [k for k in keys if counts.get(k, 0) == self.index.entries[k].get("events")]
            names = {key: stats[key].source.name for key in good}

            def named(frame: pl.DataFrame, names: dict[str, str] = names) -> pl.DataFrame:
                return frame.filter(pl.col("file").is_in(list(names))).with_columns(
                    pl.col("file").replace_strict(names, return_dtype=pl.String)
                )

            parts.append(ReadResult(named(rows.events), named(rows.diagnostics)))
            held.update(good)
        return ReadResult.concat(parts), held

    def uncached_bytes(self, sources: Sequence[Source]) -> int:
        """How much of the sources the store cannot serve (what a run would have to parse)."""
        total = 0
        for source in sources:
            stamp = JsonCache.stamp(source.path) if source.path is not None else None
            if stamp is None:
                continue
            key, size, mtime = stamp
            entry = self.index.entries.get(key)
            if entry is None or entry["size"] != size or entry["mtime_ns"] != mtime:
                grew = entry is not None and entry.get("clean") and entry["size"] < size
                total += size - (entry["end"] if grew and entry is not None else 0)
        return total

    def read(self, sources: Sequence[Source], parse: Parse) -> tuple[ReadResult, Updates]:
        """Every source's frames: from the store when unchanged, else via ``parse``; what was
        read is written as a new segment, and the index entries to record are returned (the
        caller applies them, so that worker processes never write the index)."""
        import polars as pl

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
            if entry is None or "segment" not in entry:
                misses.append(source)
            elif entry["size"] == stat.size and entry["mtime_ns"] == stat.mtime:
                fresh[stat.key] = stat
            elif _only_grew(entry, stat):
                grown[stat.key] = stat
            else:
                misses.append(source)
        cached, held = self._cached({**fresh, **grown})
        for table in (fresh, grown):
            for key in [k for k in table if k not in held]:
                misses.append(table.pop(key).source)
        jobs: list[Job] = [(source, None) for source in misses]
        grown_names = {stat.source.name for stat in grown.values()}
        if grown:
            seen = (
                cached.events.filter(pl.col("file").is_in(list(grown_names)))
                .group_by("file")
                .agg(pl.col("event_id").drop_nulls())
            )
            seen_ids = {name: frozenset(ids) for name, ids in seen.iter_rows()}
        for key, stat in grown.items():
            entry = self.index.entries[key]
            resume = Resume(
                offset=entry["end"],
                line=entry["next_line"],
                last_id=entry["last_id"],
                seen_ids=seen_ids.get(stat.source.name, frozenset()),
                session_id=entry["session_id"],
            )
            jobs.append((stat.source, resume))
        parsed, states = parse(jobs) if jobs else (ReadResult.empty(), [])
        broken = _broken_continuations(parsed, jobs)
        if broken:
            # The new bytes do not continue the cached part: read those files whole.
            again, again_states = parse([(source, None) for source in broken])
            parsed = ReadResult.concat([_without(parsed, {s.name for s in broken}), again])
            kept = [(j, st) for j, st in zip(jobs, states, strict=True) if j[0] not in broken]
            jobs = [job for job, _ in kept] + [(source, None) for source in broken]
            states = [state for _, state in kept] + again_states
        broken_names = {source.name for source in broken}
        for source in broken:
            grown.pop(stats[source].key)
        is_grown = pl.col("file").is_in(list(grown_names - broken_names))
        read = ReadResult.concat(
            [
                ReadResult(cached.events.filter(is_grown), cached.diagnostics.filter(is_grown)),
                parsed,
            ]
        )
        updates = self._write(read, jobs, states, stats)
        # Fresh files are served as cached; grown ones come back in `read`, cached part and all.
        stale = pl.col("file").is_in(list(grown_names))
        served = ReadResult(cached.events.filter(~stale), cached.diagnostics.filter(~stale))
        return ReadResult.concat([served, read]), updates

    def _write(
        self,
        read: ReadResult,
        jobs: list[Job],
        states: list[ReadState | None],
        stats: dict[Source, _Stat],
    ) -> Updates:
        """Write what was read as a new segment; a cache that cannot be written is simply not
        kept (the next run reads the files again)."""
        import polars as pl

        done = [
            (stats[source], state)
            for (source, _), state in zip(jobs, states, strict=True)
            if source in stats and state is not None
        ]
        if not done:
            return {}
        keys = {stat.source.name: stat.key for stat, _ in done}

        def keyed(frame: pl.DataFrame) -> pl.DataFrame:
            return frame.filter(pl.col("file").is_in(list(keys))).with_columns(
                pl.col("file").replace_strict(keys, return_dtype=pl.String)
            )

        segment = uuid.uuid4().hex
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for frame, path in zip(
                (keyed(read.events), keyed(read.diagnostics)), self._paths(segment), strict=True
            ):
                temporary = path.with_suffix(f".{os.getpid()}.tmp")
                frame.write_ipc(temporary, compression="uncompressed")
                temporary.replace(path)
        except OSError:
            return {}
        counts = dict(read.events.group_by("file").len().iter_rows())
        damaged = set(read.diagnostics["file"].unique().to_list())
        return {
            stat.key: {
                "size": stat.size,
                "mtime_ns": stat.mtime,
                "end": state.end,
                "next_line": state.next_line,
                "last_id": state.last_id,
                "session_id": state.session_id,
                "events": counts.get(stat.source.name, 0),
                "segment": segment,
                # What a later run checks before reading only the bytes appended since: the
                # cached part was whole (no damage) and its last bytes are still there.
                "clean": stat.source.name not in damaged and state.end == stat.size,
                "tail": _tail(stat.source.path, state.end),
            }
            for stat, state in done
        }

    def apply(self, updates: Updates) -> None:
        """Record the entries reads returned, and delete the segments nothing points at."""
        if not updates:
            return
        replaced = {self.index.entries.get(key, {}).get("segment") for key in updates}
        for key, entry in updates.items():
            self.index.put(
                key,
                entry["size"],
                entry["mtime_ns"],
                **{k: v for k, v in entry.items() if k not in ("size", "mtime_ns")},
            )
        self.index.save()
        live = {entry.get("segment") for entry in self.index.entries.values()}
        for segment in replaced - live:
            if isinstance(segment, str):
                for path in self._paths(segment):
                    path.unlink(missing_ok=True)


TAIL_BYTES = 64


def _tail(path: Path | None, end: int) -> str | None:
    """The last bytes before ``end`` (hex), to tell later that the file only grew."""
    if path is None or end <= 0:
        return None
    try:
        with path.open("rb") as stream:
            stream.seek(max(0, end - TAIL_BYTES))
            return stream.read(min(end, TAIL_BYTES)).hex()
    except OSError:
        return None


def _only_grew(entry: dict[str, Any], stat: _Stat) -> bool:
    """The file is the cached one with bytes appended: it is longer, the cached part was whole
    and ended with a newline, and the bytes before the cached end are unchanged. (The first
    appended event must also continue the parentId chain: checked after reading it.)"""
    if not (
        entry.get("clean") and 0 < entry["size"] < stat.size and entry.get("end") == entry["size"]
    ):
        return False
    tail = entry.get("tail")
    return tail is not None and _tail(stat.source.path, entry["end"]) == tail


def _broken_continuations(parsed: ReadResult, jobs: list[Job]) -> list[Source]:
    """Resumed sources whose appended part does not continue the cached one: its first
    event's parentId is not the cached part's last event id."""
    import polars as pl

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
    import polars as pl

    keep = ~pl.col("file").is_in(list(names))
    return ReadResult(result.events.filter(keep), result.diagnostics.filter(keep))
