"""A saved baseline: every run of a side, kept in one JSON file to diff against later.

``{"schema": "copilot-logs/baseline", "metrics_version": N, "unit": ..., "runs": [...]}``:
each run whole (:data:`~copilot_logs.commands.diff.runs.RUN_SCHEMA`), not only aggregates,
so that a later ``diff`` pairs and tests them as if the side were read again. A baseline
written under other metric definitions (another ``metrics_version``) is refused: its figures
would not mean what today's do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from copilot_logs import modes
from copilot_logs.commands.diff.metrics import METRICS_VERSION
from copilot_logs.commands.diff.runs import RUN_SCHEMA
from copilot_logs.errors import FULL, CopilotLogsError, UnreadableError, WriteError

SCHEMA = "copilot-logs/baseline"
SUFFIX = ".json"
"""A side named by a file with this suffix is a baseline (session logs are ``.jsonl``)."""


class BaselineError(CopilotLogsError):
    """A file given as a baseline that is not one this copilot-logs can compare (usage)."""


def is_baseline(side: str) -> bool:
    """Whether a side names a saved baseline (a ``.json`` file) rather than sessions."""
    return side.endswith(SUFFIX) and not side.endswith(".jsonl")


def document(runs: pl.DataFrame, *, unit: str, side: str, version: str) -> dict[str, Any]:
    """The baseline of ``runs`` as a JSON-ready dict."""
    return {
        "schema": SCHEMA,
        "metrics_version": METRICS_VERSION,
        "unit": unit,
        "side": side,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "copilot_logs": version,
        "runs": runs.select(list(RUN_SCHEMA)).to_dicts(),
    }


def save(path: Path, runs: pl.DataFrame, *, unit: str, side: str, version: str) -> None:
    """Write the baseline to ``path`` whole or not at all (a temporary file moved into
    place)."""
    data = orjson.dumps(
        document(runs, unit=unit, side=side, version=version),
        option=orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z,
    )
    try:
        with modes.atomic(path) as stream:
            stream.write(data + b"\n")
    except OSError as error:
        reason = error.strerror or str(error)
        if error.errno in FULL:
            raise WriteError(
                f"{path}: cannot write the baseline ({reason}); free some space"
            ) from None
        raise CopilotLogsError(
            f"{path}: cannot write the baseline there ({reason}); name a file in a writable folder"
        ) from None


def load(path: Path, *, unit: str) -> pl.DataFrame:
    """The runs a baseline keeps (BaselineError when it is not one, or was saved under other
    metric definitions or for another unit; UnreadableError when it cannot be read)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline; write one with --save-baseline") from None
    except OSError as error:
        raise UnreadableError(f"{path}: cannot read the baseline ({error.strerror})") from None
    try:
        found = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise BaselineError(f"{path}: not a baseline (not JSON: {error})") from None
    if not isinstance(found, dict) or found.get("schema") != SCHEMA:
        raise BaselineError(
            f'{path}: not a copilot-logs baseline (no "schema": "{SCHEMA}"); '
            "write one with --save-baseline"
        )
    version = found.get("metrics_version")
    if version != METRICS_VERSION:
        raise BaselineError(
            f"{path}: saved under metric definitions version {version!r}, and this copilot-logs "
            f"compares version {METRICS_VERSION}; save the baseline again with this version"
        )
    if found.get("unit") != unit:
        raise BaselineError(
            f"{path}: a baseline of {found.get('unit')!r} runs; diff it with --unit "
            f"{found.get('unit')}, or save one with --unit {unit}"
        )
    rows = found.get("runs")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise BaselineError(f'{path}: its "runs" is not a list of runs; save it again')
    try:
        return _frame(rows)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as error:
        raise BaselineError(f"{path}: its runs do not hold the fields of a run ({error})") from None


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The runs as a frame of :data:`RUN_SCHEMA` (times from their ISO text)."""
    text_schema = {**RUN_SCHEMA, "started_at": pl.String()}
    missing = [name for name in RUN_SCHEMA if any(name not in row for row in rows)]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    frame = pl.DataFrame(
        [{name: row[name] for name in RUN_SCHEMA} for row in rows],
        schema=text_schema,
        strict=True,
    )
    return frame.with_columns(
        started_at=pl.col("started_at").str.to_datetime(time_unit="ms", time_zone="UTC")
    )
