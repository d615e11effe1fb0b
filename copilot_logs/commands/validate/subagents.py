"""S4xx sub-agents: each sub-agent starts, finishes, and is the only writer of its agentId."""

from __future__ import annotations

import polars as pl

from copilot_logs.commands.validate.rule import (
    LOG,
    SUBAGENT_END,
    SUBAGENT_KEY,
    Context,
    Family,
    found,
    shared,
    text,
)
from copilot_logs.derive import TYPE

SUBAGENTS = Family("S")


@shared
def _spans(ctx: Context) -> pl.LazyFrame:
    """Per session and sub-agent (the task's toolCallId): the line of its first start."""
    return (
        ctx.events.filter(TYPE == "subagent.started")
        .group_by(LOG, _agent=SUBAGENT_KEY)
        .agg(_started_line=pl.col("line").min())
    )


@SUBAGENTS.rule("S401", "unfinished-subagent", "warning")
def unfinished(ctx: Context) -> pl.LazyFrame:
    """A sub-agent started and never finished.

    `subagent.started` is followed by `subagent.completed` or `subagent.failed` with the same
    `toolCallId`. With neither, the log ends while the sub-agent runs: the session was cut off or is
    still running. Reported at the start's line.
    """
    agent = SUBAGENT_KEY
    ends = ctx.events.filter(TYPE.is_in(SUBAGENT_END)).select(LOG, _agent=agent, _end_line="line")
    started = ctx.events.filter(TYPE == "subagent.started").with_columns(_agent=agent)
    finished = (
        started.join(ends, on=[LOG, "_agent"])
        .filter(pl.col("_end_line") > pl.col("line"))
        .select("file", "line")
    )
    unfinished = started.join(finished, on=["file", "line"], how="anti")
    return found(
        unfinished,
        pl.format(
            "sub-agent {} ({}) never finished: no subagent.completed or subagent.failed "
            "(cut off or still running)",
            text(pl.col("tool_name")),
            text(pl.col("_agent")),
        ),
    )


@SUBAGENTS.rule("S402", "orphan-subagent-finish", "error")
def orphan_finish(ctx: Context) -> pl.LazyFrame:
    """subagent.completed or subagent.failed with no subagent.started before it.

    A sub-agent's end names the `toolCallId` of its start. With no start, the start was lost, and
    the sub-agent's name and model are unknown.
    """
    ends = (
        ctx.events.filter(TYPE.is_in(SUBAGENT_END))
        .with_columns(_agent=SUBAGENT_KEY)
        .join(_spans(ctx), on=[LOG, "_agent"], how="left")
        .filter(pl.col("_started_line").is_null() | (pl.col("_started_line") > pl.col("line")))
    )
    return found(
        ends,
        pl.format("{} of {} with no subagent.started before it", "type", text(pl.col("_agent"))),
    )


@SUBAGENTS.rule("S403", "unknown-agent-id", "error")
def unknown_agent(ctx: Context) -> pl.LazyFrame:
    """A sub-agent's line names no started sub-agent.

    A sub-agent's lines are marked as the sub-agent of one `task` call, after its
    `subagent.started`: by `agentId` = the call's `toolCallId` (CLI 1.0.3x to 1.0.80), by an
    instance id that the start's `agentId` links to the call (1.0.85 on), or by
    `data.parentToolCallId` (1.0.2x). A mark with no such start cannot be attributed: sub-agent
    calls and tools would be counted against nothing. Reported once per mark, on its first line.
    """
    lines = (
        ctx.events.filter(pl.col("agent_id").is_not_null())
        .join(
            _spans(ctx).rename({"_agent": "agent_id"}),
            on=[LOG, "agent_id"],
            how="left",
        )
        .filter(pl.col("_started_line").is_null() | (pl.col("line") < pl.col("_started_line")))
        .with_columns(_lines=pl.len().over(LOG, "agent_id"))
        .sort("file", "line")
        .unique(subset=[LOG, "agent_id"], keep="first", maintain_order=True)
    )
    return found(
        lines,
        pl.format(
            "sub-agent {} names no started sub-agent ({} lines; first here)",
            "agent_id",
            "_lines",
        ),
    )


RULES = tuple(SUBAGENTS.rules)
