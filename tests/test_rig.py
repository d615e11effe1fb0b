"""The recording rig's model server and scenarios, checked without the CLI; and, where a CLI
binary is cached already, one real recording (make test downloads nothing)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from rig.record import beside_log, record
from rig.replies import Call, arguments, error, text, tools
from rig.scenarios import BY_NAME, SCENARIOS, Scenario, Script
from rig.server import ModelServer, agent_of

BASH_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "description": {"type": "string"},
        "mode": {"type": "string", "enum": ["sync", "async"]},
    },
    "required": ["command", "description"],
}


def post(server: ModelServer, messages: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    body = json.dumps(
        {
            "model": "rig-model",
            "stream": True,
            "messages": messages,
            "tools": [
                {"type": "function", "function": {"name": "bash", "parameters": BASH_SCHEMA}}
            ],
        }
    )
    request = urllib.request.Request(
        f"{server.url}/chat/completions",
        body.encode(),
        {"Content-Type": "application/json", "x-initiator": "user"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read().decode()
    except urllib.error.HTTPError as failed:
        return failed.code, []
    chunks = [line[len("data: ") :] for line in raw.split("\n\n") if line.startswith("data: ")]
    assert chunks[-1] == "[DONE]"
    return 200, [json.loads(chunk) for chunk in chunks[:-1]]


def test_the_server_streams_tool_calls_and_keeps_the_truth_of_each_call() -> None:
    steps = {
        "main": (tools(Call("bash", {"command": "echo hi"})), text("done")),
        "helper": (text("helper done"),),
    }
    scenario = Scenario("t", "test", steps, failures={("main", 1): (500,)})
    with ModelServer(Script(scenario)) as server:
        status, first = post(server, [{"role": "user", "content": "[rig:main] go"}])
        history = [
            {"role": "user", "content": "[rig:main] go"},
            {"role": "assistant", "content": None},
            {"role": "tool", "content": "hi"},
        ]
        failed, _ = post(server, history)
        status2, second = post(server, history)
        status3, third = post(server, [{"role": "user", "content": "[rig:sub:helper] job"}])
    assert (status, failed, status2, status3) == (200, 500, 200, 200)
    call = first[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    arguments_ = json.loads(
        first[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
    )
    assert arguments_ == {"command": "echo hi", "description": "rig step"}
    assert first[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert first[-1]["usage"]["prompt_tokens"] == 1017
    assert second[0]["choices"][0]["delta"]["content"] == "done"
    assert second[-1]["usage"]["completion_tokens"] == 23
    assert third[0]["choices"][0]["delta"]["content"] == "helper done"
    truth = server.truth.requests
    assert [(r["agent"], r["step"], r["status"]) for r in truth] == [
        ("main", 0, 200),
        ("main", 1, 500),
        ("main", 1, 200),
        ("helper", 0, 200),
    ]
    assert [r.get("api_call_id") for r in truth] == ["rig-call-1", None, "rig-call-2", "rig-call-3"]
    assert first[0]["id"] == "rig-call-1"
    assert truth[0]["initiator"] == "user"


def test_a_sub_agent_is_known_by_its_mark_in_a_user_message_only() -> None:
    task_call = {"role": "assistant", "content": "[rig:sub:x] in a tool call is not a user's"}
    assert (
        agent_of(
            [
                {"role": "system", "content": "s"},
                task_call,
                {"role": "user", "content": "[rig:main] go"},
            ]
        )
        == "main"
    )
    parts = [{"type": "text", "text": "<ctx/> [rig:sub:beta] Run echo."}]
    assert agent_of([{"role": "user", "content": parts}]) == "beta"


def test_arguments_fill_required_parameters_and_drop_unknown_ones() -> None:
    schema = {
        "properties": {
            "prompt": {"type": "string"},
            "agent_type": {"type": "string", "enum": ["explore", "task"]},
            "count": {"type": "integer"},
        },
        "required": ["prompt", "agent_type", "count"],
    }
    got = json.loads(arguments(Call("task", {"prompt": "p", "name": "gone"}), schema))
    assert got == {"prompt": "p", "agent_type": "task", "count": 10}


def test_every_scenario_script_answers_every_step_it_is_asked() -> None:
    names = [scenario.name for scenario in SCENARIOS]
    assert len(names) == len(set(names)) == len(BY_NAME)
    for scenario in SCENARIOS:
        script = Script(scenario)
        for agent in ("main", *scenario.steps):
            for step in range(8):
                assert script(agent, step, {}).status in (200, 429, 500)
    owed = Script(BY_NAME["provider-errors"])
    assert [owed("main", 0, {}).status for _ in range(3)] == [500, 429, 200]
    assert error(429).kind == "http-429"


def test_each_request_is_kept_with_the_run_the_recorder_said_was_being_served() -> None:
    scenario = Scenario("t", "test", {"main": (text("one"), text("two"))})
    with ModelServer(Script(scenario)) as server:
        post(server, [{"role": "user", "content": "[rig:main] go"}])
        server.truth.run = 1
        post(server, [{"role": "user", "content": "[rig:main] again"}])
    assert [r["run"] for r in server.truth.requests] == [0, 1]


def test_beside_log_keeps_the_locks_a_run_left(tmp_path: Path) -> None:
    """A session folder as a killed 1.0.102 leaves it (event-format.md): the inuse lock of
    its pid, and the operation lock beside the session folders."""
    state = tmp_path / "session-state"
    folder = state / "abc"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes(b'{"type":"a"}\n{"type":"b"}\n')
    for name in ("inuse.4242.lock", "inuse.4242.hold", "workspace.yaml"):
        (folder / name).write_text("")
    assert beside_log(folder / "events.jsonl", 4242) == {
        "log_bytes": 26,
        "log_lines": 2,
        "pid": 4242,
        "session_folder": [
            "events.jsonl",
            "inuse.4242.hold",
            "inuse.4242.lock",
            "workspace.yaml",
        ],
        "inuse_lock_pids": [4242],
        "operation_lock": False,
    }
    (state / ".session-operation-locks").mkdir()
    (state / ".session-operation-locks" / "abc.lock").write_text("")
    (folder / "inuse.4242.lock").unlink()
    kept = beside_log(folder / "events.jsonl", 4243)
    assert (kept["inuse_lock_pids"], kept["operation_lock"]) == ([], True)


@pytest.mark.process
@pytest.mark.live
def test_a_real_recording_with_a_cached_cli(live_cli: tuple[str, Path], tmp_path: Path) -> None:
    version, binary = live_cli
    truth = record(binary, version, BY_NAME["one-tool"], tmp_path / "r")
    assert truth["outcome"] == "recorded"
    assert [r["status"] for r in truth["requests"]] == [200, 200]
    log = (tmp_path / "r" / "events.jsonl").read_text()
    assert "rig-call-1" in log and "rig-call-2" in log
    # The CLI's own spans, from its file exporter, kept beside the log.
    spans = [line for line in (tmp_path / "r" / "otel.jsonl").read_text().splitlines()]
    assert sum('"type":"span"' in line and '"rig-call-' in line for line in spans) == 2
