"""``copilot-logs rules``: the catalogue of validate's rules, or one rule explained."""

from __future__ import annotations

import click

from copilot_logs.cli import Command
from copilot_logs.cli.options import format_option


@click.command(cls=Command)
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
    from copilot_logs.render.rules import write_rule, write_rules

    if rule is None:
        write_rules(core.RULES, fmt)
    else:
        write_rule(core.find_rule(rule), fmt)
