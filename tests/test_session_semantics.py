"""What a log means, on small synthetic logs: several sessions in one file or stream, a turn left
open at a routine shutdown, a message queued while a turn runs, the session's model on a tie.

The real logs that taught these are tested in ``test_real_edge.py`` (when ``../shared`` is there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from copilot_logs.cli import main
from synth import SessionBuilder, bash

FIRST = "11111111-1111-4111-8111-111111111111"
SECOND = "22222222-2222-4222-8222-222222222222"


def cli(*args: str, stdin: bytes | None = None) -> Any:
    result = CliRunner().invoke(main, [*args, "--format", "json"], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return json.loads(result.stdout)


# --- several sessions in one file or stream ------------------------------------------------------


def two_sessions() -> tuple[SessionBuilder, SessionBuilder]:
    """Two finished sessions; the second started before the first ended (as a recorder that
    writes both into one file leaves them)."""
    first = SessionBuilder(session_id=FIRST, start="2026-08-05T15:21:31.493Z", seed=1)
    first.user_message("alpha")
    first.turn("alpha")
    first.user_message("alpha2")
    first.turn("alpha2")
    first.turn("alpha3")
    first.shutdown()
    second = SessionBuilder(session_id=SECOND, start="2026-08-05T15:21:46.650Z", seed=2)
    second.user_message("bravo")
    second.turn("bravo")
    second.shutdown()
    return first, second


def test_a_file_with_two_sessions_gives_two_rows_in_every_command(tmp_path: Path) -> None:
    first, second = two_sessions()
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(first.to_bytes() + second.to_bytes())
    calls = {FIRST: 3, SECOND: 1}
    prompts = {FIRST: 2, SECOND: 1}
    sessions = cli("sessions", str(path))
    assert {r["session_id"]: r["llm_calls"] for r in sessions} == calls
    assert {r["session_id"]: r["user_prompts"] for r in sessions} == prompts
    assert {r["file"] for r in sessions} == {str(path)}
    assert {r["session_id"]: r["llm_calls"] for r in cli("count", str(path))} == calls
    by_interaction = cli("count", str(path), "--by", "interaction")
    assert sorted(r["session_id"] for r in by_interaction) == [FIRST, FIRST, SECOND]
    assert {s["session_id"]: s["llm_calls"] for s in cli("timeline", str(path))} == calls
    audited = cli("audit", str(path), "--require-task-complete")
    assert {r["session_id"]: r["llm_calls"] for r in audited} == calls
    usage = cli("usage", str(path))
    assert {r["session_id"]: r["requests"] for r in usage["rows"]} == calls
    assert {r["session_id"]: r["reconciliation"] for r in usage["rows"]} == dict.fromkeys(
        calls, "exact"
    )


def test_two_sessions_of_a_file_that_start_together_are_ordered_by_id(tmp_path: Path) -> None:
    """Newest first, and a tie (one file, one start) broken by session id: the same order cold,
    from the store and warm, whatever order the sessions have in the file."""
    start = "2026-08-05T15:21:31.493Z"
    later = SessionBuilder(session_id=SECOND, start=start, seed=2)
    earlier = SessionBuilder(session_id=FIRST, start=start, seed=1)
    for builder in (later, earlier):
        builder.user_message("hi")
        builder.turn("ok")
        builder.shutdown()
    path = tmp_path / "tied.jsonl"
    path.write_bytes(later.to_bytes() + earlier.to_bytes())
    for command in ("sessions", "count", "audit", "timeline"):
        for extra in (["--no-cache"], [], []):
            rows = cli(command, str(path), *extra, *(["--all"] if command == "audit" else []))
            assert [r["session_id"] for r in rows] == [FIRST, SECOND], (command, extra)
    for extra in (["--no-cache"], [], []):
        rows = cli("usage", str(path), *extra)["rows"]
        assert [r["session_id"] for r in rows] == [FIRST, SECOND], extra


def test_timeline_latest_keeps_that_many_sessions_of_a_file_that_holds_several(
    tmp_path: Path,
) -> None:
    """`--format svg` of such a file says to add `--latest 1`: that must draw one session."""
    first, second = two_sessions()
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(first.to_bytes() + second.to_bytes())
    assert [s["session_id"] for s in cli("timeline", str(path), "--latest", "1")] == [SECOND]
    several = CliRunner().invoke(main, ["timeline", str(path), "--format", "svg"])
    assert several.exit_code == 2 and "add --latest 1" in several.stderr
    one = CliRunner().invoke(main, ["timeline", str(path), "--format", "svg", "--latest", "1"])
    assert one.exit_code == 0, one.output
    assert f"Session {SECOND}" in one.stdout and FIRST not in one.stdout


def test_validate_checks_each_session_of_a_file_as_its_own_log(tmp_path: Path) -> None:
    first, second = two_sessions()
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(first.to_bytes() + second.to_bytes())
    report = cli("validate", str(path), "--strict")
    # No timestamp-backwards (E105) across the sessions, no broken chain (E104) at the second
    # session.start, no size mismatch (R602) for the second shutdown (it counts from its own
    # first line): only the info that the file holds two sessions.
    second_start = len(first.lines()) + 1
    assert [(f["code"], f["line"], f["session_id"]) for f in report["findings"]] == [
        ("R603", second_start, SECOND)
    ]
    assert report["summary"]["sessions"] == 2
    assert report["summary"]["failed"] is False


def test_a_later_sessions_own_damage_is_still_found(tmp_path: Path) -> None:
    first, second = two_sessions()
    lines = second.lines()
    del lines[3]  # a line lost inside the second session
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(first.to_bytes() + b"".join(line + b"\n" for line in lines))
    codes = {(f["code"], f["session_id"]) for f in cli("validate", str(path))["findings"]}
    assert ("E104", SECOND) in codes
    assert ("R602", SECOND) in codes
    assert not any(sid == FIRST for _, sid in codes)


def test_a_second_session_in_a_block_the_fast_reader_hands_back_is_still_its_own(
    tmp_path: Path,
) -> None:
    """A block holding the second session.start and a number no column holds goes back to the
    line reader: the second session still begins at its start, and owns its damage."""
    first, second = two_sessions()
    lines = [json.loads(line) for line in second.lines()]
    reply = next(e for e in lines if e["type"] == "assistant.message")
    reply["data"]["outputTokens"] = 2**70
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(first.to_bytes() + "".join(json.dumps(e) + "\n" for e in lines).encode())
    rows = {
        r["session_id"]: (r["llm_calls"], r["damaged_lines"]) for r in cli("sessions", str(path))
    }
    assert rows == {FIRST: (3, 0), SECOND: (1, 1)}


def test_junit_gives_each_session_of_a_file_its_own_case(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    first, second = two_sessions()
    lines = second.lines()
    del lines[3]
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(first.to_bytes() + b"".join(line + b"\n" for line in lines))
    out = CliRunner().invoke(main, ["validate", str(path), "--format", "junit"]).stdout
    cases = {case.get("name"): case for case in ET.fromstring(out).iter("testcase")}
    assert sorted(cases) == [FIRST, SECOND]
    assert cases[FIRST].find("failure") is None
    assert cases[SECOND].find("failure") is not None


def test_two_logs_piped_on_stdin_are_two_sessions() -> None:
    first, second = two_sessions()
    usage = cli("usage", "-", stdin=first.to_bytes() + second.to_bytes())
    assert {r["session_id"]: r["requests"] for r in usage["rows"]} == {FIRST: 3, SECOND: 1}
    sessions = cli("sessions", "-", stdin=first.to_bytes() + second.to_bytes())
    assert sorted(r["session_id"] for r in sessions) == [FIRST, SECOND]


def test_a_second_session_appended_to_a_cached_file_is_its_own_session(tmp_path: Path) -> None:
    """The events cache reads only what was appended: the appended session still gets its id."""
    first, second = two_sessions()
    path = tmp_path / "grown.jsonl"
    path.write_bytes(first.to_bytes())
    assert [r["session_id"] for r in cli("sessions", str(path))] == [FIRST]
    with path.open("ab") as handle:
        handle.write(second.to_bytes())
    rows = cli("sessions", str(path))
    assert {r["session_id"]: r["llm_calls"] for r in rows} == {FIRST: 3, SECOND: 1}


def test_lines_appended_to_a_cached_later_session_stay_in_it(tmp_path: Path) -> None:
    first, second = two_sessions()
    head, tail = second.lines()[:5], second.lines()[5:]
    path = tmp_path / "grown.jsonl"
    path.write_bytes(first.to_bytes() + b"".join(line + b"\n" for line in head))
    assert sorted(r["session_id"] for r in cli("sessions", str(path))) == [FIRST, SECOND]
    with path.open("ab") as handle:
        handle.write(b"".join(line + b"\n" for line in tail))
    rows = cli("sessions", str(path))
    assert {r["session_id"]: r["llm_calls"] for r in rows} == {FIRST: 3, SECOND: 1}
    # The appended turn_end and shutdown are the second session's: it ended.
    assert {r["session_id"]: r["status"] for r in rows} == {FIRST: "ended", SECOND: "ended"}


def test_events_before_the_first_session_start_keep_the_files_hint(tmp_path: Path) -> None:
    """A log whose session.start is lost, followed by another log (``cat a b``): the first
    log's events are not merged into the second session; they keep the file's name."""
    first, second = two_sessions()
    headless = first.lines()[1:]
    path = tmp_path / "spliced.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in headless) + second.to_bytes())
    rows = {r["session_id"]: r["llm_calls"] for r in cli("sessions", str(path))}
    assert rows == {"spliced": 3, SECOND: 1}
    codes = {(f["code"], f["session_id"]) for f in cli("validate", str(path))["findings"]}
    assert ("E108", "spliced") in codes  # its first event is not a session.start


def test_a_session_folder_with_an_event_before_its_start_is_one_session(tmp_path: Path) -> None:
    first, _ = two_sessions()
    lines = first.lines()
    folder = tmp_path / FIRST
    folder.mkdir()
    swapped = [lines[1], lines[0], *lines[2:]]
    (folder / "events.jsonl").write_bytes(b"".join(line + b"\n" for line in swapped))
    rows = cli("sessions", str(folder))
    assert [(r["session_id"], r["llm_calls"]) for r in rows] == [(FIRST, 3)]


def test_damage_before_the_first_session_start_joins_its_session(tmp_path: Path) -> None:
    first, _ = two_sessions()
    path = tmp_path / "damaged-head.jsonl"
    path.write_bytes(b"{not json\n" + first.to_bytes())
    rows = cli("sessions", str(path))
    assert [(r["session_id"], r["damaged_lines"], r["llm_calls"]) for r in rows] == [(FIRST, 1, 3)]


# --- a turn and a tool left open at a routine shutdown ---------------------------------------


def quit_at_permission_prompt() -> SessionBuilder:
    """The user quit while a tool waited on a permission prompt: turn and tool stay open, and
    a routine shutdown follows."""
    b = SessionBuilder(session_id=FIRST, seed=3)
    b.user_message("create out.txt")
    b.turn("Creating it.", [bash("echo written > out.txt", never_completes=True)], end=False)
    b.event("permission.requested", {"permissionRequest": {"kind": "shell"}})
    b.shutdown()
    return b


def killed_at_permission_prompt() -> SessionBuilder:
    """The same session cut off instead: no shutdown after the open turn."""
    b = SessionBuilder(session_id=FIRST, seed=3)
    b.user_message("create out.txt")
    b.turn("Creating it.", [bash("echo written > out.txt", never_completes=True)], end=False)
    b.event("permission.requested", {"permissionRequest": {"kind": "shell"}})
    return b


def test_a_turn_left_open_at_shutdown_is_not_called_cut_off(tmp_path: Path) -> None:
    path = quit_at_permission_prompt().write(tmp_path / "quit.jsonl")
    report = cli("validate", str(path), "--strict")
    assert sorted((f["code"], f["severity"]) for f in report["findings"]) == [
        ("T205", "info"),
        ("X307", "info"),
    ]
    assert all("cut off" not in f["message"] for f in report["findings"])
    assert all("the user ended the session" in f["message"] for f in report["findings"])
    assert report["summary"]["failed"] is False
    (row,) = cli("sessions", str(path))
    assert (row["status"], row["open_turns"]) == ("ended", 1)
    (audited,) = cli("audit", str(path), "--require-task-complete")
    assert audited["verdict"] == "user-quit"


def test_a_turn_cut_off_without_shutdown_is_still_reported_as_such(tmp_path: Path) -> None:
    path = killed_at_permission_prompt().write(tmp_path / "killed.jsonl")
    report = cli("validate", str(path), "--strict")
    assert sorted(f["code"] for f in report["findings"]) == ["T204", "X303"]
    assert report["summary"]["failed"] is True
    (row,) = cli("sessions", str(path))
    assert row["status"] == "open"
    (audited,) = cli("audit", str(path), "--require-task-complete", "--running-within", "0")
    assert audited["verdict"] == "interrupted"


def test_a_shutdown_on_an_error_with_a_turn_open_is_not_called_a_user_quit(
    tmp_path: Path,
) -> None:
    b = SessionBuilder(session_id=FIRST, seed=3)
    b.user_message("create out.txt")
    b.turn("Creating it.", [bash("echo written > out.txt", never_completes=True)], end=False)
    b.shutdown(shutdown_type="error")
    path = b.write(tmp_path / "error.jsonl")
    messages = {f["code"]: f["message"] for f in cli("validate", str(path))["findings"]}
    assert sorted(messages) == ["T205", "X307"]
    assert all("shut down (error) while it ran" in m for m in messages.values())
    assert all("user" not in m for m in messages.values())
    (audited,) = cli("audit", str(path), "--require-task-complete", "--running-within", "0")
    assert audited["verdict"] == "interrupted"


def test_the_timeline_marks_what_the_user_left_open(tmp_path: Path) -> None:
    quit_path = quit_at_permission_prompt().write(tmp_path / "quit.jsonl")
    killed_path = killed_at_permission_prompt().write(tmp_path / "killed.jsonl")
    for path, left_open in ((quit_path, True), (killed_path, False)):
        (session,) = cli("timeline", str(path))
        ((turn,),) = [i["turns"] for i in session["interactions"]]
        (tool,) = turn["tools"]
        assert (turn["open"], turn["open_at_shutdown"]) == (True, left_open)
        assert (tool["status"], tool["open_at_shutdown"]) == ("open", left_open)
        ndjson = CliRunner().invoke(main, ["timeline", str(path), "--format", "ndjson"]).stdout
        (row,) = [json.loads(line) for line in ndjson.splitlines()]
        assert row["open_at_shutdown"] is left_open
    text = CliRunner(env={"COLUMNS": "120"}).invoke(main, ["timeline", str(quit_path)]).stdout
    assert "[open at shutdown]" in text
    assert "bash open at shutdown" in text
    text = CliRunner(env={"COLUMNS": "120"}).invoke(main, ["timeline", str(killed_path)]).stdout
    assert "open at shutdown" not in text
    assert "[open]" in text
    # The picture (timeline --format svg, and the report) says the same in its details.
    svg = CliRunner().invoke(main, ["timeline", str(quit_path), "--format", "svg"]).stdout
    assert "open at shutdown (no turn_end)" in svg and "bash (open at shutdown)" in svg
    svg = CliRunner().invoke(main, ["timeline", str(killed_path), "--format", "svg"]).stdout
    assert "open at shutdown" not in svg
    assert "open (no turn_end)" in svg and "bash (open)" in svg


# --- a message queued while a turn runs ------------------------------------------------------


def queue_message(b: SessionBuilder, interaction_id: str, content: str) -> None:
    """A message typed while a turn runs: the CLI writes it into that turn with the running
    interaction's id (as in the real log mid-turn-message-queued)."""
    b.event(
        "user.message",
        {"content": content, "interactionId": interaction_id, "delivery": "queued"},
    )


def queued_session() -> SessionBuilder:
    b = SessionBuilder(session_id=FIRST, seed=4)
    iid = b.user_message("run sleep 10")
    b.turn("Running it.", [bash("sleep 10")])
    b.turn(None, end=False)
    queue_message(b, iid, "also, tell me what 6 times 7 is")
    b.event("assistant.message", {"messageId": "m-2", "content": "Done. 42.", "model": "x"})
    b.end_turn()
    b.shutdown()
    return b


def test_a_queued_message_joins_the_running_interaction(tmp_path: Path) -> None:
    path = queued_session().write(tmp_path / "queued.jsonl")
    (counted,) = cli("count", str(path))
    assert (counted["interactions"], counted["user_prompts"], counted["llm_calls"]) == (1, 2, 2)
    assert len(cli("count", str(path), "--by", "interaction")) == 1
    (row,) = cli("sessions", str(path))
    assert row["user_prompts"] == 2
    (session,) = cli("timeline", str(path))
    (interaction,) = session["interactions"]
    assert interaction["text"] == "run sleep 10"
    assert [t["turn_index"] for t in interaction["turns"]] == [1, 2]
    shown = [e for e in interaction["turns"][1]["events"] if e["type"] == "user.message"]
    assert [e["text"] for e in shown] == ["queued message: also, tell me what 6 times 7 is"]
    text = CliRunner(env={"COLUMNS": "120"}).invoke(main, ["timeline", str(path)]).stdout
    assert "queued message: also, tell me" in text


def test_a_queued_message_is_not_a_new_task_for_audit(tmp_path: Path) -> None:
    """Five nudges, then a message queued into the last nudge's turn: still the nudge cap
    (as a new task it would have no nudge, and the verdict would flip)."""
    b = SessionBuilder(session_id=FIRST, seed=5)
    b.mode_changed("autopilot")
    b.user_message("keep a tally")
    b.turn("Tallied.")
    for number in range(5):
        iid = b.nudge()
        if number == 4:
            b.turn(None, end=False)
            queue_message(b, iid, "and stop after this one")
            b.event("assistant.message", {"messageId": "m-9", "content": "Tallied again."})
            b.end_turn()
        else:
            b.turn("Tallied again.")
    b.shutdown()
    path = b.write(tmp_path / "capped.jsonl")
    (audited,) = cli("audit", str(path))
    assert (audited["verdict"], audited["task_nudges"]) == ("nudge-cap", 5)


def test_a_new_interaction_id_is_a_new_prompt_even_mid_turn(tmp_path: Path) -> None:
    """Only the running interaction's id makes a message queued."""
    b = SessionBuilder(session_id=FIRST, seed=6)
    b.user_message("first")
    b.turn(None, end=False)
    queue_message(b, "another-interaction", "second")
    b.end_turn()
    b.shutdown()
    (counted,) = cli("count", str(b.write(tmp_path / "two.jsonl")))
    assert (counted["interactions"], counted["user_prompts"]) == (2, 2)


# --- offsets before the session start ---------------------------------------------------------


def test_an_event_before_the_session_start_has_a_negative_offset(tmp_path: Path) -> None:
    b = SessionBuilder(session_id=FIRST, seed=7, start="2026-08-05T07:49:01.551Z")
    b.user_message("hi")
    b.turn("ok")
    b.shutdown()
    lines = [json.loads(line) for line in b.lines()]
    # startTime 20 s after the first events (a clock set back, or a start written late).
    lines[0]["data"]["startTime"] = "2026-08-05T07:49:21.551Z"
    path = tmp_path / "early.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    change = lines[1]  # session.model_change, shown as an event line
    moment = change["timestamp"]
    assert moment.startswith("2026-08-05T07:49:0")
    seconds = 21.551 - float(moment[17:23])
    text = CliRunner(env={"COLUMNS": "120"}).invoke(main, ["timeline", str(path)]).stdout
    assert "+-" not in text
    model_line = next(line for line in text.splitlines() if "• model" in line)
    assert model_line.split()[-1] == f"-{seconds:.1f}s"
    svg = CliRunner().invoke(main, ["timeline", str(path), "--format", "svg"]).stdout
    assert "+-" not in svg
    assert f"session.model_change (line 2)&#10;at -{seconds:.1f}s" in svg


# --- the session's model on a tie ---------------------------------------------------------------


def tied_session(first_model: str, then_model: str) -> SessionBuilder:
    """Three replies of one model, then three of another: a tie."""
    b = SessionBuilder(session_id=FIRST, seed=8, model=first_model)
    b.user_message("a")
    for _ in range(3):
        b.turn("x")
    b.model_change(then_model)
    b.user_message("b")
    for _ in range(3):
        b.turn("y")
    b.shutdown()
    return b


def test_a_model_tie_goes_to_the_latest_reply_whatever_the_names() -> None:
    from copilot_logs.commands import sessions as sessions_core
    from copilot_logs.commands import timeline
    from copilot_logs.ingest.reader import read_bytes

    for first_model, then_model in (
        ("claude-sonnet-4.5", "gpt-5-mini"),
        ("gpt-5-mini", "claude-sonnet-4.5"),
    ):
        result = read_bytes(tied_session(first_model, then_model).to_bytes(), "tie.jsonl")
        assert sessions_core.summarize(result)["model"].to_list() == [then_model]
        assert [s["model"] for s in timeline.timeline(result)] == [then_model]


def test_the_most_named_model_wins_over_the_latest() -> None:
    from copilot_logs.commands import sessions as sessions_core
    from copilot_logs.ingest.reader import read_bytes

    b = tied_session("gpt-5-mini", "claude-sonnet-4.5")
    b.user_message("c")
    b.turn("z", model="gpt-5-mini")
    b.turn("z", model="o3")
    result = read_bytes(b.to_bytes(), "most.jsonl")
    assert sessions_core.summarize(result)["model"].to_list() == ["gpt-5-mini"]


# --- usage after /rewind, and per-model figures at a switch ---------------------------------


def rewound_session(*, rewind: bool) -> SessionBuilder:
    """Two replies stay in the file, but the shutdown counts one request (as after /rewind)."""
    b = SessionBuilder(session_id=FIRST, seed=9)
    b.user_message("Reply with exactly the word: one")
    b.turn("one")
    if rewind:
        b.info("rewind", "Rewound the conversation. Your files were left unchanged.")
    b.user_message("Reply with exactly the word: three")
    b.turn("three")
    metrics = b.model_metrics()
    metrics["gpt-5-mini"]["requests"]["count"] = 1
    b.shutdown(metrics)
    return b


def test_usage_says_a_rewind_is_why_requests_and_turns_differ() -> None:
    for rewind, verdict in ((True, "rewound"), (False, "mismatch")):
        usage = cli("usage", "-", stdin=rewound_session(rewind=rewind).to_bytes())
        (row,) = usage["rows"]
        assert (row["requests"], row["llm_calls"], row["reconciliation"]) == (1, 2, verdict)
    result = CliRunner().invoke(
        main, ["usage", "-", "--verbose"], input=rewound_session(rewind=True).to_bytes()
    )
    assert "requests 1 != 2 turns" in result.stderr
    assert "rewound with /rewind" in result.stderr


def test_per_model_figures_split_at_a_model_switch() -> None:
    b = SessionBuilder(session_id=FIRST, seed=10)
    b.user_message("one")
    b.turn("one")
    b.model_change("claude-sonnet-4.5")
    b.user_message("two")
    b.turn("two")
    b.turn("three")
    b.shutdown()
    by_model = cli("count", "-", "--by", "model", stdin=b.to_bytes())
    assert {r["model"]: r["llm_calls"] for r in by_model} == {
        "gpt-5-mini": 1,
        "claude-sonnet-4.5": 2,
    }
    usage = cli("usage", "-", "--by", "model", stdin=b.to_bytes())
    assert {r["model"]: r["requests"] for r in usage["rows"]} == {
        "gpt-5-mini": 1,
        "claude-sonnet-4.5": 2,
    }


@pytest.mark.parametrize("damaged", [False, True], ids=["clean-lane", "line-reader"])
@pytest.mark.parametrize("unnamed", [b'"sessionId":""', b'"sessionIdX":"gone"'])
def test_a_session_start_without_an_id_never_joins_the_session_before(
    tmp_path: Path, unnamed: bytes, damaged: bool
) -> None:
    """`cat good bad`: a session.start whose sessionId is empty or missing starts a session of
    its own (named after its line), so the session before keeps exactly its own figures."""
    first, second = two_sessions()
    head = first.to_bytes()
    lines = second.to_bytes().split(b"\n")
    named = f'"sessionId":"{SECOND}"'.encode()
    assert named in lines[0]
    lines[0] = lines[0].replace(named, unnamed)
    if damaged:  # a CR LF ending sends the line through the line reader
        lines[0] += b"\r"
    path = tmp_path / "stream.jsonl"
    path.write_bytes(head + b"\n".join(lines))
    line = head.count(b"\n") + 1
    expected = {FIRST: 3, f"no-id-line-{line}": 1}
    for extra in ([], ["--no-cache"]):
        rows = cli("sessions", str(path), *extra)
        assert {r["session_id"]: r["llm_calls"] for r in rows} == expected
        assert {r["session_id"]: r["llm_calls"] for r in cli("count", str(path))} == expected
    piped = cli("sessions", "-", stdin=path.read_bytes())
    assert {r["session_id"]: r["llm_calls"] for r in piped} == expected
