"""Colours on a colour terminal (issue 24): only the timeline's guides and secondary text are
dim, and verdicts and findings carry their colours (failed red, completed green) in
``timeline``, ``audit``, ``validate`` and ``watch``; NO_COLOR turns every colour off.

A colour terminal is what rich takes it for with FORCE_COLOR; the output is read back into
styled text with rich's own ANSI decoder.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.color import Color
from rich.console import Console
from rich.style import Style
from rich.text import Text

from copilot_logs.cli import main
from copilot_logs.commands import watch
from copilot_logs.render.timeline import view

from .conftest import SAMPLES

COLOUR = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "120"}
ERROR_SAMPLE = SAMPLES / "07f6c938-ab13-4c24-a5d6-60718293a4b5" / "events.jsonl"
SUBAGENT_SAMPLE = SAMPLES / "e5b4a716-8f91-4a02-83b4-4e5f60718293" / "events.jsonl"
COMPLETED_SAMPLE = SAMPLES / "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071" / "events.jsonl"
CONSOLE = Console(color_system="truecolor")


def _colour(style: Style) -> str | None:
    """The style's colour by name (the ANSI decoder names standard colours by number)."""
    if style.color is None:
        return None
    names = {Color.parse(name).number: name for name in ("red", "green", "yellow", "magenta")}
    return names.get(style.color.number, style.color.name)


RED, GREEN, YELLOW = "red", "green", "yellow"


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[list[Text], list[Text]]:
    """stdout and stderr, as lines of styled text."""
    result = CliRunner().invoke(main, list(args), env=env or COLOUR)
    assert "Traceback" not in result.output

    def lines(text: str) -> list[Text]:
        return list(Text.from_ansi(text).split("\n"))

    return lines(result.stdout), lines(result.stderr)


def _style_at(lines: list[Text], needle: str, nth: int = 0) -> Style:
    """The style of the first character of the ``nth`` line that shows ``needle``."""
    found = [line for line in lines if needle in line.plain][nth]
    return found.get_style_at_offset(CONSOLE, found.plain.index(needle))


# --- the timeline: dim only where it is secondary -------------------------------------------


def test_the_timeline_dims_guides_and_secondary_text_only() -> None:
    out, _ = _run("timeline", str(ERROR_SAMPLE))
    assert _style_at(out, "├─").dim  # a guide
    assert _style_at(out, "octo/shopfront").dim  # the summary under the title
    assert _style_at(out, "took").dim  # the header
    reply = _style_at(out, "[no reply]")
    assert _colour(reply) == RED and not reply.dim
    assert not _style_at(out, "#1").dim and _style_at(out, "#1").bold
    prompt = _style_at(out, "Summarise the changes on this branch.")
    assert not prompt.dim
    # Every line of the tree: its label (the first character after the guides) is not dim.
    tree = [line for line in out if line.plain.lstrip("│├└─ ").startswith(("▶", "#", "•"))]
    assert len(tree) >= 4
    for line in tree:
        first = len(line.plain) - len(line.plain.lstrip("│├└─ "))
        assert not line.get_style_at_offset(CONSOLE, first).dim, line.plain


def test_a_failed_tool_is_red_and_an_ok_one_green() -> None:
    out, _ = _run("timeline", str(SUBAGENT_SAMPLE))
    failed = _style_at(out, "failed: Error: sub-agent exceeded")
    assert _colour(failed) == RED and not failed.dim
    assert _colour(_style_at(out, " ok npm run")) == GREEN
    assert _colour(_style_at(out, "sub-agent task completed")) == "magenta"


# --- audit, validate, watch: verdicts and findings in their colours --------------------------


def test_audit_colours_its_verdicts_and_its_summary() -> None:
    out, _ = _run("audit", str(SAMPLES))
    assert _colour(_style_at(out, "nudge-cap")) == RED
    assert _colour(_style_at(out, "completed")) == GREEN
    assert _colour(_style_at(out, "FAIL: 1 failing")) == RED
    passed, _ = _run("audit", str(COMPLETED_SAMPLE))
    assert _colour(_style_at(passed, "OK (1 session audited")) == GREEN


def test_validate_colours_findings_by_severity_and_the_gate() -> None:
    out, _ = _run("validate", str(SAMPLES))
    assert _colour(_style_at(out, "E110 file-cut")) == RED  # an error
    assert _colour(_style_at(out, "E115 nul-padding")) == YELLOW  # a warning
    location = _style_at(out, "sample_sessions/4bbad07c")
    assert location.color is None and not location.dim
    assert _colour(_style_at(out, "the gate failed")) == RED
    clean, _ = _run("validate", str(COMPLETED_SAMPLE))
    assert _colour(_style_at(clean, "All checks passed")) == GREEN


def test_watch_until_done_colours_the_verdict_it_ends_on() -> None:
    _, err = _run("watch", str(COMPLETED_SAMPLE), "--until-done", "--format", "ndjson")
    assert _colour(_style_at(err, "completed")) == GREEN
    assert _colour(_style_at(err, "OK (1 session audited")) == GREEN


def test_the_live_view_colours_errors_and_task_complete() -> None:
    follower = watch.Follower((ERROR_SAMPLE,), "s")
    follower.poll()
    state = watch.state(follower)
    assert state is not None and state.errors == 1
    lines = view([state], [], now=datetime(2027, 1, 1, tzinfo=UTC)).renderables  # type: ignore[attr-defined]
    texts = [line for line in lines if isinstance(line, Text)]
    errors = next(line for line in texts if "errors 1" in line.plain)
    at = errors.plain.index("errors 1") + len("errors ")
    assert _colour(errors.get_style_at_offset(CONSOLE, at)) == RED
    completed = watch.Follower((COMPLETED_SAMPLE,), "c")
    completed.poll()
    done_state = watch.state(completed)
    assert done_state is not None and done_state.task_complete
    more = next(
        line
        for line in view([done_state], []).renderables  # type: ignore[attr-defined]
        if isinstance(line, Text) and "task_complete yes" in line.plain
    )
    at = more.plain.index("task_complete yes") + len("task_complete ")
    assert _colour(more.get_style_at_offset(CONSOLE, at)) == GREEN


# --- NO_COLOR ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("timeline", str(ERROR_SAMPLE)),
        ("audit", str(SAMPLES)),
        ("validate", str(SAMPLES)),
        ("watch", str(COMPLETED_SAMPLE), "--until-done"),
        ("watch", str(COMPLETED_SAMPLE), "--until-done", "--format", "ndjson"),
    ],
)
def test_no_color_turns_every_colour_off(args: tuple[str, ...]) -> None:
    coloured = _run(*args)
    assert any(span.style for line in coloured[0] + coloured[1] for span in line.spans)
    out, err = _run(*args, env={**COLOUR, "NO_COLOR": "1"})
    colours = [
        span
        for line in out + err
        for span in line.spans
        if Style.parse(str(span.style)).color is not None
    ]
    assert colours == []


# --- plain text keeps the meaning (issue 33, item 7) ----------------------------------------

PLAIN = {"NO_COLOR": "1", "COLUMNS": "80"}


def test_plain_text_names_errors_and_warnings_in_words(tmp_path: Path) -> None:
    from synth import SessionBuilder

    builder = SessionBuilder()
    builder.user_message("Summarise.")
    builder.turn(None)
    builder.session_error("Could not connect")
    builder.event("session.warning", {"warningType": "mcp", "message": "server slow"}, after_ms=5)
    builder.compaction(-294)  # the summary came out longer than what it replaced
    builder.shutdown()
    out, _ = _run("timeline", str(builder.write(tmp_path / "s.jsonl")), env=PLAIN)
    plain = "\n".join(line.plain for line in out)
    assert "• error: query: Could not connect" in plain
    assert "• warning: mcp: server slow" in plain
    assert "compaction grew the context by 294 tokens" in plain
    assert "-294" not in plain


def test_a_table_with_no_row_prints_no_header_and_no_note(tmp_path: Path) -> None:
    from synth import SessionBuilder

    builder = SessionBuilder()  # interactive: audit lists no row
    builder.user_message("Hi.")
    builder.turn("Hello.")
    builder.shutdown()
    out, _ = _run("audit", str(builder.write(tmp_path / "s.jsonl")), env=PLAIN)
    plain = [line.plain for line in out if line.plain.strip()]
    assert len(plain) == 1 and plain[0].startswith("OK: no autopilot session"), plain
