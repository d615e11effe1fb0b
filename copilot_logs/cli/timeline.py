"""``copilot-logs timeline``: each session's agent loop as a tree, as rows per call, or SVG."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import click

from copilot_logs.cli import options
from copilot_logs.render import output


@options.reading_command("table", "json", "ndjson", "csv", "svg", engine=False)
@click.option("--no-tools", is_flag=True, help="Leave out the tool executions (counts stay).")
@click.option(
    "--width",
    type=click.IntRange(min=40, max=output.MAX_WIDTH),
    metavar="N",
    help=f"Lay the terminal view out for N columns, 40 to {output.MAX_WIDTH} [default: the "
    "terminal's width].",
)
def timeline(
    ctx: click.Context, picked: options.Picked, no_tools: bool, width: int | None, fmt: str
) -> None:
    """Show each session's agent loop: interactions, turns, tools and sub-agents, in order.

    Each interaction (a prompt or an autopilot nudge) lists its turns (one per LLM call, with
    its start, duration and a bar proportional to the longest turn), the tools each turn ran
    and how they went, the sub-agents its task calls spawned, and the errors, compactions,
    resumes, mode and model changes and aborts where they happened. With no SESSION, shows
    the newest session. json gives the nested tree; ndjson and csv one row per LLM call;
    svg the picture of one session (the one in `copilot-logs report`) for a pull request.

    \b
    Examples:
      copilot-logs timeline
      copilot-logs timeline 3fa --no-tools
      copilot-logs timeline ./events.jsonl --width 100
      copilot-logs timeline --latest 5 --format csv
      copilot-logs timeline 3fa --format svg > timeline.svg
    """
    if not picked.selectors and picked.latest is None:
        output.echo("No session given: showing the newest one (as with --latest 1).", err=True)
        picked = replace(picked, latest=1)
    loaded = options.load(picked)
    from copilot_logs.commands.timeline import newest_first, turn_rows
    from copilot_logs.commands.timeline import timeline as build
    from copilot_logs.render import formats

    if loaded is None and fmt in (*options.HUMAN_FORMATS, "svg"):
        return
    sessions = newest_first(options.read_each(loaded, partial(build, include_tools=not no_tools)))
    if picked.latest is not None:  # a file may hold several sessions: keep N sessions, not files
        sessions = sessions[: picked.latest]
    if fmt == "table":
        from copilot_logs.render.timeline import print_timeline

        print_timeline(sessions, width=width, show_tools=not no_tools)
    elif fmt == "json":
        formats.write_json(sessions)
    elif fmt == "svg" and len(sessions) > 1:
        raise click.UsageError(
            f"--format svg draws one session and {len(sessions)} were selected: "
            "name one (an id, a prefix or a file) or add --latest 1"
        )
    elif fmt == "svg" and sessions:  # none: what could not be read was said on stderr
        from copilot_logs.render.svg import timeline_svg

        output.write_exact(timeline_svg(sessions[0], standalone=True) + "\n", escape="xml")
    elif fmt != "svg":
        formats.write_frame(turn_rows(sessions), fmt)
    ctx.exit(options.exit_code(loaded))
