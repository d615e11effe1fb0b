"""``copilot-logs sessions``: one row per session, newest first, with its calls and status."""

from __future__ import annotations

import click

from copilot_logs.cli import options


@options.reading_command("table", "json", "ndjson", "csv")
def sessions(ctx: click.Context, picked: options.Picked, fmt: str) -> None:
    """List sessions, newest first, with their calls, tools, nudges and status.

    \b
    Examples:
      copilot-logs sessions
      copilot-logs sessions --since 2026-08-01 --format json
      copilot-logs sessions ./recordings/*.jsonl
    """
    loaded = options.load(picked)
    from copilot_logs.commands.sessions import newest_first, summarize
    from copilot_logs.render.tables import write_sessions

    if loaded is None and fmt in options.HUMAN_FORMATS:
        return
    write_sessions(newest_first(options.read_each(loaded, summarize)), fmt)
    ctx.exit(options.exit_code(loaded))
