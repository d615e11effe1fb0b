"""The invariants of a session log as named rules, checked over the events frame.

Every rule has a stable code (the letter names its family: E envelope, T turns, X tools,
S sub-agents, C completion, R continuity), a kebab-case name, a default severity and an
explanation. :func:`check` evaluates the selected rules as polars expressions over the
annotated events of every file at once, maps the reader's diagnostics onto the envelope
rules, and returns one findings frame: each finding points at a file, a line and an event id.

Codes are never renumbered or reused: a retired rule keeps its code, a new rule takes the next
free one in its family.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from copilot_logs import model
from copilot_logs.errors import CopilotLogsError, ExitCode
from copilot_logs.event_types import EPHEMERAL_TYPES, KNOWN_TYPES
from copilot_logs.model import MAIN, SESSION, TURN_END, TURN_START, TYPE
from copilot_logs.reader import ReadResult

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

FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "line": pl.Int64(),  # null for a finding about the whole file (unreadable, empty)
    "event_id": pl.String(),
    "code": pl.String(),
    "name": pl.String(),
    "severity": pl.String(),
    "message": pl.String(),
    "session_id": pl.String(),
}

TOOL_START = "tool.execution_start"
TOOL_COMPLETE = "tool.execution_complete"
SUBAGENT_END = ("subagent.completed", "subagent.failed")
_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class UnknownRuleError(CopilotLogsError):
    """A --select / --ignore / `rules CODE` value that names no rule."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Rule:
    """One invariant: what it is called, how bad a breach is, and why it matters."""

    code: str
    name: str
    severity: Severity
    summary: str
    explanation: str

    @property
    def family(self) -> str:
        return FAMILIES[self.code[0]]

    def as_dict(self) -> dict[str, str]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "family": self.family,
            "summary": self.summary,
            "explanation": self.explanation,
        }


# --- the rules ---------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule(
        "E101",
        "invalid-json",
        "error",
        "A line is not valid JSON.",
        "Each line of events.jsonl is one JSON object. A line that does not parse (and is not "
        "an event split by raw newlines, or a cut last line, which have rules of their own) "
        "holds an event that is lost: every figure computed from the log may be short by it. "
        "The reader skips the line and goes on.",
    ),
    Rule(
        "E102",
        "not-an-event",
        "error",
        "A line is JSON but not an event: it lacks type, id, timestamp or data.",
        "Every event carries an envelope of `type` (string), `id`, `timestamp` and `data` "
        "(object). A JSON value that is not an object or has no `type` is skipped; an object "
        "with a type but no `id`, `timestamp` or `data` is kept, but cannot be chained, ordered "
        "or read fully. Either way the line was not written by the CLI as it stands.",
    ),
    Rule(
        "E103",
        "duplicate-event-id",
        "error",
        "Two lines carry the same event id.",
        "Event ids are UUIDs, unique in a log. A second line with an id already read is a "
        "replayed or copied line; the reader keeps the first and drops the later one, so "
        "nothing is counted twice, but the file is no longer the one the CLI wrote. The "
        "finding points at the repeated line.",
    ),
    Rule(
        "E104",
        "broken-parent-chain",
        "error",
        "An event's parentId is not the id of the event on the line before it.",
        "`parentId` chains each line to the previous line's event (null on the first line), "
        "sub-agent lines included. A break means lines were removed, inserted or reordered "
        "after they were written (a dropped line, an edit, two logs spliced together). The "
        "finding points at the first line after the break. Files with no parentId at all "
        "(a writer that does not chain) are not checked.",
    ),
    Rule(
        "E105",
        "timestamp-backwards",
        "error",
        "An event's timestamp is earlier than the previous event's.",
        "The CLI appends events as they happen, so timestamps never decrease down the file. "
        "A timestamp earlier than the line before it means lines were reordered or edited, "
        "and durations computed from the log (turns, tools, sessions) would be wrong or "
        "negative.",
    ),
    Rule(
        "E106",
        "ephemeral-event",
        "warning",
        "An ephemeral event type (streamed live, never persisted) is on disk.",
        "Types such as `session.idle`, `assistant.usage`, `session.usage_info`, "
        "`assistant.intent`, `tool.execution_progress` and every `*_delta` are streamed to "
        "live clients and never written to events.jsonl. One on disk means the log was "
        "recorded by something other than the CLI (an SDK client dumping its stream), and "
        "figures such as per-call usage may be counted twice. Reported once per type and "
        "file, on its first line.",
    ),
    Rule(
        "E107",
        "unknown-event-type",
        "info",
        "An event type this version of copilot-logs does not know.",
        "New CLI versions add event types. Unknown ones are kept and counted, never an error; "
        "this note says which ones appeared so a reader can check whether they matter. "
        "Reported once per type and file, on its first line.",
    ),
    Rule(
        "E108",
        "missing-session-start",
        "error",
        "The first event is not session.start.",
        "The CLI writes `session.start` (session id, CLI version, start time, repository) as "
        "the first line of every log. A log that begins with anything else lost its head, "
        "so the session's identity, start time and context are unknown.",
    ),
    Rule(
        "E109",
        "session-id-mismatch",
        "error",
        "session.start's sessionId is not the name of the session's folder (or file).",
        "The CLI stores a session as `session-state/<sessionId>/events.jsonl` (or "
        "`<sessionId>.jsonl`) and finds it by that name when resuming. A different id inside "
        "means the file was moved or copied over another session. Checked only when the "
        "folder (or the file's stem) is a UUID: other names are copies that claim nothing.",
    ),
    Rule(
        "E110",
        "file-cut",
        "error",
        "The last line is cut off mid-event (no newline, not valid JSON).",
        "Events are appended one whole line at a time. A last line cut short means the "
        "session was still being written when the file was read, or the process was killed "
        "mid-write; the event on it is lost and the session's end (open turn, missing "
        "shutdown) follows from that.",
    ),
    Rule(
        "E111",
        "truncated-event",
        "error",
        "A truncated event with a complete event glued on behind it, on one line.",
        "A write was interrupted and the next event was appended right after the partial "
        "one, with no newline between them. The reader recovers the complete event and loses "
        "the truncated one.",
    ),
    Rule(
        "E112",
        "split-event",
        "warning",
        "One event is spread over several lines by raw newlines inside a string.",
        "A literal newline inside a JSON string (a known CLI bug) splits one event over two "
        "or more physical lines. The reader rejoins them and loses nothing, but tools that "
        "read the file line by line (`jq`, `grep -c`) see broken JSON and wrong counts.",
    ),
    Rule(
        "E113",
        "invalid-utf8",
        "warning",
        "A line holds bytes that are not UTF-8.",
        "The log is UTF-8. Invalid bytes were replaced by U+FFFD so the event could still be "
        "read; the text around them is altered.",
    ),
    Rule(
        "E114",
        "crlf-line-ending",
        "warning",
        "A line ends with CRLF instead of LF.",
        "The CLI writes LF only. A CR before the newline means the file went through a tool "
        "that rewrote its line endings; the events still parse, but byte offsets (and so "
        "`eventsFileSizeBytes`) no longer match what the CLI wrote.",
    ),
    Rule(
        "E115",
        "nul-padding",
        "warning",
        "NUL bytes pad a line (what a crash leaves at the end of a file).",
        "After a crash some file systems leave the end of the file filled with NUL bytes. "
        "The reader ignores them; the events the process had not written yet are lost, which "
        "other findings (an open turn, a missing shutdown) may show.",
    ),
    Rule(
        "E116",
        "blank-line",
        "warning",
        "An empty (or whitespace-only) line.",
        "The CLI never writes an empty line. One means the file was edited or concatenated "
        "by hand; no event is lost.",
    ),
    Rule(
        "E117",
        "unreadable-file",
        "error",
        "The file could not be read at all.",
        "Permission denied, a broken or looping symbolic link, a named pipe or socket, a file "
        "name that is not UTF-8, or an I/O error: nothing in the file was checked. The message "
        "says which, and what to do.",
    ),
    Rule(
        "E118",
        "empty-file",
        "error",
        "The file is empty, or holds no event at all.",
        "The CLI writes `session.start` as soon as a session begins, so a 0-byte events file "
        "is a session whose log was lost or truncated to nothing; a file whose every line is "
        "damage (NUL padding, blank lines, text that is not an event) holds no session either.",
    ),
    Rule(
        "E119",
        "invalid-timestamp",
        "error",
        "An event's timestamp is not an ISO-8601 time.",
        "Timestamps are ISO-8601 UTC with milliseconds (`2026-08-05T07:49:01.551Z`). One that "
        "does not parse cannot be ordered or used in durations.",
    ),
    Rule(
        "E120",
        "damaged-line",
        "error",
        "The reader reported damage of a kind no other rule covers.",
        "A catch-all so that no diagnostic of the reader is ever dropped: the message says "
        "what the reader found.",
    ),
    Rule(
        "E121",
        "lone-surrogate",
        "warning",
        "A string holds a lone UTF-16 surrogate escape.",
        "JSON.stringify writes a string cut inside a surrogate pair (an emoji, say) with a lone "
        "`\\udXXX` escape: valid JSON, but not Unicode text, so strict parsers (orjson, "
        "msgspec, serde) reject the whole line. The reader replaces the lone half with U+FFFD "
        "and keeps the event.",
    ),
    Rule(
        "E122",
        "out-of-range-number",
        "warning",
        "A number too large for a 64-bit column (2^63 or more, or 1e999) was read as null.",
        "JSON puts no bound on numbers, but token counts, sizes and costs are stored in 64-bit "
        "columns, and a number like 1e999 is infinity as a double. The reader keeps the event "
        "and reads such a number as null; the message names the field. Figures built on that "
        "field leave it out.",
    ),
    Rule(
        "E123",
        "too-deep",
        "error",
        "A line nests JSON too deep to read (about 1,000 levels).",
        "No event the CLI writes nests more than a few levels. A line nested about 1,000 levels "
        "deep cannot be read by the JSON parsers without exhausting their stack: the reader "
        "skips it, like a line that is not JSON.",
    ),
    Rule(
        "E124",
        "byte-order-mark",
        "warning",
        "The file starts with a UTF-8 byte order mark.",
        "The CLI writes UTF-8 without a byte order mark. One at the start means the file went "
        "through an editor or tool that added it; the reader ignores it and reads every event, "
        "but byte offsets (and so `eventsFileSizeBytes`) are off by three bytes, and `jq` "
        "refuses the first line.",
    ),
    Rule(
        "E125",
        "unprocessable-session",
        "error",
        "copilot-logs failed on this session's events; the other sessions were still read.",
        "Each session is processed on its own. When a command fails on one session's events "
        "(content no other rule foresaw), that session is left out, reported here, and the "
        "command's exit code is 3; please report the message with the file, if you can share "
        "it.",
    ),
    Rule(
        "T201",
        "orphan-turn-end",
        "error",
        "assistant.turn_end with no open turn.",
        "Every main-agent `assistant.turn_end` closes the `assistant.turn_start` before it. "
        "One with no open turn means its `turn_start` was lost, or a line was duplicated or "
        "moved. Turn counts built on pairs are off by one.",
    ),
    Rule(
        "T202",
        "turn-start-while-open",
        "error",
        "assistant.turn_start while the previous turn is still open.",
        "Main-agent turns do not nest: each `turn_start` waits for the previous turn's "
        "`turn_end`. A new start while a turn is open means that turn's `turn_end` was lost. "
        "The finding points at the new `turn_start`; the message names the open turn's line.",
    ),
    Rule(
        "T203",
        "turn-id-mismatch",
        "error",
        "assistant.turn_end's turnId differs from the open turn's.",
        "`turn_end` carries the `turnId` of the `turn_start` it closes. A different id means "
        "the two are not a pair: lines were lost or reordered between them.",
    ),
    Rule(
        "T204",
        "unclosed-turn",
        "warning",
        "A turn is still open at the end of the log.",
        "The last `assistant.turn_start` has no `turn_end` and no `session.shutdown` follows "
        "it: the session was cut off (killed, crashed) or is still running. The LLM call is "
        "counted, as an open turn. The finding points at the open turn's `turn_start`. A turn "
        "left open at a shutdown is T205 instead.",
    ),
    Rule(
        "T205",
        "open-at-shutdown",
        "info",
        "A turn was still open when the session shut down: the user ended the session.",
        "A routine `session.shutdown` after a turn that has no `assistant.turn_end` means the "
        "user quit while the turn ran, typically at a `permission.requested` prompt for one "
        "of its tools (a shutdown of another `shutdownType`, such as `error`, is named in the "
        "message). The log is whole: it was neither cut off nor is it still running (T204 "
        "does not fire). Reported so the open turn is not mistaken for damage.",
    ),
    Rule(
        "X301",
        "orphan-tool-complete",
        "error",
        "tool.execution_complete with no tool.execution_start before it.",
        "Every tool run writes a start, then a complete with the same `toolCallId`. A complete "
        "with no start lost its start (which holds the tool's name and arguments). A `!cmd` "
        "shell escape writes a complete with `isUserRequested: true` and no start: that is "
        "not a fault and not reported.",
    ),
    Rule(
        "X302",
        "tool-not-completed-in-turn",
        "error",
        "A tool started in a turn was not completed before the turn ended.",
        "A main-agent tool completes before the `turn_end` of the turn that started it (a "
        "sub-agent's tool before its `subagent.completed`/`failed`). A start with no complete "
        "by then lost its complete: the tool's result and success are unknown. Reported at "
        "the start's line.",
    ),
    Rule(
        "X303",
        "tool-never-completed",
        "warning",
        "A tool was started and the log ends before it completed.",
        "The start's turn (or sub-agent) is still open at the end of the log and no "
        "`session.shutdown` follows the start: the session was cut off while the tool ran, or "
        "is still running. Reported at the start's line. A tool left running at a shutdown "
        "is X307 instead.",
    ),
    Rule(
        "X304",
        "duplicate-tool-call-id",
        "error",
        "A toolCallId is started (or completed) twice.",
        "`toolCallId` names one tool run. A second start or a second complete with the same "
        "id cannot be paired: one of them was replayed or the ids collided. The finding "
        "points at the second one.",
    ),
    Rule(
        "X305",
        "tool-outside-turn",
        "error",
        "A main-agent tool event outside any turn.",
        "The main agent runs tools inside the turn whose `assistant.message` requested them. "
        "A main-agent start or complete between turns means the turn's boundaries were lost. "
        "`!cmd` shell escapes (`isUserRequested: true`) run between turns and are not "
        "reported; sub-agent tools are checked against their sub-agent instead.",
    ),
    Rule(
        "X306",
        "requested-tool-not-started",
        "warning",
        "A tool requested in an assistant.message's toolRequests never started.",
        "Each entry of `toolRequests` normally gets a `tool.execution_start` with its "
        "`toolCallId`. One that never starts was lost, or the turn was aborted before the "
        "tool ran. Reported at the message's line, once per missing call.",
    ),
    Rule(
        "X307",
        "tool-open-at-shutdown",
        "info",
        "A tool was still running when the session shut down: the user ended the session.",
        "A `session.shutdown` after a tool start that has no `tool.execution_complete` means "
        "the user quit while the tool waited or ran, typically at a `permission.requested` "
        "prompt for it. The log is whole (X303 does not fire); the tool never ran to its end.",
    ),
    Rule(
        "S401",
        "unfinished-subagent",
        "warning",
        "A sub-agent started and never finished.",
        "`subagent.started` is followed by `subagent.completed` or `subagent.failed` with the "
        "same `toolCallId`. With neither, the log ends while the sub-agent runs: the session "
        "was cut off or is still running. Reported at the start's line.",
    ),
    Rule(
        "S402",
        "orphan-subagent-finish",
        "error",
        "subagent.completed or subagent.failed with no subagent.started before it.",
        "A sub-agent's end names the `toolCallId` of its start. With no start, the start was "
        "lost, and the sub-agent's name and model are unknown.",
    ),
    Rule(
        "S403",
        "unknown-agent-id",
        "error",
        "An event's agentId names no started sub-agent.",
        "Sub-agent lines carry `agentId`, the `toolCallId` of the `task` call whose sub-agent "
        "wrote them, after its `subagent.started`. An `agentId` with no such start cannot be "
        "attributed: sub-agent calls and tools would be counted against nothing. Reported "
        "once per agentId, on its first line.",
    ),
    Rule(
        "C501",
        "task-complete-outside-turn",
        "error",
        "session.task_complete outside a turn.",
        "The CLI writes `session.task_complete` inside the turn whose model called the "
        "`task_complete` tool, before that turn's `turn_end`. Outside a turn it is detached "
        "from the call that completed the task.",
    ),
    Rule(
        "C502",
        "task-complete-without-tool",
        "error",
        "session.task_complete in a turn with no task_complete tool call.",
        "Completion is written twice: the model's `task_complete` tool call (in "
        "`toolRequests` and as a tool start) and then `session.task_complete`. The event "
        "alone means the call was lost, or the completion did not come from the model.",
    ),
    Rule(
        "R601",
        "event-count-mismatch",
        "error",
        "session.resume's eventCount differs from the events before it.",
        "On resume the CLI records how many events the file held. Fewer events before the "
        "resume line than it says means events were lost or removed (a rewind, an edit); "
        "more means lines were added. Counted: the events read before the line, duplicates "
        "included.",
    ),
    Rule(
        "R602",
        "file-size-mismatch",
        "error",
        "eventsFileSizeBytes (on resume or shutdown) differs from the line's byte offset.",
        "`session.resume` and `session.shutdown` record the size of the file just before "
        "their own line. A different byte offset means bytes before the line were lost, "
        "added or rewritten after the CLI wrote them. A later session in the same file counts "
        "from its own first line.",
    ),
    Rule(
        "R603",
        "several-sessions",
        "info",
        "A file holds more than one session: a session.start with another sessionId.",
        "The CLI writes one session per file, but a recorder, a copy or `cat a b` can put "
        "two in one file or stream. From a session.start whose sessionId differs from the "
        "session before it, the lines belong to that new session: every command reports "
        "each session on its own row and checks each as its own log (its first line starts "
        "the parent chain and the timestamp order again). The finding points at the "
        "session.start where the next session begins.",
    ),
)

RULES_BY_CODE = {rule.code: rule for rule in RULES}
RULES_BY_NAME = {rule.name: rule for rule in RULES}

# Reader diagnostic kind -> the envelope rule that reports it.
DIAGNOSTIC_RULES = {
    "invalid-json": "E101",
    "not-an-event": "E102",
    "incomplete-envelope": "E102",
    "duplicate-id": "E103",
    "cut-line": "E110",
    "truncated-event": "E111",
    "split-event": "E112",
    "invalid-utf8": "E113",
    "lone-surrogate": "E121",
    "crlf": "E114",
    "nul-bytes": "E115",
    "blank-line": "E116",
    "unreadable": "E117",
    "empty-file": "E118",
    "no-event": "E118",
    "out-of-range-number": "E122",
    "too-deep": "E123",
    "bom": "E124",
    "unprocessable": "E125",
}
OTHER_DAMAGE = "E120"


def find_rule(key: str) -> Rule:
    """A rule by code (any case) or by name."""
    rule = RULES_BY_CODE.get(key.strip().upper()) or RULES_BY_NAME.get(key.strip().lower())
    if rule is None:
        raise UnknownRuleError(
            f"no rule '{key}': run `copilot-logs rules` to list the codes and names"
        )
    return rule


def matching(selector: str) -> list[Rule]:
    """The rules a --select / --ignore value names: ``ALL``, a code, a code prefix (``E``,
    ``E1``, ``X30``) or a rule name. Raises UnknownRuleError when it names none."""
    key = selector.strip()
    if key.upper() == "ALL":
        return list(RULES)
    if key.lower() in RULES_BY_NAME:
        return [RULES_BY_NAME[key.lower()]]
    if re.fullmatch(r"[A-Za-z]\d{0,3}", key):
        found = [rule for rule in RULES if rule.code.startswith(key.upper())]
        if found:
            return found
    raise UnknownRuleError(
        f"'{selector}' names no rule (give a code like E104, a prefix like E or T2, a name "
        "like orphan-turn-end, or ALL); run `copilot-logs rules` to list them"
    )


def split_selectors(values: Iterable[str]) -> list[str]:
    """``["E1,T201", "X"]`` -> ``["E1", "T201", "X"]``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def resolve(select: Iterable[str] | None = None, ignore: Iterable[str] = ()) -> list[Rule]:
    """The rules to check: those selected (all when ``select`` is None), minus those ignored."""
    chosen: set[str] = set()
    if select is None:
        chosen = set(RULES_BY_CODE)
    else:
        for selector in split_selectors(select):
            chosen.update(rule.code for rule in matching(selector))
    for selector in split_selectors(ignore):
        chosen.difference_update(rule.code for rule in matching(selector))
    return [rule for rule in RULES if rule.code in chosen]


# --- evaluation --------------------------------------------------------------------------------

LOCATION = ("file", "line", "event_id", "session_id")


def _text(expr: pl.Expr) -> pl.Expr:
    """A column as text for a message, with a visible placeholder for null."""
    return expr.cast(pl.String).fill_null("(none)")


def _ts(expr: pl.Expr) -> pl.Expr:
    return expr.dt.to_string("%Y-%m-%dT%H:%M:%S%.3fZ")


def _found(frame: pl.DataFrame, message: pl.Expr) -> pl.DataFrame:
    return frame.select(*LOCATION, message=message)


def _prepare(events: pl.DataFrame) -> pl.DataFrame:
    """The annotated events plus the per-session neighbours and turn facts the rules compare
    (a file holding two sessions is checked as two logs: the second's first line is a first
    line, whatever its time)."""
    annotated = model.annotate(events)
    is_start = MAIN & (TYPE == TURN_START)
    is_end = MAIN & (TYPE == TURN_END)
    marker = pl.when(is_start).then(pl.lit("start")).when(is_end).then(pl.lit("end"))
    turn_key = [*SESSION, "turn_index"]
    frame = annotated.with_columns(
        _row=pl.int_range(pl.len()).over(*SESSION),
        _prev_id=pl.col("event_id").shift(1).over(*SESSION),
        _prev_line=pl.col("line").shift(1).over(*SESSION),
        _prev_ts=pl.col("timestamp").shift(1).over(*SESSION),
        _marker=marker.forward_fill().over(*SESSION),
        _marker_line=pl.when(is_start | is_end).then(pl.col("line")).forward_fill().over(*SESSION),
        _open_turn_id=pl.col("turn_id").filter(is_start).first().over(turn_key),
        _shutdown_after=pl.when(TYPE == "session.shutdown")
        .then(pl.col("line"))
        .backward_fill()
        .over(*SESSION),
        _shutdown_type=pl.when(TYPE == "session.shutdown")
        .then(pl.col("detail").str.json_path_match("$.shutdownType").fill_null("routine"))
        .backward_fill()
        .over(*SESSION),
        _turn_end_line=pl.col("line").filter(pl.col("closes_turn")).first().over(turn_key),
    )
    return frame.with_columns(
        _prev_marker=pl.col("_marker").shift(1).over(*SESSION),
        _prev_marker_line=pl.col("_marker_line").shift(1).over(*SESSION),
    )


@dataclass
class _Context:
    events: pl.DataFrame
    diagnostics: pl.DataFrame
    cache: dict[str, pl.DataFrame] = field(default_factory=dict)

    def tool_starts(self) -> pl.DataFrame:
        """The first start of each toolCallId per session."""
        if "starts" not in self.cache:
            self.cache["starts"] = self.events.filter(
                (TYPE == TOOL_START) & pl.col("tool_call_id").is_not_null()
            ).unique(subset=[*SESSION, "tool_call_id"], keep="first", maintain_order=True)
        return self.cache["starts"]


def _envelope_parent_chain(ctx: _Context) -> pl.DataFrame:
    chained = pl.col("parent_id").is_not_null().any().over(*SESSION)
    broken = ctx.events.filter(chained & ~pl.col("parent_id").eq_missing(pl.col("_prev_id")))
    message = (
        pl.when(pl.col("_prev_id").is_null() & (pl.col("_row") == 0))
        .then(pl.format("the first event has parentId {}; it should have none", "parent_id"))
        .otherwise(
            pl.format(
                "parentId {} is not the id of the previous event ({} on line {}): lines were "
                "removed, added or reordered",
                _text(pl.col("parent_id")),
                _text(pl.col("_prev_id")),
                _text(pl.col("_prev_line")),
            )
        )
    )
    return _found(broken, message)


def _envelope_timestamps(ctx: _Context) -> pl.DataFrame:
    backwards = ctx.events.filter(pl.col("timestamp") < pl.col("_prev_ts"))
    return _found(
        backwards,
        pl.format(
            "timestamp {} is earlier than the previous event's {} (line {})",
            _ts(pl.col("timestamp")),
            _ts(pl.col("_prev_ts")),
            "_prev_line",
        ),
    )


def _first_of_type(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(_lines=pl.len().over(*SESSION, "type")).unique(
        subset=[*SESSION, "type"], keep="first", maintain_order=True
    )


# A sub-agent is named by its task's toolCallId, on its lifecycle events and as agentId.
SUBAGENT_KEY = pl.coalesce("tool_call_id", "agent_id")

EPHEMERAL = TYPE.is_in(list(EPHEMERAL_TYPES)) | TYPE.str.ends_with("_delta")


def _envelope_ephemeral(ctx: _Context) -> pl.DataFrame:
    found = _first_of_type(ctx.events.filter(EPHEMERAL))
    return _found(
        found,
        pl.format(
            "{} is an ephemeral event type, streamed live and never persisted by the CLI "
            "({} lines in this file; first here)",
            "type",
            "_lines",
        ),
    )


def _envelope_unknown(ctx: _Context) -> pl.DataFrame:
    unknown = ctx.events.filter(~TYPE.is_in(list(KNOWN_TYPES)) & ~EPHEMERAL)
    return _found(
        _first_of_type(unknown),
        pl.format("unknown event type {} ({} lines in this file; first here)", "type", "_lines"),
    )


def _envelope_first_event(ctx: _Context) -> pl.DataFrame:
    first = ctx.events.filter((pl.col("_row") == 0) & (TYPE != "session.start"))
    return _found(first, pl.format("the first event is {}, not session.start", "type"))


def _envelope_session_id(ctx: _Context) -> pl.DataFrame:
    folder = pl.col("file").str.extract(r"([^/\\]+)[/\\]events\.jsonl$")
    stem = pl.col("file").str.extract(r"([^/\\]+)\.jsonl$")
    named = pl.when(pl.col("file").str.contains(r"(^|[/\\])events\.jsonl$")).then(folder)
    starts = (
        ctx.events.filter(TYPE == "session.start")
        .unique(subset=["file"], keep="first", maintain_order=True)
        .with_columns(
            _expected=named.otherwise(stem),
            _claimed=pl.col("detail").str.json_path_match("$.sessionId"),
        )
    )
    wrong = starts.filter(
        pl.col("_expected").str.contains(_UUID)
        & ~pl.col("_claimed").eq_missing(pl.col("_expected"))
    )
    return _found(
        wrong,
        pl.format(
            "session.start says sessionId {} but the log is stored as session {}",
            _text(pl.col("_claimed")),
            "_expected",
        ),
    )


def _envelope_timestamp_format(ctx: _Context) -> pl.DataFrame:
    missing = ctx.diagnostics.filter(
        (pl.col("kind") == "incomplete-envelope") & pl.col("message").str.contains("timestamp")
    ).select("file", "line")
    bad = ctx.events.filter(pl.col("timestamp").is_null()).join(
        missing, on=["file", "line"], how="anti"
    )
    return _found(bad, pl.format("{} event's timestamp is not an ISO-8601 time", "type"))


def _turns_orphan_end(ctx: _Context) -> pl.DataFrame:
    return _found(
        ctx.events.filter(pl.col("stray_end")),
        pl.format("assistant.turn_end (turnId {}) with no open turn", _text(pl.col("turn_id"))),
    )


def _turns_start_while_open(ctx: _Context) -> pl.DataFrame:
    nested = ctx.events.filter(MAIN & (TYPE == TURN_START) & (pl.col("_prev_marker") == "start"))
    return _found(
        nested,
        pl.format(
            "assistant.turn_start while the turn opened on line {} is still open: its "
            "turn_end is missing",
            "_prev_marker_line",
        ),
    )


def _turns_id_mismatch(ctx: _Context) -> pl.DataFrame:
    wrong = ctx.events.filter(
        pl.col("closes_turn")
        & pl.col("turn_id").is_not_null()
        & pl.col("_open_turn_id").is_not_null()
        & (pl.col("turn_id") != pl.col("_open_turn_id"))
    )
    return _found(
        wrong,
        pl.format(
            "assistant.turn_end has turnId {} but the open turn (line {}) is turnId {}",
            "turn_id",
            "_prev_marker_line",
            "_open_turn_id",
        ),
    )


def _open_last_turn(ctx: _Context) -> pl.DataFrame:
    """The turn_start of a session's last turn when no turn_end closed it."""
    return ctx.events.filter(
        MAIN
        & (TYPE == TURN_START)
        & (pl.col("_marker").last().over(*SESSION) == "start")
        & (pl.col("turn_index") == pl.col("turn_index").max().over(*SESSION))
    )


def _turns_unclosed(ctx: _Context) -> pl.DataFrame:
    open_at_end = _open_last_turn(ctx).filter(pl.col("_shutdown_after").is_null())
    return _found(
        open_at_end,
        pl.format(
            "the turn (turnId {}) is still open at the end of the log: the session was cut "
            "off or is still running",
            _text(pl.col("turn_id")),
        ),
    )


def _why_shut_down() -> pl.Expr:
    """What a shutdown after an open turn or tool means: the user quit (a routine shutdown,
    or one that names no type), or the session ended some other way (``error``)."""
    return (
        pl.when(pl.col("_shutdown_type") == "routine")
        .then(pl.lit("the user ended the session while it ran (e.g. at a permission prompt)"))
        .otherwise(pl.format("the session shut down ({}) while it ran", "_shutdown_type"))
    )


def _turns_open_at_shutdown(ctx: _Context) -> pl.DataFrame:
    left_open = _open_last_turn(ctx).filter(pl.col("_shutdown_after").is_not_null())
    return _found(
        left_open,
        pl.format(
            "the turn (turnId {}) was still open when the session shut down (line {}): {}",
            _text(pl.col("turn_id")),
            "_shutdown_after",
            _why_shut_down(),
        ),
    )


def _tools_duplicate_id(ctx: _Context) -> pl.DataFrame:
    repeated = ctx.events.filter(
        TYPE.is_in([TOOL_START, TOOL_COMPLETE]) & pl.col("tool_call_id").is_not_null()
    ).filter(pl.int_range(pl.len()).over(*SESSION, "type", "tool_call_id") > 0)
    return _found(
        repeated,
        pl.format(
            "{} repeats toolCallId {}, already seen on line {}",
            "type",
            "tool_call_id",
            pl.col("line").min().over(*SESSION, "type", "tool_call_id"),
        ),
    )


def _tools_orphan_complete(ctx: _Context) -> pl.DataFrame:
    keys = [*SESSION, "tool_call_id"]
    starts = ctx.tool_starts().select(*keys, _start_line="line")
    completes = (
        ctx.events.filter((TYPE == TOOL_COMPLETE) & ~pl.col("is_user_requested").fill_null(False))
        .unique(subset=keys, keep="first", maintain_order=True)
        .join(starts, on=keys, how="left")
    )
    orphans = completes.filter(
        pl.col("_start_line").is_null() | (pl.col("_start_line") > pl.col("line"))
    )
    message = (
        pl.when(pl.col("tool_call_id").is_null())
        .then(pl.lit("tool.execution_complete has no toolCallId: it pairs with no start"))
        .when(pl.col("_start_line").is_null())
        .then(
            pl.format("tool.execution_complete of {} has no tool.execution_start", "tool_call_id")
        )
        .otherwise(
            pl.format(
                "tool.execution_complete of {} comes before its start (line {})",
                "tool_call_id",
                "_start_line",
            )
        )
    )
    return _found(orphans, message)


def _tool_runs(ctx: _Context) -> pl.DataFrame:
    """Each tool start with the line of its first complete after it, and its deadline: the
    turn_end of its turn (main agent) or its sub-agent's end (sub-agent tools)."""
    if "runs" in ctx.cache:
        return ctx.cache["runs"]
    keys = [*SESSION, "tool_call_id"]
    starts = ctx.tool_starts()
    completes = ctx.events.filter(TYPE == TOOL_COMPLETE).select(*keys, _done_line="line")
    done = (
        starts.select(*keys, "line")
        .join(completes, on=keys, how="inner")
        .filter(pl.col("_done_line") > pl.col("line"))
        .group_by(keys)
        .agg(pl.col("_done_line").min())
    )
    finishes = (
        ctx.events.filter(TYPE.is_in(SUBAGENT_END))
        .group_by(*SESSION, agent_id=SUBAGENT_KEY)
        .agg(_agent_end_line=pl.col("line").min())
    )
    runs = (
        starts.join(done, on=keys, how="left")
        .join(finishes, on=[*SESSION, "agent_id"], how="left")
        .with_columns(
            _deadline=pl.when(MAIN)
            .then(pl.when(pl.col("in_turn")).then(pl.col("_turn_end_line")))
            .otherwise(
                pl.when(pl.col("_agent_end_line") > pl.col("line")).then(pl.col("_agent_end_line"))
            ),
            _bound=pl.when(MAIN)
            .then(pl.lit("its turn ended"))
            .otherwise(pl.lit("its sub-agent finished")),
        )
    )
    ctx.cache["runs"] = runs
    return runs


def _tools_not_completed_in_turn(ctx: _Context) -> pl.DataFrame:
    runs = _tool_runs(ctx).filter(
        pl.col("_deadline").is_not_null()
        & (pl.col("_done_line").is_null() | (pl.col("_done_line") > pl.col("_deadline")))
    )
    message = pl.format(
        "{} ({}) was not completed before {} (line {}){}",
        _text(pl.col("tool_name")),
        "tool_call_id",
        "_bound",
        "_deadline",
        pl.when(pl.col("_done_line").is_null())
        .then(pl.lit(": its complete is missing"))
        .otherwise(pl.format(": it completes on line {}", "_done_line")),
    )
    return _found(runs, message)


def _tools_never_completed(ctx: _Context) -> pl.DataFrame:
    runs = _tool_runs(ctx).filter(
        pl.col("_deadline").is_null()
        & pl.col("_done_line").is_null()
        & pl.col("_shutdown_after").is_null()
    )
    return _found(
        runs,
        pl.format(
            "{} ({}) never completed: the log ends while it runs (cut off or still running)",
            _text(pl.col("tool_name")),
            "tool_call_id",
        ),
    )


def _tools_open_at_shutdown(ctx: _Context) -> pl.DataFrame:
    runs = _tool_runs(ctx).filter(
        pl.col("_deadline").is_null()
        & pl.col("_done_line").is_null()
        & pl.col("_shutdown_after").is_not_null()
    )
    return _found(
        runs,
        pl.format(
            "{} ({}) was still running when the session shut down (line {}): {}",
            _text(pl.col("tool_name")),
            "tool_call_id",
            "_shutdown_after",
            _why_shut_down(),
        ),
    )


def _tools_outside_turn(ctx: _Context) -> pl.DataFrame:
    outside = ctx.events.filter(
        MAIN
        & TYPE.is_in([TOOL_START, TOOL_COMPLETE])
        & ~pl.col("in_turn")
        & ~((TYPE == TOOL_COMPLETE) & pl.col("is_user_requested").fill_null(False))
    )
    return _found(
        outside,
        pl.format("main-agent {} ({}) outside any turn", "type", _text(pl.col("tool_call_id"))),
    )


def _tools_requested_not_started(ctx: _Context) -> pl.DataFrame:
    requests = (
        ctx.events.filter((TYPE == "assistant.message") & (pl.col("tool_requests").list.len() > 0))
        .select(*LOCATION, _request=pl.col("tool_requests"))
        .explode("_request")
        .with_columns(
            tool_call_id=pl.col("_request").struct.field("tool_call_id"),
            _name=pl.col("_request").struct.field("name"),
        )
        .filter(pl.col("tool_call_id").is_not_null())
    )
    keys = [*SESSION, "tool_call_id"]
    started = ctx.events.filter(TYPE == TOOL_START).select(keys).unique()
    missing = requests.join(started, on=keys, how="anti")
    return _found(
        missing,
        pl.format(
            "toolRequests asks for {} ({}) but no tool.execution_start follows",
            _text(pl.col("_name")),
            "tool_call_id",
        ),
    )


def _subagent_spans(ctx: _Context) -> pl.DataFrame:
    """Per session and sub-agent (the task's toolCallId): the line of its first start."""
    return (
        ctx.events.filter(TYPE == "subagent.started")
        .group_by(*SESSION, _agent=SUBAGENT_KEY)
        .agg(_started_line=pl.col("line").min())
    )


def _subagents_unfinished(ctx: _Context) -> pl.DataFrame:
    agent = SUBAGENT_KEY
    ends = ctx.events.filter(TYPE.is_in(SUBAGENT_END)).select(
        *SESSION, _agent=agent, _end_line="line"
    )
    started = ctx.events.filter(TYPE == "subagent.started").with_columns(_agent=agent)
    finished = (
        started.join(ends, on=[*SESSION, "_agent"])
        .filter(pl.col("_end_line") > pl.col("line"))
        .select("file", "line")
    )
    unfinished = started.join(finished, on=["file", "line"], how="anti")
    return _found(
        unfinished,
        pl.format(
            "sub-agent {} ({}) never finished: no subagent.completed or subagent.failed "
            "(cut off or still running)",
            _text(pl.col("tool_name")),
            _text(pl.col("_agent")),
        ),
    )


def _subagents_orphan_finish(ctx: _Context) -> pl.DataFrame:
    ends = (
        ctx.events.filter(TYPE.is_in(SUBAGENT_END))
        .with_columns(_agent=SUBAGENT_KEY)
        .join(_subagent_spans(ctx), on=[*SESSION, "_agent"], how="left")
        .filter(pl.col("_started_line").is_null() | (pl.col("_started_line") > pl.col("line")))
    )
    return _found(
        ends,
        pl.format("{} of {} with no subagent.started before it", "type", _text(pl.col("_agent"))),
    )


def _subagents_unknown_agent(ctx: _Context) -> pl.DataFrame:
    lines = (
        ctx.events.filter(pl.col("agent_id").is_not_null())
        .join(
            _subagent_spans(ctx).rename({"_agent": "agent_id"}),
            on=[*SESSION, "agent_id"],
            how="left",
        )
        .filter(pl.col("_started_line").is_null() | (pl.col("line") < pl.col("_started_line")))
        .with_columns(_lines=pl.len().over(*SESSION, "agent_id"))
        .sort("file", "line")
        .unique(subset=[*SESSION, "agent_id"], keep="first", maintain_order=True)
    )
    return _found(
        lines,
        pl.format(
            "agentId {} names no started sub-agent ({} lines; first here)", "agent_id", "_lines"
        ),
    )


def _completion_outside_turn(ctx: _Context) -> pl.DataFrame:
    return _found(
        ctx.events.filter((TYPE == "session.task_complete") & ~pl.col("during_turn")),
        pl.lit("session.task_complete outside any turn"),
    )


def _completion_without_tool(ctx: _Context) -> pl.DataFrame:
    requested = (
        pl.col("tool_requests")
        .list.eval(pl.element().struct.field("name") == "task_complete")
        .list.any()
        .fill_null(False)
    )
    called = pl.col("in_turn") & (
        ((TYPE == TOOL_START) & (pl.col("tool_name") == "task_complete"))
        | ((TYPE == "assistant.message") & requested)
    )
    lonely = ctx.events.filter(
        (TYPE == "session.task_complete")
        & pl.col("in_turn")
        & ~called.any().over(*SESSION, "turn_index")
    )
    return _found(
        lonely,
        pl.lit("session.task_complete in a turn that made no task_complete tool call"),
    )


def _number(path: str) -> pl.Expr:
    return pl.col("detail").str.json_path_match(path).cast(pl.Float64, strict=False)


def _continuity_event_count(ctx: _Context) -> pl.DataFrame:
    resumes = ctx.events.filter(TYPE == "session.resume").with_columns(
        _claimed=_number("$.eventCount")
    )
    duplicates = ctx.diagnostics.filter(pl.col("kind") == "duplicate-id").select(
        *SESSION, _dup_line="line"
    )
    counted = (
        resumes.filter(pl.col("_claimed").is_not_null())
        .join(duplicates, on=SESSION, how="left")
        .group_by(*LOCATION, "_claimed", "_row", maintain_order=True)
        .agg(_dups=(pl.col("_dup_line") < pl.col("line")).sum())
        .with_columns(_before=pl.col("_row") + pl.col("_dups"))
        .filter(pl.col("_before") != pl.col("_claimed"))
    )
    return _found(
        counted,
        pl.format(
            "session.resume says eventCount {} but {} events precede it: events were {}",
            pl.col("_claimed").cast(pl.Int64),
            "_before",
            pl.when(pl.col("_before") < pl.col("_claimed"))
            .then(pl.lit("lost or removed"))
            .otherwise(pl.lit("added")),
        ),
    )


def _continuity_file_size(ctx: _Context) -> pl.DataFrame:
    # A later session in the same file (two logs spliced, `cat a b`) counts its bytes from its
    # own first line: the file it was written to began there.
    later_session = pl.col("session_id") != pl.col("session_id").first().over("file")
    base = pl.when(later_session).then(pl.col("offset").min().over(*SESSION)).otherwise(0)
    # A byte order mark (E124) was added in front of what the CLI wrote: not counted.
    marks = ctx.diagnostics.filter(pl.col("kind") == "bom").select("file").unique()
    marked = (
        ctx.events.with_columns(_base=base)
        .filter(TYPE.is_in(["session.resume", "session.shutdown"]))
        .join(marks.with_columns(_mark=pl.lit(3, pl.Int64)), on="file", how="left")
        .with_columns(
            _claimed=_number("$.eventsFileSizeBytes"),
            # A later session's bytes count from its own first line, the first's from the
            # file's start (after a byte order mark).
            offset=pl.col("offset")
            - pl.when(pl.col("_base") > 0)
            .then(pl.col("_base"))
            .otherwise(pl.col("_mark").fill_null(0)),
        )
    )
    wrong = marked.filter(
        pl.col("_claimed").is_not_null() & (pl.col("_claimed") != pl.col("offset"))
    )
    return _found(
        wrong,
        pl.format(
            "{} says eventsFileSizeBytes {} but its line starts at byte {}: {} bytes before it "
            "were {}",
            "type",
            pl.col("_claimed").cast(pl.Int64),
            "offset",
            (pl.col("offset") - pl.col("_claimed")).abs().cast(pl.Int64),
            pl.when(pl.col("offset") < pl.col("_claimed"))
            .then(pl.lit("lost or removed"))
            .otherwise(pl.lit("added or rewritten")),
        ),
    )


def _continuity_several_sessions(ctx: _Context) -> pl.DataFrame:
    later = ctx.events.with_columns(
        _first=pl.col("session_id").first().over("file"),
        _sessions=pl.col("session_id").n_unique().over("file"),
    ).filter((pl.col("_row") == 0) & (pl.col("session_id") != pl.col("_first")))
    return _found(
        later,
        pl.format(
            "session {} begins here: this file holds {} sessions (it began with session {}); "
            "each is reported on its own",
            "session_id",
            "_sessions",
            "_first",
        ),
    )


_CHECKS: dict[str, Callable[[_Context], pl.DataFrame]] = {
    "E104": _envelope_parent_chain,
    "E105": _envelope_timestamps,
    "E106": _envelope_ephemeral,
    "E107": _envelope_unknown,
    "E108": _envelope_first_event,
    "E109": _envelope_session_id,
    "E119": _envelope_timestamp_format,
    "T201": _turns_orphan_end,
    "T202": _turns_start_while_open,
    "T203": _turns_id_mismatch,
    "T204": _turns_unclosed,
    "T205": _turns_open_at_shutdown,
    "X301": _tools_orphan_complete,
    "X302": _tools_not_completed_in_turn,
    "X303": _tools_never_completed,
    "X304": _tools_duplicate_id,
    "X305": _tools_outside_turn,
    "X306": _tools_requested_not_started,
    "X307": _tools_open_at_shutdown,
    "S401": _subagents_unfinished,
    "S402": _subagents_orphan_finish,
    "S403": _subagents_unknown_agent,
    "C501": _completion_outside_turn,
    "C502": _completion_without_tool,
    "R601": _continuity_event_count,
    "R602": _continuity_file_size,
    "R603": _continuity_several_sessions,
}


def _diagnostic_findings(diagnostics: pl.DataFrame) -> pl.DataFrame:
    code = pl.col("kind").replace_strict(
        DIAGNOSTIC_RULES, default=OTHER_DAMAGE, return_dtype=pl.String
    )
    message = (
        pl.when(code == OTHER_DAMAGE)
        .then(pl.format("{}: {}", "kind", "message"))
        .otherwise(pl.col("message"))
    )
    return diagnostics.select(
        "file",
        line=pl.when(pl.col("line") > 0).then(pl.col("line")),
        event_id="event_id",
        session_id="session_id",
        message=message,
        code=code,
    )


def _tag(frame: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    return frame.with_columns(
        code=pl.lit(rule.code), name=pl.lit(rule.name), severity=pl.lit(rule.severity)
    )


def empty_findings() -> pl.DataFrame:
    return pl.DataFrame(schema=FINDINGS_SCHEMA)


def check(
    result: ReadResult,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
) -> pl.DataFrame:
    """Check every file of ``result`` against the selected rules.

    Returns the findings frame (FINDINGS_SCHEMA), sorted by file, line and code. ``select`` and
    ``ignore`` take codes, code prefixes, names or ``ALL`` (see :func:`matching`).
    """
    chosen = resolve(select, ignore)
    codes = {rule.code for rule in chosen}
    ctx = _Context(_prepare(result.events), result.diagnostics)
    parts = []
    for rule in chosen:
        if rule.code in _CHECKS:
            parts.append(_tag(_CHECKS[rule.code](ctx), rule))
    from_reader = _diagnostic_findings(result.diagnostics).filter(pl.col("code").is_in(codes))
    if not from_reader.is_empty():
        names = pl.DataFrame(
            [(rule.code, rule.name, rule.severity) for rule in chosen],
            schema={"code": pl.String, "name": pl.String, "severity": pl.String},
            orient="row",
        )
        parts.append(from_reader.join(names, on="code", how="left"))
    columns = list(FINDINGS_SCHEMA)
    schema = pl.Schema(FINDINGS_SCHEMA)
    frames = [empty_findings(), *(part.select(columns).cast(schema) for part in parts)]
    return pl.concat(frames, how="vertical").sort(
        "file", "line", "code", "event_id", nulls_last=False, maintain_order=True
    )


def failing_severities(*, strict: bool) -> tuple[Severity, ...]:
    """The severities that fail the gate: errors, and warnings too under --strict."""
    return ("error", "warning") if strict else ("error",)


def checked_files(result: ReadResult) -> pl.DataFrame:
    """One row per session log read (file, session_id), in file order: events and diagnostics
    both, so a file that gave no event is still listed."""
    parts = [
        result.events.select("file", "session_id"),
        result.diagnostics.select("file", "session_id"),
    ]
    return (
        pl.concat(parts, how="vertical")
        .unique(subset=SESSION, keep="first", maintain_order=True)
        .sort("file", maintain_order=True)
    )


@dataclass(frozen=True)
class Report:
    """What validate decides: the findings, the logs checked, and whether the gate fails."""

    findings: pl.DataFrame
    files: pl.DataFrame
    rules: Sequence[Rule]
    strict: bool = False

    @property
    def failing(self) -> pl.DataFrame:
        return self.findings.filter(
            pl.col("severity").is_in(list(failing_severities(strict=self.strict)))
        )

    @property
    def failed(self) -> bool:
        return not self.failing.is_empty()

    def statistics(self) -> pl.DataFrame:
        """Findings per rule, most frequent first."""
        return (
            self.findings.group_by("code", "name", "severity")
            .agg(count=pl.len().cast(pl.Int64))
            .sort(["count", "code"], descending=[True, False])
        )

    def summary(self) -> dict[str, Any]:
        by_severity = dict(self.findings.group_by("severity").len().iter_rows())
        return {
            "files": self.files["file"].n_unique(),
            "sessions": self.files["session_id"].n_unique(),
            "findings": self.findings.height,
            "errors": by_severity.get("error", 0),
            "warnings": by_severity.get("warning", 0),
            "info": by_severity.get("info", 0),
            "failing": self.failing.height,
            "files_failing": self.failing["file"].n_unique(),
            "strict": self.strict,
            "failed": self.failed,
        }


def check_batch(
    result: ReadResult,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The findings and the files checked of one batch of logs (for :func:`combine`)."""
    return check(result, select=select, ignore=ignore), checked_files(result)


def combine(
    parts: Sequence[tuple[pl.DataFrame, pl.DataFrame]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    strict: bool = False,
) -> Report:
    """The report over several batches' :func:`check_batch` results."""
    findings = [f for f, _ in parts] or [empty_findings()]
    files = [f for _, f in parts]
    return Report(
        findings=pl.concat(findings).sort("file", "line", "code", nulls_last=False),
        files=pl.concat(files).sort("file", maintain_order=True)
        if files
        else pl.DataFrame(schema={"file": pl.String, "session_id": pl.String}),
        rules=resolve(select, ignore),
        strict=strict,
    )


def validate(
    result: ReadResult,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    strict: bool = False,
) -> Report:
    """Check ``result`` and decide the gate (the core of ``copilot-logs validate``)."""
    select = list(select) if select is not None else None
    ignore = list(ignore)
    return Report(
        findings=check(result, select=select, ignore=ignore),
        files=checked_files(result),
        rules=resolve(select, ignore),
        strict=strict,
    )
