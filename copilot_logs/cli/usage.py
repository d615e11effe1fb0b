from __future__ import annotations

import click

from copilot_logs.cli import Command
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


@click.command(cls=Command)
@selection_options
@engine_options
@click.option(
    "--by",
    type=click.Choice(["session", "day", "week", "month", "model", "repository"]),
    default="session",
    show_default=True,
    help="One row per session, or per day / ISO week / month of the sessions' start, per "
    "model, per repository.",
)
@click.option(
    "--tz",
    metavar="ZONE",
    help="IANA time zone for days, weeks, months and bare --since/--until dates [default: local].",
)
@click.option(
    "--breakdown",
    is_flag=True,
    help="Per-model rows under each row (table, markdown, csv; json always carries `models`).",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="On stderr, per session: the shutdown's "
    "request count against the turns and sub-agent calls counted from the events.",
)
@format_option("table", "json", "ndjson", "csv", "markdown")
@click.pass_context
def usage(
    ctx: click.Context,
    picked: Picked,
    by: str,
    tz: str | None,
    breakdown: bool,
    verbose: bool,
    fmt: str,
) -> None:
    """What the sessions used and cost, from their session.shutdown events.

    Premium requests (fractional), AI credits (totalNanoAiu / 1e9), requests and tokens per
    model, API time and code changes. input_tokens already includes the cache read and write
    tokens. A resumed session is counted once: its later shutdowns are taken as cumulative
    (the last one) or per segment (summed), as `accounting` says. A session with no shutdown
    (crashed, running, or before CLI 0.0.422) keeps the output tokens of its messages; every
    other figure is unknown: "?" in the table, null in JSON, never 0. The compaction call is
    in the credits but not in the per-model figures: it is reported apart (compactions,
    compaction_input_tokens, compaction_output_tokens). A session is counted whole in the
    day, week or month it started: per-call usage is not on disk.

    \b
    Examples:
      copilot-logs usage
      copilot-logs usage --by day --tz Europe/Berlin --since 2026-08-01
      copilot-logs usage --by month --breakdown
      copilot-logs usage --by model --format json
      copilot-logs usage --verbose 3fa
    """
    from copilot_logs.timezones import resolve_zone

    zone = resolve_zone(tz)
    loaded = load(picked, zone=zone)
    from copilot_logs.commands.usage import report as usage_report
    from copilot_logs.commands.usage import session_usage
    from copilot_logs.render.usage import write_reconciliation, write_report

    if loaded is None and fmt in HUMAN_FORMATS:
        return
    report = usage_report(read_each(loaded, session_usage), by=by, zone=zone)
    if verbose:
        write_reconciliation(report.sessions)
    write_report(report, fmt, breakdown=breakdown)
    ctx.exit(exit_code(loaded))
