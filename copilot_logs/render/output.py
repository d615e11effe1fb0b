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

import codecs
import functools
import io
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from copilot_logs.errors import OutputError

if TYPE_CHECKING:
    from rich.console import Console

MIN_WIDTH = 20
MAX_WIDTH = 1000
"""Terminal widths (--width, $COLUMNS, the terminal's) are held to this range: a width of
millions of columns would pad every line to it."""


class Environment:
    """The standard streams the gate writes to, and which of them went away (httpie's
    ``Environment``). This one is the process's own: ``sys.stdout`` and ``sys.stderr`` as they
    are at each write (click's test runner swaps them). A test hands its own to
    :func:`environment` (streams of another encoding, a terminal, a closed or full one), so
    what the gate does with each runs in-process."""

    def __init__(self) -> None:
        self.gone: set[str] = set()
        """The streams ("stdout", "stderr") whose reader went away: later output to them is
        dropped."""

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
    """A :class:`SparkStatus` when stderr is a terminal, else None (nothing is said)."""
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
    console.width = bounded_width(console.width)
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


# --- Untrusted text made safe to show ----------------------------------------------------------


# C0 but tab and newline, DEL, C1, the line and paragraph separators, the bidi embeddings,
# overrides and isolates (they reorder what the eye reads), surrogates (a lone one cannot be
# encoded), the two non-characters XML forbids, and the invisible characters that make two
# names look alike or hide text (docs/untrusted-text.md lists them).
_BIDI = "\u202a-\u202e\u2066-\u2069"
_INVISIBLE = (
    "\u00ad\u061c\u180e\u200b\u200c\u200e\u200f\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb"
)
_TAGS = "\U000e0000-\U000e007f"  # in its own pattern for text not ASCII: it slows the search
_JOINER = "\u200d"  # the zero-width joiner: kept between two emoji (a family), else escaped
_HIDDEN = f"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}{_INVISIBLE}\ud800-\udfff\ufffe\uffff"
# [0] for ASCII text, [1] for any other (text.isascii() picks one).
_CONTROL = (re.compile(f"[{_HIDDEN}]"), re.compile(f"[{_HIDDEN}{_JOINER}{_TAGS}]"))
_CONTROL_OR_BREAK = (re.compile(f"[{_HIDDEN}\n]"), re.compile(f"[{_HIDDEN}{_JOINER}{_TAGS}\n]"))
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# GitHub Actions runs `::command::` at the start of a line (after blanks) and `##[command]`
# anywhere in it; Azure Pipelines runs `##vso[`.
_SGR = r"\x1b\[[0-9;]*m"  # the only escape sequence the rich tables may write (colours)
_SGR_SPLIT = re.compile(f"({_SGR})")
_WORKFLOW_COMMAND = re.compile(rf"^((?:\s|{_SGR})*):(?=:)")
_V1_COMMAND = re.compile(r"##(?=\[|vso\[)")
# What JSON may hold raw inside a string and a terminal or a CI could act on.
_JSON_RAW = re.compile(
    f"[\x7f-\x9f\u2028\u2029\u200d{_BIDI}{_INVISIBLE}{_TAGS}]|(?<=##)\\[|(?<=##vso)\\["
)


def _escape_char(char: str) -> str:
    r"""One character as a visible escape: ``\n``, ``\x1b``, ``\x9b``, ``\u202e``,
    ``\U000e0041``."""
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _escape(match: re.Match[str]) -> str:
    char, text, at = match.group(), match.string, match.start()
    if char == _JOINER and _emoji(text[at - 1 : at], "\ufe0f") and _emoji(text[at + 1 : at + 2]):
        return char
    return _escape_char(char)


def _emoji(char: str, also: str = "") -> bool:  # ``char``: one character, or none
    return bool(char) and (
        char == also or "\u2600" <= char <= "\u27bf" or "\U0001f000" <= char <= "\U0001faff"
    )


def one_line(text: str) -> str:
    """A field that must stay on one line (a name, a path, a message, a table cell): tabs
    become spaces, line breaks and every other control character visible escapes, and the
    commands of :func:`inert` broken already (a table cell may begin a line: escaping it
    before the layout keeps the columns aligned)."""
    hidden = _CONTROL_OR_BREAK[not text.isascii()]
    escaped = _V1_COMMAND.sub(r"#\\x23", hidden.sub(_escape, text.replace("\t", " ")))
    return _WORKFLOW_COMMAND.sub(r"\1\\x3a", escaped, count=1)


def multiline(text: str) -> str:
    """Text of several lines: newlines and tabs stay, every other control character becomes a
    visible escape, and a ``##[`` command is broken. The result is also valid in XML 1.0."""
    return _V1_COMMAND.sub(r"#\\x23", _CONTROL[not text.isascii()].sub(_escape, text))


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
    acts on: DEL, C1, U+2028/9, the bidi controls, the invisible format characters and the
    ``[`` of ``##[`` as ``\\u`` escapes. It decodes to the very same values (the text stays
    exact)."""
    if text.isascii() and "\x7f" not in text and "##" not in text:
        return text  # orjson escapes C0 itself; nothing else above can match
    return _JSON_RAW.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return json_escape(match.group())


def json_escape(char: str) -> str:
    """One character as a JSON ``\\u`` escape: two (a surrogate pair) above U+FFFF."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def markdown_cell(text: str) -> str:
    """A GitHub-flavoured markdown table cell: one line, backslashes and pipes escaped (so a
    ``|`` in the text never splits the cell)."""
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|")
