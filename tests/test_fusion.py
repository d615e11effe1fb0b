"""HydraFusion phases are counted beside the turn pairs, as ``fusion_calls``.

No recording shows HydraFusion (the CLI refuses it offline: docs/compatibility.md), so the log
here is shaped by the CLI's published schema: ``assistant.fusion_phase_completed`` (or
``_failed``) per phase, then ``session.fusion_completed {phaseCount}``, inside the main agent's
turn pair. The expectation is a hand count of the log written.
"""

from __future__ import annotations

from typing import Any

import orjson
from click.testing import CliRunner

import synth
from copilot_logs.cli import main
from copilot_logs.ingest.reader import read_bytes


def phase(builder: synth.SessionBuilder, fusion: str, number: int, kind: str) -> None:
    builder.event(
        f"assistant.fusion_phase_{kind}",
        {
            "fusionId": fusion,
            "phaseId": f"{fusion}-phase-{number}",
            "phaseKind": "primary" if number == 1 else "critic",
            "model": "gpt-5",
            "usage": {"requestCount": 1, "inputTokens": 900, "outputTokens": 40},
        },
    )


def fusion_log() -> bytes:
    """Two fusion turns: one that completed with 3 phases (one failed), one cut off after 2;
    and a plain turn."""
    builder = synth.SessionBuilder(seed=5)
    builder.user_message("fuse")
    builder.turn("fused answer", end=False)
    phase(builder, "f1", 1, "completed")
    phase(builder, "f1", 2, "failed")
    phase(builder, "f1", 3, "completed")
    builder.event(
        "session.fusion_completed",
        {"fusionId": "f1", "turnId": "0", "phaseCount": 3, "requestCount": 3},
    )
    builder.end_turn()
    builder.turn("plain answer")
    builder.turn("second fusion", end=False)
    phase(builder, "f2", 1, "completed")
    phase(builder, "f2", 2, "completed")
    return builder.to_bytes()


def counted(data: bytes) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["count", "--no-cache", "--format", "json", "-"], input=data)
    assert result.exit_code == 0, result.output
    (row,) = orjson.loads(result.stdout)
    return dict(row)


def test_fusion_phases_are_counted_beside_the_turn_pairs() -> None:
    row = counted(fusion_log())
    assert row["llm_calls"] == 3  # the turn pairs, each once
    assert row["fusion_calls"] == 3 + 2  # f1's phaseCount, and f2's phases so far


def test_a_fusion_completion_counts_its_phases_once() -> None:
    """The phase lines of a completed fusion turn are not counted again beside its
    phaseCount; its phaseCount stands even when a phase line was lost."""
    lines = fusion_log().splitlines()
    lost = next(i for i, line in enumerate(lines) if b'"f1-phase-2"' in line)
    data = b"\n".join(lines[:lost] + lines[lost + 1 :]) + b"\n"
    assert counted(data)["fusion_calls"] == 3 + 2


def test_fusion_events_are_known_and_persisted() -> None:
    from copilot_logs.commands import validate

    found = validate.check(read_bytes(fusion_log(), "s.jsonl"))
    assert set(found["code"]) <= {"T204"}  # the second fusion turn is left open
