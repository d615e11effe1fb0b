"""A session's timeline (the nested dicts of ``agent_loop.timeline``) as a hand-made SVG.

Lanes on one time axis (time since the session started, :mod:`copilot_logs.render.svg.scale`):
the interactions (a prompt or an autopilot nudge each), the main agent's LLM calls (one bar per
turn), the tools they ran (failed ones red and flagged), one lane per sub-agent run with its
calls and tools, and the lifecycle events (errors, compactions, ``task_complete``, aborts and
the rest) as markers. Every mark holds a ``<title>`` with its details
(:mod:`copilot_logs.render.svg.tips`) and takes keyboard focus (``tabindex``), so a browser
shows them on hover and a page's script on focus. The marks and their escaping of log text are
in :mod:`copilot_logs.render.svg.marks`.
"""

from __future__ import annotations

from copilot_logs.render.svg.marks import (
    AXIS_H,
    BAR,
    COLOURS,
    EVENT_STYLE,
    OTHER_EVENT,
    ROW,
    Canvas,
    duration,
    legend,
    marker,
    preview,
    svg_element,
    text,
)
from copilot_logs.render.svg.scale import (
    LABEL_W,
    WIDTH,
    Node,
    busy_pieces,
    end_ms,
    runs,
    scale,
    span_ms,
    tick_label,
    tick_step,
    walk_events,
)
from copilot_logs.render.svg.tips import (
    call_tip,
    event_tip,
    interaction_tip,
    run_tip,
    tool_tip,
    turn_tip,
)

MAX_TOOL_LANES = 4


def _axis(canvas: Canvas, top: float, bottom: float) -> None:
    kept = canvas.span - sum(idle for _, _, idle in canvas.scale.breaks)
    step = tick_step(kept)
    ink, muted, grid = COLOURS["ink"][0], COLOURS["grid"][1], COLOURS["grid"][0]
    label_y = top + AXIS_H - 10
    taken = [(x0 + x1) / 2 for x0, x1, _ in canvas.scale.breaks]
    ticks = sorted(
        {
            tick
            for first, last, _, _ in busy_pieces(canvas.scale)
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
    start = tool["offset_ms"]
    canvas.bar(
        start,
        _tool_end(tool, canvas.span),
        y,
        height,
        fill,
        stroke,
        tool_tip(tool, where),
        dashed=kind == "tool_open",
        kind=f"tool {kind}",
    )
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
        canvas.bar(node["offset_ms"], end, canvas.y, BAR, fill, stroke, tip, kind=kind)
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
            tip = turn_tip(turn, index)
            kind = "turn open" if turn["open"] else "turn"
            canvas.bar(
                turn["offset_ms"],
                end,
                canvas.y,
                BAR,
                fill,
                stroke,
                tip,
                dashed=turn["open"],
                kind=kind,
            )
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
        canvas.bar(
            run["offset_ms"],
            end if end is not None else max(ends, default=None),
            canvas.y - 2,
            BAR + 8,
            fill,
            stroke,
            run_tip(run, name, interaction),
            kind="subagent",
        )
    tools = list(run.get("tools", []))
    for call in run["calls"]:
        tools.extend(call.get("tools", []))
        if call["offset_ms"] is None:
            continue
        call_fill, call_stroke = COLOURS["open"] if call["open"] else COLOURS["subagent_call"]
        canvas.bar(
            call["offset_ms"],
            end_ms(call, "duration_ms"),
            canvas.y,
            7,
            call_fill,
            call_stroke,
            call_tip(call, name),
            kind="subagent-call",
        )
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
    return svg_element("".join(canvas.parts), height, session_title(session), standalone=standalone)
