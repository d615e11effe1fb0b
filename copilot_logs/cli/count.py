"""``copilot-logs count``: LLM calls counted exactly, per session or regrouped, or one total."""

from __future__ import annotations

from functools import partial

import click

from copilot_logs.cli import options
from copilot_logs.errors import ExitCode
from copilot_logs.render import output


@options.reading_command("table", "json", "ndjson", "csv")
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
    help="Regroup the figures.",
)
@click.option("--tz", metavar="ZONE", help="IANA time zone for --by day [default: local].")
def count(
    ctx: click.Context,
    picked: options.Picked,
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
    if total and options.given("engine") == "spark":
        raise click.UsageError("--total reads with the local engine: drop --engine spark")
    if tz is not None or not total:  # a total has no days, but a wrong zone is still a mistake
        zone = options.resolve_zone(tz)
    if total:
        calls, code = _total(picked, include_subagents)
        output.echo(str(calls))
        ctx.exit(code)
    loaded = options.load(picked)
    from copilot_logs.commands import count as core
    from copilot_logs.render.tables import write_counts

    if loaded is None and fmt in options.HUMAN_FORMATS:
        return
    write_counts(
        core.combine(options.read_each(loaded, partial(core.count, by=by, zone=zone))), fmt
    )
    ctx.exit(options.exit_code(loaded))


def _total(picked: options.Picked, include_subagents: bool) -> tuple[int, ExitCode]:
    """From the store's headers, or read by the reader every command uses, without frames
    (polars is never imported); damage goes to stderr as with every command. By the full
    reader when --since/--until apply to standard input (a stream's sessions start only once
    read) or a session was selected inside a log named otherwise (told apart in its frames)."""
    if not ("-" in picked.selectors and (picked.since or picked.until)):
        sources = options.find(picked)
        if all(s.session_hint.startswith(s.only) for s in sources if s.only):
            from copilot_logs.commands.count_total import count_sources
            from copilot_logs.ingest.logfile import Growth
            from copilot_logs.render.formats import print_damage, report_growth

            growth = Growth(sources)
            totals = count_sources(sources, use_cache=options.use_cache())
            # in every other command's order
            print_damage(sorted(totals.damage, key=lambda row: row[:4]), quiet=options.quiet())
            report_growth([source.name for source in growth.grown()])
            calls = totals.llm_calls + (totals.subagent_calls if include_subagents else 0)
            return calls, ExitCode.UNREADABLE if totals.unreadable else ExitCode.OK
    loaded = options.load(picked)
    if loaded is None:
        return 0, ExitCode.OK
    from copilot_logs.commands import count as core

    sums = core.totals(core.combine(loaded.map(core.count)))
    calls = sums["llm_calls"] + (sums["subagent_calls"] if include_subagents else 0)
    return calls, options.exit_code(loaded)
