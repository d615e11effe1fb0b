"""``copilot-logs count``: LLM calls counted exactly, per session or regrouped, or one total."""

from __future__ import annotations

from functools import partial

import click

from copilot_logs.cli.options import (
    HUMAN_FORMATS,
    Picked,
    exit_code,
    find,
    load,
    quiet,
    read_each,
    reading_command,
    spark_engine,
    use_cache,
)
from copilot_logs.errors import ExitCode
from copilot_logs.ingest.logfile import Growth
from copilot_logs.render import output
from copilot_logs.render.formats import print_damage, report_growth


@reading_command("table", "json", "ndjson", "csv")
@click.option(
    "--total", is_flag=True, help="Print one integer, the sum of llm_calls, and nothing else."
)
@click.option(
    "--include-subagents", is_flag=True, help="With --total: add the sub-agents' LLM calls."
)
@click.option(
    "--by",
    type=click.Choice(["session", "interaction", "model", "day", "repository"]),
    default="session",
    show_default=True,
    help="Regroup the figures.",
)
@click.option("--tz", metavar="ZONE", help="IANA time zone for --by day [default: local].")
def count(
    ctx: click.Context,
    picked: Picked,
    total: bool,
    include_subagents: bool,
    by: str,
    tz: str | None,
    fmt: str,
) -> None:
    """Count LLM calls exactly: parsed turn events, never text matches.

    llm_calls counts the main agent's assistant.turn_start events; sub-agent calls are
    reported apart (subagent_calls). Damaged lines are reported on stderr and every
    recoverable event is still counted.

    \b
    Examples:
      copilot-logs count
      copilot-logs count --total 3fa
      copilot-logs count --total --include-subagents ./events.jsonl
      copilot-logs count --by day --tz Europe/Berlin --format csv
    """
    if total and spark_engine():
        raise click.UsageError("--total reads with the local engine: drop --engine spark")
    if tz is not None or not total:  # a total has no days, but a wrong zone is still a mistake
        from copilot_logs.cli.options import resolve_zone

        zone = resolve_zone(tz)
    if total:
        windowed = "-" in picked.selectors and (picked.since or picked.until)
        counter = _windowed_total if windowed else _fast_total
        calls, code = counter(picked, include_subagents)
        output.echo(str(calls))
        ctx.exit(code)
    loaded = load(picked)
    from copilot_logs.commands import count as count_core
    from copilot_logs.render.tables import write_counts

    if loaded is None and fmt in HUMAN_FORMATS:
        return
    table = count_core.combine(read_each(loaded, partial(count_core.count, by=by, zone=zone)))
    write_counts(table, fmt)
    ctx.exit(exit_code(loaded))


def _fast_total(picked: Picked, include_subagents: bool) -> tuple[int, ExitCode]:
    """From the store's headers, or read by the reader every command uses, without frames
    (polars is never imported); damage goes to stderr as with every command."""
    from copilot_logs.commands.count_total import count_sources

    sources = find(picked)
    # A session found inside a log named otherwise: its calls apart from the log's others are
    # in the frames. (A log whose name matched is counted whole, from the store's headers.)
    if any(not s.session_hint.startswith(s.only) for s in sources if s.only):
        return _windowed_total(picked, include_subagents)
    growth = Growth(sources)
    totals = count_sources(sources, use_cache=use_cache())
    # in every other command's order
    print_damage(sorted(totals.damage, key=lambda row: row[:4]), quiet=quiet())
    report_growth([source.name for source in growth.grown()])
    calls = totals.llm_calls + (totals.subagent_calls if include_subagents else 0)
    return calls, ExitCode.UNREADABLE if totals.unreadable else ExitCode.OK


def _windowed_total(picked: Picked, include_subagents: bool) -> tuple[int, ExitCode]:
    """The total when --since/--until must be applied to standard input, or a session was
    selected inside a log that holds several: by the full reader, since a stream's sessions
    start only once they are read, and a log's sessions are told apart in its frames."""
    loaded = load(picked)
    if loaded is None:
        return 0, ExitCode.OK
    from copilot_logs.commands import count as count_core

    sums = count_core.totals(count_core.combine(loaded.map(count_core.count)))
    calls = sums["llm_calls"] + (sums["subagent_calls"] if include_subagents else 0)
    return calls, exit_code(loaded)
