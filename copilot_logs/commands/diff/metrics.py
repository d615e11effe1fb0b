"""What ``diff`` measures of each run, the thresholds that make a change fail the gate, and
the figures: median, P90, mean, and the exact tests (Mann-Whitney, Fisher), by hand, so that no
statistics library is needed (exact where cheap: a few runs a side).

Metrics, their codes and the threshold syntax: docs/diff.md.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

METRICS_VERSION = 1
"""The version of the metric definitions below, written into every saved baseline: bumped
whenever a metric's meaning changes, so that an old baseline is refused, never compared."""

NUMBER = "number"
RATE = "rate"


@dataclass(frozen=True)
class Metric:
    """One figure of a run."""

    name: str
    code: str
    family: str
    kind: str
    """:data:`NUMBER` or :data:`RATE` (a yes/no of each run)."""
    summary: str
    source: str


METRICS: tuple[Metric, ...] = (
    Metric("ai_credits", "D101", "cost", NUMBER, "AI credits", "usage ai_credits"),
    Metric("input_tokens", "D102", "cost", NUMBER, "input tokens", "usage input_tokens"),
    Metric("output_tokens", "D103", "cost", NUMBER, "output tokens", "usage output_tokens"),
    Metric("llm_calls", "D201", "calls", NUMBER, "main-agent LLM calls", "count llm_calls"),
    Metric("subagent_calls", "D202", "calls", NUMBER, "sub-agent calls", "count subagent_calls"),
    Metric("fusion_calls", "D203", "calls", NUMBER, "fusion calls", "count fusion_calls"),
    Metric("nudges", "D204", "calls", NUMBER, "autopilot nudges", "count autopilot_nudges"),
    Metric("wasted_calls", "D205", "calls", NUMBER, "calls spent looping", "audit wasted_calls"),
    Metric("tool_calls", "D301", "tools", NUMBER, "tool calls", "count tool_calls"),
    Metric(
        "failed_tool_calls", "D302", "tools", NUMBER, "failed tool calls", "count failed_tool_calls"
    ),
    Metric(
        "tool_failure_rate",
        "D303",
        "tools",
        NUMBER,
        "failed / tool calls (no tool call: unknown)",
        "count failed_tool_calls / tool_calls",
    ),
    Metric("completed", "D401", "outcome", RATE, "completed its task", "audit verdict completed"),
    Metric("looping", "D402", "outcome", RATE, "looping", "audit looping"),
    Metric("wall_time_ms", "D501", "time", NUMBER, "wall time (ms)", "sessions duration_ms"),
    Metric("model_time_ms", "D502", "time", NUMBER, "model time (ms)", "usage api_duration_ms"),
    Metric("damaged_lines", "D601", "coverage", NUMBER, "damaged lines", "sessions damaged_lines"),
)
BY_NAME = {metric.name: metric for metric in METRICS}

GONE = Metric("gone", "D602", "coverage", RATE, "a case the candidate no longer has", "")
NEW = Metric("new", "D603", "coverage", RATE, "a case only the candidate has", "")
CASE_ROWS = (GONE, NEW)
"""The rows of a case on one side only: shown always, failing only with --fail-on-missing."""

FAMILIES = ("cost", "calls", "tools", "outcome", "time", "coverage")

STATS = {NUMBER: ("median", "p90", "mean"), RATE: ("rate",)}
"""The statistics a threshold may name, by kind of metric."""


class ThresholdError(ValueError):
    """A threshold that cannot be read (the CLI says why, as a usage error)."""


@dataclass(frozen=True)
class Threshold:
    """``metric.stat op amounts``: fires when the statistic moved past every amount given."""

    metric: str
    stat: str
    op: str
    relative: float | None
    """A share (0.25 for +25%)."""
    absolute: float | None
    text: str

    def fires(self, change: float | None, relative: float | None) -> bool:
        """Whether a move of ``change`` (absolute) and ``relative`` (a share; +-inf from 0)
        passes every amount."""
        if change is None:
            return False

        def past(value: float, bound: float) -> bool:
            return value > bound if self.op == ">" else value < bound

        if self.absolute is not None and not past(change, self.absolute):
            return False
        return self.relative is None or (relative is not None and past(relative, self.relative))


_THRESHOLD = re.compile(
    r"^\s*(?P<metric>[a-z_]+)\.(?P<stat>[a-z0-9]+)\s*(?P<op>[<>])\s*(?P<first>[^\s]+)"
    r"(?:\s+and\s+(?P<second>[^\s]+))?\s*$"
)
_AMOUNT = re.compile(r"^(?P<sign>[+-]?)(?P<number>\d+(?:\.\d+)?|\.\d+)(?P<percent>%?)$")


def parse_threshold(text: str) -> Threshold:
    """A threshold from its text (ThresholdError saying what is wrong and what is expected)."""
    form = "write it as METRIC.STAT > +25% and +1.0 (or < -10% and -0.1)"
    found = _THRESHOLD.match(text)
    if found is None:
        raise ThresholdError(f"{text!r} is not a threshold: {form}")
    metric = BY_NAME.get(found["metric"])
    if metric is None:
        names = ", ".join(m.name for m in METRICS)
        raise ThresholdError(f"{text!r}: unknown metric {found['metric']!r}; choose from {names}")
    if found["stat"] not in STATS[metric.kind]:
        allowed = ", ".join(STATS[metric.kind])
        raise ThresholdError(
            f"{text!r}: {metric.name} is compared by {allowed}, not {found['stat']!r}"
        )
    relative = absolute = None
    for amount in filter(None, (found["first"], found["second"])):
        parsed = _AMOUNT.match(amount)
        if parsed is None:
            raise ThresholdError(f"{text!r}: {amount!r} is not an amount ({form})")
        value = float(parsed["number"]) * (-1 if parsed["sign"] == "-" else 1)
        if value and (value < 0) != (found["op"] == "<"):
            raise ThresholdError(
                f"{text!r}: a rise is written > +AMOUNT, a drop < -AMOUNT ({amount} given)"
            )
        if parsed["percent"]:
            if relative is not None:
                raise ThresholdError(f"{text!r}: two relative amounts; give one, and one number")
            relative = value / 100
        else:
            if absolute is not None:
                raise ThresholdError(f"{text!r}: two absolute amounts; give one, and one percent")
            absolute = value
    return Threshold(metric.name, found["stat"], found["op"], relative, absolute, text.strip())


DEFAULT_THRESHOLDS = (
    "ai_credits.median > +25% and +1.0",
    "llm_calls.median > +25% and +2",
    "failed_tool_calls.median > +50% and +1",
    "completed.rate < -10% and -0.1",
    "looping.rate > +0% and +0",
)
"""The gate when none is given or pinned: more credits, more calls, more failed tools, fewer
completions, any new looping run."""


def parse_thresholds(texts: Sequence[str]) -> tuple[Threshold, ...]:
    return tuple(parse_threshold(text) for text in texts)


def relative_change(base: float | None, candidate: float | None) -> float | None:
    """(candidate - base) / |base|; +-inf from a base of 0 (0 when both are 0); None when
    either is unknown."""
    if base is None or candidate is None:
        return None
    if base == 0:
        return 0.0 if candidate == 0 else math.copysign(math.inf, candidate)
    return (candidate - base) / abs(base)


EXACT_UP_TO = 50
"""Runs in all (both sides) up to which the Mann-Whitney p is exact; beyond, the normal
approximation with the tie and continuity corrections (within about 0.01 there)."""

EXACT = "exact"
NORMAL = "normal"


def median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile: the smallest value that at least ``share`` of the values
    are at or below (P90 of 1..10 is 9); always a value that was seen. None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return float(ordered[rank - 1])


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def mann_whitney(base: Sequence[float], candidate: Sequence[float]) -> tuple[float, str] | None:
    """The two-sided p of the Mann-Whitney U test, and how it was found (``exact`` or
    ``normal``); None when a side has no value.

    Two-sided: the chance, were both sides drawn from one population, of a U at least as far
    from its mean (n1 n2 / 2) as the one seen. Exact (the permutation distribution of U given
    the ties, counted with integers) up to :data:`EXACT_UP_TO` runs in all.
    """
    if not base or not candidate:
        return None
    n1, n2 = len(base), len(candidate)
    groups = _tie_groups(base, candidate)
    doubled = _doubled_u(groups)
    if n1 + n2 <= EXACT_UP_TO:
        return _exact_p(groups, n1, n2, doubled), EXACT
    return _normal_p(groups, n1, n2, doubled), NORMAL


def _tie_groups(base: Sequence[float], candidate: Sequence[float]) -> list[tuple[int, int]]:
    """The values of both sides in ascending order, as (how many of base, how many in all)
    per distinct value."""
    tagged = sorted([(value, 1) for value in base] + [(value, 0) for value in candidate])
    return [
        (sum(tag for _, tag in members), len(members))
        for members in (list(g) for _, g in groupby(tagged, key=lambda pair: pair[0]))
    ]


def _doubled_u(groups: list[tuple[int, int]]) -> int:
    """2U of the base side: each base value beats every candidate value below it, and ties
    count half."""
    below = 0  # candidate values so far
    doubled = 0
    for from_base, size in groups:
        ties = size - from_base
        doubled += from_base * (2 * below + ties)
        below += ties
    return doubled


def _exact_p(groups: list[tuple[int, int]], n1: int, n2: int, seen: int) -> float:
    """Over every choice of which n1 of the values are the base side's (the tie groups kept),
    the share whose 2U lies at least as far from n1 n2 as ``seen``.

    Dynamic programming over the tie groups: for each count of base values placed so far, the
    number of ways to reach each 2U, held as one big integer (a polynomial in 2U with each
    coefficient in its own field of bits), so shifting and adding are single integer steps.
    """
    width = math.comb(n1 + n2, n1).bit_length() + 1
    mask = (1 << width) - 1
    ways = [0] * (n1 + 1)  # ways[k]: polynomial over 2U with k base values placed
    ways[0] = 1
    placed = 0
    for _, size in groups:
        after = [0] * (n1 + 1)
        for taken, poly in enumerate(ways):
            if not poly:
                continue
            below = placed - taken  # candidate values before this group
            for here in range(min(size, n1 - taken) + 1):
                shift = here * (2 * below + size - here)
                after[taken + here] += (poly * math.comb(size, here)) << (shift * width)
        ways = after
        placed += size
    centre = n1 * n2
    far = abs(seen - centre)
    poly = ways[n1]
    extreme = 0
    doubled = 0
    while poly:
        count = poly & mask
        if count and abs(doubled - centre) >= far:
            extreme += count
        poly >>= width
        doubled += 1
    return min(1.0, extreme / math.comb(n1 + n2, n1))


def _normal_p(groups: list[tuple[int, int]], n1: int, n2: int, doubled: int) -> float:
    total = n1 + n2
    ties = sum(size**3 - size for _, size in groups)
    variance = n1 * n2 / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    distance = max(0.0, abs(doubled / 2 - n1 * n2 / 2) - 0.5)
    return min(1.0, math.erfc(distance / math.sqrt(variance) / math.sqrt(2)))


def fisher_exact(base_yes: int, base_no: int, candidate_yes: int, candidate_no: int) -> float:
    """The two-sided p of Fisher's exact test on the 2x2 table of the two sides' yes / no
    counts: the chance, the margins held, of a table no more likely than the one seen. The
    tables' weights are compared as integers, so no rounding decides a tie."""
    base = base_yes + base_no
    yes = base_yes + candidate_yes
    total = base + candidate_yes + candidate_no
    if total == 0:
        return 1.0
    no = total - yes

    def weight(k: int) -> int:  # tables with k of the base side's runs a yes
        return math.comb(yes, k) * math.comb(no, base - k)

    seen = weight(base_yes)
    low, high = max(0, base - no), min(base, yes)
    extreme = sum(w for w in map(weight, range(low, high + 1)) if w <= seen)
    return min(1.0, extreme / math.comb(total, base))
