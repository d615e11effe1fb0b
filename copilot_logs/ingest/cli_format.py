"""What the Copilot CLI writes, across its versions: the one place that knows it.

Every fact here was seen in logs the real CLI wrote (docs/compatibility.md) or read from its
published event schema (``schema_types.json``, made by ``rig/event_schema.py``); how each
version marks a sub-agent's lines is in docs/compatibility.md. No polars at import time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

OLDEST_VERIFIED = "1.0.20"
NEWEST_VERIFIED = "1.0.102"
"""The CLI versions the recordings span: a log from a newer CLI gets validate's E126."""

SCHEMA_TYPES: dict[str, bool] = json.loads(
    Path(__file__).with_name("schema_types.json").read_text(encoding="utf-8")
)["types"]
"""Event type -> ephemeral (streamed live, never written to events.jsonl)."""

PERSISTED_IN_OLDER_CLIS = frozenset({"session.title_changed"})
"""Ephemeral in the newest schema, persisted up to 1.0.84: no fault in a log."""

EPHEMERAL_TYPES = (
    frozenset(name for name, ephemeral in SCHEMA_TYPES.items() if ephemeral)
    - PERSISTED_IN_OLDER_CLIS
)
"""Streamed live, never persisted: one on disk is worth a warning (E106)."""

KNOWN_TYPES = frozenset(SCHEMA_TYPES) - EPHEMERAL_TYPES
"""The persisted types: any other type on disk is unknown (E107, info)."""

FUSION_PHASES = ("assistant.fusion_phase_completed", "assistant.fusion_phase_failed")
"""One HydraFusion phase each (a model call inside the main agent's turn pair)."""
FUSION_COMPLETED = "session.fusion_completed"
"""A HydraFusion turn's end: ``phaseCount`` phases ran."""


def writer(agent_id: str | None, parent_tool_call_id: str | None) -> str | None:
    """Who wrote a line: None for the main agent, else the sub-agent's mark as written (its
    envelope agentId, else the ``parentToolCallId`` a 1.0.2x sub-agent's lines carry)."""
    return agent_id if agent_id is not None else parent_tool_call_id


def keyed(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with ``agent_id`` the key of the sub-agent that wrote each line (the task
    call's toolCallId; null for the main agent) in every scheme, and ``agent_instance`` the
    envelope agentId as written. A mark no ``subagent.started`` links stays as written (so
    validate can name it, S403). Links are per session log (file, session_id)."""
    import polars as pl

    session = ["file", "session_id"]
    links = (
        events.filter(
            (pl.col("type") == "subagent.started")
            & pl.col("agent_id").is_not_null()
            & pl.col("tool_call_id").is_not_null()
        )
        .select(*session, "agent_id", _key=pl.col("tool_call_id"))
        .unique(subset=[*session, "agent_id"], keep="first", maintain_order=True)
    )
    marks = pl.coalesce("agent_id", "parent_tool_call_id")
    if links.filter(pl.col("agent_id") != pl.col("_key")).is_empty():
        # No instance id to link (a CLI before 1.0.85, or no sub-agent): no join to pay for.
        return events.with_columns(agent_instance=pl.col("agent_id"), agent_id=marks)
    return (
        events.join(links, on=[*session, "agent_id"], how="left", maintain_order="left")
        .with_columns(agent_instance=pl.col("agent_id"), agent_id=pl.coalesce("_key", marks))
        .drop("_key")
    )


def fusion_calls() -> pl.Expr:
    """Per event, the HydraFusion phases it stands for: a ``session.fusion_completed`` its
    ``phaseCount``; a phase line (:data:`FUSION_PHASES`) one when no fusion_completed follows
    it in its session (a fusion turn cut off or still running), else none (the completion
    counted it). Fusion turns run one at a time, inside a main-agent turn pair. A window in
    reading order: use it ``.over(file, session_id)``."""
    import polars as pl

    kind = pl.col("type")
    completed = kind == FUSION_COMPLETED
    phases = pl.col("detail").str.json_path_match("$.phaseCount").cast(pl.Int64, strict=False)
    pending = kind.is_in(FUSION_PHASES) & (completed.cum_sum(reverse=True) == 0)
    return pl.when(completed).then(phases.fill_null(0)).otherwise(pending.cast(pl.Int64))


def version_key(version: str | None) -> tuple[int, ...] | None:
    """``1.0.102`` -> (1, 0, 102); a pre-release suffix is ignored; None when not a version."""
    if not version:
        return None
    parts = []
    for part in version.split("-", 1)[0].split("."):
        if not part.isdigit():
            return None
        parts.append(int(part))
    return tuple(parts)


def newer_than_verified(version: str | None) -> bool:
    """Whether a log's CLI version is newer than the newest one recorded."""
    key = version_key(version)
    newest = version_key(NEWEST_VERIFIED)
    return key is not None and newest is not None and key > newest
