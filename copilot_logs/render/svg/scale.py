"""The time axis of a session's timeline picture: how long the session spans, where the round
ticks go, and the scale from milliseconds to x, with long idle stretches cut to narrow breaks.

Pure geometry over the nested dicts of ``agent_loop.timeline``: nothing here draws.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Node = dict[str, Any]

WIDTH = 1200
LABEL_W = 170
RIGHT = 24
IDLE_MIN_MS = 30_000
IDLE_FRACTION = 0.1
BREAK_W = 44


def tick_label(ms: int, step: int = 1000) -> str:
    """A tick's time since the start, as precise as the axis' ``step`` needs, so that ticks a
    step apart never read alike (``1.2s`` beside ``1.4s`` when the step is under a second). A
    tick between round ones (the first moment after a break) is cut down to that precision."""
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
    """Milliseconds since the start -> x. Long idle stretches (nothing running: the user
    away, a session resumed hours later) are cut to a narrow break so the work stays
    readable; ``breaks`` says where, and how long each really was."""

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


def busy_pieces(scale: Scale) -> list[tuple[float, float, float, float]]:
    breaks = {x0 for x0, _, _ in scale.breaks}
    return [piece for piece in scale.pieces if piece[2] not in breaks]
