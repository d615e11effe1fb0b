"""C5xx completion: a task is completed inside a turn, by the model's task_complete call."""

from __future__ import annotations

import polars as pl

from copilot_logs.commands.validate.rule import LOG, TOOL_START, Context, Family, found
from copilot_logs.derive import TYPE

COMPLETION = Family("C")


@COMPLETION.rule("C501", "task-complete-outside-turn", "error")
def outside_turn(ctx: Context) -> pl.LazyFrame:
    """session.task_complete outside a turn.

    The CLI writes `session.task_complete` inside the turn whose model called the `task_complete`
    tool, before that turn's `turn_end`. Outside a turn it is detached from the call that completed
    the task.
    """
    return found(
        ctx.events.filter((TYPE == "session.task_complete") & ~pl.col("during_turn")),
        pl.lit("session.task_complete outside any turn"),
    )


@COMPLETION.rule("C502", "task-complete-without-tool", "error")
def without_tool(ctx: Context) -> pl.LazyFrame:
    """session.task_complete in a turn with no task_complete tool call.

    Completion is written twice: the model's `task_complete` tool call (in `toolRequests` and as a
    tool start) and then `session.task_complete`. The event alone means the call was lost, or the
    completion did not come from the model.
    """
    requested = (
        pl.col("tool_requests")
        .list.eval(pl.element().struct.field("name") == "task_complete")
        .list.any()
        .fill_null(False)
    )
    called = pl.col("in_turn") & (
        ((TYPE == TOOL_START) & (pl.col("tool_name") == "task_complete"))
        | ((TYPE == "assistant.message") & requested)
    )
    lonely = ctx.events.filter(
        pl.col("in_turn") & TYPE.is_in([TOOL_START, "assistant.message", "session.task_complete"])
    ).filter((TYPE == "session.task_complete") & ~called.any().over(LOG, "turn_index"))
    return found(
        lonely,
        pl.lit("session.task_complete in a turn that made no task_complete tool call"),
    )


RULES = tuple(COMPLETION.rules)
