"""Which sessions the Copilot CLI can no longer resume, and why (``copilot-logs doctor``).

Each session gets a verdict, the worst of its reasons (docs/doctor.md, "Verdicts" and
"Reasons"). The damage is judged by what the CLI version that wrote a log did in a real resume
of a log damaged the same way (``evidence.json`` beside this module, written by ``python -m
rig.resume --evidence``; tests/test_doctor.py checks it); a version not recorded, by the nearest
recorded version at or below it (the oldest for an older one), and the reasons name both.

What it finds is what the reader already reports (its diagnostics) and what ``validate``'s rules
already find (open tool calls, unfinished sub-agents): nothing here reads a line again, but for
the search of a raw U+2028 where the writer's version refuses it, and a log's UTF-16 length.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.validate import check
from copilot_logs.derive import SESSION, TYPE, WORK
from copilot_logs.ingest import cli_format
from copilot_logs.ingest.reader import ReadResult

_EVIDENCE = json.loads(Path(__file__).with_name("evidence.json").read_text(encoding="utf-8"))
VERSIONS: tuple[str, ...] = tuple(_EVIDENCE["versions"])
DAMAGES: dict[str, str] = _EVIDENCE["damages"]
OUTCOMES: dict[str, dict[str, str]] = _EVIDENCE["outcomes"]
"""Per damage and recorded CLI version, what its resume did (a key of SEVERITY_OF_OUTCOME)."""
NOTES: dict[str, dict[str, str]] = _EVIDENCE["notes"]
REPAIRED: dict[str, dict[str, str]] = _EVIDENCE["repaired"]
"""The same, for the copy ``doctor --repair`` wrote of each damaged recording."""
CLOSE_VERSION: str = _EVIDENCE["close_version"]
CLOSE_TOOL: dict[str, Any] = _EVIDENCE["close_tool"]
"""How CLOSE_VERSION closes a killed session's open tool call on resume (its data)."""


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


def findings(result: ReadResult) -> pl.DataFrame:
    """Everything doctor reports of a batch's lines, in FINDINGS_SCHEMA."""
    parts = [_damage(result.diagnostics), _structure(result)]
    parts += [_no_shutdown(result.events), _bytes(result.events)]
    schema = pl.Schema(FINDINGS_SCHEMA)
    return pl.concat([part.select(*FINDINGS_SCHEMA).cast(schema) for part in parts])


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


def _no_shutdown(events: pl.DataFrame) -> pl.DataFrame:
    """A session that worked after its last session.shutdown (or has none), at its last line:
    the usage of that run was never written (the CLI writes it only at shutdown)."""
    shutdown = pl.col("line").filter(TYPE == "session.shutdown").max()
    after = TYPE.is_in(WORK) & (pl.col("line") > shutdown.fill_null(0))
    return (
        events.group_by(SESSION, maintain_order=True)
        .agg(
            pl.col("line", "event_id").last(),
            last_type=pl.col("type").last(),
            shutdown_line=shutdown,
            unsaved_line=pl.col("line").filter(after).first(),
        )
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
    system = TYPE == "system.message"
    shares = events.group_by(SESSION, maintain_order=True).agg(
        pl.col("line", "event_id").filter(system).first(),
        count=system.sum(),
        bytes=pl.col("length").filter(system).sum(),
        total=pl.col("length").sum(),
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


def separators(figures: pl.DataFrame, files: Mapping[str, Path]) -> pl.DataFrame:
    """A finding for each line holding a raw U+2028 or U+2029 (valid JSON, so no damage to the
    reader), in the logs of the versions that refuse it: only there is the file searched."""
    message = "a raw U+2028 or U+2029 inside a string (valid JSON)"
    rows = [
        (session_id, file, line, None, DAMAGE, "u2028", message)
        for file, session_id, version in figures.select(*SESSION, "cli_version").iter_rows()
        if (path := files.get(file)) is not None and refuses_separators(version)
        for line in _separator_lines(path)
    ]
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA, orient="row")


def _separator_lines(path: Path, block: int = 1 << 20) -> list[int]:
    """The lines of ``path`` holding a raw U+2028 or U+2029."""
    found: list[int] = []
    newlines, tail = 0, b""
    try:
        with open(path, "rb") as log:
            for chunk in iter(lambda: log.read(block), b""):
                data = tail + chunk
                for mark in (b"\xe2\x80\xa8", b"\xe2\x80\xa9"):
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


INFO, RISK, FATAL = "info", "risk", "fatal"
SEVERITY_OF_OUTCOME = {
    "resumed": INFO,
    "resumed-dropping": RISK,
    "history-lost": RISK,
    "unanswered-tool-call": FATAL,
    "failed-after-call": FATAL,
    "no-call": FATAL,
    "refused": FATAL,
}
WORDS_OF_OUTCOME = {
    "resumed": "resumes such a log",
    "resumed-dropping": "resumes such a log but rewrites it without some of its events",
    "history-lost": "resumes such a log but leaves the earlier conversation out",
    "unanswered-tool-call": "sends the model a tool call without its result (providers refuse "
    "that request)",
    "failed-after-call": "fails after its first model call on such a log",
    "no-call": "makes no model call on such a log",
    "refused": "refuses to resume such a log",
}
FLOOR = {
    NO_SHUTDOWN: RISK,  # the usage of the run is lost, whatever the resume does
    OUT_OF_PLACE: RISK,
}
"""The least severity of a finding, whatever the evidence says."""

UNRECORDED = "No resume of a log with this damage was recorded"


def nearest(version: str | None, recorded: Iterable[str] = VERSIONS) -> str:
    """The recorded version whose evidence judges ``version``: itself, else the newest
    recorded below it, else the oldest recorded (the newest when the version is unknown)."""
    recorded = sorted(recorded, key=lambda v: cli_format.version_key(v) or ())
    key = cli_format.version_key(version)
    if key is None:
        return recorded[-1]
    below = [v for v in recorded if (cli_format.version_key(v) or ()) <= key]
    return below[-1] if below else recorded[0]


def refuses_separators(version: str | None) -> bool:
    """Whether the version that wrote a log does anything but resume one holding a raw
    U+2028 (so that the log is searched for it)."""
    known = outcome("u2028", version)
    return known is not None and known[0] != "resumed"


def outcome(damage: str, version: str | None) -> tuple[str, str, str] | None:
    """(outcome, recorded version, note) of ``damage`` for ``version``; None when no resume
    of that damage was recorded."""
    row = OUTCOMES.get(damage)
    if not row:
        return None
    recorded = nearest(version, row)
    return row[recorded], recorded, NOTES.get(damage, {}).get(recorded, "")


def _judgement(damage: str | None, code: str, version: str | None) -> tuple[str, str]:
    """(severity, the sentence added to the finding's message)."""
    known = outcome(damage, version) if damage else None
    if known is None:
        if code == DAMAGE:
            return RISK, UNRECORDED
        return FLOOR.get(code, INFO), ""
    result, recorded, note = known
    who = f"CLI {version or '(unknown version)'}"
    if recorded != version:
        who += f" (judged by {recorded}, the nearest recorded version)"
    sentence = f"{who} {WORDS_OF_OUTCOME[result]} (recorded{': ' + note if note else ''})"
    return max(SEVERITY_OF_OUTCOME[result], FLOOR.get(code, INFO), key=RANK.__getitem__), sentence


def judged(found: pl.DataFrame, figures: pl.DataFrame) -> pl.DataFrame:
    """The findings with the writer's version, a severity and the evidence in their message."""
    rows = found.join(
        figures.select("file", "session_id", "cli_version"), on=["file", "session_id"], how="left"
    )
    keys = rows.select("damage", "code", "cli_version").unique()
    table = pl.DataFrame(
        [
            (damage, code, version, *_judgement(damage, code, version))
            for damage, code, version in keys.iter_rows()
        ],
        schema=dict.fromkeys([*keys.columns, "severity", "_why"], pl.String),
        orient="row",
    )
    joined = rows.join(table, on=["damage", "code", "cli_version"], how="left", nulls_equal=True)
    return joined.with_columns(
        message=pl.when(pl.col("_why") != "")
        .then(pl.format("{}. {}", "message", "_why"))
        .otherwise("message")
    )


HEALTHY = "healthy"
RUNNING = "running"
AT_RISK = "at-risk"
CANNOT_RESUME = "cannot-resume"
VERDICTS = (HEALTHY, RUNNING, AT_RISK, CANNOT_RESUME)
DEFAULT_FAIL_ON = (RUNNING, AT_RISK, CANNOT_RESUME)

SEVERITIES = (INFO, RISK, FATAL)
RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}
VERDICT_OF = {INFO: HEALTHY, RISK: AT_RISK, FATAL: CANNOT_RESUME}

STRING_LIMIT = 536_870_888
"""The longest string V8 (the CLI's JavaScript engine) makes, in UTF-16 code units: a log the
CLI reads whole into one string cannot be longer (copilot-cli#4325, #4717)."""
SOON = timedelta(days=30)
HALF_LIMIT = STRING_LIMIT // 2

Facts = tuple[pl.DataFrame, pl.DataFrame]

REASONS_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "file": pl.String(),
    "line": pl.Int64(),
    "code": pl.String(),
    "severity": pl.String(),
    "damage": pl.String(),
    "message": pl.String(),
}


def facts(result: ReadResult) -> Facts:
    """What doctor needs of one batch of logs: (findings, figures), both by file, so that the
    store keeps them per log."""
    return findings(result), figures(result.events)


@dataclass(frozen=True)
class Doctor:
    """The verdicts (one row per session) and their reasons (rows in REASONS_SCHEMA)."""

    sessions: pl.DataFrame
    reasons: pl.DataFrame


def judge(
    parts: Iterable[Facts],
    *,
    files: Mapping[str, Path],
    now: datetime,
    running_within: timedelta,
) -> Doctor:
    """The verdict of every session. ``files``: each log's path by its name in the frames (a
    log not in it, such as standard input, is measured by the bytes read, and not scanned
    for raw line separators)."""
    parts = list(parts)
    found = pl.concat([f for f, _ in parts] or [pl.DataFrame(schema=FINDINGS_SCHEMA)])
    figures = pl.concat([f for _, f in parts] or [pl.DataFrame(schema=FIGURES_SCHEMA)])
    sizes = {name: _size_of(path) for name, path in files.items()}
    # A log's UTF-16 length is at most its bytes: counted only where the bytes reach the limit.
    units = {
        name: utf16_units(path)
        for name, path in files.items()
        if (sizes.get(name) or 0) >= STRING_LIMIT
    }
    figures = figures.with_columns(
        bytes=pl.col("file").replace_strict(sizes, default=None, return_dtype=pl.Int64),
        characters=pl.col("file").replace_strict(units, default=None, return_dtype=pl.Int64),
    ).with_columns(bytes=pl.coalesce("bytes", "bytes_read"))
    figures = figures.with_columns(characters=pl.coalesce("characters", "bytes"))
    found = pl.concat([found, separators(figures, files)])
    frames = [judged(found, figures), _size(figures, now, running_within)]
    schema = pl.Schema(REASONS_SCHEMA)
    reasons = pl.concat([part.select(*REASONS_SCHEMA).cast(schema) for part in frames])
    return Doctor(_verdicts(figures, reasons, now, running_within), _sorted(reasons))


def _size_of(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _sorted(reasons: pl.DataFrame) -> pl.DataFrame:
    """Worst first, then by line; the same order on every run."""
    rank = pl.col("severity").replace_strict(RANK, default=0)
    keys = ["file", "session_id", rank, "line", "code", "message"]
    return reasons.sort(keys, descending=[False, False, True, False, False, False])


GROWTH_SPAN = timedelta(days=1)
"""The least span a rate of growth is measured over: a session of a few busy minutes or hours
says little about the weeks after it."""


def being_written(now: datetime, running_within: timedelta) -> pl.Expr:
    """A session still being written: no shutdown after its last work, and a last event at
    most ``running_within`` before ``now`` (the verdict ``running``)."""
    if not running_within:
        return pl.lit(False)
    return ~pl.col("shut_down") & derive.recent(pl.col("last_event_at"), now, running_within)


def _size(figures: pl.DataFrame, now: datetime, running_within: timedelta) -> pl.DataFrame:
    """The size of each session's log and, for a session still being written whose span is
    at least :data:`GROWTH_SPAN`, how fast it grew over that span and when, counted from
    ``now``, it reaches the string limit at that rate. A session that ended (or was left
    long ago) is not growing: no forecast, so never a date in the past."""
    span = pl.col("last_event_at") - pl.col("started_at")
    span_days = span.dt.total_milliseconds() / 86_400_000
    growing = being_written(now, running_within) & (span >= GROWTH_SPAN)
    per_day = pl.when(growing).then(pl.col("bytes") / span_days)
    days_left = ((STRING_LIMIT - pl.col("bytes")) / per_day).clip(0)
    severity = (
        pl.when(pl.col("characters") >= STRING_LIMIT)
        .then(pl.lit(FATAL))
        .when((pl.col("bytes") >= HALF_LIMIT) | (days_left < SOON.days))
        .then(pl.lit(RISK))
        .otherwise(pl.lit(INFO))
    )
    return figures.select(
        "session_id",
        "file",
        line=pl.col("last_line"),
        code=pl.lit(SIZE),
        severity=severity,
        damage=pl.lit(None, pl.String),
        message=_size_message(per_day, days_left, being_written(now, running_within), now),
    )


def _span() -> pl.Expr:
    hours = (pl.col("last_event_at") - pl.col("started_at")).dt.total_minutes() / 60
    return (
        pl.when(hours < 48)
        .then(pl.format("{} hours", hours.round(1)))
        .otherwise(pl.format("{} days", (hours / 24).round(1)))
    )


def _size_message(per_day: pl.Expr, days_left: pl.Expr, written: pl.Expr, now: datetime) -> pl.Expr:
    size = pl.format("{} bytes", pl.col("bytes"))
    past = pl.format(
        "{} ({} characters): at or past the JavaScript string limit of {} characters: the CLI "
        "cannot read it into one string (copilot-cli#4325, #4717)",
        size,
        pl.col("characters"),
        pl.lit(f"{STRING_LIMIT:,}"),
    )
    rate = pl.format(
        "{}, growing {} bytes a day over {}: at that rate it reaches the string limit of "
        "{} characters in {} days (about {})",
        size,
        per_day.round(0).cast(pl.Int64),
        _span(),
        pl.lit(f"{STRING_LIMIT:,}"),
        days_left.round(0).cast(pl.Int64),
        (pl.lit(now) + pl.duration(days=days_left.clip(0, 1e6))).dt.strftime("%Y-%m-%d"),
    )
    brief = pl.format("{}: written over {}, too short a span to forecast its growth", size, _span())
    ended = pl.format("{}: not being written now, so no growth to forecast", size)
    return (
        pl.when(pl.col("characters") >= STRING_LIMIT)
        .then(past)
        .when(per_day.is_not_null())
        .then(rate)
        .when(written)
        .then(brief)
        .otherwise(ended)
    )


def _verdicts(
    figures: pl.DataFrame, reasons: pl.DataFrame, now: datetime, running_within: timedelta
) -> pl.DataFrame:
    worst = reasons.group_by(SESSION).agg(
        pl.col("severity").replace_strict(RANK, return_dtype=pl.Int8).max().alias("worst"),
        (pl.col("severity") != INFO).sum().alias("problems"),
    )
    verdict = (
        pl.when(being_written(now, running_within))
        .then(pl.lit(RUNNING))
        .otherwise(
            pl.col("worst").replace_strict(
                {i: VERDICT_OF[s] for s, i in RANK.items()}, default=HEALTHY, return_dtype=pl.String
            )
        )
    )
    versions = {v: nearest(v) for v in figures["cli_version"].drop_nulls().unique()}
    judged_by = pl.col("cli_version").replace_strict(versions, default=None, return_dtype=pl.String)
    joined = figures.join(worst, on=SESSION, how="left")
    return joined.select(
        "session_id",
        verdict.alias("verdict"),
        "cli_version",
        judged_by.fill_null(nearest(None)).alias("judged_by"),
        "bytes",
        "events",
        pl.col("problems").fill_null(0),
        "started_at",
        "last_event_at",
        "file",
    ).sort("last_event_at", descending=True, nulls_last=True)


def failing(sessions: pl.DataFrame, fail_on: Iterable[str]) -> pl.DataFrame:
    return sessions.filter(pl.col("verdict").is_in(list(fail_on)))
