"""``copilot-logs export OUT``: the sessions as Parquet datasets, rewritten where logs changed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
    from copilot_logs.commands.export import Written
    from copilot_logs.ingest.reader import ReadResult


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
    from copilot_logs.commands import export as core

    if loaded is None:
        return
    waiting = partial(
        output.echo, f"Waiting for another export into {one_line(str(out))}.", err=True
    )
    with core.exporting(out, on_wait=waiting):
        plan = core.prepare(out, loaded.sources)
        todo = Loaded(plan.changed)
        summary = core.finish(plan, _written(todo, core.batch_writer(plan)))
    logs = summary.written + summary.unchanged
    output.echo(
        f"Exported {plural(logs, 'log')} to {out}: {summary.written} written, "
        f"{summary.unchanged} unchanged, {summary.removed} removed.",
        err=True,
    )
    ctx.exit(exit_code(todo))


def _written(todo: Loaded, writer: Callable[[ReadResult], Written]) -> Iterator[Written]:
    """The batches written, as :func:`~copilot_logs.commands.export.finish` takes them (it
    removes this run's temporary files when writing one fails)."""
    yield from todo.map(writer, remember=False)
