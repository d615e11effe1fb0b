"""validate's findings on every log at hand, against the findings frozen before the checks were
made cheaper (issue 23: one query per batch instead of some 25 eager frames per rule).

tests/validate_frozen.jsonl holds every finding, message included, that validate at main
7edb7e6 (before the change) gave on: every trigger and near miss of tests/test_rules.py (read
as one batch), sample_sessions/, the committed recordings of every CLI version, and
../shared/real-samples and real-samples-edge (those two skip when absent). Written by
``python -m tests.test_validate_frozen`` on that commit; rewrite it only with a change that is
meant to alter findings, and say which in its commit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from copilot_logs.commands import validate
from copilot_logs.ingest.reader import ReadResult, read_bytes

from . import test_rules
from .conftest import NO_EDGE_SAMPLES, NO_REAL_SAMPLES, PROJECT, REAL_SAMPLES, SAMPLES

FROZEN = Path(__file__).with_name("validate_frozen.jsonl")
RECORDINGS = Path(__file__).with_name("recordings")
REAL_EDGE = REAL_SAMPLES.with_name("real-samples-edge")
NOT_LOGS = ("stdout.jsonl", "otel.jsonl")
"""Files of a recording that are no session log: the json stream, the CLI's own spans."""


def _folder(root: Path) -> ReadResult:
    """Every session log under ``root`` (events.jsonl or <id>.jsonl), each named by its path
    under ``root``, read as one batch."""
    paths = sorted(p for p in root.rglob("*.jsonl") if p.name not in NOT_LOGS)
    return ReadResult.concat(
        read_bytes(path.read_bytes(), path.relative_to(root).as_posix()) for path in paths
    )


def _under(result: ReadResult, folder: str) -> ReadResult:
    """``result`` with each file moved under ``folder`` (its name, and so E109's, kept)."""
    file = pl.format("{}/{}", pl.lit(folder), pl.col("file"))
    return ReadResult(
        result.events.with_columns(file=file), result.diagnostics.with_columns(file=file)
    )


def _rule_cases() -> ReadResult:
    """Every trigger and near miss of the rule tests, each under a folder of its name (e117,
    the unreadable file, needs a folder on disk and is left out)."""
    cases: dict[str, Callable[[], Any]] = {}
    for table in (test_rules.TRIGGERS, test_rules.MISSES):
        for case in (case for cases in table.values() for case in cases):
            if case is not test_rules.e117:
                cases[case.__name__] = case
    parts = []
    for name, case in sorted(cases.items()):
        made = case()
        result = made[0] if isinstance(made, tuple) else made
        parts.append(_under(result, name))
    return ReadResult.concat(parts)


CORPORA: dict[str, Callable[[], ReadResult]] = {
    "rules": _rule_cases,
    "samples": lambda: _folder(SAMPLES),
    "recordings": lambda: _folder(RECORDINGS),
    "real-samples": lambda: _folder(REAL_SAMPLES),
    "real-samples-edge": lambda: _folder(REAL_EDGE),
}
OPTIONAL = {"real-samples": REAL_SAMPLES, "real-samples-edge": REAL_EDGE}


def _frozen(corpus: str) -> pl.DataFrame:
    rows = [
        row
        for line in FROZEN.read_bytes().splitlines()
        if (row := orjson.loads(line)).pop("corpus") == corpus
    ]
    return pl.DataFrame(rows, schema=validate.FINDINGS_SCHEMA, orient="row")


@pytest.mark.parametrize("corpus", list(CORPORA))
def test_findings_are_the_frozen_ones(corpus: str) -> None:
    if corpus in OPTIONAL and not OPTIONAL[corpus].is_dir():
        pytest.skip(NO_REAL_SAMPLES if corpus == "real-samples" else NO_EDGE_SAMPLES)
    assert_frame_equal(validate.check(CORPORA[corpus]()), _frozen(corpus))


def test_the_frozen_findings_cover_every_checked_rule() -> None:
    """The frozen findings hold at least one finding of every rule that has a check."""
    codes = {orjson.loads(line)["code"] for line in FROZEN.read_bytes().splitlines()}
    checked = {rule.code for rule in validate.RULES if rule.check is not None}
    assert checked <= codes


def write_frozen() -> None:
    """Write tests/validate_frozen.jsonl from the validate this runs with."""
    lines = []
    for corpus, read in CORPORA.items():
        for row in validate.check(read()).iter_rows(named=True):
            lines.append(orjson.dumps({"corpus": corpus, **row}))
    FROZEN.write_bytes(b"\n".join(lines) + b"\n")
    print(f"{len(lines)} findings -> {FROZEN.relative_to(PROJECT)}", file=sys.stderr)


if __name__ == "__main__":
    write_frozen()
