"""The spans of each interaction, built from the frames every command reads, shaped as CLI
1.0.102's own exporter writes them (docs/otel.md, "The mapping"). Ids are hashes of the session
id and the ids of the events a span stands for, so a log that grew keeps every earlier span's id.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import polars as pl

from copilot_logs import derive
from copilot_logs.commands.timeline import tool_frame
from copilot_logs.derive import MAIN, SESSION, TYPE
from copilot_logs.derive.calls import EXACT, call_records

INTERNAL, CLIENT = 1, 3
"""Span kinds, as OTLP numbers them (the CLI's chat spans are CLIENT, the rest INTERNAL)."""
UNSET, ERROR = 0, 2
SERVICE = "github-copilot"
DEFAULT_PROVIDER = "github"
"""``gen_ai.provider.name`` without a bring-your-own-key provider: the Copilot service."""
SHELL_EXECUTABLES = {"bash": "bash"}
"""Shell tools and the executable the CLI names their spans after once they ran."""
PLAN_AGENT = "github.copilot.default"

Value = str | int | float | bool | list[str]
Attributes = tuple[tuple[str, Value], ...]


@dataclass(frozen=True)
class Event:
    name: str
    time_ns: int
    attributes: Attributes = ()


@dataclass(frozen=True)
class Span:
    """One span, as OTLP holds it: ids as bytes, times in nanoseconds since the epoch."""

    trace_id: bytes
    span_id: bytes
    parent_id: bytes | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Attributes
    events: tuple[Event, ...] = ()
    status: int = UNSET
    message: str = ""


@dataclass(frozen=True)
class Trace:
    """One interaction's spans: a prompt (or a nudge) and everything it caused."""

    file: str
    session_id: str
    interaction_index: int
    started_ns: int
    trace_id: bytes
    open: bool
    """The interaction may still be going on (its agent loop has not ended, and nothing after
    it in the log says it is over): ``otel`` leaves it out unless --include-open."""
    copilot_version: str | None
    spans: tuple[Span, ...]


def traces(annotated: pl.DataFrame, *, capture_content: bool = False) -> list[Trace]:
    """Every interaction of the annotated events (:func:`copilot_logs.derive.annotate`) as a
    trace, open ones included, in file order."""
    if annotated.is_empty():
        return []
    return [
        trace
        for key, rows in _by_session(annotated).items()
        for trace in _Session(key, rows, capture_content).traces()
    ]


def span_id(*parts: str) -> bytes:
    """A span's id: 8 bytes of a hash of what it stands for (never all zero: OTLP's "none")."""
    return _digest(8, parts)


def trace_id(*parts: str) -> bytes:
    return _digest(16, parts)


def _digest(size: int, parts: Iterable[str]) -> bytes:
    text = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(text, digest_size=size, person=b"copilot-logs").digest()
    return digest if any(digest) else digest[:-1] + b"\x01"


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_NS = (1 << 64) - 1


def nanos(moment: datetime | None) -> int | None:
    """A log's time (milliseconds, UTC) in nanoseconds since the epoch, held to what OTLP's
    unsigned 64 bits hold (1970 to 2554: a log time outside them is damage)."""
    if moment is None:
        return None
    delta = moment - EPOCH
    exact = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return min(max(exact, 0), LATEST_NS)


Row = dict[str, Any]
Key = tuple[str, str]


@dataclass
class _Rows:
    """One session log's rows of each frame."""

    prompts: list[Row] = field(default_factory=list)
    calls: list[Row] = field(default_factory=list)
    turns: list[Row] = field(default_factory=list)
    tools: list[Row] = field(default_factory=list)
    runs: list[Row] = field(default_factory=list)
    permissions: list[Row] = field(default_factory=list)
    ends: list[Row] = field(default_factory=list)
    facts: Row = field(default_factory=dict)


def _by_session(annotated: pl.DataFrame) -> dict[Key, _Rows]:
    """Each session log's rows of the frames the spans are made of, from the commands that own
    each concept."""
    where = annotated.select(
        *SESSION, "line", "event_id", "interaction_index", "turn_id", "interaction_id"
    )
    turns, sub_calls = derive.turns(annotated), derive.subagent_calls(annotated)
    timed = (*SESSION, "line", "ended_at", "last_event_at", "text")
    timing = pl.concat(
        [
            turns.select(*timed, previous_at=pl.lit(None, pl.Datetime("ms", "UTC"))),
            sub_calls.select(*timed, "previous_at"),
        ],
        how="vertical_relaxed",
    )
    calls = (
        call_records(annotated)
        .join(where, on=[*SESSION, "line"], how="left")
        .join(timing, on=[*SESSION, "line"], how="left")
    )
    prompts = annotated.filter(MAIN & (TYPE == "user.message") & ~pl.col("is_queued")).select(
        *SESSION, "line", "event_id", "timestamp", "interaction_index", "interaction_id",
        "turn_id", "text", "agent_mode", is_nudge=pl.col("is_nudge").fill_null(False)
    )  # fmt: skip
    tools = tool_frame(annotated).filter(pl.col("started_at").is_not_null())
    runs = derive.subagent_runs(annotated).join(
        annotated.select(*SESSION, start_line="line", start_index="interaction_index"),
        on=[*SESSION, "start_line"],
        how="left",
    )
    permissions = annotated.filter(
        TYPE.is_in(["permission.requested", "permission.completed"])
    ).select(*SESSION, "line", "event_id", "type", "timestamp", "agent_id")
    ends = annotated.filter(
        TYPE.is_in(["abort", "session.shutdown", "session.error"]) & MAIN
    ).select(*SESSION, "line", "type", "timestamp", "interaction_index", "error_code", "error")
    facts = derive.session_facts(annotated).select(*SESSION, "copilot_version")
    frames = {"prompts": prompts, "calls": calls, "turns": turns.drop("text"), "tools": tools}
    frames |= {"runs": runs, "permissions": permissions, "ends": ends}
    rows: dict[Key, _Rows] = defaultdict(_Rows)
    for name, frame in frames.items():
        for row in frame.iter_rows(named=True):
            getattr(rows[(row["file"], row["session_id"])], name).append(row)
    for row in facts.iter_rows(named=True):
        rows[(row["file"], row["session_id"])].facts = row
    return rows


class _Session:
    """The traces of one session log."""

    def __init__(self, key: Key, rows: _Rows, capture_content: bool) -> None:
        self.file, self.session_id = key
        self.rows = rows
        self.capture = capture_content
        self.version = rows.facts.get("copilot_version")
        providers = Counter(r["provider_type"] for r in rows.calls if r["provider_type"])
        self.provider = providers.most_common(1)[0][0] if providers else DEFAULT_PROVIDER
        self.spans: dict[int, list[Span]] = defaultdict(list)  # by interaction
        # each tool's and sub-agent's span and interaction, by toolCallId (its task's, for one)
        self.tool_spans: dict[str, tuple[int, Span]] = {}
        self.agent_spans: dict[str, tuple[int, Span]] = {}

    def traces(self) -> list[Trace]:
        prompts = {row["interaction_index"]: row for row in self.rows.prompts}
        self.roots = {index: self._root_id(index, prompt) for index, prompt in prompts.items()}
        self.plans = {
            index: span_id(self.session_id, "plan", self._key(index, prompt))
            for index, prompt in prompts.items()
            if prompt["agent_mode"] == "plan"
        }
        self._main_calls()
        self._tools_and_agents()
        self._permissions()
        indexes = sorted(set(prompts) | set(self.spans))
        last = max(indexes, default=0)
        found = []
        for index in indexes:
            root = self._root(index, prompts.get(index), last)
            if root is None:
                continue
            span, is_open = root
            children = self.spans[index]
            if index in self.plans:
                children = [self._plan(span, index), *children]
            ordered = sorted(children, key=lambda s: (s.start_ns, s.span_id))
            where = (self.file, self.session_id, index, span.start_ns, span.trace_id)
            found.append(Trace(*where, is_open, self.version, (span, *ordered)))
        return found

    def _plan(self, root: Span, index: int) -> Span:
        """Plan mode's span between the root and the main agent's calls and tools."""
        attributes = (
            ("gen_ai.operation.name", "plan"),
            ("gen_ai.conversation.id", self.session_id),
            ("gen_ai.agent.id", PLAN_AGENT),
        )
        ids = (root.trace_id, self.plans[index], root.span_id)
        return Span(*ids, "plan", INTERNAL, root.start_ns, root.end_ns, attributes)

    def _key(self, index: int, prompt: Row | None) -> str:
        """What an interaction is known by: its prompt's event id (the lines before the first
        prompt, index 0, by that)."""
        return prompt["event_id"] if prompt and prompt["event_id"] else f"interaction-{index}"

    def _root_id(self, index: int, prompt: Row | None) -> tuple[bytes, bytes]:
        key = self._key(index, prompt)
        return trace_id(self.session_id, key), span_id(self.session_id, "invoke_agent", key)

    def _parent(self, index: int) -> tuple[bytes, bytes]:
        """The trace and the span a main-agent chat or tool of interaction ``index`` goes under:
        the plan span in plan mode, else the root."""
        trace, root = self.roots.get(index) or self.roots.setdefault(
            index, self._root_id(index, None)
        )
        return trace, self.plans.get(index, root)

    def _root(self, index: int, prompt: Row | None, last: int) -> tuple[Span, bool] | None:
        trace, root = self.roots[index]
        children = self.spans[index]
        main = [
            c for c in self.rows.calls if c["agent_id"] is None and c["interaction_index"] == index
        ]
        turns = [t for t in self.rows.turns if t["interaction_index"] == index]
        ends = [e for e in self.rows.ends if e["interaction_index"] == index]
        if prompt is None and not children:
            return None
        start = nanos(prompt["timestamp"]) if prompt else min(c.start_ns for c in children)
        assert start is not None
        end_candidates = [start, *(c.end_ns for c in children)]
        end_candidates += [
            t for t in (nanos(t["ended_at"] or t["last_event_at"]) for t in turns) if t
        ]
        aborted = [e for e in ends if e["type"] == "abort"]
        end_candidates += [nanos(e["timestamp"]) or start for e in aborted]
        attributes: list[tuple[str, Value]] = [
            ("gen_ai.operation.name", "invoke_agent"),
            ("gen_ai.provider.name", self.provider),
            ("gen_ai.conversation.id", self.session_id),
        ]
        attributes += _totals(main)
        attributes.append(("github.copilot.turn_count", len(main)))
        events: list[Event] = []
        if prompt is not None:
            source = "autopilot" if prompt["is_nudge"] else "user"
            said: list[tuple[str, Value]] = [("github.copilot.user.message.source", source)]
            for name in ("agent_mode", "interaction_id", "turn_id"):
                if prompt[name] is not None:
                    said.append((f"github.copilot.user.message.{name}", prompt[name]))
            if self.capture and prompt["text"]:
                said.append(("github.copilot.user.message.content", prompt["text"]))
            events.append(Event("github.copilot.user.message", start, tuple(said)))
        status, message = UNSET, ""
        errors = [e for e in ends if e["type"] == "session.error"]
        if aborted:
            status, message = ERROR, "Operation aborted"
            attributes.insert(0, ("error.type", "cancelled"))
            at = nanos(aborted[0]["timestamp"]) or start
            events.append(Event("github.copilot.session.abort", at))
        elif errors:
            status, message = ERROR, "Session error"
            attributes.insert(0, ("error.type", errors[0]["error_code"] or "session_error"))
        place = (trace, root, None, "invoke_agent", INTERNAL, start, max(end_candidates))
        span = Span(*place, tuple(attributes), tuple(events), status, message)
        return span, self._is_open(index, last, turns, ends)

    def _is_open(self, index: int, last: int, turns: list[Row], ends: list[Row]) -> bool:
        """Whether the interaction may still be going on: it is the session's last, nothing
        after its start says the session stopped (an abort, a shutdown), and its agent loop has
        not ended (its last turn closed with a reply that asked for no tool)."""
        if index < last or ends:
            return False
        if not turns:
            return True
        final = turns[-1]
        return bool(final["open"] or not final["ended_loop"])

    # -- LLM calls -------------------------------------------------------------------------

    def _main_calls(self) -> None:
        for call in self.rows.calls:
            if call["agent_id"] is None:
                trace, parent = self._parent(call["interaction_index"])
                span = self._chat(call, trace, parent, main=True)
                self.spans[call["interaction_index"]].append(span)

    def _chat(self, call: Row, trace: bytes, parent: bytes, *, main: bool) -> Span:
        model = call["model"] or "unknown"
        key = call["event_id"] or call["record_event_id"] or f"line-{call['line']}"
        if call["record_at"] is not None:
            end = nanos(call["record_at"])
            assert end is not None
            start = end - (call["model_time_ms"] or 0) * 1_000_000
        else:
            start = nanos(call["previous_at"] or call["started_at"]) or 0
            end = nanos(call["ended_at"] or call["last_event_at"]) or start
        attributes: list[tuple[str, Value]] = [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.provider.name", call["provider_type"] or self.provider),
            ("gen_ai.request.model", model),
            ("gen_ai.conversation.id", self.session_id),
        ]
        if call["finish_reason"]:
            attributes.append(("gen_ai.response.finish_reasons", [call["finish_reason"]]))
        attributes += [
            (name, int(call[key])) for name, key in _TOKENS.items() if call[key] is not None
        ]
        if call["source"] == EXACT:
            attributes.append(("gen_ai.response.model", model))
        attributes += _known(call, _CALL_FIGURES)
        if call["record_at"] is not None and call["model_time_ms"] is not None:
            attributes.append(("github.copilot.server_duration", float(call["model_time_ms"])))
        if main:
            attributes += _known(call, _CALL_PLACE)
        if call["ttft_ms"] is not None:
            attributes.append(("gen_ai.response.time_to_first_chunk", call["ttft_ms"] / 1000))
        attributes.append(("copilot_logs.usage.source", call["source"]))
        if self.capture and call["text"]:
            attributes.append(("gen_ai.output.messages", call["text"]))
        ids = (trace, span_id(self.session_id, "chat", key), parent)
        return Span(*ids, f"chat {model}", CLIENT, start, max(start, end), tuple(attributes))

    # -- tools and sub-agents --------------------------------------------------------------

    def _tools_and_agents(self) -> None:
        """Tools, then sub-agents, then their calls: a sub-agent's spans go into the trace of
        its task tool, wherever in the log they were written."""
        runs = {row["tool_call_id"]: row for row in self.rows.runs}
        aborts = sorted(nanos(e["timestamp"]) or 0 for e in self.rows.ends if e["type"] == "abort")
        pending = sorted(self.rows.tools, key=lambda row: row["start_line"])
        # A sub-agent's tools wait for its span, and a sub-agent's span for its task tool:
        # each pass places what it can. What is left (a sub-agent whose task never started)
        # goes under the root of the interaction it was written in.
        while pending:
            waiting = [tool for tool in pending if not self._place_tool(tool, runs, aborts)]
            if len(waiting) == len(pending):
                break
            pending = waiting
        self._place_runs(runs, orphans=True)
        for tool in pending:
            self._place_tool(tool, runs, aborts, fallback=True)
        for call in self.rows.calls:
            if call["agent_id"] is not None:
                index, parent = self._agent_parent(call["agent_id"], call["interaction_index"])
                trace, _ = self._parent(index)
                self.spans[index].append(self._chat(call, trace, parent, main=False))
        self._close_runs()

    def _agent_parent(self, agent: str | None, written_in: int) -> tuple[int, bytes]:
        """The interaction and span a sub-agent's chat or tool goes under: its own span, else
        its task tool's, else the root (or plan) of the interaction it was written in."""
        if agent is not None and agent in self.agent_spans:
            index, span = self.agent_spans[agent]
            return index, span.span_id
        if agent is not None and agent in self.tool_spans:
            index, span = self.tool_spans[agent]
            return index, span.span_id
        return written_in, self._parent(written_in)[1]

    def _place_tool(
        self, tool: Row, runs: dict[str, Row], aborts: list[int], *, fallback: bool = False
    ) -> bool:
        """The tool's span, placed under its agent; False when its sub-agent is not placed
        yet."""
        agent = tool["agent_id"]
        if agent is None:
            index = tool["interaction_index"]
            trace, parent = self._parent(index)
        elif (
            agent in self.agent_spans
            or (agent not in runs and agent in self.tool_spans)
            or fallback
        ):
            index, parent = self._agent_parent(agent, tool["interaction_index"])
            trace, _ = self._parent(index)
        else:
            return False
        start = nanos(tool["started_at"])
        assert start is not None
        end = nanos(tool["completed_at"])
        cancelled = False
        if end is None:
            later = [moment for moment in aborts if moment >= start]
            cancelled = bool(later)
            end = later[0] if later else start
        name = tool["tool_name"] or "unknown"
        denied = tool["error_code"] == "denied"
        executable = SHELL_EXECUTABLES.get(name) if not denied else None
        attributes: list[tuple[str, Value]] = [
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.conversation.id", self.session_id),
            ("gen_ai.tool.name", name),
            ("gen_ai.tool.call.id", tool["tool_call_id"]),
            ("gen_ai.tool.type", "function"),
            ("gen_ai.provider.name", self.provider),
        ]
        if executable:
            attributes.append(("process.executable.name", executable))
        if agent is not None and agent in self.agent_spans:
            agent_name = dict(self.agent_spans[agent][1].attributes).get("gen_ai.agent.name")
            if agent_name:
                attributes.append(("gen_ai.agent.name", agent_name))
        status, message = UNSET, ""
        if cancelled:
            status, message = ERROR, "Operation aborted"
            attributes.append(("error.type", "cancelled"))
        elif tool["success"] is False:
            status, message = ERROR, "Tool failed"
            attributes.append(("error.type", tool["error_code"] or "tool_error"))
        if self.capture:
            if tool["arguments"]:
                attributes.append(("gen_ai.tool.call.arguments", tool["arguments"]))
            if tool["result"]:
                attributes.append(("gen_ai.tool.call.result", tool["result"]))
            if tool["error"] and status == ERROR:
                message = tool["error"]
        key = tool["start_event_id"] or tool["complete_event_id"] or tool["tool_call_id"]
        ids = (trace, span_id(self.session_id, "execute_tool", key), parent)
        title = f"execute_tool {name}" + (f" {executable}" if executable else "")
        times = (start, max(start, end))
        span = Span(
            *ids, title, INTERNAL, *times, tuple(attributes), status=status, message=message
        )
        self.spans[index].append(span)
        self.tool_spans.setdefault(tool["tool_call_id"], (index, span))
        if tool["tool_call_id"] in runs:
            self._place_runs(runs, orphans=False)
        return True

    def _place_runs(self, runs: dict[str, Row], *, orphans: bool) -> None:
        for agent, run in runs.items():
            if agent in self.agent_spans:
                continue
            if agent in self.tool_spans:
                index, task = self.tool_spans[agent]
                trace, parent = task.trace_id, task.span_id
            elif orphans:
                index = run["start_index"] or 0
                trace, parent = self._parent(index)
            else:
                continue
            start = nanos(run["started_at"]) or (nanos(run["finished_at"]) or 0)
            end = nanos(run["finished_at"]) or start
            name = run["agent_name"] or "unknown"
            attributes: tuple[tuple[str, Value], ...] = (
                ("gen_ai.operation.name", "invoke_agent"),
                ("gen_ai.provider.name", self.provider),
                ("gen_ai.conversation.id", self.session_id),
                ("gen_ai.agent.name", name),
            )
            ids = (trace, span_id(self.session_id, "invoke_agent", "sub-agent", agent), parent)
            span = Span(*ids, f"invoke_agent {name}", INTERNAL, start, max(start, end), attributes)
            if run["status"] == "failed":
                span = replace(span, status=ERROR, message="Sub-agent failed")
            self.agent_spans[agent] = (index, span)

    def _close_runs(self) -> None:
        """Each sub-agent span with its calls' totals, ending no earlier than its children."""
        calls: dict[str, list[Row]] = defaultdict(list)
        for call in self.rows.calls:
            calls[call["agent_id"]].append(call)
        for agent, (index, span) in self.agent_spans.items():
            children = [s.end_ns for s in self.spans[index] if s.parent_id == span.span_id]
            attributes = (*span.attributes, *_totals(calls.get(agent, [])))
            end = max([span.end_ns, *children])
            self.spans[index].append(replace(span, end_ns=end, attributes=attributes))

    # -- permissions -----------------------------------------------------------------------

    def _permissions(self) -> None:
        """A ``permission`` span from each permission.requested to the next
        permission.completed of the same agent, under the tool of that agent that was running
        when it asked (the latest started, not yet completed)."""
        by_agent: dict[str | None, list[Row]] = defaultdict(list)
        for row in self.rows.permissions:
            by_agent[row["agent_id"]].append(row)
        for agent, rows in by_agent.items():
            asked: list[Row] = []
            for row in rows:
                if row["type"] == "permission.requested":
                    asked.append(row)
                    continue
                if asked:
                    self._permission(asked.pop(0), row, agent)
            for row in asked:
                self._permission(row, None, agent)

    def _permission(self, asked: Row, answered: Row | None, agent: str | None) -> None:
        line = asked["line"]
        running = [
            tool
            for tool in self.rows.tools
            if tool["agent_id"] == agent
            and tool["start_line"] < line
            and (tool["complete_line"] is None or tool["complete_line"] > line)
        ]
        tool = max(running, key=lambda t: t["start_line"], default=None)
        placed = self.tool_spans.get(tool["tool_call_id"]) if tool else None
        if placed is None:
            return
        index, parent = placed
        start = nanos(asked["timestamp"]) or parent.start_ns
        end = nanos(answered["timestamp"]) if answered else parent.end_ns
        key = asked["event_id"] or f"line-{line}"
        ids = (parent.trace_id, span_id(self.session_id, "permission", key), parent.span_id)
        attributes = (("gen_ai.conversation.id", self.session_id),)
        span = Span(*ids, "permission", INTERNAL, start, max(start, end or start), attributes)
        self.spans[index].append(span)


def _totals(calls: list[Row]) -> list[tuple[str, Value]]:
    """An agent's figures over its calls: the last one's finish reason, and the input and
    output tokens summed where every call has them."""
    found: list[tuple[str, Value]] = []
    reasons = [c["finish_reason"] for c in calls if c["finish_reason"]]
    if reasons:
        found.append(("gen_ai.response.finish_reasons", [reasons[-1]]))
    for name, column in list(_TOKENS.items())[:2]:
        if calls and all(c[column] is not None for c in calls):
            found.append((name, sum(int(c[column]) for c in calls)))
    return found


_TOKENS = {
    "gen_ai.usage.input_tokens": "input_tokens",
    "gen_ai.usage.output_tokens": "output_tokens",
    "gen_ai.usage.cache_read.input_tokens": "cache_read_tokens",
    "gen_ai.usage.cache_write.input_tokens": "cache_write_tokens",
    "gen_ai.usage.cache_creation.input_tokens": "cache_write_tokens",
}
_CALL_FIGURES = {
    "gen_ai.response.id": "api_call_id",
    "github.copilot.cost": "cost",
    "github.copilot.nano_aiu": "nano_aiu",
    "github.copilot.initiator": "initiator",
}
_CALL_PLACE = {
    "github.copilot.turn_id": "turn_id",
    "github.copilot.interaction_id": "interaction_id",
}


def _known(row: Row, columns: dict[str, str]) -> list[tuple[str, Value]]:
    """Each attribute of ``columns`` whose column the row holds a value in."""
    return [(name, row[column]) for name, column in columns.items() if row[column] is not None]
