"""``copilot-logs otel``: OpenTelemetry traces of the sessions, to a file or a collector."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from copilot_logs.cli.options import Picked, exit_code, load, read_each, reading_command


@reading_command(engine=False)
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE|-",
    help="Write the traces to FILE (- for standard output), one JSON line per interaction.",
)
@click.option(
    "--endpoint",
    metavar="URL",
    help="Send the traces to the OTLP/HTTP collector at URL (URL/v1/traces), only those not "
    "sent there before as they are now.",
)
@click.option(
    "--style",
    type=click.Choice(["otlp", "copilot"]),
    default="otlp",
    help="With --out: OTLP/JSON (TracesData lines, the OTLP file exporter's format), or the "
    "Copilot CLI's own file format (a span a line).",
)
@click.option(
    "--skip-existing",
    "existing",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    metavar="FILE",
    help="Leave out the sessions this OpenTelemetry file already holds (the CLI's own, "
    "COPILOT_OTEL_FILE_EXPORTER_PATH, or an earlier --out). Repeatable.",
)
@click.option(
    "--capture-content",
    is_flag=True,
    help="Add the previews of prompts, replies, tool arguments and results (off: no text "
    "from the conversation leaves the log).",
)
@click.option(
    "--include-open", is_flag=True, help="Also the interactions that may still be going on."
)
@click.option("--force", is_flag=True, help="With --endpoint: send again what was sent before.")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="With --endpoint: a header of each request (over OTEL_EXPORTER_OTLP_HEADERS). Repeatable.",
)
@click.option(
    "--protocol",
    type=click.Choice(["http/json", "http/protobuf"]),
    default="http/json",
    help="With --endpoint: the OTLP/HTTP encoding (protobuf: pip install 'copilot-logs[otel]').",
)
@click.option(
    "--compression",
    type=click.Choice(["gzip", "none"]),
    default="gzip",
    help="With --endpoint: the requests' compression.",
)
@click.option(
    "--batch-spans",
    type=click.IntRange(min=1),
    default=512,
    metavar="N",
    help="With --endpoint: spans per request at most (a trace is never split).",
)
@click.option(
    "--retries",
    type=click.IntRange(min=0, max=20),
    default=5,
    metavar="N",
    help="With --endpoint: retries of a request answered 429 or 5xx, or not answered.",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="With --endpoint: allow http:// to another machine (spans and headers in clear text).",
)
def otel(
    ctx: click.Context,
    picked: Picked,
    out: str | None,
    endpoint: str | None,
    style: str,
    existing: tuple[Path, ...],
    capture_content: bool,
    include_open: bool,
    force: bool,
    headers: tuple[str, ...],
    protocol: str,
    compression: str,
    batch_spans: int,
    retries: int,
    insecure: bool,
) -> None:
    """Rebuild OpenTelemetry traces from session logs: to a file, or to a collector.

    One trace per interaction (a prompt or an autopilot nudge): an invoke_agent root, a chat
    span per LLM call with the figures of its usage record (CLI 1.0.102 on), an execute_tool
    span per tool call, a sub-agent's invoke_agent under its task tool, permission spans, as
    the CLI's own exporter makes them. Ids are hashes of the session and event ids: the same
    log gives the same bytes. Pushing keeps a ledger in the store, so the next push sends
    only new or changed interactions.

    \b
    The mapping, the limits and a collector to try: docs/otel.md of the copilot-logs source.

    \b
    Examples:
      copilot-logs otel --out traces.jsonl
      copilot-logs otel --latest 1 --out - | jq '.resourceSpans[].scopeSpans[].spans[].name'
      copilot-logs otel --endpoint "$OTEL_EXPORTER_OTLP_ENDPOINT"
      copilot-logs otel --endpoint "$COLLECTOR" --header "Authorization=Bearer $TOKEN"
      copilot-logs otel --style copilot --skip-existing ~/.copilot/otel.jsonl --out old.jsonl
    """
    from copilot_logs.commands.otel.push import Destination, traces_url
    from copilot_logs.commands.otel.push import headers as read_headers

    if (out is None) == (endpoint is None):
        raise click.UsageError("give one of --out FILE|- and --endpoint URL")
    if endpoint is not None and style != "otlp":
        raise click.UsageError("--style copilot is a file format: use it with --out")
    destination = None
    if endpoint is not None:
        try:
            if protocol == "http/protobuf":
                import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401
        except ImportError:
            raise click.UsageError(
                "--protocol http/protobuf needs opentelemetry-proto: pip install "
                "'copilot-logs[otel]' (or use http/json)"
            ) from None
        destination = Destination(
            traces_url(endpoint, insecure=insecure),
            read_headers(headers),
            protobuf=protocol == "http/protobuf",
            gzip=compression == "gzip",
            retries=retries,
        )
    loaded = load(picked)
    from copilot_logs.commands import otel as core
    from copilot_logs.render import otel as render

    skip = core.existing_sessions(existing) if existing else set()
    batches = read_each(loaded, partial(core.batch_traces, capture_content=capture_content))
    plan = core.plan(batches, include_open=include_open, skip=skip)
    if destination is None:
        assert out is not None
        lines = core.push.otlp_line if style == "otlp" else core.push.copilot_lines
        render.write_lines(map(lines, plan.traces), out)
        render.say_written(plan, out)
    else:
        pushed = core.push_traces(
            plan.traces, destination, force=force, max_spans=batch_spans, on_retry=render.say_retry
        )
        render.say_pushed(plan, pushed)
    ctx.exit(exit_code(loaded))
