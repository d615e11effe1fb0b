"""Hostile surroundings (issue 25): the logs are good, everything around them is not.

Drawn by hypothesis: the environment (output encoding, locale, HOME, XDG_CACHE_HOME,
COPILOT_HOME, TZ), the working folder (deleted, or holding a hostile pyproject.toml), the
output sinks (stdout closed or full, stderr closed or full, a reader gone before the first
byte, stdin closed) and every date and duration option at and past its range. The property
is the one tests/test_fuzz.py keeps for hostile logs: no traceback, no hang past the bound
set here, an exit code from the documented set, and every good session still answered.

The process-level cases run the CLI as a subprocess (descriptors, encodings and the working
folder belong to the process: tier `process`); the option cases run in process, in the fast
tier. `make test` and `make test-slow` draw a few examples of each property
(tests/conftest.py), `make fuzz` many more.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import example, given
from hypothesis import strategies as st

from copilot_logs.cli import main
from copilot_logs.errors import ExitCode
from synth import SessionBuilder, bash
from tests.conftest import FUZZ_SETTINGS, PROJECT

EXIT_CODES = {int(code) for code in ExitCode}
BOUND_SECONDS = 120
"""No run may take longer: past it the run hangs, and the test fails."""

# --- the good sessions ---------------------------------------------------------------------

GOOD_STARTS = ("2026-08-05T07:49:01.551Z", "2026-09-01T23:30:00.000Z")
GOOD_IDS = ("900d0000-0000-4000-8000-000000000001", "900d0000-0000-4000-8000-000000000002")
GOOD_CALLS = 4
"""Two sessions of two main-agent turns each (a tool turn and the task_complete turn)."""


def _good_root(folder: Path) -> Path:
    root = folder / "session-state"
    for number, (session_id, start) in enumerate(zip(GOOD_IDS, GOOD_STARTS, strict=True)):
        b = SessionBuilder(
            session_id=session_id,
            seed=(1 << 20) + number,
            start=start,
            repository=None if number else "café/·ok-中文",
        )
        b.user_message(f"good prompt {number} — naïve 😀")
        b.turn("working", [bash("make test", "ok")])
        b.task_complete_turn("all good")
        b.shutdown()
        b.write_to(root)
    return root


@pytest.fixture(scope="module")
def good_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _good_root(tmp_path_factory.mktemp("good"))


# --- the process and its surroundings --------------------------------------------------------

ENCODINGS = [None, "utf-8", "ascii", "latin-1", "cp1252", "cp437", "ascii:strict"]
LOCALES = [None, "C", "POSIX", "C.UTF-8", "en_US.ISO-8859-1", "tr_TR.UTF-8", "xx_YY.bogus"]
ZONES = [None, "UTC", "posixrules", ":Europe/Berlin", "Not/AZone", "EST5EDT", "<+0330>-3:30"]
#: Where a folder variable may point: a folder, nowhere, a file, a relative name, nothing.
PLACES = ["folder", "missing", "file", "relative", "empty", "unset"]
PYPROJECTS = {
    "none": None,
    "pins strict": b'[tool.copilot-logs]\nstrict = true\nignore = ["T204"]\n',
    "empty select": b"[tool.copilot-logs]\nselect = []\n",
    "deep": b"[tool.copilot-logs]\nselect = " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "not toml": b"[tool.copilot-logs\nselect = \n",
    "not utf-8": b"[tool.copilot-logs]\nselect = ['\xff\xfe']\n",
    "a folder": b"",
}
SINKS = [
    "pipe",
    "stdout closed",
    "stdout full",
    "stderr closed",
    "stderr full",
    "reader gone",
    "stdin closed",
]
REDIRECTS = {
    "stdout closed": ">&-",
    "stdout full": ">/dev/full",
    "stderr closed": "2>&-",
    "stderr full": "2>/dev/full",
}
#: Commands as a user runs them on the good sessions; ROOT and OUT are filled in.
COMMANDS = [
    ["count", "--total", "ROOT"],
    ["count", "--by", "day", "--format", "csv", "ROOT"],
    ["sessions", "--format", "json", "ROOT"],
    ["sessions", "ROOT"],
    ["validate", "--format", "json", "ROOT"],
    ["usage", "--by", "repository", "ROOT"],
    ["timeline", "--latest", "1", "ROOT"],
    ["audit", "--all", "--format", "ndjson", "ROOT"],
    ["report", "-o", "-", "ROOT"],
    ["export", "OUT", "ROOT"],
    ["cache", "info"],
]


@dataclass(frozen=True)
class Surroundings:
    encoding: str | None
    locale: str | None
    zone: str | None
    home: str
    cache: str
    copilot_home: str
    pyproject: str
    cwd_deleted: bool
    sink: str


surroundings = st.builds(
    Surroundings,
    encoding=st.sampled_from(ENCODINGS),
    locale=st.sampled_from(LOCALES),
    zone=st.sampled_from(ZONES),
    home=st.sampled_from(PLACES),
    cache=st.sampled_from(PLACES),
    copilot_home=st.sampled_from(PLACES),
    pyproject=st.sampled_from(sorted(PYPROJECTS)),
    cwd_deleted=st.booleans(),
    sink=st.sampled_from(SINKS),
)


def _place(kind: str, base: Path, name: str) -> str | None:
    """A value for a folder variable: ``unset`` is None (left out of the environment)."""
    target = base / name
    if kind == "folder":
        target.mkdir(exist_ok=True)
    elif kind == "file":
        target.write_bytes(b"not a folder")
    return {"missing": str(base / "missing" / name), "relative": name, "empty": ""}.get(
        kind, None if kind == "unset" else str(target)
    )


def _environment(s: Surroundings, base: Path) -> dict[str, str]:
    keep = ("PATH", "SYSTEMROOT")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env["PYTHONPATH"] = str(PROJECT)
    chosen = {
        "PYTHONIOENCODING": s.encoding,
        "LC_ALL": s.locale,
        "LANG": s.locale,
        "TZ": s.zone,
        "HOME": _place(s.home, base, "home"),
        "XDG_CACHE_HOME": _place(s.cache, base, "cache"),
        "COPILOT_HOME": _place(s.copilot_home, base, "copilot"),
    }
    env.update({key: value for key, value in chosen.items() if value is not None})
    return env


def _working_folder(s: Surroundings, base: Path) -> Path:
    folder = base / "work"
    folder.mkdir(parents=True)
    content = PYPROJECTS[s.pyproject]
    if s.pyproject == "a folder":
        (folder / "pyproject.toml").mkdir()
    elif content is not None:
        (folder / "pyproject.toml").write_bytes(content)
    return folder


def run_in(
    args: list[str], s: Surroundings, base: Path, sink: str
) -> subprocess.CompletedProcess[bytes]:
    """``args`` run as a process in the surroundings ``s``, writing to ``sink``."""
    folder = _working_folder(s, base)  # first: it makes ``base``
    prefix = 'cd "$WORK" && rm -rf "$WORK" && ' if s.cwd_deleted else 'cd "$WORK" && '
    script = f'{prefix}exec "$0" -m copilot_logs "$@" {REDIRECTS.get(sink, "")}'
    if sink == "stdin closed":
        script += " <&-"
    env = {**_environment(s, base), "WORK": str(folder)}
    stdout: int = subprocess.PIPE
    gone_reader = None
    if sink == "reader gone":
        gone_reader, stdout = os.pipe()
        os.close(gone_reader)
    try:
        return subprocess.run(
            ["sh", "-c", script, sys.executable, *args],
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
            timeout=BOUND_SECONDS,
        )
    finally:
        if gone_reader is not None:
            os.close(stdout)


def _good_answer(args: list[str], text: str) -> None:
    """The good sessions are all there, with their figures, in what the command printed."""
    if args[:2] == ["count", "--total"]:
        assert text == f"{GOOD_CALLS}\n"
    elif "--format" in args and args[args.index("--format") + 1] == "json":
        payload = json.loads(text)
        if args[0] == "validate":
            assert payload["summary"]["files"] == len(GOOD_IDS)
        else:
            assert sorted(row["session_id"] for row in payload) == sorted(GOOD_IDS)
            assert sum(row["llm_calls"] for row in payload) == GOOD_CALLS
    elif "ndjson" in args:
        ids = {json.loads(line)["session_id"] for line in text.splitlines()}
        assert ids == set(GOOD_IDS)
    elif "csv" in args:
        lines = text.splitlines()
        calls = lines[0].split(",").index("llm_calls")
        assert sum(int(line.split(",")[calls]) for line in lines[1:]) == GOOD_CALLS
    elif args[0] in ("sessions", "report"):
        assert all(session[:8] in text for session in GOOD_IDS)


def _no_traceback(done: subprocess.CompletedProcess[bytes], shown: str) -> None:
    for marker in (b"Traceback", b"Exception ignored", b"Fatal Python error"):
        assert marker not in done.stderr, shown


@pytest.mark.process  # each case starts `python -m copilot_logs`, twice
@FUZZ_SETTINGS
@given(s=surroundings, command=st.sampled_from(COMMANDS))
def test_hostile_surroundings(s: Surroundings, command: list[str], good_root: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        fill = {"ROOT": str(good_root), "OUT": str(base / "out")}
        args = [fill.get(word, word) for word in command]
        plain = run_in(args, s, base / "plain", "pipe")
        done = run_in(args, s, base / "sink", s.sink)
    shown = f"{s}\n{args}\nexit {done.returncode}\nstderr:\n{done.stderr.decode(errors='replace')}"
    _no_traceback(plain, shown)
    _no_traceback(done, shown)
    assert plain.returncode in EXIT_CODES, shown
    if s.sink in ("stdout closed", "stdout full") and plain.stdout:
        assert done.returncode in (plain.returncode, ExitCode.UNREADABLE), shown
    else:  # the sink changes nothing but what could not be written
        assert done.returncode == plain.returncode, shown
    if s.sink in ("pipe", "stderr closed", "stderr full") and command[0] != "cache":
        assert done.stdout == plain.stdout, shown  # (cache info names its own folder)
    if plain.returncode in (ExitCode.OK, ExitCode.FAILED) and command[0] != "cache":
        _good_answer(args, plain.stdout.decode(_stdout_encoding(s.encoding, s.locale)))


@functools.cache
def _stdout_encoding(encoding: str | None, locale: str | None) -> str:
    """The encoding a Python started with this PYTHONIOENCODING and locale writes stdout in."""
    env = {"PATH": os.environ.get("PATH", "")}
    for key, value in (("PYTHONIOENCODING", encoding), ("LC_ALL", locale), ("LANG", locale)):
        if value is not None:
            env[key] = value
    probe = "import sys; print(sys.stdout.encoding)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, env=env, check=True, timeout=60
    )
    return done.stdout.decode().strip()


# --- every date option at and past its range ---------------------------------------------------

OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
EDGE_DATES = st.sampled_from([date.min, date(1, 1, 2), date(9999, 12, 30), date.max])
MOMENTS = st.one_of(
    st.datetimes(timezones=OFFSETS),
    st.builds(lambda d, z: datetime.combine(d, datetime.min.time(), z), EDGE_DATES, OFFSETS),
    st.builds(lambda d, z: datetime.combine(d, datetime.max.time(), z), EDGE_DATES, OFFSETS),
)
WHEN = st.one_of(
    st.none(),
    MOMENTS.map(lambda m: ("moment", m)),
    st.one_of(st.dates(), EDGE_DATES).map(lambda d: ("date", d)),
    st.sampled_from(["+10000-01-01", "-0001-01-01", "0000-01-01", "10000-01-01", "9999-13-01"]).map(
        lambda text: ("text", text)
    ),
    st.text(max_size=30).map(lambda text: ("text", text)),
)


def _as_option(when: tuple[str, Any] | None) -> str | None:
    if when is None:
        return None
    kind, value = when
    return value.isoformat() if kind != "text" else value


def _expected(since: tuple[str, Any] | None, until: tuple[str, Any] | None) -> set[str] | None:
    """The good sessions inside the window, when the window says it without doubt: aware
    times compared with each start, a bare date far from the starts (local time moves a
    date by less than a day); None when it depends on the local zone."""
    chosen = set(GOOD_IDS)
    for when, keep in ((since, lambda s, w: s >= w), (until, lambda s, w: s < w)):
        if when is None:
            continue
        kind, value = when
        for session, start in zip(GOOD_IDS, GOOD_STARTS, strict=True):
            moment = datetime.fromisoformat(start)
            if kind == "moment":
                if not keep(moment, value):
                    chosen.discard(session)
            elif kind == "date":
                day = (
                    value
                    if when is since
                    else value + timedelta(days=1)
                    if value < date.max
                    else None
                )
                if day is None:
                    continue
                far = abs((day - moment.date()).days) > 1
                if not far:
                    return None
                if not keep(moment, datetime.combine(day, datetime.min.time(), UTC)):
                    chosen.discard(session)
    return chosen


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@FUZZ_SETTINGS
@given(since=WHEN, until=WHEN)
@example(since=("moment", datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))), until=None)
@example(since=("date", date.min), until=("date", date.max))
@example(since=("date", date.max), until=("moment", datetime.max.replace(tzinfo=timezone.min)))
def test_any_date_window(good_root: Path, since: Any, until: Any) -> None:
    options = []
    for name, when in (("--since", since), ("--until", until)):
        text = _as_option(when)
        if text is not None:
            options += [name, text]
    total = invoke("count", "--total", *options, str(good_root))
    listed = invoke("sessions", "--format", "json", *options, str(good_root))
    for result in (total, listed):
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            options,
            result.exception,
        )
        assert result.exit_code in EXIT_CODES, (options, result.output)
    texts = [w for w in (since, until) if w is not None and w[0] == "text"]
    if texts:
        assert total.exit_code in (ExitCode.OK, ExitCode.USAGE), total.output
        return
    assert total.exit_code == listed.exit_code == ExitCode.OK, (options, total.output)
    expected = _expected(since, until)
    if expected is not None:
        assert {row["session_id"] for row in json.loads(listed.stdout)} == expected, options
        assert int(total.stdout) == GOOD_CALLS // 2 * len(expected), options


# --- every duration option at and past its range -------------------------------------------

DURATIONS = st.one_of(
    st.integers(min_value=0, max_value=10**30).map(str),
    st.tuples(
        st.integers(min_value=0, max_value=10**15), st.sampled_from(["s", "m", "h", "d"])
    ).map(lambda pair: f"{pair[0]}{pair[1]}"),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["36500d", "36501d", "99999999999d", "1e999", "-5", "0", "1h30m", ".5"]),
    st.text(max_size=20),
)


@FUZZ_SETTINGS
@given(duration=DURATIONS)
@example(duration="99999999999d")
@example(duration="99999999999999999999999")
def test_any_duration(good_root: Path, duration: str) -> None:
    """audit --running-within judges against now; watch --until-done on a finished run
    ends at once whatever --timeout says (a hang would be past BOUND_SECONDS)."""
    log = next(good_root.glob("*/events.jsonl"))
    for args in (
        ["audit", "--require-task-complete", "--running-within", duration, str(good_root)],
        ["watch", str(log), "--until-done", "--timeout", duration],
    ):
        result = invoke(*args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            result.exception,
        )
        assert result.exit_code in (ExitCode.OK, ExitCode.USAGE), (args, result.output)
        if result.exit_code == ExitCode.OK and args[0] == "audit":
            assert "completed" in result.stdout  # both good runs called task_complete
