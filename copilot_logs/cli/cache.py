"""``copilot-logs cache info|clear``: where the store is, what it holds, and emptying it."""

from __future__ import annotations

import click

from copilot_logs.cli.options import Group, format_option


@click.group(cls=Group)
def cache() -> None:
    """Show or empty the store of what was read (see the README's "The cache").

    Each session log read is kept as one entry under the user's cache folder, so an unchanged
    log is not parsed again; `--no-cache` on any command bypasses it. Deleting it is always safe.

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
    from copilot_logs.render.cache import write_info

    write_info(store.info(), fmt)


@cache.command()
def clear() -> None:
    """Delete everything the store holds (the next run reads every log again).

    \b
    Examples:
      copilot-logs cache clear
    """
    from copilot_logs import store
    from copilot_logs.render.cache import write_cleared

    before = store.info()
    store.clear()
    write_cleared(before)
