"""The scenarios the rig records: flags, prompts, and each agent's script.

A sub-agent is asked for by a ``task`` call whose prompt carries ``[rig:sub:NAME]``: the server
knows the sub-agent's requests by that mark. ``expect`` holds what copilot-logs must say of the
log, for the conformance tests (an audit verdict, a validate result); the counts come from the
server's truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rig.replies import Call, Reply, error, text, tools

Steps = dict[str, tuple[Reply, ...]]


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    steps: Steps
    flags: tuple[str, ...] = ("--allow-all-tools",)
    prompts: tuple[str, ...] = ("[rig:main] Do the rig's task.",)
    failures: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    """HTTP statuses answered, in turn, before the script's reply at (agent, step)."""
    cycle: Callable[[str, int], Reply] | None = None
    """The reply past an agent's steps (default: the text "Done.")."""
    interrupt: bool = False
    """SIGINT to the CLI once a tool has started (the tool sleeps)."""
    kill: bool = False
    """SIGKILL to the CLI's whole process group once the first run's tool has started (the
    tool sleeps); the next prompt resumes the killed session (``--resume``)."""
    json_stream: bool = False
    expect: dict[str, Any] = field(default_factory=dict)


class Script:
    """A scenario's replies, with the failures it still owes (one server run's state)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.failures = {key: list(codes) for key, codes in scenario.failures.items()}

    def __call__(self, agent: str, step: int, request: dict[str, Any]) -> Reply:
        owed = self.failures.get((agent, step))
        if owed:
            return error(owed.pop(0))
        steps = self.scenario.steps.get(agent, ())
        if step < len(steps):
            return steps[step]
        if self.scenario.cycle is not None:
            return self.scenario.cycle(agent, step)
        return text("Done.")


def bash(command: str) -> Call:
    return Call("bash", {"command": command, "description": "rig command"})


def task(name: str, job: str) -> Call:
    return Call(
        "task",
        {"prompt": f"[rig:sub:{name}] {job}", "description": f"rig {name}", "name": name},
    )


DONE = Call("task_complete", {"summary": "The rig's task is done."})
AUTOPILOT = ("--allow-all", "--autopilot")


def _looping(agent: str, step: int) -> Reply:
    """The same tool call after every nudge, then a text that ends the loop: never progress."""
    return tools(bash("ls -la")) if step % 2 == 0 else text("Still working on it.")


def _not_done(agent: str, step: int) -> Reply:
    return text("I am not done yet.")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "one-tool",
        "one bash call, then the answer",
        {"main": (tools(bash("echo rig-one")), text("It printed rig-one."))},
    ),
    Scenario(
        "failing-tools",
        "a command that fails and a file that is missing",
        {
            "main": (
                tools(bash("exit 3")),
                tools(Call("view", {"path": "/nonexistent/rig"})),
                text("Both failed."),
            )
        },
    ),
    Scenario(
        "parallel-tools",
        "two tool calls in one answer",
        {"main": (tools(bash("echo left"), bash("echo right")), text("Both ran."))},
    ),
    Scenario(
        "subagent",
        "one sub-agent that runs a tool",
        {
            "main": (tools(task("helper", "Run echo and report.")), text("The helper is done.")),
            "helper": (tools(bash("echo from-helper")), text("Helper: done.")),
        },
    ),
    Scenario(
        "two-subagents",
        "two sub-agents started in one answer, running at once",
        {
            "main": (
                tools(task("alpha", "Run echo."), task("beta", "Run echo too.")),
                text("Both helpers are done."),
            ),
            "alpha": (tools(bash("echo alpha")), text("Alpha: done.")),
            "beta": (tools(bash("echo beta")), text("Beta: done.")),
        },
    ),
    Scenario(
        "autopilot-complete",
        "autopilot: two nudges, then task_complete",
        {
            "main": (
                text("I looked around."),
                text("Still thinking."),
                tools(DONE),
                text("Finished."),
            )
        },
        flags=AUTOPILOT,
        expect={"verdict": "completed"},
    ),
    Scenario(
        "autopilot-cap",
        "autopilot that never completes, stopped by the nudge cap",
        {},
        flags=(*AUTOPILOT, "--max-autopilot-continues", "2"),
        cycle=_not_done,
        expect={"verdict": "nudge-cap"},
    ),
    Scenario(
        "autopilot-loop",
        "autopilot repeating one tool call after every nudge, to the cap",
        {},
        flags=(*AUTOPILOT, "--max-autopilot-continues", "3"),
        cycle=_looping,
        expect={"verdict": "nudge-cap", "looping": True},
    ),
    Scenario(
        "autopilot-progress",
        "autopilot that edits files between nudges, then completes",
        {
            "main": (
                tools(bash("echo one > progress.txt")),
                text("First part written."),
                tools(bash("echo two >> progress.txt")),
                tools(DONE),
                text("Finished."),
            )
        },
        flags=AUTOPILOT,
        expect={"verdict": "completed"},
    ),
    Scenario(
        "autopilot-done-then-nudged",
        "autopilot: the first prompt completes with task_complete; a second prompt (--resume) "
        "never completes and is nudged on to the cap",
        {"main": (tools(DONE),)},
        flags=(*AUTOPILOT, "--max-autopilot-continues", "2"),
        prompts=("[rig:main] First prompt.", "[rig:main] Second prompt."),
        cycle=_not_done,
        expect={"verdict": "nudge-cap", "looping": False},
    ),
    Scenario(
        "autopilot-cap-stream",
        "autopilot stopped by the nudge cap, with --output-format json: the stream holds "
        "session.autopilot_stopped (ephemeral, never in the log)",
        {},
        flags=(*AUTOPILOT, "--max-autopilot-continues", "2", "--output-format", "json"),
        cycle=_not_done,
        json_stream=True,
        expect={"verdict": "nudge-cap"},
    ),
    Scenario(
        "provider-errors",
        "HTTP 500 then 429 before an answer (the CLI retries)",
        {"main": (tools(bash("echo after-errors")), text("Done after errors."))},
        failures={("main", 0): (500, 429)},
    ),
    Scenario(
        "resume",
        "a second prompt into the same session with --resume",
        {
            "main": (
                tools(bash("echo first")),
                text("First prompt done."),
                tools(bash("echo second")),
                text("Second prompt done."),
            )
        },
        prompts=("[rig:main] First prompt.", "[rig:main] Second prompt."),
    ),
    Scenario(
        "denied-tool",
        "a tool call the user denied with --deny-tool",
        {"main": (tools(bash("echo denied")), text("The tool was denied."))},
        flags=("--allow-all-tools", "--deny-tool", "shell"),
    ),
    Scenario(
        "plan-mode",
        "a prompt in plan mode",
        {"main": (text("Here is the plan."),)},
        flags=("--allow-all-tools", "--mode", "plan"),
    ),
    Scenario(
        "fleet",
        "a prompt in fleet mode (parallel sub-agent orchestration)",
        {
            "main": (tools(task("fleet1", "Run echo.")), text("Fleet done.")),
            "fleet1": (tools(bash("echo fleet")), text("Fleet1: done.")),
        },
        flags=("--allow-all-tools", "--fleet"),
    ),
    Scenario(
        "json-stream",
        "--output-format json: the event stream on stdout",
        {"main": (tools(bash("echo json")), text("Streamed."))},
        flags=("--allow-all-tools", "--output-format", "json"),
        json_stream=True,
    ),
    Scenario(
        "interrupted",
        "SIGINT while a tool runs",
        {"main": (tools(bash("sleep 30")), text("Not reached."))},
        interrupt=True,
    ),
    Scenario(
        "kill-resume",
        "autopilot: SIGKILL to the CLI's process group while a tool runs, then --resume with a "
        "second prompt, which runs a tool and completes",
        {
            "main": (
                tools(bash("sleep 30")),
                tools(bash("echo resumed")),
                tools(DONE),
                text("Finished."),
            )
        },
        flags=AUTOPILOT,
        prompts=("[rig:main] Do the rig's task.", "[rig:main] Go on."),
        kill=True,
        expect={"verdict": "completed", "looping": False},
    ),
)

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
