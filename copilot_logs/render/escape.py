"""Untrusted text made safe to show: control characters as visible escapes, no line a CI runs
as a command (docs/untrusted-text.md). :mod:`copilot_logs.render.output` passes every human
output through it; machine formats (json, ndjson, csv, sarif) keep the exact text.
"""

from __future__ import annotations

import re

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
    return _JSON_RAW.sub(lambda match: json_escape(match.group()), text)


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
