"""The project's own exceptions and the exit codes the command line returns.

The core raises these; only the CLI turns them into a one-line ``Error: ...`` and an exit code.
"""

from __future__ import annotations

import errno
from enum import IntEnum

FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""Errors of a write that may pass later (once there is room): a :class:`WriteError`."""


class ExitCode(IntEnum):
    """Exit codes of every ``copilot-logs`` command: the README's "Exit codes" says when."""

    OK = 0
    FAILED = 1
    USAGE = 2
    UNREADABLE = 3
    TIMEOUT = 124
    """The code of coreutils ``timeout``."""


class CopilotLogsError(Exception):
    """Base of every error the core raises on purpose."""

    exit_code: ExitCode = ExitCode.USAGE


class SelectionError(CopilotLogsError):
    """A selector (path, id, prefix, date) that cannot be resolved."""

    exit_code = ExitCode.USAGE


class UnreadableError(CopilotLogsError):
    """A folder of sessions that cannot be listed (permission denied, an I/O error)."""

    exit_code = ExitCode.UNREADABLE


class WriteError(CopilotLogsError):
    """A file copilot-logs had to write or remove could not be (a full disk, an I/O error, a
    file it may not remove); what was there before is left as it was."""

    exit_code = ExitCode.UNREADABLE


class OutputError(WriteError):
    """The output could not be written: standard output closed (``>&-``) or full
    (``>/dev/full``)."""


class UnsupportedFormatError(CopilotLogsError):
    """Input in a format copilot-logs does not read (e.g. the pre-0.0.342 history folder)."""

    exit_code = ExitCode.UNREADABLE


def failed_on_session() -> str:
    """The diagnostic message (kind ``unprocessable``, rule E125) for a session copilot-logs
    failed on, naming the exception being handled."""
    import sys

    error = sys.exception()
    what = f"{type(error).__name__}: {error}" if error is not None else "an error"
    return (
        f"copilot-logs failed on this session ({what[:200]}); it is left out, the other "
        "sessions were read: please report it"
    )
