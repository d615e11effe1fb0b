"""The one way text leaves the process: human text through the escaping of
:mod:`copilot_logs.render.escape`, machine text exact, and a reader that goes away (``| head``)
never turns into a traceback.

No other module writes to stdout or stderr or builds a rich console (a test checks), so no
command can print log text unescaped (docs/untrusted-text.md).
"""

from __future__ import annotations

import codecs
import functools
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from copilot_logs.errors import OutputError
from copilot_logs.render.escape import inert, json_escape, multiline, multiline_styled, one_line

if TYPE_CHECKING:
    from rich.console import Console

MIN_WIDTH = 20
MAX_WIDTH = 1000
"""Terminal widths (--width, $COLUMNS, the terminal's) are held to this range: a width of
millions of columns would pad every line to it."""


class Environment:
    """The standard streams the gate writes to, and which went away (httpie's
    ``Environment``): the process's own, as they are at each write; a test hands its own to
    :func:`environment`."""

    def __init__(self) -> None:
        self.gone: set[str] = set()
        """The streams ("stdout", "stderr") whose reader went away: output to them is dropped."""

    @property
    def stdout(self) -> TextIO | None:
        return sys.stdout

    @property
    def stderr(self) -> TextIO | None:
        return sys.stderr

    def stream(self, *, err: bool) -> TextIO | None:
        return self.stderr if err else self.stdout


_environment = Environment()


@contextmanager
def environment(streams: Environment) -> Iterator[Environment]:
    """Write to ``streams`` instead of the process's own while the block runs."""
    global _environment
    before, _environment = _environment, streams
    try:
        yield streams
    finally:
        _environment = before


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


def write_exact(text: str, *, escape: str = "json") -> None:
    """Machine output on stdout, byte for byte: json, ndjson, sarif (``escape="json"``), svg,
    html (``"xml"``), csv, markdown (``"text"``). A character the output encoding lacks
    (``PYTHONIOENCODING=ascii``, cp1252) is that format's escape (``\\u00b7``, ``&#xb7;``: the
    same text), or for csv and markdown the one people see (``\\xb7``)."""
    _write(text, err=False, errors=_ERRORS[escape])


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
    """A console for a progress bar on stderr, or None when stderr is not a terminal."""
    if not _terminal(_environment.stderr):
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

            stderr = _environment.stderr
            assert stderr is not None  # spark_status: only on a terminal
            self._stream = os.fdopen(os.dup(stderr.fileno()), "w", buffering=1)
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
    """A :class:`SparkStatus` when stderr is a terminal, else None."""
    if not _terminal(_environment.stderr):
        return None
    return SparkStatus()


def live_console() -> Console | None:
    """A console for the live view of ``watch`` on stdout, or None when stdout is not a
    terminal. A live display moves the cursor, so what it writes cannot pass the gate line by
    line: every piece of log text it shows must be escaped first (:func:`one_line`)."""
    if not _terminal(_environment.stdout):
        return None
    return _console(None, err=False)


def _terminal(stream: TextIO | None) -> bool:
    return stream is not None and not stream.closed and stream.isatty()


def _console(width: int | None, *, err: bool) -> Console:
    from rich.console import Console

    stream = _environment.stream(err=err)
    console = Console(
        # A stream the program closed: rich would fail at it, and the gate says so at a write.
        file=io.StringIO() if stream is not None and stream.closed else stream,
        stderr=err,
        width=width,
        markup=False,
        emoji=False,
        highlight=False,
    )
    console.width = max(MIN_WIDTH, min(MAX_WIDTH, console.width))
    return console


def _write(text: str, *, err: bool, errors: str = "backslashreplace") -> None:
    """Write ``text`` (what the stream's encoding lacks as ``errors`` escapes). A reader that
    went away (``| head -1``) gets nothing more, and the command runs on to exit with its own
    code; stdout closed (``>&-``) or failing (``>/dev/full``) is an OutputError (one line,
    exit 3); stderr closed or failing loses only what goes there, never stdout's output."""
    name = "stderr" if err else "stdout"
    gone = _environment.gone
    stream = _environment.stream(err=err)
    if name in gone or (stream is None and err):
        return
    if stream is None:  # the descriptor was closed when the command started
        gone.add(name)
        raise OutputError("cannot write the output: standard output is closed")
    try:
        stream.write(_encodable(text, stream, errors))
        stream.flush()
    except (OSError, ValueError) as error:  # ValueError: a stream the process closed
        gone.add(name)
        _discard(stream)
        if not err and not isinstance(error, BrokenPipeError):
            reason = getattr(error, "strerror", None) or error
            raise OutputError(f"cannot write the output to standard output ({reason})") from None


def _encodable(text: str, stream: TextIO, errors: str) -> str:
    encoding = getattr(stream, "encoding", None)
    if not encoding or _is_utf8(encoding) or text.isascii():
        return text
    return text.encode(encoding, errors).decode(encoding)


@functools.cache
def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"  # the stream's own: a known codec


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """Characters the encoding lacks as JSON ``\\u`` escapes: the very same string."""
    assert isinstance(error, UnicodeEncodeError)  # registered for encoding only
    return "".join(map(json_escape, error.object[error.start : error.end])), error.end


codecs.register_error("copilot-logs-json", _json_escapes)
_ERRORS = {"json": "copilot-logs-json", "xml": "xmlcharrefreplace", "text": "backslashreplace"}


def guard_streams() -> None:
    """At the start of a command: a closed descriptor 0, 1 or 2 gets /dev/null, so no file the
    command opens takes its number (``sys.stdout`` stays None: output to it is still said to
    fail); a character a stream cannot encode is written as an escape, never a failure; no
    stream is taken for gone yet (a test runs many commands in one process)."""
    _environment.gone.clear()
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:  # closed: the lowest free descriptor, so os.open takes this one
            os.open(os.devnull, os.O_RDWR)
    for stream in (_environment.stdout, _environment.stderr):
        if stream is None or stream.closed:  # closed by the program that called us: said at a write
            continue
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="backslashreplace")


def fail_quietly() -> None:
    """After a write failed outside the gate (click's help on a full disk): stdout and stderr
    to /dev/null, so the interpreter's last flush does not fail again."""
    for stream in (_environment.stdout, _environment.stderr):
        if stream is not None:
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
