"""`doctor --repair`: a copy of a damaged session that the CLI can resume, the original never
touched, every change listed, every damaged byte kept in the sidecar.

The damaged logs are recordings of the real CLI (tests/recordings) damaged by rig/damage.py;
what each copy must hold is known from the recording itself (its lines before the damage) and
from what the CLI wrote when it resumed a killed session (resume-kill-9/appended.jsonl).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from copilot_logs.commands.doctor.repair import Repair, repair
from copilot_logs.commands.validate import check
from copilot_logs.errors import SelectionError
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import read_bytes, read_source
from rig.damage import DAMAGES, lines_of

from .conftest import PROJECT

RECORDINGS = PROJECT / "tests" / "recordings"
VERSION = "1.0.102"
BYTE_DAMAGES = [damage for damage in DAMAGES if damage.apply is not None]


def recording(scenario: str, version: str = VERSION) -> bytes:
    return (RECORDINGS / version / scenario / "events.jsonl").read_bytes()


def session_folder(tmp_path: Path, data: bytes, name: str = "src") -> Path:
    """``data`` as a session folder's events.jsonl; the folder is named after its session."""
    session_id = json.loads(data.split(b"\n", 1)[0])["data"]["sessionId"]
    folder = tmp_path / name / session_id
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes(data)
    return folder / "events.jsonl"


def repaired(tmp_path: Path, data: bytes) -> tuple[Path, Repair]:
    log = session_folder(tmp_path, data)
    return log, repair(Source(log, log.parent.name), tmp_path / "out")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", BYTE_DAMAGES, ids=lambda d: d.name)
def test_the_copy_validates_keeps_every_event_and_the_original_is_untouched(
    tmp_path: Path, damage: Any
) -> None:
    damaged = damage.apply(recording(damage.base))
    log = session_folder(tmp_path, damaged)
    before = sha256(log)
    done = repair(Source(log, log.parent.name), tmp_path / "out")
    assert sha256(log) == before and log.read_bytes() == damaged
    copy = read_source(Source(done.events, done.session_id))
    errors = check(copy).filter(pl.col("severity") == "error")
    assert errors.is_empty(), errors.to_dicts()
    damage_kinds = {"cut-line", "nul-bytes", "truncated-event", "split-event", "blank-line"}
    assert not set(copy.diagnostics["kind"]) & (damage_kinds | {"duplicate-id", "invalid-utf8"})
    kept = set(copy.events["event_id"])
    assert set(read_bytes(damaged).events["event_id"]) <= kept


@pytest.mark.parametrize("damage", BYTE_DAMAGES, ids=lambda d: d.name)
def test_every_byte_set_aside_is_in_the_sidecar_as_it_was(tmp_path: Path, damage: Any) -> None:
    damaged = damage.apply(recording(damage.base))
    _, done = repaired(tmp_path, damaged)
    sidecar = done.sidecar.read_bytes() if done.set_aside else b""
    assert len(sidecar) == done.set_aside_bytes
    for piece in done.set_aside:
        original = damaged[piece["offset"] : piece["offset"] + piece["length"]]
        kept = sidecar[piece["sidecar_offset"] : piece["sidecar_offset"] + piece["length"]]
        assert kept == original
        assert hashlib.sha256(original).hexdigest() == piece["sha256"]
    report = json.loads((done.folder / "repair.json").read_text())
    assert report["original_sha256"] == hashlib.sha256(damaged).hexdigest()
    assert report["changes"] == [
        {"line": c.line, "what": c.what, "why": c.why} for c in done.changes
    ]


def test_a_cut_last_line_and_a_nul_tail_go_to_the_sidecar_and_nothing_else(
    tmp_path: Path,
) -> None:
    whole = recording("one-tool")
    last = lines_of(whole)[-1].rstrip(b"\n")
    cut = whole[: len(whole) - len(last) - 1] + last[: len(last) // 2]
    _, done = repaired(tmp_path / "cut", cut + b"\x00" * 100)
    assert done.sidecar.read_bytes() == last[: len(last) // 2] + b"\x00" * 100
    assert done.events.read_bytes() == whole[: len(whole) - len(last) - 1]


def test_a_split_event_is_joined_back_into_the_line_it_was(tmp_path: Path) -> None:
    whole = recording("one-tool")
    damaged = next(d for d in DAMAGES if d.name == "raw-newline").apply(whole)
    assert damaged.count(b"\n") == whole.count(b"\n") + 1
    _, done = repaired(tmp_path, damaged)
    assert done.events.read_bytes() == whole
    assert [c.what for c in done.changes] == ["joined lines 2-3 into one event"]


def test_a_glued_line_is_separated_and_the_lost_turn_end_replaced(tmp_path: Path) -> None:
    whole = lines_of(recording("one-tool"))
    damaged = next(d for d in DAMAGES if d.name == "glued-line").apply(b"".join(whole))
    _, done = repaired(tmp_path, damaged)
    copy = lines_of(done.events.read_bytes())
    assert len(copy) == len(whole)
    # Line 9 (the first turn_end) was cut and line 10 glued behind it: line 10 is back on a
    # line of its own, after a turn_end for turn 0 (its own was lost), the chain relinked.
    added, glued = json.loads(copy[8]), json.loads(copy[9])
    original_end, original_start = json.loads(whole[8]), json.loads(whole[9])
    assert added["type"] == "assistant.turn_end" and added["data"] == original_end["data"]
    assert added["parentId"] == json.loads(whole[7])["id"]
    assert glued["id"] == original_start["id"] and glued["parentId"] == added["id"]
    assert {k: v for k, v in glued.items() if k != "parentId"} == {
        k: v for k, v in original_start.items() if k != "parentId"
    }
    assert copy[:8] == whole[:8]
    assert done.sidecar.read_bytes() == whole[8].rstrip(b"\n")[: len(whole[8].rstrip()) // 2]


def kill9_closing(version: str = VERSION) -> dict[str, Any]:
    """The tool.execution_complete the real CLI wrote when it resumed a killed session."""
    appended = RECORDINGS / version / "resume-kill-9" / "appended.jsonl"
    if not appended.is_file():
        pytest.skip(f"no resume-kill-9 evidence of {version} in tests/recordings")
    for line in appended.read_bytes().split(b"\n"):
        if line.strip() and json.loads(line)["type"] == "tool.execution_complete":
            return dict(json.loads(line)["data"])
    raise AssertionError("the CLI wrote no tool.execution_complete when it resumed")


@pytest.mark.parametrize("name", ["orphan-start", "orphan-mid"])
def test_an_open_tool_call_is_closed_as_the_cli_closes_it(tmp_path: Path, name: str) -> None:
    damage = next(d for d in DAMAGES if d.name == name)
    _, done = repaired(tmp_path, damage.apply(recording(damage.base)))
    events = [json.loads(line) for line in lines_of(done.events.read_bytes())]
    closings = [
        e
        for e in events
        if e["type"] == "tool.execution_complete" and e["data"]["toolCallId"] == "call_rig_1_0"
    ]
    assert len(closings) == 1
    cli = kill9_closing()
    cli.pop("toolCallId")
    assert {k: v for k, v in closings[0]["data"].items() if k != "toolCallId"} == cli
    where = events.index(closings[0])
    following = events[where + 1]["type"] if where + 1 < len(events) else None
    assert following == ("assistant.turn_end" if name == "orphan-mid" else None)


def test_the_siblings_of_the_log_are_copied_and_the_copy_is_never_written_over(
    tmp_path: Path,
) -> None:
    log = session_folder(tmp_path, recording("one-tool"))
    (log.parent / "workspace.yaml").write_text("id: x\n")
    (log.parent / "checkpoints").mkdir()
    (log.parent / "checkpoints" / "index.md").write_text("# none\n")
    done = repair(Source(log, log.parent.name), tmp_path / "out")
    assert (done.folder / "workspace.yaml").read_text() == "id: x\n"
    assert (done.folder / "checkpoints" / "index.md").read_text() == "# none\n"
    assert done.changes == [] and done.events.read_bytes() == log.read_bytes()
    with pytest.raises(SelectionError, match="exists already"):
        repair(Source(log, log.parent.name), tmp_path / "out")
    with pytest.raises(SelectionError, match="exists already"):
        repair(Source(log, log.parent.name), log.parent.parent)


def test_the_cli_repairs_and_lists_each_change(tmp_path: Path) -> None:
    damage = next(d for d in DAMAGES if d.name == "glued-line")
    log = session_folder(tmp_path, damage.apply(recording("one-tool")))
    runner = CliRunner()
    done = runner.invoke(
        main, ["doctor", str(log), "--repair", "--out", str(tmp_path / "out"), "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    [record] = json.loads(done.stdout)
    assert [(c["line"], c["what"].split(" ")[0]) for c in record["changes"]] == [
        (9, "set"),
        (9, "added"),
        (9, "parentId"),
    ]
    assert record["set_aside"][0]["length"] == 92


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--repair"], "--out"),
        (["--repair", "--out", "x", "-"], "standard input"),
        (["--out", "x"], "--out goes with --repair"),
    ],
)
def test_repair_refuses_what_it_cannot_do(tmp_path: Path, args: list[str], words: str) -> None:
    log = session_folder(tmp_path, recording("one-tool"))
    selector = [] if "-" in args else [str(log)]
    done = CliRunner().invoke(main, ["doctor", *selector, *args], input="")
    assert done.exit_code == 2, done.output
    assert words in done.output
