"""Traces as bytes: OTLP/JSON (the OpenTelemetry Protocol File Exporter's lines, and the body
of an OTLP/HTTP JSON request), the Copilot CLI's own file lines, and OTLP protobuf when the
``otel`` extra (opentelemetry-proto) is installed.

OTLP/JSON is written directly with orjson, as the OTLP specification's JSON mapping says: ids
as lowercase hex, enums as numbers, 64-bit integers (times, ``intValue``) as decimal strings,
field names in lowerCamelCase. The CLI's own file (``COPILOT_OTEL_FILE_EXPORTER_PATH``) is one
span a line in the JavaScript SDK's shape: times as ``[seconds, nanoseconds]``, span kinds as
that SDK numbers them (INTERNAL 0, CLIENT 2), attributes as a plain object.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

import copilot_logs
from copilot_logs.commands.otel.spans import CLIENT, INTERNAL, SERVICE, Event, Span, Trace, Value

SCOPE = "copilot-logs"
"""The instrumentation scope of the OTLP style: copilot-logs made these spans from a log."""
CLI_SCOPE = "github.copilot"
"""The scope the CLI names its own spans with (``COPILOT_OTEL_SOURCE_NAME``'s default), used by
``--style copilot`` so that tools reading the CLI's files take these as its own."""
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
"""The semantic conventions the CLI 1.0.102 names in its resource."""
JS_KINDS = {INTERNAL: 0, CLIENT: 2}
"""OTLP span kinds -> the JavaScript SDK's numbers, which the CLI's file holds."""
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def resource(trace: Trace) -> dict[str, Any]:
    attributes: list[tuple[str, Value]] = [("service.name", SERVICE)]
    if trace.copilot_version:
        attributes.append(("service.version", trace.copilot_version))
    return {"attributes": _attributes(attributes)}


def traces_data(traces: Sequence[Trace]) -> dict[str, Any]:
    """One OTLP ``TracesData`` (the same message as ``ExportTraceServiceRequest``) holding the
    spans of ``traces``: a resource per session, in the order given."""
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
                        "spans": [_span(span) for trace in group for span in trace.spans],
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


def otlp_json(traces: Sequence[Trace]) -> bytes:
    """The body of an OTLP/HTTP JSON request carrying ``traces``."""
    return orjson.dumps(traces_data(traces))


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
                "startTime": _pair(span.start_ns),
                "endTime": _pair(span.end_ns),
                "attributes": _plain(span.attributes),
                "status": _status(span) or {"code": span.status},
                "events": [
                    {
                        "name": event.name,
                        "attributes": _plain(event.attributes),
                        "time": _pair(event.time_ns),
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

    message = json_format.ParseDict(as_proto_json(traces_data(traces)), ExportTraceServiceRequest())
    return bytes(message.SerializeToString(deterministic=True))


def as_proto_json(data: dict[str, Any]) -> dict[str, Any]:
    """OTLP/JSON -> the protobuf JSON mapping, which differs only in the ids: base64, not
    hex (OTLP's JSON encoding writes them as hex, protobuf's own mapping as base64)."""

    def convert(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: convert(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(item) for item in value]
        if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
            return base64.b64encode(bytes.fromhex(value)).decode()
        return value

    converted = convert(data)
    assert isinstance(converted, dict)
    return converted


def _span(span: Span) -> dict[str, Any]:
    found: dict[str, Any] = {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
    }
    if span.parent_id:
        found["parentSpanId"] = span.parent_id.hex()
    found.update(
        name=text(span.name),
        kind=span.kind,
        startTimeUnixNano=str(span.start_ns),
        endTimeUnixNano=str(span.end_ns),
        attributes=_attributes(span.attributes),
    )
    if span.events:
        found["events"] = [_event(event) for event in span.events]
    found["status"] = _status(span)
    return found


def _status(span: Span) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if span.status:
        status["code"] = span.status
    if span.message:
        status["message"] = text(span.message)
    return status


def _event(event: Event) -> dict[str, Any]:
    return {
        "timeUnixNano": str(event.time_ns),
        "name": event.name,
        "attributes": _attributes(event.attributes),
    }


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
    return {key: _plain_value(value) for key, value in pairs}


def _plain_value(value: Value) -> Value:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [text(item) for item in value]
    return value


def _pair(ns: int) -> list[int]:
    return [ns // 1_000_000_000, ns % 1_000_000_000]


def _depth(span: Span, spans: Sequence[Span]) -> int:
    parents = {s.span_id: s.parent_id for s in spans}
    depth, at, seen = 0, span.parent_id, set()
    while at is not None and at in parents and at not in seen:
        seen.add(at)
        depth += 1
        at = parents[at]
    return depth
