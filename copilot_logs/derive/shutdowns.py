"""One session log's usage figures, from the payloads of its ``session.shutdown`` events.

The decisions (resumes counted once: ``single``, ``cumulative``, ``per-segment`` or ``none``;
unknown is None, never 0; cache tokens not added twice; compaction reported apart) are
docs/usage.md's, each kept here where it is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import polars as pl

from copilot_logs.ingest.decode import as_int

ACCOUNTING = ("single", "cumulative", "per-segment", "none")
NANO_PER_CREDIT = 1_000_000_000

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


MAX_FIGURE = 1 << 50
"""The largest count or amount taken as a figure (about 10^15 tokens, or a million credits in
nano-AIU): no CLI writes more for a session, and sums of figures below it cannot overflow the
64-bit columns. A larger, negative or non-finite value is no figure (None), never a wrapped or
infinite total (issue 34)."""


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
    """:func:`_strict_sum` of fractional figures, to six decimals."""
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
    """What a shutdown says of its credits (CLI 1.0.102, ``aiCreditsStatus``): ``complete``,
    ``partial`` or ``unavailable`` (none reported: BYOK, or not billed in credits); None when
    it says nothing.

    Before 1.0.102 the CLI writes no status, and a session whose credits were never reported
    (bring-your-own-key: every recording of 1.0.60 to 1.0.92) has ``totalNanoAiu: 0`` beside
    requests that were made: that zero is ``unavailable`` too, as 1.0.102 says of the same
    runs. A zero with no request made (the provider never answered) is a real zero."""
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
    sub-agent's instance id): its requests, tokens, nano-AIU and API time; [] without them."""
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
    """(input side, output) of a shutdown's ``tokenDetails``; None when it has none.

    ``tokenDetails.input`` holds only the uncached input (real 1.0.78 logs: 23038 input +
    52736 cache_read = 75774 inputTokens), so the input side adds the cache kinds back.
    Without a top-level ``tokenDetails`` the per-model ones are summed, if every model has one.
    """
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

    Cumulative when the file holds usage checkpoints (written only by CLIs whose shutdowns are
    cumulative). Else the LLM calls counted in the events before each shutdown (``calls_before``)
    decide where they tell: cumulative when every shutdown's request count is the calls before
    it, per-segment when it is the calls since the shutdown before it (CLIs up to 1.0.6x reset
    their figures at a resume, recorded). Else the rule of the format notes: cumulative when
    each later shutdown is at least the earlier one for every model (a per-segment second
    segment that happens to use more of every model is taken for cumulative: only the counts
    tell them apart).
    """
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
    """``cumulative`` or ``per-segment`` when the shutdowns' request counts match the calls
    counted up to each (or in each segment) and not the other; else None."""
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
    """The figures of one shutdown payload."""
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
    """Summed ``compactionTokensUsed`` of compaction events (both spellings seen in the wild);
    None when any event lacks it."""
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
    """The usage figures of one session log from its shutdown payloads, in file order.

    ``message_tokens`` (output tokens per model, summed from ``assistant.message``) is used
    only when there is no shutdown. Returns the figure fields of ``SESSION_SCHEMA`` plus
    ``accounting``, ``shutdowns`` and ``models`` (a list of per-model figure dicts).
    """
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
    """A log with no shutdown: only the output tokens of its messages are known."""
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
