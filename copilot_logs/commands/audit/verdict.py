"""The verdict of a judged task, as one polars expression over the audit facts (the rules are
told in :mod:`copilot_logs.commands.audit`)."""

from __future__ import annotations

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import after as _after

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

CAP_STOPS = ("cap_reached", "agent_stop_block_limit")
"""Stop reasons that say the CLI's continuation limit ended the run (autopilot_stopped,
completion receipt)."""


def verdict_of(*, interactive: pl.Expr, nudge_cap: int, recent: pl.Expr) -> pl.Expr:
    decided = pl.col("last_completion")
    # A completion, accepted or rejected, decides only when no nudge and no LLM call of the
    # main agent came after it: every CLI recorded ends the loop at task_complete, so a call
    # after it means the task was taken up again (nudged, or a message queued into the run).
    completion_is_last = derive.completion_is_last()
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
            pl.when(decided == derive.BLOCKED)
            .then(pl.lit(BLOCKED))
            .when(decided == derive.REJECTED)
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
