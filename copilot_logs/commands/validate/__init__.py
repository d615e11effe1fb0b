"""The invariants of a session log as named rules, checked over the events frame.

Every rule has a stable code (the letter names its family: E envelope, T turns, X tools,
S sub-agents, C completion, R continuity), a kebab-case name, a default severity and an
explanation, declared in its family's module beside the check that finds it (or the reader
diagnostics that report it). :func:`check` evaluates the selected rules as polars expressions
over the annotated events of every file at once, maps the reader's diagnostics onto the
envelope rules, and returns one findings frame: each finding points at a file, a line and an
event id. ``python -m copilot_logs.render.rules`` writes docs/rules.md from the rules.

The package:

- ``rule``: what a rule is (:class:`Rule`) and the :class:`Family` that registers each one;
- ``envelope``, ``turns``, ``tools``, ``subagents``, ``completion``, ``continuity``: the rules
  of each family with their checks;
- ``context``: the events prepared once for every check, and the helpers checks share;
- ``registry``: every rule by code and name, and the --select / --ignore selection;
- ``report``: checking a batch, and the report validate decides on;
- ``docs``: the reference page generated from the rules.
"""

from __future__ import annotations

from copilot_logs.commands.validate.registry import (
    DIAGNOSTIC_RULES,
    OTHER_DAMAGE,
    RULES,
    RULES_BY_CODE,
    RULES_BY_NAME,
    find_rule,
    matching,
    resolve,
    split_selectors,
)
from copilot_logs.commands.validate.report import (
    FINDINGS_SCHEMA,
    Report,
    check,
    check_batch,
    checked_files,
    combine,
    empty_findings,
    failing_severities,
    validate,
)
from copilot_logs.commands.validate.rule import (
    FAMILIES,
    SEVERITIES,
    Rule,
    Severity,
    UnknownRuleError,
)

__all__ = [
    "DIAGNOSTIC_RULES",
    "FAMILIES",
    "FINDINGS_SCHEMA",
    "OTHER_DAMAGE",
    "RULES",
    "RULES_BY_CODE",
    "RULES_BY_NAME",
    "SEVERITIES",
    "Report",
    "Rule",
    "Severity",
    "UnknownRuleError",
    "check",
    "check_batch",
    "checked_files",
    "combine",
    "empty_findings",
    "failing_severities",
    "find_rule",
    "matching",
    "resolve",
    "split_selectors",
    "validate",
]
