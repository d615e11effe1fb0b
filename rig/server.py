"""A scripted model server speaking OpenAI chat completions with streaming, on loopback only.

Each request it answers is one LLM call, and it keeps the truth of each: which agent asked (the
main agent, or a sub-agent named by the ``[rig:sub:NAME]`` mark its task prompt carries), the
step of that agent's script, what it answered and the tokens it reported. Every call's tokens
differ, so a per-call figure that a reader got from the wrong call shows.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rig.replies import Reply, arguments

SUB_MARK = re.compile(r"\[rig:sub:([A-Za-z0-9_-]+)\]")
MODEL = "rig-model"

Script = Callable[[str, int, dict[str, Any]], Reply]
"""(agent, step, request) -> the reply; step counts the agent's earlier answers in the
conversation the request carries (a retried request has the same step)."""


def agent_of(messages: list[dict[str, Any]]) -> str:
    """``main``, or the sub-agent's name from the mark in its first user message."""
    for message in messages:
        if message.get("role") == "user":
            found = SUB_MARK.search(_text(message.get("content")))
            return found.group(1) if found else "main"
    return "main"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def tokens_of(call: int) -> dict[str, int]:
    """The tokens reported for the call-th successful call: distinct for every call."""
    return {
        "prompt_tokens": 1000 * call + 17,
        "completion_tokens": 10 * call + 3,
        "cached_tokens": 100 * call,
    }


class Truth:
    """What the server served, in order; shared by the request threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.calls = 0
        self.run = 0
        """The index of the CLI run being served (the recorder sets it before each run)."""

    def take(self, agent: str, step: int, reply: Reply, headers: dict[str, str]) -> dict[str, Any]:
        with self.lock:
            entry: dict[str, Any] = {
                "request": len(self.requests) + 1,
                "run": self.run,
                "agent": agent,
                "step": step,
                "status": reply.status,
                "reply": reply.kind,
                "tools": [call.tool for call in reply.calls],
                "initiator": headers.get("x-initiator"),
                "interaction_type": headers.get("x-interaction-type"),
            }
            if reply.status == 200:
                self.calls += 1
                entry["call"] = self.calls
                entry["api_call_id"] = f"rig-call-{self.calls}"
                entry.update(tokens_of(self.calls))
            self.requests.append(entry)
            return entry


class ModelServer:
    """The server on 127.0.0.1 (a free port), serving ``script`` until stopped."""

    def __init__(self, script: Script, delay: float = 0.0) -> None:
        self.truth = Truth()
        self.script = script
        self.delay = delay
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(
        self, request: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Reply, dict[str, Any]]:
        messages = request.get("messages") or []
        agent = agent_of(messages)
        step = sum(1 for m in messages if m.get("role") == "assistant")
        reply = self.script(agent, step, request)
        return reply, self.truth.take(agent, step, reply, headers)


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            models = {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "rig"}],
            }
            self._json(200, models)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply, entry = server.answer(request, headers)
            if server.delay:
                time.sleep(server.delay)
            if reply.status != 200:
                self._json(
                    reply.status,
                    {"error": {"message": f"rig: HTTP {reply.status}", "type": "rig_error"}},
                )
                return
            self._stream(reply, entry, _schemas(request))

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "1")
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply, entry: dict[str, Any], schemas: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _chunks(reply, entry, schemas):
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def _schemas(request: dict[str, Any]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for tool in request.get("tools") or []:
        function = tool.get("function") or {}
        schemas[str(function.get("name"))] = function.get("parameters")
    return schemas


def _chunks(reply: Reply, entry: dict[str, Any], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    base = {
        "id": entry["api_call_id"],
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}

    out = [chunk({"role": "assistant", "content": reply.text or None})]
    for index, call in enumerate(reply.calls):
        call_id = f"call_rig_{entry['call']}_{index}"
        args = arguments(call, schemas.get(call.tool))
        entry.setdefault("tool_call_ids", []).append(call_id)
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.tool, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": args}}]}))
    usage = {
        "prompt_tokens": entry["prompt_tokens"],
        "completion_tokens": entry["completion_tokens"],
        "total_tokens": entry["prompt_tokens"] + entry["completion_tokens"],
        "prompt_tokens_details": {"cached_tokens": entry["cached_tokens"]},
    }
    out.append(chunk({}, "tool_calls" if reply.calls else "stop", usage=usage))
    return out
