"""Which sessions an OpenTelemetry file already holds, for ``otel --skip-existing``: the CLI's
own file (a span a line, attributes as an object) or OTLP/JSON lines (``TracesData``), read
for their ``gen_ai.conversation.id`` attributes (the session id) and nothing else.

These files are not session logs: they are read here, line by line with orjson, and never by
the reader of events.
"""

from __future__ import annotations

from typing import Any

import orjson

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
    found: set[str] = set()
    for resource in _list(line.get("resourceSpans")):
        for scope in _list(resource.get("scopeSpans")):
            for span in _list(scope.get("spans")):
                for pair in _list(span.get("attributes")):
                    value = pair.get("value")
                    if pair.get("key") == CONVERSATION and isinstance(value, dict):
                        session = value.get("stringValue")
                        if isinstance(session, str):
                            found.add(session)
    return found


def _list(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
