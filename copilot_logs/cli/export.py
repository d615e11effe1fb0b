from __future__ import annotations

from pathlib import Path

import click

from copilot_logs.cli.options import Command, Loaded, Picked, exit_code, load, selection_options
from copilot_logs.render import output
from copilot_logs.render.humanize import plural


@click.command(cls=Command)
@click.argument("out", type=click.Path(path_type=Path), metavar="OUT")
@selection_options
@click.pass_context
def export(ctx: click.Context, out: Path, picked: Picked) -> None:
    """Write the sessions as Parquet datasets under OUT, for DuckDB, polars or pandas.

    Six tables, each a folder partitioned by the sessions' start day (hive style,
    OUT/TABLE/date=YYYY-MM-DD/*.parquet): events, turns (main-agent turns and sub-agent calls),
    tools, sessions, findings (validate's, every rule) and usage. docs/export.md gives their
    columns. Exporting again into OUT reads only the logs that changed, and removes those no
    longer selected; OUT must be new, empty, or an earlier export.

    \b
    Examples:
      copilot-logs export ./copilot-parquet
      copilot-logs export ./copilot-parquet --since 2026-08-01
      copilot-logs export ./copilot-parquet ./recordings/*.jsonl
    """
    loaded = load(picked)
    from copilot_logs.commands import export as core

    if loaded is None:
        return
    plan = core.prepare(out, loaded.sources)
    todo = Loaded(plan.changed)
    summary = core.finish(plan, todo.map(core.batch_writer(plan), remember=False))
    logs = summary.written + summary.unchanged
    output.echo(
        f"Exported {plural(logs, 'log')} to {out}: {summary.written} written, "
        f"{summary.unchanged} unchanged, {summary.removed} removed.",
        err=True,
    )
    ctx.exit(exit_code(todo))
