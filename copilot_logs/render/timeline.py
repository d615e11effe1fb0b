"""The terminal views: ``copilot-logs timeline``'s agent loop of each session as a tree, and the
live view of ``watch`` (and its ndjson records).

A timeline line per node, its start, duration and a bar against the session's longest turn;
every line cut to the width, the preview text giving way (docs/timeline.md). Every log text
shown goes through :func:`one_line` first, so none can move the cursor or rewrite the screen;
rich ``Text`` never reads markup.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.segment import Segment, Segments
from rich.text import Text

from copilot_logs.render import output
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import write_ndjson
from copilot_logs.render.humanize import human_duration, plural, short_id, signed_offset, took_text

if TYPE_CHECKING:
    from copilot_logs.commands.watch import SessionState

Node = dict[str, Any]

PARTIAL_BLOCKS = " ▏▎▍▌▋▊▉"
START_WIDTH = 8
TOOK_WIDTH = 7
NARROW = 72
"""Below this many columns the start offsets are left out to leave room for the tree."""

EVENT_STYLES = {
    "session.error": "bold red",
    "abort": "bold red",
    "session.warning": "yellow",
    "session.task_complete": "bold green",
    "assistant.turn_end": "yellow",
}
# The first of these keys in a tool's arguments says best what the call did.
ARGUMENT = re.compile(
    r'"(?:command|path|pattern|description|prompt|summary|url|query)":"((?:[^"\\]|\\.)*)'
)


@dataclass
class Line:
    """One line of the tree: a label, and the figures shown at the right."""

    label: Text
    offset_ms: int | None = None
    duration_ms: int | None = None
    bar_ms: int | None = None
    bar_style: str = "cyan"
    children: list[Line] = field(default_factory=list)


def print_timeline(
    sessions: Sequence[Node],
    *,
    width: int | None = None,
    show_tools: bool = True,
) -> None:
    for number, session in enumerate(sessions):
        with output.rich_console(width=width) as console:
            if number:
                console.print()
            # Every line already fits: hand rich the segments, skipping its wrapping pass,
            # which dominates the time on long sessions.
            segments: list[Segment] = []
            for line in session_lines(session, console.width, show_tools=show_tools):
                segments.extend(line.render(console))
                segments.append(Segment.line())
            console.print(Segments(segments), soft_wrap=True)


def session_lines(session: Node, width: int, *, show_tools: bool = True) -> Iterator[Text]:
    """The lines of one session's view, each at most ``width`` cells. Every text of the log
    is shown on one line, its control characters as visible escapes."""
    session = _shown(session)
    yield _fit(_title(session), width)
    yield _fit(_summary(session), width)
    roots = [_event_line(e) for e in session["events"]]
    roots += [_interaction_line(i, session["model"], show_tools) for i in session["interactions"]]
    turns = [t for i in session["interactions"] for t in i["turns"]]
    longest = max((t["elapsed_ms"] or 0 for t in turns), default=0)
    layout = _Layout(width, longest or max(_bar_values(roots), default=0))
    yield layout.header()
    for root in roots:
        yield from layout.render(root, prefix="", guide="")


class _Layout:
    def __init__(self, width: int, scale_ms: int) -> None:
        self.width = width
        self.scale_ms = scale_ms
        self.bar_width = max(6, min(40, width // 5))
        self.show_start = width >= NARROW
        right = TOOK_WIDTH + 1 + self.bar_width + (START_WIDTH + 1 if self.show_start else 0)
        self.label_width = max(10, width - right - 1)

    def header(self) -> Text:
        line = Text.assemble((" " * self.label_width + " ", "dim"))
        if self.show_start:
            line.append("start".rjust(START_WIDTH) + " ", style="dim")
        line.append("took".rjust(TOOK_WIDTH) + " ", style="dim")
        longest = human_duration(self.scale_ms) if self.scale_ms else ""
        scale = f"max {longest}" if len(longest) + 4 <= self.bar_width else longest
        line.append(scale[: self.bar_width], style="dim")  # not "max 25.4" for 25.4s
        return line

    def render(self, line: Line, *, prefix: str, guide: str) -> Iterator[Text]:
        # Styles are spans, never a Text's own style: that would cover all appended to it
        # (the guides' dim made whole lines dim).
        label = Text.assemble((prefix + guide, "dim"))
        label.append_text(line.label)
        label.truncate(self.label_width, overflow="ellipsis", pad=True)
        label.append(" ")
        if self.show_start:
            start = "" if line.offset_ms is None else signed_offset(line.offset_ms)
            label.append(start.rjust(START_WIDTH) + " ", style="dim")
        took = "" if line.duration_ms is None else took_text(line.duration_ms)
        label.append(took.rjust(TOOK_WIDTH) + " ")
        label.append(self.bar(line.bar_ms), style=line.bar_style)
        label.rstrip()
        # Offsets of sessions resumed weeks later can outgrow their column.
        label.truncate(self.width)
        yield label
        child_prefix = prefix + {"": "", "├─ ": "│  ", "└─ ": "   "}[guide]
        for number, child in enumerate(line.children, start=1):
            last = number == len(line.children)
            yield from self.render(child, prefix=child_prefix, guide="└─ " if last else "├─ ")

    def bar(self, value_ms: int | None) -> str:
        if not value_ms or value_ms <= 0 or not self.scale_ms:
            return ""
        eighths = min(
            self.bar_width * 8, max(1, round(value_ms / self.scale_ms * self.bar_width * 8))
        )
        full, partial = divmod(eighths, 8)
        return "█" * full + (PARTIAL_BLOCKS[partial] if partial else "")


def _bar_values(lines: list[Line]) -> Iterator[int]:
    for line in lines:
        if line.bar_ms:
            yield line.bar_ms
        yield from _bar_values(line.children)


def _fit(text: Text, width: int) -> Text:
    text.truncate(width, overflow="ellipsis")
    return text


def _title(session: Node) -> Text:
    title = Text.assemble(("session ", "bold"))
    title.append(session["session_id"] or "?", style="bold")
    started = session["started_at"]
    if started:
        moment = datetime.fromisoformat(started.replace("Z", "+00:00")).astimezone()
        title.append(f"  {moment:%Y-%m-%d %H:%M}", style="dim")
    if session["duration_ms"] is not None:
        title.append(f"  {human_duration(session['duration_ms'])}", style="dim")
    return title


def _summary(session: Node) -> Text:
    where = session["repository"] or session["cwd"] or session["file"]
    if session["repository"] and session["branch"]:
        where += f"@{session['branch']}"
    parts = [
        where,
        session["model"] or "model unknown",
        plural(session["llm_calls"], "LLM call", grouped=True) + _open_note(session),
        plural(session["tool_calls"], "tool call", grouped=True)
        + (f" ({session['failed_tool_calls']} failed)" if session["failed_tool_calls"] else ""),
    ]
    if session["subagent_calls"]:
        parts.append(plural(session["subagent_calls"], "sub-agent call", grouped=True))
    parts.append(plural(len(session["interactions"]), "interaction", grouped=True))
    return Text.assemble((" · ".join(parts), "dim"))


def _preview(text: str | None) -> str:
    return " ".join((text or "").split())


def _shown(value: Any) -> Any:
    """Every string of a session's tree as it may be shown: runs of blanks and line breaks as
    one space, other control characters as visible escapes."""
    if isinstance(value, str):
        return one_line(_preview(value))
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return value


# --- the lines of each kind of node --------------------------------------------------------


EVENT_WORDS = {"session.error": "error: ", "session.warning": "warning: "}
"""What the colour of an error or a warning says, in words: plain text (a CI log, a pipe,
NO_COLOR) keeps it."""


def _event_line(event: Node) -> Line:
    style = EVENT_STYLES.get(event["type"], "cyan")
    label = Text.assemble(("• ", style), (EVENT_WORDS.get(event["type"], ""), style))
    label.append(_preview(event["text"]), style=style)
    return Line(label, offset_ms=event["offset_ms"])


def _interaction_line(interaction: Node, session_model: str | None, show_tools: bool) -> Line:
    label = Text.assemble((f"▶ {interaction['interaction_index']} ", "bold"))
    trigger = interaction["trigger"]
    if trigger == "nudge":
        label.append("autopilot nudge", style="bold magenta")
    elif trigger == "prompt":
        label.append("prompt", style="bold blue")
        if interaction["agent_mode"] and interaction["agent_mode"] != "interactive":
            label.append(f" ({interaction['agent_mode']})", style="blue")
        label.append(" " + _preview(interaction["text"]))
    else:
        label.append("no user message (the log starts mid-loop)", style="yellow")
    children = [
        *((e["line"], _event_line(e)) for e in interaction["events"]),
        *((t["line"], _tool_line(t)) for t in interaction.get("tools", [])),
        *((s["line"], _subagent_line(s, session_model)) for s in interaction["subagents"]),
        *((t["line"], _turn_line(t, session_model, show_tools)) for t in interaction["turns"]),
    ]
    return Line(
        label,
        offset_ms=interaction["offset_ms"],
        duration_ms=interaction["duration_ms"],
        children=_in_order(children),
    )


def _turn_line(turn: Node, session_model: str | None, show_tools: bool) -> Line:
    label = Text.assemble((f"#{turn['turn_index']}", "bold"))
    label.append(f" t{turn['turn_id']}" if turn["turn_id"] is not None else "", style="dim")
    if turn.get("interrupted"):
        # Its run of the CLI was killed or crashed, and a later run resumed the session.
        label.append(" [interrupted]", style="bold yellow")
    elif turn.get("open_at_shutdown"):
        label.append(" [open at shutdown]", style="bold yellow")
    elif turn["open"]:
        label.append(" [open]", style="bold yellow")
    elif turn["messages"] == 0:
        label.append(" [no reply]", style="bold red")
    if turn["ended_loop"]:
        label.append(" [final]", style="bold green")
    if turn["task_complete_called"]:
        label.append(" [task_complete]", style="bold green")
    if not show_tools and turn["tool_calls"]:
        label.append(f" {plural(turn['tool_calls'], 'tool', grouped=True)}", style="dim")
        if turn["failed_tool_calls"]:
            label.append(f" ({turn['failed_tool_calls']} failed)", style="red")
    if turn["model"] and turn["model"] != session_model:
        label.append(f" ({turn['model']})", style="magenta")
    label.append(usage_text(turn), style="dim")
    if turn["text"]:
        label.append(" " + _preview(turn["text"]))
    runs = {run["agent_id"]: _subagent_line(run, session_model) for run in turn["subagents"]}
    children: list[tuple[int, Line]] = [(e["line"], _event_line(e)) for e in turn["events"]]
    for tool in turn.get("tools", []):
        line = _tool_line(tool, parent_open=turn["open"])
        spawned = runs.pop(tool["tool_call_id"], None)
        if spawned is not None:
            line.children.append(spawned)
        children.append((tool["line"], line))
    children += [(run["line"] or turn["line"], line) for run, line in _unplaced(turn, runs)]
    return Line(
        label,
        offset_ms=turn["offset_ms"],
        duration_ms=turn["elapsed_ms"] if turn["open"] else turn["duration_ms"],
        bar_ms=turn["elapsed_ms"],
        bar_style="yellow" if turn["open"] else "cyan",
        children=_in_order(children),
    )


def usage_text(call: Node) -> str:
    """What a call used, where its usage record says: `` [1,017 in (100 cached), 13 out,
    ttft 71ms, credits unavailable]``; blank without a record."""
    if call.get("usage_source") != "exact":
        return ""
    parts = []
    if call.get("input_tokens") is not None:
        cached = call.get("cache_read_tokens")
        parts.append(f"{call['input_tokens']:,} in" + (f" ({cached:,} cached)" if cached else ""))
    if call.get("output_tokens") is not None:
        parts.append(f"{call['output_tokens']:,} out")
    if call.get("ttft_ms") is not None:
        parts.append(f"ttft {call['ttft_ms']:,.0f}ms")
    if call.get("ai_credits") is not None:
        parts.append(f"{call['ai_credits']:,.4f} credits")
    elif call.get("credits_status") == "unavailable":
        parts.append("credits unavailable")
    return f" [{', '.join(parts)}]" if parts else ""


def _unplaced(turn: Node, runs: dict[str, Line]) -> Iterator[tuple[Node, Line]]:
    """Sub-agent runs with no tool line to hang under (tools hidden): under the turn."""
    for run in turn["subagents"]:
        if run["agent_id"] in runs:
            yield run, runs[run["agent_id"]]


def _tool_line(tool: Node, *, parent_open: bool = False) -> Line:
    name = tool["name"] or "?"
    label = Text.assemble((f"!{name}" if tool["user_requested"] else name, "bold"))
    status = tool["status"]
    if status == "ok":
        label.append(" ok", style="green")
    elif status == "failed":
        label.append(" failed", style="bold red")
        if tool["error"]:
            label.append(": " + _preview(tool["error"]), style="red")
    elif status == "interrupted":
        # Its run of the CLI was killed or crashed while it ran; the session was resumed.
        label.append(" interrupted", style="bold yellow")
    elif tool.get("open_at_shutdown"):
        # The user ended the session while it waited or ran (e.g. at a permission prompt).
        label.append(" open at shutdown", style="bold yellow")
    elif parent_open:
        label.append(" running", style="bold yellow")
    else:
        # Its turn closed but no complete was written: lost or never recorded.
        label.append(" never completed", style="bold yellow")
    arguments = _argument_preview(tool["arguments"])
    if arguments:
        label.append(" " + arguments, style="dim")
    return _spanning(label, tool, "red" if status == "failed" else "dim")


def _argument_preview(arguments: str | None) -> str:
    """The telling argument (command, path, pattern...) out of the arguments' JSON preview,
    which is cut at 160 characters and so cannot always be parsed."""
    if not arguments:
        return ""
    found = ARGUMENT.search(arguments)
    if found:
        return _preview(found.group(1).replace('\\"', '"').replace("\\n", " "))
    return _preview(arguments)


def _subagent_line(run: Node, session_model: str | None) -> Line:
    label = Text.assemble(("sub-agent ", "bold magenta"))
    label.append(run["agent_name"] or "?", style="bold magenta")
    status = run["status"]
    style = {"completed": "green", "failed": "bold red"}.get(status, "bold yellow")
    label.append(f" {status}", style=style)
    if status == "failed" and run["error"]:
        label.append(": " + _preview(run["error"]), style="red")
    label.append(f" · {plural(run['llm_calls'], 'call', grouped=True)}", style="dim")
    if run["prompt"]:
        label.append(" " + _preview(run["prompt"]), style="dim")
    children: list[tuple[int, Line]] = [(e["line"], _event_line(e)) for e in run["events"]]
    children += [(t["line"], _tool_line(t)) for t in run.get("tools", [])]
    children += [(c["line"], _call_line(c, session_model)) for c in run["calls"]]
    return _spanning(label, run, "magenta", _in_order(children))


def _call_line(call: Node, session_model: str | None) -> Line:
    label = Text.assemble((f"call {call['call_index']}", "bold magenta"))
    if call["open"]:
        label.append(" [open]", style="bold yellow")
    if call["ended_loop"]:
        label.append(" [final]", style="green")
    if call["model"] and call["model"] != session_model:
        label.append(f" ({call['model']})", style="magenta")
    label.append(usage_text(call), style="dim")
    if call["text"]:
        label.append(" " + _preview(call["text"]))
    tools = [_tool_line(t, parent_open=call["open"]) for t in call.get("tools", [])]
    return _spanning(label, call, "magenta", tools)


def _spanning(label: Text, node: Node, style: str, children: list[Line] | None = None) -> Line:
    """The line of a node whose bar spans its own duration (a tool, a sub-agent run, a call)."""
    return Line(
        label,
        offset_ms=node["offset_ms"],
        duration_ms=node["duration_ms"],
        bar_ms=node["duration_ms"],
        bar_style=style,
        children=children or [],
    )


def _in_order(children: list[tuple[int, Line]]) -> list[Line]:
    """The lines by the log line each stands for."""
    return [line for _, line in sorted(children, key=lambda pair: pair[0])]


def _open_note(session: Node) -> str:
    """How many of the session's turns are open: left open at the end or at a shutdown, and
    interrupted by a kill the session was resumed from."""
    interrupted = session.get("interrupted_turns", 0)
    still_open = session["open_turns"] - interrupted
    notes = [f"{still_open} open"] if still_open else []
    notes += [f"{interrupted} interrupted"] if interrupted else []
    return f" ({', '.join(notes)})" if notes else ""


# --- watch's live view ------------------------------------------------------------------------


def visible(text: object) -> str:
    """Log text made safe for the live view: one line, every control character escaped."""
    return one_line(str(text))


def write_record(record: dict[str, object]) -> None:
    """One ndjson record, written and flushed at once (a script reading the pipe sees it)."""
    write_ndjson([record])


def ago(then: datetime | None, now: datetime) -> str:
    """``4s``, ``3m05s``, ``2h10m``, ``3d``: how long before ``now``."""
    if then is None:
        return "?"
    seconds = max(0, int((now - then) / timedelta(seconds=1)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d"


def view(
    states: Sequence[SessionState],
    waiting: Sequence[str],
    *,
    now: datetime | None = None,
) -> RenderableType:
    """The whole screen: a header, then a few lines per session, then the files waited for."""
    now = now or datetime.now(UTC)
    header = Text(
        f"copilot-logs watch: {plural(len(states), 'session')} (Ctrl-C to stop)",
        style="bold",
    )
    parts: list[RenderableType] = [header]
    for state in states:
        parts.extend(_live_lines(state, now))
    for name in waiting:
        parts.append(Text(f"waiting for {visible(name)} to appear", style="dim"))
    return Group(*parts)


def _live_lines(state: SessionState, now: datetime) -> list[Text]:
    """A session: id, mode and status; the loop's position and figures; what runs now."""
    status = "ended" if state.ended else "running"
    title = Text()
    title.append("● " if not state.ended else "○ ", style="green" if not state.ended else "dim")
    title.append(visible(short_id(state.session_id)), style="bold cyan")
    title.append(f"  {state.mode}  ")
    title.append(status, style="dim" if state.ended else "green")
    title.append(f"  last event {ago(state.last_event_at, now)} ago")
    turn = f"turn {state.turns_in_interaction}" + (" (open)" if state.turn_open else "")
    loop = Text(
        f"  interaction {state.interaction}, {turn}  LLM calls {state.llm_calls} main"
        f" + {state.subagent_calls} sub-agent  tools {state.tool_calls}"
        f" ({state.failed_tool_calls} failed)"
    )
    running_agents = ", ".join(visible(name) for name in state.subagents_running)
    agents = f"sub-agents {state.subagent_runs}" + (
        f" (running: {running_agents})" if running_agents else ""
    )
    more = Text(f"  nudges {state.autopilot_nudges}  {agents}  errors ")
    more.append(str(state.errors), style="bold red" if state.errors else "")
    more.append("  task_complete ")
    more.append(*(("yes", "bold green") if state.task_complete else ("no", "")))
    lines = [title, loop, more]
    if state.last_error:
        lines.append(Text(f"  last error: {visible(state.last_error)[:200]}", style="red"))
    for tool in state.running_tools:
        who = " (sub-agent)" if tool.agent_id else ""
        lines.append(
            Text(f"  ▸ {visible(tool.name)}{who} running {ago(tool.started_at, now)}", "yellow")
        )
    notes = []
    if state.damaged_lines:
        notes.append(f"{state.damaged_lines} damaged lines")
    if state.pending_bytes:
        notes.append(f"{state.pending_bytes} bytes of a line still being written")
    if notes:
        lines.append(Text("  " + "; ".join(notes), style="dim"))
    return lines
