"""The output gate on every kind of standard stream, in-process (tests/streams.py): stdout or
stderr closed, full, or their reader gone; an encoding that lacks characters of the text; a
terminal or a pipe. The same cases as a real process meets them (a descriptor closed before
the start, /dev/full, PYTHONIOENCODING) are in tests/test_process_surroundings.py (tier
`process`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from copilot_logs.render import output
from synth import SessionBuilder
from tests.conftest import SAMPLES
from tests.streams import MockEnvironment, Stream, closed, full, reader_gone, run

ALL_CALLS = 53
"""LLM calls in sample_sessions (tests/test_samples.py checks it against the generator)."""

REPOSITORY = "café/·naïve-中文-😀-Ωμέγα"
"""Text no 8-bit encoding holds whole: latin-1 has é, ï and ·, cp1252 the same, ascii none."""

WRITING = [
    ["count", "--total", SAMPLES],
    ["sessions", SAMPLES],
    ["count", "--format", "csv", SAMPLES],
    ["rules"],
]
Streams = Callable[[], Stream | None]
"""A kind of stream, made anew for each test."""


def ids(args: list[str | Path]) -> str:
    return " ".join(map(str, args)).replace(str(SAMPLES), "SAMPLES")


def no_stream() -> None:
    """A descriptor closed when the command started (``>&-``)."""


# --- standard output closed, full, or its reader gone ------------------------------------------


@pytest.mark.parametrize(
    "stdout", [no_stream, full, closed], ids=["closed", "full", "closed-later"]
)
@pytest.mark.parametrize("args", WRITING, ids=ids)
def test_output_that_cannot_be_written_is_one_error_line(
    args: list[str | Path], stdout: Streams
) -> None:
    ran = run(args, stdout=stdout(), stderr=Stream())
    assert ran.exit_code == 3
    [line] = ran.errors
    assert "cannot write the output" in line


@pytest.mark.parametrize(
    ("args", "code"),
    [(["count", "--total", SAMPLES], 0), (["validate", SAMPLES], 1), (["sessions", SAMPLES], 0)],
    ids=lambda v: ids(v) if isinstance(v, list) else str(v),
)
def test_a_reader_gone_keeps_the_exit_code_and_says_nothing(
    args: list[str | Path], code: int
) -> None:
    ran = run(args, stdout=reader_gone(), stderr=Stream())
    assert ran.exit_code == code
    assert ran.errors == []


def test_nothing_more_is_written_once_the_reader_is_gone() -> None:
    stdout, stderr = Stream(fails=BrokenPipeError()), Stream()
    with output.environment(MockEnvironment(stdout, stderr)):
        output.guard_streams()
        output.echo("lost")
        stdout._fails = None
        output.echo("never tried")
    assert stdout.bytes() == b"lost\n"  # in the stream's buffer: the write failed at its flush


def test_a_new_command_writes_again() -> None:
    """A stream taken for gone stays gone for the rest of the command only."""
    stdout = Stream()
    with output.environment(MockEnvironment(stdout, Stream())) as streams:
        streams.gone.add("stdout")
        output.guard_streams()
        output.echo("said")
    assert stdout.text() == "said\n"


# --- standard error closed or full: the output is never lost -----------------------------------


@pytest.mark.parametrize(
    "stderr", [no_stream, full, closed], ids=["closed", "full", "closed-later"]
)
@pytest.mark.parametrize(
    "args",
    [
        ["count", "--total", SAMPLES],  # the damaged sample warns on stderr first
        ["sessions", SAMPLES],
        ["count", "--total", "--root", "/nonexistent"],  # an error that cannot be said
    ],
    ids=ids,
)
def test_stderr_closed_or_full_keeps_the_output_and_the_exit_code(
    args: list[str | Path], stderr: Streams
) -> None:
    plain = run(args, stdout=Stream(), stderr=Stream())
    assert plain.stderr is not None and plain.stderr.bytes()  # something was lost below
    done = run(args, stdout=Stream(), stderr=stderr())
    assert done.exit_code == plain.exit_code
    assert done.stdout is not None and plain.stdout is not None
    assert done.stdout.bytes() == plain.stdout.bytes()


# --- an output encoding that cannot show the text --------------------------------------------


@pytest.fixture
def foreign_root(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    b = SessionBuilder(seed=3, repository=REPOSITORY, model="claude-sonnet-4.5")
    b.user_message("Explain this: naïve façade, 中文 and 😀 — now")
    b.turn("Sure — here it is.")
    b.write_to(root)
    return root


HUMAN = [
    ["sessions"],
    ["count", "--by", "repository"],
    ["timeline"],
    ["usage", "--by", "repository"],
    ["validate"],
    ["count", "--by", "repository", "--format", "csv"],
    ["audit", "--all", "--format", "markdown"],
    ["timeline", "--format", "svg"],
    ["report", "-o", "-"],
]
ENCODED = [(args, "ascii") for args in HUMAN] + [
    (args, encoding) for args in HUMAN[:2] for encoding in ("latin-1", "cp1252")
]


@pytest.mark.parametrize(
    ("args", "encoding"), ENCODED, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_an_encoding_that_lacks_a_character_shows_an_escape(
    foreign_root: Path, encoding: str, args: list[str]
) -> None:
    ran = run([*args, foreign_root], stdout=Stream(encoding), stderr=Stream(encoding))
    assert ran.exit_code in (0, 1)  # audit: 1, no autopilot run
    assert ran.errors == []
    assert ran.stdout is not None
    shown = ran.stdout.bytes().decode(encoding)  # every byte is the encoding's own
    if args[-1] == "repository" or "csv" in args:
        # What the encoding holds as it is, the rest as the escapes people see.
        expected = REPOSITORY.encode(encoding, "backslashreplace").decode(encoding)
        assert expected[:20] in shown
    else:
        assert shown


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
@pytest.mark.parametrize(
    "args",
    [["count", "--by", "repository", "--format", "json"], ["sessions", "--format", "ndjson"]],
    ids=" ".join,
)
def test_json_in_any_encoding_reads_back_as_the_exact_text(
    foreign_root: Path, encoding: str, args: list[str]
) -> None:
    """A character the encoding lacks is a JSON \\u escape: the same value, exactly."""
    ran = run([*args, foreign_root], stdout=Stream(encoding), stderr=Stream(encoding))
    assert ran.exit_code == 0
    assert ran.stdout is not None
    text = ran.stdout.bytes().decode(encoding)
    rows = (
        [json.loads(line) for line in text.splitlines()] if "ndjson" in args else json.loads(text)
    )
    assert [row["repository"] for row in rows] == [REPOSITORY]


def test_an_ascii_table_still_counts_every_call() -> None:
    ran = run(["count", "--total", SAMPLES], stdout=Stream("ascii"), stderr=Stream("ascii"))
    assert ran.stdout is not None and ran.stdout.bytes() == f"{ALL_CALLS}\n".encode()


# --- a terminal or a pipe ---------------------------------------------------------------------


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_the_live_view_and_progress_only_on_a_terminal(
    tty: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    with output.environment(MockEnvironment(Stream(tty=tty), Stream(tty=tty))):
        assert (output.live_console() is not None) is tty
        assert (output.progress_console() is not None) is tty
        assert (output.spark_status() is not None) is tty


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_styles_only_on_a_terminal(tty: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """rich decides from the stream the gate writes to: styles on a terminal, none in a pipe."""
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    error_log = SAMPLES / "07f6c938-ab13-4c24-a5d6-60718293a4b5" / "events.jsonl"
    ran = run(["timeline", error_log], stdout=Stream(tty=tty), stderr=Stream())
    assert ran.stdout is not None
    assert ("\x1b[" in ran.stdout.text()) is tty
