"""What ``copilot-logs report`` shows, gathered in one pass over the logs.

Each batch of logs gives a :class:`Part` (the core functions of ``sessions``, ``count --by
day``, ``audit``, ``doctor``, ``validate`` and ``usage``, and the timelines of the files chosen
to be drawn: only the newest, so memory and the page stay small); :func:`assemble` combines
them into a :class:`Report` of plain values for the HTML renderer, what needs attention first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl

from copilot_logs.commands import audit as audit_core
from copilot_logs.commands import count, timeline, validate
from copilot_logs.commands import doctor as doctor_core
from copilot_logs.commands import sessions as sessions_core
from copilot_logs.commands.usage import report as usage_report
from copilot_logs.commands.usage import session_usage
from copilot_logs.commands.usage.breakdown import NOT_ATTRIBUTABLE, breakdowns
from copilot_logs.derive import SESSION
from copilot_logs.ingest.discover import peek_start
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult

DEFAULT_TIMELINES = 20
"""Sessions drawn in full by default: enough for a day's work, small enough to mail."""

Row = dict[str, Any]


@dataclass(frozen=True)
class Part:
    sessions: pl.DataFrame
    calls_by_day: pl.DataFrame
    audit_facts: pl.DataFrame
    doctor_facts: doctor_core.Facts
    findings: tuple[pl.DataFrame, pl.DataFrame]
    usage: pl.DataFrame
    credits: dict[str, pl.DataFrame]
    timelines: list[timeline.Node]


@dataclass(frozen=True)
class Report:
    """Everything the page shows; times are aware datetimes in ``zone``."""

    zone: str
    generated_at: datetime
    sessions: list[Row]
    """Every session, what needs attention first (see :func:`attention`)."""
    calls_by_day: list[Row]
    verdicts: dict[str, int]
    audited: list[Row]
    findings_by_rule: list[Row]
    usage_by_model: list[Row]
    credits_by_prompt: list[Row]
    credits_by_agent: list[Row]
    timelines: list[timeline.Node]
    needs: Needs = field(default_factory=lambda: Needs({}, 0, 0, None, 0, 0, 0, 0))


@dataclass(frozen=True)
class Needs:
    """What needs attention over every session, summed up."""

    failing: dict[str, int]
    """Sessions per verdict the default gate fails, most first."""
    looping: int
    wasted_calls: int
    wasted_credits: float | None
    damaged: int
    damaged_lines: int
    cannot_resume: int
    at_risk: int

    @property
    def anything(self) -> bool:
        return bool(self.failing or self.looping or self.damaged or self.cannot_resume)


def drawn_files(sources: Iterable[Source], limit: int) -> frozenset[str]:
    """The files of the ``limit`` newest sessions (by the start on their first line; a file
    whose first line tells nothing counts as oldest, standard input as newest)."""
    known = [(s, peek_start(s)) for s in sources]
    order = sorted(
        known,
        key=lambda pair: (pair[0].path is None, pair[1] or datetime.min.replace(tzinfo=UTC)),
        reverse=True,
    )
    return frozenset(source.name for source, _ in order[:limit])


def part(
    result: ReadResult,
    *,
    zone: str,
    drawn: frozenset[str],
    select: tuple[str, ...] | None = None,
    ignore: tuple[str, ...] = (),
) -> Part:
    to_draw = result.events.filter(pl.col("file").is_in(list(drawn)))
    return Part(
        sessions=sessions_core.summarize(result),
        calls_by_day=count.count(result, by="day", zone=zone),
        audit_facts=audit_core.facts(result),
        doctor_facts=doctor_core.facts(result),
        findings=validate.check_batch(result, select=select, ignore=ignore),
        usage=session_usage(result),
        credits=_credits_part(result),
        timelines=timeline.timeline(ReadResult(to_draw, result.diagnostics.clear()))
        if not to_draw.is_empty()
        else [],
    )


def assemble(
    parts: list[Part],
    *,
    zone: str,
    now: datetime,
    timelines: int = DEFAULT_TIMELINES,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    running_within: timedelta = audit_core.DEFAULT_RUNNING_WITHIN,
    files: Mapping[str, Path] | None = None,
) -> Report:
    """The report over every batch's :func:`part`, the newest ``timelines`` sessions drawn.
    ``files``: each log's path by its name (doctor measures it)."""
    audit = audit_core.judge([p.audit_facts for p in parts], now=now, running_within=running_within)
    judged = audit_core.judged(audit)
    doctor = doctor_core.judge(
        [p.doctor_facts for p in parts], files=files or {}, now=now, running_within=running_within
    )
    sessions = attention(
        sessions_core.newest_first([p.sessions for p in parts]), judged, doctor.sessions
    )
    findings = validate.combine([p.findings for p in parts], select=select, ignore=ignore)
    usage = usage_report([p.usage for p in parts], by="model", zone=zone)
    days = count.combine([p.calls_by_day for p in parts])
    return Report(
        zone=zone,
        generated_at=now.astimezone(ZoneInfo(zone)),
        sessions=_rows(sessions, zone),
        calls_by_day=days.select("day", "llm_calls", "subagent_calls").to_dicts(),
        verdicts=audit_core.verdict_counts(judged),
        audited=_rows(judged, zone),
        findings_by_rule=findings.statistics().to_dicts(),
        usage_by_model=usage.rows.drop("nano_aiu", strict=False).to_dicts(),
        credits_by_prompt=where_the_credits_went(parts, "prompt", zone),
        credits_by_agent=where_the_credits_went(parts, "agent", zone),
        timelines=timeline.newest_first([p.timelines for p in parts])[:timelines],
        needs=needs(sessions),
    )


KEYS = ["session_id", "file"]
FAILING = frozenset(audit_core.DEFAULT_FAIL_ON)
"""The verdicts that need attention: those the default gate fails (``audit``'s exit 1)."""


def attention(sessions: pl.DataFrame, judged: pl.DataFrame, resume: pl.DataFrame) -> pl.DataFrame:
    """The sessions with their audit verdict and loop, doctor's verdict on resuming them, an
    ``attention`` rank and ``reasons``; the worst first (a log the CLI cannot resume, a verdict
    the default gate fails, a loop by the calls it wasted, damaged lines, a log at risk,
    errors), then newest first."""
    verdicts = judged.select(*KEYS, "verdict", "looping", "wasted_calls", "wasted_credits")
    doctors = resume.select(*KEYS, resume="verdict")
    rows = sessions.join(verdicts, on=KEYS, how="left", nulls_equal=True).join(
        doctors, on=KEYS, how="left", nulls_equal=True
    )
    cannot = pl.col("resume") == doctor_core.CANNOT_RESUME
    failing = pl.col("verdict").is_in(list(FAILING))
    looping = pl.col("looping").fill_null(False)
    damaged = pl.col("damaged_lines") > 0
    at_risk = pl.col("resume") == doctor_core.AT_RISK
    errors = pl.col("errors") > 0
    rank = pl.sum_horizontal(
        (flag.fill_null(False).cast(pl.Int64) * weight)
        for flag, weight in ((cannot, 32), (failing, 16), (looping, 8), (damaged, 4),
                             (at_risk, 2), (errors, 1))
    )  # fmt: skip
    said = [
        pl.when(cannot).then(pl.lit("cannot be resumed")),
        pl.when(failing).then(pl.col("verdict")),
        pl.when(looping).then(pl.format("looping: {} LLM calls wasted", pl.col("wasted_calls"))),
        pl.when(damaged).then(_counted("damaged_lines", "damaged line")),
        pl.when(at_risk).then(pl.lit("at risk on resume")),
        pl.when(errors).then(_counted("errors", "error")),
    ]
    return rows.with_columns(
        looping=looping,
        wasted_calls=pl.col("wasted_calls").fill_null(0),
        attention=rank,
        reasons=pl.concat_list(said).list.drop_nulls(),
    ).sort(
        ["attention", "wasted_calls", "started_at"],
        descending=True,
        nulls_last=True,
        maintain_order=True,
    )


def _counted(column: str, noun: str) -> pl.Expr:
    plural = pl.when(pl.col(column) == 1).then(pl.lit("")).otherwise(pl.lit("s"))
    return pl.format("{} {}{}", pl.col(column), pl.lit(noun), plural)


def needs(sessions: pl.DataFrame) -> Needs:
    failing = sessions.filter(pl.col("verdict").is_in(list(FAILING)))["verdict"].value_counts(
        sort=True
    )
    looping = sessions.filter("looping")
    credits = looping["wasted_credits"].drop_nulls()
    damaged = sessions.filter(pl.col("damaged_lines") > 0)
    return Needs(
        failing=dict(zip(failing["verdict"].to_list(), failing["count"].to_list(), strict=True)),
        looping=looping.height,
        wasted_calls=int(looping["wasted_calls"].sum()),
        wasted_credits=float(credits.sum()) if credits.len() else None,
        damaged=damaged.height,
        damaged_lines=int(damaged["damaged_lines"].sum()),
        cannot_resume=sessions.filter(pl.col("resume") == doctor_core.CANNOT_RESUME).height,
        at_risk=sessions.filter(pl.col("resume") == doctor_core.AT_RISK).height,
    )


BIGGEST = 15
"""Groups the "where the credits went" tables show, biggest first."""
CALLS_SHOWN = 20
"""Calls shown behind each group: its biggest, in file order (``more_calls`` says how many
more it made), so a long session keeps the page small."""


def _biggest(groups: pl.DataFrame, limit: int = BIGGEST) -> pl.DataFrame:
    """The ``limit`` biggest groups: by credits, then input tokens, then output tokens."""
    order = ["ai_credits", "input_tokens", "output_tokens"]
    return groups.sort(order, descending=True, nulls_last=True).head(limit)


def _keys(by: str) -> list[str]:
    return [*SESSION, "prompt_index" if by == "prompt" else "agent_id"]


def _credits_part(result: ReadResult) -> dict[str, pl.DataFrame]:
    """One batch's biggest groups by prompt and by agent, and only the calls behind them."""
    found = breakdowns(result, ("call", "prompt", "agent"))
    kept = {by: _biggest(found[by]) for by in ("prompt", "agent")}
    # A session's not-attributable row is a group of no call of its own.
    calls = found["call"].filter(pl.col("source") != NOT_ATTRIBUTABLE)
    behind = [
        calls.join(
            kept[by].filter(pl.col("source") != NOT_ATTRIBUTABLE).select(_keys(by)),
            on=_keys(by),
            how="semi",
            nulls_equal=True,
        )
        for by in kept
    ]
    return {**kept, "call": pl.concat(behind).unique(subset=[*SESSION, "line"])}


def where_the_credits_went(parts: list[Part], by: str, zone: str) -> list[Row]:
    """The biggest groups ``by`` prompt or agent over all batches, each with its biggest
    :data:`CALLS_SHOWN` calls in file order (``calls``) and how many more it made."""
    biggest = _biggest(pl.concat([p.credits[by] for p in parts], how="vertical_relaxed"))
    keys = _keys(by)
    calls = pl.concat([p.credits["call"] for p in parts], how="vertical_relaxed")
    behind = calls.join(biggest.select(keys), on=keys, how="semi", nulls_equal=True)
    by_group: dict[tuple[Any, ...], list[Row]] = {}
    for call in _rows(_biggest(behind, len(behind)), zone):
        by_group.setdefault(tuple(call[k] for k in keys), []).append(call)
    rows = []
    for row in _rows(biggest, zone):
        apart = row["source"] == NOT_ATTRIBUTABLE
        mine = [] if apart else by_group.get(tuple(row[k] for k in keys), [])
        shown = sorted(mine[:CALLS_SHOWN], key=lambda call: (call["file"], call["line"] or 0))
        rows.append({**row, "calls": shown, "more_calls": len(mine) - len(shown)})
    return rows


def _rows(frame: pl.DataFrame, zone: str) -> list[Row]:
    return frame.with_columns(
        pl.col(name).dt.convert_time_zone(zone)
        for name, dtype in frame.schema.items()
        if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None
    ).to_dicts()
