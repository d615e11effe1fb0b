"""T2xx turns: main-agent turns open and close in pairs, one at a time."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.validate.rule import (
    LOG,
    WHY_SHUT_DOWN,
    Context,
    Family,
    found,
    shared,
    text,
)
from copilot_logs.derive import MAIN, TURN_END, TURN_START, TYPE

TURNS = Family("T")


@TURNS.rule("T201", "orphan-turn-end", "error")
def orphan_end(ctx: Context) -> pl.LazyFrame:
    """assistant.turn_end with no open turn.

    Every main-agent `assistant.turn_end` closes the `assistant.turn_start` before it. One with no
    open turn means its `turn_start` was lost, or a line was duplicated or moved. Turn counts built
    on pairs are off by one.
    """
    return found(
        ctx.events.filter(pl.col("stray_end")),
        pl.format("assistant.turn_end (turnId {}) with no open turn", text(pl.col("turn_id"))),
    )


@TURNS.rule("T202", "turn-start-while-open", "error")
def start_while_open(ctx: Context) -> pl.LazyFrame:
    """assistant.turn_start while the previous turn is still open.

    Main-agent turns do not nest: each `turn_start` waits for the previous turn's `turn_end`. A new
    start while a turn is open means that turn's `turn_end` was lost. The finding points at the new
    `turn_start`; the message names the open turn's line.
    """
    nested = ctx.events.filter(MAIN & (TYPE == TURN_START) & (pl.col("_prev_marker") == "start"))
    return found(
        nested,
        pl.format(
            "assistant.turn_start while the turn opened on line {} is still open: its "
            "turn_end is missing",
            "_prev_marker_line",
        ),
    )


@TURNS.rule("T203", "turn-id-mismatch", "error")
def id_mismatch(ctx: Context) -> pl.LazyFrame:
    """assistant.turn_end's turnId differs from the open turn's.

    `turn_end` carries the `turnId` of the `turn_start` it closes. A different id means the two are
    not a pair: lines were lost or reordered between them.
    """
    wrong = ctx.events.filter(
        pl.col("closes_turn")
        & pl.col("turn_id").is_not_null()
        & pl.col("_open_turn_id").is_not_null()
        & (pl.col("turn_id") != pl.col("_open_turn_id"))
    )
    return found(
        wrong,
        pl.format(
            "assistant.turn_end has turnId {} but the open turn (line {}) is turnId {}",
            "turn_id",
            "_prev_marker_line",
            "_open_turn_id",
        ),
    )


@shared
def _open_last_turn(ctx: Context) -> pl.LazyFrame:
    """The turn_start of each run's last turn when no turn_end closed it, with what became of
    it (:func:`copilot_logs.derive.open_state`)."""
    marks = ctx.events.filter(MAIN & TYPE.is_in([TURN_START, TURN_END]))
    run = (LOG, "segment")
    return marks.filter(
        (TYPE == TURN_START)
        & (pl.col("_marker").last().over(*run) == "start")
        & (pl.col("turn_index") == pl.col("turn_index").max().over(*run))
    ).with_columns(_state=derive.open_state(pl.lit(True)))


@TURNS.rule("T204", "unclosed-turn", "warning")
def unclosed(ctx: Context) -> pl.LazyFrame:
    """A turn is still open at the end of the log.

    The last `assistant.turn_start` has no `turn_end` and no `session.shutdown` follows it: the
    session was cut off (killed, crashed) or is still running. The LLM call is counted, as an open
    turn. The finding points at the open turn's `turn_start`. A turn left open at a shutdown is T205
    instead, one left open by a run the CLI later resumed T206.
    """
    open_at_end = _open_last_turn(ctx).filter(pl.col("_state") == derive.STILL_OPEN)
    return found(
        open_at_end,
        pl.format(
            "the turn (turnId {}) is still open at the end of the log: the session was cut "
            "off or is still running",
            text(pl.col("turn_id")),
        ),
    )


@TURNS.rule("T205", "open-at-shutdown", "info")
def open_at_shutdown(ctx: Context) -> pl.LazyFrame:
    """A turn was still open when the session shut down: the user ended the session.

    A routine `session.shutdown` after a turn that has no `assistant.turn_end` means the user quit
    while the turn ran, typically at a `permission.requested` prompt for one of its tools (a
    shutdown of another `shutdownType`, such as `error`, is named in the message). The log is whole:
    it was neither cut off nor is it still running (T204 does not fire). Reported so the open turn
    is not mistaken for damage.
    """
    left_open = _open_last_turn(ctx).filter(pl.col("_state") == derive.OPEN_AT_SHUTDOWN)
    return found(
        left_open,
        pl.format(
            "the turn (turnId {}) was still open when the session shut down (line {}): {}",
            text(pl.col("turn_id")),
            "_shutdown_after",
            WHY_SHUT_DOWN,
        ),
    )


@TURNS.rule("T206", "interrupted-by-resume", "info")
def interrupted_by_resume(ctx: Context) -> pl.LazyFrame:
    """A turn was still open when its run of the CLI ended, and a later run resumed the session.

    The run that wrote the turn was killed or crashed (the CLI writes nothing on SIGKILL: its log
    ends after the last line it wrote, often a `tool.execution_start`), and `--resume` took the
    session up again. No CLI version closes the killed turn: this is the shape the real CLI writes
    on every such resume (tests/recordings/*/kill-resume), not damage. The LLM call is counted, as
    an open turn; the next `turn_start` belongs to the new run (T202 does not fire).
    """
    killed = _open_last_turn(ctx).filter(pl.col("_state") == derive.INTERRUPTED)
    resumes = ctx.events.filter(TYPE == "session.resume").select(
        LOG, segment=pl.col("segment") - 1, _resume_line="line"
    )
    return found(
        killed.join(resumes, on=[LOG, "segment"], how="left"),
        pl.format(
            "the turn (turnId {}) was still open when its run ended (killed or crashed); the "
            "session was resumed on line {}",
            text(pl.col("turn_id")),
            text(pl.col("_resume_line")),
        ),
    )


RULES = tuple(TURNS.rules)
