"""OpenTelemetry traces rebuilt from session logs: what ``copilot-logs otel`` writes to a file or
sends to a collector (docs/otel.md).

Each batch gives its traces (:mod:`~copilot_logs.commands.otel.spans`); :func:`plan` puts them
in one order (the same logs, the same bytes) without the open interactions and the sessions the
CLI's own files hold; :mod:`~copilot_logs.commands.otel.push` encodes and sends them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from copilot_logs import derive
from copilot_logs.commands.otel import push
from copilot_logs.commands.otel.push import Destination, Sleep, batches, send
from copilot_logs.commands.otel.spans import Trace, traces
from copilot_logs.errors import UnreadableError
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.store import ledger


def batch_traces(result: ReadResult, *, capture_content: bool = False) -> list[Trace]:
    """The traces of one batch of logs (each interaction, open ones included)."""
    if result.events.is_empty():
        return []
    return traces(derive.annotate(result.events), capture_content=capture_content)


@dataclass(frozen=True)
class Plan:
    """The traces to write or send, in order, and what was left out."""

    traces: list[Trace]
    open: int
    """Open interactions left out (--include-open sends them)."""
    skipped_sessions: int
    """Sessions left out because a file given to --skip-existing holds them."""

    @property
    def spans(self) -> int:
        return sum(len(trace.spans) for trace in self.traces)

    @property
    def sessions(self) -> int:
        return len({(trace.file, trace.session_id) for trace in self.traces})


def plan(
    batches: Iterable[list[Trace]], *, include_open: bool = False, skip: Iterable[str] = ()
) -> Plan:
    """The traces of every batch in one order (sessions by their first interaction's time,
    then session id and file; interactions in log order), without the sessions in ``skip``
    and, unless ``include_open``, the open interactions."""
    skipped = set(skip)
    found = [trace for batch in batches for trace in batch]
    left = [trace for trace in found if trace.session_id not in skipped]
    first: dict[tuple[str, str], int] = {}
    for trace in left:
        key = (trace.file, trace.session_id)
        first[key] = min(first.get(key, trace.started_ns), trace.started_ns)
    left.sort(
        key=lambda t: (first[(t.file, t.session_id)], t.session_id, t.file, t.interaction_index)
    )
    kept = [trace for trace in left if include_open or not trace.open]
    sessions_skipped = len({t.session_id for t in found if t.session_id in skipped})
    return Plan(kept, len(left) - len(kept), sessions_skipped)


def existing_sessions(paths: Sequence[Path]) -> set[str]:
    """The sessions (``gen_ai.conversation.id``) that OpenTelemetry files already hold: the
    CLI's own, or OTLP JSON lines such as ``otel --out`` writes (:func:`conversations`)."""
    found: set[str] = set()
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as error:
            raise UnreadableError(
                f"cannot read {path} ({error.strerror or error}); name an OpenTelemetry file "
                "the CLI or copilot-logs otel wrote"
            ) from None
        found |= conversations(data)
    return found


@dataclass(frozen=True)
class Pushed:
    """What a push did."""

    destination: str
    sent: list[Trace]
    requests: int
    unchanged: int
    """Traces the ledger says were sent already, as they are now (not sent again)."""
    rejected_spans: int
    """Spans the collector said it rejected (their batches are not in the ledger)."""
    recorded: bool
    """The ledger holds what was sent (else the next push sends these again)."""


def push_traces(
    traces: Sequence[Trace],
    destination: Destination,
    *,
    force: bool = False,
    max_spans: int = 512,
    sleep: Sleep | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> Pushed:
    """Send the traces the ledger does not hold as they are now (every one with ``force``), in
    batches, and add each accepted batch to the ledger, also when a later one fails (then
    :class:`~copilot_logs.commands.otel.push.PushError` is raised after)."""
    digests = {trace.trace_id.hex(): push.digest(trace) for trace in traces}
    before = {} if force else ledger.read(destination.url)
    todo = [t for t in traces if before.get(t.trace_id.hex()) != digests[t.trace_id.hex()]]
    accepted: dict[str, str] = {}
    sent: list[Trace] = []
    requests = rejected = 0
    recorded = True
    try:
        for batch in batches(todo, max_spans):
            answer = send(batch, destination, sleep=sleep or time.sleep, on_retry=on_retry)
            requests += 1
            if answer.rejected:
                rejected += answer.rejected
                continue
            sent.extend(batch)
            accepted.update((t.trace_id.hex(), digests[t.trace_id.hex()]) for t in batch)
    finally:
        recorded = ledger.record(destination.url, accepted)
    return Pushed(destination.url, sent, requests, len(traces) - len(todo), rejected, recorded)


CONVERSATION = "gen_ai.conversation.id"


def conversations(data: bytes) -> set[str]:
    """The session ids the lines of ``data`` name; a line that is not JSON, or holds none,
    adds nothing."""
    found: set[str] = set()
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found |= _in_line(value)
    return found


def _in_line(line: dict[str, Any]) -> set[str]:
    attributes = line.get("attributes")
    if line.get("type") == "span" and isinstance(attributes, dict):
        session = attributes.get(CONVERSATION)
        return {session} if isinstance(session, str) else set()
    values = [
        pair.get("value")
        for resource in _list(line.get("resourceSpans"))
        for scope in _list(resource.get("scopeSpans"))
        for span in _list(scope.get("spans"))
        for pair in _list(span.get("attributes"))
        if pair.get("key") == CONVERSATION
    ]
    return {
        value["stringValue"]
        for value in values
        if isinstance(value, dict) and isinstance(value.get("stringValue"), str)
    }


def _list(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
