"""The public Python API: the same frames the commands print, for notebooks and scripts.

docs/api.md shows each function at work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands import audit as _audit
from copilot_logs.commands import count as count_core
from copilot_logs.commands import export as _export
from copilot_logs.commands import sessions as sessions_core
from copilot_logs.commands import timeline as _timeline
from copilot_logs.commands import usage as _usage
from copilot_logs.commands import validate as validate_core
from copilot_logs.commands.usage import breakdown as _breakdown
from copilot_logs.derive import calls as _calls
from copilot_logs.ingest.discover import Selection, find_sources, parse_when
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.store.collect import map_batches, read_all, read_files, read_held

__all__ = [
    "ReadResult",
    "audit",
    "count",
    "export",
    "frames",
    "read",
    "read_bytes",
    "read_file",
    "sessions",
    "subagent_runs",
    "timeline",
    "tools",
    "turns",
    "usage",
    "usage_records",
    "validate",
]


def read(
    *selectors: str | Path,
    root: str | Path | None = None,
    since: str | None = None,
    until: str | None = None,
    latest: int | None = None,
    cache: bool = False,
) -> ReadResult:
    """Read the selected sessions (ids, id prefixes, files, folders; none = the whole root).

    ``cache=True`` serves unchanged files from the store the CLI keeps in the user's cache
    folder (and updates it; see :mod:`copilot_logs.store`).
    """
    from copilot_logs.ingest.discover import started_within

    selection = _selection(selectors, root, since, until, latest)
    read = read_all(find_sources(selection), use_cache=cache)
    return started_within(read, selection.since, selection.until)  # standard input's sessions


def _selection(
    selectors: tuple[str | Path, ...],
    root: str | Path | None,
    since: str | None,
    until: str | None,
    latest: int | None,
) -> Selection:
    return Selection(
        selectors=[str(s) for s in selectors],
        root=Path(root).expanduser() if root is not None else None,
        since=parse_when(since) if since else None,
        until=parse_when(until, end_of_day=True) if until else None,
        latest=latest,
    )


def read_file(path: str | Path) -> ReadResult:
    """Read one events.jsonl file."""
    path = Path(path)
    hint = path.parent.name if path.name == "events.jsonl" else path.stem
    return read_files([(Source(path, hint), None)])[0]


def read_bytes(data: bytes, name: str = "<bytes>", session_hint: str = "") -> ReadResult:
    """Read a session log held in memory, named ``name``."""
    return read_held([(Source(Path(name), session_hint or name), data, None)])[0]


def sessions(result: ReadResult) -> pl.DataFrame:
    """One row per session, newest first (the `sessions` command)."""
    return sessions_core.summarize(result)


def count(result: ReadResult, *, by: str = "session", zone: str = "UTC") -> pl.DataFrame:
    """LLM calls and related figures per session or regrouped (the `count` command)."""
    return count_core.count(result, by=by, zone=zone)


def turns(result: ReadResult) -> pl.DataFrame:
    """One row per main-agent turn (LLM call), open turns included."""
    return derive.turns(derive.annotate(result.events))


def tools(result: ReadResult) -> pl.DataFrame:
    """One row per tool execution, start joined to complete."""
    return derive.tools(derive.annotate(result.events))


def subagent_runs(result: ReadResult) -> pl.DataFrame:
    """One row per sub-agent run with its own LLM and tool calls."""
    return derive.subagent_runs(derive.annotate(result.events))


def usage_records(result: ReadResult) -> pl.DataFrame:
    """One row per LLM call, from the CLI's ``session.usage_record`` lines (CLI 1.0.102 on;
    empty for older logs): model, tokens, cost, duration, who initiated it."""
    return _calls.usage_records(derive.annotate(result.events))


def timeline(result: ReadResult, *, include_tools: bool = True) -> list[dict[str, Any]]:
    """Each session's agent loop as nested dicts (the `timeline --format json` structure)."""
    return _timeline.timeline(result, include_tools=include_tools)


def audit(
    result: ReadResult,
    *,
    nudge_cap: int = _audit.DEFAULT_NUDGE_CAP,
    require_task_complete: bool = False,
) -> pl.DataFrame:
    """One verdict row per session (the `audit` command; see its README section)."""
    return _audit.audit(result, nudge_cap=nudge_cap, require_task_complete=require_task_complete)


def validate(
    result: ReadResult,
    *,
    select: list[str] | None = None,
    ignore: tuple[str, ...] = (),
    strict: bool = False,
) -> validate_core.Report:
    """Findings of `validate`'s rules (``.findings``), and whether the gate ``.failed``."""
    return validate_core.validate(result, select=select, ignore=ignore, strict=strict)


def usage(
    result: ReadResult, *, by: str = "session", zone: str = "UTC"
) -> _usage.UsageReport | _breakdown.CallReport:
    """What the sessions used and cost, grouped ``by`` any grouping ``usage --by`` takes:
    per session, day, week, month, model or repository (``repo``) a ``UsageReport``
    (``.rows``, ``.sessions``, ``.totals``); per call, prompt, agent or task a ``CallReport``
    (``.rows``, ``.totals``)."""
    by = "repository" if by == "repo" else by
    if by in _breakdown.CALL_GROUPINGS:
        return _breakdown.call_report([_breakdown.breakdown(result, by)], by)
    if by not in _usage.GROUPINGS:
        choices = ", ".join([*_usage.GROUPINGS, "repo", *_breakdown.CALL_GROUPINGS])
        raise ValueError(f"unknown grouping {by!r}: choose one of {choices}")
    return _usage.usage(result, by=by, zone=zone)


def frames(result: ReadResult) -> dict[str, pl.DataFrame]:
    """The tables ``copilot-logs export`` writes (events, turns, tools, sessions, findings,
    usage), each with its ``date`` partition column; see docs/export.md."""
    return _export.frames(result)


def export(
    out: str | Path,
    *selectors: str | Path,
    root: str | Path | None = None,
    since: str | None = None,
    until: str | None = None,
    latest: int | None = None,
    cache: bool = False,
) -> _export.Summary:
    """Export the selected sessions to Parquet datasets under ``out``, as ``copilot-logs export``
    does: only the logs changed since the last export into ``out`` are written again."""
    selection = _selection(selectors, root, since, until, latest)
    sources = find_sources(selection)
    with _export.exporting(Path(out)):  # another export into ``out`` is waited for
        plan = _export.prepare(Path(out), sources)
        batches = map_batches(
            plan.changed, _export.batch_writer(plan), use_cache=cache, remember=False
        )
        return _export.finish(plan, (done.value for done in batches))
