"""docs/compatibility.md, generated from the recordings:
``python -m rig.matrix > docs/compatibility.md``.

The page is the matrix of CLI versions by scenarios (what each recording holds, from the model
server's truth), what changed in the log format between versions (read from the logs
themselves), and what ``copilot-logs validate`` says of the recordings that are not clean.
tests/test_compatibility.py fails when the page is stale.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from copilot_logs import api
from copilot_logs.ingest import cli_format
from rig.scenarios import SCENARIOS

RECORDINGS = Path(__file__).resolve().parent.parent / "tests" / "recordings"
SCHEMES = {
    "parent": "`data.parentToolCallId` = the task's toolCallId, no `agentId`",
    "task-id": "envelope `agentId` = the task's toolCallId",
    "instance": "envelope `agentId` = an instance id, linked by `subagent.started`",
}


def _versions(root: Path) -> list[str]:
    names = [p.name for p in root.iterdir() if p.is_dir() and cli_format.version_key(p.name)]
    return sorted(names, key=lambda name: cli_format.version_key(name) or ())


def _truth(folder: Path) -> dict[str, Any]:
    truth: dict[str, Any] = json.loads((folder / "truth.json").read_text())
    return truth


def _events(folder: Path) -> list[dict[str, Any]]:
    log = folder / "events.jsonl"
    return [json.loads(line) for line in log.read_bytes().splitlines()] if log.is_file() else []


def _cell(folder: Path) -> str:
    """What one recording holds: the calls the server answered (main + sub-agents)."""
    if not (folder / "truth.json").is_file():
        return ""
    truth = _truth(folder)
    if truth["outcome"] != "recorded":
        return str(truth["outcome"])
    served = [r for r in truth["requests"] if r["status"] == 200]
    subs = sum(1 for r in served if r["agent"] != "main")
    calls = f"{len(served) - subs} + {subs}" if subs else str(len(served))
    return f"✓ {calls}"


def _scheme(events: list[dict[str, Any]]) -> str | None:
    """How the sub-agent's lines of a ``subagent`` recording are marked."""
    started = [e for e in events if e["type"] == "subagent.started"]
    tools = [
        e
        for e in events
        if e["type"] == "tool.execution_start" and e["data"].get("toolName") == "bash"
    ]
    if not started or not tools:
        return None
    key, mark = started[0]["data"].get("toolCallId"), tools[0].get("agentId")
    if mark is None:
        return "parent"
    return "task-id" if mark == key else "instance"


def _format_rows(root: Path, versions: list[str]) -> Iterator[str]:
    yield "| version | sub-agent lines marked by | sub-agent turn pairs | per-call usage records |"
    yield "|---|---|---|---|"
    for version in versions:
        events = _events(root / version / "subagent")
        scheme = _scheme(events)
        sub_turns = any(e["type"] == "assistant.turn_start" and "agentId" in e for e in events)
        records = any(e["type"] == "session.usage_record" for e in events)
        yield (
            f"| {version} | {SCHEMES[scheme] if scheme else '?'} | "
            f"{'yes' if sub_turns else 'no'} | {'yes' if records else 'no'} |"
        )


def _first_seen(root: Path, versions: list[str]) -> Iterator[str]:
    seen: dict[str, str] = {}
    for version in versions:
        for folder in sorted((root / version).iterdir()):
            for event in _events(folder):
                seen.setdefault(event["type"], version)
    first = versions[0]
    newer = sorted((v, t) for t, v in seen.items() if v != first)
    oldest = ", ".join(f"`{t}`" for t, v in sorted(seen.items()) if v == first)
    yield f"Every type below is in the CLI's published schema. Types in the {first} logs: {oldest}."
    yield ""
    yield "| first seen in | event types |"
    yield "|---|---|"
    for version in versions:
        types = [t for v, t in newer if v == version]
        if types:
            yield f"| {version} | {', '.join(f'`{t}`' for t in types)} |"


NOT_CLEAN = ("interrupted", "kill-resume")
"""The scenarios whose logs hold a run stopped in the middle of a tool."""


def _findings(root: Path, versions: list[str]) -> Iterator[str]:
    """What validate says of the recordings of scenarios that are not clean."""
    yield "| version | scenario | findings |"
    yield "|---|---|---|"
    for version in versions:
        for scenario in SCENARIOS:
            folder = root / version / scenario.name
            if scenario.name not in NOT_CLEAN or not (folder / "events.jsonl").is_file():
                continue
            report = api.validate(api.read_file(folder / "events.jsonl"), strict=True)
            codes = sorted(set(report.findings["code"].to_list()))
            yield f"| {version} | {scenario.name} | {', '.join(codes) or 'none'} |"


def page(root: Path = RECORDINGS) -> str:
    versions = _versions(root)
    scenarios = [s.name for s in SCENARIOS]
    lines = [
        "# Compatibility: the Copilot CLI versions copilot-logs is checked against",
        "",
        "<!-- Generated by `python -m rig.matrix > docs/compatibility.md` from tests/recordings/:",
        "     do not edit. tests/test_compatibility.py fails when it is stale. -->",
        "",
        f"copilot-logs reads the logs of Copilot CLI **{versions[0]} to {versions[-1]}**: every "
        "figure below was checked on logs the real CLI of each version wrote, offline, against "
        "the rig's model server ([recordings.md](recordings.md)). The recordings were made with",
        "",
        "```bash",
        f'make record VERSIONS="{" ".join(versions)}"',
        "```",
        "",
        "and the conformance tests (`tests/test_conformance.py`, and `tests/test_kill_resume.py` "
        "for the runs killed and resumed) compare what `count`, `count --total`, `validate`, "
        "`timeline`, `sessions`, `watch`, `usage`, `audit` and `doctor` say of each log with the "
        "server's truth. A log written by a CLI newer than "
        f"{versions[-1]} gets an info finding from `validate` (R604) naming its version.",
        "",
        "## The matrix",
        "",
        "Each cell: ✓ and the LLM calls the server answered (main agent + sub-agents), all "
        "found by `count`; `unsupported` when the version refused the scenario's flags; "
        "`failed` when the run failed otherwise.",
        "",
        "| version | " + " | ".join(scenarios) + " |",
        "|---|" + "---|" * len(scenarios),
    ]
    for version in versions:
        cells = [_cell(root / version / name) for name in scenarios]
        lines.append(f"| {version} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## How the log format moved",
        "",
        "How a sub-agent's lines are marked (`subagent` recording of each version); every "
        "command keys a sub-agent by its task call's `toolCallId` in every scheme:",
        "",
        *_format_rows(root, versions),
        "",
        "Event types on disk, by the first recorded version that wrote them:",
        "",
        *_first_seen(root, versions),
        "",
        "The `--output-format json` stream holds the same events as the log (and ephemeral "
        "ones, and a closing `result` line that no schema names). The known types and which "
        "are ephemeral come from the schemas the CLI publishes "
        "(`copilot_logs/ingest/schema_types.json`, made by `python -m rig.event_schema "
        "--fetch`): the Python SDK's list (github-copilot-sdk 1.0.27, CLI 1.0.104) lacks "
        "`session.usage_record`, which the schema inside CLI 1.0.102 names and its logs hold.",
        "",
        "## What validate says of the recordings that are not clean",
        "",
        "A run interrupted by SIGINT while a tool runs leaves the tool never completed: info "
        "findings only (T205 and X307 before 1.0.85, which write no `turn_end` then; X308 "
        "from 1.0.85, which end the turn next to an `abort`). From 1.0.70 the shutdown's "
        "`eventsFileSizeBytes` is taken before the interrupt's lines are written, which R602 "
        "knows. 1.0.78 wrote a second `abort` after the shutdown had taken its place in the "
        "chain: those lines are out of order (E104, E105), as the log shows them.",
        "",
        "A run killed with SIGKILL while its tool runs, then resumed with `--resume` "
        "(`kill-resume`), leaves the CLI's own shape after a crash or a kill: the killed run's "
        "lines end cleanly after the `tool.execution_start`, no version writes a `turn_end` for "
        "the killed turn, only 1.0.102 closes the killed tool on resume (a "
        "`tool.execution_complete` with error code `interrupted`, and a `session.warning`), and "
        "before 1.0.102 the resumed run's shutdown does not count the killed call. copilot-logs "
        "reads each run of the CLI as a segment of the session: validate notes the killed turn "
        "(T206) and, before 1.0.102, the killed tool (X309) as interrupted by the resume (info, "
        "no error or warning), `timeline` shows them interrupted, and `usage` says which "
        "segment's calls no shutdown holds (`tests/test_kill_resume.py`).",
        "",
        *_findings(root, versions),
        "",
        "## Not recorded",
        "",
        "HydraFusion (experimental; `assistant.fusion_phase_completed`, "
        "`session.fusion_completed`) cannot be reached offline: the CLI refuses it with "
        '"the HYDRAFUSION feature flag is disabled" with every setting tried (`--experimental`, '
        "`COPILOT_FEATURE_FLAGS`, `enabledFeatureFlags` in the user settings), and it needs "
        "GitHub's model service. `count`'s `fusion_calls` follows the CLI's published schema "
        "only. Compaction is not reached by the rig's short sessions.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    sys.stdout.write(page())
    return 0


if __name__ == "__main__":
    sys.exit(main())
