"""The invariants of a session log as named rules, checked over the events frame.

Every rule has a stable code (its letter names its family), a kebab-case name, a default severity
and an explanation, declared in its family's module beside the check that finds it (``rule``:
what a rule is and what every check reads). :func:`check` evaluates the selected rules as polars
expressions over every file at once, maps the reader's diagnostics onto the envelope rules, and
returns one findings frame, each finding at a file, a line and an event id. Codes are never
renumbered or reused; ``python -m copilot_logs.render.rules`` writes docs/rules.md from the rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from copilot_logs.commands.validate import completion, continuity, envelope, subagents, tools, turns
from copilot_logs.commands.validate.envelope import OTHER_DAMAGE
from copilot_logs.commands.validate.rule import (
    FAMILIES,
    SEVERITIES,
    Context,
    Rule,
    Severity,
    UnknownRuleError,
    prepare,
)
from copilot_logs.derive import SESSION
from copilot_logs.ingest.reader import ReadResult

FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "line": pl.Int64(),  # null for a finding about the whole file (unreadable, empty)
    "event_id": pl.String(),
    "code": pl.String(),
    "name": pl.String(),
    "severity": pl.String(),
    "message": pl.String(),
    "session_id": pl.String(),
}


def _diagnostic_findings(diagnostics: pl.LazyFrame, chosen: Sequence[Rule]) -> pl.LazyFrame:
    """The reader's diagnostics as findings of the chosen rules that report them."""
    code = pl.col("kind").replace_strict(
        DIAGNOSTIC_RULES, default=OTHER_DAMAGE, return_dtype=pl.String
    )
    message = (
        pl.when(code == OTHER_DAMAGE)
        .then(pl.format("{}: {}", "kind", "message"))
        .otherwise(pl.col("message"))
    )
    names = pl.LazyFrame(
        [(rule.code, rule.name, rule.severity) for rule in chosen],
        schema={"code": pl.String, "name": pl.String, "severity": pl.String},
        orient="row",
    )
    return diagnostics.select(
        "file",
        line=pl.when(pl.col("line") > 0).then(pl.col("line")),
        event_id="event_id",
        session_id="session_id",
        message=message,
        code=code,
    ).join(names, on="code", how="inner", maintain_order="left")


def check(
    result: ReadResult,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
) -> pl.DataFrame:
    """Check every file of ``result`` against the selected rules.

    Returns the findings frame (FINDINGS_SCHEMA), sorted by file, line and code. ``select`` and
    ``ignore`` take codes, code prefixes, names or ``ALL`` (see :func:`matching`).
    """
    chosen = resolve(select, ignore)
    # Every check starts from these two: each is planned once and read once.
    ctx = Context(prepare(result.events).lazy().cache(), result.diagnostics.lazy().cache())
    parts = [
        rule.check(ctx).with_columns(
            code=pl.lit(rule.code), name=pl.lit(rule.name), severity=pl.lit(rule.severity)
        )
        for rule in chosen
        if rule.check is not None
    ]
    parts.append(_diagnostic_findings(ctx.diagnostics, chosen))
    # The checks give their columns in the schema's types: the frames stack as they are.
    empty = pl.LazyFrame(schema=FINDINGS_SCHEMA)
    return (
        pl.concat([empty, *(part.select(list(FINDINGS_SCHEMA)) for part in parts)])
        .sort("file", "line", "code", "event_id", nulls_last=False, maintain_order=True)
        .collect(engine="in-memory")
    )


def checked_files(result: ReadResult) -> pl.DataFrame:
    """One row per session log read (file, session_id), in file order: events and diagnostics
    both, so a file that gave no event is still listed."""
    return (
        pl.concat([result.events.select(SESSION), result.diagnostics.select(SESSION)])
        .unique(subset=SESSION, keep="first", maintain_order=True)
        .sort("file", maintain_order=True)
    )


@dataclass(frozen=True)
class Report:
    """What validate decides: the findings, the logs checked, and whether the gate fails."""

    findings: pl.DataFrame
    files: pl.DataFrame
    rules: Sequence[Rule]
    strict: bool = False

    @property
    def failing(self) -> pl.DataFrame:
        """The findings that fail the gate: errors, and warnings too under --strict."""
        return self.findings.filter(
            pl.col("severity").is_in(["error", "warning"] if self.strict else ["error"])
        )

    @property
    def failed(self) -> bool:
        return not self.failing.is_empty()

    def statistics(self) -> pl.DataFrame:
        """Findings per rule, most frequent first."""
        return (
            self.findings.group_by("code", "name", "severity")
            .agg(count=pl.len().cast(pl.Int64))
            .sort(["count", "code"], descending=[True, False])
        )

    def summary(self) -> dict[str, Any]:
        by_severity = dict(self.findings.group_by("severity").len().iter_rows())
        return {
            "files": self.files["file"].n_unique(),
            "sessions": self.files["session_id"].n_unique(),
            "findings": self.findings.height,
            "errors": by_severity.get("error", 0),
            "warnings": by_severity.get("warning", 0),
            "info": by_severity.get("info", 0),
            "failing": self.failing.height,
            "files_failing": self.failing["file"].n_unique(),
            "strict": self.strict,
            "failed": self.failed,
        }


def check_batch(
    result: ReadResult,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The findings and the files checked of one batch of logs (for :func:`combine`)."""
    return check(result, select=select, ignore=ignore), checked_files(result)


def combine(
    parts: Sequence[tuple[pl.DataFrame, pl.DataFrame]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    strict: bool = False,
) -> Report:
    """The report over several batches' :func:`check_batch` results."""
    findings = [f for f, _ in parts] or [pl.DataFrame(schema=FINDINGS_SCHEMA)]
    files = [f for _, f in parts]
    return Report(
        findings=pl.concat(findings).sort("file", "line", "code", nulls_last=False),
        files=pl.concat(files).sort("file", maintain_order=True)
        if files
        else pl.DataFrame(schema={"file": pl.String, "session_id": pl.String}),
        rules=resolve(select, ignore),
        strict=strict,
    )


def validate(
    result: ReadResult,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    strict: bool = False,
) -> Report:
    """Check ``result`` and decide the gate (the core of ``copilot-logs validate``)."""
    select, ignore = (list(select) if select is not None else None), list(ignore)
    findings = check(result, select=select, ignore=ignore)
    return Report(findings, checked_files(result), resolve(select, ignore), strict)


# The families in code order (E, T, X, S, C, R), each rule in the order its module declares it.
RULES: tuple[Rule, ...] = (
    *envelope.RULES,
    *turns.RULES,
    *tools.RULES,
    *subagents.RULES,
    *completion.RULES,
    *continuity.RULES,
)

RULES_BY_CODE = {rule.code: rule for rule in RULES}
_BY_NAME = {rule.name: rule for rule in RULES}

# Reader diagnostic kind -> the envelope rule that reports it (any other kind: OTHER_DAMAGE).
DIAGNOSTIC_RULES = {kind: rule.code for rule in RULES for kind in rule.diagnostics}


def find_rule(key: str) -> Rule:
    """A rule by code (any case) or by name."""
    rule = RULES_BY_CODE.get(key.strip().upper()) or _BY_NAME.get(key.strip().lower())
    if rule is None:
        raise UnknownRuleError(
            f"no rule '{key}': run `copilot-logs rules` to list the codes and names"
        )
    return rule


def matching(selector: str) -> list[Rule]:
    """The rules a --select / --ignore value names: ``ALL``, a code, a code prefix (``E``,
    ``E1``, ``X30``) or a rule name. Raises UnknownRuleError when it names none."""
    key = selector.strip()
    if key.upper() == "ALL":
        return list(RULES)
    if key.lower() in _BY_NAME:
        return [_BY_NAME[key.lower()]]
    if re.fullmatch(r"[A-Za-z]\d{0,3}", key):
        found = [rule for rule in RULES if rule.code.startswith(key.upper())]
        if found:
            return found
    raise UnknownRuleError(
        f"'{selector}' names no rule (give a code like E104, a prefix like E or T2, a name "
        "like orphan-turn-end, or ALL); run `copilot-logs rules` to list them"
    )


def split_selectors(values: Iterable[str]) -> list[str]:
    """``["E1,T201", "X"]`` -> ``["E1", "T201", "X"]``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def resolve(select: Iterable[str] | None = None, ignore: Iterable[str] = ()) -> list[Rule]:
    """The rules to check: those selected (all when ``select`` is None), minus those ignored."""

    def named(selectors: Iterable[str]) -> set[str]:
        return {rule.code for key in split_selectors(selectors) for rule in matching(key)}

    chosen = (set(RULES_BY_CODE) if select is None else named(select)) - named(ignore)
    return [rule for rule in RULES if rule.code in chosen]


__all__ = ["FAMILIES", "SEVERITIES", "Rule", "Severity", "UnknownRuleError"]
