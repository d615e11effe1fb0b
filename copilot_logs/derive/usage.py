"""What each session used, and where its usage is written: one row per session log from the
figures of its ``session.shutdown`` payloads, with each run of the CLI (segment) and the LLM
calls no shutdown holds.

A killed run writes no shutdown: its calls are in the next run's shutdown (CLI 1.0.102) or in
none (every older version), and a session is ``complete`` only when the shutdowns' request count
agrees with the calls counted in the events (its ``reconciliation``). How resumes are counted
once (``single``, ``cumulative``, ``per-segment``), why unknown is None and never 0, why cache
tokens are not added twice: docs/usage.md, each decision kept here where it is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import polars as pl

from copilot_logs.derive import (
    MAIN,
    SESSION,
    SHUTDOWN,
    TYPE,
    count_flags,
    newest_first,
    session_facts,
    turns,
)
from copilot_logs.derive import segments as segment_rows
from copilot_logs.derive.calls import (
    MAX_FIGURE,
    NANO_PER_CREDIT,
    USAGE_RECORD,
    credits,
    usage_records,
)
from copilot_logs.ingest.decode import as_int, parse_detail

# Token figures of one model, as named on disk (``usage``) and in our output.
TOKEN_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "reasoningTokens": "reasoning_tokens",
}
MODEL_FIGURES = ("requests", "premium_requests", "nano_aiu", "ai_credits", *TOKEN_FIELDS.values())
MODEL_USAGE = pl.Struct(
    {
        "model": pl.String(),
        "requests": pl.Int64(),
        "premium_requests": pl.Float64(),
        "nano_aiu": pl.Int64(),
        "ai_credits": pl.Float64(),
        **{name: pl.Int64() for name in TOKEN_FIELDS.values()},
    }
)
# Figures summed over sessions; ``ai_credits`` is always derived from ``nano_aiu``.
SUMMED = (
    "premium_requests",
    "nano_aiu",
    "requests",
    *TOKEN_FIELDS.values(),
    "api_duration_ms",
    "lines_added",
    "lines_removed",
    "files_modified",
    "compactions",
    "compaction_input_tokens",
    "compaction_output_tokens",
    "llm_calls",
    "subagent_calls",
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if 0 <= number <= MAX_FIGURE else None


def as_count(value: Any) -> int | None:
    """A count or amount from a payload: an integer (an integral float too, never a bool)
    from 0 to :data:`MAX_FIGURE`, else None."""
    number = as_int(value)
    return number if number is not None and 0 <= number <= MAX_FIGURE else None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strict_sum(values: Iterable[int | None]) -> int | None:
    """The sum, or None when any part is unknown: a partial sum would pass for the whole."""
    parts = list(values)
    return None if None in parts else sum(part for part in parts if part is not None)


def _strict_fsum(values: Iterable[float | None]) -> float | None:
    parts = list(values)
    return None if None in parts else round(sum((p for p in parts if p is not None), 0.0), 6)


def _model_figures(name: str, metrics: Any) -> dict[str, Any]:
    metrics = as_dict(metrics)
    requests = as_dict(metrics.get("requests"))
    usage = as_dict(metrics.get("usage"))
    nano = as_count(metrics.get("totalNanoAiu"))
    return {
        "model": name,
        "requests": as_count(requests.get("count")),
        "premium_requests": _number(requests.get("cost")),
        "nano_aiu": nano,
        "ai_credits": None,
        **{ours: as_count(usage.get(theirs)) for theirs, ours in TOKEN_FIELDS.items()},
    }


def credits_status(data: Mapping[str, Any]) -> str | None:
    """What a shutdown says of its credits (``aiCreditsStatus``, CLI 1.0.102): ``complete``,
    ``partial``, ``unavailable``, or None. Before 1.0.102 a session whose credits were never
    reported (bring-your-own-key: every recording of 1.0.60 to 1.0.92) has ``totalNanoAiu: 0``
    beside requests made: that zero is ``unavailable`` too, as 1.0.102 says of the same runs.
    A zero with no request made (the provider never answered) is a real zero."""
    snapshot = as_dict(data.get("accountingSnapshot"))
    status = snapshot.get("aiCreditsStatus", data.get("aiCreditsStatus"))
    if isinstance(status, str):
        return status
    made = any(
        (as_count(as_dict(as_dict(m).get("requests")).get("count")) or 0) > 0
        for m in as_dict(data.get("modelMetrics")).values()
    )
    return "unavailable" if made and as_count(data.get("totalNanoAiu")) == 0 else None


def agent_figures(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per agent of a shutdown's ``agentMetrics`` (CLI 1.0.85 on, keyed ``main`` and each
    sub-agent's instance id): its requests, tokens, nano-AIU and API time."""
    unavailable = credits_status(data) == "unavailable"
    found = []
    for instance, metrics in as_dict(data.get("agentMetrics")).items():
        metrics = as_dict(metrics)
        models = [
            _model_figures(name, m) for name, m in as_dict(metrics.get("modelMetrics")).items()
        ]
        nano = as_count(metrics.get("totalNanoAiu"))
        if nano is None:
            nano = _strict_sum(m["nano_aiu"] for m in models)
        found.append(
            {
                "agent_instance": str(instance),
                "requests": _strict_sum(m["requests"] for m in models),
                **{name: _strict_sum(m[name] for m in models) for name in TOKEN_FIELDS.values()},
                "nano_aiu": None if unavailable else nano,
                "api_duration_ms": as_count(metrics.get("totalApiDurationMs")),
            }
        )
    return found


def _with_credits(figures: dict[str, Any]) -> dict[str, Any]:
    nano = figures["nano_aiu"]
    return {**figures, "ai_credits": None if nano is None else nano / NANO_PER_CREDIT}


def _token_details(data: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(input side, output) of a shutdown's ``tokenDetails`` (else the per-model ones summed,
    if every model has one). Its ``input`` is only the uncached input (real 1.0.78 logs: 23038
    input + 52736 cache_read = 75774 inputTokens): the input side adds the cache kinds back."""
    details = data.get("tokenDetails")
    if isinstance(details, dict):
        parts: list[Any] = [details]
    else:
        metrics = as_dict(data.get("modelMetrics")).values()
        parts = [as_dict(m).get("tokenDetails") for m in metrics]
        if not parts or not all(isinstance(p, dict) for p in parts):
            return None, None

    def count(kind: str) -> int:
        return sum(as_count(as_dict(as_dict(p).get(kind)).get("tokenCount")) or 0 for p in parts)

    return count("input") + count("cache_read") + count("cache_write"), count("output")


def _at_least(later: Mapping[str, Any], earlier: Mapping[str, Any]) -> bool:
    """Whether ``later`` reports at least what ``earlier`` does, for every model of it."""
    later_models = as_dict(later.get("modelMetrics"))
    for name, metrics in as_dict(earlier.get("modelMetrics")).items():
        if name not in later_models:
            return False
        before, after = _model_figures(name, metrics), _model_figures(name, later_models[name])
        for field in ("requests", *TOKEN_FIELDS.values()):
            if (before[field] or 0) > (after[field] or 0):
                return False
    return True


def accounting(
    shutdowns: Sequence[Mapping[str, Any]],
    *,
    has_checkpoints: bool,
    calls_before: Sequence[int] | None = None,
) -> str:
    """How a file's shutdowns combine: ``single``, ``cumulative``, ``per-segment`` or ``none``.

    Cumulative when the file holds usage checkpoints (only CLIs whose shutdowns are cumulative
    write them). Else the LLM calls counted before each shutdown (``calls_before``) decide
    where they tell (CLIs up to 1.0.6x reset their figures at a resume, recorded). Else
    cumulative when each later shutdown is at least the earlier one for every model (a
    per-segment run that happens to use more of every model passes for cumulative)."""
    if not shutdowns:
        return "none"
    if len(shutdowns) == 1:
        return "single"
    if has_checkpoints:
        return "cumulative"
    told = _told_by_counts(shutdowns, calls_before)
    if told is not None:
        return told
    if all(_at_least(b, a) for a, b in pairwise(shutdowns)):
        return "cumulative"
    return "per-segment"


def _told_by_counts(
    shutdowns: Sequence[Mapping[str, Any]], calls_before: Sequence[int] | None
) -> str | None:
    """``cumulative`` or ``per-segment`` when the request counts match the calls counted up
    to each shutdown (or since the one before) and not the other; else None."""
    if calls_before is None or len(calls_before) != len(shutdowns):
        return None
    counts = [figures_of(s)["requests"] for s in shutdowns]
    if any(count is None for count in counts):
        return None
    segments = [b - a for a, b in pairwise([0, *calls_before])]
    cumulative = counts == list(calls_before)
    per_segment = counts == segments
    if cumulative != per_segment:
        return "cumulative" if cumulative else "per-segment"
    return None


def figures_of(data: Mapping[str, Any]) -> dict[str, Any]:
    metrics = as_dict(data.get("modelMetrics"))
    models = {name: _model_figures(name, m) for name, m in metrics.items()}
    premium = _number(data.get("totalPremiumRequests"))
    if premium is None:
        premium = _strict_fsum(m["premium_requests"] for m in models.values())
    nano = as_count(data.get("totalNanoAiu"))
    if nano is None:
        nano = _strict_sum(m["nano_aiu"] for m in models.values())
    status = credits_status(data)
    if status == "unavailable":  # "Numeric zero is not a zero-cost claim" (the schema)
        nano = None
        for figures in models.values():
            figures["nano_aiu"] = None
    changes = as_dict(data.get("codeChanges"))
    files = changes.get("filesModified")
    detail_in, detail_out = _token_details(data)
    return {
        "premium_requests": premium,
        "nano_aiu": nano,
        "credits_status": status,
        "requests": _strict_sum(m["requests"] for m in models.values()),
        **{name: _strict_sum(m[name] for m in models.values()) for name in TOKEN_FIELDS.values()},
        "api_duration_ms": as_count(data.get("totalApiDurationMs")),
        "lines_added": as_count(changes.get("linesAdded")),
        "lines_removed": as_count(changes.get("linesRemoved")),
        "files": {str(path) for path in files} if isinstance(files, list) else None,
        "detail_in": detail_in,
        "detail_out": detail_out,
        "models": models,
    }


def _combine(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-segment shutdowns summed: every figure, and every model's figures by name."""
    combined: dict[str, Any] = {}
    for name in segments[0]:
        if name == "models":
            continue
        values = [s[name] for s in segments]
        if name == "credits_status":
            combined[name] = "unavailable" if "unavailable" in values else values[-1]
        elif name == "files":
            combined[name] = None if any(v is None for v in values) else set().union(*values)
        elif name == "premium_requests":
            combined[name] = _strict_fsum(values)
        else:
            combined[name] = _strict_sum(values)
    models: dict[str, dict[str, Any]] = {}
    for segment in segments:
        for name, figures in segment["models"].items():
            if name not in models:
                models[name] = dict(figures)
                continue
            seen = models[name]
            for field in MODEL_FIGURES:
                if field == "premium_requests":
                    seen[field] = _strict_fsum([seen[field], figures[field]])
                elif field != "ai_credits":
                    seen[field] = _strict_sum([seen[field], figures[field]])
    combined["models"] = models
    return combined


def _compaction_tokens(events: Sequence[Mapping[str, Any]]) -> tuple[int | None, int | None]:
    """Summed ``compactionTokensUsed`` (both spellings seen in the wild); None if any lacks it."""
    total_in: int | None = 0
    total_out: int | None = 0
    for data in events:
        used = as_dict(data.get("compactionTokensUsed"))
        spent_in = as_count(used.get("input", used.get("inputTokens")))
        spent_out = as_count(used.get("output", used.get("outputTokens")))
        total_in = None if total_in is None or spent_in is None else total_in + spent_in
        total_out = None if total_out is None or spent_out is None else total_out + spent_out
    return total_in, total_out


def file_usage(
    shutdowns: Sequence[Mapping[str, Any]],
    *,
    has_checkpoints: bool = False,
    calls_before: Sequence[int] | None = None,
    compactions: Sequence[Mapping[str, Any]] = (),
    message_tokens: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """The figure fields of :data:`SESSION_SCHEMA` of one session log from its shutdown
    payloads, in file order; with no shutdown, its messages' output tokens per model."""
    kind = accounting(shutdowns, has_checkpoints=has_checkpoints, calls_before=calls_before)
    event_in, event_out = _compaction_tokens(compactions)
    common = {"accounting": kind, "shutdowns": len(shutdowns), "compactions": len(compactions)}
    if kind == "none":
        return _without_shutdown(common, (event_in, event_out), message_tokens or {})
    segments = [figures_of(s) for s in shutdowns]
    total = segments[-1] if kind in ("single", "cumulative") else _combine(segments)
    compaction_in = compaction_out = None
    if total["detail_in"] is not None and total["input_tokens"] is not None:
        compaction_in = total["detail_in"] - total["input_tokens"]
    if total["detail_out"] is not None and total["output_tokens"] is not None:
        compaction_out = total["detail_out"] - total["output_tokens"]
    if total["detail_in"] is None:
        compaction_in, compaction_out = event_in, event_out
    files = total["files"]
    return {
        **{name: total[name] for name in ("premium_requests", "nano_aiu", "requests")},
        **{name: total[name] for name in TOKEN_FIELDS.values()},
        **{name: total[name] for name in ("api_duration_ms", "lines_added", "lines_removed")},
        **common,
        "ai_credits": None if total["nano_aiu"] is None else total["nano_aiu"] / NANO_PER_CREDIT,
        "credits_status": total["credits_status"],
        "files_modified": None if files is None else len(files),
        "compaction_input_tokens": compaction_in,
        "compaction_output_tokens": compaction_out,
        "models": [_with_credits(total["models"][name]) for name in sorted(total["models"])],
    }


def _without_shutdown(
    common: dict[str, Any],
    compaction: tuple[int | None, int | None],
    message_tokens: Mapping[str, int | None],
) -> dict[str, Any]:
    per_model = dict(message_tokens)
    models = [
        _with_credits({**dict.fromkeys(MODEL_FIGURES), "model": name, "output_tokens": out})
        for name, out in sorted(per_model.items())
    ]
    figures = {name: None for name in SUMMED if name not in ("llm_calls", "subagent_calls")}
    return {
        **figures,
        **common,
        "ai_credits": None,
        "credits_status": None,
        "output_tokens": _strict_sum(per_model.values()) if per_model else 0,
        "compaction_input_tokens": compaction[0],
        "compaction_output_tokens": compaction[1],
        "models": models,
    }


UNKNOWN = "unknown"
CHECKPOINT = "session.usage_checkpoint"
COMPACTION = "session.compaction_complete"

RECONCILED = ("exact", "unanswered", "unknown")
"""Reconciliations under which a session's shutdowns hold all its usage."""

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
"""One run of the CLI in a session's usage row (docs/usage.md): ``requests``, what its shutdown
adds; ``lost_calls``, its calls no shutdown holds."""

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
    return turns(annotated).filter(pl.col("messages") == 0).select(*SESSION, "line")


def lifecycle(
    annotated: pl.DataFrame, unanswered: pl.DataFrame | None = None
) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
    """Per session, the payloads of its main-agent shutdowns, checkpoints and compactions, in
    file order (few lines carry usage: just those are parsed); each shutdown's carries
    ``_calls`` (the LLM calls counted before it), ``_unanswered`` (of those, the turns that got
    no reply) and ``_segment``."""
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
    """Per session and model, its messages' output tokens (None if none has the figure)."""
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
    """Per session: LLM calls counted, those after the last shutdown, the turns before it that
    got no reply, and its rewinds."""
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
    """Shutdown requests against the calls counted before the last shutdown (docs/usage.md):
    ``exact``, ``unanswered`` (equal without the turns that got no reply: not charged),
    ``rewound`` (``/rewind`` deletes turns from the file, not from the shutdown's count: the
    real log shows 1 request with 2 replies left on disk), ``mismatch`` or ``unknown``."""
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
    """Per session, its segments (:data:`SEGMENT_USAGE`). A shutdown holds the calls since the
    shutdown before it; where it holds fewer than were counted in that stretch (unanswered
    turns aside), the missing ones are the killed runs' of the stretch (before CLI 1.0.102 the
    next run's shutdown leaves them out), else its own run's; calls after the last shutdown
    are held by none."""
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
        killed_runs = set(part.filter(pl.col("end") == "killed")["segment"].to_list())
        for shutdown, requests in zip(shutdowns, added, strict=True):
            mine_segment = shutdown["_segment"]
            stretch = [s for s in calls if since < s <= mine_segment]
            counted = shutdown["_calls"] - counted_before - shutdown["_unanswered"]
            missing = 0 if requests is None else max(0, counted - requests)
            killed = [s for s in stretch if s != mine_segment and s in killed_runs] or [
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


def _requests_added(shutdowns: list[dict[str, Any]], *, has_checkpoints: bool) -> list[int | None]:
    """The requests each shutdown adds to those before it."""
    kind = accounting(
        shutdowns, has_checkpoints=has_checkpoints, calls_before=[s["_calls"] for s in shutdowns]
    )
    counts = [figures_of(s)["requests"] for s in shutdowns]
    if kind != "cumulative":
        return counts
    return [
        None if now is None or before is None else now - before
        for before, now in pairwise([0, *counts])
    ]


RECORDS = "records"
"""The ``accounting`` of a session with no shutdown but per-call records (CLI 1.0.102)."""


def _from_records(annotated: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """``table`` where a session has no shutdown but per-call records: its figures are the
    records' sums (a figure some record lacks stays unknown)."""
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
            premium_requests=pl.lit(None, pl.Float64), ai_credits=credits(pl.col("nano_aiu"))
        )
        .sort(*SESSION, "model")
        .group_by(*SESSION, maintain_order=True)
        .agg(models=pl.struct(*(pl.col(n) for n in MODEL_USAGE.to_schema())))
    )
    sums = (
        records.group_by(*SESSION)
        .agg(*figures, status)
        .join(per_model, on=SESSION, how="left")
        .with_columns(ai_credits=credits(pl.col("nano_aiu")), accounting=pl.lit(RECORDS))
    )
    fill = [name for name in sums.columns if name not in SESSION]
    unsaved = table.filter(pl.col("accounting") == "none").select(*SESSION)
    taken = unsaved.join(sums, on=SESSION, how="inner")
    if taken.is_empty():
        return table
    return table.update(taken.select(*SESSION, *fill), on=list(SESSION), how="left")


def session_rows(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per session log of the annotated events (:data:`SESSION_SCHEMA`), newest first."""
    if annotated.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    facts = session_facts(annotated).select(
        *SESSION, "started_at", repository=pl.coalesce("repository", "cwd", pl.lit(UNKNOWN))
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
            )
        )
    )
    return newest_first(table.select(list(SESSION_SCHEMA)))
