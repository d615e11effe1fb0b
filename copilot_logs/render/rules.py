"""``copilot-logs rules``: the catalogue as a table or json, or one rule explained."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

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
