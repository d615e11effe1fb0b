"""What each session used, and where its usage is written: one row per session log from its
``session.shutdown`` figures (:mod:`copilot_logs.derive.shutdowns`), with each run of the CLI
(segment) and the LLM calls no shutdown holds.

Every Copilot CLI session since 0.0.422 writes its usage in ``session.shutdown``: nano-AIU
(AI credits = ``totalNanoAiu / 1e9``), premium requests (legacy), and per model the request
count and the input / output / cache-read / cache-write / reasoning tokens. A run of the CLI
that was killed writes no shutdown: its calls are in the next run's shutdown (CLI 1.0.102) or in
none (every older version recorded), and a session is ``complete`` only when the shutdowns'
request count agrees with the calls counted in the events (its ``reconciliation``).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import polars as pl

from copilot_logs.derive.calls import USAGE_RECORD, usage_records
from copilot_logs.derive.events import MAIN, SEGMENT, SESSION, SHUTDOWN, TYPE
from copilot_logs.derive.loop import count_flags, turns
from copilot_logs.derive.sessions import segments as segment_rows
from copilot_logs.derive.sessions import session_facts
from copilot_logs.derive.shutdowns import (
    MODEL_USAGE,
    NANO_PER_CREDIT,
    TOKEN_FIELDS,
    accounting,
    figures_of,
    file_usage,
)
from copilot_logs.ingest.decode import parse_detail

UNKNOWN = "unknown"
CHECKPOINT = "session.usage_checkpoint"
COMPACTION = "session.compaction_complete"

RECONCILED = ("exact", "unanswered", "unknown")
"""Reconciliations under which a session's shutdowns hold all its usage (``unknown``: they
give no request count to check, and are taken as they are)."""

SEGMENT_USAGE = pl.Struct(
    {
        "segment": pl.Int64(),
        "start": pl.String(),
        "end": pl.String(),
        "llm_calls": pl.Int64(),
        "subagent_calls": pl.Int64(),
        "requests": pl.Int64(),
        "lost_calls": pl.Int64(),
    }
)
"""One run of the CLI in a session's usage row: how it began (``session.start``,
``session.resume``) and ended (shutdown, killed, open), its LLM calls (main agent and
sub-agents) counted in the events, the requests its shutdown adds (null where it wrote none or
gave no count), and ``lost_calls``: its calls no shutdown holds (a killed run's before CLI
1.0.102; an open run's, until it shuts down)."""

SESSION_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "started_at": pl.Datetime("ms", "UTC"),
    "repository": pl.String(),
    "accounting": pl.String(),
    "shutdowns": pl.Int64(),
    "complete": pl.Boolean(),
    "ai_credits": pl.Float64(),
    "credits_status": pl.String(),
    "nano_aiu": pl.Int64(),
    "premium_requests": pl.Float64(),
    "requests": pl.Int64(),
    **{name: pl.Int64() for name in TOKEN_FIELDS.values()},
    "api_duration_ms": pl.Int64(),
    "lines_added": pl.Int64(),
    "lines_removed": pl.Int64(),
    "files_modified": pl.Int64(),
    "compactions": pl.Int64(),
    "compaction_input_tokens": pl.Int64(),
    "compaction_output_tokens": pl.Int64(),
    "llm_calls": pl.Int64(),
    "subagent_calls": pl.Int64(),
    "turns_without_reply": pl.Int64(),
    "calls_after_shutdown": pl.Int64(),
    "lost_calls": pl.Int64(),
    "reconciliation": pl.String(),
    "segments": pl.List(SEGMENT_USAGE),
    "models": pl.List(MODEL_USAGE),
    "file": pl.String(),
}


def _unanswered_turns(annotated: pl.DataFrame) -> pl.DataFrame:
    """The turns that got no reply: their session and ``line``."""
    return turns(annotated).filter(pl.col("messages") == 0).select(*SESSION, "line")


def lifecycle(
    annotated: pl.DataFrame, unanswered: pl.DataFrame | None = None
) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
    """Per session, the payloads of its main-agent shutdowns, checkpoints and compactions, in
    file order; each shutdown's payload carries ``_calls`` (the LLM calls counted before it),
    ``_unanswered`` (of those, the turns that got no reply: ``unanswered``, found here when not
    given) and ``_segment``.

    Few lines per session carry usage: just those are parsed, once.
    """
    found: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    if unanswered is None:
        unanswered = _unanswered_turns(annotated)
    counted = (
        annotated.join(
            unanswered.with_columns(_unanswered=pl.lit(1, pl.Int64)),
            on=[*SESSION, "line"],
            how="left",
        )
        .with_columns(
            _calls=pl.col("llm_call").cast(pl.Int64).cum_sum().over(*SESSION),
            _unanswered=pl.col("_unanswered").fill_null(0).cum_sum().over(*SESSION),
        )
        .filter(TYPE.is_in([SHUTDOWN, CHECKPOINT, COMPACTION]) & MAIN)
    )
    rows = counted.select(*SESSION, "type", "detail", "_calls", "_unanswered", "segment")
    for file, session_id, kind, detail, calls, unanswered_turns, segment in rows.iter_rows():
        payload = parse_detail(detail)
        if kind == SHUTDOWN:
            payload = {
                **payload,
                "_calls": calls,
                "_unanswered": unanswered_turns,
                "_segment": segment,
            }
        found.setdefault((file, session_id), {}).setdefault(kind, []).append(payload)
    return found


def _message_tokens(annotated: pl.DataFrame) -> dict[tuple[str, str], dict[str, int | None]]:
    """Per session and model, the output tokens of its assistant messages (None if none has
    the figure)."""
    messages = annotated.filter(TYPE == "assistant.message").with_columns(
        _model=pl.coalesce("model", "session_model", pl.lit(UNKNOWN))
    )
    grouped = messages.group_by(*SESSION, "_model").agg(
        out=pl.when(pl.col("output_tokens").is_not_null().any()).then(pl.col("output_tokens").sum())
    )
    tokens: dict[tuple[str, str], dict[str, int | None]] = {}
    for file, session_id, name, out in grouped.iter_rows():
        tokens.setdefault((file, session_id), {})[name] = out
    return tokens


def _call_counts(annotated: pl.DataFrame, unanswered: pl.DataFrame) -> pl.DataFrame:
    """Per session: LLM calls counted from the events, before and after the last shutdown,
    the turns before it that got no reply (of ``unanswered``), and its rewinds."""
    flags = count_flags(annotated)
    last_shutdown = pl.col("line").filter(TYPE == SHUTDOWN).max().over(*SESSION)
    after = pl.col("line") > last_shutdown.fill_null(0)
    call = (pl.col("llm_calls") + pl.col("subagent_calls")) > 0
    per_file = flags.group_by(*SESSION, maintain_order=True).agg(
        llm_calls=pl.col("llm_calls").sum(),
        subagent_calls=pl.col("subagent_calls").sum(),
        calls_after_shutdown=(call & after).sum().cast(pl.Int64),
        _last_shutdown=pl.col("line").filter(TYPE == SHUTDOWN).max(),
        rewinds=((TYPE == "session.info") & (pl.col("info_type") == "rewind").fill_null(False))
        .sum()
        .cast(pl.Int64),
    )
    before_last = (
        unanswered.join(per_file.select(*SESSION, "_last_shutdown"), on=SESSION)
        .filter(pl.col("line") < pl.col("_last_shutdown"))
        .group_by(*SESSION)
        .agg(turns_without_reply=pl.len().cast(pl.Int64))
    )
    return (
        per_file.join(before_last, on=SESSION, how="left")
        .with_columns(pl.col("turns_without_reply").fill_null(0))
        .drop("_last_shutdown")
    )


def _reconciliation() -> pl.Expr:
    """Shutdown requests against the calls counted from the events before the last shutdown.

    ``exact``: requests = main-agent turns + sub-agent calls; ``unanswered``: equal once the
    turns that got no reply (a failed provider call, not charged) are left out; ``rewound``:
    they differ and the session was rewound (a ``session.info`` of infoType ``rewind``:
    ``/rewind`` deletes the rewound turns from the file, and the shutdown's count does not
    follow the file: the real log shows 1 request with 2 replies left on disk);
    ``mismatch``; ``unknown`` when there is no shutdown request count.
    """
    # With no shutdown, the records (one per call the CLI made) are set against every call.
    unsaved = pl.when(pl.col("accounting") == RECORDS).then(0).otherwise("calls_after_shutdown")
    counted = pl.col("llm_calls") + pl.col("subagent_calls") - unsaved
    return (
        pl.when(pl.col("requests").is_null())
        .then(pl.lit("unknown"))
        .when(pl.col("requests") == counted)
        .then(pl.lit("exact"))
        .when(pl.col("requests") == counted - pl.col("turns_without_reply"))
        .then(pl.lit("unanswered"))
        .when(pl.col("rewinds") > 0)
        .then(pl.lit("rewound"))
        .otherwise(pl.lit("mismatch"))
    )


def _segments(
    annotated: pl.DataFrame, payloads: dict[tuple[str, str], dict[str, list[dict[str, Any]]]]
) -> pl.DataFrame:
    """Per session, its segments (:data:`SEGMENT_USAGE`): the calls of each, the requests its
    shutdown adds, and the calls no shutdown holds.

    A shutdown holds the calls since the shutdown before it (per its accounting: the
    difference of cumulative counts, or its own count). Where it holds fewer than were
    counted in that stretch (unanswered turns aside), the missing calls are those of the
    killed runs in the stretch (a killed run writes no shutdown, and before CLI 1.0.102 the
    next run's shutdown leaves its calls out), else of the shutdown's own run; the calls after
    the last shutdown are held by none."""
    found = segment_rows(annotated).with_columns(
        calls=pl.col("llm_calls") + pl.col("subagent_calls")
    )
    rows = []
    for (file, session_id), part in found.group_by(*SESSION, maintain_order=True):
        mine = payloads.get((str(file), str(session_id)), {})
        shutdowns = mine.get(SHUTDOWN, [])
        calls = dict(zip(part["segment"], part["calls"], strict=True))
        lost = dict.fromkeys(calls, 0)
        added = _requests_added(shutdowns, has_checkpoints=bool(mine.get(CHECKPOINT)))
        since = 0
        counted_before = 0
        for shutdown, requests in zip(shutdowns, added, strict=True):
            mine_segment = shutdown["_segment"]
            stretch = [s for s in calls if since < s <= mine_segment]
            counted = shutdown["_calls"] - counted_before - shutdown["_unanswered"]
            missing = 0 if requests is None else max(0, counted - requests)
            killed = [s for s in stretch if s != mine_segment and s in _killed(part)] or [
                mine_segment
            ]
            for segment in killed:
                take = min(missing, calls.get(segment, 0)) if segment != killed[-1] else missing
                lost[segment] = lost.get(segment, 0) + take
                missing -= take
            since = mine_segment
            counted_before = shutdown["_calls"]
        last_line = shutdowns[-1]["_segment"] if shutdowns else 0
        for segment in calls:
            if segment > last_line:
                lost[segment] = calls[segment]
        own = {s["_segment"]: r for s, r in zip(shutdowns, added, strict=True)}
        for row in part.iter_rows(named=True):
            rows.append(
                {
                    "file": file,
                    "session_id": session_id,
                    "segment": row["segment"],
                    "start": row["start_type"],
                    "end": row["end"],
                    "llm_calls": row["llm_calls"],
                    "subagent_calls": row["subagent_calls"],
                    "requests": own.get(row["segment"]),
                    "lost_calls": lost.get(row["segment"], 0),
                }
            )
    schema = {"file": pl.String(), "session_id": pl.String(), **SEGMENT_USAGE.to_schema()}
    table = pl.DataFrame(rows, schema=schema)
    fields = [pl.col(name) for name in SEGMENT_USAGE.to_schema()]
    return table.group_by(*SESSION, maintain_order=True).agg(
        segments=pl.struct(fields), lost_calls=pl.col("lost_calls").sum()
    )


def _killed(part: pl.DataFrame) -> set[int]:
    return set(part.filter(pl.col("end") == "killed")["segment"].to_list())


def _requests_added(shutdowns: list[dict[str, Any]], *, has_checkpoints: bool) -> list[int | None]:
    """The requests each shutdown adds to those before it: its own count (per-segment
    accounting), or its count less the one before (cumulative)."""
    kind = accounting(
        shutdowns,
        has_checkpoints=has_checkpoints,
        calls_before=[s["_calls"] for s in shutdowns],
    )
    counts = [figures_of(s)["requests"] for s in shutdowns]
    if kind != "cumulative":
        return counts
    return [
        None if now is None or before is None else now - before
        for before, now in pairwise([0, *counts])
    ]


RECORDS = "records"
"""The ``accounting`` of a session with no shutdown whose calls the CLI recorded one by one
(``session.usage_record``, CLI 1.0.102): its figures are its records' sums."""


def _from_records(annotated: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """``table`` where a session has no shutdown but per-call records: its figures are the
    records' sums (a run killed, or still running, on CLI 1.0.102 knows what it spent so far);
    a figure some record lacks stays unknown."""
    if annotated.filter(TYPE == USAGE_RECORD).is_empty():
        return table
    records = usage_records(annotated)
    reported = (pl.col("ai_credits_status") != "unavailable").fill_null(True)
    billed = (pl.col("total_nano_aiu") >= 0) & reported

    def whole(name: str, column: pl.Expr) -> pl.Expr:
        return pl.when(column.is_not_null().all()).then(column.sum()).alias(name)

    nano = pl.when(billed).then(pl.col("total_nano_aiu"))
    figures = [
        pl.len().cast(pl.Int64).alias("requests"),
        whole("nano_aiu", nano.round(0).cast(pl.Int64)),
        *(whole(name, pl.col(name)) for name in TOKEN_FIELDS.values()),
        whole("api_duration_ms", pl.col("duration_ms")),
    ]
    status = (
        pl.when((pl.col("ai_credits_status") == "unavailable").any())
        .then(pl.lit("unavailable"))
        .otherwise(pl.col("ai_credits_status").drop_nulls().last())
        .alias("credits_status")
    )
    per_model = (
        records.with_columns(model=pl.col("model").fill_null(UNKNOWN))
        .group_by(*SESSION, "model")
        .agg(*figures)
        .with_columns(
            premium_requests=pl.lit(None, pl.Float64),
            ai_credits=(pl.col("nano_aiu") / NANO_PER_CREDIT).round(9),
        )
        .sort(*SESSION, "model")
        .group_by(*SESSION, maintain_order=True)
        .agg(models=pl.struct(*(pl.col(n) for n in MODEL_USAGE.to_schema())))
    )
    sums = (
        records.group_by(*SESSION)
        .agg(*figures, status)
        .join(per_model, on=SESSION, how="left")
        .with_columns(
            ai_credits=(pl.col("nano_aiu") / NANO_PER_CREDIT).round(9),
            accounting=pl.lit(RECORDS),
        )
    )
    fill = [name for name in sums.columns if name not in SESSION]
    unsaved = table.filter(pl.col("accounting") == "none").select(*SESSION)
    taken = unsaved.join(sums, on=SESSION, how="inner")
    if taken.is_empty():
        return table
    updated = table.update(taken.select(*SESSION, *fill), on=list(SESSION), how="left")
    return updated


def session_rows(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per session log of the annotated events (:data:`SESSION_SCHEMA`), newest
    first."""
    if annotated.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    facts = session_facts(annotated).select(
        *SESSION,
        "started_at",
        repository=pl.coalesce("repository", "cwd", pl.lit(UNKNOWN)),
    )
    unanswered = _unanswered_turns(annotated)
    payloads = lifecycle(annotated, unanswered)
    messages = _message_tokens(annotated)
    figures = []
    for file, session_id in facts.select(*SESSION).iter_rows():
        mine = payloads.get((file, session_id), {})
        shutdowns = mine.get(SHUTDOWN, [])
        row = file_usage(
            shutdowns,
            has_checkpoints=bool(mine.get(CHECKPOINT)),
            calls_before=[s["_calls"] for s in shutdowns],
            compactions=mine.get(COMPACTION, []),
            message_tokens=messages.get((file, session_id), {}),
        )
        figures.append({**row, "file": file, "session_id": session_id})
    schema = {
        name: dtype
        for name, dtype in SESSION_SCHEMA.items()
        if name in figures[0] or name == "models"
    }
    table = _from_records(
        annotated, facts.join(pl.DataFrame(figures, schema=schema), on=SESSION, how="left")
    )
    table = (
        table.join(_call_counts(annotated, unanswered), on=SESSION, how="left")
        .join(_segments(annotated, payloads), on=SESSION, how="left")
        .with_columns(reconciliation=_reconciliation())
        .with_columns(
            complete=pl.when(pl.col("accounting") == RECORDS)
            .then(pl.col("reconciliation") == "exact")
            .otherwise(
                (pl.col("accounting") != "none")
                & (pl.col("calls_after_shutdown") == 0)
                & pl.col("reconciliation").is_in(RECONCILED)
            ),
        )
    )
    return table.select(list(SESSION_SCHEMA)).sort(
        "started_at", "file", "session_id", descending=[True, False, False], nulls_last=True
    )


__all__ = ["RECONCILED", "SEGMENT", "SEGMENT_USAGE", "SESSION_SCHEMA", "lifecycle", "session_rows"]
