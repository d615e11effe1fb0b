"""The session model: what a session *is*, derived once from the events frame, for every
command to read (docs/architecture.md, "The session model").

Per event (:func:`annotate`): its segment (run of the CLI), turn, interaction, prompt and task,
whether it is an LLM call, what a completion decided, the payload fields of lifecycle events.
From those, the agent loop (:func:`turns`, :func:`tools`, :func:`subagent_runs`,
:func:`subagent_calls`), each row with its segment and what became of it if left open; and per
segment and per session (:func:`segments`, :func:`session_facts`) when it started and ended.
A session log is keyed by :data:`SESSION` (a file, or stdin, can hold several sessions);
sequences are computed per session in reading order. No command decides these things again,
and nothing outside :mod:`copilot_logs.ingest` and this package parses payload JSON.
"""

from __future__ import annotations

import weakref
from datetime import UTC, datetime, timedelta

import polars as pl

from copilot_logs.ingest import cli_format
from copilot_logs.ingest.calls import CALL_TYPES, CallCounter
from copilot_logs.ingest.calls import TURN_START as TURN_START
from copilot_logs.ingest.schema import log_times

MAIN = pl.col("agent_id").is_null()
TYPE = pl.col("type")

SESSION = ("file", "session_id")
"""The key of one session log: group, join and window by it, never by ``file`` alone."""
SEGMENT = (*SESSION, "segment")
"""The key of one segment: one run of the CLI inside a session log."""

TURN_END = "assistant.turn_end"
SHUTDOWN = "session.shutdown"
RESUME = "session.resume"
TASK_COMPLETE = "session.task_complete"

SEGMENT_STARTS = ("session.start", RESUME)
"""A run of the CLI begins with its session.start, and each resume (``--resume``, ``/resume``)
appends a session.resume to the same file and begins another."""
WORK = ("user.message", TURN_START, "assistant.message", "tool.execution_start")
"""Events that mean the run was working when they were written: a shutdown after the last of
them ended the run."""

# How a segment ended (``segment_end``).
ENDED_BY_SHUTDOWN = "shutdown"
KILLED = "killed"
"""No shutdown after its last work, and the session was resumed later (the real CLI writes
nothing on SIGKILL)."""
OPEN = "open"
"""The last segment, with no shutdown after its last work: running or cut off (:func:`running`
judges which)."""

# What a task_complete decided (``completion``), the one definition every command reads.
ACCEPTED = "accepted"
REJECTED = "rejected"
"""``success: false``, or the outcome ``continue``: the task goes on."""
BLOCKED = "blocked"
"""The outcome ``blocked``: not done, and a call after it takes the task up again."""

# What became of something left open (a turn, a tool, a sub-agent call): :func:`open_state`.
CLOSED = "closed"
INTERRUPTED = "interrupted"
OPEN_AT_SHUTDOWN = "open-at-shutdown"
STILL_OPEN = "open"

RUNNING = "running"
CUT_OFF = "cut-off"
DEFAULT_RUNNING_WITHIN = timedelta(minutes=10)

INTERRUPTED_CODE = "interrupted"
"""The error code of the ``tool.execution_complete`` CLI 1.0.102 writes on resume for a tool its
killed run left running."""

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

LIFECYCLE: dict[str, tuple[tuple[str, ...], str, pl.DataType]] = {
    "copilot_version": (("session.start", RESUME), "$.copilotVersion", pl.String()),
    "start_time": (("session.start",), "$.startTime", pl.String()),
    "cwd": (("session.start", RESUME), "$.context.cwd", pl.String()),
    "repository": (("session.start", RESUME), "$.context.repository", pl.String()),
    "branch": (("session.start", RESUME), "$.context.branch", pl.String()),
    "claimed_session_id": (("session.start",), "$.sessionId", pl.String()),
    "shutdown_type": ((SHUTDOWN,), "$.shutdownType", pl.String()),
    "event_count": ((RESUME,), "$.eventCount", pl.Float64()),
    "file_size": ((RESUME, SHUTDOWN), "$.eventsFileSizeBytes", pl.Float64()),
    "summary": ((TASK_COMPLETE,), "$.summary", pl.String()),
    "blocker": ((TASK_COMPLETE,), "$.blocker", pl.String()),
    "blocker_kind": ((TASK_COMPLETE,), "$.blocker.kind", pl.String()),
    "blocker_reason": ((TASK_COMPLETE,), "$.blocker.reason", pl.String()),
    "stop_reason": (("session.completion_receipt",), "$.stopReason", pl.String()),
    "stopped_reason": (("session.autopilot_stopped",), "$.reason", pl.String()),
    "info_type": (("session.info",), "$.infoType", pl.String()),
    "warning_type": (("session.warning",), "$.warningType", pl.String()),
    "tokens_removed": (("session.compaction_complete",), "$.tokensRemoved", pl.Int64()),
    "compaction_success": (("session.compaction_complete",), "$.success", pl.Boolean()),
    "compaction_error": (("session.compaction_complete",), "$.error", pl.String()),
    "previous_mode": (("session.mode_changed",), "$.previousMode", pl.String()),
    "previous_model": (("session.model_change",), "$.previousModel", pl.String()),
}
"""The payload fields of lifecycle events that commands read: column -> (the types that carry
it, its path in ``data``, its type), read once from the ``detail`` column; null on other types."""


def _lifecycle_fields() -> list[pl.Expr]:
    fields = []
    for name, (types, path, dtype) in LIFECYCLE.items():
        value = pl.col("detail").str.json_path_match(path)
        typed: pl.Expr
        if dtype == pl.Boolean():
            typed = pl.when(value == "true").then(True).when(value == "false").then(False)
        else:
            typed = value.cast(dtype, strict=False)
        fields.append(pl.when(TYPE.is_in(types)).then(typed).alias(name))
    return fields


_USER = MAIN & (TYPE == "user.message")
_NUDGE = _USER & pl.col("is_nudge").fill_null(False)
_MAIN_TURN = MAIN & (TYPE == TURN_START)
_MESSAGE = TYPE == "assistant.message"
_FAILED_TOOL = (TYPE == "tool.execution_complete") & (pl.col("success") == False)  # noqa: E712
_REJECTED = (pl.col("success") == False).fill_null(False) | (  # noqa: E712
    pl.col("outcome") == "continue"
).fill_null(False)


def completion() -> pl.Expr:
    """Per event: what a main-agent ``session.task_complete`` decided (:data:`ACCEPTED`,
    :data:`REJECTED` or :data:`BLOCKED`); null on every other event."""
    return (
        pl.when(~(MAIN & (TYPE == TASK_COMPLETE)))
        .then(pl.lit(None, pl.String))
        .when((pl.col("outcome") == "blocked").fill_null(False))
        .then(pl.lit(BLOCKED))
        .when(_REJECTED)
        .then(pl.lit(REJECTED))
        .otherwise(pl.lit(ACCEPTED))
    )


ACCEPTED_COMPLETION = pl.col("completion") == ACCEPTED

_LAST: list[tuple[weakref.ref[pl.DataFrame], pl.DataFrame]] = []
"""The last frame annotated and its annotation: a batch that several commands read (``report``,
``export``, ``diff``) is annotated once."""


def annotate(events: pl.DataFrame) -> pl.DataFrame:
    """:func:`annotated` of ``events``, computed once for the same frame."""
    if _LAST and _LAST[0][0]() is events:
        return _LAST[0][1]
    found = annotated(events)
    _LAST[:] = [(weakref.ref(events), found)]
    return found


def annotated(events: pl.DataFrame) -> pl.DataFrame:
    """The events frame with the columns of the session model, in reading order per session.

    - ``agent_id``: the sub-agent's key (its task call's toolCallId), whatever scheme the CLI
      marks it by; null for the main agent. ``agent_instance``: the envelope agentId as written.
    - ``segment``: the run of the CLI, from 1: a new one at each session.start or
      session.resume after the log's first line. ``segment_end``: how that run ended
      (:data:`ENDED_BY_SHUTDOWN`, :data:`KILLED`, :data:`OPEN`); ``segment_shutdown_line``.
    - ``turn_index``: the main-agent turn (0 before any); the event belongs to it only while
      ``in_turn``. ``during_turn``: the same for events of any agent. A turn left open when
      its run ended never takes in the next run's lines.
    - ``closes_turn`` / ``stray_end``: a turn_end that closes the open turn, or that has none;
      ``turn_closed``: on every row of a turn, whether a turn_end closed it.
    - ``is_queued``: :func:`queued_message`. ``interaction_index``: main-agent user messages
      not queued so far. ``prompt_index``: :data:`TASK_START` s so far; ``task_index``: the
      same, with a new task also after each accepted completion.
    - ``completion``, ``autopilot_work``: :func:`completion`, :func:`autopilot_work`.
    - ``session_model``: the model the session's model events named last (``auto`` skipped).
    - ``llm_call``: an LLM call of either agent, as :class:`~copilot_logs.ingest.calls.
      CallCounter` decides it (the one rule); ``subagent_call``: a sub-agent's.
    - the lifecycle payload fields of :data:`LIFECYCLE`.
    """
    is_end = MAIN & (TYPE == TURN_END)
    marker = pl.when(_MAIN_TURN).then(pl.lit("start")).when(is_end).then(pl.lit("end"))
    named_model = pl.when(
        TYPE.is_in(["session.model_change", "session.auto_mode_resolved", "session.start"])
        & (pl.col("model") != "auto")
    ).then(pl.col("model"))
    frame = cli_format.keyed(events.sort("file", "line")).with_columns(
        *_lifecycle_fields(),
        segment=segment_number(),
        turn_index=_MAIN_TURN.cum_sum().over(*SESSION).cast(pl.Int64),
        is_queued=queued_message().over(*SESSION),
        session_model=named_model.forward_fill().over(*SESSION),
        completion=completion(),
    )
    frame = frame.with_columns(
        _marker=marker.forward_fill().over(*SEGMENT),
        interaction_index=(_USER & ~pl.col("is_queued")).cum_sum().over(*SESSION).cast(pl.Int64),
        prompt_index=TASK_START.cum_sum().over(*SESSION).cast(pl.Int64),
        task_index=(TASK_START | ACCEPTED_COMPLETION.shift(1).fill_null(False))
        .cum_sum()
        .over(*SESSION)
        .cast(pl.Int64),
        autopilot_work=autopilot_work().over(*SESSION),
        **_segment_ends(),
    )
    previous = pl.col("_marker").shift(1).over(*SEGMENT)
    frame = frame.with_columns(
        closes_turn=is_end & (previous == "start"),
        stray_end=is_end & (previous.is_null() | (previous == "end")),
    )
    in_turn = (pl.col("_marker") == "start") | pl.col("closes_turn")
    frame = frame.with_columns(llm_call=_call_flags(frame)).with_columns(
        subagent_call=pl.col("llm_call") & pl.col("agent_id").is_not_null(),
        during_turn=in_turn,
        in_turn=MAIN & in_turn,
        turn_closed=pl.col("closes_turn").any().over(*SESSION, "turn_index"),
    )
    return frame.drop("_marker")


def segment_number() -> pl.Expr:
    """Per event, in reading order: its segment, from 1 (see :func:`annotated`)."""
    # A session's first row, in a frame sorted by file and line (a session's rows follow one
    # another: the reader gives each event the session of the session.start it follows).
    first_row = pl.any_horizontal(pl.col(key).ne_missing(pl.col(key).shift(1)) for key in SESSION)
    starts = TYPE.is_in(SEGMENT_STARTS) & ~first_row
    return (starts.cum_sum().over(*SESSION) + 1).cast(pl.Int64)


def last_run_ended(events: pl.DataFrame) -> bool:
    """Whether the last run of the last session of ``events`` (one file's, not annotated) shut
    down after its last work: for what asks at every poll without annotating (watch)."""
    if events.is_empty():
        return False
    ends = events.sort("line").with_columns(segment=segment_number())
    return bool(ends.with_columns(**_segment_ends())["segment_end"][-1] == ENDED_BY_SHUTDOWN)


def _segment_ends() -> dict[str, pl.Expr]:
    shutdown_line = pl.col("line").filter(TYPE == SHUTDOWN).max().over(*SEGMENT)
    last_work = pl.col("line").filter(TYPE.is_in(WORK)).max().over(*SEGMENT)
    resumed = pl.col("segment") < pl.col("segment").max().over(*SESSION)
    shut_down = shutdown_line.is_not_null() & (shutdown_line > last_work.fill_null(0))
    return {
        "segment_shutdown_line": shutdown_line,
        "segment_end": pl.when(shut_down)
        .then(pl.lit(ENDED_BY_SHUTDOWN))
        .when(resumed)
        .then(pl.lit(KILLED))
        .otherwise(pl.lit(OPEN)),
    }


def open_state(is_open: pl.Expr, line: str = "line") -> pl.Expr:
    """What became of something that began on ``line`` and is open when ``is_open``, from the
    ``segment_end`` and ``segment_shutdown_line`` of its row: :data:`CLOSED`,
    :data:`OPEN_AT_SHUTDOWN` (its own run shut down after it began: the user ended the session
    while it ran), :data:`INTERRUPTED` (its run was killed and the session resumed: no CLI
    version closes the killed turn), else :data:`STILL_OPEN`."""
    return (
        pl.when(~is_open.fill_null(False))
        .then(pl.lit(CLOSED))
        .when((pl.col("segment_shutdown_line") > pl.col(line)).fill_null(False))
        .then(pl.lit(OPEN_AT_SHUTDOWN))
        .when(pl.col("segment_end") == KILLED)
        .then(pl.lit(INTERRUPTED))
        .otherwise(pl.lit(STILL_OPEN))
    )


def queued_message() -> pl.Expr:
    """Per event: a main-agent ``user.message`` (not a nudge) whose interactionId is the one
    of the last main-agent prompt or turn_start before it. The CLI queues a message typed while
    a turn runs and writes it into that turn with the running interaction's id: a prompt that
    starts no new interaction (or task). A window in reading order: use it ``.over(*SESSION)``.
    """
    carries = pl.when(_USER | _MAIN_TURN).then(pl.col("interaction_id"))
    under_way = carries.shift(1).forward_fill()
    return (
        _USER
        & ~pl.col("is_nudge").fill_null(False)
        & pl.col("interaction_id").is_not_null()
        & (pl.col("interaction_id") == under_way)
    ).fill_null(False)


TASK_START = _USER & ~pl.col("is_nudge").fill_null(False) & ~pl.col("is_queued").fill_null(False)
"""A typed prompt that starts a task (not a nudge, nor queued into a run)."""


def autopilot_work() -> pl.Expr:
    """Per event: main-agent work done in autopilot: a nudge, or a prompt or turn_start while
    the mode in effect (the last ``session.mode_changed`` newMode or ``user.message``
    agentMode before it) is autopilot; a switch with no work after it makes nothing autopilot.
    A window in reading order: use it ``.over(*SESSION)``."""
    in_effect = pl.when(MAIN).then(pl.col("agent_mode")).forward_fill()
    work = MAIN & TYPE.is_in(["user.message", TURN_START])
    return (work & (in_effect == "autopilot")).fill_null(False) | _NUDGE


def _call_flags(frame: pl.DataFrame) -> pl.Series:
    """Whether each row (in reading order) is an LLM call: the kernel's verdict, per session."""
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


# --- the agent loop ---------------------------------------------------------------------------


def session_model() -> pl.Expr:
    """The model a session is listed under: the one most main-agent replies name (on a tie,
    that of the latest reply among them); with none, the last model the session set. An
    aggregation in reading order, per session."""
    replies = pl.col("model").filter(MAIN & _MESSAGE).drop_nulls()
    most_named = replies.filter(replies.is_in(replies.mode().implode()))
    return pl.coalesce(most_named.last(), pl.col("session_model").drop_nulls().last())


_REQUESTS = pl.col("tool_requests").filter(_MESSAGE).explode().drop_nulls()


def _call_figures() -> dict[str, pl.Expr]:
    """What an LLM call (a main-agent turn or a sub-agent call) did, over its lines."""
    return {
        "messages": _MESSAGE.sum().cast(pl.Int64),
        "text": pl.col("text").filter(_MESSAGE & (pl.col("text") != "")).first(),
        "output_tokens": pl.col("output_tokens").filter(_MESSAGE).sum(),
        "requested_tools": _REQUESTS.struct.field("name"),
        "tool_calls": (TYPE == "tool.execution_start").sum().cast(pl.Int64),
        "failed_tool_calls": _FAILED_TOOL.sum().cast(pl.Int64),
    }


def _call_place() -> dict[str, pl.Expr]:
    """Where a call sits, from its first line: its interaction, prompt, task and segment."""
    names = ("interaction_index", "prompt_index", "task_index", "segment", "segment_end")
    return {name: pl.col(name).first() for name in (*names, "segment_shutdown_line")}


def _call_ends(start: str) -> dict[str, pl.Expr]:
    return {
        "duration_ms": (pl.col("ended_at") - pl.col(start)).dt.total_milliseconds(),
        "ended_loop": (pl.col("messages") > 0) & (pl.col("requested_tools").list.len() == 0),
    }


def turns(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per main-agent turn (one LLM call), in order, open turns included."""
    return (
        annotated.filter(pl.col("in_turn"))
        .group_by(*SESSION, "turn_index", maintain_order=True)
        .agg(
            **_call_place(),
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
            task_complete_event=(TYPE == TASK_COMPLETE).any(),
        )
        .with_columns(**_call_ends("started_at"), state=open_state(pl.col("open")))
        .drop("segment_end", "segment_shutdown_line")
    )


def tools(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per tool execution, start joined to complete by toolCallId: a complete with no
    start (a ``!cmd`` shell escape, or damage) has ``started_at`` null; a start never
    completed, ``completed_at`` null. A duplicated start or complete is validate's finding,
    not a second execution: the first is kept."""
    keys = [*SESSION, "tool_call_id"]
    turn = pl.when(pl.col("during_turn")).then(pl.col("turn_index"))
    starts = annotated.filter(TYPE == "tool.execution_start").select(
        *keys,
        "agent_id",
        "tool_name",
        "segment",
        "segment_end",
        "segment_shutdown_line",
        start_line="line",
        start_event_id="event_id",
        started_at="timestamp",
        turn_index=turn,
        interaction_index="interaction_index",
        arguments="text",
    )
    completes = annotated.filter(TYPE == "tool.execution_complete").select(
        *keys,
        complete_agent_id="agent_id",
        complete_line="line",
        complete_event_id="event_id",
        completed_at="timestamp",
        success="success",
        error="error",
        error_code="error_code",
        is_user_requested=pl.col("is_user_requested").fill_null(False),
        result="text",
        complete_turn_index=turn,
        complete_segment="segment",
    )
    joined = starts.unique(subset=keys, keep="first", maintain_order=True).join(
        completes.unique(subset=keys, keep="first", maintain_order=True),
        on=keys,
        how="full",
        coalesce=True,
        nulls_equal=False,
    )
    # CLI 1.0.102 closes a tool its killed run left running when the session is resumed, with
    # the error code `interrupted` (tests/recordings/1.0.102/kill-resume): its time to that
    # note is no run time.
    interrupted = (pl.col("error_code") == INTERRUPTED_CODE).fill_null(False)
    left_open = pl.col("started_at").is_not_null() & pl.col("completed_at").is_null()
    return (
        joined.with_columns(
            agent_id=pl.coalesce("agent_id", "complete_agent_id"),
            turn_index=pl.coalesce("turn_index", "complete_turn_index"),
            segment=pl.coalesce("segment", "complete_segment"),
            is_user_requested=pl.col("is_user_requested").fill_null(False),
            duration_ms=pl.when(~interrupted).then(
                (pl.col("completed_at") - pl.col("started_at")).dt.total_milliseconds()
            ),
            line=pl.coalesce("start_line", "complete_line"),
            state=pl.when(interrupted)
            .then(pl.lit(INTERRUPTED))
            .otherwise(open_state(left_open, "start_line")),
        )
        .drop(
            "complete_agent_id",
            "complete_turn_index",
            "complete_segment",
            "segment_end",
            "segment_shutdown_line",
        )
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
    finished = annotated.filter(TYPE.is_in(["subagent.completed", "subagent.failed"])).select(
        *keys, end_line="line", finished_at="timestamp", success="success", error="error"
    )
    inner = (
        annotated.filter(pl.col("agent_id").is_not_null())
        .group_by(*SESSION, pl.col("agent_id").alias("tool_call_id"))
        .agg(
            llm_calls=pl.col("subagent_call").sum().cast(pl.Int64),
            tool_calls=(TYPE == "tool.execution_start").sum().cast(pl.Int64),
            failed_tool_calls=_FAILED_TOOL.sum().cast(pl.Int64),
            output_tokens=pl.col("output_tokens").filter(_MESSAGE).sum(),
        )
    )
    runs = started.unique(subset=keys, keep="first", maintain_order=True).join(
        finished.unique(subset=keys, keep="first", maintain_order=True),
        on=keys,
        how="full",
        coalesce=True,
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
    """One row per sub-agent LLM call: its lines from a line that is a call (its turn_start
    where it writes turn pairs, else the first message line of the call) up to its next call.
    ``previous_at``: the time of that agent's line before the call (where it writes no turn
    pair, the call is taken to start then); ``ended_at`` and ``open`` come from its turn_end,
    null where it writes none. ``call_index`` numbers each sub-agent's calls from 1."""
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
            **_call_place(),
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
            **_call_ends("timestamp"),
            # Where the agent writes no turn pair (``open`` null), what became of the call had
            # it been left open: the timeline asks it of the last call of a running sub-agent.
            state=open_state(pl.col("open").fill_null(True)),
        )
        .drop("segment_end", "segment_shutdown_line")
    )


def count_flags(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per event, a column for every figure ``count`` reports (0 or 1, but a fusion
    completion's phase count); sums give the counts."""
    return annotated.with_columns(
        llm_calls=MAIN & pl.col("llm_call"),
        completed_turns=_MAIN_TURN & pl.col("turn_closed"),
        open_turns=_MAIN_TURN & ~pl.col("turn_closed"),
        subagent_calls=pl.col("subagent_call"),
        interactions=_USER & ~pl.col("is_queued"),
        user_prompts=_USER & ~pl.col("is_nudge"),
        autopilot_nudges=_USER & pl.col("is_nudge"),
        tool_calls=MAIN & (TYPE == "tool.execution_start"),
        failed_tool_calls=MAIN & _FAILED_TOOL & ~pl.col("is_user_requested").fill_null(False),
        subagent_tool_calls=pl.col("agent_id").is_not_null() & (TYPE == "tool.execution_start"),
        fusion_calls=cli_format.fusion_calls().over(*SESSION),
    ).with_columns(pl.col(name).cast(pl.Int64) for name in COUNT_FIELDS)


# --- segments, prompts, sessions --------------------------------------------------------------


def newest_first(frame: pl.DataFrame) -> pl.DataFrame:
    """Session rows newest first; ties (two sessions of one file may start at one moment) by
    file and session id, so that the order never depends on batches."""
    return frame.sort("started_at", *SESSION, descending=[True, False, False], nulls_last=True)


def segments(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per segment (run of the CLI) of each session log, in order: how it began
    (``session.start``, ``session.resume``, or null when the log lost its first line), its
    lines and times, its last shutdown and its type, how it ended (``end``), its LLM calls
    (``llm_calls`` of the main agent, ``subagent_calls``) and the main-agent turns it left open."""
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
        turns_left_open=(_MAIN_TURN & ~pl.col("turn_closed")).sum().cast(pl.Int64),
    )


def after(column: str, *others: str) -> pl.Expr:
    """``column`` is set and lies after every one of ``others`` (a missing one counts as 0)."""
    return pl.col(column).is_not_null() & pl.all_horizontal(
        pl.col(column) > pl.col(other).fill_null(0) for other in others
    )


def prompt_positions() -> dict[str, pl.Expr]:
    """Aggregations over one task's events (a typed prompt and all it caused): where its last
    completion (``tc_line``, deciding ``last_completion``), main-agent error, nudge and
    turn_start sit."""
    completions = pl.col("completion").is_not_null()
    return {
        "tc_line": pl.col("line").filter(completions).max(),
        "last_completion": pl.col("completion").filter(completions).last(),
        "error_line": pl.col("line").filter(MAIN & (TYPE == "session.error")).max(),
        "nudge_line": pl.col("line").filter(_NUDGE).max(),
        "turn_line": pl.col("line").filter(_MAIN_TURN).max(),
    }


def completion_is_last() -> pl.Expr:
    """On a task's :func:`prompt_positions`: its last completion decides the task, since no
    error, nudge or main-agent LLM call came after it (every CLI recorded, 1.0.20 to 1.0.102,
    ends the loop at task_complete: a call after it means the task was taken up again)."""
    return after("tc_line", "error_line", "nudge_line", "turn_line")


def prompts(annotated: pl.DataFrame) -> pl.DataFrame:
    """One row per task (``prompt_index``) of each session log: its :func:`prompt_positions`,
    ``autopilot`` work, and ``completed`` (its last completion is accepted and last)."""
    return (
        annotated.group_by(*SESSION, "prompt_index", maintain_order=True)
        .agg(**prompt_positions(), autopilot=pl.col("autopilot_work").any())
        .with_columns(completed=completion_is_last() & (pl.col("last_completion") == ACCEPTED))
    )


def judged_prompt(autopilot: str = "autopilot") -> pl.Expr:
    """The task a session is judged on: its last one with autopilot work, else its last one
    (an aggregation per session over its :func:`prompts` or annotated events)."""
    index = pl.col("prompt_index")
    return pl.coalesce(index.filter(pl.col(autopilot)).max(), index.max())


def session_facts(annotated: pl.DataFrame) -> pl.DataFrame:
    """Per session log: what session.start says (start, cwd, repository, branch, CLI version),
    its first and last event, its segments; ``ended`` when its last run shut down after its
    last work (``end``: how that run ended); ``mode``, ``model``; ``summary`` (its last
    task_complete's); ``completed``: the task it is judged on (:func:`judged_prompt`) is."""
    start = TYPE == "session.start"
    facts = annotated.group_by(*SESSION, maintain_order=True).agg(
        started_at=pl.coalesce(
            log_times(pl.col("start_time")).filter(start).first(), pl.col("timestamp").min()
        ),
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
        .filter(pl.col("prompt_index") == judged_prompt().over(*SESSION))
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
    """``autopilot`` when the log shows :func:`autopilot_work`, else ``interactive`` (an
    aggregation over annotated events, per session)."""
    return (
        pl.when(pl.col("autopilot_work").any())
        .then(pl.lit("autopilot"))
        .otherwise(pl.lit("interactive"))
    )


def recent(
    last_event_at: pl.Expr, now: datetime | None = None, within: timedelta = DEFAULT_RUNNING_WITHIN
) -> pl.Expr:
    """Whether a last event is within ``within`` of ``now`` (default: the time now), before or
    after: a log whose clock runs a little ahead still counts; a last event days in the future
    never does (else a forged time would be running for ever and pass every gate)."""
    now = now or datetime.now(UTC)
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return last_event_at.is_between(pl.lit(now - within), pl.lit(now + within)).fill_null(False)


def running(
    end: pl.Expr,
    last_event_at: pl.Expr,
    now: datetime | None = None,
    within: timedelta = DEFAULT_RUNNING_WITHIN,
) -> pl.Expr:
    """How a session's last run stands at ``now``: its ``end`` when it ended, else
    :data:`RUNNING` when its last event is :func:`recent`, else :data:`CUT_OFF`."""
    return (
        pl.when(end != OPEN)
        .then(end)
        .when(recent(last_event_at, now, within))
        .then(pl.lit(RUNNING))
        .otherwise(pl.lit(CUT_OFF))
    )
