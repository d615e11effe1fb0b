"""The drawing primitives of the SVG pictures: the palette, escaping of untrusted text, bars,
lane labels, event markers, the legend and the ``<svg>`` element.

Colours are presentation attributes, not CSS: a picture looks the same inline in the report,
under its Content-Security-Policy, and as a standalone ``.svg`` file.

Log text is untrusted: every text goes through :func:`text` (element content) or :func:`attr`
(attribute values), which show control and bidi characters as visible escapes
(:func:`copilot_logs.render.escape.multiline`) and escape markup.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from copilot_logs.render.escape import multiline
from copilot_logs.render.humanize import signed_offset, took_text
from copilot_logs.render.svg.scale import LABEL_W, RIGHT, WIDTH, Scale

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

    def bar(
        self,
        start: float,
        end: float | None,
        y: float,
        height: float,
        fill: str,
        stroke: str,
        tip: str,
        *,
        dashed: bool = False,
        kind: str,
    ) -> None:
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


def legend(*, standalone: bool = False, y: float = 0) -> str:
    """The key to the colours and markers, as an SVG (or a group inside one)."""
    parts = []
    x, row = 8.0, y
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
    body = "".join(parts)
    if not standalone:
        return body
    height = row + 22
    return svg_element(body, height, "Legend", standalone=False)


def svg_element(body: str, height: float, title: str, *, standalone: bool) -> str:
    xmlns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    return (
        f'<svg{xmlns} class="timeline" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" '
        f'height="{height:.0f}" role="img" font-family="{FONT}" aria-label="{attr(title)}">'
        f"<title>{text(title)}</title>{body}</svg>"
    )
