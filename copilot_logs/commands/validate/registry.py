"""Every rule of every family, found by code or name, and the --select / --ignore selection.

Codes are never renumbered or reused: a retired rule keeps its code, a new rule takes the next
free one in its family (and is declared in that family's module).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from copilot_logs.commands.validate import completion, continuity, envelope, subagents, tools, turns
from copilot_logs.commands.validate.envelope import OTHER_DAMAGE
from copilot_logs.commands.validate.rule import Rule, UnknownRuleError

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
RULES_BY_NAME = {rule.name: rule for rule in RULES}

# Reader diagnostic kind -> the envelope rule that reports it (any other kind: OTHER_DAMAGE).
DIAGNOSTIC_RULES = {kind: rule.code for rule in RULES for kind in rule.diagnostics}

__all__ = [
    "DIAGNOSTIC_RULES",
    "OTHER_DAMAGE",
    "RULES",
    "RULES_BY_CODE",
    "RULES_BY_NAME",
    "find_rule",
    "matching",
    "resolve",
    "split_selectors",
]


def find_rule(key: str) -> Rule:
    """A rule by code (any case) or by name."""
    rule = RULES_BY_CODE.get(key.strip().upper()) or RULES_BY_NAME.get(key.strip().lower())
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
    if key.lower() in RULES_BY_NAME:
        return [RULES_BY_NAME[key.lower()]]
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
    chosen: set[str] = set()
    if select is None:
        chosen = set(RULES_BY_CODE)
    else:
        for selector in split_selectors(select):
            chosen.update(rule.code for rule in matching(selector))
    for selector in split_selectors(ignore):
        chosen.difference_update(rule.code for rule in matching(selector))
    return [rule for rule in RULES if rule.code in chosen]
