"""Write the bundled sample logs: ``python -m tests.make_samples sample_sessions``.

Every file is built with :mod:`synth`, so the output is byte-for-byte the same on
every run. Besides the logs it writes ``README.md`` (one section per file) and
``expected.json`` (the figures a correct reader must report). The figures below are written
by hand from the scenario each function builds: they are the oracle, not the output of the
project's reader.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

import synth
from synth import (
    SessionBuilder,
    Subagent,
    SubagentStep,
    bash,
    create,
    edit,
    glob,
    grep,
    task,
    view,
)

CWD = "/home/dev/shopfront"
REPO = "octo/shopfront"


@dataclass
class Sample:
    key: str
    session_id: str
    title: str
    shows: str
    data: bytes
    expected: dict[str, Any]
    layout: str = "dir"
    damage: list[dict[str, Any]] = field(default_factory=list)
    recovery: dict[str, int] = field(default_factory=dict)

    @property
    def relpath(self) -> str:
        if self.layout == "flat":
            return f"{self.session_id}.jsonl"
        return f"{self.session_id}/events.jsonl"


def figures(
    *,
    llm_calls: int,
    completed_turns: int,
    subagent_calls: int = 0,
    interactions: int = 1,
    user_prompts: int = 1,
    autopilot_nudges: int = 0,
    tool_calls: int = 0,
    failed_tool_calls: int = 0,
    subagent_tool_calls: int = 0,
    fusion_calls: int = 0,
    subagent_runs: int = 0,
    errors: int = 0,
    task_complete: bool = False,
    status: str = "ended",
    grep_c: int,
    grep_F_c: int,
    mode: str = "interactive",
    damaged_lines: int = 0,
    start: str,
    models: list[str],
    shutdowns: int,
    accounting: str | None = None,
    output_tokens: int,
    requests: int | None,
    premium_requests: float | None,
) -> dict[str, Any]:
    """The expected figures of one session (see sample_sessions/README.md for definitions)."""
    return {
        "llm_calls": llm_calls,
        "completed_turns": completed_turns,
        "open_turns": llm_calls - completed_turns,
        "subagent_calls": subagent_calls,
        "interactions": interactions,
        "user_prompts": user_prompts,
        "autopilot_nudges": autopilot_nudges,
        "tool_calls": tool_calls,
        "failed_tool_calls": failed_tool_calls,
        "subagent_tool_calls": subagent_tool_calls,
        "fusion_calls": fusion_calls,
        "subagent_runs": subagent_runs,
        "errors": errors,
        "task_complete": task_complete,
        "status": status,
        "grep_c": grep_c,
        "grep_F_c": grep_F_c,
        "mode": mode,
        "damaged_lines": damaged_lines,
        "start": start,
        "models": models,
        "shutdowns": shutdowns,
        "accounting": accounting,
        "output_tokens": output_tokens,
        "requests": requests,
        "premium_requests": premium_requests,
    }


# ---------------------------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------------------------

CACHE_TS = """import { EvictionPolicy } from "./evictionPolicy";

export class SessionCache<V> {
  private readonly entries = new Map<string, { value: V; at: number }>();
  constructor(private readonly policy: EvictionPolicy, private readonly ttlMs = 60_000) {}

  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit || Date.now() - hit.at > this.ttlMs) return undefined;
    this.policy.touch(key);
    return hit.value;
  }

  set(key: string, value: V): void {
    this.entries.set(key, { value, at: Date.now() });
    for (const victim of this.policy.admit(key)) this.entries.delete(victim);
  }
}"""

POLICY_TS = """export interface EvictionPolicy {
  touch(key: string): void;
  admit(key: string): string[];
}

export class LruPolicy implements EvictionPolicy {
  private order: string[] = [];
  constructor(private readonly capacity: number) {}
  touch(key: string): void {
    this.order = this.order.filter((k) => k !== key).concat(key);
  }
  admit(key: string): string[] {
    this.touch(key);
    return this.order.length > this.capacity ? this.order.splice(0, 1) : [];
  }
}"""


def scenario_a() -> Sample:
    sid = "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f"
    start = "2026-08-03T09:12:40.118Z"
    b = SessionBuilder(
        session_id=sid, seed=1, start=start, model="claude-sonnet-4.5", cwd=CWD, repository=REPO
    )
    b.user_message("How does session caching work in this codebase?")
    b.turn(
        "I'll look for the cache class and the files around it.",
        [
            grep(
                "SessionCache",
                "src/cache/sessionCache.ts:3:export class SessionCache<V> {\n"
                "src/server/app.ts:14:const sessions = new SessionCache<Session>(new "
                "LruPolicy(500));",
                path="src",
            ),
            glob("src/cache/**/*.ts", "src/cache/sessionCache.ts\nsrc/cache/evictionPolicy.ts"),
        ],
        parallel=True,
        output_tokens=86,
    )
    b.turn(
        "The cache lives in src/cache/sessionCache.ts; reading it.",
        [view("src/cache/sessionCache.ts", CACHE_TS)],
        output_tokens=64,
    )
    b.turn(
        "It delegates eviction to a policy object; reading that too.",
        [view("src/cache/evictionPolicy.ts", POLICY_TS)],
        output_tokens=58,
    )
    b.turn(
        "Session caching is an in-memory map with a TTL and a pluggable eviction policy.\n\n"
        "- `SessionCache.get` returns a value only while it is younger than `ttlMs` "
        "(60 s by default) and tells the policy the key was used.\n"
        "- `SessionCache.set` stores the value with a timestamp and asks the policy which "
        "keys to evict.\n"
        "- `LruPolicy` keeps keys in use order and evicts the oldest once `capacity` is "
        "exceeded; `src/server/app.ts` creates the cache with a capacity of 500.\n\n"
        "Nothing is shared between processes: each server instance has its own cache.",
        output_tokens=412,
    )
    b.usage_checkpoint()
    b.shutdown()
    return Sample(
        "a",
        sid,
        "A question answered in four turns",
        "The prompt *How does session caching work in this codebase?* answered in 4 LLM calls: "
        "turn 1 runs `grep` and `glob` in parallel (two starts, then two completes), turns 2 "
        "and 3 each `view` a file, turn 4 is the final answer with no tool request. Ends "
        "with `session.usage_checkpoint` and `session.shutdown`.",
        b.to_bytes(),
        figures(
            llm_calls=4,
            completed_turns=4,
            tool_calls=4,
            grep_c=4,
            grep_F_c=4,
            start=start,
            models=["claude-sonnet-4.5"],
            shutdowns=1,
            output_tokens=620,
            requests=4,
            premium_requests=1,
        ),
    )


AUTH_TS = """export function isTokenValid(token: Token, now = Date.now()): boolean {
  if (!token.signature || !verify(token)) return false;
  // exp is in seconds since the epoch
  return token.exp > now;
}"""


def scenario_b() -> Sample:
    sid = "b2e1d4f3-5c6e-4d7f-9081-1b2c3d4e5f60"
    start = "2026-08-03T14:05:11.502Z"
    b = SessionBuilder(session_id=sid, seed=2, start=start, cwd=CWD, repository=REPO)
    b.user_message("Fix the bug in auth.ts: expired tokens are still accepted.")
    b.turn("Reading src/auth.ts first.", [view("src/auth.ts", AUTH_TS)], output_tokens=42)
    b.turn(
        "`token.exp` is in seconds but `now` is in milliseconds, so every token looks "
        "unexpired. Converting before comparing.",
        [
            edit(
                "src/auth.ts",
                "  return token.exp > now;",
                "  const nowSeconds = Math.floor(now / 1000);\n  return token.exp > nowSeconds;",
            )
        ],
        output_tokens=131,
    )
    b.turn(
        "Fixed. `isTokenValid` compared `exp` (seconds) with `Date.now()` (milliseconds); it "
        "now converts `now` to seconds first, so expired tokens are rejected.",
        output_tokens=97,
    )
    b.user_requested_shell(
        "git diff --stat",
        " src/auth.ts | 4 +++-\n 1 file changed, 3 insertions(+), 1 deletion(-)",
    )
    b.usage_checkpoint()
    b.shutdown(lines_added=3, lines_removed=1, files_modified=[f"{CWD}/src/auth.ts"])
    return Sample(
        "b",
        sid,
        "A bug fix in three turns, with a `!cmd` shell escape",
        "*Fix the bug in auth.ts*: turn 1 `view`, turn 2 `edit`, turn 3 the final answer. "
        "Then the user runs `!git diff --stat`: a `tool.user_requested` and a "
        "`tool.execution_complete` with `isUserRequested: true` and no `tool.execution_start` "
        "(not a pairing fault, not a main-agent tool call). The shutdown carries `codeChanges` "
        "(3 lines added, 1 removed, 1 file).",
        b.to_bytes(),
        figures(
            llm_calls=3,
            completed_turns=3,
            tool_calls=2,
            grep_c=3,
            grep_F_c=3,
            start=start,
            models=["gpt-5-mini"],
            shutdowns=1,
            output_tokens=270,
            requests=3,
            premium_requests=0,
        ),
    )


def scenario_c() -> Sample:
    sid = "c3d2e5f4-6d7f-4e80-a192-2c3d4e5f6071"
    start = "2026-08-04T10:20:03.640Z"
    b = SessionBuilder(session_id=sid, seed=3, start=start, cwd=CWD, repository=REPO)
    b.mode_changed("autopilot")
    b.user_message("Add a --json flag to the export command.", agent_mode="autopilot")
    b.turn(
        "Reading the export command.",
        [
            view(
                "src/commands/export.ts",
                'program.command("export").option("--csv", "write CSV").action(runExport);',
            )
        ],
        output_tokens=55,
    )
    b.turn(
        "Adding the --json option next to --csv.",
        [
            edit(
                "src/commands/export.ts",
                '.option("--csv", "write CSV")',
                '.option("--csv", "write CSV").option("--json", "write JSON")',
            )
        ],
        output_tokens=148,
    )
    b.turn("Added the --json flag to the export command.", output_tokens=23)
    b.usage_checkpoint()
    b.nudge()
    b.turn(
        "Running the export tests to check the flag.",
        [bash("npm test -- export", "PASS test/export.test.ts (5 tests)")],
        output_tokens=61,
    )
    b.task_complete_turn(
        "Added --json to the export command; the export tests pass.", output_tokens=44
    )
    b.usage_checkpoint()
    b.shutdown(lines_added=4, lines_removed=1, files_modified=[f"{CWD}/src/commands/export.ts"])
    return Sample(
        "c",
        sid,
        "Autopilot: one nudge, then task_complete",
        '`session.mode_changed` to autopilot; the prompt carries `agentMode: "autopilot"`. '
        "The first loop (3 LLM calls) ends without `task_complete`, so the CLI injects one "
        'nudge (`user.message` with `content: ""`, `isAutopilotContinuation: true`). In the '
        "second loop the model runs `bash`, then calls the `task_complete` tool; "
        "`session.task_complete` sits before that turn's `assistant.turn_end`.",
        b.to_bytes(),
        figures(
            llm_calls=5,
            completed_turns=5,
            interactions=2,
            autopilot_nudges=1,
            tool_calls=4,
            task_complete=True,
            grep_c=5,
            grep_F_c=5,
            mode="autopilot",
            start=start,
            models=["gpt-5-mini"],
            shutdowns=1,
            output_tokens=331,
            requests=5,
            premium_requests=0,
        ),
    )


def scenario_d() -> Sample:
    sid = "d4c3f605-7e80-4f91-b2a3-3d4e5f607182"
    start = "2026-08-04T16:47:29.031Z"
    b = SessionBuilder(session_id=sid, seed=4, start=start, cwd=CWD, repository=REPO)
    b.mode_changed("autopilot")
    b.user_message("Migrate the config loader from JSON to YAML.")
    b.turn(
        "Reading the loader.",
        [view("src/config/loader.ts", "export const load = (p: string) => JSON.parse(read(p));")],
        output_tokens=48,
    )
    b.turn(
        "Plan: swap JSON.parse for yaml.parse, rename config.json to config.yaml, update the docs.",
        output_tokens=72,
    )
    b.usage_checkpoint()
    loops = [
        (
            "Checking whether a YAML parser is installed.",
            bash("npm ls yaml", "shopfront@1.4.0\n`-- (empty)"),
            51,
            "No YAML parser is installed yet; the next step is to add one.",
            27,
        ),
        (
            "Looking at how the loader is called.",
            bash("grep -rn 'load(' src/config", "src/config/index.ts:4:  load(configPath)"),
            47,
            "The loader has one caller; the change stays local.",
            31,
        ),
        (
            "Replacing JSON.parse in the loader.",
            edit(
                "src/config/loader.ts",
                "JSON.parse(read(p))",
                "parse(read(p))",
                success=False,
                error="No match found for old_str in src/config/loader.ts",
            ),
            63,
            "The edit did not apply; the file must have changed. I will re-read it first.",
            22,
        ),
        (
            "Re-reading the loader.",
            bash("cat src/config/loader.ts", "export const load = (p) => JSON.parse(read(p));"),
            39,
            "The file uses a different signature than I expected; I still need to adapt the edit.",
            35,
        ),
        (
            "Checking the config file names.",
            view("config/config.json", '{ "port": 8080, "db": "postgres://localhost/shop" }'),
            58,
            "config.json is still the only config file; renaming it is the next step.",
            29,
        ),
    ]
    for tool_text, tool, tool_tokens, text, tokens in loops:
        b.nudge()
        b.turn(tool_text, [tool], output_tokens=tool_tokens)
        b.turn(text, output_tokens=tokens)
        b.usage_checkpoint()
    b.shutdown()
    return Sample(
        "d",
        sid,
        "Autopilot that hit the nudge cap (flat layout)",
        "An autopilot run that never calls `task_complete`: after the first loop the CLI "
        "nudges 5 times (the default cap), each nudge answered by a tool turn and a text "
        "turn; then nothing more until the shutdown. The third nudge's `edit` fails "
        "(`success: false`). This file uses the flat layout `<sessionId>.jsonl`.",
        b.to_bytes(),
        figures(
            llm_calls=12,
            completed_turns=12,
            interactions=6,
            autopilot_nudges=5,
            tool_calls=6,
            failed_tool_calls=1,
            grep_c=12,
            grep_F_c=12,
            mode="autopilot",
            start=start,
            models=["gpt-5-mini"],
            shutdowns=1,
            output_tokens=522,
            requests=12,
            premium_requests=0,
        ),
        layout="flat",
    )


def scenario_e() -> Sample:
    sid = "e5b4a716-8f91-4a02-83b4-4e5f60718293"
    start = "2026-08-05T08:31:57.287Z"
    b = SessionBuilder(
        session_id=sid, seed=5, start=start, model="claude-haiku-4.5", cwd=CWD, repository=REPO
    )
    b.user_message("Run the integration tests with a sub-agent and summarise any failures.")
    run_prompt = "Run `npm run test:integration` and report which tests fail and why."
    b.turn(
        "Delegating the integration test run to a sub-agent.",
        [
            task(
                run_prompt,
                description="Run integration tests",
                name="integration-runner",
                subagent=Subagent(
                    run_prompt,
                    steps=(
                        SubagentStep(
                            "Running the integration suite.",
                            (
                                bash(
                                    "npm run test:integration",
                                    "Tests: 2 failed, 46 passed, 48 total",
                                    exit_code=1,
                                ),
                            ),
                            output_tokens=38,
                        ),
                        SubagentStep(
                            "2 of 48 integration tests fail: checkout.spec.ts (timeout "
                            "talking to the payment stub) and refunds.spec.ts (expects "
                            "status 201, gets 200).",
                            output_tokens=96,
                        ),
                    ),
                    model="gpt-5-mini",
                ),
            )
        ],
        output_tokens=74,
    )
    bisect_prompt = "Bisect the last 20 commits to find where refunds.spec.ts started failing."
    b.turn(
        "Asking a second sub-agent to find the commit that broke refunds.spec.ts.",
        [
            task(
                bisect_prompt,
                description="Bisect refunds failure",
                name="refunds-bisect",
                subagent=Subagent(
                    bisect_prompt,
                    steps=(SubagentStep("Starting the bisect.", output_tokens=21),),
                    error="Error: sub-agent exceeded its time budget (300 s)",
                    model="gpt-5-mini",
                ),
            )
        ],
        output_tokens=69,
    )
    b.turn(
        "Integration tests: 46 of 48 pass.\n"
        "- checkout.spec.ts times out talking to the payment stub.\n"
        "- refunds.spec.ts expects 201 but the endpoint returns 200.\n"
        "The bisect sub-agent ran out of time, so the commit that changed the refunds "
        "status code is not identified yet.",
        output_tokens=188,
    )
    b.usage_checkpoint()
    b.shutdown()
    return Sample(
        "e",
        sid,
        "Sub-agents: one completes, one fails",
        "Main turn 1 calls `task`: `subagent.started`, then the sub-agent's own lines with "
        "envelope `agentId` = the task's `toolCallId` (`system.message`, `user.message` with "
        '`source: "agent-<sessionId>"`, 2 `assistant.message` = 2 sub-agent LLM calls, one '
        "`bash` start/complete), `subagent.completed`, then the task's complete. Main turn 2 "
        "calls a second `task` whose sub-agent makes 1 LLM call and ends in `subagent.failed`; "
        "that task's complete has `success: false`. Turn 3 is the final answer. The main agent "
        "runs on claude-haiku-4.5, the sub-agents on gpt-5-mini.",
        b.to_bytes(),
        figures(
            llm_calls=3,
            completed_turns=3,
            subagent_calls=3,
            tool_calls=2,
            failed_tool_calls=1,
            subagent_tool_calls=1,
            subagent_runs=2,
            grep_c=3,
            grep_F_c=3,
            start=start,
            models=["claude-haiku-4.5", "gpt-5-mini"],
            shutdowns=1,
            output_tokens=486,
            requests=6,
            premium_requests=0.33,
        ),
    )


def scenario_f() -> Sample:
    sid = "f6a5b827-9a02-4b13-94c5-5f60718293a4"
    start = "2026-08-05T13:02:18.915Z"
    b = SessionBuilder(session_id=sid, seed=6, start=start, cwd=CWD, repository=REPO)
    b.user_message("Add pagination to the /users endpoint.")
    b.turn(
        "Reading the users route.",
        [
            view(
                "src/routes/users.ts",
                'router.get("/users", async (_req, res) => res.json(await db.users.findAll()));',
            )
        ],
        output_tokens=45,
    )
    b.turn(
        "Adding limit/offset parsing and a total count.",
        [
            edit(
                "src/routes/users.ts",
                "res.json(await db.users.findAll())",
                "res.json(await paginate(db.users, req.query))",
            )
        ],
        output_tokens=210,
    )
    b.turn(
        "Pagination is in: `GET /users?limit=&offset=` returns `{items, total}`.", output_tokens=88
    )
    b.usage_checkpoint()
    b.shutdown(lines_added=18, lines_removed=3, files_modified=[f"{CWD}/src/routes/users.ts"])
    b.resume(after_ms=3 * 3_600_000)
    b.model_change("claude-sonnet-4.5")
    b.user_message("Now add tests for the pagination.")
    b.turn(
        "Creating a test file for the users route.",
        [
            create(
                "test/users.pagination.test.ts",
                'test("limit and offset", async () => {\n'
                '  const page = await get("/users?limit=2&offset=2");\n'
                "  expect(page.items).toHaveLength(2);\n});",
            )
        ],
        output_tokens=264,
    )
    b.turn(
        "Running the new tests.",
        [bash("npm test -- users.pagination", "PASS test/users.pagination.test.ts (4 tests)")],
        output_tokens=37,
    )
    b.turn("Added 4 pagination tests; all pass.", output_tokens=52)
    b.usage_checkpoint()
    b.shutdown(
        lines_added=64,
        lines_removed=3,
        files_modified=[f"{CWD}/src/routes/users.ts", f"{CWD}/test/users.pagination.test.ts"],
    )
    return Sample(
        "f",
        sid,
        "Resumed session, cumulative shutdowns",
        "Two segments in one file: `session.shutdown`, then three hours later "
        "`session.resume` (its `eventCount` and `eventsFileSizeBytes` are the event count and "
        "byte size of the file before it), a `session.model_change` to claude-sonnet-4.5, "
        "a second prompt and a second `session.shutdown`. As in CLI 1.0.7x the second "
        "shutdown is cumulative: for every model its `modelMetrics` are >= the first's "
        "(gpt-5-mini unchanged, claude-sonnet-4.5 added), and the file has "
        "`session.usage_checkpoint` lines. Take the last shutdown; do not sum.",
        b.to_bytes(),
        figures(
            llm_calls=6,
            completed_turns=6,
            interactions=2,
            user_prompts=2,
            tool_calls=4,
            grep_c=6,
            grep_F_c=6,
            start=start,
            models=["gpt-5-mini", "claude-sonnet-4.5"],
            shutdowns=2,
            accounting="cumulative",
            output_tokens=696,
            requests=6,
            premium_requests=1,
        ),
    )


def scenario_g() -> Sample:
    sid = "07f6c938-ab13-4c24-a5d6-60718293a4b5"
    start = "2026-08-06T23:41:07.312Z"
    b = SessionBuilder(session_id=sid, seed=7, start=start, cwd=CWD, repository=REPO)
    b.user_message("Summarise the changes on this branch.")
    b.turn(None, duration_ms=6500)
    b.session_error("Could not connect to the model provider: connect ECONNREFUSED 127.0.0.1:8443")
    b.shutdown()
    return Sample(
        "g",
        sid,
        "A failed LLM call (provider unreachable), just before midnight UTC",
        "`assistant.turn_start` then `assistant.turn_end` with no `assistant.message` (the "
        'provider call failed), then `session.error {errorType: "query"}`, then '
        "`session.shutdown` with `modelMetrics: {}`, no `tokenDetails` and no `currentModel`. "
        "The turn counts as an LLM call (a turn pair) that produced no message. Starts at "
        "23:41 UTC on 6 August: with sample `h` (00:18 UTC on 7 August) it tests day "
        "grouping by time zone (same day in UTC+2, different days in UTC).",
        b.to_bytes(),
        figures(
            llm_calls=1,
            completed_turns=1,
            errors=1,
            grep_c=1,
            grep_F_c=1,
            start=start,
            models=[],
            shutdowns=1,
            output_tokens=0,
            requests=0,
            premium_requests=0,
        ),
    )


def scenario_h() -> Sample:
    sid = "18e7da49-bc24-4d35-b6e7-718293a4b5c6"
    start = "2026-08-07T00:18:52.904Z"
    b = SessionBuilder(session_id=sid, seed=8, start=start, cwd=CWD, repository=REPO)
    b.user_message("Refactor the logger to use structured fields.")
    b.turn(
        "Reading the logger.",
        [view("src/log/logger.ts", "export const log = (msg: string) => console.log(msg);")],
        output_tokens=40,
    )
    b.turn(
        "Switching the logger to structured fields.",
        [
            edit(
                "src/log/logger.ts",
                "export const log = (msg: string) => console.log(msg);",
                "export const log = (msg: string, fields: Record<string, unknown> = {}) =>\n"
                "  console.log(JSON.stringify({ msg, ...fields }));",
            )
        ],
        output_tokens=233,
    )
    b.turn(
        "Building to check the types.",
        [bash("npm run build", never_completes=True)],
        output_tokens=29,
        end=False,
    )
    return Sample(
        "h",
        sid,
        "Cut off mid-turn (killed or still running), just after midnight UTC",
        "Two complete turns, then a third whose `bash` tool has a `tool.execution_start` and "
        "no complete; no `assistant.turn_end`, no `session.shutdown`. Every line is complete "
        "(the file ends with a newline): the session is open, not damaged. Starts at 00:18 UTC "
        "on 7 August (see `g`).",
        b.to_bytes(),
        figures(
            llm_calls=3,
            completed_turns=2,
            tool_calls=3,
            status="open",
            grep_c=3,
            grep_F_c=3,
            start=start,
            models=["gpt-5-mini"],
            shutdowns=0,
            output_tokens=302,
            requests=None,
            premium_requests=None,
        ),
    )


DEBUG_LOG = "\n".join(
    [
        '{"type":"user.message","data":{"content":"run the tests"}}',
        '{"type":"assistant.turn_start","data":{"turnId":"0"}}',
        '{"type":"assistant.turn_end","data":{"turnId":"0"}}',
        '{"type":"assistant.turn_start","data":{"turnId":"1"}}',
        '{"type":"assistant.turn_end","data":{"turnId":"1"}}',
    ]
)


def scenario_i() -> Sample:
    sid = "29d8eb5a-cd35-4e46-87f8-8293a4b5c6d7"
    start = "2026-08-07T11:09:44.450Z"
    b = SessionBuilder(
        session_id=sid, seed=9, start=start, model="gpt-4.1", cwd=CWD, repository=REPO
    )
    b.user_message(
        "My turn-counting script runs grep -c assistant.turn_start on debug.log and reports "
        "too many turns. Why?"
    )
    b.turn("Reading debug.log.", [view("debug.log", DEBUG_LOG)], output_tokens=33)
    b.turn(
        "grep -c counts lines, not events: every line that contains the text "
        "assistant.turn_start anywhere is counted, including prompts, answers and tool "
        'output that quote it. Match the JSON key instead (grep -F -c \'"type":"'
        "assistant.turn_start\"') or, better, parse each line and count events whose type "
        "is assistant.turn_start.",
        output_tokens=141,
    )
    b.usage_checkpoint()
    b.shutdown()
    return Sample(
        "i",
        sid,
        "Where `grep -c assistant.turn_start` overcounts",
        "2 real turns, but the text `assistant.turn_start` also appears on 3 other lines: "
        "the user's prompt (bare word), the `view` result of `debug.log` (which holds "
        '`"type":"assistant.turn_start"` twice; inside the JSON string it is escaped on disk '
        'as `\\"type\\":\\"assistant.turn_start\\"`) and the final answer (bare word, and the '
        "quoted key, escaped). `grep -c assistant.turn_start` prints 5, "
        '`grep -F -c \'"type":"assistant.turn_start"\'` prints 2: an overcount of exactly 3 '
        "lines.",
        b.to_bytes(),
        figures(
            llm_calls=2,
            completed_turns=2,
            tool_calls=1,
            grep_c=5,
            grep_F_c=2,
            start=start,
            models=["gpt-4.1"],
            shutdowns=1,
            output_tokens=174,
            requests=2,
            premium_requests=0,
        ),
    )


def scenario_j() -> Sample:
    sid = "3ac9fc6b-de46-4f57-98a9-93a4b5c6d7e8"
    start = "2026-08-08T09:55:30.076Z"
    b = SessionBuilder(
        session_id=sid,
        seed=10,
        start=start,
        model="gpt-4.1",
        copilot_version="0.0.430",
        cwd=CWD,
        repository=REPO,
    )
    b.user_message("Speed up the slow CSV import.")
    b.turn(
        "Profiling the import.",
        [bash("node --cpu-prof scripts/import.js data/sample.csv", "imported 200000 rows in 9.8s")],
        output_tokens=58,
    )
    b.turn(
        "Reading the parser hot path.",
        [view("src/import/csv.ts", "for (const row of rows) { const buf = Buffer.alloc(4096); }")],
        output_tokens=41,
    )
    b.turn(
        "The parser allocates a 4 KB buffer for every row; reusing one buffer should remove "
        "most of the time.",
        output_tokens=120,
    )
    b.compaction(41_250)
    b.user_message("Go ahead and fix it.")
    b.turn(
        "Reusing one buffer across rows.",
        [
            edit(
                "src/import/csv.ts",
                "for (const row of rows) { const buf = Buffer.alloc(4096); }",
                "const buf = Buffer.alloc(4096);\nfor (const row of rows) { buf.fill(0); }",
            )
        ],
        output_tokens=176,
    )
    b.turn("Done: importing data/sample.csv now takes 2.1 s instead of 9.8 s.", output_tokens=64)
    b.shutdown(
        per_segment=True,
        lines_added=9,
        lines_removed=6,
        files_modified=[f"{CWD}/src/import/csv.ts"],
    )
    b.resume(after_ms=2 * 3_600_000)
    b.user_message("Add a changelog entry for that.")
    b.turn(
        "Adding the entry.",
        [edit("CHANGELOG.md", "## Unreleased\n", "## Unreleased\n- CSV import is 4x faster.\n")],
        output_tokens=47,
    )
    b.turn("Changelog updated.", output_tokens=12)
    b.shutdown(
        per_segment=True, lines_added=1, lines_removed=0, files_modified=[f"{CWD}/CHANGELOG.md"]
    )
    return Sample(
        "j",
        sid,
        "Resumed session, per-segment shutdowns (older CLI), with a compaction",
        "Like `f`, but written the way some older CLIs did it: each `session.shutdown` counts "
        "only its own segment, so the second one is smaller than the first for gpt-4.1 "
        "(2 requests after 5). There is no `session.usage_checkpoint` line. A reader must "
        "sum the two shutdowns. The first segment holds a `session.compaction_start` / "
        "`session.compaction_complete` pair; the compaction call is in the first shutdown's "
        "`tokenDetails` and `totalNanoAiu` but not in its `modelMetrics` usage or request "
        "count.",
        b.to_bytes(),
        figures(
            llm_calls=7,
            completed_turns=7,
            interactions=3,
            user_prompts=3,
            tool_calls=4,
            grep_c=7,
            grep_F_c=7,
            start=start,
            models=["gpt-4.1"],
            shutdowns=2,
            accounting="per-segment",
            output_tokens=518,
            requests=7,
            premium_requests=0,
        ),
    )


def scenario_k() -> Sample:
    sid = "4bbad07c-ef57-4068-a9ba-a4b5c6d7e8f9"
    start = "2026-08-09T15:36:21.733Z"
    b = SessionBuilder(session_id=sid, seed=11, start=start, cwd=CWD, repository=REPO)
    b.user_message("Why is the nightly export job slow? Check the last runs first.")
    b.turn(
        "Checking the job's recent run times.",
        [
            bash(
                "grep 'export finished' logs/nightly.log | tail -3",
                "02:00:04 export finished in 14m02s\n02:00:03 export finished in 13m51s\n"
                "02:00:05 export finished in 14m20s",
            )
        ],
        output_tokens=52,
    )
    b.turn(
        "Reading the export query.",
        [
            view(
                "src/jobs/nightlyExport.ts",
                "for (const c of customers) {\n  rows.push(...(await db.orders.forCustomer(c.id)));"
                "\n}",
            )
        ],
        output_tokens=39,
    )
    b.turn(
        "The export runs one query per customer (an N+1 pattern): about 30,000 queries a night.",
        output_tokens=143,
    )
    b.usage_checkpoint()
    b.user_message("Batch the queries then.")
    b.turn(
        "Batching the customer queries.",
        [
            edit(
                "src/jobs/nightlyExport.ts",
                "for (const c of customers) {",
                "for (const batch of chunk(customers, 500)) {",
            )
        ],
        output_tokens=188,
    )
    b.turn(
        "Re-running the job on the staging snapshot.",
        [bash("npm run job:nightly-export -- --dry-run", "export finished in 41s")],
        output_tokens=47,
    )
    b.turn(
        "Batched: one query per 500 customers; the dry run takes 41 s instead of 14 min.",
        output_tokens=95,
    )
    b.usage_checkpoint()
    b.user_message("Also add a metric for the job duration.")
    b.turn(
        "Looking for the metrics helper.",
        [grep("registerHistogram", "src/metrics.ts:12:export function registerHistogram(")],
        output_tokens=44,
        end=False,
    )
    ev = b.lines()
    # ev[i] is event i+1 of the clean session; the file stops inside event 38 (the last
    # assistant.message): its tool start and complete are never written.
    assert orjson.loads(ev[37])["type"] == "assistant.message"
    split_a, split_b = synth.split_line(ev[18])
    first, replay = synth.duplicate(ev[30])
    lines: list[bytes] = [
        *ev[0:3],  # P1-P3: events 1-3
        synth.raw_line_separator(ev[3]),  # P4: event 4, raw U+2028/U+2029 (valid)
        *ev[4:12],  # P5-P12: events 5-12
        synth.glue_truncated(ev[12], ev[13]),  # P13: event 13 cut, event 14 glued on
        *ev[14:18],  # P14-P17: events 15-18
        synth.blank_line(),  # P18
        split_a,  # P19: event 19, first half
        split_b,  # P20: event 19, second half
        *ev[19:24],  # P21-P25: events 20-24
        synth.crlf(ev[24]),  # P26: event 25 with CRLF
        synth.not_an_event("object"),  # P27
        *ev[25:28],  # P28-P30: events 26-28
        synth.invalid_utf8(ev[28]),  # P31: event 29, bad byte
        ev[29],  # P32: event 30
        synth.not_an_event("array"),  # P33
        first,  # P34: event 31
        replay,  # P35: event 31 again
        *ev[31:37],  # P36-P41: events 32-37
        ev[37],  # P42: event 38, to be cut
    ]
    data = synth.nul_tail(synth.cut(synth.join_lines(lines)), 64)
    physical = data.split(b"\n")
    assert len(physical) == 42 and physical[17] == b"" and physical[41].endswith(b"\x00" * 64)
    damage = [
        {
            "line": 4,
            "kind": "raw_line_separator",
            "must_report": False,
            "event": 4,
            "recovers": "event 4 (user.message), intact: raw U+2028 and U+2029 are "
            "valid inside a JSON string; never split on them",
        },
        {
            "line": 13,
            "kind": "truncated_glued",
            "must_report": True,
            "event": 14,
            "recovers": "event 14 (assistant.turn_end, turnId 1) from the line's "
            "suffix; event 13 (tool.execution_complete of the view call) is lost",
        },
        {
            "line": 18,
            "kind": "blank_line",
            "must_report": True,
            "event": None,
            "recovers": "nothing (no event)",
        },
        {
            "line": 19,
            "kind": "split_event",
            "must_report": True,
            "event": 19,
            "recovers": "lines 19 and 20 are one event (system.message) split by a "
            "literal newline inside its content; joining them with an escaped newline recovers "
            "it (optional: no figure depends on it)",
        },
        {
            "line": 20,
            "kind": "split_event",
            "must_report": True,
            "event": 19,
            "recovers": "second half of event 19 (see line 19)",
        },
        {
            "line": 26,
            "kind": "crlf",
            "must_report": True,
            "event": 25,
            "recovers": "event 25 (assistant.turn_end, turnId 0), intact: the \\r "
            "is JSON whitespace",
        },
        {
            "line": 27,
            "kind": "not_an_event",
            "must_report": True,
            "event": None,
            "recovers": 'nothing: {"hello":1} is JSON but not an event',
        },
        {
            "line": 31,
            "kind": "invalid_utf8",
            "must_report": True,
            "event": 29,
            "recovers": "event 29 (tool.execution_complete of the bash call) may be "
            "recovered by decoding with replacement (optional: no figure depends on it)",
        },
        {
            "line": 33,
            "kind": "not_an_event",
            "must_report": True,
            "event": None,
            "recovers": "nothing: [1,2] is JSON but not an event",
        },
        {
            "line": 35,
            "kind": "duplicate",
            "must_report": True,
            "event": 31,
            "recovers": "nothing new: a replay of line 34 (same id, an "
            "assistant.turn_start); count it once",
        },
        {
            "line": 42,
            "kind": "cut_last_line",
            "must_report": True,
            "event": 38,
            "recovers": "nothing: event 38 (assistant.message) is cut mid-way, no newline",
        },
        {
            "line": 42,
            "kind": "nul_tail",
            "must_report": True,
            "event": None,
            "recovers": "nothing: 64 NUL bytes follow the cut event",
        },
    ]
    return Sample(
        "k",
        sid,
        "Every kind of damage in one file",
        "A clean 38-event session (3 prompts, 7 LLM calls, the last one open) with damage "
        "applied by the `synth` damage helpers. 42 physical lines; 10 of them "
        "must be reported. The file does not end with a newline: its last line is event 38 "
        "cut mid-way followed by 64 NUL bytes.",
        data,
        figures(
            llm_calls=7,
            completed_turns=6,
            interactions=3,
            user_prompts=3,
            tool_calls=4,
            status="open",
            grep_c=8,
            grep_F_c=8,
            damaged_lines=10,
            start=start,
            models=["gpt-5-mini"],
            shutdowns=0,
            output_tokens=564,
            requests=None,
            premium_requests=None,
        ),
        damage=damage,
        recovery={
            "physical_lines": 42,
            "events_written": 38,
            "events_recovered_min": 34,
            "events_recovered_max": 36,
        },
    )


SCENARIOS: list[Callable[[], Sample]] = [
    scenario_a,
    scenario_b,
    scenario_c,
    scenario_d,
    scenario_e,
    scenario_f,
    scenario_g,
    scenario_h,
    scenario_i,
    scenario_j,
    scenario_k,
]


# ---------------------------------------------------------------------------------------------
# README and expected.json
# ---------------------------------------------------------------------------------------------

README_HEAD = """# Sample sessions

Eleven Copilot CLI session logs written by `tests/make_samples.py` with
`synth` (regenerate with `make samples`; the bytes are the same on every run).
They have the shape of real `events.jsonl` files written by CLI 1.0.78; their ids,
timestamps, prompts and usage numbers are synthetic. Ten use the real layout
`<sessionId>/events.jsonl`, one the flat layout `<sessionId>.jsonl`. Each session id starts
with a different hex digit, so any one can be selected by its first character.

`expected.json` holds the same figures, machine-readable:
`{"<session id>": {"file": "<path relative to this folder>", "llm_calls": ..., ...}}`.

## Definitions of the figures

| figure | meaning |
|---|---|
"""

DEFINITIONS: list[tuple[str, str]] = [
    (
        "`llm_calls`",
        "main-agent `assistant.turn_start` events (no envelope `agentId`), each event id "
        "counted once (a replayed line counts once)",
    ),
    (
        "`completed_turns`",
        "those closed by an `assistant.turn_end`; `open_turns` = `llm_calls` - `completed_turns`",
    ),
    (
        "`subagent_calls`",
        "sub-agent `assistant.message` events (those with envelope `agentId`): one per "
        "sub-agent LLM call",
    ),
    (
        "`interactions`",
        "main-agent `user.message` events (typed prompts plus autopilot nudges)",
    ),
    (
        "`user_prompts` / `autopilot_nudges`",
        "the main-agent `user.message` events that are not / are nudges",
    ),
    (
        "`tool_calls`",
        "main-agent `tool.execution_start` events (a `!cmd` shell escape has none)",
    ),
    (
        "`failed_tool_calls`",
        "main-agent `tool.execution_complete` with `success: false`",
    ),
    (
        "`subagent_tool_calls`",
        "`tool.execution_start` events of sub-agents (envelope `agentId`, or"
        " `data.parentToolCallId` in CLI 1.0.2x)",
    ),
    (
        "`fusion_calls`",
        "HydraFusion phases (`session.fusion_completed.phaseCount`, and the"
        " `assistant.fusion_phase_completed`/`_failed` of a fusion turn with no completion)",
    ),
    (
        "`subagent_runs`",
        "`subagent.started` events",
    ),
    (
        "`errors`",
        "`session.error` events",
    ),
    (
        "`task_complete`",
        "a `session.task_complete` event exists",
    ),
    (
        "`status`",
        "`ended` when a `session.shutdown` comes after the last turn event and no turn is"
        " open, else `open`",
    ),
    (
        "`grep_c`",
        "what `grep -c assistant.turn_start FILE` prints",
    ),
    (
        "`grep_F_c`",
        'what `grep -F -c \'"type":"assistant.turn_start"\' FILE` prints',
    ),
    (
        "`mode`",
        "`autopilot` when the session switched to autopilot or a prompt has `agentMode: "
        '"autopilot"`, else `interactive`',
    ),
    (
        "`damaged_lines`",
        "distinct physical lines (split on `\\n` only) a reader must report: lines that "
        "are not one UTF-8 JSON event object ended by a single `\\n` (blank, CRLF, split,"
        " glued, cut, NUL, invalid UTF-8, not an event) plus replayed duplicates. A raw "
        "U+2028/U+2029 inside a string is valid JSON and is not damage",
    ),
    (
        "`start`",
        "`session.start.data.startTime` (UTC)",
    ),
    (
        "`models`",
        "models with LLM calls, in order of first use",
    ),
    (
        "`shutdowns`",
        "`session.shutdown` events",
    ),
    (
        "`accounting`",
        "for several shutdowns: `cumulative` (take the last) or `per-segment` (sum them);"
        " `null` for fewer than two",
    ),
    (
        "`output_tokens`",
        "sum of `outputTokens` over the recoverable `assistant.message` events, "
        "sub-agents included; equals the output tokens of the shutdown accounting when "
        "there is one",
    ),
    (
        "`requests`",
        "LLM requests per the shutdown accounting (`requests.count` summed over models; "
        "sub-agent calls included, the compaction call and failed calls excluded); `null`"
        " without a shutdown",
    ),
    (
        "`premium_requests`",
        "`totalPremiumRequests` per the shutdown accounting; `null` without a shutdown",
    ),
]

ROWS = [
    "llm_calls",
    "completed_turns",
    "open_turns",
    "subagent_calls",
    "interactions",
    "user_prompts",
    "autopilot_nudges",
    "tool_calls",
    "failed_tool_calls",
    "subagent_tool_calls",
    "fusion_calls",
    "subagent_runs",
    "errors",
    "task_complete",
    "status",
    "grep_c",
    "grep_F_c",
    "mode",
    "damaged_lines",
    "start",
    "models",
    "shutdowns",
    "accounting",
    "output_tokens",
    "requests",
    "premium_requests",
]


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(value) if value else "(none)"
    return str(value)


def readme(samples: list[Sample]) -> str:
    parts = [README_HEAD]
    parts.extend(f"| {name} | {meaning} |\n" for name, meaning in DEFINITIONS)
    for s in samples:
        parts.append(f"\n## {s.key}. {s.title}\n\n")
        parts.append(f"Path: `{s.relpath}`  \nSession id: `{s.session_id}`\n\n{s.shows}\n\n")
        parts.append("| figure | value |\n|---|---|\n")
        for name in ROWS:
            parts.append(f"| `{name}` | {_cell(s.expected[name])} |\n")
        if s.damage:
            parts.append(
                "\nDamage, by physical line (1-based, counting `\\n`-separated lines; "
                "events are numbered in the clean session the damage was applied to):\n\n"
                "| line | damage | must report | what a reader recovers |\n|---|---|---|---|\n"
            )
            for d in s.damage:
                report = "yes" if d["must_report"] else "no"
                parts.append(f"| {d['line']} | {d['kind']} | {report} | {d['recovers']} |\n")
            parts.append(
                "\nA reader must recover 34 of the 38 events: all but 13 and 38 (lost) and 19 "
                "and 29 (recoverable with extra effort, optional). The figures above hold "
                "either way. In `expected.json` this entry also has `damage` (the table "
                "above), `physical_lines` (42), `events_written` (38), `events_recovered_min` "
                "(34) and `events_recovered_max` (36).\n"
            )
    return "".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m tests.make_samples OUTPUT_DIR\n")
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    samples = [make() for make in SCENARIOS]
    expected: dict[str, Any] = {}
    for s in samples:
        path = out / s.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s.data)
        entry: dict[str, Any] = {"file": s.relpath, "scenario": s.key, "title": s.title}
        entry.update(s.expected)
        if s.damage:
            entry["damage"] = s.damage
            entry.update(s.recovery)
        expected[s.session_id] = entry
    (out / "expected.json").write_bytes(orjson.dumps(expected, option=orjson.OPT_INDENT_2) + b"\n")
    (out / "README.md").write_text(readme(samples), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
