"""Autopilot verdicts: which sessions really finished their task (``copilot-logs audit``).

What a task is, the verdicts and the order in which the last word wins: docs/audit.md,
"Verdicts". The task judged is a typed prompt and all it caused (the model's ``prompt_index``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from typing import TypedDict, Unpack

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.audit import loops
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.derive import after as _after
from copilot_logs.ingest.reader import ReadResult

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
"""Stop reasons that say the CLI's continuation limit ended the run."""


def verdict_of(*, interactive: pl.Expr, nudge_cap: int, recent: pl.Expr) -> pl.Expr:
    decided = pl.col("last_completion")
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
        .when(derive.completion_is_last())
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


FAILING_VERDICTS = tuple(v for v in VERDICTS if v != INTERACTIVE)
"""The verdicts ``--fail-on`` accepts (an interactive session is never judged)."""
LOOPING = "looping"
"""Not a verdict but a finding beside it, which ``--fail-on`` accepts too."""

DEFAULT_FAIL_ON = (MISSING_TASK_COMPLETE, NUDGE_CAP, ERRORED, INTERRUPTED, USER_QUIT)
DEFAULT_NUDGE_CAP = 5
DEFAULT_RUNNING_WITHIN = derive.DEFAULT_RUNNING_WITHIN
AUDIT_COLUMNS = (
    "session_id",
    "mode",
    "verdict",
    "started_at",
    "last_event_at",
    "user_prompts",
    "autopilot_nudges",
    "task_nudges",
    "llm_calls",
    "tool_calls",
    "turns_after_first_nudge",
    "tool_calls_after_first_nudge",
    "looping",
    "loop_signals",
    "wasted_calls",
    "wasted_credits",
    "repeated_call",
    "loop_line",
    "task_complete_summary",
    "task_complete_success",
    "task_complete_outcome",
    "task_complete_blocker",
    "stop_reason",
    "last_failed_tool",
    "last_failed_tool_error",
    "session_error",
    "session_error_type",
    "repository",
    "file",
    "line",
)

_NUDGE = MAIN & (TYPE == "user.message") & pl.col("is_nudge").fill_null(False)
_TURN = MAIN & (TYPE == derive.TURN_START)
_TASK_COMPLETE = pl.col("completion").is_not_null()
# The CLI's own word on why a run stopped: a completion receipt (1.0.83+, written when it
# accepts an end) or autopilot_stopped (ephemeral: only in a --output-format json stream).
_STOP = TYPE.is_in(["session.completion_receipt", "session.autopilot_stopped"])
_STOP_REASON = pl.coalesce("stop_reason", "stopped_reason")
_ERROR = MAIN & (TYPE == "session.error")
_SHUTDOWN = TYPE == "session.shutdown"


class Judging(TypedDict, total=False):
    now: datetime | None
    running_within: timedelta
    nudge_cap: int
    require_task_complete: bool
    loop_thresholds: Mapping[str, int] | None


def audit(result: ReadResult, **judging: Unpack[Judging]) -> pl.DataFrame:
    """:func:`judge` of the :func:`facts` of ``result``."""
    return judge([facts(result)], **judging)


def facts(result: ReadResult) -> pl.DataFrame:
    """Per session read, what its verdict is decided from: where its judged task's last
    completion, error, nudge, call, abort and shutdown sit, and its counts. Nothing in it
    depends on the options or the time, so a batch's facts can be cached."""
    annotated = derive.annotate(result.events)
    tasks = _tasks(annotated)
    per_file = _per_file(annotated)
    judged = tasks.join(
        per_file.select(*SESSION, prompt_index="judged_task"),
        on=[*SESSION, "prompt_index"],
        how="inner",
    )
    # The loops are found per task as audit judges it: a typed prompt and all it caused.
    tasks_by_prompt = annotated.with_columns(task_index=pl.col("prompt_index"))
    return (
        derive.session_facts(annotated)
        .select(
            *SESSION,
            "started_at",
            "repository",
            "mode",
            last_event_at="last_at",
            file_open=~pl.col("ended"),
        )
        .join(per_file, on=SESSION, how="left")
        .join(judged, on=SESSION, how="left")
        .join(_last_failed_tools(annotated), on=SESSION, how="left")
        .join(loops.loop_spans(tasks_by_prompt), on=SESSION, how="left")
    )


def judge(
    parts: list[pl.DataFrame],
    *,
    now: datetime | None = None,
    running_within: timedelta = DEFAULT_RUNNING_WITHIN,
    nudge_cap: int = DEFAULT_NUDGE_CAP,
    require_task_complete: bool = False,
    loop_thresholds: Mapping[str, int] | None = None,
) -> pl.DataFrame:
    """The audit table (:data:`AUDIT_COLUMNS`, newest first) of the :func:`facts` of one or
    more batches. ``now`` (default: the time now) and ``running_within`` decide ``running``;
    ``require_task_complete`` judges interactive sessions too; ``loop_thresholds`` (by
    signal, over :data:`~copilot_logs.commands.audit.loops.DEFAULT_THRESHOLDS`) decide
    ``looping``."""
    if nudge_cap < 1:
        raise ValueError("nudge_cap must be at least 1")
    verdict = verdict_of(
        interactive=(pl.col("mode") == INTERACTIVE) & pl.lit(not require_task_complete),
        nudge_cap=nudge_cap,
        recent=derive.recent(pl.col("last_event_at"), now, running_within),
    )
    table = pl.concat(parts, how="vertical_relaxed")
    found = loops.looping(table, loop_thresholds or {})
    return (
        table.join(found, on=SESSION, how="left")
        .with_columns(
            verdict=verdict,
            looping=pl.col("looping").fill_null(False),
            loop_signals=pl.col("loop_signals").fill_null(pl.lit([], pl.List(pl.String()))),
            wasted_calls=pl.col("wasted_calls").fill_null(0),
        )
        .with_columns(
            line=pl.when(pl.col("verdict").is_in([COMPLETED, COMPLETION_REJECTED, BLOCKED]))
            .then(pl.col("tc_line"))
            .when(pl.col("verdict") == ERRORED)
            .then(pl.col("error_line"))
            .otherwise(pl.col("last_line"))
        )
        .select(AUDIT_COLUMNS)
        .pipe(derive.newest_first)
    )


def _tasks(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per session and task: where its last completion, error, nudge, call, abort and
    shutdown sit, and what the last completion said."""
    summary = pl.coalesce("summary", "text")
    return annotated.group_by(*SESSION, "prompt_index", maintain_order=True).agg(
        task_nudges=_NUDGE.sum().cast(pl.Int64),
        **derive.prompt_positions(),
        task_complete_summary=summary.filter(_TASK_COMPLETE).last(),
        task_complete_success=pl.col("success").filter(_TASK_COMPLETE).last(),
        task_complete_outcome=pl.col("outcome").filter(_TASK_COMPLETE).last(),
        task_complete_blocker=_blocker().filter(_TASK_COMPLETE).last(),
        stop_reason=_STOP_REASON.filter(_STOP).last(),
        stop_line=pl.col("line").filter(_STOP).max(),
        turn_open=~pl.col("turn_closed").filter(_TURN).last().fill_null(True),
        abort_line=pl.col("line").filter(MAIN & (TYPE == "abort")).max(),
        shutdown_line=pl.col("line").filter(_SHUTDOWN).max(),
        shutdown_type=pl.col("shutdown_type").filter(_SHUTDOWN).last().fill_null("routine"),
    )


def _blocker() -> pl.Expr:
    described = pl.concat_str(
        pl.col("blocker_kind").fill_null("blocked"),
        pl.col("blocker_reason"),
        separator=": ",
        ignore_nulls=True,
    )
    return pl.when(pl.col("blocker").is_not_null()).then(described)


def _per_file(annotated: pl.DataFrame) -> pl.DataFrame:
    flags = derive.count_flags(annotated)
    first_nudge = pl.col("line").filter(_NUDGE).min()
    after_first_nudge = (pl.col("line") > first_nudge).fill_null(False)
    return flags.group_by(*SESSION, maintain_order=True).agg(
        user_prompts=pl.col("user_prompts").sum(),
        autopilot_nudges=pl.col("autopilot_nudges").sum(),
        llm_calls=pl.col("llm_calls").sum(),
        tool_calls=pl.col("tool_calls").sum(),
        turns_after_first_nudge=(pl.col("llm_calls").cast(pl.Boolean) & after_first_nudge)
        .sum()
        .cast(pl.Int64),
        tool_calls_after_first_nudge=(pl.col("tool_calls").cast(pl.Boolean) & after_first_nudge)
        .sum()
        .cast(pl.Int64),
        session_error=pl.col("error").filter(_ERROR).last(),
        session_error_type=pl.col("error_code").filter(_ERROR).last(),
        last_line=pl.col("line").max(),
        last_task=pl.col("prompt_index").max(),
        judged_task=derive.judged_prompt("autopilot_work"),
    )


def _last_failed_tools(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per session, the main agent's last failed tool call (by completion) and its error."""
    failed = derive.tools(annotated).filter(
        pl.col("agent_id").is_null()
        & (pl.col("success") == False)  # noqa: E712
        & ~pl.col("is_user_requested")
    )
    return (
        failed.sort(*SESSION, "complete_line")
        .group_by(*SESSION)
        .agg(
            last_failed_tool=pl.col("tool_name").last(),
            last_failed_tool_error=pl.col("error").last(),
        )
    )


def failing(table: pl.DataFrame, fail_on: Collection[str]) -> pl.DataFrame:
    """The rows whose verdict is in ``fail_on``, or that loop if it holds ``looping``."""
    loops_fail = pl.col("looping") & pl.lit(LOOPING in fail_on)
    return table.filter(pl.col("verdict").is_in(list(fail_on)) | loops_fail)


def judged(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter(pl.col("verdict") != INTERACTIVE)


def verdict_counts(table: pl.DataFrame) -> dict[str, int]:
    counts = dict(table.group_by("verdict").len().iter_rows())
    return {verdict: int(counts[verdict]) for verdict in VERDICTS if counts.get(verdict)}
