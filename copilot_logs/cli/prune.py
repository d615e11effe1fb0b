"""``copilot-logs prune``: remove the session folders (or their files/, or stale locks) that you
choose, safely: a dry run unless --apply, an export first, everything checked again before it
moves."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from copilot_logs.cli import Command, options
from copilot_logs.cli.disk import surveyed
from copilot_logs.cli.export import export_into
from copilot_logs.errors import ExitCode
from copilot_logs.render import output
from copilot_logs.render.escape import one_line

if TYPE_CHECKING:
    from copilot_logs.commands.prune import Criteria, Plan


@click.command(cls=Command)
@options.folder_options
@click.option(
    "--scaffolds", is_flag=True, help="Folders with no log and nothing but the CLI's scaffold."
)
@click.option("--empty", is_flag=True, help="Folders whose log holds no prompt and no LLM call.")
@click.option("--abandoned", is_flag=True, help="Folders whose log holds prompts but no reply.")
@click.option(
    "--stale-locks",
    is_flag=True,
    help="Unlink inuse.<pid>.lock files no live process of their own holds (the session stays).",
)
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=options.parse_duration,
    help="Folders with nothing written for DURATION (30d, 12h; a bare number is seconds).",
)
@click.option(
    "--larger-than",
    metavar="SIZE",
    callback=options.parse_size,
    help="Folders taking more than SIZE on disk (500M, 2G; K/M/G are 1024s, KB/MB/GB 1000s).",
)
@click.option(
    "--files-larger-than",
    metavar="SIZE",
    callback=options.parse_size,
    help="Only the files/ of folders whose files/ takes more than SIZE (the log stays).",
)
@click.option(
    "--keep-newest",
    type=click.IntRange(min=0),
    default=5,
    metavar="N",
    help="Never the N newest sessions of a root (their stale locks may still go).",
)
@click.option(
    "--quiet-for",
    default="10m",
    metavar="DURATION",
    callback=options.parse_duration,
    help="Never a folder with anything written within DURATION.",
)
@click.option("--apply", is_flag=True, help="Do it (without: a dry run that changes nothing).")
@click.option(
    "--export-to",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Export the sessions to go into DIR first (as `copilot-logs export`, keeping what DIR "
    "holds of others), and move none that the export does not hold whole.",
)
@click.option("--no-export", is_flag=True, help="Apply without exporting first.")
@click.option(
    "--trash/--delete",
    "trash",
    default=True,
    help="Move into <root>/.copilot-logs-trash (undo: move back), or delete for good.",
)
@click.option(
    "--empty-trash", is_flag=True, help="Also remove what earlier runs moved to the trash."
)
@options.heavy_option
@options.format_option("table", "json")
@click.pass_context
def prune(
    ctx: click.Context,
    /,
    selectors: tuple[str, ...],
    root: Path | None,
    apply: bool,
    export_to: Path | None,
    no_export: bool,
    trash: bool,
    empty_trash: bool,
    heavy: int,
    fmt: str,
    **picked: object,
) -> None:
    """Remove session folders you choose, safely: a dry run unless --apply.

    Never removed: a folder in use (an active lock, or one that cannot be judged), anything
    written within --quiet-for, the --keep-newest newest, names that are not sessions, links,
    other users' files, other file systems, a folder not read whole. Just before each move
    everything is checked again; a change skips that folder and says why. --apply needs
    --export-to DIR (the usage history is kept there) or --no-export, and writes a record in
    the trash.

    \b
    The categories and the safety rules: docs/disk.md of the copilot-logs source.

    \b
    Examples:
      copilot-logs prune --scaffolds --empty
      copilot-logs prune --older-than 90d --export-to ~/copilot-archive --apply
      copilot-logs prune --stale-locks --apply --no-export
    """
    from copilot_logs.commands import disk as disk_core
    from copilot_logs.commands import prune as core
    from copilot_logs.commands.prune import apply as applying
    from copilot_logs.ingest.logfile import display_name
    from copilot_logs.render.tables import write_prune

    criteria = core.Criteria(**picked)  # type: ignore[arg-type]
    _check_usage(criteria, apply, export_to, no_export, trash, empty_trash)
    chosen = dict(disk_core.choose(selectors, root))
    found, figures = surveyed([(path, None) for path in chosen])
    if not any(place.sessions_seen or disk_core.TRASH in place.beside for place in found.roots):
        where = ", ".join(one_line(str(place.path)) for place in found.roots)
        raise click.UsageError(
            f"{where} holds no session folder: not a folder of sessions, nothing is pruned"
        )
    now = time.time()
    plan = core.plan(found, figures, criteria, now, chosen=chosen, heavy=heavy)
    runs = applying.trash_runs(found) if empty_trash else []
    trash_rows: list[dict[str, object]] = [
        {
            "name": run.name,
            "folder": display_name(run.root / disk_core.TRASH),
            "bytes": run.bytes,
            "allocated_bytes": run.allocated_bytes,
        }
        for run in runs
    ]
    if not apply:
        rows, held = applying.rows(plan), applying.held_rows(plan)
        write_prune(rows, held, trash_rows, [], fmt, applied=False, now=now)
        return
    exported = _exported(plan, export_to) if export_to is not None else None
    done = applying.apply(plan, found, delete=not trash, exported=exported, exported_to=export_to)
    emptied = [left for _, left in applying.empty_trash(runs)]
    trash_rows = [{**row, "left": left} for row, left in zip(trash_rows, emptied, strict=True)]
    rows, held = applying.rows(plan, done), applying.held_rows(plan)
    write_prune(rows, held, trash_rows, done.records, fmt, applied=True, now=now)
    failed = done.skipped or any(entry.left for entry in done.done) or any(emptied)
    ctx.exit(ExitCode.FAILED if failed else ExitCode.OK)


def _check_usage(
    criteria: Criteria,
    apply: bool,
    export_to: Path | None,
    no_export: bool,
    trash: bool,
    empty_trash: bool,
) -> None:
    from copilot_logs.commands.prune.apply import removal_resists_symlink_attacks

    if not criteria.any and not empty_trash:
        raise click.UsageError(
            "say what to prune: --scaffolds, --empty, --abandoned, --stale-locks, --older-than, "
            "--larger-than, --files-larger-than (or --empty-trash); `copilot-logs disk` shows "
            "what there is"
        )
    if export_to is not None and no_export:
        raise click.UsageError("--export-to DIR and --no-export: give one of them")
    if apply and export_to is None and not no_export:
        raise click.UsageError(
            "--apply needs --export-to DIR (the sessions to go are exported there first, and "
            "checked) or --no-export (their usage history is lost)"
        )
    if (not trash or empty_trash) and not removal_resists_symlink_attacks():
        raise click.UsageError(
            "this platform's removal of folders does not resist symlink attacks: --delete and "
            "--empty-trash are refused here; use --trash, and empty the trash by hand"
        )


def _exported(plan: Plan, out: Path) -> set[str]:
    """Export the logs of the folders to go into ``out`` (keeping what it holds of others),
    then the names of those the export holds whole."""
    from copilot_logs.commands import export as export_core
    from copilot_logs.commands.prune import FOLDER
    from copilot_logs.ingest.logfile import Source

    sources = [
        Source(item.folder.log_path, item.folder.name)
        for item in plan.items
        if item.action == FOLDER and item.folder.tree.log == "file"
    ]
    if not sources:
        return set()
    export_into(out, sources, keep_others=True)
    held = export_core.exported_whole(out, sources)
    output.echo(
        f"Exported {len(held)} of {len(sources)} logs to go into {one_line(str(out))}.", err=True
    )
    return held
