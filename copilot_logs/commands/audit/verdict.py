"""The verdict of a judged task, as one polars expression over the audit facts (the rules are
told in :mod:`copilot_logs.commands.audit`)."""

from __future__ import annotations

import polars as pl

COMPLETED = "completed"
COMPLETION_REJECTED = "completion-rejected"
BLOCKED = "blocked"
MISSING_TASK_COMPLETE = "missing-task-complete"
NUDGE_CAP = "nudge-cap"
ERRORED = "errored"
INTERRUPTED = "interrupted"
USER_QUIT = "user-quit"
RUNNING = "running"
INTERACTIVE = "interactive"

VERDICTS = (
    COMPLETED,
    COMPLETION_REJECTED,
    BLOCKED,
    MISSING_TASK_COMPLETE,
    NUDGE_CAP,
    ERRORED,
    INTERRUPTED,
    USER_QUIT,
    RUNNING,
    INTERACTIVE,
)
"""Every verdict, in the order summaries list them."""

REJECTED_OUTCOMES = ("continue", "blocked")
CAP_STOPS = ("cap_reached", "agent_stop_block_limit")
"""Stop reasons that say the CLI's continuation limit ended the run (autopilot_stopped,
completion receipt)."""


def _after(column: str, *others: str) -> pl.Expr:
    """``column`` is set and lies after every one of ``others`` (a missing one counts as 0)."""
    return pl.col(column).is_not_null() & pl.all_horizontal(
        pl.col(column) > pl.col(other).fill_null(0) for other in others
    )


def verdict_of(*, interactive: pl.Expr, nudge_cap: int, recent: pl.Expr) -> pl.Expr:
    outcome = pl.col("task_complete_outcome")
    rejected = (pl.col("task_complete_success") == False).fill_null(False) | outcome.is_in(  # noqa: E712
        REJECTED_OUTCOMES
    ).fill_null(False)
    # A completion, accepted or rejected, decides only when no nudge and no LLM call of the
    # main agent came after it: every CLI recorded ends the loop at task_complete, so a call
    # after it means the task was taken up again (nudged, or a message queued into the run).
    completion_is_last = _after("tc_line", "error_line", "nudge_line", "turn_line")
    error_is_last = _after("error_line", "tc_line", "nudge_line", "turn_line")
    # The CLI's own word on the stop, when the log has it and nothing ran after it.
    stopped = pl.when(_after("stop_line", "turn_line")).then(pl.col("stop_reason"))
    aborted = _after("abort_line", "turn_line") | (stopped == "aborted").fill_null(False)
    loop_ended = _after("shutdown_line", "turn_line") | (
        pl.col("judged_task") < pl.col("last_task")
    )
    may_still_run = (
        recent.fill_null(False)
        & pl.col("file_open")
        & (pl.col("judged_task") == pl.col("last_task"))
    )
    cut_short = pl.when(may_still_run).then(pl.lit(RUNNING)).otherwise(pl.lit(INTERRUPTED))
    capped = (pl.col("task_nudges") >= nudge_cap) | stopped.is_in(CAP_STOPS).fill_null(False)
    return (
        pl.when(interactive)
        .then(pl.lit(INTERACTIVE))
        .when(completion_is_last)
        .then(
            pl.when(outcome == "blocked")
            .then(pl.lit(BLOCKED))
            .when(rejected)
            .then(pl.lit(COMPLETION_REJECTED))
            .otherwise(pl.lit(COMPLETED))
        )
        .when(error_is_last)
        .then(pl.lit(ERRORED))
        .when(aborted)
        .then(pl.lit(INTERRUPTED))
        .when(
            pl.col("turn_open")
            & _after("shutdown_line", "turn_line")
            & (pl.col("shutdown_type") == "routine")
        )
        .then(pl.lit(USER_QUIT))
        .when(pl.col("turn_open"))
        .then(cut_short)
        .when(capped)
        .then(pl.lit(NUDGE_CAP))
        .when(~loop_ended)
        .then(cut_short)
        .otherwise(pl.lit(MISSING_TASK_COMPLETE))
    )
