"""``copilot-logs cache``: where the store is and what it holds, for people or as json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot_logs.render import formats, output

if TYPE_CHECKING:
    from copilot_logs.store import Cleared, Info


def write_info(held: Info, fmt: str) -> None:
    if fmt == "json":
        formats.write_json(
            {
                "path": str(held.path),
                "entries": held.entries,
                "bytes": held.bytes,
                "trusted": held.trusted,
            }
        )
        return
    output.echo(f"path     {held.path}")
    output.echo(f"entries  {held.entries:,} session logs")
    output.echo(f"bytes    {held.bytes:,} ({held.bytes / (1 << 20):.1f} MB)")
    if not held.trusted:
        output.echo("trusted  no: not used (see the warning below)")


def write_cleared(cleared: Cleared) -> None:
    """What ``cache clear`` removed, on stderr: what was really deleted."""
    if not cleared.trusted:
        output.echo("Removed nothing: the store folder is not copilot-logs' own.", err=True)
        return
    noun = "entry" if cleared.entries == 1 else "entries"
    output.echo(f"Removed {cleared.entries:,} {noun} ({cleared.bytes:,} bytes).", err=True)
