"""What a rule is, the family that registers each rule beside its check, and what every check
reads: the annotated events with each line's neighbours and turn facts, the reader's
diagnostics, and the helpers that turn a frame into findings.

A family module (``envelope``, ``turns``, ...) declares every rule of its letter on its
:class:`Family`: a check over the prepared events with ``@FAMILY.rule(code, name, severity)``
(its docstring is the rule's summary and explanation), or a rule the reader reports with
:meth:`Family.reported`. The texts sit next to the code that finds the breach, so the two cannot
drift.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Literal

import polars as pl

from copilot_logs import derive
from copilot_logs.derive import MAIN, SESSION, TURN_END, TURN_START, TYPE
from copilot_logs.errors import CopilotLogsError, ExitCode

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

FAMILIES = {
    "E": "envelope",
    "T": "turns",
    "X": "tools",
    "S": "sub-agents",
    "C": "completion",
    "R": "continuity",
}

Check = Callable[["Context"], "pl.LazyFrame"]
"""A check: the prepared events in, one row per breach out (LOCATION and message)."""


class UnknownRuleError(CopilotLogsError):
    """A --select / --ignore / `rules CODE` value that names no rule."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Rule:
    """One invariant: what it is called, how bad a breach is, why it matters, and what finds it
    (a check over the events, or the reader's diagnostics of the given kinds)."""

    code: str
    name: str
    severity: Severity
    summary: str
    explanation: str
    check: Check | None = field(default=None, compare=False, repr=False)
    diagnostics: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        return FAMILIES[self.code[0]]

    def as_dict(self) -> dict[str, str]:
        keys = ("code", "name", "severity", "family", "summary", "explanation")
        return {key: getattr(self, key) for key in keys}


class Family:
    """The rules of one code letter, in the order they are declared."""

    def __init__(self, letter: str) -> None:
        self.letter = letter
        self.name = FAMILIES[letter]
        self.rules: list[Rule] = []

    def _add(self, rule: Rule) -> None:
        """Add ``rule``, whose code carries the family's letter and follows the codes declared
        before it (the module reads in code order; no code is declared twice)."""
        last = self.rules[-1].code if self.rules else ""
        if not rule.code.startswith(self.letter) or rule.code <= last:
            raise ValueError(f"{rule.code} cannot follow {last or 'nothing'} in {self.name}")
        self.rules.append(rule)

    def rule(
        self, code: str, name: str, severity: Severity, summary: str = "", explanation: str = ""
    ) -> Callable[[Check], Check]:
        """Declare a rule whose breaches the decorated check finds (the check is returned as
        it is); unless given, its summary is the first paragraph of the check's docstring and
        its explanation the rest."""

        def register(check: Check) -> Check:
            texts = (summary, explanation) if summary else paragraphs(check.__doc__ or "")
            self._add(Rule(code, name, severity, *texts, check=check))
            return check

        return register

    def reported(
        self,
        code: str,
        name: str,
        severity: Severity,
        summary: str,
        explanation: str,
        *,
        kinds: tuple[str, ...] = (),
    ) -> None:
        """Declare a rule the reader reports: its diagnostics of these ``kinds`` become this
        rule's findings (no ``kinds``: the catch-all for any other kind)."""
        self._add(Rule(code, name, severity, summary, explanation, diagnostics=kinds))

    def reports(self, rules: dict[tuple[str, str, Severity, tuple[str, ...]], str]) -> None:
        """Declare rules the reader reports: (code, name, severity, kinds) -> the rule's text,
        its summary and its explanation as a check's docstring holds them."""
        for (code, name, severity, kinds), text in rules.items():
            self.reported(code, name, severity, *paragraphs(text), kinds=kinds)


def paragraphs(doc: str) -> tuple[str, str]:
    """A rule's summary and explanation, each on one line: a docstring's first paragraph, and
    the rest."""
    head, _, rest = inspect.cleandoc(doc).partition("\n\n")
    return " ".join(head.split()), " ".join(rest.split())


TOOL_START = "tool.execution_start"
TOOL_COMPLETE = "tool.execution_complete"
SUBAGENT_END = ("subagent.completed", "subagent.failed")

# A sub-agent is named by its task's toolCallId, on its lifecycle events and as agentId.
SUBAGENT_KEY = pl.coalesce("tool_call_id", "agent_id")

LOCATION = ("file", "line", "event_id", "session_id")

LOG = "_log"
"""One integer per session log (file and session id): what checks window, group and join by."""


def text(expr: pl.Expr) -> pl.Expr:
    """A column as text for a message, with a visible placeholder for null."""
    return expr.cast(pl.String).fill_null("(none)")


def timestamp(expr: pl.Expr) -> pl.Expr:
    return expr.dt.to_string("%Y-%m-%dT%H:%M:%S%.3fZ")


def found(frame: pl.LazyFrame, message: pl.Expr) -> pl.LazyFrame:
    """The findings of a check: each row's location and its message."""
    return frame.select(*LOCATION, message=message)


# What a shutdown after an open turn or tool means: the user quit (a routine shutdown, or one
# that names no type), or the session ended some other way (``error``).
WHY_SHUT_DOWN = (
    pl.when(pl.col("_shutdown_type") == "routine")
    .then(pl.lit("the user ended the session while it ran (e.g. at a permission prompt)"))
    .otherwise(pl.format("the session shut down ({}) while it ran", "_shutdown_type"))
)


def prepare(events: pl.DataFrame) -> pl.DataFrame:
    """The annotated events plus the per-session neighbours and turn facts the rules compare
    (a file holding two sessions is checked as two logs: the second's first line is a first
    line, whatever its time)."""
    annotated = (
        derive.annotate(events).lazy().with_columns(pl.struct(*SESSION).rank("dense").alias(LOG))
    )
    is_start = MAIN & (TYPE == TURN_START)
    is_end = MAIN & (TYPE == TURN_END)
    marker = pl.when(is_start).then(pl.lit("start")).when(is_end).then(pl.lit("end"))
    turn_key = [LOG, "turn_index"]
    segment = (LOG, "segment")
    frame = annotated.with_columns(
        _row=pl.int_range(pl.len()).over(LOG),
        _prev_id=pl.col("event_id").shift(1).over(LOG),
        _prev_line=pl.col("line").shift(1).over(LOG),
        _prev_ts=pl.col("timestamp").shift(1).over(LOG),
        _prev_type=TYPE.shift(1).over(LOG),
        _next_type=TYPE.shift(-1).over(LOG),
        _next_line=pl.col("line").shift(-1).over(LOG),
        # A turn left open when its run ended (killed, then resumed) is not the turn a later
        # run's lines continue: the markers and shutdowns are read per segment.
        _marker=marker.forward_fill().over(*segment),
        _marker_line=pl.when(is_start | is_end).then(pl.col("line")).forward_fill().over(*segment),
        _open_turn_id=pl.col("turn_id").filter(is_start).first().over(turn_key),
        _shutdown_after=pl.when(TYPE == "session.shutdown")
        .then(pl.col("line"))
        .backward_fill()
        .over(*segment),
        _shutdown_type=pl.when(TYPE == "session.shutdown")
        .then(pl.col("shutdown_type").fill_null("routine"))
        .backward_fill()
        .over(*segment),
        _turn_end_line=pl.col("line").filter(pl.col("closes_turn")).first().over(turn_key),
    )
    return frame.with_columns(
        _prev_marker=pl.col("_marker").shift(1).over(*segment),
        _prev_marker_line=pl.col("_marker_line").shift(1).over(*segment),
    ).collect(engine="in-memory")


@dataclass
class Context:
    """The prepared events and the reader's diagnostics of one batch, and the :func:`shared`
    frames."""

    events: pl.LazyFrame
    diagnostics: pl.LazyFrame
    frames: dict[Callable[[Context], pl.LazyFrame], pl.LazyFrame] = field(default_factory=dict)


def shared(build: Callable[[Context], pl.LazyFrame]) -> Callable[[Context], pl.LazyFrame]:
    """Decorate a frame several checks start from: it is built once per batch, and marked to be
    planned and computed once in the query that evaluates every check."""

    @wraps(build)
    def once(ctx: Context) -> pl.LazyFrame:
        if build not in ctx.frames:
            ctx.frames[build] = build(ctx).cache()
        return ctx.frames[build]

    return once


@shared
def tool_starts(ctx: Context) -> pl.LazyFrame:
    """The first start of each toolCallId per session."""
    return ctx.events.filter((TYPE == TOOL_START) & pl.col("tool_call_id").is_not_null()).unique(
        subset=[LOG, "tool_call_id"], keep="first", maintain_order=True
    )
