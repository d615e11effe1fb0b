"""The SVG pictures of the report: a session's timeline (the nested dicts of
``commands.timeline``) and the LLM calls per day, hand-made.

Lanes on one time axis, long idle stretches cut to narrow breaks (docs/report.md shows one).
Every mark holds a ``<title>`` and takes keyboard focus; every text from a log is escaped by
:func:`text` or :func:`attr`.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from copilot_logs.render.escape import multiline
from copilot_logs.render.humanize import signed_offset, took_text

Node = dict[str, Any]

WIDTH = 1200
LABEL_W = 170
RIGHT = 24
IDLE_MIN_MS = 30_000
IDLE_FRACTION = 0.1
BREAK_W = 44


def tick_label(ms: int, step: int = 1000) -> str:
    """A tick's time since the start, as precise as the axis' ``step`` needs (``1.2s`` beside
    ``1.4s``), so ticks a step apart never read alike."""
    if ms == 0:
        return "0"
    tenths = step < 1000  # the sub-second steps are whole tenths (100, 200, 500 ms)
    if ms < 60_000:
        return f"{ms // 100 / 10:g}s" if tenths else f"{ms // 1000}s"
    minutes, rest = divmod(ms, 60_000)
    hours, minutes = divmod(minutes, 60)
    if tenths and rest // 100 % 10:
        seconds = f"{rest // 100 / 10:04.1f}s"
    elif (step < 60_000 or not hours) and rest >= 1000:
        seconds = f"{rest // 1000:02d}s"
    else:
        seconds = ""
    if not hours:
        return f"{minutes}m{seconds}"
    return f"{hours}h" + (f"{minutes:02d}m{seconds}" if minutes or seconds else "")


_STEPS = [
    s * unit
    for unit in (1, 1000, 60_000, 3_600_000)
    for s in (
        (100, 200, 500)
        if unit == 1
        else (1, 2, 5, 10, 15, 30)
        if unit < 3_600_000
        else (1, 2, 3, 6, 12, 24, 48)
    )
]


def tick_step(span_ms: int, most: int = 10) -> int:
    """The smallest round step that cuts ``span_ms`` into at most ``most`` parts."""
    for step in _STEPS:
        if span_ms / step <= most:
            return step
    return _STEPS[-1] * (int(span_ms / (_STEPS[-1] * most)) + 1)


def end_ms(node: Node, *keys: str) -> int | None:
    start = node.get("offset_ms")
    if start is None:
        return None
    length = next((node[k] for k in keys if node.get(k) is not None), 0)
    return int(start + length)


def walk_events(session: Node) -> Iterator[Node]:
    yield from session["events"]
    for interaction in session["interactions"]:
        yield from interaction.get("events", [])
        for run in runs(interaction):
            yield from run.get("events", [])
        for turn in interaction["turns"]:
            yield from turn.get("events", [])


def runs(interaction: Node) -> Iterator[Node]:
    yield from interaction.get("subagents", [])
    for turn in interaction["turns"]:
        yield from turn.get("subagents", [])


def span_ms(session: Node) -> int:
    """Where the axis ends: the last moment anything in the session reached."""
    ends = [session.get("duration_ms") or 0]
    for interaction in session["interactions"]:
        for turn in interaction["turns"]:
            ends.append(end_ms(turn, "elapsed_ms", "duration_ms") or 0)
            ends.extend(end_ms(tool, "duration_ms") or 0 for tool in turn.get("tools", []))
        for run in runs(interaction):
            ends.append(end_ms(run, "duration_ms") or 0)
            ends.extend(end_ms(call, "duration_ms") or 0 for call in run["calls"])
    ends.extend(e["offset_ms"] or 0 for e in walk_events(session))
    return max(1000, *ends)


@dataclass(frozen=True)
class Scale:
    """Milliseconds since the start -> x, long idle stretches cut to a narrow break."""

    pieces: list[tuple[float, float, float, float]]
    """(first ms, last ms, first x, last x) of each stretch, breaks included, in order."""
    breaks: list[tuple[float, float, int]]
    """(first x, last x, idle ms) of each break."""

    def x(self, ms: float) -> float:
        for first, last, x0, x1 in self.pieces:
            if ms <= last:
                return x0 + (max(ms, first) - first) / ((last - first) or 1) * (x1 - x0)
        return self.pieces[-1][3]


def _intervals(session: Node) -> Iterator[tuple[int, int]]:
    """When something was going on: turns, finished tools, sub-agent runs, events."""
    for interaction in session["interactions"]:
        if interaction["offset_ms"] is not None:
            yield interaction["offset_ms"], end_ms(interaction, "duration_ms") or 0
        for turn in interaction["turns"]:
            if turn["offset_ms"] is not None:
                yield turn["offset_ms"], end_ms(turn, "elapsed_ms", "duration_ms") or 0
            for tool in turn.get("tools", []):
                if tool["offset_ms"] is not None and tool["status"] != "open":
                    yield tool["offset_ms"], end_ms(tool, "duration_ms") or 0
        for run in runs(interaction):
            if run["offset_ms"] is not None:
                yield run["offset_ms"], end_ms(run, "duration_ms") or 0
            for call in run["calls"]:
                if call["offset_ms"] is not None:
                    yield call["offset_ms"], end_ms(call, "duration_ms") or 0
    for event in walk_events(session):
        if event["offset_ms"] is not None:
            yield event["offset_ms"], event["offset_ms"]


def scale(session: Node, span: int) -> Scale:
    """A linear axis, but with each idle stretch longer than IDLE_FRACTION of the span (and
    at least IDLE_MIN_MS) cut to BREAK_W pixels."""
    threshold = max(IDLE_MIN_MS, span * IDLE_FRACTION)
    gaps: list[tuple[int, int]] = []
    reached = 0
    for start, end in sorted(_intervals(session)):
        if start - reached > threshold:
            gaps.append((reached, start))
        reached = max(reached, end)
    if span - reached > threshold:
        gaps.append((reached, span))
    plot_w = WIDTH - LABEL_W - RIGHT
    kept = span - sum(b - a for a, b in gaps)
    per_ms = (plot_w - BREAK_W * len(gaps)) / max(kept, 1)
    pieces: list[tuple[float, float, float, float]] = []
    breaks: list[tuple[float, float, int]] = []
    x, at = float(LABEL_W), 0
    for first, last in [*gaps, (span, span)]:
        busy_w = (first - at) * per_ms
        pieces.append((at, first, x, x + busy_w))
        x += busy_w
        if last > first:
            pieces.append((first, last, x, x + BREAK_W))
            breaks.append((x, x + BREAK_W, last - first))
            x += BREAK_W
        at = last
    return Scale(pieces, breaks)


ROW = 20
BAR = 12
AXIS_H = 26
MIN_BAR = 2.0
PREVIEW = 100
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"

COLOURS = {
    "prompt": ("#dbeafe", "#2563eb"),
    "nudge": ("#ffedd5", "#c2410c"),
    "none": ("#f3f4f6", "#6b7280"),
    "turn": ("#1d4ed8", "#3b82f6"),
    "open": ("#bfdbfe", "#1d4ed8"),
    "tool_ok": ("#0f766e", "#0f766e"),
    "tool_failed": ("#dc2626", "#991b1b"),
    "tool_open": ("#d1d5db", "#6b7280"),
    "subagent": ("#ede9fe", "#7c3aed"),
    "subagent_call": ("#7c3aed", "#5b21b6"),
    "grid": ("#e5e7eb", "#9ca3af"),
    "ink": ("#111827", "#374151"),
}


EVENT_STYLE = {
    "session.error": ("triangle", "#dc2626", "error"),
    "session.warning": ("triangle", "#b45309", "warning"),
    "session.compaction_start": ("square", "#9333ea", "compaction"),
    "session.compaction_complete": ("square", "#9333ea", "compaction"),
    "session.task_complete": ("circle", "#15803d", "task_complete"),
    "abort": ("cross", "#111827", "abort"),
}


OTHER_EVENT = ("dot", "#6b7280", "other event")


def text(value: Any) -> str:
    """Untrusted text ready for an element's content (also valid XML 1.0). Its line breaks
    become character references: the page shows them, but no line of the file is log text
    (so none can start a CI workflow command when the SVG goes to a CI log)."""
    return html.escape(multiline(str(value)), quote=False).replace("\n", "&#10;")


def attr(value: Any) -> str:
    """Untrusted text ready for a double-quoted attribute value (line breaks as in
    :func:`text`)."""
    return html.escape(multiline(str(value)), quote=True).replace("\n", "&#10;")


def preview(value: Any, limit: int = PREVIEW) -> str:
    """One line of at most ``limit`` characters (raw: pass it through :func:`text`)."""
    if value is None:
        return ""
    one_line = " ".join(str(value).split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def duration(ms: int | float | None) -> str:
    return "?" if ms is None else took_text(ms)


def offset(ms: int | float | None) -> str:
    """Time since the session started; an event written before its start is negative."""
    return "?" if ms is None else signed_offset(ms)


@dataclass
class Canvas:
    span: int
    scale: Scale
    parts: list[str] = field(default_factory=list)
    y: float = 0.0

    def x(self, ms: float) -> float:
        return self.scale.x(max(0.0, min(ms, self.span)))

    def bar(self, start: float, end: float | None, y: float, height: float, *mark: Any) -> None:
        """A mark from ``start`` to ``end`` ms; ``mark``: its fill, stroke, tip, class and
        whether it is dashed (open)."""
        fill, stroke, tip, kind, dashed = mark
        x0 = self.x(start)
        width = max(MIN_BAR, self.x(end if end is not None else start) - x0)
        dash = ' stroke-dasharray="3 2"' if dashed else ""
        self.parts.append(
            f'<rect class="mark {kind}" tabindex="0" x="{x0:.1f}" y="{y:.1f}" '
            f'width="{width:.1f}" height="{height:.1f}" rx="2" fill="{fill}" '
            f'stroke="{stroke}"{dash}><title>{text(tip)}</title></rect>'
        )

    def label(self, y: float, words: str, *, weight: str = "normal", tip: str = "") -> None:
        title = f"<title>{text(tip)}</title>" if tip else ""
        self.parts.append(
            f'<text x="{LABEL_W - 8}" y="{y + BAR - 2:.1f}" text-anchor="end" font-size="12" '
            f'font-weight="{weight}" fill="{COLOURS["ink"][0]}">{title}'
            f"{text(preview(words, 24))}</text>"
        )

    def lane_rule(self, y: float) -> None:
        self.parts.append(
            f'<line x1="{LABEL_W}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#f3f4f6"/>'
        )


def marker(
    shape: str, x: float, y: float, colour: str, tip: str, kind: str, *, focus: bool = True
) -> str:
    title = f"<title>{text(tip)}</title>"
    attrs = (
        f'class="mark event {kind}" tabindex="0" fill="{colour}"'
        if focus
        else f'class="key" fill="{colour}"'
    )
    if shape == "triangle":
        return f'<path {attrs} d="M{x:.1f} {y - 6:.1f}l6 11h-12z">{title}</path>'
    if shape == "square":
        return (
            f'<rect {attrs} x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10">{title}</rect>'
        )
    if shape == "cross":
        return (
            f'<path {attrs} stroke="{colour}" stroke-width="3" '
            f'd="M{x - 5:.1f} {y - 5:.1f}l10 10m0-10l-10 10">{title}</path>'
        )
    radius = 6 if shape == "circle" else 3.5
    return f'<circle {attrs} cx="{x:.1f}" cy="{y:.1f}" r="{radius}">{title}</circle>'


LEGEND = [
    ("rect", COLOURS["prompt"], "interaction: prompt"),
    ("rect", COLOURS["nudge"], "interaction: autopilot nudge"),
    ("rect", (COLOURS["turn"][0], COLOURS["turn"][0]), "LLM call (turn)"),
    ("rect", COLOURS["open"], "open turn / call"),
    ("rect", COLOURS["tool_ok"], "tool ok"),
    ("failed", COLOURS["tool_failed"], "tool failed"),
    ("rect", COLOURS["subagent"], "sub-agent run"),
    ("rect", COLOURS["subagent_call"], "sub-agent call"),
    ("triangle", ("#dc2626", ""), "error"),
    ("square", ("#9333ea", ""), "compaction"),
    ("circle", ("#15803d", ""), "task_complete"),
    ("cross", ("#111827", ""), "abort"),
    ("dot", ("#6b7280", ""), "other event"),
]


def legend() -> str:
    """The key to the colours and markers, for inside an SVG."""
    parts = []
    x, row = 8.0, 0
    for shape, (fill, stroke), words in LEGEND:
        item_w = 34 + len(words) * 7
        if x + item_w > WIDTH:
            x, row = 8.0, row + 20
        if shape in ("rect", "failed"):
            parts.append(
                f'<rect x="{x:.1f}" y="{row + 4:.1f}" width="16" height="10" rx="2" '
                f'fill="{fill}" stroke="{stroke}"/>'
            )
            if shape == "failed":
                parts.append(f'<path d="M{x + 4:.1f} {row - 1:.1f}h8l-4 5z" fill="{fill}"/>')
        else:
            parts.append(marker(shape, x + 8, row + 9, fill, words, "legend", focus=False))
        parts.append(
            f'<text x="{x + 22:.1f}" y="{row + 13:.1f}" font-size="12" '
            f'fill="{COLOURS["ink"][0]}">{words}</text>'
        )
        x += item_w
    return "".join(parts)


def svg_element(body: str, height: float, title: str, *, standalone: bool, kind: str) -> str:
    xmlns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    return (
        f'<svg{xmlns} class="{kind}" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" '
        f'height="{height:.0f}" role="img" font-family="{FONT}" aria-label="{attr(title)}">'
        f"<title>{text(title)}</title>{body}</svg>"
    )


def _timed(node: Node) -> str:
    """When a mark's node started, and how long it took."""
    return f"at {offset(node['offset_ms'])}, took {duration(node.get('duration_ms'))}"


def interaction_tip(node: Node) -> str:
    names = {"nudge": "autopilot nudge", "prompt": "prompt", "none": "no message"}
    trigger = names.get(node["trigger"], node["trigger"])
    lines = [
        f"Interaction #{node['interaction_index']} ({trigger})",
        _timed(node),
        f"{node.get('llm_calls', 0)} LLM calls, {node.get('tool_calls', 0)} tools "
        f"({node.get('failed_tool_calls', 0)} failed), "
        f"{node.get('subagent_calls', 0)} sub-agent calls",
    ]
    if node.get("task_complete"):
        lines.append("task_complete called")
    if node.get("text"):
        lines.append(f"“{preview(node['text'])}”")
    return "\n".join(lines)


def turn_tip(turn: Node, interaction: int) -> str:
    left = " at shutdown" if turn.get("open_at_shutdown") else ""  # the user quit while it ran
    state = f"open{left} (no turn_end)" if turn["open"] else f"took {duration(turn['duration_ms'])}"
    if turn.get("interrupted"):
        state = "interrupted: its run was killed or crashed, and the session resumed later"
    lines = [
        f"Turn {turn['turn_index']} (turn id {turn['turn_id']}), interaction #{interaction}",
        f"at {offset(turn['offset_ms'])}, {state}",
        f"model {turn.get('model') or '?'}, {turn.get('output_tokens') or 0} output tokens",
        f"{turn['tool_calls']} tools ({turn['failed_tool_calls']} failed)",
    ]
    if turn.get("requested_tools"):
        lines.append("requested: " + ", ".join(map(str, turn["requested_tools"][:12])))
    if turn.get("task_complete_event"):
        lines.append("task_complete")
    if turn.get("text"):
        lines.append(f"“{preview(turn['text'])}”")
    return "\n".join(lines)


def tool_tip(tool: Node, where: str) -> str:
    status = "open at shutdown" if tool.get("open_at_shutdown") else tool["status"]
    lines = [
        f"{tool['name'] or '?'} ({status}), {where}",
        _timed(tool),
    ]
    if tool.get("arguments"):
        lines.append(f"arguments: {preview(tool['arguments'], 80)}")
    if tool.get("error"):
        lines.append(f"error: {preview(tool['error'])}")
    return "\n".join(lines)


def run_tip(run: Node, name: str, interaction: int) -> str:
    lines = [
        f"Sub-agent {name} ({run.get('status') or '?'}), interaction #{interaction}",
        _timed(run),
        f"{run['llm_calls']} LLM calls, {run['tool_calls']} tools "
        f"({run['failed_tool_calls']} failed)",
    ]
    if run.get("error"):
        lines.append(f"error: {preview(run['error'])}")
    if run.get("prompt"):
        lines.append(f"“{preview(run['prompt'])}”")
    return "\n".join(lines)


def call_tip(call: Node, name: str) -> str:
    lines = [
        f"{name} call {call['call_index']} (turn id {call['turn_id']})",
        _timed(call),
        f"model {call.get('model') or '?'}, {call['tool_calls']} tools "
        f"({call['failed_tool_calls']} failed)",
    ]
    if call.get("text"):
        lines.append(f"“{preview(call['text'])}”")
    return "\n".join(lines)


def event_tip(event: Node) -> str:
    lines = [f"{event['type']} (line {event['line']})", f"at {offset(event['offset_ms'])}"]
    if event.get("text"):
        lines.append(preview(event["text"]))
    return "\n".join(lines)


def _round_up(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value``."""
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= value:
                return step * scale
        scale *= 10


def calls_chart(days: list[Node], *, height: int = 220) -> str:
    """LLM calls per day, main agent and sub-agents stacked, as an SVG bar chart."""
    left, bottom, top = 56, 36, 16
    plot_w, plot_h = WIDTH - left - RIGHT, height - top - bottom
    most = _round_up(max((d["llm_calls"] + d["subagent_calls"] for d in days), default=1) or 1)
    slot = plot_w / max(1, len(days))
    bar_w = max(1.0, min(48.0, slot * 0.7))
    every = max(1, int(70 // slot) + 1)  # a date label every `every` bars, so they never touch
    ink, muted, grid = COLOURS["ink"][0], COLOURS["grid"][1], COLOURS["grid"][0]
    main_fill, sub_fill = COLOURS["turn"][0], COLOURS["subagent_call"][0]
    parts = []
    for fraction in (0, 0.25, 0.5, 0.75, 1):
        y = top + plot_h * (1 - fraction)
        parts.append(
            f'<line x1="{left}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{grid}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="{muted}">{most * fraction:g}</text>'
        )
    for number, day in enumerate(days):
        x = left + slot * number + (slot - bar_w) / 2
        main_h = plot_h * day["llm_calls"] / most
        sub_h = plot_h * day["subagent_calls"] / most
        tip = text(
            f"{day['day']}: {day['llm_calls']} LLM calls (main agent), "
            f"{day['subagent_calls']} sub-agent calls"
        )
        base = top + plot_h
        parts.append(
            f'<g class="mark day" tabindex="0"><title>{tip}</title>'
            f'<rect x="{x:.1f}" y="{base - main_h:.1f}" width="{bar_w:.1f}" '
            f'height="{main_h:.1f}" fill="{main_fill}"/>'
            f'<rect x="{x:.1f}" y="{base - main_h - sub_h:.1f}" width="{bar_w:.1f}" '
            f'height="{sub_h:.1f}" fill="{sub_fill}"/></g>'
        )
        if number % every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{base + 16:.1f}" text-anchor="middle" '
                f'font-size="11" fill="{ink}">{text(day["day"])}</text>'
            )
    parts.append(
        f'<text x="12" y="{top + plot_h / 2:.1f}" font-size="11" fill="{ink}" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.1f})" text-anchor="middle">LLM calls</text>'
        f'<rect x="{WIDTH - RIGHT - 300}" y="0" width="12" height="10" fill="{main_fill}"/>'
        f'<text x="{WIDTH - RIGHT - 284}" y="9" font-size="11" fill="{ink}">main agent</text>'
        f'<rect x="{WIDTH - RIGHT - 190}" y="0" width="12" height="10" fill="{sub_fill}"/>'
        f'<text x="{WIDTH - RIGHT - 174}" y="9" font-size="11" fill="{ink}">sub-agents</text>'
    )
    body = "".join(parts)
    return svg_element(body, height, "LLM calls per day", standalone=False, kind="chart")


MAX_TOOL_LANES = 4


def _axis(canvas: Canvas, top: float, bottom: float) -> None:
    kept = canvas.span - sum(idle for _, _, idle in canvas.scale.breaks)
    step = tick_step(kept)
    ink, muted, grid = COLOURS["ink"][0], COLOURS["grid"][1], COLOURS["grid"][0]
    label_y = top + AXIS_H - 10
    taken = [(x0 + x1) / 2 for x0, x1, _ in canvas.scale.breaks]
    breaks = {x0 for x0, _, _ in canvas.scale.breaks}
    ticks = sorted(
        {
            tick
            for first, last, x0, _ in canvas.scale.pieces
            if x0 not in breaks
            for tick in [int(first), *range(-(-int(first) // step) * step, int(last) + 1, step)]
        }
    )
    for tick in ticks:
        x = canvas.x(tick)
        canvas.parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + AXIS_H - 6:.1f}" y2="{bottom:.1f}" '
            f'stroke="{grid}"/>'
        )
        label = tick_label(tick, step)
        room = max(48, 7 * len(label))  # about 7 px a character
        if all(abs(x - other) > room for other in taken):
            taken.append(x)
            canvas.parts.append(
                f'<text class="tick" x="{x:.1f}" y="{label_y:.1f}" text-anchor="middle" '
                f'font-size="11" fill="{muted}">{label}</text>'
            )
    for x0, x1, idle in canvas.scale.breaks:
        middle = (x0 + x1) / 2
        canvas.parts.append(
            f'<g class="mark idle" tabindex="0"><title>{duration(idle)} without activity '
            f"(not to scale)</title>"
            f'<rect x="{x0:.1f}" y="{top + AXIS_H - 6:.1f}" width="{x1 - x0:.1f}" '
            f'height="{bottom - top - AXIS_H + 6:.1f}" fill="#f3f4f6"/>'
            f'<path d="M{x0 + 6:.1f} {top + AXIS_H - 6:.1f}l4 {bottom - top - AXIS_H + 6:.1f}'
            f'M{x1 - 10:.1f} {top + AXIS_H - 6:.1f}l4 {bottom - top - AXIS_H + 6:.1f}" '
            f'stroke="{muted}" stroke-dasharray="2 3"/>'
            f'<text x="{middle:.1f}" y="{label_y:.1f}" text-anchor="middle" font-size="11" '
            f'font-style="italic" fill="{ink}">+{duration(idle)}</text></g>'
        )
    canvas.parts.append(
        f'<text x="{LABEL_W - 8}" y="{label_y:.1f}" text-anchor="end" font-size="11" '
        f'fill="{ink}">time since start</text>'
    )


def _pack(tools: list[Node], span: int) -> list[tuple[int, Node]]:
    """Each timed tool with the sub-lane it fits on (overlapping tools on separate lanes)."""
    lane_ends: list[int] = []
    placed = []
    for tool in sorted(
        (t for t in tools if t.get("offset_ms") is not None), key=lambda t: t["offset_ms"]
    ):
        start, end = tool["offset_ms"], _tool_end(tool, span)
        lane = next((i for i, e in enumerate(lane_ends) if e <= start), None)
        if lane is None:
            if len(lane_ends) < MAX_TOOL_LANES:
                lane_ends.append(end)
                lane = len(lane_ends) - 1
            else:
                lane = min(range(len(lane_ends)), key=lane_ends.__getitem__)
        lane_ends[lane] = max(lane_ends[lane], end)
        placed.append((lane, tool))
    return placed


def _tool_end(tool: Node, span: int) -> int:
    if tool["status"] == "interrupted":
        # When its killed run stopped is not in the log: a mark where it started.
        return int(tool["offset_ms"] or 0)
    if tool["status"] == "open" or tool.get("duration_ms") is None:
        return span
    return int(tool["offset_ms"] + tool["duration_ms"])


def _draw_tool(canvas: Canvas, tool: Node, y: float, height: float, where: str) -> None:
    kind = {"failed": "tool_failed", "open": "tool_open", "interrupted": "tool_failed"}.get(
        tool["status"], "tool_ok"
    )
    fill, stroke = COLOURS[kind]
    start, tip, dashed = tool["offset_ms"], tool_tip(tool, where), kind == "tool_open"
    end = _tool_end(tool, canvas.span)
    canvas.bar(start, end, y, height, fill, stroke, tip, f"tool {kind}", dashed)
    if kind == "tool_failed":  # a flag above the bar, visible however short the tool was
        x = canvas.x(start)
        canvas.parts.append(
            f'<path d="M{x - 4:.1f} {y - 5:.1f}h8l-4 5z" fill="{fill}" aria-hidden="true"/>'
        )


def _interaction_lane(canvas: Canvas, session: Node) -> None:
    canvas.label(canvas.y, "interactions", weight="bold")
    for node in session["interactions"]:
        if node["offset_ms"] is None:
            continue
        fill, stroke = COLOURS.get(node["trigger"], COLOURS["none"])
        end = node["offset_ms"] + (node.get("duration_ms") or 0)
        tip = interaction_tip(node)
        kind = f"interaction {node['trigger']}"
        canvas.bar(node["offset_ms"], end, canvas.y, BAR, fill, stroke, tip, kind, False)
        left, right = canvas.x(node["offset_ms"]), canvas.x(end)
        if right - left > 34:  # room for its number inside
            canvas.parts.append(
                f'<text x="{left + 9:.1f}" y="{canvas.y + BAR - 2.5:.1f}" font-size="10" '
                f'fill="{stroke}" aria-hidden="true" pointer-events="none">'
                f"#{node['interaction_index']}</text>"
            )
        if node["trigger"] == "nudge":
            canvas.parts.append(
                f'<path d="M{left:.1f} {canvas.y - 1:.1f}l5 7l-5 7l-5-7z" fill="{stroke}" '
                'aria-hidden="true"/>'
            )
    canvas.y += ROW


def _turn_lane(canvas: Canvas, session: Node) -> list[tuple[Node, str]]:
    """The main agent's turns; returns their tools (and those outside any turn), each with
    where it ran."""
    canvas.lane_rule(canvas.y - 4)
    canvas.label(canvas.y, "LLM calls (main)", weight="bold")
    tools: list[tuple[Node, str]] = []
    number = 0
    for node in session["interactions"]:
        index = node["interaction_index"]
        tools.extend((t, f"interaction #{index}, outside a turn") for t in node.get("tools", []))
        for turn in node["turns"]:
            number += 1
            tools.extend((t, f"turn {turn['turn_index']}") for t in turn.get("tools", []))
            if turn["offset_ms"] is None:
                continue
            colour = COLOURS["turn"][number % 2]  # neighbours told apart by shade
            fill, stroke = COLOURS["open"] if turn["open"] else (colour, colour)
            end = end_ms(turn, "elapsed_ms", "duration_ms")
            tip, kind = turn_tip(turn, index), "turn open" if turn["open"] else "turn"
            canvas.bar(turn["offset_ms"], end, canvas.y, BAR, fill, stroke, tip, kind, turn["open"])
    canvas.y += ROW
    return tools


def _tool_lane(canvas: Canvas, tools: list[tuple[Node, str]]) -> None:
    """The tools on one lane, overlapping ones on sub-lanes."""
    where = {id(tool): place for tool, place in tools}
    placed = _pack([tool for tool, _ in tools], canvas.span)
    lanes = max((lane for lane, _ in placed), default=-1) + 1
    canvas.lane_rule(canvas.y - 4)
    canvas.label(canvas.y, "tools", weight="bold")
    for lane, tool in placed:
        _draw_tool(canvas, tool, canvas.y + 3 + lane * 10, 7, where[id(tool)])
    canvas.y += max(1, lanes) * 10 + 10


def _subagent_lane(canvas: Canvas, run: Node, interaction: int) -> None:
    """One sub-agent run: its span, its LLM calls on top, its tools below."""
    canvas.lane_rule(canvas.y - 4)
    name = run.get("agent_name") or "sub-agent"
    canvas.label(canvas.y, f"↳ {name}", tip=f"sub-agent {name} ({run.get('status') or '?'})")
    fill, stroke = COLOURS["subagent"]
    if run.get("status") == "failed":
        stroke = COLOURS["tool_failed"][0]
    if run.get("offset_ms") is not None:
        ends = [end_ms(call, "duration_ms") or 0 for call in run["calls"]]
        end = end_ms(run, "duration_ms") if run.get("duration_ms") is not None else None
        end = end if end is not None else max(ends, default=None)
        tip = run_tip(run, name, interaction)
        canvas.bar(
            run["offset_ms"], end, canvas.y - 2, BAR + 8, fill, stroke, tip, "subagent", False
        )
    tools = list(run.get("tools", []))
    for call in run["calls"]:
        tools.extend(call.get("tools", []))
        if call["offset_ms"] is None:
            continue
        colours = COLOURS["open"] if call["open"] else COLOURS["subagent_call"]
        end, tip = end_ms(call, "duration_ms"), call_tip(call, name)
        canvas.bar(call["offset_ms"], end, canvas.y, 7, *colours, tip, "subagent-call", False)
    for tool in tools:
        if tool.get("offset_ms") is not None:
            _draw_tool(canvas, tool, canvas.y + 9, 5, f"sub-agent {name}")
    canvas.y += ROW + 6


def _event_lane(canvas: Canvas, session: Node) -> None:
    canvas.lane_rule(canvas.y - 4)
    canvas.label(canvas.y, "events", weight="bold")
    events = sorted(
        (e for e in walk_events(session) if e.get("offset_ms") is not None),
        key=lambda e: (e["type"] in EVENT_STYLE, e["offset_ms"]),  # notable ones drawn on top
    )
    for event in events:
        shape, colour, kind = EVENT_STYLE.get(event["type"], OTHER_EVENT)
        canvas.parts.append(
            marker(
                shape,
                canvas.x(event["offset_ms"]),
                canvas.y + 6,
                colour,
                event_tip(event),
                kind.replace(" ", "-"),
            )
        )
    canvas.y += ROW


def session_title(session: Node) -> str:
    parts = [f"Session {session['session_id']}"]
    if session.get("repository"):
        parts.append(str(session["repository"]))
    if session.get("started_at"):
        parts.append(f"started {session['started_at']}")
    parts.append(f"{session['llm_calls']} LLM calls, {duration(session.get('duration_ms'))}")
    return " · ".join(parts)


def timeline_svg(session: Node, *, standalone: bool = False) -> str:
    """One session's timeline; ``standalone`` makes a whole .svg file (with a heading and
    the legend) instead of an element for a page."""
    span = span_ms(session)
    canvas = Canvas(span=span, scale=scale(session, span))
    top = 0.0
    if standalone:
        canvas.parts.append(
            f'<rect width="{WIDTH}" height="100%" fill="#ffffff"/>'
            f'<text x="8" y="18" font-size="14" font-weight="bold" fill="{COLOURS["ink"][0]}">'
            f"{text(preview(session_title(session), 150))}</text>"
        )
        top = 26.0
    grid_at = len(canvas.parts)
    canvas.y = top + AXIS_H
    _interaction_lane(canvas, session)
    _tool_lane(canvas, _turn_lane(canvas, session))
    for interaction in session["interactions"]:
        for run in runs(interaction):
            _subagent_lane(canvas, run, interaction["interaction_index"])
    _event_lane(canvas, session)
    axis = Canvas(span=canvas.span, scale=canvas.scale)
    _axis(axis, top, canvas.y - 6)
    canvas.parts[grid_at:grid_at] = axis.parts  # the grid under the marks
    height = canvas.y + 4
    if standalone:
        canvas.parts.append(f'<g transform="translate(0 {height:.0f})">{legend()}</g>')
        height += 48
    body, title = "".join(canvas.parts), session_title(session)
    return svg_element(body, height, title, standalone=standalone, kind="timeline")
