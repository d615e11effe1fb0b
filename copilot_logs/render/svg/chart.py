"""LLM calls per day, main agent and sub-agents stacked, as an SVG bar chart (in the report)."""

from __future__ import annotations

from typing import Any

from copilot_logs.render.svg.marks import COLOURS, FONT, text
from copilot_logs.render.svg.scale import RIGHT, WIDTH

Node = dict[str, Any]


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
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" font-family="{FONT}" aria-label="LLM calls per day">'
        f"<title>LLM calls per day</title>{''.join(parts)}</svg>"
    )
