"""The live view of ``watch`` (rich), and its ndjson records.

Every log text shown goes through :func:`visible` first, so a log cannot move the cursor or
rewrite the screen; rich ``Text`` never reads markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from rich.console import Group, RenderableType
from rich.text import Text

from copilot_logs.commands.watch import SessionState
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import write_ndjson
from copilot_logs.render.humanize import plural, short_id


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
        parts.extend(session_lines(state, now))
    for name in waiting:
        parts.append(Text(f"waiting for {visible(name)} to appear", style="dim"))
    return Group(*parts)


def session_lines(state: SessionState, now: datetime) -> list[Text]:
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
