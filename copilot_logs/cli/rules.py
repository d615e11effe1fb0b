from __future__ import annotations

import click

from copilot_logs.cli.options import format_option
from copilot_logs.render import output
from copilot_logs.render.formats import Column


@click.command()
@click.argument("rule", required=False, metavar="[CODE|NAME]")
@format_option("table", "json")
def rules(rule: str | None, fmt: str) -> None:
    """List the rules validate checks, or explain one.

    Codes are stable: E envelope, T turns, X tools, S sub-agents, C completion, R continuity.

    \b
    Examples:
      copilot-logs rules
      copilot-logs rules T201
      copilot-logs rules orphan-turn-end --format json
    """
    from copilot_logs.commands import validate as core
    from copilot_logs.render import formats

    if rule is not None:
        found = core.find_rule(rule)
        if fmt == "json":
            formats.write_json(found.as_dict())
        else:
            output.echo(f"{found.code} {found.name} ({found.severity}, {found.family})\n")
            output.echo(f"{found.summary}\n\n{click.wrap_text(found.explanation, width=88)}")
        return
    import polars as pl

    table = pl.DataFrame([r.as_dict() for r in core.RULES])
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
