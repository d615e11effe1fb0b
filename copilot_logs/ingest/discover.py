"""Find the session logs a command should read: root, ids, id prefixes, files, folders, stdin;
and, once read, keep the sessions picked by id or by start time (docs/selecting.md)."""

from __future__ import annotations

import errno
import os
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import orjson

from copilot_logs.durations import parse_duration
from copilot_logs.errors import SelectionError, UnreadableError, UnsupportedFormatError
from copilot_logs.ingest.logfile import STDIN, Source, display_name, open_log
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.repair import held_time

if TYPE_CHECKING:
    import polars as pl

T = TypeVar("T")

EVENTS_FILE = "events.jsonl"
LEGACY_FOLDER = "history-session-state"


def default_root() -> Path:
    """``$COPILOT_HOME/session-state`` when COPILOT_HOME is set, else ~/.copilot/session-state."""
    home = os.environ.get("COPILOT_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".copilot"
    return base / "session-state"


@dataclass(frozen=True)
class Selection:
    """How a command narrows the sessions it reads."""

    selectors: Sequence[str] = ()
    root: Path | None = None
    since: datetime | None = None
    until: datetime | None = None
    latest: int | None = None

    @property
    def resolved_root(self) -> Path:
        return self.root if self.root is not None else default_root()


def parse_when(
    text: str,
    *,
    end_of_day: bool = False,
    zone: tzinfo | None = None,
    now: datetime | None = None,
) -> datetime:
    """A moment the user names (docs/selecting.md), as UTC: a day or week means its start in
    ``zone`` (local time by default), or its end when ``end_of_day``; a time beyond what a
    datetime holds is held to its edges (no session starts beyond either)."""
    moment = now or datetime.now(UTC)
    word = text.strip().lower()
    try:
        if word in ("today", "yesterday"):
            local = moment.astimezone(zone) if zone else moment.astimezone()
            day = local.date() - timedelta(days=int(word == "yesterday"))
            return _day(day, end_of_day, zone)
        week = _WEEK.fullmatch(word.upper())
        if week:  # Monday to Sunday
            monday = date.fromisocalendar(int(week[1]), int(week[2]), 1)
            return _day(monday + timedelta(days=6 * end_of_day), end_of_day, zone)
        if _AGE.fullmatch(word):
            return max(EARLIEST, moment.astimezone(UTC) - parse_duration(word))
        if len(text) == 10:
            return _day(date.fromisoformat(text), end_of_day, zone)
        return _as_utc(datetime.fromisoformat(text), zone)
    except ValueError:
        raise SelectionError(
            f"'{text}' is not a date or time: use YYYY-MM-DD, an ISO time like 2026-08-05T09:30, "
            "an ISO week like 2026-W48, today, yesterday, or an age like 7d or 12h"
        ) from None


_WEEK = re.compile(r"(\d{4})-W(\d{2})")
_AGE = re.compile(r"(?:\d+(?:\.\d*)?[smhd])+")


def _day(day: date, end_of_day: bool, zone: tzinfo | None) -> datetime:
    """The start of ``day`` in ``zone``, or its end (the start of the next) when
    ``end_of_day``."""
    if end_of_day and day == date.max:
        return LATEST
    return _as_utc(datetime.combine(day + timedelta(days=int(end_of_day)), time.min), zone)


EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


def _as_utc(moment: datetime, zone: tzinfo | None) -> datetime:
    """``moment`` (naive: in ``zone``, else local time) in UTC, held between EARLIEST and
    LATEST: only a moment in year 1 or 9999 can fall outside them."""
    try:
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone) if zone else moment.astimezone()
        return moment.astimezone(UTC)
    except (OverflowError, OSError, ValueError):
        return EARLIEST if moment.year == 1 else LATEST


def _source(path: Path, hint: str) -> Source:
    return Source(path, display_name(hint))


def _present(path: str | Path) -> bool:
    """Whether something is at ``path``: a file, but also a broken or looping link, a named
    pipe or socket, or a file we may not look at (each is then reported as unreadable by the
    reader, never skipped in silence)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        return exc.errno != errno.ENOTDIR
    return True


def _session_sources(folder: Path) -> list[Source]:
    """The sessions held directly in a folder: ``<id>/events.jsonl`` and ``<id>.jsonl``,
    listed in one pass (a folder is known by its entry, without a stat of its own)."""
    sources = []
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        raise UnreadableError(
            f"cannot list {display_name(folder)}: {exc.strerror or exc}; check the folder's "
            "permissions, or name the sessions to read"
        ) from None
    for entry in entries:
        if _is_dir(entry):
            events = os.path.join(entry.path, EVENTS_FILE)
            if _present(events):
                sources.append(_source(Path(events), entry.name))
        elif entry.name.endswith(".jsonl") and (path := Path(entry.path)).suffix == ".jsonl":
            sources.append(_source(path, path.stem))
    return sources


def _is_dir(path: Path | os.DirEntry[str]) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a link loop on Python 3.11
        return False


def _from_path(path: Path) -> list[Source]:
    if not _is_dir(path):  # a file, or a pipe, socket or broken link given by name
        if path.name == EVENTS_FILE:
            return [_source(path, path.parent.name)]
        return [_source(path, path.stem)]
    legacy = UnsupportedFormatError(
        f"{path} holds sessions of Copilot CLI before 0.0.342 (history-session-state), "
        "a format copilot-logs does not read; point it at session-state/ instead"
    )
    if path.name == LEGACY_FOLDER:
        raise legacy
    if _present(path / EVENTS_FILE):
        return [_source(path / EVENTS_FILE, path.name)]
    sources = _session_sources(path)
    if not sources and (path / LEGACY_FOLDER).is_dir():
        raise legacy
    return sources


def _from_id(selector: str, root: Path, *, given_root: bool) -> list[Source]:
    """The log of the session ``selector`` names (an id or a prefix), as a source that keeps
    that session only: by the names of the sessions' folders and files, else by the ids
    inside the logs (a file that holds several sessions, a log named otherwise)."""
    known = _session_sources(root) if root.is_dir() else []
    candidates = [s for s in known if s.session_hint.startswith(selector)]
    exact = [s for s in candidates if s.session_hint == selector]
    if exact or len(candidates) == 1:
        return [replace((exact or candidates)[0], only=(selector,))]
    if candidates:
        _ambiguous(selector, [s.session_hint for s in candidates])
    inside = _sessions_inside(known)
    ids = sorted({session for session in inside if session.startswith(selector)})
    if len(ids) > 1 and selector not in ids:
        _ambiguous(selector, ids)
    if not ids:
        again = f" --root {shlex.quote(str(root))}" if given_root else ""
        raise SelectionError(
            f"no session, file or folder matches '{selector}' (looked under {root}); "
            f"run `copilot-logs sessions{again}` to list the sessions, or give a path"
        )
    chosen = selector if selector in ids else ids[0]
    return [replace(source, only=(chosen,)) for source in inside[chosen]]


def _ambiguous(selector: str, names: list[str]) -> NoReturn:
    shown = ", ".join(names[:8])
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    raise SelectionError(
        f"'{selector}' is ambiguous: it starts {len(names)} sessions ({shown}{more}); "
        "give more characters"
    )


def _sessions_inside(sources: list[Source]) -> dict[str, list[Source]]:
    """Each session id that a ``session.start`` line of the logs names, and the logs that
    hold it. Every log is read through (only when no name matched a selector)."""
    found: dict[str, list[Source]] = {}
    for source in sources:
        assert source.path is not None
        try:
            with open_log(source.path) as stream:
                for line in stream:
                    if b'"session.start"' not in line:
                        continue
                    try:
                        event = orjson.loads(line.strip(b"\x00\r\n "))
                        session = event["data"]["sessionId"]
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        continue
                    if event.get("type") == "session.start" and isinstance(session, str):
                        holders = found.setdefault(session, [])
                        if source not in holders:
                            holders.append(source)
        except OSError:
            continue  # reported as unreadable by the command that reads it, if selected
    return found


def _first_event(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first line of a log (its session.start) and that event's ``data``, as dicts (empty
    when there is none)."""
    try:
        with open_log(path) as stream:
            event = orjson.loads(stream.readline(1 << 20).strip(b"\x00\r\n "))
    except (OSError, AttributeError, orjson.JSONDecodeError):  # (a stream that is no file)
        return {}, {}
    event = event if isinstance(event, dict) else {}
    data = event.get("data")
    return event, data if isinstance(data, dict) else {}


def peek_start(source: Source) -> datetime | None:
    """The session's start, read from its first line only (a few hundred bytes)."""
    if source.path is None:
        return None
    event, data = _first_event(source.path)
    stamp = data.get("startTime") or event.get("timestamp")
    if not isinstance(event.get("data", {}), dict) or not isinstance(stamp, str):
        return None
    try:  # None (the file's time is used) for a time no log may hold
        return held_time(datetime.fromisoformat(stamp))
    except ValueError:
        return None


def find_sources(selection: Selection, notes: list[str] | None = None) -> list[Source]:
    """Resolve a selection into the session logs to read, newest first; a session found in
    two places is read once when one file holds all the other holds (said in ``notes``, see
    :func:`_copies`). Raises SelectionError for a path that does not exist, or an id prefix
    matching nothing or several sessions."""
    root = selection.resolved_root
    if selection.root is not None and not selection.root.is_dir():
        raise SelectionError(f"--root {selection.root}: no such folder")
    sources: list[Source] = []
    if not selection.selectors:
        sources = _session_sources(root) if root.is_dir() else []
    for selector in selection.selectors:
        if selector == "-":
            sources.append(Source(None, "stdin"))
            continue
        path = Path(selector).expanduser()
        if _present(path):
            sources.extend(_from_path(path))
        elif os.sep in selector or selector.endswith(".jsonl") or selector.startswith("."):
            raise SelectionError(f"{selector}: no such file or folder")
        else:
            sources.extend(_from_id(selector, root, given_root=selection.root is not None))
    return _narrow(_copies(_unique(sources), notes if notes is not None else []), selection)


def _unique(sources: list[Source]) -> list[Source]:
    """Each file once (the same file twice, or `-` twice: standard input can be read once);
    a file selected by several of its sessions keeps them all, by a path: all of them."""
    at: dict[object, int] = {}
    kept: list[Source] = []
    for source in sources:
        key = _identity(source.path) if source.path is not None else None
        if key not in at:
            at[key] = len(kept)
            kept.append(source)
            continue
        first = kept[at[key]]
        only = first.only + source.only if first.only and source.only else ()
        kept[at[key]] = replace(first, only=tuple(dict.fromkeys(only)))
    return kept


def _copies(sources: list[Source], notes: list[str]) -> list[Source]:
    """The sources without a copy of a session found elsewhere too (a folder of sessions
    copied beside the original, both given): of two files of one session name, one whose
    bytes are all at the start of the other (the same file, or an older copy of a log that
    grew) is left out, and said; two that differ are both kept, and said."""
    groups: dict[str, list[Source]] = {}
    for source in sources:
        if source.path is not None:
            groups.setdefault(source.session_hint, []).append(source)
    left_out: set[int] = set()
    for group in groups.values():
        for alike in _by_first_line(group) if len(group) > 1 else ():
            for at, first in enumerate(alike):
                for second in alike[at + 1 :]:
                    if id(first) not in left_out and id(second) not in left_out:
                        left_out |= _compare(first, second, notes)
    return [source for source in sources if id(source) not in left_out]


def _by_first_line(group: list[Source]) -> list[list[Source]]:
    """The files of one session name that start with the same line (its session.start, for
    a log): only these can be copies of each other, or one session. Compared two by two
    without this, 3,000 files named ``session.jsonl`` took longer than 5 minutes."""
    alike: dict[bytes, list[Source]] = {}
    for source in group:
        assert source.path is not None
        try:
            with open_log(source.path) as stream:
                first = stream.readline(1 << 16)
        except OSError:
            continue
        alike.setdefault(first, []).append(source)
    return [sources for sources in alike.values() if len(sources) > 1]


def _compare(first: Source, second: Source, notes: list[str]) -> set[int]:
    """Which of two files of one session name to leave out (their ids), noting why."""
    assert first.path is not None and second.path is not None
    shorter, longer = sorted((first, second), key=lambda s: (s.size, s is first))
    if shorter.size > 0 and _starts_with(longer, shorter):
        how = "a copy of" if shorter.size == longer.size else "the start of"
        notes.append(
            f"{shorter.name} is {how} {longer.name} (session {shorter.session_hint}): "
            f"read once, from {longer.name}"
        )
        return {id(shorter)}
    session = _first_event(first.path)[1].get("sessionId")
    if isinstance(session, str) and session == _first_event(second.path)[1].get("sessionId"):
        notes.append(
            f"{first.name} and {second.name} hold the same session ({first.session_hint}) "
            "with different events: both are read, so it counts twice; give only one of them"
        )
    return set()


def _starts_with(longer: Source, shorter: Source) -> bool:
    """Whether the bytes of ``shorter`` are the first bytes of ``longer``."""
    assert longer.path is not None and shorter.path is not None
    try:
        with open_log(longer.path) as big, open_log(shorter.path) as small:
            while chunk := small.read(1 << 20):
                if big.read(len(chunk)) != chunk:
                    return False
    except OSError:
        return False
    return True


def _identity(path: Path) -> object:
    """What makes two paths one file: its device and inode (a path given twice, a link and its
    target); a path that cannot be stat'ed is known by its resolved form."""
    try:
        info = os.stat(path)
    except OSError:
        try:
            return path.resolve()
        except (OSError, RuntimeError):  # a link loop (RuntimeError on Python 3.11)
            return path.absolute()
    return (info.st_dev, info.st_ino)


def _narrow(sources: list[Source], selection: Selection) -> list[Source]:
    """Apply --since / --until / --latest on the sessions' start times (then newest first).
    Standard input passes: its start is known only once read (see :func:`window_then`)."""
    since, until = selection.since, selection.until
    if since is not None:
        # A session that started after `since` was written after it: older files are skipped
        # without being opened.
        sources = [s for s in sources if s.path is None or _mtime(s.path) >= since]
    if since is None and until is None and selection.latest is None:
        return sources  # every command orders its own output: no file needs opening here
    starts = {s: peek_start(s) for s in sources}
    if since is not None or until is not None:
        sources = [
            s
            for s in sources
            if s.path is None
            or (
                (since is None or (starts[s] or _mtime(s.path)) >= since)
                and (until is None or (starts[s] or _mtime(s.path)) < until)
            )
        ]
    sources.sort(key=lambda s: starts.get(s) or EARLIEST, reverse=True)
    if selection.latest is not None:
        sources = sources[: selection.latest]
    return sources


def _mtime(path: Path) -> datetime:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return LATEST


WORKSPACE_FILE = "workspace.yaml"
_NAME_BYTES = 64 * 1024


def workspace_name(file: str) -> str | None:
    """The session's name, the top-level ``name:`` of the ``workspace.yaml`` beside
    ``events.jsonl`` (None without one), read without a YAML library: a double-quoted value is
    unquoted as JSON, a single-quoted one as YAML does."""
    path = Path(file)
    if path.name != EVENTS_FILE:
        return None
    try:
        with (path.parent / WORKSPACE_FILE).open("rb") as stream:
            head = stream.read(_NAME_BYTES)
    except OSError:
        return None
    for line in head.decode("utf-8", "replace").splitlines():
        if not line.startswith("name:"):
            continue
        value = line[len("name:") :].strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = str(orjson.loads(value))
            except orjson.JSONDecodeError:
                value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        return value or None
    return None


Picks = tuple[tuple[str, tuple[str, ...]], ...]
"""(a log's name, the ids or prefixes it was selected by), for each log selected by id."""


def picks(sources: Iterable[Source]) -> Picks:
    """What the sources were selected by, in a stable order (a key of the store's values)."""
    return tuple(sorted((source.name, source.only) for source in sources if source.only))


def dropped(frame: pl.DataFrame, chosen: Picks) -> pl.Expr:
    """The rows of ``frame`` (events or diagnostics) of sessions not picked: in a log picked
    by id, those of its sessions whose id starts with none of its ids or prefixes (none, when
    no session of that log does: the log's name was what matched)."""
    import polars as pl

    out = pl.lit(False)
    for name, prefixes in chosen:
        mine = pl.col("file") == name
        starts = pl.any_horizontal(pl.col("session_id").str.starts_with(p) for p in prefixes)
        if frame.select((mine & starts).any()).item():
            out = out | (mine & ~starts.fill_null(False))
    return out


def picked_then(result: ReadResult, *, fn: Callable[[ReadResult], T], chosen: Picks) -> T:
    """``fn`` of the picked sessions of a log read whole: a picklable step for
    :meth:`copilot_logs.cli.options.Loaded.map`."""
    if chosen:
        events, diagnostics = result.events, result.diagnostics
        result = ReadResult(
            events.filter(~dropped(events, chosen)),
            diagnostics.filter(~dropped(diagnostics, chosen)),
        )
    return fn(result)


def outside(result: ReadResult, since: datetime | None, until: datetime | None) -> pl.DataFrame:
    """file and session_id of the sessions of standard input that started before ``since`` or
    at or after ``until`` (``session.start``'s startTime, else the first event's timestamp; a
    session whose start is unknown is kept: its damage is reported). A stream cannot be
    peeked at without consuming it, so --since / --until apply to it here, once read."""
    import polars as pl

    from copilot_logs.ingest.schema import log_times

    start = pl.col("detail").filter(pl.col("type") == "session.start").first()
    starts = (
        result.events.filter(pl.col("file") == STDIN)
        .group_by("file", "session_id", maintain_order=True)
        .agg(
            started_at=pl.coalesce(
                log_times(start.str.json_path_match("$.startTime")), pl.col("timestamp").min()
            )
        )
    )
    early = pl.col("started_at") < since if since is not None else pl.lit(False)
    late = pl.col("started_at") >= until if until is not None else pl.lit(False)
    return starts.filter((early | late).fill_null(False)).select("file", "session_id")


def without(frame: pl.DataFrame, dropped: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``frame`` (events or diagnostics) not of the ``dropped`` sessions."""
    return frame.join(dropped, on=["file", "session_id"], how="anti")


def started_within(
    result: ReadResult, since: datetime | None, until: datetime | None
) -> ReadResult:
    """``result`` without the sessions of standard input that started outside the window."""
    if since is None and until is None:
        return result
    gone = outside(result, since, until)
    if gone.is_empty():
        return result
    return ReadResult(without(result.events, gone), without(result.diagnostics, gone))


def window_then(
    result: ReadResult,
    *,
    fn: Callable[[ReadResult], T],
    since: datetime | None,
    until: datetime | None,
) -> tuple[T, pl.DataFrame]:
    """``fn`` of the sessions that started within the window, and the sessions left out (whose
    damage is then not reported either): a picklable step for
    :meth:`copilot_logs.cli.options.Loaded.map`."""
    gone = outside(result, since, until)
    return fn(ReadResult(without(result.events, gone), without(result.diagnostics, gone))), gone
