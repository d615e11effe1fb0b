"""Deterministic builder of real-shaped Copilot CLI session logs (``events.jsonl``).

Test data, not part of the installed ``copilot_logs`` package: used by the bundled samples
(``tests/make_samples.py``), the tests and the benchmark corpus (``benchmarks/corpus.py``).
The same calls with the same seed give the same bytes.

The modules, in the order a session is built:

- :mod:`synth.tools`: the tool calls a turn makes (:class:`ToolCall`, :func:`bash`, ...,
  :func:`task` with its :class:`Subagent`), as plain data;
- :mod:`synth.events`: the log itself: ids, the clock, the envelope, the output;
- :mod:`synth.prompts`: ``system.message`` + ``user.message``, nudges, model and mode changes;
- :mod:`synth.usage`: the usage figures shutdowns and checkpoints report;
- :mod:`synth.calls`: ``assistant.message``, tool starts and completes, sub-agent runs;
- :mod:`synth.turns`: main-agent turns (:meth:`SessionBuilder.turn`, ...);
- :mod:`synth.session`: :class:`SessionBuilder`, with the session-level events;
- :mod:`synth.damage`: pure functions that damage clean lines or files.

It never prints and imports neither click nor rich.
"""

from synth.damage import (
    blank_line,
    crlf,
    cut,
    duplicate,
    glue_truncated,
    invalid_utf8,
    not_an_event,
    nul_tail,
    raw_line_separator,
    split_line,
)
from synth.events import join_lines
from synth.prompts import NUDGE_TEXT
from synth.session import SessionBuilder
from synth.tools import (
    SCHEMES,
    Subagent,
    SubagentStep,
    ToolCall,
    bash,
    create,
    edit,
    glob,
    grep,
    subagent_plan,
    task,
    view,
)
from synth.turns import TurnRecord

__all__ = [
    "NUDGE_TEXT",
    "SCHEMES",
    "SessionBuilder",
    "Subagent",
    "SubagentStep",
    "ToolCall",
    "TurnRecord",
    "bash",
    "blank_line",
    "create",
    "crlf",
    "cut",
    "duplicate",
    "edit",
    "glob",
    "glue_truncated",
    "grep",
    "invalid_utf8",
    "join_lines",
    "not_an_event",
    "nul_tail",
    "raw_line_separator",
    "split_line",
    "subagent_plan",
    "task",
    "view",
]
