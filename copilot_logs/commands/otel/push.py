"""Traces as bytes (OTLP/JSON, the CLI's own file lines, OTLP protobuf with the ``otel`` extra),
and sent to a collector over OTLP/HTTP with urllib alone: batches of whole traces, gzip, retried
as the OTLP specification says, never following a redirect (docs/otel.md).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import ipaddress
import math
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import IO, Any

import orjson

import copilot_logs
from copilot_logs.commands.otel.spans import CLIENT, INTERNAL, SERVICE, Span, Trace, Value
from copilot_logs.errors import CopilotLogsError, ExitCode, SelectionError

SCOPE = "copilot-logs"
CLI_SCOPE = "github.copilot"
"""The scope the CLI names its own spans with: ``--style copilot`` uses it too."""
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
JS_KINDS = {INTERNAL: 0, CLIENT: 2}
"""OTLP span kinds -> the JavaScript SDK's numbers, which the CLI's file holds."""


def resource(trace: Trace) -> dict[str, Any]:
    attributes: list[tuple[str, Value]] = [("service.name", SERVICE)]
    if trace.copilot_version:
        attributes.append(("service.version", trace.copilot_version))
    return {"attributes": _attributes(attributes)}


def traces_data(traces: Sequence[Trace], ids: Callable[[bytes], str] = bytes.hex) -> dict[str, Any]:
    """One OTLP ``TracesData`` (the same message as ``ExportTraceServiceRequest``) holding the
    spans of ``traces``: a resource per session, in the order given. ``ids`` writes an id: hex
    as OTLP/JSON does (protobuf's own JSON mapping reads base64)."""
    groups: dict[tuple[str, str | None], list[Trace]] = {}
    for trace in traces:
        groups.setdefault((trace.session_id, trace.copilot_version), []).append(trace)
    version = copilot_logs.__version__
    return {
        "resourceSpans": [
            {
                "resource": resource(group[0]),
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE, "version": version},
                        "spans": [_span(span, ids) for trace in group for span in trace.spans],
                    }
                ],
                "schemaUrl": SCHEMA_URL,
            }
            for group in groups.values()
        ]
    }


def otlp_line(trace: Trace) -> bytes:
    """One trace as a line of the OTLP File Exporter's format (newline included)."""
    return orjson.dumps(traces_data([trace])) + b"\n"


def digest(trace: Trace) -> str:
    """What the ledger keeps of a trace sent: a hash of its resource and spans (not of the
    copilot-logs version that wrote them), so a trace that changed is sent again."""
    data = orjson.dumps([resource(trace), [_span(span) for span in trace.spans]])
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def copilot_lines(trace: Trace) -> bytes:
    """One trace in the CLI's own file shape: a line per span, each span written after its
    children as the CLI writes it when they end."""
    version = trace.copilot_version or copilot_logs.__version__
    resource = {"attributes": {"service.name": SERVICE, "service.version": version}}
    ordered = sorted(trace.spans, key=lambda s: (s.end_ns, -_depth(s, trace.spans), s.span_id))
    return b"".join(
        orjson.dumps(
            {
                "type": "span",
                "traceId": span.trace_id.hex(),
                "spanId": span.span_id.hex(),
                **({"parentSpanId": span.parent_id.hex()} if span.parent_id else {}),
                "name": text(span.name),
                "kind": JS_KINDS[span.kind],
                "startTime": _ns_pair(span.start_ns),
                "endTime": _ns_pair(span.end_ns),
                "attributes": _plain(span.attributes),
                "status": _status(span) or {"code": span.status},
                "events": [
                    {
                        "name": event.name,
                        "attributes": _plain(event.attributes),
                        "time": _ns_pair(event.time_ns),
                        "droppedAttributesCount": 0,
                    }
                    for event in span.events
                ],
                "resource": {**resource, "schemaUrl": SCHEMA_URL},
                "instrumentationScope": {"name": CLI_SCOPE, "version": version},
            }
        )
        + b"\n"
        for span in ordered
    )


def protobuf(traces: Sequence[Trace]) -> bytes:
    """The body of an OTLP/HTTP protobuf request carrying ``traces`` (needs the ``otel`` extra:
    raises ImportError without opentelemetry-proto)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    data = traces_data(traces, lambda ident: base64.b64encode(ident).decode())
    message = json_format.ParseDict(data, ExportTraceServiceRequest())
    return bytes(message.SerializeToString(deterministic=True))


def _span(span: Span, ids: Callable[[bytes], str] = bytes.hex) -> dict[str, Any]:
    events = [
        {"timeUnixNano": str(e.time_ns), "name": e.name, "attributes": _attributes(e.attributes)}
        for e in span.events
    ]
    return {
        "traceId": ids(span.trace_id),
        "spanId": ids(span.span_id),
        **({"parentSpanId": ids(span.parent_id)} if span.parent_id else {}),
        "name": text(span.name),
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": _attributes(span.attributes),
        **({"events": events} if events else {}),
        "status": _status(span),
    }


def _status(span: Span) -> dict[str, Any]:
    code = {"code": span.status} if span.status else {}
    return {**code, "message": text(span.message)} if span.message else code


def _attributes(pairs: Iterable[tuple[str, Value]]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in pairs]


def _value(value: Value) -> dict[str, Any]:
    """An ``AnyValue``: ints as decimal strings (int64), floats as JSON numbers."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value} if math.isfinite(value) else {"stringValue": str(value)}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    return {"stringValue": text(value)}


def text(value: str) -> str:
    """A text from a log as JSON can carry it: a lone surrogate (which no UTF-8 holds) as
    U+FFFD."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def _plain(pairs: Iterable[tuple[str, Value]]) -> dict[str, Value]:
    """Attributes as the CLI's file holds them: one plain object."""
    return {
        key: text(value)
        if isinstance(value, str)
        else [text(item) for item in value]
        if isinstance(value, list)
        else value
        for key, value in pairs
    }


def _ns_pair(ns: int) -> list[int]:
    return [ns // 1_000_000_000, ns % 1_000_000_000]


def _depth(span: Span, spans: Sequence[Span]) -> int:
    parents = {s.span_id: s.parent_id for s in spans}
    depth, at, seen = 0, span.parent_id, set()
    while at is not None and at in parents and at not in seen:
        seen.add(at)
        depth += 1
        at = parents[at]
    return depth


TRACES_PATH = "/v1/traces"
HEADERS_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
RETRYABLE = frozenset({429, 500, 502, 503, 504})
TIMEOUT_S = 10.0
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 300.0
"""The longest wait a ``Retry-After`` gets: a collector asking for more is given up on."""
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class PushError(CopilotLogsError):
    """The collector refused the spans, or could not be reached: what was sent before stays
    sent (and in the ledger); what was not, is sent by the next push."""

    exit_code = ExitCode.UNREADABLE


@dataclass(frozen=True)
class Destination:
    url: str
    """The traces endpoint itself (``.../v1/traces``): also the ledger's key."""
    headers: Mapping[str, str] = field(default_factory=dict)
    protobuf: bool = False
    gzip: bool = True
    retries: int = 5
    timeout: float = TIMEOUT_S


def traces_url(endpoint: str, *, insecure: bool = False) -> str:
    """The traces endpoint of ``--endpoint URL``: ``URL/v1/traces`` (URL itself when it ends so).
    A usage error for anything but an http(s) URL with a host, and for ``http://`` to another
    machine unless ``insecure``: spans, and the headers that may carry a token, would cross
    the network in clear text."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SelectionError(
            f"{endpoint!r} is not an http:// or https:// URL of a collector "
            "(a collector on this machine listens on localhost port 4318)"
        )
    if parts.username or parts.password:
        raise SelectionError(
            "the endpoint URL holds credentials: give them as a header instead "
            "(--header 'Authorization=Bearer ...' or OTEL_EXPORTER_OTLP_HEADERS)"
        )
    if parts.scheme == "http" and not insecure and not is_loopback(parts.hostname):
        raise SelectionError(
            f"http:// to {parts.hostname} would send the spans in clear text: use https, "
            "or --insecure for a collector you trust on that network"
        )
    path = parts.path.rstrip("/")
    if not path.endswith(TRACES_PATH):
        path += TRACES_PATH
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def headers(given: Sequence[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The request's headers: ``OTEL_EXPORTER_OTLP_HEADERS`` (then ``..._TRACES_HEADERS``), as
    the OTLP exporters read them (``key=value`` pairs, comma-separated, percent-encoded), then
    each ``--header KEY=VALUE`` over them. A usage error names a pair that has no ``=``."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for variable in HEADERS_VARIABLES:
        for pair in environ.get(variable, "").split(","):
            if pair.strip():
                key, value = _pair(pair, variable)
                found[urllib.parse.unquote(key)] = urllib.parse.unquote(value)
    for pair in given:
        key, value = _pair(pair, "--header")
        found[key] = value
    return found


def _pair(text: str, where: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SelectionError(f"{where}: {text.split('=')[0][:40]!r}... is not KEY=VALUE")
    if any(ch in key + value for ch in "\r\n"):
        raise SelectionError(f"{where}: a header may not hold a line break")
    return key.strip(), value.strip()


def batches(traces: Sequence[Trace], max_spans: int) -> Iterator[list[Trace]]:
    """Whole traces, in order, in batches of at most ``max_spans`` spans (a bigger trace goes
    alone: a trace is never split, so the ledger can say it was sent)."""
    batch: list[Trace] = []
    size = 0
    for trace in traces:
        if batch and size + len(trace.spans) > max_spans:
            yield batch
            batch, size = [], 0
        batch.append(trace)
        size += len(trace.spans)
    if batch:
        yield batch


@dataclass(frozen=True)
class Answer:
    """What the collector said to a request that it accepted."""

    status: int
    rejected: int


Sleep = Callable[[float], None]


def send(
    batch: Sequence[Trace],
    destination: Destination,
    *,
    sleep: Sleep = time.sleep,
    on_retry: Callable[[str], None] | None = None,
) -> Answer:
    """POST one batch; retried on 429 and 5xx and on a failed connection, up to
    ``destination.retries`` times. Raises :class:`PushError` when the collector refuses it
    (another status) or the retries run out."""
    body = protobuf(batch) if destination.protobuf else orjson.dumps(traces_data(batch))
    request_headers = {
        **destination.headers,
        "Content-Type": f"application/{'x-protobuf' if destination.protobuf else 'json'}",
        "User-Agent": f"copilot-logs/{copilot_logs.__version__}",
    }
    if destination.gzip:
        body = gzip.compress(body, mtime=0)
        request_headers["Content-Encoding"] = "gzip"
    attempt = 0
    while True:
        request = urllib.request.Request(
            destination.url, data=body, headers=request_headers, method="POST"
        )
        try:
            with _OPENER.open(request, timeout=destination.timeout) as response:
                return Answer(response.status, _rejected(response, destination.protobuf))
        except urllib.error.HTTPError as error:
            with error:  # its connection, closed
                reason = _said(error)
            if error.code not in RETRYABLE or attempt >= destination.retries:
                raise PushError(
                    f"the collector at {destination.url} answered {error.code} "
                    f"{error.reason}{reason}"
                    + (f" after {attempt} retries" if attempt else "")
                    + _advice(error.code)
                ) from None
            wait = _retry_after(error.headers.get("Retry-After"), attempt)
            problem = f"{error.code} {error.reason}"
        except (urllib.error.URLError, OSError) as error:
            cause = getattr(error, "reason", error)
            if attempt >= destination.retries:
                raise PushError(
                    f"cannot reach the collector at {destination.url} ({cause}) after "
                    f"{attempt} retries; check that it runs and listens there"
                ) from None
            wait = _backoff(attempt)
            problem = str(cause)
        if wait is None:
            raise PushError(
                f"the collector at {destination.url} asked to wait more than "
                f"{MAX_RETRY_AFTER_S:.0f} s (Retry-After); push again later"
            )
        attempt += 1
        if on_retry is not None:
            on_retry(f"{problem}: retry {attempt} of {destination.retries} in {wait:.1f} s")
        sleep(wait)


def _backoff(attempt: int) -> float:
    """1, 2, 4 ... seconds (at most :data:`MAX_BACKOFF_S`), each with up to 20 % jitter."""
    base = min(MAX_BACKOFF_S, 2.0**attempt)
    return base * (1 + random.random() / 5)


def _retry_after(value: str | None, attempt: int) -> float | None:
    """The wait a ``Retry-After`` asks for (seconds, or an HTTP date), else the backoff; None
    when it asks for more than :data:`MAX_RETRY_AFTER_S`."""
    if value is None or not value.strip():
        return _backoff(attempt)
    wait: float
    try:
        wait = float(value.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return _backoff(attempt)
        wait = when.timestamp() - time.time()
    if wait != wait or wait > MAX_RETRY_AFTER_S:  # NaN, or too long
        return None
    return max(0.0, wait)


def _said(error: urllib.error.HTTPError) -> str:
    """The start of what the collector said, on one line."""
    try:
        text = error.read(300).decode("utf-8", "replace")
    except OSError:
        return ""
    text = " ".join(text.split())
    return f": {text[:200]}" if text else ""


_ADVICE = {
    401: "; check the credentials (--header, OTEL_EXPORTER_OTLP_HEADERS)",
    404: "; check the endpoint (its OTLP/HTTP port, usually 4318, and path)",
    415: "; try the other --protocol",
    300: "; a redirect is not followed (it would carry the headers elsewhere): give the URL "
    "it points to",
}


def _advice(code: int) -> str:
    return _ADVICE.get(300 if 300 <= code < 400 else 401 if code == 403 else code, "")


def _rejected(response: IO[bytes], protobuf: bool) -> int:
    """``partialSuccess.rejectedSpans`` of the collector's answer (0 when it says none, or
    says it in a way that cannot be read)."""
    data = response.read(1 << 20)
    if not data:
        return 0
    if protobuf:
        return _rejected_in_protobuf(data)
    try:
        answer: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        return 0
    partial = answer.get("partialSuccess") if isinstance(answer, dict) else None
    rejected = partial.get("rejectedSpans") if isinstance(partial, dict) else None
    try:
        return max(0, int(rejected or 0))
    except (TypeError, ValueError):
        return 0


def _rejected_in_protobuf(data: bytes) -> int:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    answer = ExportTraceServiceResponse()
    try:
        answer.ParseFromString(data)
    except DecodeError:
        return 0
    return max(0, int(answer.partial_success.rejected_spans))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: it would carry the headers (credentials) somewhere else, or
    turn the POST into a GET that sends nothing."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())
