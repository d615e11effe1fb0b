"""What the scripted model answers: text, tool calls or an HTTP error, and a tool call's
arguments filled from the schema the CLI offered for that tool (tools change across versions)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One tool call the model makes; ``args`` are the values we care about, the rest of the
    tool's required parameters are filled from its schema."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One answer: text (ends the agent's loop) or tool calls, or an HTTP error status."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    status: int = 200

    @property
    def kind(self) -> str:
        if self.status != 200:
            return f"http-{self.status}"
        return "tools" if self.calls else "text"


def text(words: str) -> Reply:
    return Reply(text=words)


def tools(*calls: Call) -> Reply:
    return Reply(calls=calls)


def error(status: int) -> Reply:
    return Reply(status=status)


# Values for parameters a tool requires that a scenario did not give, by parameter name.
_DEFAULTS: dict[str, Any] = {
    "description": "rig step",
    "summary": "Done: the rig's task is complete.",
    "prompt": "[rig:sub:helper] Run one command and report.",
    "name": "helper",
    "mode": "sync",
    "initial_wait": 10,
    "sessionId": "rig",
    "shellId": "rig",
    "async": False,
}


def arguments(call: Call, schema: dict[str, Any] | None) -> str:
    """The JSON arguments of ``call``: its own values, then every other required parameter of
    the tool's schema (an enum takes a preferred or its first value)."""
    props = (schema or {}).get("properties", {})
    # A parameter this version's tool does not have is left out (tools change across versions).
    args = {k: v for k, v in call.args.items() if not props or k in props}
    for name in (schema or {}).get("required", []):
        if name in args:
            continue
        spec = props.get(name, {})
        args[name] = _default(name, spec)
    return json.dumps(args)


def _default(name: str, spec: dict[str, Any]) -> Any:
    enum = spec.get("enum")
    if enum:
        for preferred in ("general-purpose", "task", "sync"):
            if preferred in enum:
                return preferred
        return enum[0]
    if name in _DEFAULTS:
        return _DEFAULTS[name]
    kind = spec.get("type")
    if kind == "boolean":
        return False
    if kind in ("number", "integer"):
        return 10
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "rig"
