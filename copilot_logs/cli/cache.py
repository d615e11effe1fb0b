"""``copilot-logs cache info|clear``: where the store is, what it holds, and emptying it."""

from __future__ import annotations

import click

from copilot_logs.cli import Group
from copilot_logs.cli.options import format_option
from copilot_logs.errors import WriteError


@click.group(cls=Group)
def cache() -> None:
    """Show or empty the store of what was read.

    Each session log read is kept as one entry under the user's cache folder, so an unchanged
    log is not parsed again; `--no-cache` on any command bypasses it. Deleting it is always safe.

    More in docs/cache.md of the copilot-logs source.

    \b
    Examples:
      copilot-logs cache info
      copilot-logs cache info --format json
      copilot-logs cache clear
    """


@cache.command()
@format_option("table", "json")
def info(fmt: str) -> None:
    """Where the store is, how many session logs it holds, and its size in bytes.

    \b
    Examples:
      copilot-logs cache info
      copilot-logs cache info --format json | jq .bytes
    """
    from copilot_logs import store
    from copilot_logs.render.tables import write_info

    write_info(store.info(), fmt)


@cache.command()
def clear() -> None:
    """Delete what copilot-logs wrote in the store (the next run reads every log again).

    Only files copilot-logs wrote are removed, never anything else put there, and nothing in
    a store folder that is not your own (a link, another user's).

    \b
    Examples:
      copilot-logs cache clear
    """
    from copilot_logs import store
    from copilot_logs.render.tables import write_cleared

    cleared = store.clear()
    write_cleared(cleared)
    if cleared.failed:
        more = f" and {len(cleared.failed) - 1} more" if len(cleared.failed) > 1 else ""
        raise WriteError(
            f"could not remove {cleared.failed[0]}{more} from the store; check the folder's "
            "permissions, or remove them yourself"
        )
