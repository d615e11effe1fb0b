"""The one way text leaves the process: human text through the sanitize gate, machine text
exact, and a reader that goes away (``| head``) never turns into a traceback.

No other module writes to stdout or stderr or builds a rich console (a test greps the package
for it), so no command can print log text unescaped: :func:`echo` and :func:`rich_console`
show every control character as a visible escape and keep CI workflow commands out of the
output; :func:`write_exact` is for json, ndjson and csv, which keep the text as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from copilot_logs.render.sanitize import inert, multiline, multiline_styled

if TYPE_CHECKING:
    from rich.console import Console

MIN_WIDTH = 20
MAX_WIDTH = 1000
"""Terminal widths (--width, $COLUMNS, the terminal's) are held to this range: a width of
millions of columns would pad every line to it."""

_gone: set[str] = set()
"""The streams ("stdout", "stderr") whose reader went away: later output to them is dropped."""


def echo(
    text: str = "", *, err: bool = False, nl: bool = True, workflow_commands: bool = False
) -> None:
    """Human text (lines) on stdout, or stderr with ``err``: control characters shown as
    visible escapes, no line a CI runs as a command (unless ``workflow_commands``: the
    ``--format github`` output, whose annotations escape their own data)."""
    shown = inert(multiline(text), workflow_commands=workflow_commands)
    _write(shown + ("\n" if nl else ""), err=err)


def write_exact(text: str) -> None:
    """Machine output (json, ndjson, csv) on stdout, byte for byte."""
    _write(text, err=False)


def bounded_width(width: int) -> int:
    return max(MIN_WIDTH, min(MAX_WIDTH, width))


@contextmanager
def rich_console(*, width: int | None = None, err: bool = False) -> Iterator[Console]:
    """A rich console to print tables and trees on: markup and emoji codes are never read
    from the text, the width is bounded, and what is printed goes out through the same gate
    as :func:`echo` when the block ends (colours stay on a terminal)."""
    console = _console(width, err=err)
    with console.capture() as captured:
        yield console
    text = captured.get()
    shown = multiline_styled(text) if console.color_system else multiline(text)
    _write(inert(shown), err=err)


def progress_console() -> Console | None:
    """A console for a live progress bar on stderr (no log text), or None when stderr is not
    a terminal."""
    stream = sys.stderr
    if stream is None or not stream.isatty():
        return None
    return _console(None, err=True)


def live_console() -> Console | None:
    """A console for the live view of ``watch`` on stdout, or None when stdout is not a
    terminal. A live display moves the cursor, so what it writes cannot pass the gate line by
    line: every piece of log text it shows must be escaped first (``sanitize.one_line``)."""
    stream = sys.stdout
    if stream is None or not stream.isatty():
        return None
    return _console(None, err=False)


def _console(width: int | None, *, err: bool) -> Console:
    from rich.console import Console

    console = Console(stderr=err, width=width, markup=False, emoji=False, highlight=False)
    console.width = bounded_width(console.width)
    return console


def _write(text: str, *, err: bool) -> None:
    name = "stderr" if err else "stdout"
    if name in _gone:
        return
    stream: TextIO = sys.stderr if err else sys.stdout
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        # The reader went away (`| head -1`): drop the rest, keep running so the command still
        # exits with its own code, and point the descriptor at /dev/null so the interpreter's
        # last flush does not complain either.
        _gone.add(name)
        _discard(stream)


def _discard(stream: TextIO) -> None:
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)
