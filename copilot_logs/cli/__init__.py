"""The ``copilot-logs`` command line: a click group whose commands load on first use.

Commands are thin: parse options, call one core function, hand the result to one renderer.
Nothing heavy (polars, rich) is imported until a command runs, so ``--help`` and
``--version`` answer at once.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

import click
from click.exceptions import NoArgsIsHelpError

from copilot_logs.errors import CopilotLogsError
from copilot_logs.render import output
from copilot_logs.render.output import one_line

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

COMMANDS = {
    "sessions": "copilot_logs.cli.sessions:sessions",
    "count": "copilot_logs.cli.count:count",
    "usage": "copilot_logs.cli.usage:usage",
    "validate": "copilot_logs.cli.validate:validate",
    "rules": "copilot_logs.cli.rules:rules",
    "timeline": "copilot_logs.cli.timeline:timeline",
    "audit": "copilot_logs.cli.audit:audit",
    "cache": "copilot_logs.cli.cache:cache",
    "report": "copilot_logs.cli.report:report",
    "export": "copilot_logs.cli.export:export",
    "watch": "copilot_logs.cli.watch:watch",
    "doctor": "copilot_logs.cli.doctor:doctor",
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

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as error:
            raise _escaped(error) from None

    def invoke(self, ctx: click.Context) -> Any:
        # A reader that goes away (`| head`) is handled where output is written
        # (copilot_logs.render.output): the command runs on and exits with its own code.
        try:
            return super().invoke(ctx)
        except CopilotLogsError as error:
            output.echo(f"Error: {one_line(str(error))}", err=True)
            ctx.exit(int(error.exit_code))
        except click.ClickException as error:
            raise _escaped(error) from None
        finally:
            _store_notice()


def _store_notice() -> None:
    """Say once, after the command, why the store was not used (a folder or entry that is
    not the user's own: docs/cache.md)."""
    trust = sys.modules.get("copilot_logs.store.trust")  # not imported: the store was not used
    notice = trust.take_notice() if trust is not None else None
    if notice is not None:
        output.echo(f"warning: {one_line(notice)}", err=True)


def complete_sessions(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of a selector: the session ids under --root (or the default root)
    that start with what was typed, else file names."""
    from click.shell_completion import CompletionItem

    from copilot_logs.ingest.discover import Selection, find_sources

    try:
        sources = find_sources(Selection(root=ctx.params.get("root")))
    except CopilotLogsError:  # a bad --root: complete file names instead
        sources = []
    ids = sorted(s.session_hint for s in sources if s.session_hint.startswith(incomplete))
    return [CompletionItem(i) for i in ids] or [CompletionItem(incomplete, type="file")]


def _escaped(error: click.ClickException) -> click.ClickException:
    """Click prints its usage errors itself; they quote the command line, which may hold a
    pasted selector or path: the same error, its control characters shown as escapes."""
    if isinstance(error, NoArgsIsHelpError):
        return error  # our own help text, shown as click shows it
    message = error.format_message()
    if one_line(message) == message:
        return error
    if isinstance(error, click.UsageError):
        return click.UsageError(one_line(message), error.ctx)
    return click.ClickException(one_line(message))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    None, "-V", "--version", package_name="copilot-logs", prog_name="copilot-logs"
)
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
