"""The records of ``watch --format ndjson``: one per event that makes one (see :data:`KINDS`),
with the running figures just after it, derived by the batch commands' own functions."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, TYPE

KINDS = (
    "session_start",
    "prompt",
    "nudge",
    "turn_start",
    "turn_end",
    "tool_start",
    "tool_end",
    "subagent_start",
    "subagent_end",
    "task_complete",
    "error",
    "shutdown",
)
"""The kinds of ``--format ndjson`` records, in the README's order."""

FIGURES = (
    *(name for name in derive.COUNT_FIELDS if name != "open_turns"),
    "subagent_runs",
    "errors",
)
"""The running figures every record carries, their values just after its event: ``count``'s
(but open turns, which a running sum cannot hold), then sub-agent runs and errors."""

KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "session_start": ("copilot_version", "cwd"),
    "prompt": ("interaction_index", "interaction_id", "agent_mode"),
    "nudge": ("interaction_index", "interaction_id"),
    "turn_start": ("turn_id", "interaction_id", "turn_index", "agent_id", "model"),
    "turn_end": ("turn_id", "turn_index", "duration_ms"),
    "tool_start": ("tool_name", "tool_call_id", "agent_id"),
    "tool_end": (
        "tool_name",
        "tool_call_id",
        "agent_id",
        "success",
        "duration_ms",
        "error",
        "user_requested",
    ),
    "subagent_start": ("agent_id", "agent_name"),
    "subagent_end": ("agent_id", "agent_name", "success", "error"),
    "task_complete": ("summary", "success", "outcome"),
    "error": ("error_type", "message"),
    "shutdown": ("shutdown_type",),
}
"""The fields each kind adds to ``session_id``, ``at``, ``kind``, ``file``, ``line`` and the
running figures."""


def _kind() -> pl.Expr:
    user = MAIN & (TYPE == "user.message")
    rules = [
        (TYPE == "session.start", "session_start"),
        (user & pl.col("is_nudge").fill_null(False), "nudge"),
        (user, "prompt"),
        (MAIN & (TYPE == derive.TURN_START), "turn_start"),
        (pl.col("subagent_call"), "turn_start"),
        (pl.col("closes_turn"), "turn_end"),
        (TYPE == "tool.execution_start", "tool_start"),
        (TYPE == "tool.execution_complete", "tool_end"),
        (TYPE == "subagent.started", "subagent_start"),
        (TYPE.is_in(["subagent.completed", "subagent.failed"]), "subagent_end"),
        (TYPE == "session.task_complete", "task_complete"),
        (TYPE == "session.error", "error"),
        (TYPE == "session.shutdown", "shutdown"),
    ]
    return pl.coalesce(pl.when(condition).then(pl.lit(kind)) for condition, kind in rules)


def records(events: pl.DataFrame) -> pl.DataFrame:
    """One row per event that makes a record (see :data:`KINDS`), in file order, with the
    running figures just after it and every kind's fields."""
    annotated = derive.annotate(events)
    flags = derive.count_flags(annotated)
    running = flags.with_columns(
        completed_turns=pl.col("closes_turn").cast(pl.Int64),
        subagent_runs=(TYPE == "subagent.started").cast(pl.Int64),
        errors=(TYPE == "session.error").cast(pl.Int64),
    ).with_columns(pl.col(name).cum_sum().over(*derive.SESSION) for name in FIGURES)
    keys = list(derive.SESSION)
    tools = derive.tools(annotated).select(
        *keys, "tool_call_id", _tool_name="tool_name", _tool_ms="duration_ms"
    )
    runs = derive.subagent_runs(annotated).select(*keys, "tool_call_id", _agent_name="agent_name")
    turns = derive.turns(annotated).select(*keys, "turn_index", _turn_ms="duration_ms")
    return (
        running.with_columns(kind=_kind())
        .filter(pl.col("kind").is_not_null())
        .join(tools, on=[*keys, "tool_call_id"], how="left")
        .join(runs, on=[*keys, "tool_call_id"], how="left")
        .join(turns, on=[*keys, "turn_index"], how="left")
        .sort("file", "line")
        .with_columns(
            at=pl.col("timestamp")
            .dt.convert_time_zone("UTC")
            .dt.to_string("%Y-%m-%dT%H:%M:%S%.3fZ"),
            agent_id=pl.when(pl.col("kind").is_in(["subagent_start", "subagent_end"]))
            .then(pl.col("tool_call_id"))
            .otherwise(pl.col("agent_id")),
            agent_name=pl.col("_agent_name"),
            tool_name=pl.coalesce("tool_name", "_tool_name"),
            duration_ms=pl.when(pl.col("kind") == "turn_end")
            .then(pl.col("_turn_ms"))
            .otherwise(pl.col("_tool_ms")),
            user_requested=pl.col("is_user_requested").fill_null(False),
            summary=pl.coalesce("summary", "text"),
            error_type=pl.col("error_code"),
            message=pl.col("error"),
        )
    )


def record(row: dict[str, object]) -> dict[str, object]:
    kind = str(row["kind"])
    record: dict[str, object] = {
        "session_id": row["session_id"],
        "at": row["at"],
        "kind": kind,
        "file": row["file"],
        "line": row["line"],
    }
    record.update((name, row[name]) for name in FIGURES)
    record.update((name, row[name]) for name in KIND_FIELDS[kind])
    if kind == "turn_start" and row["agent_id"] is None:
        record["model"] = row["model"]
    return record
