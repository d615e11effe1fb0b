"""What a rule is, and the family that registers each rule beside its check.

A family module (``envelope``, ``turns``, ...) makes one :class:`Family` and declares every rule
of its letter on it: a check over the prepared events frame with the ``@FAMILY.rule(...)``
decorator, or a rule the reader reports (its diagnostics) with :meth:`Family.reported`. The code,
name, severity and texts sit next to the code that finds the breach, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from copilot_logs.errors import CopilotLogsError, ExitCode

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.commands.validate.context import Context

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

FAMILIES = {
    "E": "envelope",
    "T": "turns",
    "X": "tools",
    "S": "sub-agents",
    "C": "completion",
    "R": "continuity",
}

Check = Callable[["Context"], "pl.LazyFrame"]
"""A check: the prepared events in, one row per breach out (file, line, event_id,
session_id, message)."""


class UnknownRuleError(CopilotLogsError):
    """A --select / --ignore / `rules CODE` value that names no rule."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Rule:
    """One invariant: what it is called, how bad a breach is, why it matters, and what finds it
    (a check over the events, or the reader's diagnostics of the given kinds)."""

    code: str
    name: str
    severity: Severity
    summary: str
    explanation: str
    check: Check | None = field(default=None, compare=False, repr=False)
    diagnostics: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        return FAMILIES[self.code[0]]

    def as_dict(self) -> dict[str, str]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "family": self.family,
            "summary": self.summary,
            "explanation": self.explanation,
        }


class Family:
    """The rules of one code letter, in the order they are declared."""

    def __init__(self, letter: str) -> None:
        self.letter = letter
        self.name = FAMILIES[letter]
        self.rules: list[Rule] = []

    def _add(self, rule: Rule) -> None:
        """Add ``rule``: its code must carry the family's letter and follow the codes declared
        before it (so the module reads in code order, and no code is declared twice)."""
        last = self.rules[-1].code if self.rules else ""
        if not rule.code.startswith(self.letter) or rule.code <= last:
            raise ValueError(f"{rule.code} cannot follow {last or 'nothing'} in {self.name}")
        self.rules.append(rule)

    def rule(
        self, code: str, name: str, severity: Severity, summary: str, explanation: str
    ) -> Callable[[Check], Check]:
        """Declare a rule whose breaches the decorated check finds (the check is returned as
        it is)."""

        def register(check: Check) -> Check:
            self._add(Rule(code, name, severity, summary, explanation, check=check))
            return check

        return register

    def reported(
        self,
        code: str,
        name: str,
        severity: Severity,
        summary: str,
        explanation: str,
        *,
        kinds: tuple[str, ...] = (),
    ) -> None:
        """Declare a rule the reader reports: its diagnostics of these ``kinds`` become this
        rule's findings (no ``kinds``: the catch-all for any other kind)."""
        self._add(Rule(code, name, severity, summary, explanation, diagnostics=kinds))
