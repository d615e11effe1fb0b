"""``copilot-logs otel``'s output: the trace lines on standard output or in a file (written whole
or not at all), and what was written or sent, in one line on stderr."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from copilot_logs import modes
from copilot_logs.errors import WriteError
from copilot_logs.render import output
from copilot_logs.render.escape import json_text, one_line
from copilot_logs.render.humanize import plural

if TYPE_CHECKING:
    from copilot_logs.commands.otel import Plan, Pushed


def write_lines(lines: Iterable[bytes], out: str) -> None:
    """The lines (JSON, as orjson wrote them) on stdout (``out`` is ``-``) or in the file
    ``out``: into a new file beside it, renamed over it once written, so a failed write leaves
    the older file as it was. Text a terminal or CI would act on is written as JSON escapes
    (:func:`~copilot_logs.render.escape.json_text`): the same values."""
    text = json_text(b"".join(lines).decode())
    if out == "-":
        output.write_exact(text)
        return
    try:
        with modes.atomic(os.path.realpath(out), 0o666) as stream:  # the umask applies
            stream.write(text.encode())
    except OSError as error:
        raise WriteError(
            f"cannot write {one_line(out)} ({error.strerror or error}); the file is as it was"
        ) from None


def _left_out(plan: Plan, verb: str) -> str:
    notes = []
    if plan.open:
        notes.append(
            f"{plural(plan.open, 'open interaction')} left out (--include-open {verb} "
            f"{'it' if plan.open == 1 else 'them'})"
        )
    if plan.skipped_sessions:
        notes.append(
            f"{plural(plan.skipped_sessions, 'session')} left out: already in --skip-existing"
        )
    return "; " + "; ".join(notes) if notes else ""


def say_written(plan: Plan, out: str) -> None:
    where = "standard output" if out == "-" else one_line(out)
    output.echo(
        f"Wrote {plural(len(plan.traces), 'interaction')} ({plural(plan.spans, 'span')}) of "
        f"{plural(plan.sessions, 'session')} to {where}{_left_out(plan, 'writes')}.",
        err=True,
    )


def say_pushed(plan: Plan, pushed: Pushed) -> None:
    where = one_line(pushed.destination)
    spans = sum(len(trace.spans) for trace in pushed.sent)
    if pushed.sent:
        said = (
            f"Sent {plural(len(pushed.sent), 'interaction')} ({plural(spans, 'span')}) in "
            f"{plural(pushed.requests, 'request')} to {where}"
        )
    else:
        said = f"Sent nothing to {where}"
    if pushed.unchanged:
        said += (
            f"; {plural(pushed.unchanged, 'interaction')} unchanged since an earlier push "
            "(--force sends them again)"
        )
    output.echo(said + _left_out(plan, "sends") + ".", err=True)
    if pushed.rejected_spans:
        output.echo(
            f"warning: the collector rejected {plural(pushed.rejected_spans, 'span')}; "
            "their interactions are sent again by the next push",
            err=True,
        )
    if not pushed.recorded:
        output.echo(
            "warning: the ledger in the store could not be written: the next push sends "
            "these interactions again",
            err=True,
        )


def say_retry(message: str) -> None:
    output.echo(f"warning: {one_line(message)}", err=True)
