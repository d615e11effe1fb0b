"""X3xx tools: each tool run starts once, inside its turn (or sub-agent), and completes
before that turn (or sub-agent) ends."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.validate.rule import (
    LOCATION,
    LOG,
    SUBAGENT_END,
    SUBAGENT_KEY,
    TOOL_COMPLETE,
    TOOL_START,
    WHY_SHUT_DOWN,
    Context,
    Family,
    found,
    shared,
    text,
    tool_starts,
)
from copilot_logs.derive import MAIN, TYPE

TOOLS = Family("X")


@TOOLS.rule("X301", "orphan-tool-complete", "error")
def orphan_complete(ctx: Context) -> pl.LazyFrame:
    """tool.execution_complete with no tool.execution_start before it.

    Every tool run writes a start, then a complete with the same `toolCallId`. A complete with no
    start lost its start (which holds the tool's name and arguments). A `!cmd` shell escape writes a
    complete with `isUserRequested: true` and no start: that is not a fault and not reported.
    """
    keys = [LOG, "tool_call_id"]
    starts = tool_starts(ctx).select(*keys, _start_line="line")
    completes = (
        ctx.events.filter((TYPE == TOOL_COMPLETE) & ~pl.col("is_user_requested").fill_null(False))
        .unique(subset=keys, keep="first", maintain_order=True)
        .join(starts, on=keys, how="left")
    )
    orphans = completes.filter(
        pl.col("_start_line").is_null() | (pl.col("_start_line") > pl.col("line"))
    )
    message = (
        pl.when(pl.col("tool_call_id").is_null())
        .then(pl.lit("tool.execution_complete has no toolCallId: it pairs with no start"))
        .when(pl.col("_start_line").is_null())
        .then(
            pl.format("tool.execution_complete of {} has no tool.execution_start", "tool_call_id")
        )
        .otherwise(
            pl.format(
                "tool.execution_complete of {} comes before its start (line {})",
                "tool_call_id",
                "_start_line",
            )
        )
    )
    return found(orphans, message)


@shared
def _runs(ctx: Context) -> pl.LazyFrame:
    """Each tool start with the line of its first complete after it, and its deadline: the
    turn_end of its turn (main agent) or its sub-agent's end (sub-agent tools)."""
    keys = [LOG, "tool_call_id"]
    starts = tool_starts(ctx)
    completes = ctx.events.filter(TYPE == TOOL_COMPLETE).select(*keys, _done_line="line")
    done = (
        starts.select(*keys, "line")
        .join(completes, on=keys, how="inner")
        .filter(pl.col("_done_line") > pl.col("line"))
        .group_by(keys)
        .agg(pl.col("_done_line").min())
    )
    finishes = (
        ctx.events.filter(TYPE.is_in(SUBAGENT_END))
        .group_by(LOG, agent_id=SUBAGENT_KEY)
        .agg(_agent_end_line=pl.col("line").min())
    )
    return (
        starts.join(done, on=keys, how="left")
        .join(finishes, on=[LOG, "agent_id"], how="left")
        .join(_interrupted_turns(ctx), on=[LOG, "_turn_end_line"], how="left")
        .with_columns(
            _deadline=pl.when(MAIN)
            .then(pl.when(pl.col("in_turn")).then(pl.col("_turn_end_line")))
            .otherwise(
                pl.when(pl.col("_agent_end_line") > pl.col("line")).then(pl.col("_agent_end_line"))
            ),
            _bound=pl.when(MAIN)
            .then(pl.lit("its turn ended"))
            .otherwise(pl.lit("its sub-agent finished")),
            _interrupted=MAIN & pl.col("in_turn") & pl.col("_abort_line").is_not_null(),
            # What became of a start never completed, from how its run ended.
            _state=derive.open_state(pl.lit(True)),
        )
    )


def _interrupted_turns(ctx: Context) -> pl.LazyFrame:
    """The turn_end lines written next to an ``abort`` (just before or after it): the user
    interrupted that turn (Ctrl-C), and its tools were stopped, never completed."""
    abort_line = (
        pl.when(pl.col("_prev_type") == "abort")
        .then(pl.col("_prev_line"))
        .when(pl.col("_next_type") == "abort")
        .then(pl.col("_next_line"))
    )
    return (
        ctx.events.filter(pl.col("closes_turn"))
        .with_columns(_abort_line=abort_line)
        .filter(pl.col("_abort_line").is_not_null())
        .select(LOG, _turn_end_line="line", _abort_line="_abort_line")
    )


@TOOLS.rule("X302", "tool-not-completed-in-turn", "error")
def not_completed_in_turn(ctx: Context) -> pl.LazyFrame:
    """A tool started in a turn was not completed before the turn ended.

    A main-agent tool completes before the `turn_end` of the turn that started it (a sub-agent's
    tool before its `subagent.completed`/`failed`). A start with no complete by then lost its
    complete: the tool's result and success are unknown. Reported at the start's line. A tool of a
    turn the user interrupted (an `abort` next to its `turn_end`) is X308 instead.
    """
    runs = _unfinished_by_deadline(ctx).filter(~pl.col("_interrupted").fill_null(False))
    message = pl.format(
        "{} ({}) was not completed before {} (line {}){}",
        text(pl.col("tool_name")),
        "tool_call_id",
        "_bound",
        "_deadline",
        pl.when(pl.col("_done_line").is_null())
        .then(pl.lit(": its complete is missing"))
        .otherwise(pl.format(": it completes on line {}", "_done_line")),
    )
    return found(runs, message)


@TOOLS.rule("X303", "tool-never-completed", "warning")
def never_completed(ctx: Context) -> pl.LazyFrame:
    """A tool was started and the log ends before it completed.

    The start's turn (or sub-agent) is still open at the end of the log and no `session.shutdown`
    follows the start: the session was cut off while the tool ran, or is still running. Reported at
    the start's line. A tool left running at a shutdown is X307 instead, one left running by a run
    the CLI later resumed X309.
    """
    runs = _left_running(ctx, derive.STILL_OPEN)
    return found(
        runs,
        pl.format(
            "{} ({}) never completed: the log ends while it runs (cut off or still running)",
            text(pl.col("tool_name")),
            "tool_call_id",
        ),
    )


@TOOLS.rule("X304", "duplicate-tool-call-id", "error")
def duplicate_id(ctx: Context) -> pl.LazyFrame:
    """A toolCallId is started (or completed) twice.

    `toolCallId` names one tool run. A second start or a second complete with the same id cannot be
    paired: one of them was replayed or the ids collided. The finding points at the second one.
    """
    key = (LOG, "type", "tool_call_id")
    uses = ctx.events.filter(
        TYPE.is_in([TOOL_START, TOOL_COMPLETE]) & pl.col("tool_call_id").is_not_null()
    ).with_columns(
        _first_line=pl.col("line").min().over(key), _use=pl.int_range(pl.len()).over(key)
    )
    repeated = uses.filter(pl.col("_use") > 0)
    return found(
        repeated,
        pl.format(
            "{} repeats toolCallId {}, already seen on line {}",
            "type",
            "tool_call_id",
            "_first_line",
        ),
    )


@TOOLS.rule("X305", "tool-outside-turn", "error")
def outside_turn(ctx: Context) -> pl.LazyFrame:
    """A main-agent tool event outside any turn.

    The main agent runs tools inside the turn whose `assistant.message` requested them. A main-agent
    start or complete between turns means the turn's boundaries were lost. `!cmd` shell escapes
    (`isUserRequested: true`) run between turns and are not reported; sub-agent tools are checked
    against their sub-agent instead.
    """
    outside = ctx.events.filter(
        MAIN
        & TYPE.is_in([TOOL_START, TOOL_COMPLETE])
        & ~pl.col("in_turn")
        & ~((TYPE == TOOL_COMPLETE) & pl.col("is_user_requested").fill_null(False))
    )
    return found(
        outside,
        pl.format("main-agent {} ({}) outside any turn", "type", text(pl.col("tool_call_id"))),
    )


@TOOLS.rule("X306", "requested-tool-not-started", "warning")
def requested_not_started(ctx: Context) -> pl.LazyFrame:
    """A tool requested in an assistant.message's toolRequests never started.

    Each entry of `toolRequests` normally gets a `tool.execution_start` with its `toolCallId`. One
    that never starts was lost, or the turn was aborted before the tool ran. Reported at the
    message's line, once per missing call.
    """
    requests = (
        ctx.events.filter((TYPE == "assistant.message") & (pl.col("tool_requests").list.len() > 0))
        .select(*LOCATION, LOG, _request=pl.col("tool_requests"))
        .explode("_request")
        .with_columns(
            tool_call_id=pl.col("_request").struct.field("tool_call_id"),
            _name=pl.col("_request").struct.field("name"),
        )
        .filter(pl.col("tool_call_id").is_not_null())
    )
    keys = [LOG, "tool_call_id"]
    started = ctx.events.filter(TYPE == TOOL_START).select(keys).unique()
    missing = requests.join(started, on=keys, how="anti")
    return found(
        missing,
        pl.format(
            "toolRequests asks for {} ({}) but no tool.execution_start follows",
            text(pl.col("_name")),
            "tool_call_id",
        ),
    )


@TOOLS.rule("X307", "tool-open-at-shutdown", "info")
def open_at_shutdown(ctx: Context) -> pl.LazyFrame:
    """A tool was still running when the session shut down: the user ended the session.

    A `session.shutdown` after a tool start that has no `tool.execution_complete` means the user
    quit while the tool waited or ran, typically at a `permission.requested` prompt for it. The log
    is whole (X303 does not fire); the tool never ran to its end.
    """
    runs = _left_running(ctx, derive.OPEN_AT_SHUTDOWN)
    return found(
        runs,
        pl.format(
            "{} ({}) was still running when the session shut down (line {}): {}",
            text(pl.col("tool_name")),
            "tool_call_id",
            "_shutdown_after",
            WHY_SHUT_DOWN,
        ),
    )


def _left_running(ctx: Context, state: str) -> pl.LazyFrame:
    """The tool runs with no deadline (no turn_end or sub-agent end after them) and no
    complete, whose run of the CLI left them ``state``."""
    return _runs(ctx).filter(
        pl.col("_deadline").is_null() & pl.col("_done_line").is_null() & (pl.col("_state") == state)
    )


def _unfinished_by_deadline(ctx: Context) -> pl.LazyFrame:
    """The tool runs with no complete before their turn ended (or their sub-agent finished)."""
    return _runs(ctx).filter(
        pl.col("_deadline").is_not_null()
        & (pl.col("_done_line").is_null() | (pl.col("_done_line") > pl.col("_deadline")))
    )


@TOOLS.rule("X308", "tool-interrupted", "info")
def interrupted(ctx: Context) -> pl.LazyFrame:
    """A tool was still running when the user interrupted its turn.

    On Ctrl-C the CLI stops the running tool and ends its turn: from 1.0.85 it writes the turn's
    `turn_end` and an `abort` next to it, and no `tool.execution_complete`. The log is whole; the
    tool never ran to its end. Older CLIs write no `turn_end` then: the turn and the tool are open
    at the shutdown (T205, X307).
    """
    runs = _unfinished_by_deadline(ctx).filter(pl.col("_interrupted").fill_null(False))
    return found(
        runs,
        pl.format(
            "{} ({}) was still running when the user interrupted its turn (abort on line {})",
            text(pl.col("tool_name")),
            "tool_call_id",
            "_abort_line",
        ),
    )


@TOOLS.rule("X309", "tool-interrupted-by-resume", "info")
def interrupted_by_resume(ctx: Context) -> pl.LazyFrame:
    """A tool was still running when its run of the CLI ended, and a later run resumed the session.

    The run that started the tool was killed or crashed, and `--resume` took the session up again.
    CLI 1.0.102 then writes a `tool.execution_complete` with the error code `interrupted` for it (no
    finding); older versions write nothing, and the tool stays open: the shape the real CLI writes
    on every such resume (tests/recordings/*/kill-resume), not damage. The tool never ran to its
    end.
    """
    runs = _left_running(ctx, derive.INTERRUPTED)
    return found(
        runs,
        pl.format(
            "{} ({}) was still running when its run ended (killed or crashed) and the session "
            "was resumed",
            text(pl.col("tool_name")),
            "tool_call_id",
        ),
    )


RULES = tuple(TOOLS.rules)
