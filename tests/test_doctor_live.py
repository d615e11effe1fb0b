"""Every repaired copy of every damaged recording resumes in the real CLI: the newest cached
(or COPILOT_RIG_VERSION), against the rig's model server, which says what conversation the
CLI sent. Skipped, with the fixture's one reason, when no CLI is cached (`make test` fetches
nothing; `make record-live` fetches the newest and runs these on its fresh recordings).

The damaged logs are the recordings (COPILOT_LOGS_RECORDINGS, else tests/recordings) of the
live version when it was recorded, else of the newest, damaged by rig/damage.py, and for kill-9
the log a killed CLI left (resume-kill-9/killed.jsonl).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from copilot_logs.commands.doctor.repair import repair
from copilot_logs.commands.validate import check
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import read_source
from rig.damage import DAMAGES, Damage
from rig.resume import KILLED, dropped, first_prompt, resume_in, verdict

from .conftest import PROJECT

# Starts the real Copilot CLI (tier `process`).
pytestmark = pytest.mark.process

COMMITTED = PROJECT / "tests" / "recordings"


def newest(root: Path, wanted: str) -> Path:
    """The newest version's ``wanted`` (a path under a version folder) in ``root``."""
    found = [p for p in root.glob(f"*/{wanted}") if p.is_file()]
    if not found:
        pytest.skip(f"no {wanted} under {root}")
    return max(found, key=lambda p: [int(x) for x in p.relative_to(root).parts[0].split(".")])


def own_or_newest(root: Path, version: str, wanted: str) -> Path:
    """The live version's own ``wanted`` in ``root`` (a CLI may refuse a log a newer one
    wrote), else the newest version's."""
    own = root / version / wanted
    return own if own.is_file() else newest(root, wanted)


def damaged_log(damage: Damage, version: str) -> bytes:
    if damage.apply is None:
        return own_or_newest(COMMITTED, version, f"resume-kill-9/{KILLED}").read_bytes()
    root = Path(os.environ.get("COPILOT_LOGS_RECORDINGS") or COMMITTED)
    return damage.apply(own_or_newest(root, version, f"{damage.base}/events.jsonl").read_bytes())


@pytest.mark.live
@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.name)
def test_the_repaired_copy_resumes_with_its_history(
    live_cli: tuple[str, Path], tmp_path: Path, damage: Damage
) -> None:
    version, binary = live_cli
    data = damaged_log(damage, version)
    session_id = json.loads(data.split(b"\n", 1)[0])["data"]["sessionId"]
    source = tmp_path / "damaged" / session_id / "events.jsonl"
    source.parent.mkdir(parents=True)
    source.write_bytes(data)
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    done = repair(Source(source, session_id), home / ".copilot" / "session-state")
    copy = done.events.read_bytes()
    assert source.read_bytes() == data
    findings = check(read_source(Source(done.events, session_id)))
    assert findings.filter(findings["severity"] == "error").is_empty(), findings.to_dicts()

    seen = resume_in(binary, version, home, session_id)

    # The rig's criterion for a resume (docs/doctor.md): exit 0, a model call carrying the
    # earlier conversation (its first prompt), every tool call in it answered, no event of the
    # copy dropped by the CLI.
    after = seen.pop("after")
    seen["dropped"] = dropped(copy, after)
    assert verdict(seen, first_prompt(copy)) == "resumed", {
        k: seen[k] for k in ("resume", "history", "dropped")
    }
    assert "assistant" in seen["history"]["roles"]


# --- copies of shapes the recorded damages do not cover (issue 34) ----------------------------


def _without_subagent_result(data: bytes) -> bytes:
    """The sub-agent's own tool.execution_complete removed: its tool call left open while the
    sub-agent goes on and finishes (a 1.0.20 copy closed it after the sub-agent ended)."""
    lines = data.split(b"\n")
    for index, line in enumerate(lines):
        if not line:
            continue
        event = json.loads(line)
        marked = event.get("agentId") or event["data"].get("parentToolCallId")
        if event["type"] == "tool.execution_complete" and marked:
            return b"\n".join(lines[:index] + lines[index + 1 :])
    pytest.skip("the recording has no sub-agent tool call")


def _start_lost(kind: str) -> Callable[[bytes], bytes]:
    """The first ``kind`` line cut in half and the next line glued behind it: the copy keeps
    the end without its start (docs/doctor.md: validate names it)."""

    def damage(data: bytes) -> bytes:
        lines = data.split(b"\n")
        at = next(i for i, line in enumerate(lines) if line and json.loads(line)["type"] == kind)
        return b"\n".join(
            [*lines[:at], lines[at][: len(lines[at]) // 2] + lines[at + 1], *lines[at + 2 :]]
        )

    return damage


SHAPES: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "subagent-tool-open": ("subagent", _without_subagent_result),
    "tool-start-lost": ("one-tool", _start_lost("tool.execution_start")),
    "turn-start-lost": ("one-tool", _start_lost("assistant.turn_start")),
}


@pytest.mark.live
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_repaired_copy_of_a_shape_resumes(
    live_cli: tuple[str, Path], tmp_path: Path, shape: str
) -> None:
    version, binary = live_cli
    base, damage = SHAPES[shape]
    data = damage(own_or_newest(COMMITTED, version, f"{base}/events.jsonl").read_bytes())
    session_id = json.loads(data.split(b"\n", 1)[0])["data"]["sessionId"]
    source = tmp_path / "damaged" / session_id / "events.jsonl"
    source.parent.mkdir(parents=True)
    source.write_bytes(data)
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    done = repair(Source(source, session_id), home / ".copilot" / "session-state")
    assert done.resumable, done.blockers
    copy = done.events.read_bytes()
    seen = resume_in(binary, version, home, session_id)
    after = seen.pop("after")
    seen["dropped"] = dropped(copy, after)
    assert verdict(seen, first_prompt(copy)) == "resumed", {
        k: seen[k] for k in ("resume", "history", "dropped")
    }
