"""``doctor --repair``: a repaired copy of a session's folder under another folder, the
original never touched.

What the copy keeps, sets aside and changes: docs/doctor.md, "``--repair``". The log is copied
first (a snapshot: what is read, repaired and hashed is the same bytes); every value is changed
in place (:func:`~copilot_logs.ingest.repair.with_value`), every other byte of the
line stays as written; every selected session is prepared before any copy is moved into place,
so a refusal leaves nothing written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from copilot_logs import modes
from copilot_logs.commands import doctor
from copilot_logs.commands.validate import check
from copilot_logs.errors import SelectionError, WriteError
from copilot_logs.ingest import cli_format
from copilot_logs.ingest.decode import parse_line
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.ingest.repair import value_span, with_value
from copilot_logs.store.collect import read_files

EVENTS = "events.jsonl"
SIDECAR = "events.jsonl.set-aside"
REPORT = "repair.json"
SEPARATORS = {b"\xe2\x80\xa8": b"\\u2028", b"\xe2\x80\xa9": b"\\u2029"}
IN_USE = re.compile(r"inuse\.\d+\.lock")
"""The lock a running CLI keeps in its session's folder (``inuse.<pid>.lock``)."""


@dataclass(frozen=True)
class Change:
    line: int
    """The line of the original file the change is at (an added event: the line after it)."""
    what: str
    why: str


@dataclass
class Unit:
    """One event of the copy: its bytes (no newline), where it was, what it is. ``after_gap``:
    bytes were set aside (or an event added) right before it, so its parentId may name them;
    ``marks``: an added event's sub-agent marks, as the event it closes carries them."""

    line: int
    data: bytes
    event_id: str | None
    type: str
    agent_id: str | None = None
    tool_call_id: str | None = None
    turn_id: str | None = None
    after_gap: bool = False
    marks: dict[str, Any] = field(default_factory=dict)


@dataclass
class Repair:
    """What ``--repair`` wrote for one session; ``verdict`` and ``blockers`` are doctor's
    judgement of the copy (as a log no longer written) and its fatal reasons."""

    session_id: str
    source: Path
    folder: Path
    changes: list[Change] = field(default_factory=list)
    set_aside: list[dict[str, Any]] = field(default_factory=list)
    not_copied: list[dict[str, str]] = field(default_factory=list)
    original_bytes: int = 0
    original_sha256: str = ""
    verdict: str = ""
    blockers: list[dict[str, Any]] = field(default_factory=list)
    scratch: Path | None = None
    """Where the copy is prepared, until it is moved into place."""
    pieces: list[bytes] = field(default_factory=list, repr=False)
    """The bytes set aside, in the sidecar's order."""

    @property
    def events(self) -> Path:
        return self.folder / EVENTS

    @property
    def sidecar(self) -> Path:
        return self.folder / SIDECAR

    @property
    def set_aside_bytes(self) -> int:
        return sum(int(piece["length"]) for piece in self.set_aside)

    @property
    def resumable(self) -> bool:
        return self.verdict != doctor.CANNOT_RESUME

    def record(self) -> dict[str, Any]:
        """The json of ``--format json`` and of the copy's ``repair.json``."""
        return {
            "session_id": self.session_id,
            "source": str(self.source),
            "original_bytes": self.original_bytes,
            "original_sha256": self.original_sha256,
            "events": str(self.events),
            "sidecar": str(self.sidecar) if self.set_aside else None,
            "verdict": self.verdict,
            "resumable": self.resumable,
            "blockers": self.blockers,
            "changes": [asdict(change) for change in self.changes],
            "set_aside": self.set_aside,
            "not_copied": self.not_copied,
        }


def repair(source: Source, out: Path, **options: Any) -> Repair:
    """Write the repaired copy of ``source``'s session as ``out/<sessionId>/``."""
    return repair_all([source], out, **options)[0]


def repair_all(
    sources: Sequence[Source],
    out: Path,
    *,
    now: datetime | None = None,
    running_within: timedelta = timedelta(0),
    even_if_running: bool = False,
) -> list[Repair]:
    """The repaired copy of each session as ``out/<sessionId>/``: every one prepared (and
    every refusal raised) before the first is moved into place."""
    if any(source.path is None for source in sources):
        raise SelectionError("--repair reads a session's file, not standard input")
    out = Path(os.path.abspath(out))
    # The folders --out makes, deepest first: removed again when nothing is written.
    made = [folder for folder in (out, *out.parents) if not os.path.lexists(folder)]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise WriteError(f"--out {out}: {error.strerror or error}") from error
    within = None if even_if_running else running_within
    prepared: list[Repair] = []
    try:
        for source in sources:
            taken = {done.folder for done in prepared}
            prepared.append(_prepare(source, out, taken, now, within))
    except BaseException:
        _discard(prepared, made)
        raise
    # Each prepared copy moved into place; a failure names the copies already written.
    for index, done in enumerate(prepared):
        assert done.scratch is not None
        try:
            _refuse_to_overwrite(done.folder, done.source)
            done.scratch.rename(done.folder)
        except (OSError, SelectionError) as error:
            _discard(prepared[index:], [])
            written = ", ".join(str(d.folder) for d in prepared[:index]) or "none"
            what = error.strerror if isinstance(error, OSError) else str(error)
            raise WriteError(
                f"{done.folder}: {what}; copies written before it: {written}"
            ) from error
        done.scratch = None
    return prepared


def _discard(prepared: Iterable[Repair], made: list[Path]) -> None:
    for done in prepared:
        if done.scratch is not None:
            shutil.rmtree(done.scratch, ignore_errors=True)
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            break


def _prepare(
    source: Source, out: Path, taken: set[Path], now: datetime | None, within: timedelta | None
) -> Repair:
    """The repaired copy of one session, written in a scratch folder of ``out``. Refused
    (SelectionError) when its id is not a folder name, its folder exists, another selected log
    holds it, or (``within`` given) doctor calls it running."""
    assert source.path is not None
    scratch = Path(tempfile.mkdtemp(prefix=".repair.", dir=out))
    snapshot = Path(tempfile.mkstemp(prefix=".repair.", suffix=".log", dir=out)[1])
    try:
        size, digest, mode = _snapshot(source.path, snapshot)
        result = read_files([(Source(snapshot, source.session_hint), None)])[0]
        session_id = _session_of(result, source)
        _refuse_bad_name(session_id, source)
        target = out / session_id
        if target in taken:
            raise SelectionError(
                f"{source.name}: session {session_id} is selected twice: repair it once"
            )
        _refuse_to_overwrite(target, source.path)
        judged = _judged(result, snapshot, now, within) if within is not None else None
        if judged is not None and doctor.RUNNING in judged.sessions["verdict"].to_list():
            raise SelectionError(
                f"{source.name}: doctor calls this session running (no shutdown, its last event "
                f"within {within}): a copy would miss what is written next. Repair it once it "
                "ends, or add --even-if-running"
            )
        done = Repair(session_id, Path(os.path.abspath(source.path)), target, scratch=scratch)
        done.original_bytes, done.original_sha256 = size, digest
        with open(snapshot, "rb") as log:
            units = _salvage(log, result, done)
        units = _close_lost_turn_ends(_close_open_tools(units, result, done), result, done)
        _relink(units, done)
        _count(units, done)
        done.changes.sort(key=lambda change: change.line)
        _write(scratch, source.path, out, units, done, mode)
        return done
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        snapshot.unlink(missing_ok=True)


def _snapshot(original: Path, into: Path) -> tuple[int, str, int]:
    """``original``'s bytes copied to ``into``: (their count, their sha256, the log's mode)."""
    digest = hashlib.sha256()
    with open(original, "rb") as log, open(into, "wb") as copy:
        mode = stat.S_IMODE(os.fstat(log.fileno()).st_mode)
        for block in iter(lambda: log.read(1 << 20), b""):
            digest.update(block)
            copy.write(block)
        size = copy.tell()
    return size, digest.hexdigest(), mode


def _session_of(result: ReadResult, source: Source) -> str:
    sessions = result.events["session_id"].unique(maintain_order=True).to_list()
    if len(sessions) > 1:
        raise SelectionError(
            f"{source.name} holds {len(sessions)} sessions ({', '.join(sessions[:3])}): "
            "--repair copies one session's log; split the file first"
        )
    if not sessions:
        raise SelectionError(
            f"{source.name} holds no event copilot-logs can read: nothing to repair"
        )
    return str(sessions[0])


def _refuse_bad_name(session_id: str, source: Source) -> None:
    """The copy's folder is named after the session: the id must be one plain folder name
    (no separator, no NUL, not ``.`` or ``..``), so the copy stays inside ``--out``."""
    separators = {"/", "\x00", os.sep, *([os.altsep] if os.altsep else [])}
    if (
        session_id in ("", ".", "..")
        or any(mark in session_id for mark in separators)
        or len(os.fsencode(session_id)) > 255
    ):
        raise SelectionError(
            f"{source.name}: its sessionId {session_id!r} is not a folder name (a separator, "
            "a NUL, '..', or too long): the copy would not stay inside --out; nothing written"
        )


def _refuse_to_overwrite(target: Path, original: Path) -> None:
    if os.path.lexists(target) or target.resolve() == original.parent.resolve():
        raise SelectionError(
            f"{target} exists already: --repair never writes over a session; choose another --out"
        )


def _judged(
    result: ReadResult, log: Path, now: datetime | None, within: timedelta
) -> doctor.Doctor:
    """doctor's judgement of the one log ``result`` read from ``log``."""
    return doctor.judge(
        [doctor.facts(result)],
        files={Source(log, "").name: log},
        now=now or datetime.now().astimezone(),
        running_within=within,
    )


def _salvage(log: BinaryIO, result: ReadResult, done: Repair) -> list[Unit]:
    """The events of the log as units; the bytes between them set aside (listed in ``done``)."""
    units: list[Unit] = []
    # What the reader reported of each line, for the changes made there.
    messages = pl.format("{}: {}", "kind", "message").str.join("; ")
    why = dict(result.diagnostics.group_by("line", maintain_order=True).agg(messages).iter_rows())

    def gap(data: bytes, offset: int, line: int) -> bool:
        """Set aside ``data`` (read at ``offset``, from ``line``), but for the newline that
        ended the line before it; whether anything was."""
        aside = data.removeprefix(b"\n")
        if aside:
            at = line + (data[:1] == b"\n")
            _set_aside(done, aside, offset + len(data) - len(aside), at, _why(why, at))
        return bool(aside)

    cursor, line = 0, 1
    for row in result.events.sort("offset").iter_rows(named=True):
        log.seek(cursor)
        between = log.read(row["offset"] - cursor)
        after_gap = gap(between, cursor, line)
        line += between.count(b"\n")
        log.seek(row["offset"])
        data = log.read(row["length"])
        units.append(_unit(row, data, line, after_gap, why, done))
        line += data.count(b"\n")
        cursor = row["offset"] + row["length"]
    rest = log.read()
    if not gap(rest, cursor, line) and units and not rest:
        done.changes.append(Change(units[-1].line, "added the newline", "the last line had none"))
    return units


def _why(why: dict[int, str], line: int) -> str:
    return why.get(line, "bytes that are not an event")


def _set_aside(done: Repair, data: bytes, offset: int, line: int, why: str) -> None:
    start = done.set_aside_bytes
    done.pieces.append(data)
    sha256 = hashlib.sha256(data).hexdigest()
    done.set_aside.append(
        {
            "line": line,
            "offset": offset,
            "length": len(data),
            "sidecar_offset": start,
            "sha256": sha256,
            "why": why,
        }
    )
    size = f"{len(data)} byte" if len(data) == 1 else f"{len(data)} bytes"
    done.changes.append(Change(line, f"set aside {size} (sidecar offset {start})", why))


def _unit(
    row: dict[str, Any], data: bytes, line: int, after_gap: bool, why: dict[int, str], done: Repair
) -> Unit:
    """One event's bytes made a clean line: padding set aside, split lines joined, raw line
    separators escaped, bytes that are not UTF-8 written as U+FFFD (as the reader reads them;
    the line as it was goes to the sidecar)."""
    core = data.strip(b"\x00").rstrip(b"\r")
    lead = len(data) - len(data.lstrip(b"\x00"))
    offset = row["offset"] + lead
    for piece, at in ((data[:lead], row["offset"]), (data[lead + len(core) :], offset + len(core))):
        if piece:
            _set_aside(done, piece, at, line, _why(why, line))
    as_it_was = core
    if b"\n" in core:
        count = core.count(b"\n")
        core = core.replace(b"\r\n", b"\\r\\n").replace(b"\n", b"\\n")
        joined = f"joined lines {line}-{line + count} into one event"
        done.changes.append(Change(line, joined, why.get(line, "raw newlines inside a string")))
    try:
        core.decode("utf-8")
    except UnicodeDecodeError:
        was = "the line as it was, before its bytes that are not UTF-8 were replaced"
        _set_aside(done, as_it_was, offset, line, was)
        done.changes.append(
            Change(
                line,
                "wrote the bytes that are not UTF-8 as U+FFFD",
                "the line is not UTF-8; the original line is in the sidecar",
            )
        )
        core = core.decode("utf-8", "replace").encode()
    for raw, escape in SEPARATORS.items():
        if raw in core:
            core = core.replace(raw, escape)
            written = f"wrote the raw U+{escape.decode()[2:].upper()} as {escape.decode()}"
            done.changes.append(Change(line, written, _refusing("u2028")))
    writer = cli_format.writer(row["agent_id"], row["parent_tool_call_id"])
    return Unit(
        line,
        core,
        row["event_id"],
        row["type"],
        writer,
        row["tool_call_id"],
        row["turn_id"],
        after_gap or bool(lead),
    )


def _refusing(damage: str) -> str:
    """Why a damage is mended: the recorded versions that did not resume a log with it."""
    versions = [v for v, outcome in doctor.OUTCOMES.get(damage, {}).items() if outcome != "resumed"]
    if not versions:
        return "it is not what the CLI writes"
    return f"CLI {', '.join(versions)} did not resume a log holding it (recorded)"


def _write(
    scratch: Path, original: Path, out: Path, units: list[Unit], done: Repair, mode: int
) -> None:
    """The copy, written in ``scratch`` (moved into place once every session is ready): the
    log, the sidecar and repair.json with the log's mode, the folder's other files as they
    are; then judged."""
    if original.name == EVENTS:
        shutil.copymode(original.parent, scratch)
        _copy_siblings(original.parent, scratch, out, done)
    else:
        # searchable by whoever may read the log
        readers = mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        scratch.chmod(stat.S_IRWXU | readers | (readers >> 2))
    _written_like_the_log(scratch / EVENTS, (unit.data + b"\n" for unit in units), mode)
    if done.pieces:
        _written_like_the_log(scratch / SIDECAR, done.pieces, mode)
    copy = scratch / EVENTS
    judged = _judged(
        read_files([(Source(copy, done.session_id), None)])[0], copy, None, timedelta(0)
    )
    verdicts = judged.sessions["verdict"].to_list()
    done.verdict = verdicts[0] if verdicts else doctor.CANNOT_RESUME
    fatal = judged.reasons.filter(pl.col("severity") == doctor.FATAL)
    done.blockers = list(fatal.select("line", "message").iter_rows(named=True))
    report = json.dumps(done.record(), indent=1, ensure_ascii=False) + "\n"
    _written_like_the_log(scratch / REPORT, [report.encode()], mode)


def _written_like_the_log(path: Path, blocks: Iterable[bytes], mode: int) -> None:
    """A new file holding ``blocks``, with the mode every file copilot-logs writes from a log
    gets (:mod:`copilot_logs.modes`): the log's read and write bits, never more open than the
    umask (a 0600 log's copy is 0600)."""
    with open(modes.create(path, modes.like(mode)), "wb") as written:
        written.writelines(blocks)


def _copy_siblings(folder: Path, into: Path, out: Path, done: Repair, below: str = "") -> None:
    """What else the session's folder holds (workspace.yaml, checkpoints/, ...), copied as it
    is; the log itself is written apart. Not copied, and listed: the CLI's ``inuse.<pid>.lock``
    (the copy would look held by that process), ``--out`` when it is inside the folder, and
    what is not a file, a folder or a link (a named pipe, a socket, a device)."""
    for entry in sorted(folder.iterdir()):
        name = f"{below}{entry.name}"
        if not below and entry.name == EVENTS:
            continue
        mode = entry.lstat().st_mode
        if stat.S_ISDIR(mode) and entry.resolve() == out:
            done.not_copied.append({"path": name, "why": "the --out folder the copy is written to"})
        elif not below and IN_USE.fullmatch(entry.name):
            done.not_copied.append(
                {"path": name, "why": "the lock of the CLI that held the session"}
            )
        elif stat.S_ISLNK(mode) or stat.S_ISREG(mode):
            shutil.copy2(entry, into / entry.name, follow_symlinks=False)
        elif stat.S_ISDIR(mode):
            (into / entry.name).mkdir()
            _copy_siblings(entry, into / entry.name, out, done, f"{name}/")
            shutil.copystat(entry, into / entry.name)
        else:
            kind = "a named pipe" if stat.S_ISFIFO(mode) else "a device"
            kind = "a socket" if stat.S_ISSOCK(mode) else kind
            done.not_copied.append({"path": name, "why": f"{kind}, not a file"})


Insert = tuple[int, Unit, Change]
"""An event the repair adds: where, the event, and the change listed for it."""
CLOSE = "tool.execution_complete"
TURN_START = "assistant.turn_start"
TURN_END = "assistant.turn_end"
ENDS = {
    "X302": TURN_END,  # the turn ended without the tool's result
    "X307": "session.shutdown",  # the session shut down while it ran
    "X303": None,  # the log ends while it runs
}


def _close_open_tools(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    """A closing event for each tool validate finds open, placed where its turn (or the
    session) ended, else at the end."""
    found = check(result, select=sorted(ENDS)).sort("line")
    by_id = {unit.event_id: index for index, unit in enumerate(units) if unit.event_id}
    tasks = {u.agent_id: u.tool_call_id for u in units if u.type == "subagent.started"}
    inserts: list[Insert] = []
    for code, event_id in found.select("code", "event_id").iter_rows():
        start = by_id.get(event_id)
        if start is None:
            continue
        at = _closing_place(units, start, ENDS[code], tasks)
        opened = units[start]
        line = units[at].line if at < len(units) else units[-1].line + 1
        closing = Unit(
            line,
            b"",
            _id_closing(event_id),
            CLOSE,
            opened.agent_id,
            opened.tool_call_id,
            marks=_marks(opened),
        )
        change = Change(
            line,
            f"added a tool.execution_complete closing {opened.tool_call_id} (started on "
            f"line {opened.line}) as interrupted",
            "the tool call was left open; the CLI closes one so when it resumes "
            f"(recorded with {doctor.CLOSE_VERSION})",
        )
        inserts.append((at, closing, change))
    return _inserted(units, inserts, done)


def _close_lost_turn_ends(units: list[Unit], result: ReadResult, done: Repair) -> list[Unit]:
    """An ``assistant.turn_end`` for a turn whose end was lost (set aside with damaged bytes):
    validate finds the next turn starting while it is open (T202); the end is added right
    before that start, so the turns pair again."""
    by_id = {unit.event_id: index for index, unit in enumerate(units) if unit.event_id}
    inserts: list[Insert] = []
    for event_id in check(result, select=["T202"])["event_id"].to_list():
        if (at := by_id.get(event_id)) is None:
            continue
        starts = (u for u in reversed(units[:at]) if u.type == TURN_START and u.agent_id is None)
        if (opened := next(starts, None)) is None:
            continue
        line = units[at].line
        closing = Unit(line, b"", _id_closing(f"turn:{event_id}"), TURN_END, turn_id=opened.turn_id)
        change = Change(
            line,
            f"added an assistant.turn_end closing turn {opened.turn_id} (started on line "
            f"{opened.line})",
            "a new turn starts here while that one is open: its turn_end was lost",
        )
        inserts.append((at, closing, change))
    return _inserted(units, inserts, done)


def _inserted(units: list[Unit], inserts: list[Insert], done: Repair) -> list[Unit]:
    """``units`` with each added event in its place (its change listed), the event after it
    marked as following a gap."""
    for at, added, _change in sorted(inserts, key=lambda item: item[0], reverse=True):
        units.insert(at, added)
        if at + 1 < len(units):
            units[at + 1].after_gap = True
    done.changes.extend(change for _, _, change in inserts)
    return units


def _id_closing(start_id: str) -> str:
    """The id of the event closing the tool started by ``start_id``: the same in every repair
    of the log (a name-based UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"copilot-logs:doctor:close:{start_id}"))


def _closing_place(
    units: list[Unit], start: int, end_type: str | None, tasks: dict[str | None, str | None]
) -> int:
    """Where the tool started at ``start`` is closed: before ``end_type`` of its own agent;
    a sub-agent's tool also before its sub-agent ends (its ``task`` call completes, or
    ``subagent.completed`` / ``failed``) and before the main agent's turn ends or the
    session shuts down; else at the end."""
    opened = units[start]
    task = tasks.get(opened.agent_id, opened.agent_id) if opened.agent_id else None
    for index in range(start + 1, len(units)):
        unit = units[index]
        if end_type and unit.type == end_type and unit.agent_id == opened.agent_id:
            return index
        if task is not None and (
            (
                unit.type in ("subagent.completed", "subagent.failed", CLOSE)
                and unit.tool_call_id == task
            )
            or (unit.type == TURN_END and unit.agent_id is None)
            or unit.type == "session.shutdown"
        ):
            return index
    return len(units)


def _marks(opened: Unit) -> dict[str, Any]:
    """The sub-agent marks of the event ``opened`` as it carries them: the envelope
    ``agentId`` (1.0.3x on) and ``data.parentToolCallId`` (1.0.2x has only this one)."""
    event = parse_line(opened.data) or {}
    data = event["data"] if isinstance(event.get("data"), dict) else {}
    held = (("agentId", event), ("parentToolCallId", data))
    return {key: where[key] for key, where in held if key in where}


def _relink(units: list[Unit], done: Repair) -> None:
    """Fill in the added events and keep the parent chain whole across what changed."""
    previous: dict[str, Any] = {}
    for unit in units:
        if not unit.data:
            unit.data = orjson.dumps(_closing_event(unit, previous))
        elif unit.after_gap and previous:
            event = parse_line(unit.data)
            relinked = with_value(unit.data, ("parentId",), orjson.dumps(previous.get("id")))
            if event is not None and event.get("parentId") != previous.get("id") and relinked:
                unit.data = relinked
                done.changes.append(
                    Change(
                        unit.line,
                        f"parentId {event.get('parentId')} -> {previous.get('id')}",
                        f"the event it named is not in the copy; line {unit.line} now follows "
                        "the event before it",
                    )
                )
        previous = parse_line(unit.data) or {}


def _closing_event(unit: Unit, previous: dict[str, Any]) -> dict[str, Any]:
    """An added event at the time of the event before it: the CLI's own closing of an open
    tool call, or the end of a turn."""
    data = (
        {"toolCallId": unit.tool_call_id, **doctor.CLOSE_TOOL}
        if unit.type == CLOSE
        else {"turnId": unit.turn_id}
    )
    if "parentToolCallId" in unit.marks:
        data["parentToolCallId"] = unit.marks["parentToolCallId"]
    event: dict[str, Any] = {"type": unit.type, "data": data}
    if "agentId" in unit.marks:
        event["agentId"] = unit.marks["agentId"]
    return event | {
        "id": unit.event_id,
        "timestamp": previous.get("timestamp"),
        "parentId": previous.get("id"),
    }


COUNTED = {
    "session.resume": ("eventCount", "eventsFileSizeBytes"),
    "session.shutdown": ("eventsFileSizeBytes",),
}


def _count(units: list[Unit], done: Repair) -> None:
    """The resume and shutdown counters set to what the copy holds before each."""
    offset = 0
    for count, unit in enumerate(units):
        truth = {"eventCount": count, "eventsFileSizeBytes": offset}
        fields = COUNTED.get(unit.type, ())
        data = (parse_line(unit.data) or {}).get("data") if fields else None
        for name in fields:
            span = value_span(unit.data, ("data", name))
            wrong = isinstance(data, dict) and name in data and data[name] != truth[name]
            if not wrong or span is None:
                continue
            was = unit.data[span[0] : span[1]].decode("utf-8", "replace")
            unit.data = unit.data[: span[0]] + str(truth[name]).encode() + unit.data[span[1] :]
            done.changes.append(
                Change(
                    unit.line,
                    f"{unit.type} {name} {was} -> {truth[name]}",
                    "what the copy holds before this line",
                )
            )
        offset += len(unit.data) + 1
