"""A session's ``workspace.yaml``: the few flat keys ``disk`` shows (name, cwd, client_name),
read by a small strict parser instead of a YAML library.

The CLI (1.0.102) writes one ``key: value`` a line, each value a plain scalar, a single-quoted
string (``''`` for a quote) or a double-quoted one with YAML's escapes (``\\n``, ``\\e``,
``\\x1b``, ``\\u2028``...), never folded across lines. Anything else for a key we read (a block
scalar, a flow collection, a line that is not ``key: value``, a key given twice, a bad escape)
leaves that key unknown rather than guessed; other keys are never looked at.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable

KEYS = ("name", "cwd", "client_name")
LARGEST = 64 * 1024
"""Bytes read at most: the CLI's file is a few hundred."""

_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?")
_SIMPLE_ESCAPES = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_PLAIN_BAD_START = tuple("-?:,[]{}#&*!|>'\"%@`")


def read(folder_fd: int) -> dict[str, str | None]:
    """The keys of :data:`KEYS` from ``workspace.yaml`` in the folder open as ``folder_fd``
    (None for each it does not hold, or holds in a form this parser does not read). Never
    follows a link, never opens a file that is not a regular one (a named pipe would block)."""
    try:
        fd = os.open(
            "workspace.yaml",
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=folder_fd,
        )
    except OSError:
        return dict.fromkeys(KEYS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return dict.fromkeys(KEYS)
        data = os.read(fd, LARGEST + 1)
    except OSError:
        return dict.fromkeys(KEYS)
    finally:
        os.close(fd)
    return parse(data[:LARGEST].decode("utf-8", "replace").splitlines(), KEYS)


def parse(lines: Iterable[str], keys: Iterable[str]) -> dict[str, str | None]:
    """The values of ``keys`` in flat ``key: value`` lines (see the module's docstring)."""
    wanted = set(keys)
    found: dict[str, str | None] = {}
    twice: set[str] = set()
    for line in lines:
        match = _LINE.fullmatch(line.rstrip("\r"))
        if match is None or match[1] not in wanted:
            continue
        key = match[1]
        if key in found:
            twice.add(key)
        found[key] = scalar(match[2] or "")
    return {key: None if key in twice else found.get(key) for key in keys}


def scalar(text: str) -> str | None:
    """One flow scalar written on one line, as YAML reads it; None when it is not one."""
    text = text.strip(" ")
    if text.startswith("'"):
        return _single_quoted(text)
    if text.startswith('"'):
        return _double_quoted(text)
    return _plain(text)


def _single_quoted(text: str) -> str | None:
    if len(text) < 2 or not text.endswith("'"):
        return None
    inner = text[1:-1]
    if "'" in inner.replace("''", ""):
        return None
    return inner.replace("''", "'")


def _double_quoted(text: str) -> str | None:
    if len(text) < 2 or not text.endswith('"'):
        return None
    inner, out, index = text[1:-1], [], 0
    while index < len(inner):
        char = inner[index]
        if char == '"':
            return None  # a quote inside that no backslash escapes: not one scalar
        if char != "\\":
            out.append(char)
            index += 1
            continue
        if index + 1 >= len(inner):
            return None
        code = inner[index + 1]
        if code in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[code])
            index += 2
            continue
        width = _HEX_ESCAPES.get(code)
        digits = inner[index + 2 : index + 2 + width] if width else ""
        if (
            not width
            or len(digits) != width
            or not all(c in "0123456789abcdefABCDEF" for c in digits)
        ):
            return None
        point = int(digits, 16)
        if point > 0x10FFFF:
            return None
        out.append(chr(point))
        index += 2 + width
    return "".join(out)


def _plain(text: str) -> str | None:
    if text == "" or text in ("~", "null", "Null", "NULL"):
        return None
    if text.startswith(_PLAIN_BAD_START) or ": " in text or " #" in text or text.endswith(":"):
        return None
    return text
