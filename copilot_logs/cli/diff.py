"""``copilot-logs diff BASE CANDIDATE``: did a change make the agent worse? A gate over two
sets of runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from copilot_logs.cli import Command, complete_sessions
from copilot_logs.cli.options import Loaded, Picked, format_option, load, reading_flags, root_option
from copilot_logs.errors import ExitCode
from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    import polars as pl

    from copilot_logs.config import DiffSettings

KEYS = ("prompt", "name", "session", "none")
UNITS = ("session", "task")
FORMATS = ("table", "json", "markdown", "github", "junit", "sarif")


@click.command(cls=Command)
@click.argument("sides", nargs=-1, metavar="BASE CANDIDATE", shell_complete=complete_sessions)
@format_option(*FORMATS)
@root_option("Folder of sessions that ids, prefixes and the periods are looked up in")
@click.option("--base-since", metavar="WHEN", help="Base: sessions started at or after WHEN.")
@click.option("--base-until", metavar="WHEN", help="Base: sessions started before WHEN.")
@click.option(
    "--candidate-since", metavar="WHEN", help="Candidate: sessions started at or after WHEN."
)
@click.option("--candidate-until", metavar="WHEN", help="Candidate: sessions started before WHEN.")
@click.option(
    "--key",
    type=click.Choice(KEYS),
    help="Pair runs by their first typed prompt, session name, session, or none (one "
    "pool) [default: `key` from pyproject.toml, else prompt].",
)
@click.option(
    "--unit",
    type=click.Choice(UNITS),
    help="A run is a session, or each task (as usage --by task cuts them) [default: session].",
)
@click.option(
    "--fail-if",
    multiple=True,
    metavar="THRESHOLD",
    help="Fail when a statistic moves past these amounts: 'ai_credits.median > +25% and "
    "+1.0'; repeatable. Replaces `fail-if` from pyproject.toml and the defaults.",
)
@click.option(
    "--min-runs",
    type=click.IntRange(min=1),
    help="Known values each side needs before a row may fail; fewer: insufficient [default: 3].",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True),
    metavar="P",
    help="Fail only where the p-value is also below P (exact tests; at 3 runs a side "
    "the smallest p is 0.10).",
)
@click.option(
    "--fail-on-missing/--no-fail-on-missing",
    default=None,
    help="A case on one side only (new or gone) fails the gate [default: no].",
)
@click.option("--allow-empty", is_flag=True, help="A side with no session is not a failure.")
@click.option(
    "--save-baseline",
    "save_to",
    type=click.Path(path_type=Path, dir_okay=False, writable=False),
    metavar="FILE",
    help="Write every run of the one side given (or the --base period) to FILE, "
    "to diff against later.",
)
@reading_flags
@click.pass_context
def diff(
    ctx: click.Context,
    sides: tuple[str, ...],
    fmt: str,
    root: Path | None,
    base_since: str | None,
    base_until: str | None,
    candidate_since: str | None,
    candidate_until: str | None,
    key: str | None,
    unit: str | None,
    fail_if: tuple[str, ...],
    min_runs: int | None,
    alpha: float | None,
    fail_on_missing: bool | None,
    allow_empty: bool,
    save_to: Path | None,
) -> None:
    """Compare two sets of runs and fail when the candidate got worse: a CI gate.

    Each side is a folder of sessions, a session (id, prefix or path), or a baseline saved
    with --save-baseline; or the two sides are periods of one root (--base-since/--base-until,
    --candidate-since/--candidate-until). Runs are paired by their first typed prompt (--key)
    and compared metric by metric: n, median, P90, mean, the change of the medians, an exact
    p-value. A row fails when a threshold fires and both sides have at least --min-runs known
    values; with fewer it is `insufficient` and cannot fail. Settings may be pinned in
    `[tool.copilot-logs.diff]` of the nearest pyproject.toml. Exits 0 when the gate passes, 1
    when a row fails or a side has no session (unless --allow-empty), 2 on usage errors, 3
    when a file gave no event.

    \b
    Examples:
      copilot-logs diff runs/main runs/pr
      copilot-logs diff --save-baseline main.json runs/main
      copilot-logs diff main.json runs/pr --format markdown
      copilot-logs diff runs/main runs/pr --key none --fail-if 'llm_calls.median > +10% and +1'
      copilot-logs diff --base-until 2026-08-01 --candidate-since 2026-08-01
    """
    from copilot_logs import config

    settings = config.load_diff_settings()
    gate = _gate(settings, key, fail_if, min_runs, alpha, fail_on_missing)
    unit = unit or settings.unit or "session"
    base_picked, candidate_picked = _sides(
        sides, root, (base_since, base_until), (candidate_since, candidate_until), save_to
    )
    loads: list[Loaded] = []
    base = _read(base_picked, unit, loads)
    if save_to is not None:
        from copilot_logs.commands.diff import baseline
        from copilot_logs.render.ci import tool_version

        named = " ".join(base_picked.selectors) if isinstance(base_picked, Picked) else ""
        baseline.save(save_to, base, unit=unit, side=named, version=tool_version())
        output.echo(f"Wrote {one_line(str(save_to))}: {plural(base.height, unit)}.", err=True)
        ctx.exit(_code(loads, base.is_empty() and not allow_empty))
    assert candidate_picked is not None
    candidate = _read(candidate_picked, unit, loads)
    from copilot_logs.commands.diff import compare
    from copilot_logs.render import diff as render

    result = compare(base, candidate, gate, unit=unit)
    if fmt == "table":
        render.write_table(result)
    elif fmt in render.MACHINE_FORMATS:
        output.write_exact(render.render(result, fmt))
    elif fmt == "junit":
        output.write_exact(render.render(result, fmt), escape="xml")
    else:
        output.echo(render.render(result, fmt), nl=False, workflow_commands=fmt == "github")
    if fmt == "github":
        output.echo(render.one_line_summary(result), err=True)
    empty = not base.height or not candidate.height
    if empty and not allow_empty:
        output.echo("A side has no session: the gate fails (--allow-empty to pass).", err=True)
    ctx.exit(_code(loads, result.failed or (empty and not allow_empty)))


def _gate(
    settings: DiffSettings,
    key: str | None,
    fail_if: tuple[str, ...],
    min_runs: int | None,
    alpha: float | None,
    fail_on_missing: bool | None,
) -> Any:
    from copilot_logs.commands.diff import DEFAULT_MIN_RUNS, Gate
    from copilot_logs.commands.diff.metrics import (
        DEFAULT_THRESHOLDS,
        ThresholdError,
        parse_thresholds,
    )

    texts = fail_if or settings.fail_if or DEFAULT_THRESHOLDS
    try:
        thresholds = parse_thresholds(texts)
    except ThresholdError as error:
        raise click.BadParameter(str(error), param_hint="'--fail-if'") from None
    return Gate(
        thresholds=thresholds,
        min_runs=min_runs or settings.min_runs or DEFAULT_MIN_RUNS,
        alpha=alpha if alpha is not None else settings.alpha,
        key=key or settings.key or "prompt",
        fail_on_missing=(
            fail_on_missing if fail_on_missing is not None else bool(settings.fail_on_missing)
        ),
    )


Side = Picked | Path


def _sides(
    sides: tuple[str, ...],
    root: Path | None,
    base_period: tuple[str | None, str | None],
    candidate_period: tuple[str | None, str | None],
    save_to: Path | None,
) -> tuple[Side, Side | None]:
    """What each side is: sessions chosen as the shared options choose them, or a saved
    baseline's path."""
    from copilot_logs.commands.diff.baseline import is_baseline

    periods = any(base_period) or any(candidate_period)
    wanted = 1 if save_to is not None else 2
    if periods:
        if sides:
            raise click.UsageError(
                "give BASE and CANDIDATE, or the periods (--base-since ...), not both"
            )
        if save_to is not None and any(candidate_period):
            raise click.UsageError("--save-baseline writes the --base-since/--base-until period")
        base: Side = Picked(root=root, since=base_period[0], until=base_period[1])
        if save_to is not None:
            return base, None
        return base, Picked(root=root, since=candidate_period[0], until=candidate_period[1])
    if len(sides) != wanted:
        what = "one SIDE to save" if save_to is not None else "BASE and CANDIDATE"
        raise click.UsageError(f"give {what} ({len(sides)} given), or the periods of one root")
    chosen = [
        Path(side) if is_baseline(side) else Picked(selectors=(side,), root=root) for side in sides
    ]
    if save_to is not None and isinstance(chosen[0], Path):
        raise click.UsageError(f"{one_line(sides[0])} is a baseline already: give sessions to save")
    return chosen[0], (chosen[1] if len(chosen) > 1 else None)


def _read(side: Side, unit: str, loads: list[Loaded]) -> pl.DataFrame:
    """The runs of one side: read batch by batch through the store, or from a baseline."""
    from copilot_logs.commands.diff import baseline
    from copilot_logs.commands.diff import runs as core
    from copilot_logs.ingest.discover import workspace_name

    if isinstance(side, Path):
        return baseline.load(side, unit=unit)
    loaded = load(side)
    if loaded is None:
        return core.runs([], unit=unit)
    loads.append(loaded)
    return core.runs(loaded.map(core.part_for(unit)), unit=unit, names=workspace_name)


def _code(loads: list[Loaded], failed: bool) -> ExitCode:
    if any(loaded.empty_files() for loaded in loads):
        return ExitCode.UNREADABLE
    return ExitCode.FAILED if failed else ExitCode.OK
