"""``copilot-logs cache``: where the store is and what it holds, for people or as json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot_logs.render import formats, output

if TYPE_CHECKING:
    from copilot_logs.store import Info


def write_info(held: Info, fmt: str) -> None:
    if fmt == "json":
        formats.write_json({"path": str(held.path), "entries": held.entries, "bytes": held.bytes})
        return
    output.echo(f"path     {held.path}")
    output.echo(f"entries  {held.entries:,} session logs")
    output.echo(f"bytes    {held.bytes:,} ({held.bytes / (1 << 20):.1f} MB)")


def write_cleared(before: Info) -> None:
    """What ``cache clear`` removed, on stderr."""
    output.echo(f"Removed {before.entries:,} entries ({before.bytes:,} bytes).", err=True)
