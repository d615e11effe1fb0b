"""What ``doctor`` finds in one batch of logs, before judging: each finding names a file, a
line and, where the resume evidence has a row for it, the damage it is (see
:mod:`copilot_logs.commands.doctor`); and each session's figures (the CLI version
that wrote it, its span, its bytes by event type).

The damage is what the reader already reports (its diagnostics) and what ``validate``'s rules
already find (open tool calls, unfinished sub-agents): nothing here reads a line again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.validate import check
from copilot_logs.derive import SESSION, TYPE, WORK
from copilot_logs.ingest.reader import ReadResult

FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "file": pl.String(),
    "line": pl.Int64(),
    "event_id": pl.String(),
    "code": pl.String(),
    "damage": pl.String(),  # the evidence table's row, or null when none applies
    "message": pl.String(),
}

DAMAGE = "damage"
OPEN_TOOL = "open-tool-call"
OUT_OF_PLACE = "out-of-place"
NO_SHUTDOWN = "no-shutdown"
BYTES = "bytes"
SIZE = "size"

DAMAGE_OF_KIND = {
    "cut-line": "cut-last-line",
    "nul-bytes": "nul-tail",
    "truncated-event": "glued-line",
    "split-event": "raw-newline",
    "invalid-utf8": "invalid-utf8",
    "blank-line": "blank-line",
    "duplicate-id": "duplicate-line",
}
"""The reader's diagnostic kinds the resume evidence has a row for."""

VALID_JSON_KINDS = frozenset({"out-of-range-number", "lone-surrogate"})
"""Kinds that are valid JSON, which the CLI parses like any line: noted, never a risk."""

DAMAGE_OF_RULE = {
    "X303": (OPEN_TOOL, "orphan-start"),
    "X307": (OPEN_TOOL, "orphan-start"),
    "X309": (OPEN_TOOL, "orphan-start"),
    "X306": (OPEN_TOOL, "orphan-request"),
    "X302": (OPEN_TOOL, "orphan-mid"),
    "S401": (OUT_OF_PLACE, None),
    "S402": (OUT_OF_PLACE, None),
    "X305": (OUT_OF_PLACE, None),
}
"""validate's rules whose findings doctor reports, as (code, evidence row)."""

SYSTEM_MESSAGE = "system.message"


def findings(result: ReadResult) -> pl.DataFrame:
    """Everything doctor reports of a batch's lines, in FINDINGS_SCHEMA."""
    parts = [
        _damage(result.diagnostics),
        _structure(result),
        _no_shutdown(result.events),
        _bytes(result.events),
    ]
    return pl.concat(
        [part.select(*FINDINGS_SCHEMA).cast(pl.Schema(FINDINGS_SCHEMA)) for part in parts]
    )


def _damage(diagnostics: pl.DataFrame) -> pl.DataFrame:
    """The reader's damage, one finding per damaged line (a split event once, at its first
    line)."""
    follower = (pl.col("kind") == "split-event") & pl.col("message").str.starts_with("continues")
    kept = diagnostics.filter(~follower & ~pl.col("kind").is_in(VALID_JSON_KINDS))
    return kept.with_columns(
        code=pl.lit(DAMAGE),
        damage=pl.col("kind").replace_strict(DAMAGE_OF_KIND, default=None, return_dtype=pl.String),
        message=pl.format("{}: {}", "kind", "message"),
    )


def _structure(result: ReadResult) -> pl.DataFrame:
    found = check(result, select=sorted(DAMAGE_OF_RULE))
    codes = {rule: code for rule, (code, _) in DAMAGE_OF_RULE.items()}
    damages = {rule: damage for rule, (_, damage) in DAMAGE_OF_RULE.items() if damage}
    return found.with_columns(
        damage=pl.col("code").replace_strict(damages, default=None, return_dtype=pl.String),
        code=pl.col("code").replace_strict(codes, return_dtype=pl.String),
        message=pl.format("{} {}: {}", "code", "name", "message"),
    )


def _unsaved(events: pl.DataFrame) -> pl.DataFrame:
    """Per session: its last line and event, and the first event of work after its last
    session.shutdown (null when the shutdown came after all its work)."""
    shutdown = pl.col("line").filter(TYPE == "session.shutdown").max()
    work = TYPE.is_in(WORK)
    return events.group_by(SESSION, maintain_order=True).agg(
        pl.col("line").last(),
        pl.col("event_id").last(),
        pl.col("type").last().alias("last_type"),
        shutdown.alias("shutdown_line"),
        pl.col("line")
        .filter(work & (pl.col("line") > shutdown.fill_null(0)))
        .first()
        .alias("unsaved_line"),
    )


def _no_shutdown(events: pl.DataFrame) -> pl.DataFrame:
    """A session that worked after its last session.shutdown (or has none): the usage of that
    run was never written (the CLI writes it only at shutdown)."""
    return (
        _unsaved(events)
        .filter(pl.col("unsaved_line").is_not_null())
        .with_columns(
            code=pl.lit(NO_SHUTDOWN),
            damage=pl.lit("no-shutdown"),
            message=pl.when(pl.col("shutdown_line").is_null())
            .then(pl.format("no session.shutdown: the log ends with {}", "last_type"))
            .otherwise(
                pl.format(
                    "no session.shutdown after line {}: work from line {} on, the log ends with {}",
                    "shutdown_line",
                    "unsaved_line",
                    "last_type",
                )
            )
            + pl.lit("; the usage of that run (tokens, requests) was never written"),
        )
    )


def _bytes(events: pl.DataFrame) -> pl.DataFrame:
    """Where a session's bytes go: the system prompt, written again as a system.message before
    every prompt, is often most of a log."""
    system = TYPE == SYSTEM_MESSAGE
    shares = events.group_by(SESSION, maintain_order=True).agg(
        pl.col("line").filter(system).first(),
        pl.col("event_id").filter(system).first(),
        system.sum().alias("count"),
        pl.col("length").filter(system).sum().alias("bytes"),
        pl.col("length").sum().alias("total"),
    )
    return shares.filter(pl.col("count") > 0).with_columns(
        code=pl.lit(BYTES),
        damage=pl.lit(None, pl.String),
        message=pl.format(
            "system.message: {}, {} of the {} bytes of events ({}%): the whole system "
            "prompt, written again before every prompt",
            pl.when(pl.col("count") == 1)
            .then(pl.lit("1 line"))
            .otherwise(pl.format("{} lines", "count")),
            "bytes",
            "total",
            (pl.col("bytes") * 100 / pl.col("total")).round(0).cast(pl.Int64),
        ),
    )


LINE_SEPARATORS = (b"\xe2\x80\xa8", b"\xe2\x80\xa9")
"""U+2028 and U+2029 in UTF-8: valid inside a JSON string, and so not damage to the reader."""


def separators(
    figures: pl.DataFrame, files: Mapping[str, Path], wanted: Callable[[str | None], bool]
) -> pl.DataFrame:
    """A finding for each line holding a raw U+2028 or U+2029, in the logs of the sessions
    whose CLI version ``wanted`` names (it is found by a search of the file's bytes, so only
    where it matters: the versions that refuse it)."""
    rows = []
    for file, session_id, version in figures.select(
        "file", "session_id", "cli_version"
    ).iter_rows():
        path = files.get(file)
        if path is None or not wanted(version):
            continue
        for line in _separator_lines(path):
            rows.append((session_id, file, line, None, DAMAGE, "u2028", SEPARATOR_MESSAGE))
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA, orient="row")


SEPARATOR_MESSAGE = "a raw U+2028 or U+2029 inside a string (valid JSON)"


def _separator_lines(path: Path, block: int = 1 << 20) -> list[int]:
    """The lines of ``path`` holding a raw U+2028 or U+2029."""
    found: list[int] = []
    newlines, tail = 0, b""
    try:
        with open(path, "rb") as log:
            for chunk in iter(lambda: log.read(block), b""):
                data = tail + chunk
                for mark in LINE_SEPARATORS:
                    at = data.find(mark)
                    while at != -1:
                        found.append(newlines + data.count(b"\n", 0, at) + 1)
                        at = data.find(mark, at + 1)
                keep = min(2, len(data))
                newlines += data.count(b"\n", 0, len(data) - keep)
                tail = data[len(data) - keep :]
    except OSError:
        return []
    return sorted(set(found))


_CONTINUATION = bytes(range(0x80, 0xC0))
_FOUR_BYTE_LEAD = bytes(range(0xF0, 0xF8))


def utf16_units(path: Path, block: int = 1 << 24) -> int | None:
    """The length of ``path``'s text as a JavaScript string (UTF-16 code units): each UTF-8
    sequence is one unit, a four-byte one two; None when it cannot be read."""
    units = 0
    try:
        with open(path, "rb") as log:
            for chunk in iter(lambda: log.read(block), b""):
                continuation = len(chunk) - len(chunk.translate(None, _CONTINUATION))
                four = len(chunk) - len(chunk.translate(None, _FOUR_BYTE_LEAD))
                units += len(chunk) - continuation + four
    except OSError:
        return None
    return units


FIGURES_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "file": pl.String(),
    "cli_version": pl.String(),
    "started_at": pl.Datetime("ms", "UTC"),
    "last_event_at": pl.Datetime("ms", "UTC"),
    "events": pl.UInt32(),
    "last_line": pl.Int64(),
    "bytes_read": pl.Int64(),
    "shut_down": pl.Boolean(),
}


def figures(events: pl.DataFrame) -> pl.DataFrame:
    """One row per session: the CLI version that started it (``session.start``'s
    copilotVersion: a later resume by another version is not written down), its first and
    last event times, its lines and the bytes of its events, and whether its last run shut
    down (the session model's ``ended``)."""
    facts = derive.session_facts(derive.annotate(events))
    read = events.group_by(SESSION, maintain_order=True).agg(
        pl.len().alias("events"),
        (pl.col("offset") + pl.col("length")).max().alias("bytes_read"),
    )
    frame = facts.join(read, on=list(SESSION), how="left").select(
        *SESSION,
        cli_version="copilot_version",
        started_at="first_at",
        last_event_at="last_at",
        events="events",
        last_line="last_line",
        bytes_read="bytes_read",
        shut_down="ended",
    )
    return frame.select(*FIGURES_SCHEMA).cast(pl.Schema(FIGURES_SCHEMA))
