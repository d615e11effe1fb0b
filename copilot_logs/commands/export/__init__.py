"""The frames as Parquet datasets: what ``copilot-logs export OUT`` writes (see docs/export.md).

The flow, inside :func:`exporting` (OUT's lock; an OSError on the way becomes one clear error):
:func:`prepare` (check OUT, finish an interrupted export, compare with the manifest),
:func:`write_batch` mapped over batches of the changed sources (memory bounded by a batch),
:func:`finish` (the earlier files narrowed, the manifest, the moves; this run's temporary files
removed when anything failed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from copilot_logs import modes
from copilot_logs.commands.export import files
from copilot_logs.commands.export.files import PARTITION, TABLES, frames
from copilot_logs.commands.export.manifest import (
    MANIFEST,
    Commit,
    ExportError,
    Manifest,
    Part,
    cannot_write,
    exporting,
    load,
    record,
    save,
    unchanged,
)
from copilot_logs.ingest.discover import peek_start
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.store.key import seen_whole

__all__ = [
    "MANIFEST",
    "PARTITION",
    "TABLES",
    "ExportError",
    "Plan",
    "Summary",
    "Written",
    "batch_writer",
    "exported_whole",
    "exporting",
    "finish",
    "frames",
    "prepare",
    "write_batch",
]


class Written(NamedTuple):
    """What :func:`write_batch` did for one batch of logs."""

    part: Part
    readable: list[str]
    """The logs that gave at least one event (the others are exported again next time)."""


def write_batch(result: ReadResult, *, out: str, run: str) -> Written:
    """Write the tables of one batch of logs under ``out``, under temporary names of run
    ``run``: one file per table and day (an empty one when the table has no row)."""
    logs = sorted(set(result.events["file"].to_list()) | set(result.diagnostics["file"]))
    if not logs:
        return Written(Part([], []), [])
    batch = hashlib.sha256("\n".join(logs).encode()).hexdigest()[:12]
    mode = modes.mode_of(logs)  # the logs' own, as every file made of logs
    try:
        written = files.write_tables(frames(result), Path(out), f"part-{run}-{batch}", run, mode)
    except OSError as error:  # OUT's fault, not the logs': never taken for a log's failure
        raise cannot_write(Path(out), error) from None
    return Written(Part(logs, written), result.events["file"].unique().to_list())


def batch_writer(plan: Plan) -> Callable[[ReadResult], Written]:
    """The function to map over batches of ``plan.changed`` (picklable: a partial)."""
    return partial(write_batch, out=str(plan.out), run=plan.run)


@dataclass
class Plan:
    """What an export of ``sources`` into ``out`` has to do."""

    out: Path
    changed: list[Source]
    """The sources to read, oldest start first."""
    unchanged: list[Source]
    previous: Manifest
    seen: dict[str, dict[str, Any] | None]
    """Each changed source's manifest entry, taken before it is read."""
    run: str
    kept: list[str] = field(default_factory=list)
    """Sources of the last export kept although not selected now (``prepare(keep_others=True)``)."""

    @property
    def gone(self) -> list[str]:
        """Sources of the last export that are not selected now (nor kept)."""
        selected = {source.name for source in (*self.changed, *self.unchanged)}
        return sorted(set(self.previous.sources) - selected - set(self.kept))


@dataclass(frozen=True)
class Summary:
    """What an export did, per source log."""

    out: Path
    written: int
    unchanged: int
    removed: int
    files: int


def prepare(out: Path, sources: Iterable[Source], *, keep_others: bool = False) -> Plan:
    """Check that ``out`` can take an export, finish an export into it that was interrupted
    while moving its files into place, and find which sources changed since the last one.
    ``keep_others``: what the last export holds of sources not given stays (``prune
    --export-to`` adds the sessions it removes to an archive, never takes the others out).

    Raises :class:`ExportError` when ``out`` is a file, a non-empty folder without our
    manifest, or holds a manifest that is not ours.
    """
    previous = _recovered(out, load(out))
    whole = _intact_sources(out, previous)
    changed: list[Source] = []
    same: list[Source] = []
    sources = list(sources)
    for source in sources:
        fresh = source.name in whole and unchanged(source, previous.sources.get(source.name))
        (same if fresh else changed).append(source)
    unreadable = _unreadable_to_narrow(out, previous, {source.name for source in same})
    changed += [source for source in same if source.name in unreadable]
    same = [source for source in same if source.name not in unreadable]
    seen = {source.name: _seen_now(source) for source in changed}
    given = {source.name for source in sources}
    others = sorted(set(previous.sources) - given) if keep_others else []
    return Plan(out, _by_start(changed), same, previous, seen, files.new_run(), others)


def _seen_now(source: Source) -> dict[str, Any] | None:
    """The manifest's entry of a log about to be read (None: it is exported again next time)."""
    seen = seen_whole(source.path) if source.path is not None else None
    return record(seen) if seen is not None else None


def _unreadable_to_narrow(out: Path, manifest: Manifest, unchanged: set[str]) -> set[str]:
    """The unchanged sources of the parts to narrow (those that also hold changed or gone
    logs) that have a file whose rows cannot be read: they are exported again, and the part
    removed whole, so its damaged file is never read."""
    again: set[str] = set()
    for part in manifest.parts:
        staying = unchanged.intersection(part.sources)
        narrowed = staying and len(staying) < len(part.sources)
        if narrowed and not all(files.readable(out / file) for file in part.files):
            again |= staying
    return again


def _recovered(out: Path, manifest: Manifest) -> Manifest:
    """The manifest once the moves of an interrupted export are done, with no temporary left
    and no file named as export names its files that the manifest does not list (left by two
    exports that ran at once before OUT was locked: their rows would show twice)."""
    if manifest.commit is not None:
        commit = manifest.commit
        files.move_in(out, commit.run, commit.files, commit.remove)
        manifest.commit = None
        save(out, manifest)
    files.remove_temporaries(out)
    listed_files = {file for part in manifest.parts for file in part.files}
    orphans = [file for file in files.written_files(out) if file not in listed_files]
    files.delete(out, [file for file in orphans if file not in manifest.stale])
    return manifest


def exported_whole(out: Path, sources: Iterable[Source]) -> set[str]:
    """The names of ``sources`` that the export in ``out`` holds as they are now: listed in its
    manifest, unchanged by the one growth check, and every file of their part whole."""
    manifest = load(out)
    if manifest.commit is not None:
        return set()
    whole = _intact_sources(out, manifest)
    return {
        source.name
        for source in sources
        if source.name in whole and unchanged(source, manifest.sources.get(source.name))
    }


def _intact_sources(out: Path, manifest: Manifest) -> set[str]:
    """The sources whose every file is still there and whole (a part with a file deleted by
    hand, cut or overwritten is exported again, and its files replaced)."""
    whole: set[str] = set()
    for part in manifest.parts:
        if all(files.whole(out / file) for file in part.files):
            whole.update(part.sources)
    return whole


def _by_start(sources: list[Source]) -> list[Source]:
    """Oldest start first: consecutive sources, read in one batch, share their days."""
    never = datetime.max.replace(tzinfo=UTC)
    return sorted(sources, key=lambda source: (peek_start(source) or never, source.name))


def finish(plan: Plan, written: Iterable[Written]) -> Summary:
    """Narrow the earlier files to the logs that did not change, record the export in the
    manifest, then move the new files into place and remove those no log produces any more."""
    try:
        manifest, written_logs = _recorded(plan, written)
        save(plan.out, manifest)
    except BaseException:
        files.remove_temporaries(plan.out, plan.run)
        raise
    if manifest.commit is not None:
        commit = manifest.commit
        files.move_in(plan.out, commit.run, commit.files, commit.remove)
        manifest.commit = None
        save(plan.out, manifest)
    files.remove_temporaries(plan.out, plan.run)  # those of a batch written again log by log
    return Summary(
        out=plan.out,
        written=written_logs,
        unchanged=len(plan.unchanged),
        removed=len(plan.gone),
        files=sum(len(part.files) for part in manifest.parts),
    )


def _recorded(plan: Plan, written: Iterable[Written]) -> tuple[Manifest, int]:
    """The manifest of this export, with the moves still to do; and how many logs it wrote."""
    new_parts: list[Part] = []
    readable: set[str] = set()
    for batch in written:
        if batch.part.sources:
            new_parts.append(batch.part)
            readable.update(batch.readable)
    sources = {source.name: plan.previous.sources[source.name] for source in plan.unchanged}
    sources.update((name, plan.previous.sources[name]) for name in plan.kept)
    for source in plan.changed:
        # A source that gave no event (unreadable, empty, not a log) keeps no entry: it is
        # read, and reported, again next time.
        sources[source.name] = plan.seen[source.name] if source.name in readable else None
    kept, rewritten, removed = _narrowed(plan, set(sources) - {s.name for s in plan.changed})
    moved = [file for part in new_parts for file in part.files] + rewritten
    commit = Commit(plan.run, moved, [*removed, *plan.previous.stale])
    logs = {log for part in new_parts for log in part.sources}
    written_logs = sum(1 for source in plan.changed if source.name in logs)
    return Manifest(sources, kept + new_parts, commit), written_logs


def _narrowed(plan: Plan, keep: set[str]) -> tuple[list[Part], list[str], list[str]]:
    """The earlier parts without the logs that changed or are gone: the parts kept, the files
    rewritten (under temporary names) and the files to remove."""
    kept: list[Part] = []
    rewritten: list[str] = []
    removed: list[str] = []
    for part in plan.previous.parts:
        staying = [log for log in part.sources if log in keep]
        if staying == part.sources:
            kept.append(part)
        elif not staying:
            removed += part.files
        else:
            left, changed, gone = files.narrow(plan.out, part.files, set(staying), plan.run)
            kept.append(Part(staying, left))
            rewritten += changed
            removed += gone
    return kept, rewritten, removed
