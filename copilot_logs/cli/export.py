"""``copilot-logs export OUT``: the sessions as Parquet datasets, rewritten where logs changed."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from copilot_logs.cli import Command
from copilot_logs.cli.options import Loaded, Picked, exit_code, load, selection_options
from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    from copilot_logs.commands.export import Summary, Written
    from copilot_logs.ingest.logfile import Source


@click.command(cls=Command)
@click.argument("out", type=click.Path(path_type=Path), metavar="OUT")
@selection_options
@click.pass_context
def export(ctx: click.Context, out: Path, picked: Picked) -> None:
    """Write the sessions as Parquet datasets under OUT, for DuckDB, polars or pandas.

    Six tables, each a folder partitioned by the sessions' start day (hive style,
    OUT/TABLE/date=YYYY-MM-DD/*.parquet): events, turns (main-agent turns and sub-agent calls),
    tools, sessions, findings (validate's, every rule) and usage. Exporting again into OUT
    reads only the logs that changed, and removes those no longer selected; OUT must be new,
    empty, or an earlier export.

    Each table's columns are in its Parquet files' schema (DuckDB: DESCRIBE SELECT * FROM
    'OUT/sessions/*/*.parquet'); docs/export.md of the copilot-logs source explains each.

    \b
    Examples:
      copilot-logs export ./copilot-parquet
      copilot-logs export ./copilot-parquet --since 2026-08-01
      copilot-logs export ./copilot-parquet ./recordings/*.jsonl
    """
    loaded = load(picked, whole_logs=True)
    if loaded is None:
        return
    summary, todo = export_into(out, loaded.sources)
    logs = summary.written + summary.unchanged
    output.echo(
        f"Exported {plural(logs, 'log')} to {out}: {summary.written} written, "
        f"{summary.unchanged} unchanged, {summary.removed} removed.",
        err=True,
    )
    ctx.exit(exit_code(todo))


def export_into(
    out: Path, sources: list[Source], *, keep_others: bool = False
) -> tuple[Summary, Loaded]:
    """Export ``sources`` into ``out`` (after another export there, if one is under way): what
    was done, and the logs read (those that changed)."""
    from copilot_logs.commands import export as core

    def written(todo: Loaded, plan: core.Plan) -> Iterator[Written]:
        # read inside finish(), which removes this run's temporary files when writing one fails
        yield from todo.map(core.batch_writer(plan), remember=False)

    waiting = f"Waiting for another export into {one_line(str(out))}."
    with core.exporting(out, on_wait=partial(output.echo, waiting, err=True)):
        plan = core.prepare(out, sources, keep_others=keep_others)
        todo = Loaded(plan.changed)
        return core.finish(plan, written(todo, plan)), todo
