"""How a command is declared: the decorator of a command that reads logs, and the options of the
commands that judge sessions (--fail-on, --running-within, --nudge-cap), each declared once.

Kept apart from :mod:`copilot_logs.cli.options` (what the options mean, and loading) because
these only put options on commands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from copilot_logs.cli import Command
from copilot_logs.cli.options import (
    engine_options,
    format_option,
    parse_duration,
    selection_options,
)

F = TypeVar("F", bound=Callable[..., Any])


def reading_command(
    *formats: str, default: str = "table", engine: bool = True, stdin: bool = True
) -> Callable[[Callable[..., None]], click.Command]:
    """A command that reads session logs: click's command, called with the context first and
    SELECTORS and the options of :func:`selection_options` as one ``picked``; then --engine and
    --master (unless ``engine`` is false) and --format FORMATS (none without ``formats``). In
    --help these come first, the command's own options after them."""

    def declare(function: Callable[..., None]) -> click.Command:
        wrapped: Any = click.pass_context(function)
        if formats:
            wrapped = format_option(*formats, default=default)(wrapped)
        if engine:
            wrapped = engine_options(wrapped)
        return click.command(cls=Command)(selection_options(wrapped, stdin=stdin))

    return declare


def fail_on_option(
    verdicts: Sequence[str], default: str, *, also: tuple[str, str] | None = None
) -> Callable[[F], F]:
    """--fail-on VERDICT,...: exit 1 when a session gets one of these verdicts (``none``:
    never); ``also`` is one more name and what it marks. The command receives a frozenset."""
    names = (*verdicts, also[0]) if also else tuple(verdicts)

    def chosen(ctx: click.Context, param: click.Parameter, value: str) -> frozenset[str]:
        picked = {part.strip().lower() for part in value.split(",") if part.strip()}
        picked.discard("none")
        unknown = sorted(picked - set(names))
        if unknown:
            raise click.BadParameter(
                f"unknown verdict {', '.join(unknown)}; choose from {', '.join(names)} (or none)",
                ctx,
                param,
            )
        return frozenset(picked)

    more = f"; and `{also[0]}`, {also[1]}." if also else "."
    return click.option(
        "--fail-on",
        metavar="VERDICT,...",
        default=default,
        show_default=True,
        callback=chosen,
        help="Exit 1 when a session gets one of these verdicts (`none`: never). Verdicts: "
        + ", ".join(verdicts)
        + more,
    )


def running_within_option(what: str) -> Callable[[F], F]:
    """--running-within DURATION (default 10m): ``what`` is a session whose last event is this
    recent; the command receives a timedelta."""
    return click.option(
        "--running-within",
        default="10m",
        callback=parse_duration,
        show_default=True,
        metavar="DURATION",
        help=f"{what} (90s, 10m, 1h; a bare number is seconds; 0: never).",
    )


def nudge_cap_option(note: str = "its default is 5") -> Callable[[F], F]:
    """--nudge-cap N (default 5, the CLI's own): the nudges per task after which the CLI stops."""
    return click.option(
        "--nudge-cap",
        type=click.IntRange(min=1),
        default=5,
        show_default=True,
        help=f"Nudges per task after which the CLI stops ({note}).",
    )
