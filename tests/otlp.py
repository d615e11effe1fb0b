"""OTLP as the tests read it, independently of copilot_logs.commands.otel: a strict parse of a
line (or a request body) into opentelemetry-proto's ``ExportTraceServiceRequest``, and a small
collector on loopback that answers what a test scripts and keeps every request (test helper,
not a test module).
"""

from __future__ import annotations

import base64
import gzip
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ID_HEX = {"traceId": 32, "spanId": 16, "parentSpanId": 16}
"""OTLP/JSON writes ids as lowercase hex (16 and 8 bytes); protobuf's JSON mapping reads them as
base64, so a parse converts them first, checking each."""


def _ids_to_base64(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _ids_to_base64(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_ids_to_base64(item) for item in value]
    if key in ID_HEX:
        assert isinstance(value, str) and len(value) == ID_HEX[key], (key, value)
        assert value == value.lower() and int(value, 16) != 0, (key, value)
        return base64.b64encode(bytes.fromhex(value)).decode()
    return value


def parse_json(data: bytes) -> ExportTraceServiceRequest:
    """One OTLP/JSON ``TracesData`` (a line of ``otel --out``, or a JSON request body) as an
    ``ExportTraceServiceRequest``; an unknown field, a bad id or a bad value raises."""
    converted = _ids_to_base64(orjson.loads(data))
    return json_format.ParseDict(
        converted, ExportTraceServiceRequest(), ignore_unknown_fields=False
    )


def spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            yield from scope.spans


def attributes(span: Span) -> dict[str, Any]:
    """A span's attributes as plain values (ints as ints, arrays as lists)."""
    found: dict[str, Any] = {}
    for pair in span.attributes:
        found[pair.key] = _plain(pair.value)
    return found


def _plain(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_plain(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    """Decompressed."""

    def request(self) -> ExportTraceServiceRequest:
        if self.headers.get("content-type") == "application/x-protobuf":
            message = ExportTraceServiceRequest()
            message.ParseFromString(self.body)
            return message
        return parse_json(self.body)


@dataclass
class Sink:
    """An OTLP/HTTP receiver on loopback: each request answered by the next scripted answer
    (status, headers, body), then 200 with an empty JSON or protobuf response."""

    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)

    def __enter__(self) -> Sink:
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                headers = {k.lower(): v for k, v in self.headers.items()}
                sink.received.append(Received(self.path, headers, body))
                if sink.answers:
                    status, extra, answer = sink.answers.pop(0)
                else:
                    status, extra = 200, {}
                    protobuf = headers.get("content-type") == "application/x-protobuf"
                    answer = ExportTraceServiceResponse().SerializeToString() if protobuf else b"{}"
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST  # a client that followed a redirect as a GET is seen too

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def spans(self) -> list[Span]:
        return [span for got in self.received for span in spans(got.request())]
