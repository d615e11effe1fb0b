"""``copilot-logs diff BASE CANDIDATE``: did a change make the agent worse? A gate over two
sets of runs.

The runs of each side (:mod:`~copilot_logs.commands.diff.runs`, or a saved
:mod:`~copilot_logs.commands.diff.baseline`) are paired into cases by a key and compared metric
by metric (:mod:`~copilot_logs.commands.diff.metrics`); when a row fails, is ``insufficient``,
``new`` or ``gone``: docs/diff.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from copilot_logs.commands.diff import metrics
from copilot_logs.commands.diff.metrics import (
    DEFAULT_THRESHOLDS,
    GONE,
    METRICS,
    NEW,
    NUMBER,
    Metric,
    Threshold,
    parse_thresholds,
    relative_change,
)

KEYS = ("prompt", "name", "session", "none")
DEFAULT_MIN_RUNS = 3

FAIL = "fail"
INSUFFICIENT = "insufficient"
CHANGED = "changed"
UNCHANGED = "unchanged"
UNKNOWN = "unknown"
STATUSES = (FAIL, INSUFFICIENT, CHANGED, UNCHANGED, UNKNOWN, "gone", "new")
"""A row's status: ``unknown`` when a side has no known value; ``gone`` / ``new`` for a case
on one side only."""

ALL_RUNS = "all runs"
NO_PROMPT = "(no typed prompt)"
NO_NAME = "(no name)"


@dataclass(frozen=True)
class Gate:
    """What fails: the thresholds, the runs a side needs, significance, pairing."""

    thresholds: tuple[Threshold, ...] = field(
        default_factory=lambda: parse_thresholds(DEFAULT_THRESHOLDS)
    )
    min_runs: int = DEFAULT_MIN_RUNS
    alpha: float | None = None
    key: str = "prompt"
    fail_on_missing: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "thresholds": [t.text for t in self.thresholds],
            "min_runs": self.min_runs,
            "alpha": self.alpha,
            "key": self.key,
            "fail_on_missing": self.fail_on_missing,
        }


@dataclass(frozen=True)
class Figures:
    """One side of a row: its runs, how many have the figure, and the statistics of those."""

    runs: int
    known: int
    median: float | None
    p90: float | None
    mean: float | None
    yes: int | None = None
    """For a yes/no metric: how many runs said yes (``mean`` is then the rate)."""

    def stat(self, name: str) -> float | None:
        return self.mean if name == "rate" else getattr(self, name)


@dataclass(frozen=True)
class Row:
    """One metric of one case (or a case on one side only)."""

    case: str
    metric: Metric
    status: str
    failing: bool
    file: str | None
    """A log of the case, for CI annotations: the candidate's first run, else the base's."""
    base: Figures | None = None
    candidate: Figures | None = None
    change: float | None = None
    """Candidate minus base, of the medians (of the rates for a yes/no metric)."""
    relative: float | None = None
    """``change`` over the base's figure (+-inf from 0)."""
    p_value: float | None = None
    p_method: str | None = None
    fired: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """Runs paired by the key: its label and each side's runs and verdicts."""

    key: str
    label: str
    base_runs: int
    candidate_runs: int
    base_verdicts: dict[str, int]
    candidate_verdicts: dict[str, int]


@dataclass(frozen=True)
class Diff:
    """What ``diff`` reports: the gate, both populations, the cases and their rows (failing
    rows first)."""

    gate: Gate
    unit: str
    base: pl.DataFrame
    candidate: pl.DataFrame
    cases: list[Case]
    rows: list[Row]

    @property
    def failing(self) -> list[Row]:
        return [row for row in self.rows if row.failing]

    @property
    def failed(self) -> bool:
        return any(row.failing for row in self.rows)

    def summary(self) -> dict[str, Any]:
        counts = Counter(row.status for row in self.rows)
        return {
            "base_runs": self.base.height,
            "candidate_runs": self.candidate.height,
            "cases": len(self.cases),
            "rows": len(self.rows),
            "failing": len(self.failing),
            "statuses": {status: counts[status] for status in STATUSES if counts[status]},
            "failed": self.failed,
        }


def case_keys(runs: pl.DataFrame, key: str) -> tuple[list[str], dict[str, str]]:
    """Each run's case under ``key`` (in the runs' order), and each case's label."""
    if key not in KEYS:
        raise ValueError(f"unknown key {key!r}")
    if key == "none":
        return [ALL_RUNS] * runs.height, {ALL_RUNS: ALL_RUNS}
    if key == "session":
        ids = runs["session_id"].to_list()
        return ids, {i: i for i in ids}
    if key == "name":
        names = [name if name is not None else NO_NAME for name in runs["name"].to_list()]
        return names, {n: n for n in names}
    keys, labels = [], {}
    for digest, preview in runs.select("prompt_hash", "prompt_preview").iter_rows():
        case = digest if digest is not None else NO_PROMPT
        keys.append(case)
        labels[case] = f"{preview} [{digest[:8]}]" if digest is not None else NO_PROMPT
    return keys, labels


def compare(base: pl.DataFrame, candidate: pl.DataFrame, gate: Gate, *, unit: str) -> Diff:
    """The diff of two sets of runs (:data:`~copilot_logs.commands.diff.runs.RUN_SCHEMA`)."""
    base_keys, labels = case_keys(base, gate.key)
    candidate_keys, candidate_labels = case_keys(candidate, gate.key)
    labels.update(candidate_labels)
    base = base.with_columns(_case=pl.Series(base_keys, dtype=pl.String))
    candidate = candidate.with_columns(_case=pl.Series(candidate_keys, dtype=pl.String))
    base_by, candidate_by = _by_case(base), _by_case(candidate)
    cases, rows = [], []
    for key in sorted(set(base_by) | set(candidate_by), key=lambda k: (labels[k], k)):
        mine = base_by.get(key, base.clear())
        theirs = candidate_by.get(key, candidate.clear())
        verdicts = (_verdicts(mine), _verdicts(theirs))
        cases.append(Case(key, labels[key], mine.height, theirs.height, *verdicts))
        rows.extend(_case_rows(key, mine, theirs, gate))
    rows.sort(key=lambda row: not row.failing)  # stable: failing first, else in case order
    return Diff(gate, unit, base.drop("_case"), candidate.drop("_case"), cases, rows)


def _by_case(runs: pl.DataFrame) -> dict[str, pl.DataFrame]:
    return {str(key): frame for (key,), frame in runs.group_by("_case", maintain_order=True)}


def _verdicts(runs: pl.DataFrame) -> dict[str, int]:
    counts = Counter(v for v in runs["verdict"].to_list() if v is not None)
    return dict(sorted(counts.items()))


def _case_rows(key: str, base: pl.DataFrame, candidate: pl.DataFrame, gate: Gate) -> list[Row]:
    file = next((str(side["file"][0]) for side in (candidate, base) if side.height), None)
    if not base.height or not candidate.height:
        metric = NEW if not base.height else GONE
        return [Row(key, metric, metric.name, gate.fail_on_missing, file)]
    return [_metric_row(key, metric, base, candidate, gate, file) for metric in METRICS]


def figures(values: Sequence[float], runs: int, metric: Metric) -> Figures:
    """One side's statistics of a metric from its known values."""
    return Figures(
        runs=runs,
        known=len(values),
        median=metrics.median(values),
        p90=metrics.percentile(values, 0.9),
        mean=metrics.mean(values),
        yes=None if metric.kind == NUMBER else int(sum(values)),
    )


def _metric_row(
    key: str,
    metric: Metric,
    base: pl.DataFrame,
    candidate: pl.DataFrame,
    gate: Gate,
    file: str | None,
) -> Row:
    before, after = (
        [float(v) for v in side[metric.name].drop_nulls()] for side in (base, candidate)
    )
    mine, theirs = figures(before, base.height, metric), figures(after, candidate.height, metric)
    main_stat = "median" if metric.kind == NUMBER else "rate"
    change = _change(mine, theirs, main_stat)
    relative = relative_change(mine.stat(main_stat), theirs.stat(main_stat))
    p_value, p_method = _p(metric, before, after, mine, theirs)
    fired: tuple[str, ...] = ()
    if not before or not after:
        status = UNKNOWN
    else:
        fired = tuple(
            t.text
            for t in gate.thresholds
            if t.metric == metric.name
            and t.fires(
                _change(mine, theirs, t.stat),
                relative_change(mine.stat(t.stat), theirs.stat(t.stat)),
            )
            and (gate.alpha is None or (p_value is not None and p_value < gate.alpha))
        )
        moved = any(
            _change(mine, theirs, stat) for stat in ("median", "p90", "mean")
        )  # for a yes/no metric the mean is the rate
        enough = min(len(before), len(after)) >= gate.min_runs
        if not moved:
            status = UNCHANGED
        elif not enough:
            status = INSUFFICIENT
        elif fired:
            status = FAIL
        else:
            status = CHANGED
    fired = fired if status in (FAIL, INSUFFICIENT) else ()
    return Row(
        key,
        metric,
        status,
        status == FAIL,
        file,
        mine,
        theirs,
        change,
        relative,
        p_value,
        p_method,
        fired,
    )


def _change(base: Figures, candidate: Figures, stat: str) -> float | None:
    before, after = base.stat(stat), candidate.stat(stat)
    if before is None or after is None:
        return None
    return after - before


def _p(
    metric: Metric,
    before: list[float],
    after: list[float],
    base: Figures,
    candidate: Figures,
) -> tuple[float | None, str | None]:
    if not before or not after:
        return None, None
    if metric.kind == NUMBER:
        found = metrics.mann_whitney(before, after)
        return found if found is not None else (None, None)
    base_yes, candidate_yes = base.yes or 0, candidate.yes or 0
    p = metrics.fisher_exact(
        base_yes, base.known - base_yes, candidate_yes, candidate.known - candidate_yes
    )
    return p, "fisher"
