"""The ``copilot-logs`` command line: a click group whose commands load on first use.

Nothing heavy (polars, rich) is imported until a command runs: ``--help`` answers at once.
"""

from __future__ import annotations

import errno
import importlib
import os
import pkgutil
import sys
from typing import TYPE_CHECKING, Any

import click
from click.exceptions import NoArgsIsHelpError

from copilot_logs import config
from copilot_logs.errors import CopilotLogsError, ExitCode
from copilot_logs.render import output
from copilot_logs.render.escape import one_line

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

COMMANDS = sorted(
    module.name for module in pkgutil.iter_modules(__path__) if module.name != "options"
)
"""A command is the function of its own name in the module of that name (``cli/audit.py``)."""


class Command(click.Command):
    """Every command of copilot-logs: a value given on the command line must say something.

    An empty value (``--select ''``, ``--fail-on ''``, ``--since=``, ``''`` as a path) is a
    usage error, never a silent "nothing" that would switch a gate off or read the current
    folder; so is an option value of blanks and commas only (``--select ,``), which names
    nothing. Checked once here, for every option and argument of every command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        rest = super().parse_args(ctx, args)  # --help and bad values first, as click does
        if not ctx.resilient_parsing:
            refuse_empty(self, ctx, given)
            _refuse_relative_without_cwd(self, ctx)
        return rest


class Group(click.Group):
    """A group of commands (``cache``) whose commands are :class:`Command`."""

    command_class = Command


def refuse_empty(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    """Raise a usage error naming the first option or argument given an empty value: ``''``,
    or for a value that is not a path (a file may be named " "), only blanks and commas."""
    raw, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    for param in command.get_params(ctx):
        value = raw.get(param.name or "")
        path = isinstance(param.type, click.Path) or param.name == "selectors"
        for given in value if isinstance(value, list | tuple) else [value]:
            if isinstance(given, str) and not (given if path else given.strip(" \t,")):
                fix = "name one (the current folder is .)" if path else "give one, or leave it out"
                raise click.BadParameter(f"{given!r} is an empty value: {fix}", ctx, param)


def _refuse_relative_without_cwd(command: click.Command, ctx: click.Context) -> None:
    """A relative path (``export out``, ``-o page.html``) when the current folder was deleted:
    a usage error that says so, before anything is written."""
    for param in command.get_params(ctx):
        given = ctx.params.get(param.name or "")
        if not isinstance(param.type, click.Path) or not given:
            continue
        for value in given if isinstance(given, tuple) else (given,):  # a repeatable option
            if os.path.isabs(value) or str(value) == "-":
                continue
            try:
                os.getcwd()
            except OSError:
                raise click.UsageError(config.CWD_GONE, ctx) from None


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command is used or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return COMMANDS

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        command = getattr(importlib.import_module(f"copilot_logs.cli.{cmd_name}"), cmd_name)
        assert isinstance(command, click.Command)
        return command

    def make_context(self, *args: Any, **extra: Any) -> click.Context:
        try:
            return super().make_context(*args, **extra)
        except click.ClickException as error:
            raise _escaped(error) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        output.guard_streams()
        try:
            return super().main(*args, **kwargs)
        except OSError as error:
            code = _os_error(error)
            output.fail_quietly()
            sys.exit(int(code))

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
        finally:  # why the store was not used (not the user's own: docs/cache.md), said once
            trust = sys.modules.get("copilot_logs.store.trust")  # not imported: not used
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


_WRITE_ERRORS = {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT, errno.EFBIG}


def _os_error(error: OSError) -> ExitCode:
    """An OSError no command turned into an error of its own, said in one line: what click
    writes itself (help, version, a usage error) on a stream that is full or failing, or a
    current folder that was deleted (``os.getcwd()`` fails for a relative path)."""
    reason = one_line(error.strerror or str(error))
    if error.errno in _WRITE_ERRORS:
        output.echo(f"Error: cannot write the output ({reason})", err=True)
        return ExitCode.UNREADABLE
    try:
        os.getcwd()
    except OSError:
        output.echo(f"Error: {config.CWD_GONE}", err=True)
        return ExitCode.USAGE
    where = f": {one_line(os.fsdecode(error.filename))}" if error.filename else ""
    output.echo(f"Error: {reason}{where}", err=True)
    return ExitCode.UNREADABLE


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


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
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
