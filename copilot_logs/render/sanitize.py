"""Untrusted text made safe to show: control characters become visible escapes.

Text from a log (a prompt, a tool or model name, a repository, a file name) may hold bytes
that drive a terminal (``ESC [2J`` clears the screen, ``ESC ] 52`` writes the clipboard, the
one-byte C1 CSI U+009B does both) or a CI log (a line starting with ``::error::`` is a GitHub
Actions workflow command). Every human-readable output passes through these functions (the
``output`` module applies :func:`inert` to everything it prints); machine formats (json,
ndjson, csv, sarif) keep the exact text.
"""

from __future__ import annotations

import re

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
    return _JSON_RAW.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def markdown_cell(text: str) -> str:
    """A GitHub-flavoured markdown table cell: one line, backslashes and pipes escaped (so a
    ``|`` in the text never splits the cell)."""
    return one_line(text).replace("\\", "\\\\").replace("|", "\\|")
