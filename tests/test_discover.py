"""Selectors: ids, prefixes, session folders, files, folders of sessions, stdin, dates."""

from __future__ import annotations

import builtins
import io
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import synth
from copilot_logs.cli import main
from copilot_logs.errors import ExitCode, SelectionError, UnsupportedFormatError
from copilot_logs.ingest.discover import Selection, default_root, find_sources, parse_when


def write_session(folder: Path, session_id: str, start: str, *, flat: bool = False) -> Path:
    lines = [
        {
            "type": "session.start",
            "data": {"sessionId": session_id, "startTime": start},
            "id": f"{session_id}-1",
            "timestamp": start,
            "parentId": None,
        },
        {
            "type": "assistant.turn_start",
            "data": {"turnId": "0"},
            "id": f"{session_id}-2",
            "timestamp": start,
            "parentId": f"{session_id}-1",
        },
    ]
    path = folder / f"{session_id}.jsonl" if flat else folder / session_id / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    write_session(root, "3fa85f64-aaaa", "2026-08-01T10:00:00.000Z")
    write_session(root, "3fb00000-bbbb", "2026-08-03T10:00:00.000Z")
    write_session(root, "c0ffee00-cccc", "2026-08-05T10:00:00.000Z", flat=True)
    (root / "3fa85f64-aaaa" / "workspace.yaml").write_text("ignored: true\n")
    return root


def ids(selection: Selection) -> list[str]:
    return [s.session_hint for s in find_sources(selection)]


def test_default_root_follows_copilot_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path))
    assert default_root() == tmp_path / "session-state"
    monkeypatch.delenv("COPILOT_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_root() == tmp_path / ".copilot" / "session-state"


def test_whole_root_both_layouts(root: Path) -> None:
    assert sorted(ids(Selection(root=root))) == ["3fa85f64-aaaa", "3fb00000-bbbb", "c0ffee00-cccc"]


def test_latest_orders_by_start_newest_first(root: Path) -> None:
    assert ids(Selection(root=root, latest=3)) == [
        "c0ffee00-cccc",
        "3fb00000-bbbb",
        "3fa85f64-aaaa",
    ]


def test_id_and_unique_prefix(root: Path) -> None:
    assert ids(Selection(["3fa85f64-aaaa"], root=root)) == ["3fa85f64-aaaa"]
    assert ids(Selection(["3fb"], root=root)) == ["3fb00000-bbbb"]
    assert ids(Selection(["c0f"], root=root)) == ["c0ffee00-cccc"]


def test_ambiguous_prefix_lists_candidates(root: Path) -> None:
    with pytest.raises(SelectionError, match=r"ambiguous.*3fa85f64-aaaa.*3fb00000-bbbb"):
        find_sources(Selection(["3f"], root=root))


def test_prefix_matching_nothing_is_a_usage_error(root: Path) -> None:
    with pytest.raises(SelectionError, match="no session"):
        find_sources(Selection(["ffff"], root=root))


def test_paths_session_folder_file_and_folder_of_sessions(root: Path) -> None:
    assert ids(Selection([str(root / "3fa85f64-aaaa")])) == ["3fa85f64-aaaa"]
    assert ids(Selection([str(root / "3fa85f64-aaaa" / "events.jsonl")])) == ["3fa85f64-aaaa"]
    assert ids(Selection([str(root / "c0ffee00-cccc.jsonl")])) == ["c0ffee00-cccc"]
    assert len(ids(Selection([str(root)]))) == 3


def test_same_file_twice_is_read_once(root: Path) -> None:
    path = str(root / "3fa85f64-aaaa")
    assert ids(Selection([path, path + "/events.jsonl"])) == ["3fa85f64-aaaa"]


def test_a_link_to_a_log_is_the_same_log(root: Path, tmp_path: Path) -> None:
    """A symbolic or a hard link and the log it names are one file: read once."""
    log = root / "3fa85f64-aaaa" / "events.jsonl"
    (tmp_path / "soft.jsonl").symlink_to(log)
    os.link(log, tmp_path / "hard.jsonl")
    named = [str(log), str(tmp_path / "soft.jsonl"), str(tmp_path / "hard.jsonl")]
    assert ids(Selection(named)) == ["3fa85f64-aaaa"]


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SelectionError, match="no such file"):
        find_sources(Selection([str(tmp_path / "nope.jsonl")]))


def test_legacy_history_folder_is_refused(tmp_path: Path) -> None:
    legacy = tmp_path / "history-session-state"
    legacy.mkdir()
    with pytest.raises(UnsupportedFormatError, match=r"before 0\.0\.342"):
        find_sources(Selection([str(legacy)]))


def test_since_until_latest(root: Path) -> None:
    assert ids(Selection(root=root, since=parse_when("2026-08-02T00:00:00Z"))) == [
        "c0ffee00-cccc",
        "3fb00000-bbbb",
    ]
    assert ids(Selection(root=root, until=parse_when("2026-08-03T00:00:00Z"))) == ["3fa85f64-aaaa"]
    assert ids(Selection(root=root, latest=1)) == ["c0ffee00-cccc"]


def test_since_skips_old_files_without_opening_them(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old file (by mtime) is left out before any byte of it is read.

    Every way to open a file is recorded (``chmod(0)`` would not do: root opens anything, and
    the file would be left out anyway by the start time on its first line).
    """
    old = root / "3fa85f64-aaaa" / "events.jsonl"
    stamp = datetime(2026, 8, 1, 11, tzinfo=UTC).timestamp()
    os.utime(old, (stamp, stamp))
    opened: list[str] = []

    def recording(real: Any) -> Any:
        def open_and_record(file: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(file, str | bytes | os.PathLike):
                opened.append(os.fsdecode(file))
            return real(file, *args, **kwargs)

        return open_and_record

    for owner, name in ((builtins, "open"), (io, "open"), (os, "open")):
        monkeypatch.setattr(owner, name, recording(getattr(owner, name)))
    selected = ids(Selection(root=root, since=parse_when("2026-08-02T00:00:00Z")))
    assert selected == ["c0ffee00-cccc", "3fb00000-bbbb"]
    assert str(old) not in opened
    # The recording sees opens: the newer files' first lines were read for their start times.
    assert str(root / "3fb00000-bbbb" / "events.jsonl") in opened


def test_until_date_includes_that_whole_day() -> None:
    assert parse_when("2026-08-05", end_of_day=True, zone=UTC) == datetime(2026, 8, 6, tzinfo=UTC)


def test_bad_date_is_a_usage_error() -> None:
    with pytest.raises(SelectionError, match="not a date"):
        parse_when("last tuesday")


def test_cli_usage_errors_are_one_line_exit_2(root: Path) -> None:
    runner = CliRunner()
    for args in (
        ["count", "--root", str(root), "ffff"],
        ["count", "./missing.jsonl"],
        ["count", "--since", "x"],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == ExitCode.USAGE, args
        assert result.stderr.startswith("Error: ")
        assert result.stderr.count("\n") == 1
        assert result.stdout == ""


def test_cli_missing_root_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", "--root", str(tmp_path / "nope")])
    assert result.exit_code == ExitCode.USAGE
    assert "no such folder" in result.stderr


def test_cli_default_root_from_copilot_home(copilot_home: Path) -> None:
    write_session(copilot_home / "session-state", "abc12345-0000", "2026-08-01T10:00:00.000Z")
    result = CliRunner().invoke(main, ["count", "--total"])
    assert result.exit_code == 0
    assert result.stdout == "1\n"


def test_cli_reads_stdin(root: Path) -> None:
    data = (root / "3fb00000-bbbb" / "events.jsonl").read_bytes()
    result = CliRunner().invoke(main, ["count", "-", "--format", "json"], input=data)
    assert result.exit_code == 0
    [row] = orjson.loads(result.stdout)
    assert row["session_id"] == "3fb00000-bbbb"
    assert row["llm_calls"] == 1


# --- One session found in two places ----------------------------------------------------------


def two_folders(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    """``a/`` holds three sessions; ``b/`` is a copy of it made earlier, when the first was
    shorter (its first two lines), with the second one edited since, and the third alike."""
    a, b = tmp_path / "a", tmp_path / "b"
    logs = [
        write_session(a, f"{n}aaaaaa-0000-4000-8000-00000000000{n}", "2026-08-05T09:00:00Z")
        for n in range(3)
    ]
    with logs[0].open("ab") as stream:  # the first session went on after the copy was made
        stream.write(logs[0].read_bytes().replace(b"-1", b"-3").replace(b"-2", b"-4"))
    for log in logs:
        copy = b / log.parent.name / "events.jsonl"
        copy.parent.mkdir(parents=True)
        copy.write_bytes(log.read_bytes())
    first = b / logs[0].parent.name / "events.jsonl"
    first.write_bytes(b"".join(first.read_bytes().splitlines(keepends=True)[:2]))
    second = b / logs[1].parent.name / "events.jsonl"
    second.write_bytes(second.read_bytes().replace(b'"turnId":"0"', b'"turnId":"9"'))
    return a, b, logs


def test_a_session_found_in_two_folders_is_counted_once_and_said(tmp_path: Path) -> None:
    a, b, logs = two_folders(tmp_path)
    # by hand: a holds 2 + 1 + 1 turn_starts; b's copy of the second differs (counted again,
    # and said), b's copies of the first (its start) and the third (the same) are left out
    result = CliRunner().invoke(main, ["count", "--total", str(a), str(b)])
    assert (result.exit_code, result.stdout) == (0, "5\n")
    notes = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    session = [log.parent.name for log in logs]
    assert notes == [
        f"warning: {b}/{session[0]}/events.jsonl is the start of {a}/{session[0]}/events.jsonl "
        f"(session {session[0]}): read once, from {a}/{session[0]}/events.jsonl",
        f"warning: {a}/{session[1]}/events.jsonl and {b}/{session[1]}/events.jsonl hold the "
        f"same session ({session[1]}) with different events: both are read, so it counts "
        "twice; give only one of them",
        f"warning: {b}/{session[2]}/events.jsonl is a copy of {a}/{session[2]}/events.jsonl "
        f"(session {session[2]}): read once, from {a}/{session[2]}/events.jsonl",
    ]


def test_the_api_reads_a_session_found_twice_once(tmp_path: Path) -> None:
    a, b, logs = two_folders(tmp_path)
    files = {str(s.path) for s in find_sources(Selection(selectors=(str(a), str(b))))}
    assert files == {*map(str, logs), str(b / logs[1].parent.name / "events.jsonl")}


def test_many_logs_of_one_name_are_not_compared_two_by_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of one name (``<date>/session.jsonl``) are looked at as possible copies; only
    those that start alike are compared: two by two, 3,000 of them took over 5 minutes."""
    from copilot_logs.ingest import discover

    compared: list[tuple[str, str]] = []
    compare = discover._compare

    def spy(first: Any, second: Any, notes: list[str]) -> set[int]:
        compared.append((first.name, second.name))
        return compare(first, second, notes)

    monkeypatch.setattr(discover, "_compare", spy)
    paths = []
    for n in range(200):
        b = synth.SessionBuilder(seed=n)
        b.user_message("go")
        paths.append(b.write(tmp_path / f"day{n:03}" / "session.jsonl"))
    copy = tmp_path / "copy" / "session.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(paths[7].read_bytes())
    found = find_sources(Selection(selectors=tuple(str(p) for p in [*paths, copy])))
    assert compared == [(str(paths[7]), str(copy))]  # the one pair that starts alike
    assert [s.path for s in found if s.path in (paths[7], copy)] == [paths[7]]
    assert len(found) == 200


# --- every session `sessions` lists can be selected (issue 33, item 6) ----------------------


def _recording(root: Path, name: str = "recording.jsonl") -> tuple[Path, dict[str, int]]:
    """One file holding three sessions, as a recorder or a copy makes them; each session's
    LLM calls, counted by hand (one turn each, one more for the second)."""
    root.mkdir(parents=True, exist_ok=True)
    calls = {}
    data = b""
    for seed, turns in ((1, 1), (2, 2), (3, 1)):
        b = synth.SessionBuilder(seed=seed, start=f"2026-08-0{seed}T10:00:00.000Z")
        b.user_message("Go.")
        for _ in range(turns):
            b.turn("Done.")
        b.shutdown()
        calls[b.session_id] = turns
        data += b.to_bytes()
    (root / name).write_bytes(data)
    return root / name, calls


def _json(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


@pytest.mark.parametrize("name", ["recording.jsonl", "first-named"])
@pytest.mark.parametrize("length", [36, 8])
def test_every_listed_session_is_selected_by_its_id_or_prefix(
    tmp_path: Path, name: str, length: int
) -> None:
    root = tmp_path / "logs"
    log, calls = _recording(root)
    if name == "first-named":  # the file named after its first session, as the CLI names it
        log = log.rename(root / f"{next(iter(calls))}.jsonl")
    listed = [
        row["session_id"] for row in _json("sessions", "--root", str(root), "--format", "json")
    ]
    assert sorted(listed) == sorted(calls)  # the oracle: the session.start lines written
    for session in listed:
        selector = session[:length]
        rows = _json("sessions", selector, "--root", str(root), "--format", "json")
        assert [row["session_id"] for row in rows] == [session]
        (tree,) = _json("timeline", selector, "--root", str(root), "--format", "json")
        assert tree["session_id"] == session
        counted = _json("count", selector, "--root", str(root), "--format", "json")
        assert [(row["session_id"], row["llm_calls"]) for row in counted] == [
            (session, calls[session])
        ]
        total = CliRunner().invoke(main, ["count", "--total", selector, "--root", str(root)])
        if name == "recording.jsonl" or session != next(iter(calls)):
            assert total.stdout.strip() == str(calls[session])


def test_two_sessions_of_one_file_selected_together_are_both_read(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _, calls = _recording(root)
    first, second, _ = list(calls)
    rows = _json("sessions", first[:6], second[:6], "--root", str(root), "--format", "json")
    assert sorted(row["session_id"] for row in rows) == sorted([first, second])


def test_a_prefix_of_sessions_inside_logs_is_ambiguous_or_unknown_as_a_name_is(
    tmp_path: Path,
) -> None:
    root = tmp_path / "logs"
    _recording(root)
    unknown = CliRunner().invoke(main, ["sessions", "zzzz", "--root", str(root)])
    assert unknown.exit_code == ExitCode.USAGE and "no session, file or folder" in unknown.stderr
    every = CliRunner().invoke(main, ["sessions", "", "--root", str(root)])
    assert every.exit_code == ExitCode.USAGE


def test_validate_of_a_session_inside_a_log_checks_the_whole_log(tmp_path: Path) -> None:
    """A log's rules (one session a file, R603) are the log's: validate reads it whole."""
    root = tmp_path / "logs"
    _, calls = _recording(root)
    found = _json("validate", list(calls)[1][:8], "--root", str(root), "--format", "json")
    assert "R603" in {finding["code"] for finding in found["findings"]}
