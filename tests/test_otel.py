"""``copilot-logs otel``: traces written the same every time, as OTLP a strict parser takes, with
nothing of the conversation unless asked; pushed to a collector (a small one on loopback
here: tests/otlp.py) once, retried on 503 with its Retry-After, stopped by a 400 with the ledger
as it was. The traces of the real CLI's recordings are checked against the server's truth and
the CLI's own spans in tests/test_otel_conformance.py; a real collector (rotel) in
tests/test_otel_collector.py (``make test-otel``).
"""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from copilot_logs.commands import otel as core
from copilot_logs.commands.otel.push import Destination, PushError, headers, send, traces_url
from copilot_logs.errors import SelectionError
from copilot_logs.ingest.reader import read_bytes
from copilot_logs.store import ledger
from synth import SessionBuilder, bash

from .conftest import SAMPLES
from .otlp import Sink, attributes, parse_json, spans
from .recorded import COMMITTED

ONE_TOOL = COMMITTED / "1.0.102" / "one-tool"
RESUME = COMMITTED / "1.0.102" / "resume"


@pytest.fixture(autouse=True)
def no_otlp_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        monkeypatch.delenv(name, raising=False)


def otel(*args: str) -> Result:
    return CliRunner().invoke(main, ["otel", "--quiet", *args])


def lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line]


def secret_session(tmp_path: Path, *, open_end: bool = False) -> Path:
    """A small log whose prompt, tool arguments and output are words found nowhere else."""
    b = SessionBuilder(seed=3)
    b.user_message("PROMPT-WORD-7341 fix it")
    b.turn("REPLY-WORD-2210", [bash("echo ARGUMENT-WORD-5523", "OUTPUT-WORD-9901")])
    b.turn("Done.")
    b.user_message("And the docs.")
    b.turn("Looking.", [bash("ls", "README.md")], end=not open_end)
    if not open_end:
        b.shutdown()
    return b.write(tmp_path / "secret.jsonl")


# --- the same logs, the same bytes; every line is OTLP ------------------------------------------


def test_the_same_logs_give_the_same_bytes(tmp_path: Path) -> None:
    first, second, uncached = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert otel(*every_log(), "--out", str(first)).exit_code == 0
    assert otel(*every_log(), "--out", str(second)).exit_code == 0  # from the store
    assert otel(*every_log(), "--no-cache", "-o", str(uncached)).exit_code == 0
    digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second, uncached)}
    assert len(digests) == 1
    assert len(lines(first)) > 100


def every_log() -> list[str]:
    logs = sorted(str(p) for p in COMMITTED.glob("*/*/events.jsonl"))
    return [str(SAMPLES), *logs]


SIXTY_FOUR_BITS = ("intValue", "startTimeUnixNano", "endTimeUnixNano", "timeUnixNano")
"""OTLP/JSON writes 64-bit integers as decimal strings (a protobuf parser also takes numbers,
which JavaScript readers would round)."""


def assert_64_bit_integers_are_strings(value: Any, key: str = "") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            assert_64_bit_integers_are_strings(v, k)
    elif isinstance(value, list):
        for item in value:
            assert_64_bit_integers_are_strings(item)
    elif key in SIXTY_FOUR_BITS:
        assert isinstance(value, str) and value.isdigit(), (key, value)


def test_every_line_parses_as_an_otlp_request_with_unknown_fields_refused(tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    done = otel(*every_log(), "--include-open", "--capture-content", "--out", str(out))
    assert done.exit_code == 0, done.output
    seen_traces: set[bytes] = set()
    for line in lines(out):
        assert_64_bit_integers_are_strings(orjson.loads(line))
        request = parse_json(line)
        found = list(spans(request))
        (trace,) = {span.trace_id for span in found}  # one trace a line
        assert trace not in seen_traces
        seen_traces.add(trace)
        ids = {span.span_id for span in found}
        assert len(ids) == len(found)
        roots = [span for span in found if not span.parent_span_id]
        assert len(roots) == 1 and roots[0].name == "invoke_agent"
        for span in found:
            assert not span.parent_span_id or span.parent_span_id in ids
            assert 0 < span.start_time_unix_nano <= span.end_time_unix_nano
            assert span.kind in (1, 3)  # INTERNAL, CLIENT
        for resource in request.resource_spans:
            names = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert names["service.name"] == "github-copilot"
    assert len(seen_traces) > 100


def test_the_copilot_style_is_the_clis_line_shape(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "otlp.jsonl", tmp_path / "copilot.jsonl"
    assert otel(str(ONE_TOOL / "events.jsonl"), "--out", str(ours)).exit_code == 0
    assert (
        otel(str(ONE_TOOL / "events.jsonl"), "--style", "copilot", "-o", str(theirs)).exit_code == 0
    )
    cli_keys = {
        tuple(sorted(orjson.loads(line)))
        for line in lines(ONE_TOOL / "otel.jsonl")
        if orjson.loads(line)["type"] == "span"
    }
    written = [orjson.loads(line) for line in lines(theirs)]
    assert {tuple(sorted(span)) for span in written} <= cli_keys
    assert len(written) == sum(1 for line in lines(ours) for _ in spans(parse_json(line)))
    assert {span["kind"] for span in written} == {0, 2}  # the JavaScript SDK's INTERNAL, CLIENT
    assert all(len(span["startTime"]) == 2 for span in written)


def test_skip_existing_leaves_out_the_sessions_a_cli_file_holds(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    both = [str(ONE_TOOL / "events.jsonl"), str(RESUME / "events.jsonl")]
    done = otel(*both, "--skip-existing", str(ONE_TOOL / "otel.jsonl"), "--out", str(out))
    assert done.exit_code == 0, done.output
    sessions = {
        attributes(span)["gen_ai.conversation.id"]
        for line in lines(out)
        for span in spans(parse_json(line))
    }
    resume = orjson.loads((RESUME / "truth.json").read_bytes())["session_id"]
    assert sessions == {resume}
    assert "1 session left out: already in --skip-existing" in done.stderr


# --- what leaves the log ----------------------------------------------------------------------


WORDS = ("PROMPT-WORD-7341", "REPLY-WORD-2210", "ARGUMENT-WORD-5523", "OUTPUT-WORD-9901")


def test_no_text_of_the_conversation_without_capture_content(tmp_path: Path) -> None:
    log = secret_session(tmp_path)
    plain, captured = tmp_path / "plain.jsonl", tmp_path / "captured.jsonl"
    assert otel(str(log), "--out", str(plain)).exit_code == 0
    assert otel(str(log), "--capture-content", "--out", str(captured)).exit_code == 0
    text = plain.read_text()
    assert [word for word in WORDS if word in text] == []
    assert [word for word in WORDS if word in captured.read_text()] == list(WORDS)


def test_open_interactions_wait_unless_asked(tmp_path: Path) -> None:
    log = secret_session(tmp_path, open_end=True)
    waiting, included = tmp_path / "waiting.jsonl", tmp_path / "included.jsonl"
    done = otel(str(log), "--out", str(waiting))
    assert done.exit_code == 0
    assert "1 open interaction left out (--include-open writes it)" in done.stderr
    assert otel(str(log), "--include-open", "--out", str(included)).exit_code == 0
    assert (len(lines(waiting)), len(lines(included))) == (1, 2)  # two prompts, by hand


def test_a_log_that_grew_keeps_every_earlier_span(tmp_path: Path) -> None:
    """The resume recording cut just after its first run's shutdown, then whole: every span
    of the first part is in the whole, the same."""
    whole = (RESUME / "events.jsonl").read_bytes().split(b"\n")
    cut = next(i for i, line in enumerate(whole) if b'"session.shutdown"' in line) + 1
    part = tmp_path / "part.jsonl"
    part.write_bytes(b"\n".join(whole[:cut]) + b"\n")
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    assert otel(str(part), "--out", str(before)).exit_code == 0
    assert otel(str(RESUME / "events.jsonl"), "--out", str(after)).exit_code == 0
    first = [span for line in lines(before) for span in spans(parse_json(line))]
    later = [span for line in lines(after) for span in spans(parse_json(line))]
    assert len(first) == 4 and len(later) == 8  # one interaction, then two: 4 spans each
    assert all(span in later for span in first)


# --- pushing ------------------------------------------------------------------------------------


def test_a_second_push_sends_nothing_and_a_grown_log_only_what_is_new(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    whole = (RESUME / "events.jsonl").read_bytes().split(b"\n")
    cut = next(i for i, line in enumerate(whole) if b'"session.shutdown"' in line) + 1
    log.write_bytes(b"\n".join(whole[:cut]) + b"\n")
    with Sink() as sink:
        first = otel(str(log), "--endpoint", sink.url)
        again = otel(str(log), "--endpoint", sink.url)
        log.write_bytes(b"\n".join(whole))
        grown = otel(str(log), "--endpoint", sink.url)
        forced = otel(str(log), "--endpoint", sink.url, "--force")
    assert [r.exit_code for r in (first, again, grown, forced)] == [0, 0, 0, 0]
    assert "Sent 1 interaction (4 spans) in 1 request" in first.stderr
    assert "Sent nothing" in again.stderr and "1 interaction unchanged" in again.stderr
    assert "Sent 1 interaction (4 spans)" in grown.stderr
    assert "Sent 2 interactions (8 spans)" in forced.stderr
    sent = [len(list(spans(got.request()))) for got in sink.received]
    assert sent == [4, 4, 8]
    first_ids = {span.span_id for span in spans(sink.received[0].request())}
    assert first_ids.isdisjoint(span.span_id for span in spans(sink.received[1].request()))
    got = sink.received[0]
    assert got.path == "/v1/traces"
    assert got.headers["content-type"] == "application/json"
    assert got.headers["content-encoding"] == "gzip"


def test_a_503_then_a_200_is_retried(tmp_path: Path) -> None:
    with Sink(answers=[(503, {"Retry-After": "0"}, b"busy")]) as sink:
        done = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url)
    assert done.exit_code == 0, done.output
    assert len(sink.received) == 2
    assert sink.received[0].body == sink.received[1].body
    assert "503 Service Unavailable: retry 1 of 5" in done.stderr
    assert "Sent 1 interaction (4 spans) in 1 request" in done.stderr


def test_retry_after_is_honoured_and_backoff_used_without_it() -> None:
    batch = core.batch_traces(read_bytes((ONE_TOOL / "events.jsonl").read_bytes(), "one-tool"))
    waits: list[float] = []
    answers = [(429, {"Retry-After": "7"}, b""), (502, {}, b""), (503, {"Retry-After": "x"}, b"")]
    with Sink(answers=answers) as sink:
        destination = Destination(traces_url(sink.url), retries=3)
        answer = send(batch, destination, sleep=waits.append)
    assert answer.status == 200 and len(sink.received) == 4
    assert waits[0] == 7.0
    assert 2.0 <= waits[1] <= 2.4 and 4.0 <= waits[2] <= 4.8  # 2**attempt, up to 20 % more


def test_a_400_exits_3_and_leaves_the_ledger_as_it_was(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    whole = (RESUME / "events.jsonl").read_bytes().split(b"\n")
    cut = next(i for i, line in enumerate(whole) if b'"session.shutdown"' in line) + 1
    log.write_bytes(b"\n".join(whole[:cut]) + b"\n")
    with Sink() as sink:
        assert otel(str(log), "--endpoint", sink.url).exit_code == 0
        path = Path(ledger.path_of(traces_url(sink.url)))
        kept = path.read_bytes()
        log.write_bytes(b"\n".join(whole))
        sink.answers.append((400, {}, b"bad timestamp"))
        refused = otel(str(log), "--endpoint", sink.url)
        assert path.read_bytes() == kept
        again = otel(str(log), "--endpoint", sink.url)
    assert refused.exit_code == 3
    assert refused.stderr.strip().splitlines()[-1] == (
        f"Error: the collector at {sink.url}/v1/traces answered 400 Bad Request: bad timestamp"
    )
    assert len(sink.received) == 3  # the refused batch was not retried
    assert "Sent 1 interaction (4 spans)" in again.stderr  # the new one, sent now


def test_a_collector_that_cannot_be_reached_is_an_error_after_the_retries() -> None:
    batch = core.batch_traces(read_bytes((ONE_TOOL / "events.jsonl").read_bytes(), "one-tool"))
    with Sink() as sink:
        url = sink.url
    waits: list[float] = []
    with pytest.raises(PushError, match=r"cannot reach the collector .* after 2 retries"):
        send(batch, Destination(traces_url(url), retries=2), sleep=waits.append)
    assert len(waits) == 2


def test_rejected_spans_are_not_in_the_ledger(tmp_path: Path) -> None:
    rejected = orjson.dumps({"partialSuccess": {"rejectedSpans": "2", "errorMessage": "no"}})
    with Sink(answers=[(200, {}, rejected)]) as sink:
        first = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url)
        second = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url)
    assert "the collector rejected 2 spans" in first.stderr
    assert "Sent 1 interaction" in second.stderr
    assert len(sink.received) == 2


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_is_not_followed(status: int) -> None:
    """urllib would follow a 302 with a GET that carries the headers and drops the spans."""
    with Sink() as other, Sink() as sink:
        sink.answers.append((status, {"Location": other.url + "/v1/traces"}, b""))
        done = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url)
    assert done.exit_code == 3
    assert f"answered {status}" in done.stderr and "redirect is not followed" in done.stderr
    assert other.received == []


def test_headers_from_the_environment_and_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20abc,x-team=infra")
    with Sink() as sink:
        done = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url, "--header", "x-team=ml")
    assert done.exit_code == 0, done.output
    sent = sink.received[0].headers
    assert (sent["authorization"], sent["x-team"]) == ("Bearer abc", "ml")


def test_header_pairs_are_read_as_the_otlp_exporters_read_them() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_HEADERS": " a=1 , b=x%3Dy ",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=2",
    }
    assert headers(("c=3",), environ) == {"a": "2", "b": "x=y", "c": "3"}
    with pytest.raises(SelectionError, match="is not KEY=VALUE"):
        headers(("novalue",), {})


@pytest.mark.parametrize(
    ("given", "insecure", "expected"),
    [
        ("http://localhost:4318", False, "http://localhost:4318/v1/traces"),
        ("http://127.0.0.1:4318/", False, "http://127.0.0.1:4318/v1/traces"),
        ("http://[::1]:4318/v1/traces", False, "http://[::1]:4318/v1/traces"),
        ("https://otel.example.com/otlp", False, "https://otel.example.com/otlp/v1/traces"),
        ("http://collector.internal:4318", True, "http://collector.internal:4318/v1/traces"),
        ("http://collector.internal:4318", False, "clear text"),
        ("http://10.0.0.5:4318", False, "clear text"),
        ("ftp://localhost", False, "not an http"),
        ("https://user:secret@otel.example.com", False, "holds credentials"),
    ],
)
def test_the_endpoint_url(given: str, insecure: bool, expected: str) -> None:
    if expected.startswith("http"):
        assert traces_url(given, insecure=insecure) == expected
    else:
        with pytest.raises(SelectionError, match=expected):
            traces_url(given, insecure=insecure)


def test_http_to_another_machine_is_a_usage_error() -> None:
    done = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", "http://collector.internal:4318")
    assert done.exit_code == 2
    assert "clear text" in done.stderr and "--insecure" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give one of --out FILE|- and --endpoint URL"),
        (("--out", "-", "--endpoint", "http://localhost:1"), "give one of"),
        (("--endpoint", "http://localhost:1", "--style", "copilot"), "--style copilot is a file"),
    ],
)
def test_usage_errors(args: tuple[str, ...], message: str) -> None:
    done = otel(str(ONE_TOOL / "events.jsonl"), *args)
    assert done.exit_code == 2 and message in done.stderr


def test_protobuf_carries_the_same_spans_as_json(tmp_path: Path) -> None:
    log = str(COMMITTED / "1.0.102" / "two-subagents" / "events.jsonl")
    with Sink() as sink:
        assert otel(log, "--endpoint", sink.url, "--protocol", "http/protobuf").exit_code == 0
        assert otel(log, "--endpoint", sink.url, "--force").exit_code == 0
    as_proto, as_json = (list(spans(got.request())) for got in sink.received)
    assert sink.received[0].headers["content-type"] == "application/x-protobuf"
    assert as_proto == as_json and len(as_json) == 13  # the CLI's own file has 13 spans


def test_batches_hold_whole_traces_of_at_most_n_spans(tmp_path: Path) -> None:
    log = str(COMMITTED / "1.0.102" / "autopilot-loop" / "events.jsonl")  # 4 traces of 4 spans
    with Sink() as sink:
        done = otel(log, "--endpoint", sink.url, "--batch-spans", "9", "--compression", "none")
    assert done.exit_code == 0 and "in 2 requests" in done.stderr
    assert [len(list(spans(got.request()))) for got in sink.received] == [8, 8]
    assert "content-encoding" not in sink.received[0].headers


# --- the ledger in the store --------------------------------------------------------------------


def test_a_ledger_that_is_not_the_users_own_is_not_read(tmp_path: Path) -> None:
    with Sink() as sink:
        assert otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url).exit_code == 0
        path = Path(ledger.path_of(traces_url(sink.url)))
        path.chmod(0o666)  # writable by others: anyone could have written it
        done = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url)
    assert "Sent 1 interaction" in done.stderr
    assert "is writable by others" in done.stderr
    assert len(sink.received) == 2


def test_cache_clear_removes_the_ledgers_and_the_tidying_keeps_them(tmp_path: Path) -> None:
    from copilot_logs.store import prune

    with Sink() as sink:
        assert otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url).exit_code == 0
        path = Path(ledger.path_of(traces_url(sink.url)))
        prune(limit=0)  # over any size: every entry goes, the ledger stays
        assert path.is_file()
        assert not list(path.parent.glob("*.entry"))
        assert CliRunner().invoke(main, ["cache", "clear"]).exit_code == 0
        assert not path.exists()
        done = otel(str(ONE_TOOL / "events.jsonl"), "--endpoint", sink.url)
    assert "Sent 1 interaction" in done.stderr


def test_a_damaged_ledger_is_taken_as_empty(tmp_path: Path) -> None:
    with Sink() as sink:
        url = traces_url(sink.url)
        ledger.record(url, {"ab" * 16: "cd" * 16})
        path = Path(ledger.path_of(url))
        data = bytearray(path.read_bytes())
        data[-1] ^= 0x01  # the last digest's last digit: "d" -> "e", still a ledger's shape
        path.write_bytes(bytes(data))
        assert ledger.read(url) == {}
        ledger.record(url, {"ef" * 16: "01" * 16})
        assert ledger.read(url) == {"ef" * 16: "01" * 16}


# --- standard output ----------------------------------------------------------------------------


def test_out_dash_writes_the_lines_on_standard_output() -> None:
    done = otel(str(ONE_TOOL / "events.jsonl"), "--out", "-")
    assert done.exit_code == 0
    (line,) = done.stdout.splitlines()
    assert [span.name for span in spans(parse_json(line.encode()))] == [
        "invoke_agent",
        "chat rig-model",
        "execute_tool bash bash",
        "chat rig-model",
    ]
    assert "Wrote 1 interaction (4 spans) of 1 session to standard output." in done.stderr


def test_a_failed_write_leaves_the_older_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "traces.jsonl"
    out.write_bytes(b"older\n")

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("copilot_logs.render.otel.os.replace", full)
    done = otel(str(ONE_TOOL / "events.jsonl"), "--out", str(out))
    assert done.exit_code == 3
    assert out.read_bytes() == b"older\n"
    assert [p.name for p in tmp_path.iterdir()] == ["traces.jsonl"]  # no temporary file left
    assert done.stderr.strip().splitlines()[-1] == (
        f"Error: cannot write {out} (No space left on device); the file is as it was"
    )
