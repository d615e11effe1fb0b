"""Options every command shares, and the one way commands load sessions."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from copilot_logs.errors import ExitCode

if TYPE_CHECKING:
    from copilot_logs.envelope import Source
    from copilot_logs.reader import ReadResult

F = TypeVar("F", bound=Callable[..., Any])

MAX_DAMAGE_LINES = 20


NO_CACHE = "copilot_logs.no_cache"


def _remember_no_cache(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ctx.meta[NO_CACHE] = value


def use_cache() -> bool:
    """False when the running command was given --no-cache."""
    ctx = click.get_current_context(silent=True)
    return not (ctx is not None and ctx.meta.get(NO_CACHE))


def selection_options(function: F) -> F:
    """SELECTORS plus --root, --since, --until, --latest, read the same way by every command."""
    decorators = [
        click.argument("selectors", nargs=-1, metavar="[SESSION|PREFIX|PATH|-]..."),
        click.option(
            "--root",
            type=click.Path(path_type=Path, file_okay=False),
            help="Folder of sessions [default: $COPILOT_HOME/session-state or "
            "~/.copilot/session-state].",
        ),
        click.option(
            "--since", metavar="WHEN", help="Sessions started at or after WHEN (date or ISO time)."
        ),
        click.option(
            "--until",
            metavar="WHEN",
            help="Sessions started before WHEN (a date includes that day).",
        ),
        click.option(
            "--latest", type=click.IntRange(min=1), metavar="N", help="Only the N newest sessions."
        ),
        click.option(
            "--no-cache",
            is_flag=True,
            expose_value=False,
            callback=_remember_no_cache,
            help="Read every file again instead of using the cache under ~/.cache/copilot-logs.",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def format_option(*choices: str, default: str = "table") -> Callable[[F], F]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )


def find(
    selectors: tuple[str, ...],
    root: Path | None,
    since: str | None,
    until: str | None,
    latest: int | None,
    *,
    zone: str | None = None,
) -> list[Source]:
    """The selected session logs, newest first; says so on stderr when there is none.

    ``zone`` (an IANA name) is where a bare --since/--until date starts and ends (local time
    when None).
    """
    from zoneinfo import ZoneInfo

    from copilot_logs.discover import Selection, find_sources, parse_when

    day_zone = ZoneInfo(zone) if zone else None
    selection = Selection(
        selectors=selectors,
        root=root,
        since=parse_when(since, zone=day_zone) if since else None,
        until=parse_when(until, end_of_day=True, zone=day_zone) if until else None,
        latest=latest,
    )
    sources = find_sources(selection)
    if not sources:
        where = ", ".join(selectors) if selectors else str(selection.resolved_root)
        click.echo(f"No sessions found in {where}.", err=True)
    return sources


def load(
    selectors: tuple[str, ...],
    root: Path | None,
    since: str | None,
    until: str | None,
    latest: int | None,
    *,
    report: bool = True,
    zone: str | None = None,
) -> ReadResult | None:
    """Find and read the selected sessions, reporting damage on stderr (unless ``report`` is
    false: validate reports it as findings).

    Returns None (after saying so on stderr) when there is no session to read.
    """
    sources = find(selectors, root, since, until, latest, zone=zone)
    if not sources:
        return None
    return read(sources, report=report)


def read(sources: list[Source], *, report: bool = True) -> ReadResult:
    """Read sources through the events cache (unless --no-cache), with a progress bar on a
    terminal when there is a lot to read."""
    from copilot_logs.corpus import read_all

    total_bytes = sum(_size(s) for s in sources)
    if not sys.stderr.isatty() or total_bytes < 64 << 20:
        result = read_all(sources, use_cache=use_cache())
    else:
        from rich.progress import Progress

        with Progress(transient=True, console=_stderr_console()) as progress:
            task = progress.add_task("Reading sessions", total=len(sources))
            result = read_all(
                sources, use_cache=use_cache(), on_read=lambda _source: progress.advance(task)
            )
    if report:
        report_damage(result)
    return result


def _size(source: Source) -> int:
    try:
        return source.path.stat().st_size if source.path is not None else 0
    except OSError:
        return 0


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def report_damage(result: ReadResult) -> None:
    """Each damaged line on stderr as FILE:LINE: kind: message, a few per file."""
    rows = result.diagnostics.sort("file", "line").select("file", "line", "kind", "message")
    print_damage(rows.iter_rows())


def print_damage(rows: Iterable[tuple[str, int, str, str]]) -> None:
    """(file, line, kind, message) rows, in order, on stderr; at most MAX_DAMAGE_LINES a file."""
    shown: dict[str, int] = {}
    for file, line, kind, message in rows:
        shown[file] = shown.get(file, 0) + 1
        if shown[file] <= MAX_DAMAGE_LINES:
            click.echo(f"warning: {file}:{line}: {kind}: {message}", err=True)
    for file, count in shown.items():
        if count > MAX_DAMAGE_LINES:
            click.echo(
                f"warning: {file}: {count - MAX_DAMAGE_LINES} more damaged lines; "
                f"run `copilot-logs validate {file}` to list them all",
                err=True,
            )


def exit_code(result: ReadResult) -> ExitCode:
    """UNREADABLE when some selected file gave nothing at all, else OK."""
    unreadable = set(result.diagnostics.filter(kind="unreadable")["file"].to_list())
    readable = set(result.events["file"].unique().to_list())
    empty = set(result.diagnostics["file"].unique().to_list()) - readable
    return ExitCode.UNREADABLE if unreadable or empty else ExitCode.OK
