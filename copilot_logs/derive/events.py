"""Per event, what the session model says of it: the run of the CLI (segment), turn,
interaction, prompt and task it falls in, whether it is an LLM call, what a completion decided,
and the payload fields of lifecycle events, read once from their ``detail``.

A session log is one session of a file, keyed by :data:`SESSION` (a file, or stdin, can hold
several sessions: the reader gives each event the sessionId of the session.start it follows);
sequences are computed per session in reading order.
"""

from __future__ import annotations

import weakref

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
"""Events that mean the run was working (and using the model) when they were written: a
shutdown after the last of them ended the run."""

# How a segment ended (``segment_end``).
ENDED_BY_SHUTDOWN = "shutdown"
"""A session.shutdown came after the segment's last work: the CLI exited and said so."""
KILLED = "killed"
"""No shutdown after its last work, and the session was resumed later: the CLI was killed or
crashed (the real CLI writes nothing on SIGKILL), and a later run took the session up again."""
OPEN = "open"
"""The last segment, with no shutdown after its last work: still running, or cut off (which
of the two is a judgment about the time now: :func:`copilot_logs.derive.sessions.running`)."""

# What a task_complete decided (``completion``), the one definition every command reads.
ACCEPTED = "accepted"
"""The task is done: success not false, outcome ``completed`` or none."""
REJECTED = "rejected"
"""``success: false``, or the outcome ``continue``: more work or validation remains, the task
goes on."""
BLOCKED = "blocked"
"""The outcome ``blocked`` (with a ``blocker``): the task cannot go on without a person. It
is not done: a call after it takes the task up again."""

# States of something left open (a turn, a tool, a sub-agent call): ``open_state``.
CLOSED = "closed"
INTERRUPTED = "interrupted"
"""Open when its run was killed and the session later resumed: the CLI's own shape after a
crash or a kill (no version closes the killed turn)."""
OPEN_AT_SHUTDOWN = "open-at-shutdown"
"""Open at a shutdown of its own run: the user ended the session while it ran."""
STILL_OPEN = "open"
"""Open at the end of the log: still running, or cut off."""

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
it, its path in ``data``, its type). Read here once, from the ``detail`` column the reader keeps
for these types; a value of another type is null (a malformed one is validate's to report)."""


def _lifecycle_fields() -> list[pl.Expr]:
    detail = pl.col("detail")
    fields = []
    for name, (types, path, dtype) in LIFECYCLE.items():
        value = detail.str.json_path_match(path)
        typed: pl.Expr
        if dtype == pl.Boolean():
            typed = pl.when(value == "true").then(True).when(value == "false").then(False)
        else:
            typed = value.cast(dtype, strict=False)
        fields.append(pl.when(TYPE.is_in(types)).then(typed).alias(name))
    return fields


_REJECTED = (pl.col("success") == False).fill_null(False) | (  # noqa: E712
    pl.col("outcome") == "continue"
).fill_null(False)


def completion() -> pl.Expr:
    """Per event: what a main-agent ``session.task_complete`` decided (:data:`ACCEPTED`,
    :data:`REJECTED` or :data:`BLOCKED`); null on every other event."""
    outcome = pl.col("outcome")
    return (
        pl.when(~(MAIN & (TYPE == TASK_COMPLETE)))
        .then(pl.lit(None, pl.String))
        .when((outcome == "blocked").fill_null(False))
        .then(pl.lit(BLOCKED))
        .when(_REJECTED)
        .then(pl.lit(REJECTED))
        .otherwise(pl.lit(ACCEPTED))
    )


ACCEPTED_COMPLETION = pl.col("completion") == ACCEPTED
"""An annotated event that is an accepted completion (see :func:`completion`)."""


_LAST: list[tuple[weakref.ref[pl.DataFrame], pl.DataFrame]] = []
"""The last frame annotated and its annotation: a batch that several commands read (``report``,
``export``, ``diff``) is annotated once."""


def annotate(events: pl.DataFrame) -> pl.DataFrame:
    """:func:`annotated` of ``events``, computed once for the same frame (a frame is never
    changed in place here)."""
    if _LAST and _LAST[0][0]() is events:
        return _LAST[0][1]
    found = annotated(events)
    _LAST[:] = [(weakref.ref(events), found)]
    return found


def annotated(events: pl.DataFrame) -> pl.DataFrame:
    """The events frame with the columns of the session model, in reading order per session.

    - ``agent_id``: the key of the sub-agent that wrote the line (its task call's toolCallId),
      whatever scheme the CLI version marks it by; null for the main agent.
      ``agent_instance``: the envelope agentId as written (see
      :func:`copilot_logs.ingest.cli_format.keyed`).
    - ``segment``: the run of the CLI the event belongs to, from 1: a new one at each
      session.start or session.resume after the log's first line. ``segment_end``: how that
      run ended (:data:`ENDED_BY_SHUTDOWN`, :data:`KILLED`, :data:`OPEN`);
      ``segment_shutdown_line``: the line of its last session.shutdown (null if none).
    - ``turn_index``: 1-based index of the main-agent turn the event falls in (0 before any);
      an event belongs to it only while ``in_turn`` is true.
    - ``during_turn``: the event (of any agent) sits inside an open main-agent turn of its own
      run, or is the turn_end closing it; ``in_turn``: the same, for main-agent events only. A
      turn left open when its run ended never takes in the next run's lines.
    - ``closes_turn`` / ``stray_end``: a turn_end that closes the open turn, or that has none.
    - ``turn_closed``: on every row of a turn, whether a turn_end closed it.
    - ``is_queued``: a main-agent user message typed while a turn ran (:func:`queued_message`).
    - ``interaction_index``: 1-based count of main-agent user messages that start an
      interaction (queued ones excluded) so far (0 before any).
    - ``prompt_index``: 1-based count of typed prompts that start a task (:data:`TASK_START`:
      not a nudge, not queued) so far; ``task_index``: the same, with a new task also after
      each accepted completion.
    - ``completion``: what a task_complete decided (:func:`completion`).
    - ``autopilot_work``: main-agent work done in autopilot (:func:`autopilot_work`).
    - ``session_model``: the model the session's model events named last (``auto`` skipped).
    - ``llm_call``: the line is an LLM call of either agent, as :class:`copilot_logs.ingest.calls.
      CallCounter` decides it (the one rule); ``subagent_call``: a sub-agent's LLM call.
    - the lifecycle payload fields of :data:`LIFECYCLE`.
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
        *_lifecycle_fields(),
        segment=segment_number(),
        turn_index=is_start.cum_sum().over(*SESSION).cast(pl.Int64),
        is_queued=queued_message().over(*SESSION),
        session_model=named_model.forward_fill().over(*SESSION),
        completion=completion(),
    )
    frame = frame.with_columns(
        _marker=marker.forward_fill().over(*SEGMENT),
        interaction_index=(MAIN & (TYPE == "user.message") & ~pl.col("is_queued"))
        .cum_sum()
        .over(*SESSION)
        .cast(pl.Int64),
        prompt_index=TASK_START.cum_sum().over(*SESSION).cast(pl.Int64),
        task_index=(TASK_START | ACCEPTED_COMPLETION.shift(1).fill_null(False))
        .cum_sum()
        .over(*SESSION)
        .cast(pl.Int64),
        autopilot_work=autopilot_work().over(*SESSION),
        **_segment_ends(),
    )
    frame = frame.with_columns(
        _previous=pl.col("_marker").shift(1).over(*SEGMENT),
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


def segment_number() -> pl.Expr:
    """Per event, in reading order: its segment, from 1 (see :func:`annotate`)."""
    # A session's first row, in a frame sorted by file and line (a session's rows follow one
    # another: the reader gives each event the session of the session.start it follows).
    first_row = pl.any_horizontal(pl.col(key).ne_missing(pl.col(key).shift(1)) for key in SESSION)
    starts = TYPE.is_in(SEGMENT_STARTS) & ~first_row
    return (starts.cum_sum().over(*SESSION) + 1).cast(pl.Int64)


def last_run_ended(events: pl.DataFrame) -> bool:
    """Whether the last run of the last session of ``events`` (the events frame of one file,
    not annotated) shut down after its last work: ``segment_end`` of its last line, for what
    asks at every poll without annotating (watch)."""
    if events.is_empty():
        return False
    ends = (
        events.sort("line").with_columns(segment=segment_number()).with_columns(**_segment_ends())
    )
    return bool(ends["segment_end"][-1] == ENDED_BY_SHUTDOWN)


def _segment_ends() -> dict[str, pl.Expr]:
    """``segment_end`` and ``segment_shutdown_line`` (see :func:`annotate`), per segment."""
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
    """What became of something that began on ``line`` and is open when ``is_open`` (a turn,
    a tool run, a sub-agent call), from its segment's end: :data:`CLOSED`,
    :data:`OPEN_AT_SHUTDOWN` (its own run shut down after it began), :data:`INTERRUPTED` (its
    run was killed and the session resumed), else :data:`STILL_OPEN`. Reads ``segment_end``
    and ``segment_shutdown_line`` of the row it began on."""
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
"""A typed prompt that starts a task (not a nudge, nor queued into a run)."""


def autopilot_work() -> pl.Expr:
    """Per event: main-agent work done in autopilot, i.e. a nudge, or a prompt or LLM call
    (turn_start) while the mode in effect is autopilot.

    The mode in effect is the last ``session.mode_changed`` newMode or ``user.message``
    agentMode before the event. A switch to autopilot with no work after it (flipped and back,
    or at the very end) does not make a session autopilot. A window in reading order: use it
    ``.over(*SESSION)`` on a frame sorted by file and line.
    """
    in_effect = pl.when(MAIN).then(pl.col("agent_mode")).forward_fill()
    work = MAIN & TYPE.is_in(["user.message", TURN_START])
    nudge = MAIN & (TYPE == "user.message") & pl.col("is_nudge").fill_null(False)
    return (work & (in_effect == "autopilot")).fill_null(False) | nudge


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


def start_times() -> pl.Expr:
    """``start_time`` as a UTC datetime (null where it is not one a log may hold)."""
    return log_times(pl.col("start_time"))
