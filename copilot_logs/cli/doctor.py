"""``copilot-logs doctor``: which sessions the CLI can no longer resume, and repaired copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from copilot_logs.cli import options
from copilot_logs.errors import ExitCode

# Spelled out here so `--help` needs no polars; a test checks them against the core module.
VERDICT_NAMES = ("healthy", "running", "at-risk", "cannot-resume")
DEFAULT_FAIL_ON = "running,at-risk,cannot-resume"


@options.reading_command("table", "json", "ndjson", engine=False)
@options.fail_on_option(VERDICT_NAMES, DEFAULT_FAIL_ON)
@options.running_within_option(
    "A log with no shutdown whose last event is this recent is `running`: being written, not judged"
)
@click.option(
    "--repair",
    is_flag=True,
    help="Write a repaired copy of each selected session under --out (the original is never "
    "touched) and list every change.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --repair: the folder (a session-state folder) the copies go to, as OUT/<id>/.",
)
@click.option(
    "--even-if-running",
    is_flag=True,
    help="With --repair: copy a session doctor calls running too (what it writes after the "
    "copy is in neither file).",
)
def doctor(
    ctx: click.Context,
    picked: options.Picked,
    fail_on: frozenset[str],
    running_within: timedelta,
    repair: bool,
    out: Path | None,
    even_if_running: bool,
    fmt: str,
) -> None:
    """Find the sessions the Copilot CLI can no longer resume, say why, and repair a copy.

    Gives each session a verdict: healthy, running, at-risk or cannot-resume, with reasons that
    name a file and line: the log's size and growth toward the string limit of 536,870,888
    characters, damage the CLI version that wrote it cannot read (judged by real resumes of
    damaged logs), open tool calls, sub-agents out of place, a missing shutdown (usage lost),
    and where the bytes go.

    More in docs/doctor.md of the copilot-logs source (the damage x version table).

    Exit codes: 0 no session got a --fail-on verdict (or --repair wrote copies doctor calls
    resumable); 1 one did (or a copy is still cannot-resume); 2 bad usage (--repair without
    --out or a session, an --out that holds that session already, a running session, an id
    that is not a folder name: nothing is written); 3 a selected file could not be read at
    all, or a copy could not be written.

    \b
    Examples:
      copilot-logs doctor
      copilot-logs doctor --latest 5 --format json
      copilot-logs doctor 3fa --repair --out ./repaired
    """
    if repair:
        _repair(ctx, picked, out, fmt, running_within, even_if_running)
        return
    if out is not None:
        raise click.UsageError("--out goes with --repair")
    if even_if_running:
        raise click.UsageError("--even-if-running goes with --repair")
    loaded = options.load(picked, report=False, whole_logs=True)  # the damage is in the reasons
    from copilot_logs.commands import doctor as core
    from copilot_logs.render.doctor import RENDERERS

    result = core.judge(
        options.read_each(loaded, core.facts),
        files={s.name: s.path for s in loaded.sources if s.path} if loaded else {},
        now=datetime.now(UTC),
        running_within=running_within,
    )
    RENDERERS[fmt](result, fail_on)
    if not core.failing(result.sessions, fail_on).is_empty():
        ctx.exit(int(ExitCode.FAILED))
    ctx.exit(options.exit_code(loaded))


def _repair(
    ctx: click.Context,
    picked: options.Picked,
    out: Path | None,
    fmt: str,
    running_within: timedelta,
    even_if_running: bool,
) -> None:
    if out is None:
        raise click.UsageError("--repair needs --out DIR: the copy never replaces the original")
    if not picked.selectors:
        raise click.UsageError("--repair needs the session(s) to repair: an id, prefix or path")
    from copilot_logs.commands.doctor import repair
    from copilot_logs.render.doctor import write_repairs

    repairs = repair.repair_all(
        options.find(picked),
        out,
        now=datetime.now(UTC),
        running_within=running_within,
        even_if_running=even_if_running,
    )
    write_repairs(repairs, fmt)
    if not all(done.resumable for done in repairs):
        ctx.exit(int(ExitCode.FAILED))
