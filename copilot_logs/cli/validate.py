"""``copilot-logs validate``: session logs checked against named rules, a linter and CI gate."""

from __future__ import annotations

from functools import partial

import click

from copilot_logs.cli.options import Picked, load, read_each, reading_command
from copilot_logs.errors import ExitCode
from copilot_logs.render import output


@reading_command("text", "json", "github", "junit", "sarif", default="text")
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Check only these rules: codes, prefixes (E, T2), names or ALL; comma-separated or "
    "repeated. Replaces `select` from pyproject.toml.",
)
@click.option(
    "--ignore",
    multiple=True,
    metavar="CODES",
    help="Skip these rules (same forms as --select); added to `ignore` from pyproject.toml.",
)
@click.option(
    "--strict/--no-strict",
    default=None,
    help="Warnings fail the gate too [default: `strict` from pyproject.toml, else no].",
)
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
def validate(
    ctx: click.Context,
    picked: Picked,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    strict: bool | None,
    statistics: bool,
    fmt: str,
) -> None:
    """Check that session logs are whole and well-formed: a linter and CI gate.

    Every finding names a rule (`copilot-logs rules` lists them) and points at a file, line and
    event id. Settings may be pinned in `[tool.copilot-logs]` of the nearest pyproject.toml
    (select, ignore, strict). Exits 0 when no finding reaches the failing severity (errors; with
    --strict warnings too), 1 when one does, 2 on usage errors, 3 when a file gave no event
    (unreadable, empty, or one copilot-logs failed on).

    \b
    Examples:
      copilot-logs validate
      copilot-logs validate ./events.jsonl --strict
      copilot-logs validate recordings/ --select E,T --ignore E107
      copilot-logs validate recordings/ --format github
      copilot-logs validate recordings/ --format sarif > validate.sarif
      copilot-logs validate --statistics
    """
    from copilot_logs import config
    from copilot_logs.commands import validate as validate_core
    from copilot_logs.render import ci

    if statistics and fmt not in ("text", "json"):
        raise click.UsageError("--statistics works with --format text or json")
    settings = config.load_settings().merged(select=select, ignore=ignore, strict=strict)
    validate_core.resolve(settings.select, settings.ignore)  # unknown codes fail before any reading
    loaded = load(picked, report=False, whole_logs=True)
    check = partial(validate_core.check_batch, select=settings.select, ignore=settings.ignore)
    report = validate_core.combine(
        read_each(loaded, check),
        select=settings.select,
        ignore=settings.ignore,
        strict=settings.strict,
    )
    if fmt == "text":
        output.echo_styled(ci.text_lines(report, statistics=statistics))
    elif fmt in ci.MACHINE_FORMATS:
        output.write_exact(ci.render(report, fmt, statistics=statistics))
    else:
        output.echo(ci.render(report, fmt), nl=False, workflow_commands=fmt == "github")
    if fmt == "github":
        output.echo(ci.summary_line(report), err=True)
    if loaded is not None and loaded.empty_files():
        ctx.exit(ExitCode.UNREADABLE)  # its findings say which file, and why
    ctx.exit(ExitCode.FAILED if report.failed else ExitCode.OK)
