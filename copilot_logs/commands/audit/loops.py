"""Loops: autopilot runs that spend LLM calls without making progress (``audit``'s ``looping``).

The four signs, each a span of a task with a strength, and their thresholds: docs/audit.md,
"Loops". :func:`loop_spans` finds the spans (nothing in them depends on the thresholds, so they
are kept with the other audit facts); :func:`looping` applies the thresholds. Tool calls are
compared by name and the first ``PREVIEW_CHARS`` of their arguments less
:data:`FREE_TEXT_ARGUMENTS`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.derive.calls import call_usage

STALLED_NUDGES = "stalled-nudges"
REPEATED_CALL = "repeated-call"
REJECTED_COMPLETIONS = "rejected-completions"
AFTER_COMPLETION = "after-completion"
SIGNALS = (STALLED_NUDGES, REPEATED_CALL, REJECTED_COMPLETIONS, AFTER_COMPLETION)

DEFAULT_THRESHOLDS: Mapping[str, int] = {
    STALLED_NUDGES: 3,
    REPEATED_CALL: 3,
    REJECTED_COMPLETIONS: 2,
    AFTER_COMPLETION: 1,
}
"""Chosen from the runs of the real CLI (tests/recordings, ../shared/real-samples): a run that
completes after two idle nudges (autopilot-complete) and one stopped at a cap of two
(autopilot-cap) are not loops; the same command after every nudge is (autopilot-loop, four
times); every CLI recorded ends the loop at an accepted task_complete, so one call after it
is already spent on nothing. See docs/audit.md."""

SPAN = pl.Struct(
    {
        "signal": pl.String(),
        "strength": pl.Int64(),
        "start_line": pl.Int64(),
        "label": pl.String(),
        "calls": pl.List(pl.Int64()),
        "credits": pl.List(pl.Float64()),
    }
)
TASK = (*SESSION, "task_index")
_NUDGE = MAIN & (TYPE == "user.message") & pl.col("is_nudge").fill_null(False)
# The model's one definition of what a completion decided: a blocked one is neither accepted
# (calls after it are the task taken up again) nor rejected by the CLI.
_REJECTED = pl.col("completion") == derive.REJECTED
_ACCEPTED = derive.ACCEPTED_COMPLETION

FREE_TEXT_ARGUMENTS = ("description",)
"""Arguments that say what a call is for, in words the model may change on every call (bash's
``description``): left out when calls are compared."""
POLLING_TOOLS = ("read_agent", "read_bash")
"""Tools that wait on work running apart (a background agent, a detached shell): the same call
again and again is waiting, not a loop, when the task then completes."""
_FREE_TEXT_VALUE = (
    '"(?:' + "|".join(map(re.escape, FREE_TEXT_ARGUMENTS)) + r')":"(?:[^"\\]|\\.)*(?:"|$)'
)
"""A free-text argument and its string value in the arguments' JSON preview (to its end when
the preview cuts it); what closes the arguments after it is stripped too, so that a preview
cut inside the free text compares equal to a whole one."""


def loop_spans(tasks: pl.DataFrame) -> pl.DataFrame:
    """Per session, its loop spans (a list of :data:`SPAN`) in the tasks (``task_index``) of
    the annotated events that hold autopilot work."""
    autopilot = tasks.group_by(*TASK).agg(
        pl.col("autopilot_work").any().alias("autopilot"),
        (pl.col("line").max() + 1).alias("task_end"),
    )
    tasks = tasks.join(autopilot.filter("autopilot").select(*TASK, "task_end"), on=TASK)
    billed = call_usage(tasks).select(*SESSION, call="line", credit="ai_credits")
    calls = (
        tasks.filter(pl.col("llm_call"))
        .select(*TASK, call="line")
        .join(billed, on=[*SESSION, "call"], how="left")
    )
    tools = _tool_calls(tasks)
    found = [
        _stalled(tasks, tools),
        _repeated(tools, tasks),
        _rejected(tasks),
        _after_completion(tasks, calls),
    ]
    key = [*TASK, "signal", "start_line"]
    spans = pl.concat(
        [frame.select(*key, "strength", "end_line", "label") for frame in found],
        how="vertical_relaxed",
    )
    inside = (pl.col("call") >= pl.col("start_line")) & (pl.col("call") < pl.col("end_line"))
    hits = (
        spans.join(calls, on=TASK)
        .filter(inside)
        .sort("call")
        .group_by(key)
        .agg(calls=pl.col("call"), credits=pl.col("credit"))
    )
    return (
        spans.join(hits, on=key, how="left")
        .with_columns(
            pl.col("calls").fill_null(pl.lit([], pl.List(pl.Int64()))),
            pl.col("credits").fill_null(pl.lit([], pl.List(pl.Float64()))),
        )
        .sort(*key)
        .group_by(*SESSION, maintain_order=True)
        .agg(loop_spans=pl.struct(*(pl.col(name) for name in SPAN.to_schema())))
    )


def _tool_calls(tasks: pl.DataFrame) -> pl.DataFrame:
    """The main agent's tool calls of each task in order, with their identity, whether they
    were new to the task, and the line of the turn that asked."""
    turn_lines = tasks.filter(MAIN & (TYPE == derive.TURN_START)).select(
        *SESSION, "turn_index", turn_line="line"
    )
    where = tasks.select(*SESSION, start_line="line", task_index="task_index", task_end="task_end")
    return (
        derive.tools(tasks)
        .filter(
            pl.col("agent_id").is_null()
            & ~pl.col("is_user_requested")
            & (pl.col("tool_name") != "task_complete")
            & pl.col("start_line").is_not_null()
        )
        .join(where, on=[*SESSION, "start_line"])
        .join(turn_lines, on=[*SESSION, "turn_index"], how="left")
        .sort(*SESSION, "start_line")
        .with_columns(
            identity=pl.concat_str(
                "tool_name",
                pl.col("arguments")
                .fill_null("")
                .str.replace_all(_FREE_TEXT_VALUE, "")
                .str.strip_chars_end(",}"),
                pl.col("success").cast(pl.String).fill_null("open"),
                separator=" ",
            ),
            label=pl.concat_str("tool_name", pl.col("arguments").fill_null(""), separator=" "),
            asked_at=pl.coalesce("turn_line", "start_line"),
        )
        .with_columns(new=pl.col("identity").is_first_distinct().over(*TASK))
    )


def _stalled(tasks: pl.DataFrame, tools: pl.DataFrame) -> pl.DataFrame:
    """Runs of nudges each followed by no progress, per task."""
    after_nudge = _NUDGE.cum_sum().over(*TASK).cast(pl.Int64)
    nudges = (
        tasks.with_columns(after_nudge=after_nudge)
        .filter(_NUDGE)
        .select(*TASK, "after_nudge", "task_end", nudge_line="line")
    )
    after_nudges = tasks.select(*SESSION, start_line="line", after_nudge=after_nudge)
    progress = (
        tools.join(after_nudges, on=[*SESSION, "start_line"])
        .filter(pl.col("new") & (pl.col("success") == True))  # noqa: E712
        .group_by(*TASK, "after_nudge")
        .agg(progressed=pl.lit(True))
    )
    marked = (
        nudges.join(progress, on=[*TASK, "after_nudge"], how="left")
        .sort(*TASK, "after_nudge")
        .with_columns(
            stalled=pl.col("progressed").is_null(),
            next_nudge=pl.col("nudge_line").shift(-1).over(*TASK),
        )
        .with_columns(changed=pl.col("stalled") != pl.col("stalled").shift(1).over(*TASK))
        .with_columns(run=pl.col("changed").fill_null(True).cum_sum().over(*TASK))
    )
    return (
        marked.filter("stalled")
        .group_by(*TASK, "run")
        .agg(
            strength=pl.len().cast(pl.Int64),
            start_line=pl.col("nudge_line").first(),
            end_line=pl.coalesce(pl.col("next_nudge").last(), pl.col("task_end").last()),
        )
        .with_columns(signal=pl.lit(STALLED_NUDGES), label=pl.lit(None, pl.String))
    )


def _repeated(tools: pl.DataFrame, tasks: pl.DataFrame) -> pl.DataFrame:
    """Runs of the same tool call with no other tool call between, per task; polling that
    the task's accepted completion follows is left out."""
    runs = tools.with_columns(
        changed=pl.col("identity") != pl.col("identity").shift(1).over(*TASK),
        next_asked=pl.col("asked_at").shift(-1).over(*TASK),
    ).with_columns(run=pl.col("changed").fill_null(True).cum_sum().over(*TASK))
    completed = tasks.filter(_ACCEPTED).group_by(*TASK).agg(completed_at=pl.col("line").max())
    waited = pl.col("tool_name").is_in(POLLING_TOOLS) & (
        pl.col("completed_at") > pl.col("last_start")
    ).fill_null(False)
    return (
        runs.group_by(*TASK, "run")
        .agg(
            strength=pl.len().cast(pl.Int64),
            start_line=pl.col("asked_at").get(1, null_on_oob=True),
            end_line=pl.coalesce(pl.col("next_asked").last(), pl.col("task_end").last()),
            label=pl.col("label").first(),
            tool_name=pl.col("tool_name").first(),
            last_start=pl.col("start_line").last(),
        )
        .join(completed, on=TASK, how="left")
        .filter((pl.col("strength") > 1) & ~waited)
        .with_columns(signal=pl.lit(REPEATED_CALL))
    )


def _rejected(tasks: pl.DataFrame) -> pl.DataFrame:
    """Rejected completions, per task: from the first to the next accepted completion."""
    completions = tasks.filter(_REJECTED | _ACCEPTED).with_columns(rejected=_REJECTED)
    first = (
        completions.filter("rejected")
        .group_by(*TASK)
        .agg(
            strength=pl.len().cast(pl.Int64),
            start_line=pl.col("line").min(),
            last_rejected=pl.col("line").max(),
            task_end=pl.col("task_end").first(),
        )
    )
    accepted = completions.filter(~pl.col("rejected")).select(*TASK, accepted_line="line")
    after = (
        first.join(accepted, on=TASK, how="left")
        .filter(
            pl.col("accepted_line").is_null() | (pl.col("accepted_line") > pl.col("last_rejected"))
        )
        .group_by(*TASK)
        .agg(
            pl.col("strength", "start_line", "task_end").first(),
            accepted_line=pl.col("accepted_line").min(),
        )
    )
    return after.with_columns(
        end_line=pl.coalesce("accepted_line", "task_end"),
        signal=pl.lit(REJECTED_COMPLETIONS),
        label=pl.lit(None, pl.String),
    )


def _after_completion(tasks: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """LLM calls after the last accepted completion of each task."""
    accepted = (
        tasks.filter(_ACCEPTED)
        .group_by(*TASK)
        .agg(start_line=pl.col("line").max(), end_line=pl.col("task_end").first())
    )
    counted = (
        accepted.join(calls, on=TASK, how="left")
        .group_by(*TASK)
        .agg(
            pl.col("start_line", "end_line").first(),
            strength=(pl.col("call") > pl.col("start_line")).sum().cast(pl.Int64),
        )
    )
    return counted.filter(pl.col("strength") > 0).with_columns(
        signal=pl.lit(AFTER_COMPLETION), label=pl.lit(None, pl.String)
    )


def looping(spans: pl.DataFrame, thresholds: Mapping[str, int]) -> pl.DataFrame:
    """Per session of ``spans`` (:func:`loop_spans`' column): ``looping``, ``loop_signals``
    (in :data:`SIGNALS` order), ``loop_line`` (where the first span that reached its
    threshold starts), ``repeated_call``, ``wasted_calls`` and ``wasted_credits``."""
    limits = {**DEFAULT_THRESHOLDS, **thresholds}
    order = {signal: index for index, signal in enumerate(SIGNALS)}
    threshold = pl.col("signal").replace_strict(limits, return_dtype=pl.Int64)
    fired = (
        spans.select(*SESSION, "loop_spans")
        .explode("loop_spans")
        .drop_nulls("loop_spans")
        .unnest("loop_spans")
        .filter(pl.col("strength") >= threshold)
        .with_columns(rank=pl.col("signal").replace_strict(order, return_dtype=pl.Int64))
    )
    return (
        fired.group_by(*SESSION)
        .agg(
            looping=pl.lit(True),
            loop_signals=pl.col("signal").sort_by("rank").unique(maintain_order=True),
            loop_line=pl.col("start_line").min(),
            repeated_call=pl.col("label").sort_by("strength", descending=True).drop_nulls().first(),
            wasted_calls=pl.col("calls").explode().drop_nulls().n_unique().cast(pl.Int64),
        )
        .join(_wasted_credits(fired), on=SESSION, how="left")
    )


def _wasted_credits(fired: pl.DataFrame) -> pl.DataFrame:
    """Per session, the AI credits of its wasted calls (each once): null unless every one of
    them has its credits."""
    each = (
        fired.select(*SESSION, "calls", "credits")
        .explode("calls", "credits")
        .drop_nulls("calls")
        .unique(subset=[*SESSION, "calls"])
    )
    return each.group_by(*SESSION).agg(
        wasted_credits=pl.when(pl.col("credits").is_not_null().all()).then(
            pl.col("credits").sum().round(9)
        )
    )
