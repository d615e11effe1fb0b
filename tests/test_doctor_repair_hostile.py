"""`doctor --repair` on hostile logs (issue 34): the copy stays inside --out, only the bytes it
lists change, a running session is refused, nothing is written when one selected session is
refused, the log's mode is kept, the copy is judged, and what sits beside the log is copied
only when it is a file, a folder or a link.

Every log here is written by hand, byte for byte; what the copy must hold is computed from those
bytes by hand (a replace of the one value that changes), not by the repair.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import main
from copilot_logs.commands import doctor
from copilot_logs.commands.doctor import repair as repair_module
from copilot_logs.commands.doctor.repair import repair
from copilot_logs.ingest.logfile import Source
from rig.damage import lines_of

from .test_doctor_repair import recording, session_folder

SESSION = "5e551011-0000-4000-8000-000000000034"
OLD = "2026-01-02T03:04:05.000Z"


def event(
    kind: str,
    data: str,
    number: int,
    parent: int | None,
    *,
    at: str = OLD,
    session: str = SESSION,
) -> bytes:
    """One event line, written as the CLI writes one (key order, compact), ids e-<n>."""
    parent_id = "null" if parent is None else f'"e-{parent}"'
    return (
        f'{{"type":"{kind}","data":{data},"id":"e-{number}","timestamp":"{at}",'
        f'"parentId":{parent_id}}}'
    ).encode()


def start(session: str = SESSION, version: str = "1.0.102", at: str = OLD) -> bytes:
    return event(
        "session.start",
        f'{{"sessionId":{json.dumps(session)},"version":1,"producer":"copilot-agent",'
        f'"copilotVersion":"{version}","startTime":"{at}"}}',
        1,
        None,
        at=at,
        session=session,
    )


def shutdown(number: int, parent: int) -> bytes:
    return event("session.shutdown", '{"shutdownType":"routine"}', number, parent)


def folder_of(root: Path, data: bytes, name: str = SESSION) -> Path:
    log = root / "src" / name / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(data)
    return log


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["doctor", *args])


def everything_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- 1: the copy stays inside --out ----------------------------------------------------------


@pytest.mark.parametrize(
    "session_id",
    [
        "../.copilot/session-state/planted",
        "../planted",
        "..",
        "a/b",
        "ABSOLUTE",
        "with\x00nul",
    ],
    ids=["climbs-into-state", "climbs", "dot-dot", "nested", "absolute", "nul"],
)
def test_a_session_id_that_is_not_a_folder_name_writes_nothing(
    tmp_path: Path, session_id: str
) -> None:
    if session_id == "ABSOLUTE":
        session_id = str(tmp_path / "absolute-planted")
    data = start(session_id) + b"\n" + shutdown(2, 1) + b"\n"
    log = folder_of(tmp_path, data, "hostile")
    out = tmp_path / "home" / "repaired"
    before = everything_under(tmp_path)
    done = run(str(log), "--repair", "--out", str(out))
    assert done.exit_code == 2, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    [line] = done.stderr.strip().split("\n")
    assert line.startswith("Error: ") and "not a folder name" in line
    # Nothing was written anywhere: not outside --out, not inside it, not --out itself.
    assert everything_under(tmp_path) == before
    assert log.read_bytes() == data


# --- 4: only the listed bytes change ---------------------------------------------------------

# A raw U+2028 inside a string, a 30-digit number, 1E2 and an escaped slash: a re-serialised
# line would write each differently.
ODD = '{"content":"a\u2028b","big":123456789012345678901234567890,"small":1E2,"url":"a\\/b"}'


def test_a_relinked_event_keeps_every_byte_but_its_parent_id(tmp_path: Path) -> None:
    """Line 2 is not an event (set aside); line 3 names it as parent: only line 3's parentId
    changes (and its raw U+2028 is escaped), its numbers and escapes stay as written."""
    garbage = b'{"type":"user.message","data":{"content":"cut'
    third = event("user.message", ODD, 3, 2)
    data = b"\n".join([start(), garbage, third, shutdown(4, 3)]) + b"\n"
    log = folder_of(tmp_path, data)
    done = repair(Source(log, SESSION), tmp_path / "out")
    copy = lines_of(done.events.read_bytes())
    expected = third.replace(b'"parentId":"e-2"', b'"parentId":"e-1"')
    expected = expected.replace("\u2028".encode(), b"\\u2028")
    assert copy[1] == expected + b"\n"
    assert copy[0] == start() + b"\n" and copy[2] == shutdown(4, 3) + b"\n"
    assert [c.what for c in done.changes] == [
        f"set aside {len(garbage) + 1} bytes (sidecar offset 0)",  # with its newline
        "wrote the raw U+2028 as \\u2028",
        "parentId e-2 -> e-1",
    ]


def test_a_counter_is_changed_in_place_and_listed_as_written(tmp_path: Path) -> None:
    """A resume whose eventCount is wrong once line 2 is set aside: that value alone changes,
    and the change names it as it was written (1E2)."""
    resume = event(
        "session.resume",
        '{"resumeTime":"2026-01-02T03:04:06.000Z","eventCount":1E2,"extra":123456789012345678901234567890}',
        3,
        1,
    )
    data = b"\n".join([start(), b"not json", resume, shutdown(4, 3)]) + b"\n"
    log = folder_of(tmp_path, data)
    done = repair(Source(log, SESSION), tmp_path / "out")
    copy = lines_of(done.events.read_bytes())
    assert copy[1] == resume.replace(b'"eventCount":1E2', b'"eventCount":1') + b"\n"
    assert "session.resume eventCount 1E2 -> 1" in [c.what for c in done.changes]


# --- 5: the copy is judged; a sub-agent's open tool closed before its sub-agent ends --------


def test_an_open_subagent_tool_of_a_1_0_20_log_is_closed_before_its_subagent_ends(
    tmp_path: Path,
) -> None:
    """1.0.20 marks a sub-agent's lines with data.parentToolCallId only. Its bash call's
    complete removed (line 10): the closing goes before subagent.completed (line 12 of the
    recording), carries that mark and no envelope agentId, and doctor calls the copy
    resumable (1.0.20 sends a request without the result otherwise: cannot-resume)."""
    whole = lines_of(recording("subagent", "1.0.20"))
    assert json.loads(whole[9])["type"] == "tool.execution_complete"
    damaged = b"".join(whole[:9] + whole[10:])
    log = session_folder(tmp_path, damaged)
    out = tmp_path / "out"
    done = run(str(log), "--repair", "--out", str(out), "--format", "json")
    assert done.exit_code == 0, done.output
    copy = [
        json.loads(line) for line in lines_of((out / log.parent.name / "events.jsonl").read_bytes())
    ]
    types = [e["type"] for e in copy]
    closing = types.index("tool.execution_complete")
    assert types[closing + 1] == "subagent.completed"
    assert copy[closing]["data"]["toolCallId"] == "call_rig_2_0"
    assert copy[closing]["data"]["parentToolCallId"] == "call_rig_1_0"
    assert "agentId" not in copy[closing]
    judged = run(str(out), "--fail-on", "cannot-resume", "--format", "json")
    assert judged.exit_code == 0, judged.output
    [record] = json.loads(done.stdout)
    assert record["resumable"] is True and record["verdict"] != "cannot-resume"


def test_a_copy_doctor_still_calls_cannot_resume_fails_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the string limit at 100 characters every log is past it (cannot-resume): the
    repair writes the copy but exits 1 and names the reason."""
    monkeypatch.setattr(doctor, "STRING_LIMIT", 100)
    data = start() + b"\n" + shutdown(2, 1) + b"\n"
    assert len(data) > 100
    log = folder_of(tmp_path, data)
    done = run(str(log), "--repair", "--out", str(tmp_path / "out"))
    assert done.exit_code == 1, done.output
    assert "the copy is still cannot-resume" in done.stdout
    assert "string limit" in done.stdout
    as_json = run(str(log), "--repair", "--out", str(tmp_path / "out2"), "--format", "json")
    assert as_json.exit_code == 1
    [record] = json.loads(as_json.stdout)
    assert record["resumable"] is False and record["verdict"] == "cannot-resume"


# --- 6: a running session, and what was read -------------------------------------------------


def running_log() -> bytes:
    now = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return start(at=now) + b"\n" + event("user.message", '{"content":"go"}', 2, 1, at=now) + b"\n"


def test_a_running_session_is_refused_unless_insisted(tmp_path: Path) -> None:
    written = running_log()  # once: its times are read off the clock
    log = folder_of(tmp_path, written)
    out = tmp_path / "out"
    refused = run(str(log), "--repair", "--out", str(out))
    assert refused.exit_code == 2, refused.output
    assert "running" in refused.stderr and "--even-if-running" in refused.stderr
    assert not out.exists()
    insisted = run(str(log), "--repair", "--out", str(out), "--even-if-running")
    assert insisted.exit_code == 0, insisted.output
    assert (out / SESSION / "events.jsonl").read_bytes() == written


def test_what_is_appended_while_the_repair_reads_is_in_neither_file_nor_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = start() + b"\n" + event("user.message", '{"content":"go"}', 2, 1) + b"\n"
    appended = event("user.message", '{"content":"later"}', 3, 2) + b"\n"
    log = folder_of(tmp_path, first)
    reads = repair_module.read_files

    def read_then_append(jobs: Any) -> Any:
        with open(log, "ab") as grow:
            grow.write(appended)
        return reads(jobs)

    monkeypatch.setattr(repair_module, "read_files", read_then_append)
    done = repair(Source(log, SESSION), tmp_path / "out")
    assert log.read_bytes() == first + appended * 2  # once per read: the log and the copy
    assert done.events.read_bytes() == first
    assert not done.sidecar.exists() and done.set_aside == []
    report = json.loads((done.folder / "repair.json").read_text())
    assert report["original_sha256"] == hashlib.sha256(first).hexdigest()
    assert report["original_bytes"] == len(first)


# --- 7: the log's mode -----------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="permission bits")
@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_the_copy_sidecar_and_report_keep_the_logs_mode(tmp_path: Path, mode: int) -> None:
    data = start() + b"\n" + b"garbage\n" + shutdown(3, 1) + b"\n"
    log = folder_of(tmp_path, data)
    log.chmod(mode)
    umask = os.umask(0o022)
    try:
        done = repair(Source(log, SESSION), tmp_path / "out")
    finally:
        os.umask(umask)
    for written in (done.events, done.sidecar, done.folder / "repair.json"):
        assert stat.S_IMODE(written.stat().st_mode) == mode, written


# --- 9: every session checked before any is written ------------------------------------------


def test_a_refused_second_session_leaves_the_first_unwritten(tmp_path: Path) -> None:
    other = "5e551011-0000-4000-8000-000000000035"
    first = folder_of(tmp_path / "a", start() + b"\n" + shutdown(2, 1) + b"\n")
    second = folder_of(tmp_path / "b", start(other) + b"\n" + shutdown(2, 1) + b"\n", other)
    out = tmp_path / "out"
    (out / other).mkdir(parents=True)
    done = run(str(first), str(second), "--repair", "--out", str(out))
    assert done.exit_code == 2, done.output
    assert "exists already" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [other]
    assert list((out / other).iterdir()) == []


def test_the_same_session_selected_twice_is_refused_before_writing(tmp_path: Path) -> None:
    """Two logs of one session that went different ways, both selected by path."""
    first = folder_of(tmp_path / "a", start() + b"\n" + shutdown(2, 1) + b"\n")
    second = folder_of(
        tmp_path / "b", start() + b"\n" + event("user.message", '{"content":"b"}', 2, 1) + b"\n"
    )
    out = tmp_path / "out"
    done = run(str(first), str(second), "--repair", "--out", str(out))
    assert done.exit_code == 2, done.output
    assert "selected twice" in done.stderr
    assert not out.exists() or list(out.iterdir()) == []


# --- 10: the sidecar holds the bytes it names ------------------------------------------------


def test_a_split_line_that_is_not_utf8_is_set_aside_as_it_was(tmp_path: Path) -> None:
    """A user.message split by a raw newline, with a 0xFF byte: the sidecar's "line as it was"
    is the two physical lines as they are in the file (offset, length and sha256 name them)."""
    split = event("user.message", '{"content":"one\ntwo \xff"}'.replace("\xff", "@"), 2, 1)
    split = split.replace(b"@", b"\xff")
    data = start() + b"\n" + split + b"\n" + shutdown(3, 2) + b"\n"
    log = folder_of(tmp_path, data)
    done = repair(Source(log, SESSION), tmp_path / "out")
    [piece] = done.set_aside
    assert piece["offset"] == len(start()) + 1 and piece["length"] == len(split)
    assert piece["sha256"] == hashlib.sha256(split).hexdigest()
    assert done.sidecar.read_bytes() == split


def test_a_cr_inside_a_split_string_is_kept_as_an_escape(tmp_path: Path) -> None:
    split = event("user.message", '{"content":"one\r\ntwo"}', 2, 1)
    data = start() + b"\n" + split + b"\n" + shutdown(3, 2) + b"\n"
    log = folder_of(tmp_path, data)
    done = repair(Source(log, SESSION), tmp_path / "out")
    copy = lines_of(done.events.read_bytes())
    assert copy[1] == split.replace(b"\r\n", b"\\r\\n") + b"\n"
    assert json.loads(copy[1])["data"]["content"] == "one\r\ntwo"
    assert not done.sidecar.exists()


# --- 12: what sits at OUT/<id> and beside the log -------------------------------------------


def test_a_dangling_symlink_at_the_copys_place_exists_already(tmp_path: Path) -> None:
    log = folder_of(tmp_path, start() + b"\n" + shutdown(2, 1) + b"\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / SESSION).symlink_to(tmp_path / "nowhere")
    done = run(str(log), "--repair", "--out", str(out))
    assert done.exit_code == 2, done.output
    assert "exists already" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [SESSION]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_named_pipes_and_the_cli_lock_are_not_copied_and_are_listed(tmp_path: Path) -> None:
    log = folder_of(tmp_path, start() + b"\n" + shutdown(2, 1) + b"\n")
    (log.parent / "checkpoints").mkdir()
    (log.parent / "checkpoints" / "index.md").write_text("# none\n")
    os.mkfifo(log.parent / "checkpoints" / "pipe")
    os.mkfifo(log.parent / "top-pipe")
    (log.parent / "inuse.4242.lock").write_text("4242")
    (log.parent / "workspace.yaml").write_text("id: x\n")
    out = tmp_path / "out"
    done = run(str(log), "--repair", "--out", str(out), "--format", "json")
    assert done.exit_code == 0, done.output
    [record] = json.loads(done.stdout)
    assert sorted(entry["path"] for entry in record["not_copied"]) == [
        "checkpoints/pipe",
        "inuse.4242.lock",
        "top-pipe",
    ]
    assert everything_under(out / SESSION) == [
        "checkpoints",
        "checkpoints/index.md",
        "events.jsonl",
        "repair.json",
        "workspace.yaml",
    ]


def test_an_out_inside_the_sessions_folder_is_not_copied_into_the_copy(tmp_path: Path) -> None:
    log = folder_of(tmp_path, start() + b"\n" + shutdown(2, 1) + b"\n")
    (log.parent / "workspace.yaml").write_text("id: x\n")
    out = log.parent / "repaired"
    done = run(str(log), "--repair", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert everything_under(out) == [
        SESSION,
        f"{SESSION}/events.jsonl",
        f"{SESSION}/repair.json",
        f"{SESSION}/workspace.yaml",
    ]


def test_repair_json_holds_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = folder_of(tmp_path, start() + b"\n" + b"garbage\n" + shutdown(3, 1) + b"\n")
    monkeypatch.chdir(tmp_path)
    done = run(os.path.relpath(log), "--repair", "--out", "out")
    assert done.exit_code == 0, done.output
    report = json.loads((tmp_path / "out" / SESSION / "repair.json").read_text())
    assert report["source"] == str(log)
    assert report["events"] == str(tmp_path / "out" / SESSION / "events.jsonl")
    assert report["sidecar"] == str(tmp_path / "out" / SESSION / "events.jsonl.set-aside")


# --- 14: when validate does not pass on the copy ---------------------------------------------


@pytest.mark.parametrize(
    ("lost", "codes"),
    [("tool.execution_start", ["X301", "X306"]), ("assistant.turn_start", ["T201"])],
)
def test_a_lost_start_is_not_invented(tmp_path: Path, lost: str, codes: list[str]) -> None:
    """docs/doctor.md: validate passes on the copy unless the damaged bytes held a tool's or a
    turn's start; then it names the lone end, and doctor still calls the copy resumable."""
    from copilot_logs.commands.validate import check
    from copilot_logs.ingest.reader import read_source

    whole = lines_of(recording("one-tool"))
    at = next(i for i, line in enumerate(whole) if json.loads(line)["type"] == lost)
    cut = whole[at].rstrip(b"\n")
    damaged = b"".join([*whole[:at], cut[: len(cut) // 2], *whole[at + 1 :]])
    log = session_folder(tmp_path, damaged)
    done = repair(Source(log, log.parent.name), tmp_path / "out")
    found = check(read_source(Source(done.events, done.session_id)))
    assert sorted(found.filter(found["severity"] != "info")["code"].to_list()) == codes
    assert done.resumable
