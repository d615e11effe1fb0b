"""``copilot-logs report``: one self-contained HTML page of the sessions, to open in a browser."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import NoReturn

import click

from copilot_logs.cli.options import Picked, exit_code, load, reading_command, resolve_zone
from copilot_logs.errors import FULL, CopilotLogsError, WriteError
from copilot_logs.render import output
from copilot_logs.render.humanize import plural


@reading_command(engine=False)
@click.option(
    "-o",
    "--output",
    "path",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    default="copilot-logs-report.html",
    help="Where to write the page (`-`: standard output).",
)
@click.option(
    "--timelines",
    type=click.IntRange(min=0),
    default=20,
    metavar="N",
    help="Draw the timelines of the N newest sessions; every session is in the tables.",
)
@click.option("--tz", metavar="ZONE", help="IANA time zone for days and times [default: local].")
def report(ctx: click.Context, picked: Picked, path: Path, timelines: int, tz: str | None) -> None:
    """Write one self-contained HTML page to open in a browser or attach to a CI run.

    It holds the sessions table (sortable), LLM calls per day, the autopilot audit verdicts,
    validate findings by rule, usage per model, and a timeline picture of each of the newest
    sessions (hover or focus a mark for its details). The page needs no network and runs no
    text from a log: it carries its own Content-Security-Policy.

    \b
    Examples:
      copilot-logs report
      copilot-logs report --since 2026-08-01 -o week.html
      copilot-logs report ./recordings --timelines 50 --tz Europe/Berlin
      copilot-logs report --latest 1 -o - > last.html
    """
    zone = resolve_zone(tz)
    to_file = str(path) != "-"
    if to_file and not path.parent.is_dir():  # said before reading, not after
        _cannot_write(path, "no such folder")
    loaded = load(picked, zone=zone)
    if loaded is None:
        return
    from copilot_logs import config
    from copilot_logs.commands import report as core
    from copilot_logs.modes import mode_of
    from copilot_logs.render import html

    settings = config.load_settings()
    drawn = core.drawn_files(loaded.sources, timelines)
    part = partial(
        core.part, zone=zone, drawn=drawn, select=settings.select, ignore=settings.ignore
    )
    data = core.assemble(
        loaded.map(part),
        zone=zone,
        now=datetime.now(UTC),
        timelines=timelines,
        select=settings.select,
        ignore=settings.ignore,
        files={source.name: source.path for source in loaded.sources if source.path is not None},
    )
    page = html.page(data)
    if not to_file:
        output.write_exact(page, escape="xml")
    else:
        try:
            size = html.save(page, path, mode_of(source.path for source in loaded.sources))
        except OSError as error:
            _cannot_write(path, error)
        output.echo(
            f"Wrote {path} ({size / 1024:,.0f} KB): "
            f"{plural(len(data.sessions), 'session')}, {plural(len(data.timelines), 'timeline')}.",
            err=True,
        )
    ctx.exit(exit_code(loaded))


def _cannot_write(path: Path, error: OSError | str) -> NoReturn:
    """One line: why the page cannot be written; exit 3 for a full disk or an I/O error (the
    same -o may work later), else 2."""
    reason = error if isinstance(error, str) else error.strerror or str(error)
    full = isinstance(error, OSError) and error.errno in FULL
    raise (WriteError if full else CopilotLogsError)(
        f"-o {path}: cannot write the report there ({reason}); "
        + (
            "free some space and run it again"
            if full
            else "name a file in an existing, writable folder, or - for stdout"
        )
    )
