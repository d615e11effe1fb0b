"""Derived frames over the events frame: turns, tools, sub-agent runs, sessions and counts.

Everything here is polars in, polars out. A session log is one session of a file, keyed by
:data:`SESSION` (a file, or stdin, can hold several sessions: the reader gives each event the
sessionId of the session.start it follows); sequences (which turn an event belongs to, which
interaction) are computed per session in reading order.
"""

from __future__ import annotations

import polars as pl

from copilot_logs.ingest.calls import CALL_TYPES, CallCounter
from copilot_logs.ingest.calls import TURN_START as TURN_START
from copilot_logs.ingest.decode import cli_format
from copilot_logs.ingest.schema import log_times

MAIN = pl.col("agent_id").is_null()
TYPE = pl.col("type")

SESSION = ("file", "session_id")
"""The key of one session log: group, join and window by it, never by ``file`` alone."""

TURN_END = "assistant.turn_end"

COUNT_FIELDS = (
    "llm_calls",
    "completed_turns",
    "open_turns",
    "subagent_calls",
    "interactions",
    "user_prompts",
    "autopilot_nudges",
    "tool_calls",
    "failed_tool_calls",
    "subagent_tool_calls",
    "fusion_calls",
)


def annotate(events: pl.DataFrame) -> pl.DataFrame:
    """Add the per-session sequence columns every derived frame uses.

    - ``agent_id``: the key of the sub-agent that wrote the line (its task call's toolCallId),
      whatever scheme the CLI version marks it by; null for the main agent.
      ``agent_instance``: the envelope agentId as written (see
      :func:`copilot_logs.ingest.decode.cli_format.keyed`).
    - ``turn_index``: 1-based index of the main-agent turn the event falls in (0 before any);
      an event belongs to it only while ``in_turn`` is true.
    - ``during_turn``: the event (of any agent) sits inside an open main-agent turn, or is the
      turn_end closing it; ``in_turn``: the same, for main-agent events only.
    - ``closes_turn`` / ``stray_end``: a turn_end that closes the open turn, or that has none.
    - ``turn_closed``: on every row of a turn, whether a turn_end closed it.
    - ``is_queued``: a main-agent user message typed while a turn ran: it carries the
      interactionId of the interaction under way (its last prompt's or turn's), so it joins
      that interaction instead of starting one (see :func:`queued_message`).
    - ``interaction_index``: 1-based count of main-agent user messages that start an
      interaction (queued ones excluded) so far (0 before any).
    - ``session_model``: the model the session's model events named last (``auto`` skipped).
    - ``llm_call``: the line is an LLM call of either agent, as :class:`copilot_logs.ingest.calls.
      CallCounter` decides it (the one rule); ``subagent_call``: a sub-agent's LLM call.
    """
    is_start = MAIN & (TYPE == TURN_START)
    is_end = MAIN & (TYPE == TURN_END)
    marker = pl.when(is_start).then(pl.lit("start")).when(is_end).then(pl.lit("end"))
    named_model = (
        pl.when(
            TYPE.is_in(["session.model_change", "session.auto_mode_resolved", "session.start"])
            & (pl.col("model") != "auto")
        )
        .then(pl.col("model"))
        .otherwise(None)
    )
    frame = cli_format.keyed(events.sort("file", "line")).with_columns(
        turn_index=is_start.cum_sum().over(*SESSION).cast(pl.Int64),
        _marker=marker.forward_fill().over(*SESSION),
        is_queued=queued_message().over(*SESSION),
        session_model=named_model.forward_fill().over(*SESSION),
    )
    frame = frame.with_columns(
        interaction_index=(MAIN & (TYPE == "user.message") & ~pl.col("is_queued"))
        .cum_sum()
        .over(*SESSION)
        .cast(pl.Int64),
    )
    frame = frame.with_columns(
        _previous=pl.col("_marker").shift(1).over(*SESSION),
    ).with_columns(
        closes_turn=is_end & (pl.col("_previous") == "start"),
        stray_end=is_end & (pl.col("_previous").is_null() | (pl.col("_previous") == "end")),
    )
    frame = frame.with_columns(llm_call=_call_flags(frame)).with_columns(
        subagent_call=pl.col("llm_call") & pl.col("agent_id").is_not_null(),
        during_turn=(pl.col("_marker") == "start") | pl.col("closes_turn"),
        in_turn=MAIN & ((pl.col("_marker") == "start") | pl.col("closes_turn")),
        turn_closed=pl.col("closes_turn").any().over(*SESSION, "turn_index"),
    )
    return frame.drop("_marker", "_previous")


def queued_message() -> pl.Expr:
    """Per event: a main-agent ``user.message`` (not a nudge) whose interactionId is the one
    of the interaction under way, i.e. of the last main-agent prompt or turn_start before it.
    The CLI queues a message typed while a turn runs and writes it into that turn with the
    running interaction's id: it is a prompt, but it starts no new interaction (or task).
    A window in reading order: use it ``.over(*SESSION)`` on a frame sorted by file and line.
    """
    user = MAIN & (TYPE == "user.message")
    carries = pl.when(user | (MAIN & (TYPE == TURN_START))).then(pl.col("interaction_id"))
    under_way = carries.shift(1).forward_fill()
    return (
        user
        & ~pl.col("is_nudge").fill_null(False)
        & pl.col("interaction_id").is_not_null()
        & (pl.col("interaction_id") == under_way)
    ).fill_null(False)


_USER = MAIN & (TYPE == "user.message")
TASK_START = _USER & ~pl.col("is_nudge").fill_null(False) & ~pl.col("is_queued").fill_null(False)
"""A typed prompt that starts a task (not a nudge, nor queued into a run): audit's and usage's."""


def session_model() -> pl.Expr:
    """The model a session is listed under: the one most main-agent replies (``assistant.message``)
    name; on a tie, the one of the latest reply among the tied models (what the session was using
    last); with no reply naming a model, the last model the session set. An aggregation in
    reading order: use it per session."""
    replies = pl.col("model").filter(MAIN & (TYPE == "assistant.message")).drop_nulls()
    most_named = replies.filter(replies.is_in(replies.mode().implode()))
    return pl.coalesce(most_named.last(), pl.col("session_model").drop_nulls().last())


_MESSAGE = TYPE == "assistant.message"
_REQUESTS = pl.col("tool_requests").filter(_MESSAGE).explode().drop_nulls()
"""The tool requests of an LLM call's messages (in an aggregation over the call's lines)."""


def _call_figures() -> dict[str, pl.Expr]:
    """What an LLM call (a main-agent turn or a sub-agent call) did, aggregated over its lines:
    its messages, the text of the first that has one, their output tokens, the tools they
    requested, and the tools started and failed."""
    return {
        "messages": _MESSAGE.sum().cast(pl.Int64),
        "text": pl.col("text").filter(_MESSAGE & (pl.col("text") != "")).first(),
        "output_tokens": pl.col("output_tokens").filter(_MESSAGE).sum(),
        "requested_tools": _REQUESTS.struct.field("name"),
        "tool_calls": (TYPE == "tool.execution_start").sum().cast(pl.Int64),
        "failed_tool_calls": (
            (TYPE == "tool.execution_complete") & (pl.col("success") == False)  # noqa: E712
        )
        .sum()
        .cast(pl.Int64),
    }


def turns(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per main-agent turn (one LLM call), in order, open turns included."""
    rows = annotated.filter(pl.col("in_turn"))
    return (
        rows.group_by(*SESSION, "turn_index", maintain_order=True)
        .agg(
            interaction_index=pl.col("interaction_index").first(),
            turn_id=pl.col("turn_id").filter(TYPE == TURN_START).first(),
            interaction_id=pl.col("interaction_id").filter(TYPE == TURN_START).first(),
            event_id=pl.col("event_id").first(),
            line=pl.col("line").first(),
            started_at=pl.col("timestamp").first(),
            ended_at=pl.col("timestamp").filter(pl.col("closes_turn")).first(),
            last_event_at=pl.col("timestamp").last(),
            open=~pl.col("closes_turn").any(),
            model=pl.coalesce(
                pl.col("model").filter(_MESSAGE).drop_nulls().first(),
                pl.col("model").filter(TYPE.str.starts_with("tool.")).drop_nulls().first(),
                pl.col("session_model").first(),
            ),
            **_call_figures(),
            task_complete_called=(
                (TYPE == "tool.execution_start") & (pl.col("tool_name") == "task_complete")
            ).any()
            | _REQUESTS.struct.field("name").is_in(["task_complete"]).any(),
            task_complete_event=(TYPE == "session.task_complete").any(),
        )
        .with_columns(
            duration_ms=(pl.col("ended_at") - pl.col("started_at")).dt.total_milliseconds(),
            ended_loop=(pl.col("messages") > 0) & (pl.col("requested_tools").list.len() == 0),
        )
    )


def tools(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per tool execution, start joined to complete by toolCallId.

    A complete with no start (a ``!cmd`` shell escape, or damage) still has a row, with
    ``started_at`` null; a start never completed has ``completed_at`` null.
    """
    keys = [*SESSION, "tool_call_id"]
    starts = annotated.filter(TYPE == "tool.execution_start").select(
        *keys,
        "agent_id",
        "tool_name",
        start_line=pl.col("line"),
        start_event_id=pl.col("event_id"),
        started_at=pl.col("timestamp"),
        turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")),
        interaction_index="interaction_index",
        arguments=pl.col("text"),
    )
    completes = annotated.filter(TYPE == "tool.execution_complete").select(
        *keys,
        complete_agent_id=pl.col("agent_id"),
        complete_line=pl.col("line"),
        complete_event_id=pl.col("event_id"),
        completed_at=pl.col("timestamp"),
        success="success",
        error="error",
        is_user_requested=pl.col("is_user_requested").fill_null(False),
        result=pl.col("text"),
        complete_turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")),
    )
    # Keep the first complete per call: a duplicated complete is a validate finding, not a
    # second execution.
    completes = completes.unique(subset=keys, keep="first", maintain_order=True)
    starts = starts.unique(subset=keys, keep="first", maintain_order=True)
    joined = starts.join(completes, on=keys, how="full", coalesce=True, nulls_equal=False)
    return (
        joined.with_columns(
            agent_id=pl.coalesce("agent_id", "complete_agent_id"),
            turn_index=pl.coalesce("turn_index", "complete_turn_index"),
            is_user_requested=pl.col("is_user_requested").fill_null(False),
            duration_ms=(pl.col("completed_at") - pl.col("started_at")).dt.total_milliseconds(),
            line=pl.coalesce("start_line", "complete_line"),
        )
        .drop("complete_agent_id", "complete_turn_index")
        .select("file", "tool_call_id", "session_id", pl.exclude(*keys))
        .sort(*SESSION, "line")
    )


def subagent_runs(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent run: started, then completed or failed, keyed by toolCallId."""
    keys = [*SESSION, "tool_call_id"]
    started = annotated.filter(TYPE == "subagent.started").select(
        *keys,
        agent_name="tool_name",
        start_line="line",
        started_at="timestamp",
        model="model",
        turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")),
    )
    finished = (
        annotated.filter(TYPE.is_in(["subagent.completed", "subagent.failed"]))
        .select(
            *keys,
            end_line="line",
            finished_at="timestamp",
            success="success",
            error="error",
        )
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    inner = (
        annotated.filter(pl.col("agent_id").is_not_null())
        .group_by(*SESSION, pl.col("agent_id").alias("tool_call_id"))
        .agg(
            llm_calls=pl.col("subagent_call").sum().cast(pl.Int64),
            tool_calls=(TYPE == "tool.execution_start").sum().cast(pl.Int64),
            failed_tool_calls=((TYPE == "tool.execution_complete") & (pl.col("success") == False))  # noqa: E712
            .sum()
            .cast(pl.Int64),
            output_tokens=pl.col("output_tokens").filter(TYPE == "assistant.message").sum(),
        )
    )
    runs = started.unique(subset=keys, keep="first", maintain_order=True).join(
        finished, on=keys, how="full", coalesce=True
    )
    return (
        runs.join(inner, on=keys, how="left")
        .with_columns(
            status=pl.when(pl.col("success") == True)  # noqa: E712
            .then(pl.lit("completed"))
            .when(pl.col("success") == False)  # noqa: E712
            .then(pl.lit("failed"))
            .otherwise(pl.lit("running")),
            duration_ms=(pl.col("finished_at") - pl.col("started_at")).dt.total_milliseconds(),
            llm_calls=pl.col("llm_calls").fill_null(0),
            tool_calls=pl.col("tool_calls").fill_null(0),
            failed_tool_calls=pl.col("failed_tool_calls").fill_null(0),
        )
        .sort(*SESSION, pl.coalesce("start_line", "end_line"))
    )


def subagent_calls(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-agent LLM call: a sub-agent's lines from a line that is a call (its
    turn_start where it writes turn pairs, else its first message line of the call) up to its
    next call. ``previous_at`` is the time of that agent's line before the call (where it
    writes no turn pair, the call is taken to start then); ``ended_at`` and ``open`` come from
    its turn_end, and are null where it writes none. ``call_index`` numbers the calls of each
    sub-agent from 1."""
    turn_start = (TYPE == TURN_START).first()
    agents = annotated.filter(pl.col("agent_id").is_not_null()).with_columns(
        previous_at=pl.col("timestamp").shift(1).over(*SESSION, "agent_id"),
        call_index=pl.col("subagent_call").cum_sum().over(*SESSION, "agent_id").cast(pl.Int64),
    )
    return (
        agents.filter(pl.col("call_index") > 0)
        .group_by(*SESSION, "agent_id", "call_index", maintain_order=True)
        .agg(
            turn_index=pl.when(pl.col("during_turn")).then(pl.col("turn_index")).first(),
            interaction_index=pl.col("interaction_index").first(),
            turn_id=pl.col("turn_id").first(),
            interaction_id=pl.col("interaction_id").first(),
            event_id=pl.col("event_id").first(),
            line=pl.col("line").first(),
            timestamp=pl.col("timestamp").first(),
            previous_at=pl.when(turn_start).then(None).otherwise(pl.col("previous_at").first()),
            ended_at=pl.col("timestamp").filter(TYPE == TURN_END).first(),
            last_event_at=pl.col("timestamp").last(),
            open=pl.when(turn_start).then(~(TYPE == TURN_END).any()),
            model=pl.coalesce(
                pl.col("model").filter(_MESSAGE).drop_nulls().first(),
                pl.col("session_model").first(),
            ),
            **_call_figures(),
        )
        .with_columns(
            duration_ms=(pl.col("ended_at") - pl.col("timestamp")).dt.total_milliseconds(),
            ended_loop=(pl.col("messages") > 0) & (pl.col("requested_tools").list.len() == 0),
        )
    )


def _call_flags(frame: pl.DataFrame) -> pl.Series:
    """Whether each row (in reading order) is an LLM call: the kernel's verdict on the turn
    starts and sub-agent messages, per session log."""
    candidates = (
        frame.with_row_index("_row")
        .filter(TYPE.is_in(list(CALL_TYPES)))
        .select(
            "_row",
            *SESSION,
            "type",
            "agent_instance",
            "parent_tool_call_id",
            "message_id",
            "chunk_index",
        )
    )
    counters: dict[tuple[str, str], CallCounter] = {}
    flags = [False] * frame.height
    for row, file, session, kind, agent, parent, message_id, chunk in candidates.iter_rows():
        counter = counters.setdefault((file, session), CallCounter())
        flags[row] = counter.add(kind, cli_format.writer(agent, parent), message_id, chunk)
    return pl.Series("llm_call", flags, dtype=pl.Boolean)


def count_flags(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per event, a column for every figure ``count`` reports (0 or 1, but a fusion
    completion's phase count); sums give the counts."""
    start = MAIN & (TYPE == TURN_START)
    user = MAIN & (TYPE == "user.message")
    return annotated.with_columns(
        llm_calls=MAIN & pl.col("llm_call"),
        completed_turns=start & pl.col("turn_closed"),
        open_turns=start & ~pl.col("turn_closed"),
        subagent_calls=pl.col("subagent_call"),
        interactions=user & ~pl.col("is_queued"),
        user_prompts=user & ~pl.col("is_nudge"),
        autopilot_nudges=user & pl.col("is_nudge"),
        tool_calls=MAIN & (TYPE == "tool.execution_start"),
        failed_tool_calls=MAIN
        & (TYPE == "tool.execution_complete")
        & (pl.col("success") == False)  # noqa: E712
        & ~pl.col("is_user_requested").fill_null(False),
        subagent_tool_calls=pl.col("agent_id").is_not_null() & (TYPE == "tool.execution_start"),
        fusion_calls=cli_format.fusion_calls().over(*SESSION),
    ).with_columns(pl.col(name).cast(pl.Int64) for name in COUNT_FIELDS)


def session_facts(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per session: what session.start says (start, cwd, repository, branch, CLI version)."""
    start = pl.col("detail").filter(TYPE == "session.start").first()
    facts = annotated.group_by(*SESSION, maintain_order=True).agg(
        _start_detail=start,
        first_at=pl.col("timestamp").min(),
        last_at=pl.col("timestamp").max(),
        events=pl.len().cast(pl.Int64),
    )
    detail = pl.col("_start_detail")
    return facts.with_columns(
        started_at=pl.coalesce(
            log_times(detail.str.json_path_match("$.startTime")),
            pl.col("first_at"),
        ),
        cwd=detail.str.json_path_match("$.context.cwd"),
        repository=detail.str.json_path_match("$.context.repository"),
        branch=detail.str.json_path_match("$.context.branch"),
        copilot_version=detail.str.json_path_match("$.copilotVersion"),
    ).drop("_start_detail")
