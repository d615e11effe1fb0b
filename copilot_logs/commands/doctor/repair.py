"""``doctor --repair``: a repaired copy of a session's folder under another folder, the
original never touched.

The copy keeps every event the reader recovers, one to a line, and nothing else: the bytes
around them that are not an event (a cut last line, a NUL tail, the truncated event a glued
line begins with, a line that is not JSON, a replayed line) go to a sidecar file, byte for
byte, so nothing is lost. An event split by raw newlines is joined (each raw newline written
as the ``\\n`` escape it stood for), a raw U+2028 or U+2029 is written as its escape (some
versions refuse the raw character), and then :mod:`~copilot_logs.commands.doctor.mend` closes
open tool calls the way the CLI closes them and keeps the parent chain and the resume and
shutdown counters true. Every change is listed: the line of the original, what, why.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from copilot_logs.errors import SelectionError
from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.store.collect import read_files

EVENTS = "events.jsonl"
SIDECAR = "events.jsonl.set-aside"
REPORT = "repair.json"
SEPARATORS = {b"\xe2\x80\xa8": b"\\u2028", b"\xe2\x80\xa9": b"\\u2029"}


@dataclass(frozen=True)
class Change:
    line: int
    """The line of the original file the change is at (an added event: the line after it)."""
    what: str
    why: str


@dataclass
class Unit:
    """One event of the copy: its bytes (no newline), where it was, what it is."""

    line: int
    data: bytes
    event_id: str | None
    type: str
    agent_id: str | None = None
    tool_call_id: str | None = None
    turn_id: str | None = None
    after_gap: bool = False
    """Bytes were set aside (or an event added) right before it: its parentId may name them."""
    offset: int = -1
    """Its byte offset in the original (-1: added by the repair)."""


@dataclass
class Repair:
    """What ``--repair`` wrote for one session."""

    session_id: str
    source: Path
    folder: Path
    changes: list[Change] = field(default_factory=list)
    set_aside: list[dict[str, Any]] = field(default_factory=list)

    @property
    def events(self) -> Path:
        return self.folder / EVENTS

    @property
    def sidecar(self) -> Path:
        return self.folder / SIDECAR

    @property
    def set_aside_bytes(self) -> int:
        return sum(int(piece["length"]) for piece in self.set_aside)

    def record(self) -> dict[str, Any]:
        """The json of ``--format json`` and of the copy's ``repair.json``."""
        return {
            "session_id": self.session_id,
            "source": str(self.source),
            "events": str(self.events),
            "sidecar": str(self.sidecar) if self.set_aside else None,
            "changes": [asdict(change) for change in self.changes],
            "set_aside": self.set_aside,
        }


def repair(source: Source, out: Path) -> Repair:
    """Write the repaired copy of ``source``'s session as ``out/<sessionId>/``."""
    from copilot_logs.commands.doctor import mend

    if source.path is None:
        raise SelectionError("--repair reads a session's file, not standard input")
    result = read_files([(source, None)])[0]
    session_id = _session_of(result, source)
    target = out / session_id
    _refuse_to_overwrite(target, source.path)
    done = Repair(session_id, source.path, target)
    with open(source.path, "rb") as log:
        units, pieces = _salvage(log, result, done)
        units = mend.mended(units, result, done)
        done.changes.sort(key=lambda change: change.line)
        _write(target, source.path, units, pieces, done)
    return done


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


def _refuse_to_overwrite(target: Path, original: Path) -> None:
    if target.exists() or target.resolve() == original.parent.resolve():
        raise SelectionError(
            f"{target} exists already: --repair never writes over a session; choose another --out"
        )


def _salvage(log: BinaryIO, result: ReadResult, done: Repair) -> tuple[list[Unit], list[bytes]]:
    """The events of the log as units, and the bytes set aside between them (listed in
    ``done``)."""
    units: list[Unit] = []
    pieces: list[bytes] = []
    why = _why_by_line(result.diagnostics)
    cursor, line = 0, 1
    for row in result.events.sort("offset").iter_rows(named=True):
        gap = _read(log, cursor, row["offset"] - cursor)
        newlines = gap.count(b"\n")
        aside = gap[1:] if gap.startswith(b"\n") else gap
        if aside:
            _set_aside(
                aside, cursor + len(gap) - len(aside), line + (gap[:1] == b"\n"), why, pieces, done
            )
        line += newlines
        data = _read(log, row["offset"], row["length"])
        units.append(_unit(row, data, line, bool(aside), why, pieces, done))
        line += data.count(b"\n")
        cursor = row["offset"] + row["length"]
    rest = log.read()
    aside = rest[1:] if rest.startswith(b"\n") else rest
    if aside:
        _set_aside(
            aside, cursor + len(rest) - len(aside), line + (rest[:1] == b"\n"), why, pieces, done
        )
    elif units and not rest:
        done.changes.append(Change(units[-1].line, "added the newline", "the last line had none"))
    return units, pieces


def _bytes(count: int) -> str:
    return f"{count} byte" if count == 1 else f"{count} bytes"


def _read(log: BinaryIO, offset: int, length: int) -> bytes:
    log.seek(offset)
    return log.read(length)


def _why_by_line(diagnostics: pl.DataFrame) -> dict[int, str]:
    why: dict[int, str] = {}
    for line, kind, message in diagnostics.select("line", "kind", "message").iter_rows():
        why[line] = f"{why[line]}; {kind}: {message}" if line in why else f"{kind}: {message}"
    return why


def _set_aside(
    data: bytes, offset: int, line: int, why: dict[int, str], pieces: list[bytes], done: Repair
) -> None:
    start = sum(len(piece) for piece in pieces)
    pieces.append(data)
    reason = why.get(line, "bytes that are not an event")
    done.set_aside.append(
        {
            "line": line,
            "offset": offset,
            "length": len(data),
            "sidecar_offset": start,
            "sha256": hashlib.sha256(data).hexdigest(),
            "why": reason,
        }
    )
    done.changes.append(
        Change(line, f"set aside {_bytes(len(data))} (sidecar offset {start})", reason)
    )


def _unit(
    row: dict[str, Any],
    data: bytes,
    line: int,
    after_gap: bool,
    why: dict[int, str],
    pieces: list[bytes],
    done: Repair,
) -> Unit:
    """One event's bytes made a clean line: padding set aside, split lines joined, raw line
    separators escaped."""
    core = data.strip(b"\x00").rstrip(b"\r")
    lead = len(data) - len(data.lstrip(b"\x00"))
    if len(core) != len(data):
        for piece, at in (
            (data[:lead], row["offset"]),
            (data[lead + len(core) :], row["offset"] + lead + len(core)),
        ):
            if piece:
                _set_aside(piece, at, line, why, pieces, done)
    if b"\n" in core:
        count = core.count(b"\n")
        core = core.replace(b"\r\n", b"\\n").replace(b"\n", b"\\n")
        done.changes.append(
            Change(
                line,
                f"joined lines {line}-{line + count} into one event",
                why.get(line, "raw newlines inside a string"),
            )
        )
    core = _valid_utf8(core, row["offset"] + lead, line, pieces, done)
    for raw, escape in SEPARATORS.items():
        if raw in core:
            core = core.replace(raw, escape)
            done.changes.append(
                Change(
                    line,
                    f"wrote the raw U+{escape.decode()[2:].upper()} as {escape.decode()}",
                    _refusing("u2028"),
                )
            )
    return Unit(
        line,
        core,
        row["event_id"],
        row["type"],
        row["agent_id"],
        row["tool_call_id"],
        row["turn_id"],
        after_gap or bool(lead),
        row["offset"],
    )


def _refusing(damage: str) -> str:
    """Why a damage is mended: the recorded versions that did not resume a log with it."""
    from copilot_logs.commands.doctor import evidence

    versions = [
        v for v, outcome in evidence.OUTCOMES.get(damage, {}).items() if outcome != "resumed"
    ]
    if not versions:
        return "it is not what the CLI writes"
    return f"CLI {', '.join(versions)} did not resume a log holding it (recorded)"


def _valid_utf8(core: bytes, offset: int, line: int, pieces: list[bytes], done: Repair) -> bytes:
    """``core`` with bytes that are not UTF-8 written as U+FFFD (as the reader reads them);
    the line as it was goes to the sidecar."""
    try:
        core.decode("utf-8")
    except UnicodeDecodeError:
        _set_aside(
            core,
            offset,
            line,
            {line: "the line as it was, before its bytes that are not UTF-8 were replaced"},
            pieces,
            done,
        )
        done.changes.append(
            Change(
                line,
                "wrote the bytes that are not UTF-8 as U+FFFD",
                "the line is not UTF-8; the original line is in the sidecar",
            )
        )
        return core.decode("utf-8", "replace").encode()
    return core


def _write(
    target: Path, original: Path, units: list[Unit], pieces: list[bytes], done: Repair
) -> None:
    """The copy, written in a temporary folder beside it and moved into place whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        if original.name == EVENTS:
            shutil.copymode(original.parent, scratch)
            _copy_siblings(original.parent, scratch)
        else:
            scratch.chmod(0o755)
        with open(scratch / EVENTS, "wb") as out:
            for unit in units:
                out.write(unit.data + b"\n")
        if pieces:
            (scratch / SIDECAR).write_bytes(b"".join(pieces))
        record = {**done.record(), "original_sha256": _sha256(original)}
        (scratch / REPORT).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        scratch.rename(target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _copy_siblings(folder: Path, into: Path) -> None:
    """What else the session's folder holds (workspace.yaml, checkpoints/, ...), copied as it
    is; the log itself is written apart."""
    for entry in folder.iterdir():
        if entry.name == EVENTS:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, into / entry.name, symlinks=True)
        elif entry.is_file() or entry.is_symlink():
            shutil.copy2(entry, into / entry.name, follow_symlinks=False)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as log:
        for block in iter(lambda: log.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with open(path, "rb") as log:
        yield from iter(lambda: log.read(size), b"")
