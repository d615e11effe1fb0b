"""The rules shown: ``copilot-logs rules`` (the catalogue as a table or json, or one rule
explained), and docs/rules.md, generated from them: ``python -m copilot_logs.render.rules >
docs/rules.md`` rewrites it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib.resources import files

import click

from copilot_logs.commands.validate import RULES
from copilot_logs.commands.validate.rule import FAMILIES, Rule
from copilot_logs.render import formats, output
from copilot_logs.render.formats import Column


def write_rule(found: Rule, fmt: str) -> None:
    """One rule: its code, name, severity, family, summary and explanation."""
    if fmt == "json":
        formats.write_json(found.as_dict())
        return
    output.echo(f"{found.code} {found.name} ({found.severity}, {found.family})\n")
    output.echo(f"{found.summary}\n\n{click.wrap_text(found.explanation, width=88)}")


def write_rules(rules: Sequence[Rule], fmt: str) -> None:
    import polars as pl

    formats.write_table(pl.DataFrame([r.as_dict() for r in rules]), fmt, COLUMNS)


COLUMNS = [
    Column("code", "code", 1),
    Column("name", "name", 1),
    Column("severity", "severity", 2),
    Column("summary", "summary", 3, max_width=60),
]


# --- docs/rules.md ------------------------------------------------------------------------------

RULES_HERE = "<!-- the rules -->\n"
"""Where ``rules_page.md`` (the page's text around the rules) takes the rules."""


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
    """The whole page, in Markdown: the rules in the frame of ``rules_page.md``."""
    lines = [*_index(RULES), ""]
    for letter, family in FAMILIES.items():
        members = [rule for rule in RULES if rule.code.startswith(letter)]
        lines += [f"## {letter}{members[0].code[1]}xx {family}", ""]
        for rule in members:
            lines += _entry(rule)
    head, tail = (files(__package__) / "rules_page.md").read_text("utf-8").split(RULES_HERE)
    return head + "".join(line + "\n" for line in lines) + tail


def main() -> None:
    """Write the page on stdout (through the output gate, like every command)."""
    from copilot_logs.render import output

    output.write_exact(render(), escape="text")


if __name__ == "__main__":
    main()
