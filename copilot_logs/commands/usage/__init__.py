"""What sessions used and cost, read from their ``session.shutdown`` events.

Every Copilot CLI session since 0.0.422 writes its usage in ``session.shutdown``: nano-AIU
(AI credits = ``totalNanoAiu / 1e9``), premium requests (legacy), and per model the request
count and the input / output / cache-read / cache-write / reasoning tokens. The live per-call
event (``assistant.usage``) is ephemeral; only CLI 1.0.102 on writes a durable
``session.usage_record`` per call. The session rows here come from the shutdowns, so a session
is counted whole in the day it started.

How they combine over a session's shutdowns is :mod:`copilot_logs.commands.usage.shutdown`;
how the session rows are grouped is :mod:`copilot_logs.commands.usage.grouping`; the figures
per call, prompt, agent and task are :mod:`copilot_logs.commands.usage.breakdown`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.usage.grouping import group, totals
from copilot_logs.commands.usage.shutdown import MODEL_USAGE, TOKEN_FIELDS, file_usage
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.ingest.decode.event_structs import parse_detail
from copilot_logs.ingest.reader import ReadResult

UNKNOWN = "unknown"

SHUTDOWN = "session.shutdown"
CHECKPOINT = "session.usage_checkpoint"
COMPACTION = "session.compaction_complete"
CALLS_BEFORE = "calls before"  # per shutdown, the LLM calls counted in the events before it

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
    "reconciliation": pl.String(),
    "models": pl.List(MODEL_USAGE),
    "file": pl.String(),
}


@dataclass(frozen=True)
class UsageReport:
    """What ``usage`` prints: the grouped rows, the per-session rows they come from, totals."""

    by: str
    zone: str
    rows: pl.DataFrame
    sessions: pl.DataFrame
    totals: dict[str, Any]


# --- the events frame -> one row per session -----------------------------------------------


def _call_counts(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per session: LLM calls counted from the events, before and after the last shutdown."""
    flags = derive.count_flags(annotated)
    last_shutdown = pl.col("line").filter(TYPE == SHUTDOWN).max().over(*SESSION)
    after = pl.col("line") > last_shutdown.fill_null(0)
    call = (pl.col("llm_calls") + pl.col("subagent_calls")) > 0
    per_file = flags.group_by(*SESSION, maintain_order=True).agg(
        llm_calls=pl.col("llm_calls").sum(),
        subagent_calls=pl.col("subagent_calls").sum(),
        calls_after_shutdown=(call & after).sum().cast(pl.Int64),
        _last_shutdown=pl.col("line").filter(TYPE == SHUTDOWN).max(),
        rewinds=(
            (TYPE == "session.info")
            & (pl.col("detail").str.json_path_match("$.infoType") == "rewind").fill_null(False)
        )
        .sum()
        .cast(pl.Int64),
    )
    unanswered = (
        derive.turns(annotated)
        .filter(pl.col("messages") == 0)
        .join(per_file.select(*SESSION, "_last_shutdown"), on=SESSION)
        .filter(pl.col("line") < pl.col("_last_shutdown"))
        .group_by(*SESSION)
        .agg(turns_without_reply=pl.len().cast(pl.Int64))
    )
    return (
        per_file.join(unanswered, on=SESSION, how="left")
        .with_columns(pl.col("turns_without_reply").fill_null(0))
        .drop("_last_shutdown")
    )


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


def _reconciliation() -> pl.Expr:
    """Shutdown requests against the calls counted from the events before the last shutdown.

    ``exact``: requests = main-agent turns + sub-agent calls; ``unanswered``: equal once the
    turns that got no reply (a failed provider call, not charged) are left out; ``rewound``:
    they differ and the session was rewound (a ``session.info`` of infoType ``rewind``:
    ``/rewind`` deletes the rewound turns from the file, and the shutdown's count does not
    follow the file: the real log shows 1 request with 2 replies left on disk);
    ``mismatch``; ``unknown`` when there is no shutdown request count.
    """
    counted = pl.col("llm_calls") + pl.col("subagent_calls") - pl.col("calls_after_shutdown")
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


def lifecycle(annotated: pl.DataFrame) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
    """Per session, the payloads of its shutdowns, checkpoints and compactions, in file order.

    Few lines per session carry usage: just those are parsed, once.
    """
    found: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    counted = annotated.with_columns(
        _calls=pl.col("llm_call").cast(pl.Int64).cum_sum().over(*SESSION)
    )
    kept = counted.filter(TYPE.is_in([SHUTDOWN, CHECKPOINT, COMPACTION]) & MAIN)
    rows = kept.select(*SESSION, "type", "detail", "_calls").iter_rows()
    for file, session_id, kind, detail, calls in rows:
        payload = parse_detail(detail)
        mine = found.setdefault((file, session_id), {})
        mine.setdefault(kind, []).append(payload)
        if kind == SHUTDOWN:
            mine.setdefault(CALLS_BEFORE, []).append({"calls": calls})
    return found


def _file_figures(annotated: pl.DataFrame, facts: pl.DataFrame) -> list[dict[str, Any]]:
    """The usage figures of each session log (see :func:`file_usage`), keyed by its columns."""
    payloads = lifecycle(annotated)
    messages = _message_tokens(annotated)
    figures = []
    for file, session_id in facts.select(*SESSION).iter_rows():
        mine = payloads.get((file, session_id), {})
        row = file_usage(
            mine.get(SHUTDOWN, []),
            has_checkpoints=bool(mine.get(CHECKPOINT)),
            calls_before=[entry["calls"] for entry in mine.get(CALLS_BEFORE, [])],
            compactions=mine.get(COMPACTION, []),
            message_tokens=messages.get((file, session_id), {}),
        )
        figures.append({**row, "file": file, "session_id": session_id})
    return figures


def session_usage(result: ReadResult) -> pl.DataFrame:
    """One row per session log (``SESSION_SCHEMA``), newest first."""
    if result.events.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    return session_rows(derive.annotate(result.events))


def session_rows(annotated: pl.DataFrame) -> pl.DataFrame:
    """:func:`session_usage` of events already annotated (:func:`copilot_logs.derive.annotate`)."""
    if annotated.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    facts = derive.session_facts(annotated).select(
        *SESSION,
        "started_at",
        repository=pl.coalesce("repository", "cwd", pl.lit(UNKNOWN)),
    )
    figures = _file_figures(annotated, facts)
    schema = {
        name: dtype
        for name, dtype in SESSION_SCHEMA.items()
        if name in figures[0] or name == "models"
    }
    table = (
        facts.join(pl.DataFrame(figures, schema=schema), on=SESSION, how="left")
        .join(_call_counts(annotated), on=SESSION, how="left")
        .with_columns(
            complete=(pl.col("accounting") != "none") & (pl.col("calls_after_shutdown") == 0),
        )
        .with_columns(reconciliation=_reconciliation())
    )
    return table.select(list(SESSION_SCHEMA)).sort(
        "started_at", "file", "session_id", descending=[True, False, False], nulls_last=True
    )


def usage(result: ReadResult, *, by: str = "session", zone: str = "UTC") -> UsageReport:
    """The ``usage`` command's report: rows grouped ``by``, the session rows, the totals."""
    return report([session_usage(result)], by=by, zone=zone)


def report(parts: list[pl.DataFrame], *, by: str = "session", zone: str = "UTC") -> UsageReport:
    """The report over the session rows of several batches (see :func:`session_usage`)."""
    sessions = pl.concat(parts).sort(
        "started_at", "file", "session_id", descending=[True, False, False], nulls_last=True
    )
    return UsageReport(
        by=by,
        zone=zone,
        rows=group(sessions, by, zone),
        sessions=sessions,
        totals=totals(sessions),
    )
