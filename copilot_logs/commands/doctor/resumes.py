"""Judging a finding by the recorded resumes: what the CLI version that wrote a log did, in a
real resume, with a log damaged the same way: ``evidence.json`` beside this module, written by
``python -m rig.resume --evidence`` from the recorded resumes (tests/test_doctor.py checks it).

A version that was not recorded is judged by the nearest recorded version at or below it (the
oldest recorded one for an older version); the reasons name both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from copilot_logs.commands.doctor import checks
from copilot_logs.ingest.decode import cli_format

_EVIDENCE = json.loads(Path(__file__).with_name("evidence.json").read_text(encoding="utf-8"))
VERSIONS: tuple[str, ...] = tuple(_EVIDENCE["versions"])
DAMAGES: dict[str, str] = _EVIDENCE["damages"]
OUTCOMES: dict[str, dict[str, str]] = _EVIDENCE["outcomes"]
"""Per damage and recorded CLI version, what its resume did (a key of SEVERITY_OF_OUTCOME)."""
NOTES: dict[str, dict[str, str]] = _EVIDENCE["notes"]
REPAIRED: dict[str, dict[str, str]] = _EVIDENCE["repaired"]
"""The same, for the copy ``doctor --repair`` wrote of each damaged recording."""
CLOSE_VERSION: str = _EVIDENCE["close_version"]
CLOSE_TOOL: dict[str, Any] = _EVIDENCE["close_tool"]
"""How CLOSE_VERSION closes a killed session's open tool call on resume (its data)."""
CLOSE_WARNING: dict[str, Any] = _EVIDENCE["close_warning"]

INFO, RISK, FATAL = "info", "risk", "fatal"

SEVERITY_OF_OUTCOME = {
    "resumed": INFO,
    "resumed-dropping": RISK,
    "history-lost": RISK,
    "unanswered-tool-call": FATAL,
    "failed-after-call": FATAL,
    "no-call": FATAL,
    "refused": FATAL,
}
WORDS_OF_OUTCOME = {
    "resumed": "resumes such a log",
    "resumed-dropping": "resumes such a log but rewrites it without some of its events",
    "history-lost": "resumes such a log but leaves the earlier conversation out",
    "unanswered-tool-call": "sends the model a tool call without its result (providers refuse "
    "that request)",
    "failed-after-call": "fails after its first model call on such a log",
    "no-call": "makes no model call on such a log",
    "refused": "refuses to resume such a log",
}
FLOOR = {
    checks.NO_SHUTDOWN: RISK,  # the usage of the run is lost, whatever the resume does
    checks.OUT_OF_PLACE: RISK,
}
"""The least severity of a finding, whatever the evidence says."""

UNRECORDED = "No resume of a log with this damage was recorded"


def nearest(version: str | None, recorded: Iterable[str] = VERSIONS) -> str:
    """The recorded version whose evidence judges ``version``: itself, else the newest
    recorded below it, else the oldest recorded (the newest when the version is unknown)."""
    recorded = sorted(recorded, key=lambda v: cli_format.version_key(v) or ())
    key = cli_format.version_key(version)
    if key is None:
        return recorded[-1]
    below = [v for v in recorded if (cli_format.version_key(v) or ()) <= key]
    return below[-1] if below else recorded[0]


def refuses_separators(version: str | None) -> bool:
    """Whether the version that wrote a log does anything but resume one holding a raw
    U+2028 (so that the log is searched for it)."""
    known = outcome("u2028", version)
    return known is not None and known[0] != "resumed"


def outcome(damage: str, version: str | None) -> tuple[str, str, str] | None:
    """(outcome, recorded version, note) of ``damage`` for ``version``; None when no resume
    of that damage was recorded."""
    row = OUTCOMES.get(damage)
    if not row:
        return None
    recorded = nearest(version, row)
    return row[recorded], recorded, NOTES.get(damage, {}).get(recorded, "")


def _judgement(damage: str | None, code: str, version: str | None) -> tuple[str, str]:
    """(severity, the sentence added to the finding's message)."""
    known = outcome(damage, version) if damage else None
    if known is None:
        if code == checks.DAMAGE:
            return RISK, UNRECORDED
        return FLOOR.get(code, INFO), ""
    result, recorded, note = known
    who = f"CLI {version or '(unknown version)'}"
    if recorded != version:
        who += f" (judged by {recorded}, the nearest recorded version)"
    sentence = f"{who} {WORDS_OF_OUTCOME[result]} (recorded{': ' + note if note else ''})"
    severity = max(
        SEVERITY_OF_OUTCOME[result], FLOOR.get(code, INFO), key=SEVERITY_RANK.__getitem__
    )
    return severity, sentence


SEVERITY_RANK = {INFO: 0, RISK: 1, FATAL: 2}


def judged(found: pl.DataFrame, figures: pl.DataFrame) -> pl.DataFrame:
    """The findings with the writer's version, a severity and the evidence in their message."""
    rows = found.join(
        figures.select("file", "session_id", "cli_version"), on=["file", "session_id"], how="left"
    )
    keys = rows.select("damage", "code", "cli_version").unique()
    table = pl.DataFrame(
        [
            (damage, code, version, *_judgement(damage, code, version))
            for damage, code, version in keys.iter_rows()
        ],
        schema={
            "damage": pl.String,
            "code": pl.String,
            "cli_version": pl.String,
            "severity": pl.String,
            "_why": pl.String,
        },
        orient="row",
    )
    joined = rows.join(table, on=["damage", "code", "cli_version"], how="left", nulls_equal=True)
    return joined.with_columns(
        message=pl.when(pl.col("_why") != "")
        .then(pl.format("{}. {}", "message", "_why"))
        .otherwise("message")
    )
