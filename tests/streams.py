"""Standard streams as a test wants them, for the output gate (copilot_logs/render/output.py):
of any encoding, a terminal or a pipe, full, closed, or with their reader gone (httpie's
``MockEnvironment``). A command runs in-process on them with :func:`run`; only what needs a
process of its own (a descriptor closed before it starts, a deleted working folder, signals,
the interpreter's last flush) is left to tests/test_process_surroundings.py.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.render import output


class Stream(io.TextIOWrapper):
    """A text stream over bytes kept in memory: ``encoding`` as ``PYTHONIOENCODING`` sets it
    (errors strict, as Python opens a stream: the gate must not rely on more), ``tty`` for a
    terminal, and ``fails`` for the OSError each flush raises (ENOSPC: a full disk, EPIPE: a
    reader gone), as a buffered stream fails at its flush."""

    def __init__(
        self, encoding: str = "utf-8", *, tty: bool = False, fails: OSError | None = None
    ) -> None:
        self.written = io.BytesIO()
        super().__init__(self.written, encoding=encoding, errors="strict", newline="\n")
        self._tty = tty
        self._fails = fails
        self._pending = False

    def isatty(self) -> bool:
        return self._tty

    def write(self, text: str) -> int:
        self._pending = self._pending or bool(text)
        return super().write(text)

    def flush(self) -> None:
        pending, self._pending = self._pending, False
        if self._fails is not None and pending:  # nothing to write: nothing fails
            raise self._fails
        super().flush()

    def close(self) -> None:
        self._fails = None  # the test is done with it: closing must not fail again
        super().close()

    def bytes(self) -> bytes:
        if not self.closed and self._fails is None:
            self.flush()
        return self.written.getvalue()

    def text(self) -> str:
        return self.bytes().decode(self.encoding)


def full() -> Stream:
    return Stream(fails=OSError(errno.ENOSPC, "No space left on device"))


def reader_gone() -> Stream:
    return Stream(fails=BrokenPipeError(errno.EPIPE, "Broken pipe"))


def closed() -> Stream:
    """A stream the process closed (``sys.stdout.close()``): writing raises ValueError."""
    stream = Stream()
    stream.close()
    return stream


class MockEnvironment(output.Environment):
    """The gate's streams given, not the process's: None is a descriptor closed when the
    command started (``>&-``)."""

    def __init__(self, stdout: Stream | None, stderr: Stream | None) -> None:
        super().__init__()
        self._stdout = stdout
        self._stderr = stderr

    @property
    def stdout(self) -> Stream | None:
        return self._stdout

    @property
    def stderr(self) -> Stream | None:
        return self._stderr


@dataclass
class Ran:
    exit_code: int
    stdout: Stream | None
    stderr: Stream | None

    @property
    def errors(self) -> list[str]:
        """The ``Error:`` lines on stderr (no traceback may be there)."""
        text = self.stderr.bytes().decode("utf-8", "replace") if self.stderr else ""
        assert "Traceback" not in text, text
        return [line for line in text.splitlines() if line.startswith("Error:")]


def run(
    args: Sequence[str | Path],
    *,
    stdout: Stream | None,
    stderr: Stream | None,
    stdin: bytes | None = None,
) -> Ran:
    """``copilot-logs ARGS`` in-process, writing to ``stdout`` and ``stderr``."""
    with output.environment(MockEnvironment(stdout, stderr)):
        result = CliRunner().invoke(main, [str(arg) for arg in args], input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, stdout, stderr)
