"""`doctor`: each damage of a real recording yields its reason at the right line, judged by
what the CLI version that wrote the log did in a recorded resume; size and growth; the
command's formats, fields and exit codes; the evidence file and docs/doctor.md current.

Truth comes from outside the code: the lines are counted by hand in the recording
(tests/recordings/1.0.102/one-tool: line 2 the prompt, 3 the system prompt, 4 the turn start,
6 the tool request, 7 the tool start, 8 its result, 9 the turn end, 14 the shutdown), and what
each version did from the resume truths the rig recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from copilot_logs.cli import doctor as doctor_cli
from copilot_logs.cli import main
from copilot_logs.commands import doctor as core
from copilot_logs.commands import doctor as evidence
from copilot_logs.ingest.reader import read_bytes
from copilot_logs.render import doctor
from rig.damage import BY_NAME

from .conftest import PROJECT
from .test_doc_fields import documented

RECORDINGS = PROJECT / "tests" / "recordings"
LATER = datetime(2030, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def recording(scenario: str, version: str = "1.0.102") -> bytes:
    path = RECORDINGS / version / scenario / "events.jsonl"
    if not path.is_file():
        pytest.skip(f"no recording {version}/{scenario}")
    return path.read_bytes()


def doctor_of(
    data: bytes, tmp_path: Path, *, now: datetime = LATER, size: int | None = None
) -> core.Doctor:
    log = tmp_path / "events.jsonl"
    log.write_bytes(data)
    if size is not None:
        sparse = tmp_path / "big.jsonl"
        with open(sparse, "wb") as out:
            out.truncate(size)
        log = sparse
    result = read_bytes(data, name=str(log))
    return core.judge([core.facts(result)], files={str(log): log}, now=now, running_within=HOUR)


def reasons(doctor: core.Doctor) -> list[dict[str, Any]]:
    return doctor.reasons.to_dicts()


EXPECTED = {
    # damage: (code, line) of the reason it yields in the 1.0.102 one-tool recording
    "cut-last-line": ("damage", 14),
    "nul-tail": ("damage", 15),
    "glued-line": ("damage", 9),
    "raw-newline": ("damage", 2),
    "orphan-request": ("open-tool-call", 6),
    "orphan-start": ("open-tool-call", 7),
    "no-shutdown": ("no-shutdown", 13),
    "invalid-utf8": ("damage", 2),
    "blank-line": ("damage", 3),
    "duplicate-line": ("damage", 5),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_damage_gives_its_reason_at_its_line(tmp_path: Path, name: str) -> None:
    damaged = BY_NAME[name].apply(recording("one-tool"))  # type: ignore[misc]
    found = [
        (r["code"], r["line"]) for r in reasons(doctor_of(damaged, tmp_path)) if r["damage"] == name
    ]
    assert found == [EXPECTED[name]]


def test_a_tool_call_left_open_mid_log_is_found_where_it_started(tmp_path: Path) -> None:
    damaged = BY_NAME["orphan-mid"].apply(recording("resume"))  # type: ignore[misc]
    found = [(r["code"], r["line"]) for r in reasons(doctor_of(damaged, tmp_path)) if r["damage"]]
    assert found == [("open-tool-call", 7)]


def with_version(data: bytes, version: str) -> bytes:
    first, rest = data.split(b"\n", 1)
    event = json.loads(first)
    event["data"]["copilotVersion"] = version
    return json.dumps(event, separators=(",", ":")).encode() + b"\n" + rest


def test_a_raw_line_separator_is_reported_only_for_the_versions_that_refuse_it(
    tmp_path: Path,
) -> None:
    damaged = BY_NAME["u2028"].apply(recording("one-tool"))  # type: ignore[misc]
    newest = [r for r in reasons(doctor_of(damaged, tmp_path)) if r["damage"] == "u2028"]
    assert newest == []
    old = reasons(doctor_of(with_version(damaged, "1.0.40"), tmp_path))
    assert [(r["line"], r["severity"]) for r in old if r["damage"] == "u2028"] == [(2, "fatal")]


SEVERITY_OF_TRUTH = {
    # what a recorded resume means for the user: written by hand from docs/doctor.md
    "resumed": "info",
    "resumed-dropping": "risk",
    "history-lost": "risk",
    "unanswered-tool-call": "fatal",
    "refused": "fatal",
}
TRUTHS = sorted(RECORDINGS.glob("*/resume-*/truth.json"))
DAMAGE_TRUTHS = [p for p in TRUTHS if p.parent.name not in ("resume-none", "resume-kill-9")]


@pytest.mark.parametrize(
    "truth_file", DAMAGE_TRUTHS, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}"
)
def test_damage_is_judged_by_what_the_version_that_wrote_the_log_did(
    tmp_path: Path, truth_file: Path
) -> None:
    truth = json.loads(truth_file.read_text())
    damage = BY_NAME[truth["damage"]]
    assert damage.apply is not None
    damaged = damage.apply(recording(damage.base, truth["version"]))
    found = [r for r in reasons(doctor_of(damaged, tmp_path)) if r["damage"] == damage.name]
    if damage.name == "u2028" and truth["verdict"] == "resumed":
        assert found == []  # only searched for where a version refuses it
        return
    floor = "risk" if damage.name == "no-shutdown" else "info"
    expected = max(SEVERITY_OF_TRUTH[truth["verdict"]], floor, key=["info", "risk", "fatal"].index)
    assert [r["severity"] for r in found] == [expected]
    assert f"CLI {truth['version']} " in found[0]["message"]


def test_a_killed_session_has_its_open_tool_call_and_no_shutdown(tmp_path: Path) -> None:
    killed = sorted(RECORDINGS.glob("*/resume-kill-9/killed.jsonl"))
    if not killed:
        pytest.skip("no resume-kill-9 evidence")
    for path in killed:
        found = {(r["code"], r["damage"]) for r in reasons(doctor_of(path.read_bytes(), tmp_path))}
        assert ("open-tool-call", "orphan-start") in found
        assert ("no-shutdown", "no-shutdown") in found


def test_the_bytes_of_the_system_prompt_are_counted(tmp_path: Path) -> None:
    found = [r for r in reasons(doctor_of(recording("one-tool"), tmp_path)) if r["code"] == "bytes"]
    assert [(r["line"], r["severity"]) for r in found] == [(3, "info")]
    assert found[0]["message"].startswith(
        "system.message: 1 line, 22324 of the 31210 bytes of events (72%)"
    )


def stretched(data: bytes, days: float) -> bytes:
    """The log with its last event ``days`` after its first."""
    lines = data.split(b"\n")
    first = json.loads(lines[0])["timestamp"]
    start = datetime.fromisoformat(first.replace("Z", "+00:00"))
    last = json.loads(lines[-2])
    last["timestamp"] = (start + timedelta(days=days)).isoformat(timespec="milliseconds")[:23] + "Z"
    lines[-2] = json.dumps(last, separators=(",", ":")).encode()
    return b"\n".join(lines)


def still_written(days: float) -> tuple[bytes, datetime]:
    """The one-tool recording without its shutdown, its last event ``days`` after its first,
    and a ``now`` five minutes after that last event: a session still being written."""
    data = stretched(BY_NAME["no-shutdown"].apply(recording("one-tool")), days=days)  # type: ignore[misc]
    last = json.loads(data.split(b"\n")[-2])["timestamp"]
    return data, datetime.fromisoformat(last.replace("Z", "+00:00")) + timedelta(minutes=5)


def test_size_growth_and_the_day_the_string_limit_is_reached(tmp_path: Path) -> None:
    data, now = still_written(days=2)
    [size] = [r for r in reasons(doctor_of(data, tmp_path, now=now)) if r["code"] == "size"]
    # len(data) bytes over 2 days, counted from now: the date is never before now
    per_day = len(data) / 2
    days_left = (536_870_888 - len(data)) / per_day
    assert size["severity"] == "info" and size["line"] == 13
    message = size["message"]
    assert f"{len(data)} bytes, growing {round(per_day)} bytes a day over 2.0 days" in message
    assert (
        f"in {round(days_left)} days (about {now + timedelta(days=days_left):%Y-%m-%d})" in message
    )


@pytest.mark.parametrize("how", ["shut-down", "left-long-ago", "short-span"])
def test_no_growth_is_forecast_for_a_session_not_being_written_or_too_short(
    tmp_path: Path, how: str
) -> None:
    """A session that shut down, or whose last event is long past, is not growing; a span
    under a day says little about the weeks after it: no rate and no date, whatever the
    size (issue 33: a session shut down months ago got a date in the past)."""
    data, now = still_written(days=0.5 if how == "short-span" else 2)
    if how == "shut-down":
        data = stretched(recording("one-tool"), days=2)
    if how == "left-long-ago":
        now = LATER
    [size] = [r for r in reasons(doctor_of(data, tmp_path, now=now)) if r["code"] == "size"]
    assert size["severity"] == "info"
    assert "growing" not in size["message"] and "about" not in size["message"]
    said = "too short a span" if how == "short-span" else "not being written now"
    assert said in size["message"]


@pytest.mark.parametrize(
    ("size", "severity", "verdict"),
    [
        (300_000_000, "risk", "at-risk"),  # past half of the limit
        (536_870_888, "fatal", "cannot-resume"),  # at the limit
        (536_870_887, "risk", "at-risk"),
    ],
)
def test_a_log_near_or_past_the_string_limit(
    tmp_path: Path, size: int, severity: str, verdict: str
) -> None:
    doctor = doctor_of(stretched(recording("one-tool"), days=400), tmp_path, size=size)
    [reason] = [r for r in reasons(doctor) if r["code"] == "size"]
    assert reason["severity"] == severity
    assert doctor.sessions["verdict"].to_list() == [verdict]


def test_a_log_being_written_is_running_not_judged(tmp_path: Path) -> None:
    data = BY_NAME["no-shutdown"].apply(recording("one-tool"))  # type: ignore[misc]
    last = json.loads(data.split(b"\n")[-2])["timestamp"]
    now = datetime.fromisoformat(last.replace("Z", "+00:00")) + timedelta(minutes=5)
    assert doctor_of(data, tmp_path, now=now).sessions["verdict"].to_list() == ["running"]
    assert doctor_of(data, tmp_path).sessions["verdict"].to_list() == ["at-risk"]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, ["doctor", "--no-cache", *args])


def test_exit_codes_and_fail_on(tmp_path: Path) -> None:
    healthy = tmp_path / "healthy.jsonl"
    healthy.write_bytes(recording("one-tool"))
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(with_version(BY_NAME["glued-line"].apply(recording("one-tool")), "1.0.85"))  # type: ignore[misc]
    assert run(str(healthy)).exit_code == 0
    assert run(str(healthy), str(damaged)).exit_code == 1
    assert run(str(damaged), "--fail-on", "none").exit_code == 0
    assert run(str(damaged), "--fail-on", "at-risk").exit_code == 0
    assert run(str(damaged), "--fail-on", "cannot-resume").exit_code == 1
    wrong = run(str(damaged), "--fail-on", "broken")
    assert wrong.exit_code == 2 and "unknown verdict broken" in wrong.output


def test_json_is_one_object_per_session_with_its_reasons(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(with_version(BY_NAME["glued-line"].apply(recording("one-tool")), "1.0.85"))  # type: ignore[misc]
    done = run(str(damaged), "--format", "json")
    [session] = json.loads(done.stdout)
    assert session["verdict"] == "cannot-resume" and session["cli_version"] == "1.0.85"
    fatal = [r for r in session["reasons"] if r["severity"] == "fatal"]
    assert [(r["line"], r["code"], r["damage"]) for r in fatal] == [(9, "damage", "glued-line")]
    assert documented("doctor.md", "JSON fields") == set(session)
    assert documented("doctor.md", "Reason fields") == set(fatal[0])
    lines = run(str(damaged), "--format", "ndjson").stdout.splitlines()
    assert [json.loads(line)["session_id"] for line in lines] == [session["session_id"]]


def test_the_verdict_names_of_the_help_are_the_core_ones() -> None:
    assert doctor_cli.VERDICT_NAMES == core.VERDICTS
    assert doctor_cli.DEFAULT_FAIL_ON.split(",") == list(core.DEFAULT_FAIL_ON)


def test_the_evidence_module_is_generated_from_the_recorded_truths() -> None:
    from rig.resume import EVIDENCE, evidence_json

    if not TRUTHS:
        pytest.skip("no resume truths in tests/recordings")
    assert (PROJECT / EVIDENCE).read_text() == evidence_json(RECORDINGS)


def test_the_table_of_docs_doctor_is_the_evidence() -> None:
    text = (PROJECT / "docs" / "doctor.md").read_text(encoding="utf-8")
    assert doctor.rewrite(text) == text
    assert set(evidence.OUTCOMES) >= {d for d in BY_NAME}


def test_the_table_names_every_recorded_version() -> None:
    versions = {p.parent.parent.name for p in TRUTHS}
    assert versions == set(evidence.VERSIONS) or not versions
    assert os.path.isfile(PROJECT / "docs" / "doctor.md")


def test_raw_line_separators_are_found_across_block_boundaries(tmp_path: Path) -> None:
    from copilot_logs.commands.doctor import _separator_lines

    sep, par = "\u2028".encode(), "\u2029".encode()
    log = tmp_path / "events.jsonl"
    log.write_bytes(b'{"a":"x' + sep + b'"}\n{"b":1}\n{"c":"' + par + b'y"}\n{"d":"' + sep + b'"}')
    for block in (1, 2, 3, 4, 5, 7, 64):
        assert _separator_lines(log, block) == [1, 3, 4], block


def test_standard_input_is_measured_by_the_bytes_read(tmp_path: Path) -> None:
    data = recording("one-tool")
    done = CliRunner().invoke(main, ["doctor", "-", "--format", "json"], input=data)
    assert done.exit_code == 0, done.output
    [session] = json.loads(done.stdout)
    assert session["bytes"] == len(data) - 1  # the last newline is not an event's


def test_a_sub_agent_that_never_finished_is_out_of_place(tmp_path: Path) -> None:
    lines = recording("subagent").split(b"\n")
    kept = [line for line in lines if b'"type":"subagent.completed"' not in line]
    assert len(kept) == len(lines) - 1
    found = [
        (r["code"], r["line"], r["severity"])
        for r in reasons(doctor_of(b"\n".join(kept), tmp_path))
    ]
    # line 8 is the sub-agent's subagent.started in the 1.0.102 recording
    assert ("out-of-place", 8, "risk") in found


def test_the_string_limit_counts_characters_as_javascript_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot_logs.commands.doctor import utf16_units

    text = tmp_path / "text"
    text.write_bytes("aé€😀".encode())  # 1 + 2 + 3 + 4 bytes; 1 + 1 + 1 + 2 UTF-16 units
    assert utf16_units(text) == 5
    data = stretched(recording("one-tool"), days=1)
    accents = "é".encode() * 200_000  # 400,000 bytes, 200,000 characters
    monkeypatch.setattr(core, "STRING_LIMIT", len(data) + 300_000)
    monkeypatch.setattr(core, "HALF_LIMIT", 10**12)
    log = tmp_path / "events.jsonl"
    log.write_bytes(data + accents)
    result = read_bytes(data, name=str(log))
    judged = core.judge([core.facts(result)], files={str(log): log}, now=LATER, running_within=HOUR)
    [size] = [r for r in judged.reasons.to_dicts() if r["code"] == "size"]
    assert size["severity"] != "fatal"  # bytes past the limit, characters not
    log.write_bytes(data + b"e" * 400_000)
    judged = core.judge([core.facts(result)], files={str(log): log}, now=LATER, running_within=HOUR)
    [size] = [r for r in judged.reasons.to_dicts() if r["code"] == "size"]
    assert size["severity"] == "fatal"
    javascript_length = len(data.decode().encode("utf-16-le")) // 2 + 400_000
    assert f"({javascript_length} characters)" in size["message"]


@pytest.mark.parametrize(("days", "severity"), [(1.5, "risk"), (0.5, "info")])
def test_a_fast_growth_is_a_risk_only_when_measured_over_a_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: float, severity: str
) -> None:
    # about 31 kB; a limit of 500,000 characters is reached in (500,000 - bytes) / rate days:
    # about 22 days at the rate of 1.5 days, 7.5 at that of half a day: within 30 both
    monkeypatch.setattr(core, "STRING_LIMIT", 500_000)
    data, now = still_written(days=days)
    [size] = [r for r in reasons(doctor_of(data, tmp_path, now=now)) if r["code"] == "size"]
    assert size["severity"] == severity


def test_a_warm_run_through_the_store_says_what_a_cold_one_does() -> None:
    from .conftest import SAMPLES

    cold = CliRunner().invoke(main, ["doctor", str(SAMPLES), "--format", "json"])
    warm = CliRunner().invoke(main, ["doctor", str(SAMPLES), "--format", "json"])
    assert cold.exit_code == warm.exit_code == 1
    assert cold.stdout == warm.stdout


@pytest.mark.process
def test_other_processes_give_the_reasons_in_the_same_order() -> None:
    """polars hashes with a new seed in each process: the same order of reasons."""
    from .conftest import SAMPLES

    cold = CliRunner().invoke(main, ["doctor", str(SAMPLES), "--format", "json"])
    for _ in range(3):
        other = subprocess.run(
            [
                sys.executable,
                "-m",
                "copilot_logs",
                "doctor",
                "--no-cache",
                str(SAMPLES),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert other.returncode == 1 and other.stdout == cold.stdout


@pytest.mark.parametrize(
    ("version", "recorded"),
    [("1.0.50", "1.0.40"), ("1.0.80", "1.0.78"), ("1.0.104", "1.0.102"), ("0.0.430", "1.0.20")],
)
def test_a_version_not_recorded_is_judged_by_the_nearest_one_at_or_below_it(
    tmp_path: Path, version: str, recorded: str
) -> None:
    truth_file = RECORDINGS / recorded / "resume-glued-line" / "truth.json"
    if not truth_file.is_file():
        pytest.skip(f"no resume evidence of {recorded}")
    outcome = json.loads(truth_file.read_text())["verdict"]
    damaged = with_version(BY_NAME["glued-line"].apply(recording("one-tool")), version)  # type: ignore[misc]
    doctor = doctor_of(damaged, tmp_path)
    [found] = [r for r in reasons(doctor) if r["damage"] == "glued-line"]
    assert found["severity"] == SEVERITY_OF_TRUTH[outcome]
    assert f"CLI {version} (judged by {recorded}, the nearest recorded version)" in found["message"]
    assert doctor.sessions["judged_by"].to_list() == [recorded]
