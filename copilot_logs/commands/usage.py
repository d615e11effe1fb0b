"""What sessions used and cost, read from their ``session.shutdown`` events.

Every Copilot CLI session since 0.0.422 writes its usage in ``session.shutdown``: premium
requests, nano-AIU (AI credits = ``totalNanoAiu / 1e9``), and per model the request count and
the input / output / cache-read / cache-write / reasoning tokens. Per-call usage
(``assistant.usage``) is ephemeral and never on disk, so the shutdown is the only source, and
a session's usage cannot be split over the days or interactions it spans.

Decisions, each kept where it is applied:

- **Resumes.** A resumed session appends a second shutdown to the same file. In CLI 1.0.7x a
  later shutdown is cumulative (take the last); some older versions reset per segment (sum
  them). Per session: ``cumulative`` when the session holds ``session.usage_checkpoint`` lines, or
  when every later shutdown is at least the one before it for every model (request count and
  every token figure); else ``per-segment``. One shutdown is ``single``; none is ``none``.
- **Unknown is None, never 0.** A session without a shutdown (crashed, running, or older than
  CLI 0.0.422) keeps its output tokens, summed from its ``assistant.message`` lines (they match
  the shutdown's), and every other figure is None. A shutdown with ``modelMetrics: {}`` (the
  provider never answered) is a real zero: the CLI says no request was made.
- **Cache tokens.** ``usage.inputTokens`` already includes the cache read and write tokens:
  ``input_tokens`` is that figure, never input plus cache.
- **Compaction.** The compaction call is in ``tokenDetails`` and ``totalNanoAiu`` but not in
  the per-model ``usage`` or ``requests``. It is reported apart as ``compactions`` (the
  ``session.compaction_complete`` events) and ``compaction_input_tokens`` /
  ``compaction_output_tokens``: the ``tokenDetails`` totals (input + cache_read + cache_write;
  output) minus the per-model usage sums. Without ``tokenDetails`` they fall back to the
  ``compactionTokensUsed`` of the compaction events. Its credits cannot be told apart (the
  per-call figures are not on disk): they stay inside ``ai_credits``.
- **Buckets.** A session goes whole into the day, week (ISO) or month of its start, in the
  chosen zone.
- **Aggregates.** A grouped figure sums the sessions where it is known (None when it is known
  for none); ``incomplete_sessions`` says how many sessions in the row have usage that no
  shutdown records (no shutdown, or LLM calls written after the last one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import orjson
import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.ingest.decode.envelope import as_int
from copilot_logs.ingest.reader import ReadResult

GROUPINGS = ("session", "day", "week", "month", "model", "repository")
ACCOUNTING = ("single", "cumulative", "per-segment", "none")
UNKNOWN = "unknown"
NANO_PER_CREDIT = 1_000_000_000

SHUTDOWN = "session.shutdown"
CHECKPOINT = "session.usage_checkpoint"
COMPACTION = "session.compaction_complete"

# Token figures of one model, as named on disk (``usage``) and in our output.
TOKEN_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "reasoningTokens": "reasoning_tokens",
}
MODEL_FIGURES = (
    "requests",
    "premium_requests",
    "nano_aiu",
    "ai_credits",
    *TOKEN_FIELDS.values(),
)
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
SESSION_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "started_at": pl.Datetime("ms", "UTC"),
    "repository": pl.String(),
    "accounting": pl.String(),
    "shutdowns": pl.Int64(),
    "complete": pl.Boolean(),
    "premium_requests": pl.Float64(),
    "nano_aiu": pl.Int64(),
    "ai_credits": pl.Float64(),
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


# --- one session's shutdowns -> one row of figures ---------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strict_sum(values: Iterable[int | None]) -> int | None:
    """The sum, or None when any part is unknown: a partial sum would pass for the whole."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def _strict_fsum(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return round(total, 6)


def _model_figures(name: str, metrics: Any) -> dict[str, Any]:
    metrics = _dict(metrics)
    requests = _dict(metrics.get("requests"))
    usage = _dict(metrics.get("usage"))
    nano = as_int(metrics.get("totalNanoAiu"))
    return {
        "model": name,
        "requests": as_int(requests.get("count")),
        "premium_requests": _number(requests.get("cost")),
        "nano_aiu": nano,
        "ai_credits": None,
        **{ours: as_int(usage.get(theirs)) for theirs, ours in TOKEN_FIELDS.items()},
    }


def _with_credits(figures: dict[str, Any]) -> dict[str, Any]:
    nano = figures["nano_aiu"]
    return {**figures, "ai_credits": None if nano is None else nano / NANO_PER_CREDIT}


def _token_details(data: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(input side, output) of a shutdown's ``tokenDetails``; None when it has none.

    ``tokenDetails.input`` holds only the uncached input (real 1.0.78 logs: 23038 input +
    52736 cache_read = 75774 inputTokens), so the input side adds the cache kinds back.
    Without a top-level ``tokenDetails`` the per-model ones are summed, if every model has one.
    """
    details = data.get("tokenDetails")
    if isinstance(details, dict):
        parts: list[Any] = [details]
    else:
        metrics = _dict(data.get("modelMetrics")).values()
        parts = [_dict(m).get("tokenDetails") for m in metrics]
        if not parts or not all(isinstance(p, dict) for p in parts):
            return None, None

    def count(kind: str) -> int:
        return sum(as_int(_dict(_dict(p).get(kind)).get("tokenCount")) or 0 for p in parts)

    return count("input") + count("cache_read") + count("cache_write"), count("output")


def _at_least(later: Mapping[str, Any], earlier: Mapping[str, Any]) -> bool:
    """Whether ``later`` reports at least what ``earlier`` does, for every model of it."""
    later_models = _dict(later.get("modelMetrics"))
    for name, metrics in _dict(earlier.get("modelMetrics")).items():
        if name not in later_models:
            return False
        before, after = _model_figures(name, metrics), _model_figures(name, later_models[name])
        for field in ("requests", *TOKEN_FIELDS.values()):
            if (before[field] or 0) > (after[field] or 0):
                return False
    return True


def accounting(shutdowns: Sequence[Mapping[str, Any]], *, has_checkpoints: bool) -> str:
    """How a file's shutdowns combine: ``single``, ``cumulative``, ``per-segment`` or ``none``.

    The rule of the format notes: cumulative when the file holds usage checkpoints (written
    only by CLIs whose shutdowns are cumulative), or when each later shutdown is at least the
    earlier one for every model. Two per-segment shutdowns where the second segment happens to
    use at least as much of every model as the first are indistinguishable from cumulative
    ones; the checkpoint rule settles every recent log.
    """
    if not shutdowns:
        return "none"
    if len(shutdowns) == 1:
        return "single"
    if has_checkpoints or all(_at_least(b, a) for a, b in pairwise(shutdowns)):
        return "cumulative"
    return "per-segment"


def _segment(data: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one shutdown."""
    metrics = _dict(data.get("modelMetrics"))
    models = {name: _model_figures(name, m) for name, m in metrics.items()}
    premium = _number(data.get("totalPremiumRequests"))
    if premium is None:
        premium = _strict_fsum(m["premium_requests"] for m in models.values())
    nano = as_int(data.get("totalNanoAiu"))
    if nano is None:
        nano = _strict_sum(m["nano_aiu"] for m in models.values())
    changes = _dict(data.get("codeChanges"))
    files = changes.get("filesModified")
    detail_in, detail_out = _token_details(data)
    return {
        "premium_requests": premium,
        "nano_aiu": nano,
        "requests": _strict_sum(m["requests"] for m in models.values()),
        **{name: _strict_sum(m[name] for m in models.values()) for name in TOKEN_FIELDS.values()},
        "api_duration_ms": as_int(data.get("totalApiDurationMs")),
        "lines_added": as_int(changes.get("linesAdded")),
        "lines_removed": as_int(changes.get("linesRemoved")),
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
        if name == "files":
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
    """Summed ``compactionTokensUsed`` of compaction events (both spellings seen in the wild);
    None when any event lacks it."""
    total_in: int | None = 0
    total_out: int | None = 0
    for data in events:
        used = _dict(data.get("compactionTokensUsed"))
        spent_in = as_int(used.get("input", used.get("inputTokens")))
        spent_out = as_int(used.get("output", used.get("outputTokens")))
        total_in = None if total_in is None or spent_in is None else total_in + spent_in
        total_out = None if total_out is None or spent_out is None else total_out + spent_out
    return total_in, total_out


def file_usage(
    shutdowns: Sequence[Mapping[str, Any]],
    *,
    has_checkpoints: bool = False,
    compactions: Sequence[Mapping[str, Any]] = (),
    message_tokens: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """The usage figures of one session log from its shutdown payloads, in file order.

    ``message_tokens`` (output tokens per model, summed from ``assistant.message``) is used
    only when there is no shutdown. Returns the figure fields of ``SESSION_SCHEMA`` plus
    ``accounting``, ``shutdowns`` and ``models`` (a list of per-model figure dicts).
    """
    kind = accounting(shutdowns, has_checkpoints=has_checkpoints)
    event_in, event_out = _compaction_tokens(compactions)
    common = {"accounting": kind, "shutdowns": len(shutdowns), "compactions": len(compactions)}
    if kind == "none":
        per_model = dict(message_tokens or {})
        models = [
            _with_credits({**dict.fromkeys(MODEL_FIGURES), "model": name, "output_tokens": out})
            for name, out in sorted(per_model.items())
        ]
        figures = {name: None for name in SUMMED if name not in ("llm_calls", "subagent_calls")}
        return {
            **figures,
            **common,
            "ai_credits": None,
            "output_tokens": _strict_sum(per_model.values()) if per_model else 0,
            "compaction_input_tokens": event_in,
            "compaction_output_tokens": event_out,
            "models": models,
        }
    segments = [_segment(s) for s in shutdowns]
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
        "files_modified": None if files is None else len(files),
        "compaction_input_tokens": compaction_in,
        "compaction_output_tokens": compaction_out,
        "models": [_with_credits(total["models"][name]) for name in sorted(total["models"])],
    }


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


def session_usage(result: ReadResult) -> pl.DataFrame:
    """One row per session log (``SESSION_SCHEMA``), newest first."""
    events = result.events
    if events.is_empty():
        return pl.DataFrame(schema=SESSION_SCHEMA)
    annotated = derive.annotate(events)
    facts = derive.session_facts(annotated).select(
        *SESSION,
        "started_at",
        repository=pl.coalesce("repository", "cwd", pl.lit(UNKNOWN)),
    )
    # Few lines per session carry usage: parse just those, once, in file order.
    lifecycle: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    kept = annotated.filter(TYPE.is_in([SHUTDOWN, CHECKPOINT, COMPACTION]) & MAIN)
    for file, session_id, kind, detail in kept.select(*SESSION, "type", "detail").iter_rows():
        payload = _dict(orjson.loads(detail)) if detail else {}
        lifecycle.setdefault((file, session_id), {}).setdefault(kind, []).append(payload)
    messages = _message_tokens(annotated)
    figures = []
    for file, session_id in facts.select(*SESSION).iter_rows():
        mine = lifecycle.get((file, session_id), {})
        row = file_usage(
            mine.get(SHUTDOWN, []),
            has_checkpoints=bool(mine.get(CHECKPOINT)),
            compactions=mine.get(COMPACTION, []),
            message_tokens=messages.get((file, session_id), {}),
        )
        figures.append({**row, "file": file, "session_id": session_id})
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


# --- sessions -> grouped rows and totals ---------------------------------------------------------


def _known_sum(name: str) -> pl.Expr:
    """The sum over the rows where the figure is known; None when it is known for none."""
    column = pl.col(name)
    summed = column.sum()
    if name == "premium_requests":
        summed = summed.round(6)
    return pl.when(column.is_not_null().any()).then(summed).otherwise(None).alias(name)


def _credits() -> pl.Expr:
    # Polars divides by multiplying with the reciprocal (657380000 / 1e9 -> 0.6573800000000001):
    # a credit has nine decimals at most, so rounding there gives the exact figure back.
    return (pl.col("nano_aiu") / NANO_PER_CREDIT).round(9).alias("ai_credits")


def _merged_models(sessions: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per key, the per-model figures of its sessions summed model by model."""
    exploded = sessions.select(*keys, "models").explode("models").drop_nulls("models")
    per_model = (
        exploded.unnest("models")
        .group_by(*keys, "model")
        .agg(_known_sum(name) for name in MODEL_FIGURES if name != "ai_credits")
        .with_columns(_credits())
        .sort(*keys, "model")
    )
    fields = [pl.col(name) for name in MODEL_USAGE.to_schema()]
    if not keys:
        return per_model.select(models=pl.struct(fields).implode())
    return per_model.group_by(keys, maintain_order=True).agg(models=pl.struct(fields))


def _bucket(by: str, zone: str) -> pl.Expr:
    local = pl.col("started_at").dt.convert_time_zone(zone)
    if by == "day":
        return local.dt.date().alias("day")
    if by == "week":
        return local.dt.strftime("%G-W%V").alias("week")
    return local.dt.strftime("%Y-%m").alias("month")


def _aggregates() -> list[pl.Expr]:
    return [
        pl.len().cast(pl.Int64).alias("sessions"),
        (~pl.col("complete")).sum().cast(pl.Int64).alias("incomplete_sessions"),
        *(_known_sum(name) for name in SUMMED),
    ]


def _by_model(sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per model: its per-model figures summed over the sessions that used it."""
    exploded = (
        sessions.select(_session=pl.struct(SESSION), complete="complete", models="models")
        .explode("models")
        .drop_nulls("models")
        .unnest("models")
    )
    return (
        exploded.group_by("model")
        .agg(
            pl.col("_session").n_unique().cast(pl.Int64).alias("sessions"),
            pl.col("_session")
            .filter(~pl.col("complete"))
            .n_unique()
            .cast(pl.Int64)
            .alias("incomplete_sessions"),
            *(_known_sum(name) for name in MODEL_FIGURES if name != "ai_credits"),
        )
        .with_columns(_credits())
        .select("model", "sessions", "incomplete_sessions", *MODEL_FIGURES)
        .sort("model")
    )


def group(sessions: pl.DataFrame, by: str, zone: str) -> pl.DataFrame:
    """The session rows regrouped: ``session`` (as they are), ``day`` / ``week`` / ``month``
    of the session's start in ``zone``, ``repository``, or ``model``."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}")
    if by == "session":
        return sessions
    if by == "model":
        return _by_model(sessions)
    keyed = sessions.with_columns(pl.col("repository") if by == "repository" else _bucket(by, zone))
    keys = [by]
    rows = keyed.group_by(keys).agg(_aggregates()).with_columns(_credits())
    rows = rows.join(_merged_models(keyed, keys), on=keys, how="left")
    return rows.select(
        *keys,
        "sessions",
        "incomplete_sessions",
        "premium_requests",
        "nano_aiu",
        "ai_credits",
        *(name for name in SUMMED if name not in ("premium_requests", "nano_aiu")),
        pl.col("models").fill_null([]),
    ).sort(keys)


def totals(sessions: pl.DataFrame) -> dict[str, Any]:
    """Every figure summed over all sessions (whatever the grouping), with per-model sums."""
    row = sessions.select(_aggregates()).with_columns(_credits())
    merged = _merged_models(sessions, [])
    figures = row.to_dicts()[0]
    figures["models"] = merged["models"].to_list()[0] if merged.height else []
    return figures


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
