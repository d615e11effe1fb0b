"""``copilot-logs usage``: what sessions used and cost, per session, period, model or call."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import click

from copilot_logs.cli import options
from copilot_logs.errors import CopilotLogsError

if TYPE_CHECKING:
    import polars as pl

GROUPINGS = (
    *("session", "day", "week", "month", "model", "repository", "repo"),
    *("call", "prompt", "agent", "task"),
)


@options.reading_command("table", "json", "ndjson", "csv", "markdown")
@click.option(
    "--by",
    type=click.Choice(GROUPINGS),
    default="session",
    help="One row per session, or per day / ISO week / month of the sessions' start, per "
    "model, per repository (repo); or inside sessions: per LLM call, per prompt (with its "
    "nudges and sub-agents), per agent (main and each sub-agent), per task (a prompt to the "
    "task_complete that ends it).",
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
    "--sort",
    metavar="FIELD",
    help="Rows by FIELD (a field of --format json's rows), biggest first; FIELD:asc for "
    "smallest first. The totals stay those of every row.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    metavar="N",
    help="Only the first N rows (after --sort). The totals stay those of every row.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="On stderr, per session: the shutdown's "
    "request count against the turns and sub-agent calls counted from the events.",
)
def usage(
    ctx: click.Context,
    picked: options.Picked,
    by: str,
    tz: str | None,
    breakdown: bool,
    sort: str | None,
    top: int | None,
    verbose: bool,
    fmt: str,
) -> None:
    """What the sessions used and cost, from their session.shutdown events.

    AI credits (totalNanoAiu / 1e9), premium requests (legacy), requests and tokens per
    model, API time and code changes. input_tokens already includes the cache read and write
    tokens. A resumed session is counted once: its later shutdowns are taken as cumulative
    (the last one) or per segment (summed), as `accounting` says. A session with no shutdown
    (crashed, running, or before CLI 0.0.422) keeps the output tokens of its messages; every
    other figure is unknown: "?" in the table, null in JSON, never 0. The compaction call is
    in the credits but not in the per-model figures: it is reported apart (compactions,
    compaction_input_tokens, compaction_output_tokens). A session is counted whole in the
    day, week or month it started (the shutdowns are per session).

    \b
    Per call, prompt, agent or task (--by call|prompt|agent|task): credits, tokens, LLM calls,
    model time and time to first token, `exact` where the CLI recorded each call
    (session.usage_record, 1.0.102 on), `from totals` where the log gives the figures of exactly
    that group (agentMetrics; a session's only prompt), else only the output tokens of the
    messages (`messages`). Credits the log says were not reported show as `unavailable`.

    \b
    Examples:
      copilot-logs usage
      copilot-logs usage --by prompt --latest 1
      copilot-logs usage --by agent --format json
      copilot-logs usage --by day --tz Europe/Berlin --since 2026-08-01
      copilot-logs usage --by month --breakdown
      copilot-logs usage --by model --format json
      copilot-logs usage --verbose 3fa
    """
    zone = options.resolve_zone(tz)
    loaded = options.load(picked, zone=zone)
    by = "repository" if by == "repo" else by
    from copilot_logs.commands import usage as core
    from copilot_logs.commands.usage import breakdown as per_call
    from copilot_logs.render import usage as render

    if loaded is None and fmt in options.HUMAN_FORMATS:
        return
    if by in per_call.CALL_GROUPINGS:
        calls = per_call.call_report(
            options.read_each(loaded, partial(per_call.breakdown, by=by)), by
        )
        render.write_call_report(replace(calls, rows=_ordered(calls.rows, sort, top)), fmt)
        ctx.exit(options.exit_code(loaded))
    report = core.report(options.read_each(loaded, core.session_usage), by=by, zone=zone)
    report = replace(report, rows=_ordered(report.rows, sort, top))
    if verbose:
        render.write_reconciliation(report.sessions)
    render.write_report(report, fmt, breakdown=breakdown)
    ctx.exit(options.exit_code(loaded))


def _ordered(rows: pl.DataFrame, sort: str | None, top: int | None) -> pl.DataFrame:
    from copilot_logs.commands.usage import ordered

    try:
        return ordered(rows, sort, top)
    except CopilotLogsError as error:
        raise click.UsageError(str(error)) from None
