"""Per session and per segment, what a session is: when it started and ended, how each run of
the CLI ended, its CLI version, mode, model and repository. Every command reads these facts;
none decides them again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from copilot_logs.derive.events import (
    ACCEPTED,
    ENDED_BY_SHUTDOWN,
    KILLED,
    MAIN,
    OPEN,
    SEGMENT,
    SEGMENT_STARTS,
    SESSION,
    SHUTDOWN,
    TURN_START,
    TYPE,
    WORK,
    start_times,
)
from copilot_logs.derive.loop import session_model

RUNNING = "running"
CUT_OFF = "cut-off"
"""What an :data:`~copilot_logs.derive.events.OPEN` last segment is, judged at a time ``now``
(:func:`running`): still running when its last event is recent, else cut off."""

DEFAULT_RUNNING_WITHIN = timedelta(minutes=10)


def segments(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per segment (one run of the CLI) of each session log, in order: how it began
    (``session.start``, ``session.resume``, or null when the log lost its first line), its
    lines and times, its last shutdown and that shutdown's type, how it ended
    (``end``: shutdown, killed, open), and the LLM calls counted in it (``llm_calls`` of the
    main agent, ``subagent_calls``) and the main-agent turns it left open."""
    shutdown = TYPE == SHUTDOWN
    first_type = pl.col("type").first()
    return annotated.group_by(*SEGMENT, maintain_order=True).agg(
        start_type=pl.when(first_type.is_in(SEGMENT_STARTS)).then(first_type),
        first_line=pl.col("line").first(),
        last_line=pl.col("line").last(),
        started_at=pl.col("timestamp").min(),
        last_event_at=pl.col("timestamp").max(),
        shutdown_line=pl.col("segment_shutdown_line").first(),
        shutdown_type=pl.col("shutdown_type")
        .filter(shutdown)
        .last()
        .fill_null(pl.when(shutdown.any()).then(pl.lit("routine"))),
        last_work_line=pl.col("line").filter(TYPE.is_in(WORK)).max(),
        end=pl.col("segment_end").first(),
        llm_calls=(MAIN & pl.col("llm_call")).sum().cast(pl.Int64),
        subagent_calls=pl.col("subagent_call").sum().cast(pl.Int64),
        turns_left_open=(MAIN & (TYPE == TURN_START) & ~pl.col("turn_closed")).sum().cast(pl.Int64),
    )


def after(column: str, *others: str) -> pl.Expr:
    """``column`` is set and lies after every one of ``others`` (a missing one counts as 0):
    on rows of line positions, such as :func:`prompt_positions`'."""
    return pl.col(column).is_not_null() & pl.all_horizontal(
        pl.col(column) > pl.col(other).fill_null(0) for other in others
    )


_NUDGE = MAIN & (TYPE == "user.message") & pl.col("is_nudge").fill_null(False)


def prompt_positions() -> dict[str, pl.Expr]:
    """Aggregations over one task's events (a typed prompt and all it caused: its nudges, its
    sub-agents, a message queued into its run): where its last completion (``tc_line``, and
    what it decided: ``last_completion``), main-agent error, nudge and turn_start sit."""
    completions = pl.col("completion").is_not_null()
    return {
        "tc_line": pl.col("line").filter(completions).max(),
        "last_completion": pl.col("completion").filter(completions).last(),
        "error_line": pl.col("line").filter(MAIN & (TYPE == "session.error")).max(),
        "nudge_line": pl.col("line").filter(_NUDGE).max(),
        "turn_line": pl.col("line").filter(MAIN & (TYPE == TURN_START)).max(),
    }


def completion_is_last() -> pl.Expr:
    """On a task's :func:`prompt_positions`: its last completion decides the task, since no
    error, nudge or main-agent LLM call came after it (every CLI recorded, 1.0.20 to 1.0.102,
    ends the loop at task_complete: a call after it means the task was taken up again)."""
    return after("tc_line", "error_line", "nudge_line", "turn_line")


def prompts(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per task (``prompt_index``) of each session log: its positions
    (:func:`prompt_positions`), whether it holds autopilot work, and ``completed``: its last
    completion was accepted and decides it (:func:`completion_is_last`)."""
    return (
        annotated.group_by(*SESSION, "prompt_index", maintain_order=True)
        .agg(**prompt_positions(), autopilot=pl.col("autopilot_work").any())
        .with_columns(completed=completion_is_last() & (pl.col("last_completion") == ACCEPTED))
    )


def judged_prompt(autopilot: str = "autopilot") -> pl.Expr:
    """The task a session is judged on: its last one with autopilot work, else its last one.
    An aggregation per session, over its :func:`prompts` (or, with ``autopilot_work``, its
    annotated events)."""
    index = pl.col("prompt_index")
    return pl.coalesce(index.filter(pl.col(autopilot)).max(), index.max())


def session_facts(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per session log: what session.start says (start, cwd, repository, branch, CLI version),
    its first and last event, its segments, and whether it ended: ``ended`` when its last run
    shut down after its last work; ``end`` is how that last run ended (see :func:`segments`),
    ``shutdown_type`` its shutdown's type; ``mode`` and ``model`` as the session is listed;
    ``summary`` what its last task_complete said;
    ``completed`` when the task it is judged on (:func:`judged_prompt`) is completed
    (:func:`prompts`): audit's ``completed`` verdict."""
    start = TYPE == "session.start"
    facts = annotated.group_by(*SESSION, maintain_order=True).agg(
        started_at=pl.coalesce(start_times().filter(start).first(), pl.col("timestamp").min()),
        first_at=pl.col("timestamp").min(),
        last_at=pl.col("timestamp").max(),
        last_line=pl.col("line").max(),
        events=pl.len().cast(pl.Int64),
        cwd=pl.col("cwd").filter(start).first(),
        repository=pl.col("repository").filter(start).first(),
        branch=pl.col("branch").filter(start).first(),
        copilot_version=pl.col("copilot_version").filter(start).first(),
        segments=pl.col("segment").max(),
        end=pl.col("segment_end").last(),
        shutdown_line=pl.col("line").filter(TYPE == SHUTDOWN).max(),
        shutdown_type=pl.col("shutdown_type").filter(TYPE == SHUTDOWN).last(),
        last_work_line=pl.col("line").filter(TYPE.is_in(WORK)).max(),
        mode=session_mode(),
        model=session_model(),
        summary=pl.coalesce("summary", "text").filter(pl.col("completion").is_not_null()).last(),
    )
    judged = (
        prompts(annotated)
        .with_columns(_judged=judged_prompt().over(*SESSION))
        .filter(pl.col("prompt_index") == pl.col("_judged"))
        .select(*SESSION, "completed")
    )
    return facts.join(judged, on=SESSION, how="left").with_columns(
        completed=pl.col("completed").fill_null(False),
        ended=pl.col("end") == ENDED_BY_SHUTDOWN,
        shutdown_type=pl.when(pl.col("shutdown_line").is_not_null()).then(
            pl.col("shutdown_type").fill_null("routine")
        ),
    )


def session_mode() -> pl.Expr:
    """``autopilot`` when the log shows autopilot work (a nudge, or a prompt or LLM call while
    autopilot is the mode in effect: :func:`copilot_logs.derive.events.autopilot_work`), else
    ``interactive``. An aggregation over annotated events: use it per session."""
    return (
        pl.when(pl.col("autopilot_work").any())
        .then(pl.lit("autopilot"))
        .otherwise(pl.lit("interactive"))
    )


def recent(
    last_event_at: pl.Expr, now: datetime | None = None, within: timedelta = DEFAULT_RUNNING_WITHIN
) -> pl.Expr:
    """Whether a last event is recent at ``now`` (default: the time now): within ``within``
    of it, before or after. A log whose clock runs a little ahead of ours still counts as
    recent; a last event days in the future never does (else a log with a clock ahead, or a
    forged time, would be running for ever and pass every gate)."""
    now = now or datetime.now(UTC)
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return last_event_at.is_between(pl.lit(now - within), pl.lit(now + within)).fill_null(False)


def running(
    end: pl.Expr,
    last_event_at: pl.Expr,
    now: datetime | None = None,
    within: timedelta = DEFAULT_RUNNING_WITHIN,
) -> pl.Expr:
    """How a session's last run stands at ``now``: its ``end`` (shutdown, killed) when it
    ended, else :data:`RUNNING` when its last event is :func:`recent`, else :data:`CUT_OFF`."""
    return (
        pl.when(end != OPEN)
        .then(end)
        .when(recent(last_event_at, now, within))
        .then(pl.lit(RUNNING))
        .otherwise(pl.lit(CUT_OFF))
    )


__all__ = [
    "CUT_OFF",
    "DEFAULT_RUNNING_WITHIN",
    "ENDED_BY_SHUTDOWN",
    "KILLED",
    "OPEN",
    "RUNNING",
    "after",
    "completion_is_last",
    "judged_prompt",
    "prompt_positions",
    "prompts",
    "recent",
    "running",
    "segments",
    "session_facts",
    "session_mode",
]
