"""timeline properties: for any generated valid session, one entry per turn, tool execution,
sub-agent call and lifecycle event, in the order they were written, and a view that fits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from copilot_logs.commands.timeline import EVENT_TYPES, timeline, turn_rows
from copilot_logs.ingest.reader import read_bytes
from copilot_logs.render.timeline import session_lines
from synth import SessionBuilder, Subagent, SubagentStep, ToolCall, bash, task, view

Node = dict[str, Any]

SUBAGENT = st.fixed_dictionaries(
    {
        "steps": st.lists(st.integers(min_value=0, max_value=2), min_size=0, max_size=3),
        "failed": st.booleans(),
    }
)
TURN = st.fixed_dictionaries(
    {
        "tools": st.lists(st.booleans(), max_size=3),  # one bool per tool: does it succeed
        "parallel": st.booleans(),
        "subagent": st.none() | SUBAGENT,
        "no_reply": st.booleans(),
    }
)
AFTER = st.sampled_from(["compaction", "resume", "mode", "model", "abort", "shell", "error"])
INTERACTION = st.fixed_dictionaries(
    {
        "nudge": st.booleans(),
        "turns": st.lists(TURN, min_size=1, max_size=4),
        "task_complete": st.booleans(),
        "after": st.lists(AFTER, max_size=2),
    }
)
SESSION = st.fixed_dictionaries(
    {
        "interactions": st.lists(INTERACTION, min_size=1, max_size=4),
        "open_end": st.sampled_from([None, "turn", "tool"]),
        "seed": st.integers(0, 10_000),
    }
)


@dataclass
class Expected:
    """What the builder wrote, in writing order."""

    triggers: list[str] = field(default_factory=list)
    turns: list[tuple[int, str]] = field(default_factory=list)  # (interaction, turnId)
    main_tools: list[list[str]] = field(default_factory=list)  # per turn
    shell_tools: list[str] = field(default_factory=list)
    subagent_calls: dict[str, int] = field(default_factory=dict)
    open_last: bool = False


def _subagent(plan: dict[str, Any], number: int) -> Subagent:
    steps = [
        SubagentStep(
            text=f"step {i}",
            tools=tuple(bash(f"echo {number}.{i}.{j}", "x") for j in range(tools)),
        )
        for i, tools in enumerate(plan["steps"])
    ]
    if steps:
        # The last step answers: no tool requests.
        steps[-1] = SubagentStep(text="answer")
    return Subagent(
        prompt=f"sub-task {number}",
        steps=tuple(steps),
        error="gave up" if plan["failed"] else None,
    )


def build(plan: dict[str, Any]) -> tuple[SessionBuilder, Expected]:
    builder = SessionBuilder(seed=plan["seed"])
    expected = Expected()
    for position, interaction in enumerate(plan["interactions"], start=1):
        if interaction["nudge"] and position > 1:
            builder.nudge()
            expected.triggers.append("nudge")
        else:
            builder.user_message(f"prompt {position}")
            expected.triggers.append("prompt")
        for turn in interaction["turns"]:
            tools: list[ToolCall] = [
                view(f"f{n}.py", "x", success=ok) for n, ok in enumerate(turn["tools"])
            ]
            if turn["subagent"] is not None:
                tools.append(task("delegate", subagent=_subagent(turn["subagent"], position)))
            if turn["no_reply"] and not tools:
                record = builder.turn(None)
                builder.session_error("provider unreachable")
            else:
                record = builder.turn("working", tools, parallel=turn["parallel"])
            expected.turns.append((position, record.turn_id))
            expected.main_tools.append(list(record.tool_call_ids))
            if turn["subagent"] is not None:
                expected.subagent_calls[record.tool_call_ids[-1]] = len(turn["subagent"]["steps"])
        if interaction["task_complete"]:
            record = builder.task_complete_turn("done")
            expected.turns.append((position, record.turn_id))
            expected.main_tools.append(list(record.tool_call_ids))
        for what in interaction["after"]:
            if what == "compaction":
                builder.compaction(1_000)
            elif what == "resume":
                builder.shutdown()
                builder.resume()
            elif what == "mode":
                builder.mode_changed("autopilot" if builder.mode != "autopilot" else "plan")
            elif what == "model":
                builder.model_change("claude-sonnet-4.5")
            elif what == "abort":
                builder.abort()
            elif what == "shell":
                expected.shell_tools.append(builder.user_requested_shell("ls", "a"))
            else:
                builder.session_error("rate limited", "rate_limit")
    if plan["open_end"] is not None:
        last = len(plan["interactions"])
        tools = [bash("make", never_completes=True)] if plan["open_end"] == "tool" else []
        record = builder.turn("still going", tools, end=False)
        expected.turns.append((last, record.turn_id))
        expected.main_tools.append(list(record.tool_call_ids))
        expected.open_last = True
    return builder, expected


def written(builder: SessionBuilder) -> list[tuple[int, dict[str, Any]]]:
    return list(enumerate(builder.events, start=1))


def all_turns(session: Node) -> list[tuple[int, Node]]:
    return [
        (interaction["interaction_index"], turn)
        for interaction in session["interactions"]
        for turn in interaction["turns"]
    ]


def all_events(session: Node) -> list[Node]:
    found = list(session["events"])
    for interaction in session["interactions"]:
        found += interaction["events"]
        for turn in interaction["turns"]:
            found += turn["events"]
            for run in turn["subagents"]:
                found += run["events"]
    return sorted(found, key=lambda event: event["line"])


PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(plan=SESSION)
def test_one_entry_per_turn_and_tool_in_order(plan: dict[str, Any]) -> None:
    builder, expected = build(plan)
    (session,) = timeline(read_bytes(builder.to_bytes(), "s.jsonl"))

    turns = all_turns(session)
    assert [(index, turn["turn_id"]) for index, turn in turns] == expected.turns
    assert [turn["turn_index"] for _, turn in turns] == list(range(1, len(turns) + 1))
    assert [t["tool_call_id"] for _, turn in turns for t in turn["tools"]] == [
        tool_id for ids in expected.main_tools for tool_id in ids
    ]
    assert [[t["tool_call_id"] for t in turn["tools"]] for _, turn in turns] == (
        expected.main_tools
    )
    assert [i["trigger"] for i in session["interactions"]] == expected.triggers
    assert [t["tool_call_id"] for i in session["interactions"] for t in i["tools"]] == (
        expected.shell_tools
    )
    assert [turn["open"] for _, turn in turns] == [False] * (len(turns) - expected.open_last) + [
        True
    ] * expected.open_last
    if plan["open_end"] == "tool":
        assert turns[-1][1]["tools"][-1]["status"] == "open"

    # Sub-agents: under the turn of their task call, one call per step, every tool once.
    runs = {run["agent_id"]: run for _, turn in turns for run in turn["subagents"]}
    assert {agent: len(run["calls"]) for agent, run in runs.items()} == expected.subagent_calls
    for _, turn in turns:
        task_ids = [t["tool_call_id"] for t in turn["tools"] if t["name"] == "task"]
        assert [run["agent_id"] for run in turn["subagents"]] == task_ids
    lines = written(builder)
    sub_tools = [e["data"]["toolCallId"] for _, e in lines if _is_sub_tool_start(e)]
    listed = [
        t["tool_call_id"] for run in runs.values() for call in run["calls"] for t in call["tools"]
    ]
    assert listed == sub_tools

    # Every lifecycle event once, at its line, in order.
    events = all_events(session)
    assert [(e["line"], e["type"]) for e in events] == [
        (line, e["type"]) for line, e in lines if e["type"] in EVENT_TYPES and "agentId" not in e
    ]
    for interaction in session["interactions"]:
        for event in interaction["events"]:
            assert event["line"] > interaction["line"]


def _is_sub_tool_start(event: dict[str, Any]) -> bool:
    return event["type"] == "tool.execution_start" and "agentId" in event


@PROPERTY_SETTINGS
@given(plan=SESSION)
def test_rows_are_one_per_llm_call(plan: dict[str, Any]) -> None:
    builder, expected = build(plan)
    sessions = timeline(read_bytes(builder.to_bytes(), "s.jsonl"))
    rows = turn_rows(sessions)
    main = rows.filter(rows["agent_id"].is_null())
    assert main.height == len(expected.turns)
    assert main["turn_id"].to_list() == [turn_id for _, turn_id in expected.turns]
    assert rows.height - main.height == sum(expected.subagent_calls.values())
    assert rows["line"].is_sorted()
    assert main["open"].sum() == int(expected.open_last)


@PROPERTY_SETTINGS
@given(plan=SESSION, width=st.integers(min_value=40, max_value=220), tools=st.booleans())
def test_the_view_fits_and_shows_every_node(plan: dict[str, Any], width: int, tools: bool) -> None:
    builder, _ = build(plan)
    (session,) = timeline(read_bytes(builder.to_bytes(), "s.jsonl"), include_tools=tools)
    lines = list(session_lines(session, width, show_tools=tools))
    assert all(line.cell_len <= width for line in lines)
    nodes = len(all_events(session)) + len(session["interactions"])
    for _, turn in all_turns(session):
        nodes += 1 + len(turn.get("tools", []))
        for run in turn["subagents"]:
            nodes += 1 + len(run["calls"])
            nodes += sum(len(call.get("tools", [])) for call in run["calls"])
    nodes += sum(len(i.get("tools", [])) for i in session["interactions"])
    # Three header lines, then one line per node.
    assert len(lines) == 3 + nodes
