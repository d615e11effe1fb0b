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
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from copilot_logs.errors import OutputError

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


def write_exact(text: str, *, escape: str = "json") -> None:
    """Machine output on stdout, byte for byte: json, ndjson and sarif (``escape="json"``),
    xml, svg and html (``"xml"``), csv and markdown (``"text"``). Where the output encoding
    cannot hold a character (``PYTHONIOENCODING=ascii``, a cp1252 console), it is written as
    that format's own escape, which reads back as the same text (``\\u00b7``, ``&#xb7;``), or
    for csv and markdown as the escape people see (``\\xb7``)."""
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


def _write(text: str, *, err: bool, errors: str = "backslashreplace") -> None:
    """Write ``text`` (in what the stream's encoding holds, the rest as ``errors`` escapes).

    A reader that went away (``| head -1``) gets nothing more, and the command runs on to exit
    with its own code. Standard output closed (``>&-``) or failing (``>/dev/full``) is an
    :class:`~copilot_logs.errors.OutputError`: one line on stderr, exit 3. Standard error
    closed or failing drops what goes there, so the output on stdout is never lost for it.
    """
    name = "stderr" if err else "stdout"
    if name in _gone:
        return
    stream: TextIO | None = sys.stderr if err else sys.stdout
    if stream is None:  # the descriptor was closed when the command started
        _gone.add(name)
        if not err:
            raise OutputError("cannot write the output: standard output is closed")
        return
    try:
        stream.write(_encodable(text, stream, errors))
        stream.flush()
    except BrokenPipeError:
        _gone.add(name)
        _discard(stream)
    except (OSError, ValueError) as error:  # ValueError: a stream closed by the process
        _gone.add(name)
        _discard(stream)
        if not err:
            reason = error.strerror if isinstance(error, OSError) else None
            raise OutputError(
                f"cannot write the output to standard output ({reason or error}); write it "
                "where there is room, or pipe it into a reader"
            ) from None


def _encodable(text: str, stream: TextIO, errors: str) -> str:
    encoding = getattr(stream, "encoding", None)
    if not encoding or _is_utf8(encoding) or text.isascii():
        return text
    return text.encode(encoding, errors).decode(encoding)


@functools.cache
def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """An error handler: characters the encoding lacks as JSON ``\\u`` escapes (a pair of
    surrogates above U+FFFF), which decode to the very same string."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(map(json_escape, error.object[error.start : error.end])), error.end


codecs.register_error("copilot-logs-json", _json_escapes)
_ERRORS = {"json": "copilot-logs-json", "xml": "xmlcharrefreplace", "text": "backslashreplace"}


def guard_streams() -> None:
    """At start: a standard descriptor (0, 1, 2) that is closed gets /dev/null, so no file
    the command opens takes its number (and then receives what a library writes there);
    ``sys.stdout`` stays None, so output to it is still reported as closed. Streams that
    cannot encode a character show it as an escape rather than fail."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != descriptor:
                os.dup2(devnull, descriptor)
                os.close(devnull)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="backslashreplace")


def fail_quietly() -> None:
    """After a write to stdout or stderr failed outside the gate (click's own help or usage
    text on a full disk): both descriptors to /dev/null, so the interpreter's last flush
    does not fail again."""
    for stream in (sys.stdout, sys.stderr):
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
# encoded) and the two non-characters XML forbids; and the invisible format characters, which
# make two names that differ look the same: the soft hyphen, the Arabic letter mark, the
# Mongolian vowel separator, the zero-width space, non-joiner and joiner, the left-to-right
# and right-to-left marks, the word joiner and invisible operators, the deprecated format
# characters, the byte order mark, the interlinear annotation characters and the tag
# characters (which can spell out hidden ASCII text).
_BIDI = "\u202a-\u202e\u2066-\u2069"
_INVISIBLE = (
    "\u00ad\u061c\u180e\u200b\u200c\u200e\u200f\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb"
)
_TAGS = "\U000e0000-\U000e007f"
"""Looked for only in text that is not ASCII: a range above U+FFFF slows the pattern down."""
_HIDDEN = f"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}{_INVISIBLE}\ud800-\udfff\ufffe\uffff"
_JOINER = "\u200d"
"""The zero-width joiner: shown as it is between two emoji (a family, a profession), escaped
anywhere else (see :func:`_escape`)."""
_CONTROL = (re.compile(f"[{_HIDDEN}{_JOINER}]"), re.compile(f"[{_HIDDEN}{_JOINER}{_TAGS}]"))
_CONTROL_OR_BREAK = (
    re.compile(f"[{_HIDDEN}{_JOINER}\n]"),
    re.compile(f"[{_HIDDEN}{_JOINER}{_TAGS}\n]"),
)
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
    char = match.group()
    if char == _JOINER and _joins_emoji(match.string, match.start()):
        return char
    return _escape_char(char)


def _wide(text: str) -> bool:
    """Whether ``text`` may hold a tag character (U+E0000-U+E007F): ASCII text, the most of
    it, is searched with the faster pattern."""
    return not text.isascii()


def _joins_emoji(text: str, at: int) -> bool:
    before = text[at - 1] if at else ""
    after = text[at + 1 : at + 2]
    return (_emoji(before) or before == "\ufe0f") and _emoji(after)


def _emoji(char: str) -> bool:
    return bool(char) and ("\u2600" <= char <= "\u27bf" or "\U0001f000" <= char <= "\U0001faff")


def one_line(text: str) -> str:
    """A field that must stay on one line (a name, a path, a message, a table cell): tabs
    become spaces, line breaks and every other control character visible escapes, and the
    commands of :func:`inert` broken already (a table cell may begin a line: escaping it
    before the layout keeps the columns aligned)."""
    hidden = _CONTROL_OR_BREAK[_wide(text)]
    escaped = _V1_COMMAND.sub(r"#\\x23", hidden.sub(_escape, text.replace("\t", " ")))
    return _WORKFLOW_COMMAND.sub(r"\1\\x3a", escaped, count=1)


def multiline(text: str) -> str:
    """Text of several lines: newlines and tabs stay, every other control character becomes a
    visible escape, and a ``##[`` command is broken. The result is also valid in XML 1.0."""
    return _V1_COMMAND.sub(r"#\\x23", _CONTROL[_wide(text)].sub(_escape, text))


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
