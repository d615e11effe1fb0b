"""``copilot-logs disk``: where the bytes of the session folders went, read-only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from copilot_logs.cli import Command
from copilot_logs.cli.options import Loaded, folder_options, format_option, heavy_option, parse_size
from copilot_logs.errors import ExitCode
from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    from copilot_logs.commands.disk import Survey


def surveyed(
    chosen: list[tuple[Path, set[str] | None]],
) -> tuple[Survey, dict[str, dict[str, int]]]:
    """The session folders chosen, walked, and their logs read through the store: the survey
    and each log's figures (said on stderr: a root holding no session folder)."""
    from copilot_logs.commands import disk as core

    found = core.survey(chosen)
    sources = found.logs()
    parts = Loaded(sources, report=False).map(core.log_figures) if sources else []
    for place in found.roots:
        if not place.sessions_seen:
            output.echo(f"No session folders found in {one_line(str(place.path))}.", err=True)
    return found, core.figures_by_file(parts)


@click.command(cls=Command)
@folder_options
@click.option(
    "--sort",
    type=click.Choice(["size", "age"]),
    default="size",
    help="Largest first, or the longest quiet first.",
)
@click.option(
    "--min-size",
    metavar="SIZE",
    callback=parse_size,
    help="Only sessions taking at least SIZE on disk (500M, 1.5G, 10MB; K/M/G are 1024s).",
)
@click.option(
    "--by",
    type=click.Choice(["session", "category"]),
    default="session",
    help="One row per session folder, or per category.",
)
@heavy_option
@format_option("table", "json", "ndjson", "csv")
@click.pass_context
def disk(
    ctx: click.Context,
    selectors: tuple[str, ...],
    root: Path | None,
    sort: str,
    min_size: int | None,
    by: str,
    heavy: int,
    fmt: str,
) -> None:
    """Show where the bytes of the session folders went, and what each folder is.

    Per session: apparent and allocated bytes (as du -sb and du -sB1 count them, hard links
    once) split into the log, files/, checkpoints/, rewind snapshots and the rest; its files,
    last activity, name, cwd and host (from workspace.yaml), prompts and LLM calls; its lock,
    and a category: active, stale-lock, scaffold, log-missing, empty, abandoned, heavy-files,
    ok. Nothing is changed: `copilot-logs prune` removes what you choose.

    \b
    The categories: docs/disk.md of the copilot-logs source.

    \b
    Examples:
      copilot-logs disk
      copilot-logs disk --by category
      copilot-logs disk --min-size 1G --format json
    """
    from copilot_logs.commands import disk as core
    from copilot_logs.render.tables import write_disk

    found, figures = surveyed(core.choose(selectors, root))
    rows = core.rows(found, figures, heavy)
    partial = sum(1 for row in rows if row["partial"])
    if partial:
        output.echo(
            f"warning: {plural(partial, 'session folder')} could not be read whole: their "
            "sizes are partial (see the note column, or `partial` in --format json)",
            err=True,
        )
    frame = core.arranged(core.table(rows), sort=sort, min_size=min_size)
    shown = core.by_category(frame) if by == "category" else frame
    write_disk(shown, core.beside(found), fmt, by=by)
    ctx.exit(ExitCode.UNREADABLE if partial else ExitCode.OK)
