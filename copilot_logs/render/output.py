"""The one way text leaves the process: human text through the escaping gate below, machine
text exact, and a reader that goes away (``| head``) never turns into a traceback.

No other module writes to stdout or stderr or builds a rich console (a test greps the package
for it), so no command can print log text unescaped: :func:`echo` and :func:`rich_console`
show every control character as a visible escape and keep CI workflow commands out of the
output; :func:`write_exact` is for json, ndjson and csv, which keep the text as it is.

The escaping: untrusted text made safe to show, control characters as visible escapes. Text
from a log (a prompt, a tool or model name, a repository, a file name) may hold bytes
that drive a terminal (``ESC [2J`` clears the screen, ``ESC ] 52`` writes the clipboard, the
one-byte C1 CSI U+009B does both) or a CI log (a line starting with ``::error::`` is a GitHub
Actions workflow command). Every human-readable output passes through these functions (:func:`echo`
and :func:`rich_console` apply :func:`inert` to everything they print); machine formats (json,
ndjson, csv, sarif) keep the exact text.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

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


Part = tuple[str, str | None]
"""A piece of a line of human text, and its rich style (``"bold red"``) or None."""


def echo_styled(lines: Iterable[Sequence[Part]], *, err: bool = False) -> None:
    """Lines of human text made of styled parts: escaped as :func:`echo` escapes them, and
    coloured only on a colour terminal (rich decides: never with NO_COLOR, in a pipe or a
    dumb terminal)."""
    from rich.console import COLOR_SYSTEMS
    from rich.style import Style

    console = _console(None, err=err)
    colours = COLOR_SYSTEMS[console.color_system] if console.color_system else None
    shown = []
    for parts in lines:
        line = ""
        for text, style in parts:
            piece = multiline(text)
            if colours is not None and style:
                chosen = Style.parse(style)
                chosen = chosen.without_color if console.no_color else chosen
                piece = chosen.render(piece, color_system=colours)
            line += piece
        shown.append(inert(line) + "\n")
    _write("".join(shown), err=err)


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


PROGRESS_BYTES = 64 << 20
"""Reading less than this goes by too fast for a progress bar."""


@contextmanager
def progress(logs: int, size: int) -> Iterator[Callable[[object], None] | None]:
    """A transient progress bar on stderr while ``logs`` session logs of ``size`` bytes are
    read, when stderr is a terminal and there is a lot to read: yields what to call as each
    log is read, else None."""
    console = progress_console()
    if console is None or size < PROGRESS_BYTES:
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True, console=console) as bar:
        task = bar.add_task("Reading sessions", total=logs)
        yield lambda _log: bar.advance(task)


class SparkStatus:
    """What Spark is doing, on stderr while it works (a terminal only): that it is starting,
    then the job's tasks done. It draws on a copy of the terminal's descriptor, so it goes on
    showing while Spark's JVM starts with descriptor 2 pointed at its log file."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None
        self._stream: TextIO | None = None

    def _show(self, description: str) -> None:
        if self._bar is None:
            from rich import progress as bars
            from rich.console import Console

            self._stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
            console = Console(file=self._stream, markup=False, emoji=False, highlight=False)
            self._bar = bars.Progress(
                bars.SpinnerColumn(),
                bars.TextColumn("{task.description}"),
                bars.BarColumn(),
                bars.MofNCompleteColumn(),
                bars.TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(description, total=None)
        self._bar.update(self._task, description=description)

    def starting(self, master: str) -> None:
        self._show(f"Starting Spark on {one_line(master)} (its log: spark.log)")

    def tasks(self, done: int, total: int) -> None:
        self._show("Spark job: tasks done")
        self._bar.update(self._task, completed=done, total=total)

    def finished(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None


def spark_status() -> SparkStatus | None:
    """A :class:`SparkStatus` when stderr is a terminal, else None (nothing is said)."""
    stream = sys.stderr
    if stream is None or not stream.isatty():
        return None
    return SparkStatus()


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


# --- Untrusted text made safe to show ----------------------------------------------------------


# C0 but tab and newline, DEL, C1, the line and paragraph separators, the bidi embeddings,
# overrides and isolates (they reorder what the eye reads), surrogates (a lone one cannot be
# encoded) and the two non-characters XML forbids.
_HIDDEN = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
)
_CONTROL = re.compile(f"[{_HIDDEN}]")
_CONTROL_OR_BREAK = re.compile(f"[{_HIDDEN}\n]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# GitHub Actions runs `::command::` at the start of a line (after blanks) and `##[command]`
# anywhere in it; Azure Pipelines runs `##vso[`.
_SGR = r"\x1b\[[0-9;]*m"  # the only escape sequence the rich tables may write (colours)
_SGR_SPLIT = re.compile(f"({_SGR})")
_WORKFLOW_COMMAND = re.compile(rf"^((?:\s|{_SGR})*):(?=:)")
_V1_COMMAND = re.compile(r"##(?=\[|vso\[)")
# What JSON may hold raw inside a string and a terminal or a CI could act on.
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]|(?<=##)\\[|(?<=##vso)\\[")


def _escape_char(char: str) -> str:
    r"""One character as a visible escape: ``\n``, ``\x1b``, ``\x9b``, ``\u202e``."""
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escape(match: re.Match[str]) -> str:
    return _escape_char(match.group())


def one_line(text: str) -> str:
    """A field that must stay on one line (a name, a path, a message, a table cell): tabs
    become spaces, line breaks and every other control character visible escapes, and the
    commands of :func:`inert` broken already (a table cell may begin a line: escaping it
    before the layout keeps the columns aligned)."""
    escaped = _V1_COMMAND.sub(r"#\\x23", _CONTROL_OR_BREAK.sub(_escape, text.replace("\t", " ")))
    return _WORKFLOW_COMMAND.sub(r"\1\\x3a", escaped, count=1)


def multiline(text: str) -> str:
    """Text of several lines: newlines and tabs stay, every other control character becomes a
    visible escape, and a ``##[`` command is broken. The result is also valid in XML 1.0."""
    return _V1_COMMAND.sub(r"#\\x23", _CONTROL.sub(_escape, text))


def multiline_styled(text: str) -> str:
    """:func:`multiline` for what rich wrote to a colour terminal: its colour sequences (SGR)
    stay, every other control character becomes a visible escape."""
    parts = _SGR_SPLIT.split(text)
    return "".join(part if odd % 2 else multiline(part) for odd, part in enumerate(parts))


def inert(text: str, *, workflow_commands: bool = False) -> str:
    """``text`` (lines, already escaped) with no line a CI runs as a command: a leading ``::``
    becomes ``\\x3a:``. ``workflow_commands`` keeps them for output that means them
    (``--format github``)."""
    if workflow_commands:
        return text
    return "\n".join(_WORKFLOW_COMMAND.sub(r"\1\\x3a", line) for line in text.split("\n"))


def json_text(text: str) -> str:
    """JSON text (as orjson writes it) whose strings hold no raw character a terminal or a CI
    acts on: DEL, C1, U+2028/9, the bidi controls and the ``[`` of ``##[`` as ``\\u``
    escapes. It decodes to the very same values (the text stays exact)."""
    if text.isascii() and "\x7f" not in text and "##" not in text:
        return text  # orjson escapes C0 itself; nothing else above can match
    return _JSON_RAW.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def markdown_cell(text: str) -> str:
    """A GitHub-flavoured markdown table cell: one line, backslashes and pipes escaped (so a
    ``|`` in the text never splits the cell)."""
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|")
