from __future__ import annotations

import click

from copilot_logs.cli.options import (
    HUMAN_FORMATS,
    Picked,
    engine_options,
    exit_code,
    format_option,
    load,
    read_each,
    selection_options,
)
from copilot_logs.render.formats import Column, human_duration, local_time, short_id, yes_no


@click.command()
@selection_options
@engine_options
@format_option("table", "json", "ndjson", "csv")
@click.pass_context
def sessions(
    ctx: click.Context,
    picked: Picked,
    fmt: str,
) -> None:
    """List sessions, newest first, with their calls, tools, nudges and status.

    \b
    Examples:
      copilot-logs sessions
      copilot-logs sessions --since 2026-08-01 --format json
      copilot-logs sessions ./recordings/*.jsonl
    """
    loaded = load(picked)
    from copilot_logs.commands.sessions import newest_first, summarize
    from copilot_logs.render import formats

    if loaded is None and fmt in HUMAN_FORMATS:
        return
    table = newest_first(read_each(loaded, summarize))
    if fmt == "table":
        formats.print_table(table, SESSION_TABLE)
    else:
        formats.write_frame(table, fmt)
    ctx.exit(exit_code(loaded))


SESSION_TABLE = [
    Column("session_id", "session", 1, format=short_id),
    Column("started_at", "started", 1, format=local_time),
    Column("duration_ms", "took", 3, numeric=True, format=human_duration),
    Column("repository", "repository", 4, max_width=28),
    Column("branch", "branch", 7, max_width=20),
    Column("cli_version", "cli", 8),
    Column("model", "model", 5, max_width=20),
    Column("user_prompts", "prompts", 2, numeric=True),
    Column("autopilot_nudges", "nudges", 3, numeric=True),
    Column("llm_calls", "calls", 1, numeric=True),
    Column("tool_calls", "tools", 2, numeric=True),
    Column("subagent_runs", "subagents", 6, numeric=True),
    Column("errors", "errors", 3, numeric=True),
    Column("task_complete", "done", 3, format=yes_no),
    Column("status", "status", 1),
    Column("damaged_lines", "damaged", 2, numeric=True),
]
