"""``otel --endpoint`` through a real OpenTelemetry collector: rotel (the PyPI wheel ``rotel``, a
Rust OTLP collector) receives the pushes on loopback and exports to a small sink of ours
(tests/otlp.py), which decodes every request with opentelemetry-proto. Every span written by
``otel --out`` for the same logs must arrive, once; a second push sends nothing.

Skipped when rotel is not installed: ``make test-otel`` installs it (the ``otel-test`` extra)
and runs these tests.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main

from .conftest import SAMPLES
from .otlp import Sink, parse_json, spans
from .recorded import COMMITTED

rotel = pytest.importorskip(
    "rotel",
    reason="the otel-test extra is not installed (`make test-otel` installs rotel and runs "
    "these tests)",
)

# rotel is a process of its own: these tests are in the `process` tier (docs/development.md).
pytestmark = pytest.mark.process

AGENT = Path(rotel.__file__).with_name("rotel-agent")
LOGS = [str(SAMPLES), *sorted(str(p) for p in COMMITTED.glob("*/*/events.jsonl"))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[tuple[str, Sink]]:
    """rotel on a free loopback port, exporting over OTLP/HTTP to a sink; (its URL, the sink)."""
    with Sink() as sink, (tmp_path / "rotel.log").open("wb") as log:
        port = free_port()
        agent = subprocess.Popen(
            [
                str(AGENT),
                "start",
                "--otlp-http-endpoint",
                f"127.0.0.1:{port}",
                "--otlp-grpc-endpoint",
                f"127.0.0.1:{free_port()}",
                "--exporter",
                "otlp",
                "--otlp-exporter-endpoint",
                sink.url,
                "--otlp-exporter-protocol",
                "http",
                "--pid-file",
                str(tmp_path / "rotel.pid"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not listening(port):
                assert agent.poll() is None, (tmp_path / "rotel.log").read_text()
                assert time.monotonic() < deadline, "rotel did not listen within 30 s"
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}", sink
        finally:
            os.killpg(agent.pid, signal.SIGTERM)
            try:
                agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()


def otel(*args: str) -> Result:
    return CliRunner().invoke(main, ["otel", "--quiet", *args])


def arrived(sink: Sink, count: int) -> set[tuple[bytes, bytes]]:
    """The (trace id, span id) of every span the sink got, once ``count`` arrived (rotel sends
    on in batches of its own, a moment later)."""
    deadline = time.monotonic() + 30
    while True:
        got = [(span.trace_id, span.span_id) for span in sink.spans()]
        if len(got) >= count or time.monotonic() > deadline:
            assert len(got) == len(set(got)), "a span arrived twice"
            return set(got)
        time.sleep(0.1)


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_every_span_arrives_through_rotel_and_a_second_push_sends_nothing(
    collector: tuple[str, Sink], tmp_path: Path, protocol: str
) -> None:
    url, sink = collector
    out = tmp_path / "written.jsonl"
    assert otel(*LOGS, "--include-open", "--out", str(out)).exit_code == 0
    written = {
        (span.trace_id, span.span_id)
        for line in out.read_bytes().splitlines()
        for span in spans(parse_json(line))
    }
    first = otel(*LOGS, "--include-open", "--endpoint", url, "--protocol", protocol)
    assert first.exit_code == 0, first.output
    assert f"({len(written)} spans)" in first.stderr
    assert arrived(sink, len(written)) == written
    requests = len(sink.received)
    second = otel(*LOGS, "--include-open", "--endpoint", url, "--protocol", protocol)
    assert second.exit_code == 0, second.output
    assert "Sent nothing" in second.stderr
    time.sleep(1.0)  # what rotel would have sent on by now
    assert len(sink.received) == requests


def test_rotel_answers_400_to_a_malformed_time(
    collector: tuple[str, Sink],
) -> None:
    """What a collector answers to a bad request, by a real one: the OTLP/JSON body with a
    time that is no number (written by hand) is answered 400."""
    url, _ = collector
    import urllib.error
    import urllib.request

    body = (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",'
        b'"spanId":"eee19b7ec3c1b174","name":"x","kind":1,"startTimeUnixNano":"soon",'
        b'"endTimeUnixNano":"1"}]}]}]}'
    )
    request = urllib.request.Request(
        f"{url}/v1/traces", data=body, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    refused.value.close()
    assert refused.value.code == 400
