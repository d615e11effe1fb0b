"""The rules shown: ``copilot-logs rules`` (the catalogue as a table or json, or one rule
explained), and docs/rules.md, generated from them: ``python -m copilot_logs.render.rules >
docs/rules.md`` rewrites it.

A test regenerates the page in memory and compares it with the file, so the page cannot drift
from the rules it documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import click

from copilot_logs.commands.validate import RULES
from copilot_logs.commands.validate.rule import FAMILIES, Rule
from copilot_logs.render import formats, output
from copilot_logs.render.formats import Column

if TYPE_CHECKING:
    from copilot_logs.commands.validate import Rule


def write_rule(found: Rule, fmt: str) -> None:
    """One rule: its code, name, severity, family, summary and explanation."""
    if fmt == "json":
        formats.write_json(found.as_dict())
        return
    output.echo(f"{found.code} {found.name} ({found.severity}, {found.family})\n")
    output.echo(f"{found.summary}\n\n{click.wrap_text(found.explanation, width=88)}")


def write_rules(rules: Sequence[Rule], fmt: str) -> None:
    import polars as pl

    table = pl.DataFrame([r.as_dict() for r in rules])
    if fmt == "json":
        formats.write_frame(table, "json")
    else:
        formats.print_table(table, COLUMNS)


COLUMNS = [
    Column("code", "code", 1),
    Column("name", "name", 1),
    Column("severity", "severity", 2),
    Column("summary", "summary", 3, max_width=60),
]


# --- docs/rules.md ------------------------------------------------------------------------------

COMMAND = "python -m copilot_logs.render.rules > docs/rules.md"

INTRO = """\
`copilot-logs validate` checks every session log against the rules below; each finding names
its rule and points at a file, a line and an event id ([validate.md](validate.md)).
`copilot-logs rules` lists them and `copilot-logs rules CODE` (or `NAME`) prints one;
`--format json` gives a list with, per rule, `code`, `name`, `severity` (`error`, `warning` or
`info`), `family`, `summary` (one line) and `explanation` (the text below). An unknown code or
name is a usage error (exit codes: see [the README](../README.md#exit-codes)).

```console
$ copilot-logs rules T201
T201 orphan-turn-end (error, turns)
...
$ copilot-logs rules --format json | jq -r '.[0] | keys | join(" ")'
code explanation family name severity summary
```

Codes are stable: the letter is the family, the hundreds digit the family's number; a code is
never renumbered or reused, and a new rule takes the next free code in its family.
`--select` and `--ignore` (and `select` / `ignore` in `[tool.copilot-logs]` of
pyproject.toml) take codes (`E104`), prefixes (`E`, `T2`), names (`orphan-turn-end`) or
`ALL`. Errors fail the gate; with `--strict`, warnings too; info never does.

Some envelope rules are found by the reader while it reads (damage it reports and reads
past: *found by the reader* below); the others are checks over the events it kept."""

NOT_FINDINGS = """\
## What is not a finding

- A turn and a tool left open when a `session.shutdown` follows: the user quit (e.g. at a
  `permission.requested` prompt), reported as T205 and X307 (info) instead of T204 and X303;
  their message names a `shutdownType` other than `routine`, such as `error`.
- The second session of a file that holds two: it is checked as its own log (R603 says where
  it begins; see [several sessions in one file](damaged-logs.md#several-sessions-in-one-file)).
- A `!cmd` shell escape: `tool.user_requested` and a `tool.execution_complete` with
  `isUserRequested: true`, no start, between turns.
- A session that ends cleanly without `session.shutdown`.
- Sub-agent lines: they have no `assistant.turn_*` of their own; their tools are checked
  against their sub-agent's end, not the main turn.
- Unknown event types: info only (E107).
- Files whose events carry no `parentId` at all: E104 is not checked.
- The session-id check (E109) for copies stored under names that are not UUIDs.

E106, E107 and S403 are reported once per type (or agentId) and file, on the first line,
with the count."""


def anchor(rule: Rule) -> str:
    """The link target GitHub gives the rule's heading ``### E101 invalid-json``."""
    return f"{rule.code.lower()}-{rule.name}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _index(rules: Iterable[Rule]) -> list[str]:
    lines = ["| code | name | severity | family | what it means |", "|---|---|---|---|---|"]
    for rule in rules:
        lines.append(
            f"| [`{rule.code}`](#{anchor(rule)}) | `{rule.name}` | {rule.severity} "
            f"| {rule.family} | {_cell(rule.summary)} |"
        )
    return lines


def _found_by(rule: Rule) -> str:
    if rule.check is not None:
        return "a check over the events"
    if rule.diagnostics:
        kinds = " or ".join(f"`{kind}`" for kind in rule.diagnostics)
        return f"the reader (its diagnostics of kind {kinds})"
    return "the reader (any diagnostic of a kind no other rule lists)"


def _entry(rule: Rule) -> list[str]:
    return [
        f"### {rule.code} {rule.name}",
        "",
        f"**{rule.summary}**",
        "",
        f"Severity: {rule.severity}. Family: {rule.family}. Found by: {_found_by(rule)}.",
        "",
        rule.explanation,
        "",
    ]


def render() -> str:
    """The whole page, in Markdown."""
    lines = [
        "# Rules",
        "",
        f"<!-- Generated from copilot_logs/commands/validate/ by `{COMMAND}`; do not edit. -->",
        "",
        INTRO,
        "",
        *_index(RULES),
        "",
    ]
    for letter, family in FAMILIES.items():
        members = [rule for rule in RULES if rule.code.startswith(letter)]
        number = members[0].code[1]
        lines += [f"## {letter}{number}xx {family}", ""]
        for rule in members:
            lines += _entry(rule)
    lines.append(NOT_FINDINGS)
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write the page on stdout (through the output gate, like every command)."""
    from copilot_logs.render import output

    output.write_exact(render(), escape="text")


if __name__ == "__main__":
    main()
