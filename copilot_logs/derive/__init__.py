"""The session model: what a session *is*, derived once from the events frame, for every
command to read (docs/architecture.md, "The session model").

- :mod:`~copilot_logs.derive.events`: per event, its segment (run of the CLI), turn,
  interaction, prompt and task, whether it is an LLM call, what a completion decided, and the
  payload fields of lifecycle events;
- :mod:`~copilot_logs.derive.loop`: the agent loop: turns, tools, sub-agent runs and calls,
  each with its segment and what became of it if it was left open;
- :mod:`~copilot_logs.derive.sessions`: per session and per segment, when it started and
  ended, how each run ended, its CLI version, mode, model and repository.

No command decides these things again, and nothing outside :mod:`copilot_logs.ingest` and this
package parses payload JSON (tests/test_house.py).
"""

from __future__ import annotations

from copilot_logs.derive.events import (
    ACCEPTED,
    ACCEPTED_COMPLETION,
    BLOCKED,
    CLOSED,
    ENDED_BY_SHUTDOWN,
    INTERRUPTED,
    KILLED,
    MAIN,
    OPEN,
    OPEN_AT_SHUTDOWN,
    REJECTED,
    SEGMENT,
    SESSION,
    STILL_OPEN,
    TASK_START,
    TURN_END,
    TURN_START,
    TYPE,
    WORK,
    annotate,
    autopilot_work,
    completion,
    last_run_ended,
    open_state,
    queued_message,
)
from copilot_logs.derive.loop import (
    COUNT_FIELDS,
    count_flags,
    session_model,
    subagent_calls,
    subagent_runs,
    tools,
    turns,
)
from copilot_logs.derive.sessions import (
    CUT_OFF,
    DEFAULT_RUNNING_WITHIN,
    RUNNING,
    after,
    completion_is_last,
    judged_prompt,
    prompt_positions,
    prompts,
    recent,
    running,
    segments,
    session_facts,
    session_mode,
)

__all__ = [
    "ACCEPTED",
    "ACCEPTED_COMPLETION",
    "BLOCKED",
    "CLOSED",
    "COUNT_FIELDS",
    "CUT_OFF",
    "DEFAULT_RUNNING_WITHIN",
    "ENDED_BY_SHUTDOWN",
    "INTERRUPTED",
    "KILLED",
    "MAIN",
    "OPEN",
    "OPEN_AT_SHUTDOWN",
    "REJECTED",
    "RUNNING",
    "SEGMENT",
    "SESSION",
    "STILL_OPEN",
    "TASK_START",
    "TURN_END",
    "TURN_START",
    "TYPE",
    "WORK",
    "after",
    "annotate",
    "autopilot_work",
    "completion",
    "completion_is_last",
    "count_flags",
    "judged_prompt",
    "last_run_ended",
    "open_state",
    "prompt_positions",
    "prompts",
    "queued_message",
    "recent",
    "running",
    "segments",
    "session_facts",
    "session_mode",
    "session_model",
    "subagent_calls",
    "subagent_runs",
    "tools",
    "turns",
]
