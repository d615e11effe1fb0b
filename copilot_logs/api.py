"""The public Python API: the same frames the commands print, for notebooks and scripts.

import copilot_logs as cl
result = cl.read("~/.copilot/session-state")     # or ids, prefixes, files; none = the root
cl.sessions(result)                               # one row per session
cl.count(result, by="day", zone="Europe/Berlin")  # the figures of `copilot-logs count`
result.events, result.diagnostics                 # the raw frames
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from copilot_logs import counting, model
from copilot_logs import sessions as _sessions
from copilot_logs.corpus import read_all
from copilot_logs.discover import Selection, find_sources, parse_when
from copilot_logs.envelope import Source
from copilot_logs.reader import ReadResult, read_bytes, read_source

__all__ = [
    "ReadResult",
    "count",
    "read",
    "read_bytes",
    "read_file",
    "sessions",
    "subagent_runs",
    "tools",
    "turns",
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

    ``cache=True`` serves unchanged files from the events cache the CLI keeps under
    ``~/.cache/copilot-logs`` (and updates it).
    """
    selection = Selection(
        selectors=[str(s) for s in selectors],
        root=Path(root).expanduser() if root is not None else None,
        since=parse_when(since) if since else None,
        until=parse_when(until, end_of_day=True) if until else None,
        latest=latest,
    )
    return read_all(find_sources(selection), use_cache=cache)


def read_file(path: str | Path) -> ReadResult:
    """Read one events.jsonl file."""
    path = Path(path)
    hint = path.parent.name if path.name == "events.jsonl" else path.stem
    return read_source(Source(path, hint))


def sessions(result: ReadResult) -> pl.DataFrame:
    """One row per session, newest first (the `sessions` command)."""
    return _sessions.summarize(result)


def count(result: ReadResult, *, by: str = "session", zone: str = "UTC") -> pl.DataFrame:
    """LLM calls and related figures per session or regrouped (the `count` command)."""
    return counting.count(result, by=by, zone=zone)


def turns(result: ReadResult) -> pl.DataFrame:
    """One row per main-agent turn (LLM call), open turns included."""
    return model.turns(model.annotate(result.events))


def tools(result: ReadResult) -> pl.DataFrame:
    """One row per tool execution, start joined to complete."""
    return model.tools(model.annotate(result.events))


def subagent_runs(result: ReadResult) -> pl.DataFrame:
    """One row per sub-agent run with its own LLM and tool calls."""
    return model.subagent_runs(model.annotate(result.events))
