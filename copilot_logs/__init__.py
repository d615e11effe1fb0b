"""copilot-logs: read GitHub Copilot CLI session logs into polars frames.

The public API lives in :mod:`copilot_logs.api` and is re-exported here lazily, so importing
the package (or running ``copilot-logs --help``) does not import polars.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = (
    "read",
    "read_file",
    "read_bytes",
    "ReadResult",
    "sessions",
    "count",
    "turns",
    "tools",
    "subagent_runs",
    "timeline",
    "audit",
    "validate",
    "usage",
    "frames",
)
# ``copilot_logs.commands.export`` is the export module; its API function is
# ``copilot_logs.api.export``.

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from copilot_logs import api

        return getattr(api, name)
    raise AttributeError(f"module 'copilot_logs' has no attribute {name!r}")
