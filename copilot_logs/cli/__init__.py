"""The ``copilot-logs`` command line: a click group whose commands load on first use.

Commands are thin: parse options, call one core function, hand the result to one renderer.
Nothing heavy (polars, rich) is imported until a command runs, so ``--help`` and
``--version`` answer at once.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from copilot_logs.errors import CopilotLogsError, ExitCode

COMMANDS = {
    "sessions": "copilot_logs.cli.sessions_command:sessions",
    "count": "copilot_logs.cli.count_command:count",
    "usage": "copilot_logs.cli.usage_command:usage",
    "validate": "copilot_logs.cli.validate_command:validate",
    "rules": "copilot_logs.cli.rules_command:rules",
    "timeline": "copilot_logs.cli.timeline_command:timeline",
    "audit": "copilot_logs.cli.audit_command:audit",
    "watch": "copilot_logs.cli.watch_command:watch",
}


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command is used or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CopilotLogsError as error:
            click.echo(f"Error: {error}", err=True)
            ctx.exit(int(error.exit_code))
        except BrokenPipeError:
            # The reader of our stdout went away (`| head`): stop quietly.
            sys.stderr.close()
            ctx.exit(int(ExitCode.OK))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="copilot-logs", prog_name="copilot-logs")
def main() -> None:
    """Count, audit and validate GitHub Copilot CLI session logs.

    Reads ~/.copilot/session-state (or $COPILOT_HOME/session-state, or --root) and answers:
    how many LLM calls each session made, what happened turn by turn, which autopilot runs
    never finished, whether recorded logs keep their invariants, and what they cost.

    \b
    Examples:
      copilot-logs sessions
      copilot-logs count --total 3fa
      copilot-logs timeline --latest 1
    """
