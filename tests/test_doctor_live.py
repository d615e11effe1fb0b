"""Every repaired copy of every damaged recording resumes in the real CLI: the newest cached
(or COPILOT_RIG_VERSION), against the rig's model server, which says what conversation the
CLI sent. Skipped, with the fixture's one reason, when no CLI is cached (`make test` fetches
nothing; `make record-live` fetches the newest and runs these on its fresh recordings).

The damaged logs are the newest recordings (COPILOT_LOGS_RECORDINGS, else tests/recordings)
damaged by rig/damage.py, and for kill-9 the log a killed CLI left (resume-kill-9/killed.jsonl).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from copilot_logs.commands.doctor.repair import repair
from copilot_logs.commands.validate import check
from copilot_logs.ingest.decode.envelope import Source
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


def damaged_log(damage: Damage) -> bytes:
    if damage.apply is None:
        return newest(COMMITTED, f"resume-kill-9/{KILLED}").read_bytes()
    root = Path(os.environ.get("COPILOT_LOGS_RECORDINGS") or COMMITTED)
    return damage.apply(newest(root, f"{damage.base}/events.jsonl").read_bytes())


@pytest.mark.live
@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.name)
def test_the_repaired_copy_resumes_with_its_history(
    live_cli: tuple[str, Path], tmp_path: Path, damage: Damage
) -> None:
    version, binary = live_cli
    data = damaged_log(damage)
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
