"""`copilot-logs export`: Parquet datasets that DuckDB and polars read, equal to the API's
frames, written again only for the logs that changed."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

import copilot_logs as cl
from copilot_logs import api
from copilot_logs.cli import main
from copilot_logs.commands import export
from copilot_logs.errors import WriteError
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.store import pool
from copilot_logs.store.entry import HASH_BYTES
from tests.conftest import NO_EDGE_SAMPLES, PROJECT, SAMPLES

REAL_EDGE = PROJECT.parent / "shared" / "real-samples-edge"


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def scan(out: Path, table: str) -> pl.DataFrame:
    return pl.scan_parquet(out / table / "**" / "*.parquet", hive_partitioning=True).collect()


def canonical(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows in one order whatever file they came from: sorted by every flat column."""
    flat = [n for n, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
    return frame.sort(flat, nulls_last=True)


def assert_same_tables(out: Path, expected: dict[str, pl.DataFrame]) -> None:
    assert set(expected) == set(export.TABLES)
    for table, frame in expected.items():
        assert_frame_equal(canonical(scan(out, table)), canonical(frame))


def stats(out: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in out.rglob("*.parquet")
    }


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def clean_logs(folder: Path) -> list[Path]:
    """Logs of ``folder`` that the reader reads without any damage report."""
    result = api.read(folder)
    damaged = set(result.diagnostics["file"].to_list())
    return [Path(f) for f in sorted(set(result.events["file"].to_list())) if f not in damaged]


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    copy = tmp_path / "logs"
    shutil.copytree(SAMPLES, copy)
    return copy


# --- the datasets ------------------------------------------------------------------------------


def test_export_reads_back_as_the_api_frames(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("export", out, samples)
    assert result.exit_code == 0, result.output
    assert_same_tables(out, cl.frames(cl.read(samples)))


def parquet_files(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*.parquet")}


def manifest(out: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((out / export.MANIFEST).read_text())
    return document


def listed_files(out: Path) -> set[str]:
    return {file for part in manifest(out)["parts"] for file in part["files"]}


def test_every_row_is_in_its_sessions_start_day_and_every_table_has_a_file(
    samples: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    sessions = api.sessions(api.read(samples))
    start_day = {f: s.date() for f, s in sessions.select("file", "started_at").iter_rows()}
    for table in export.TABLES:
        assert list((out / table).glob("date=*/part-*.parquet")), table
        for path in (out / table).glob("date=*/*.parquet"):
            day = path.parent.name.removeprefix("date=")
            files = set(pl.read_parquet(path, hive_partitioning=False)["file"].to_list())
            assert {start_day[f].isoformat() for f in files} <= {day}, (table, path)
    assert parquet_files(out) == listed_files(out)


@pytest.mark.parametrize(("log_mode", "parquet_mode"), [(0o600, 0o600), (0o644, 0o644)])
def test_files_get_the_mode_of_the_logs(
    samples: Path, tmp_path: Path, log_mode: int, parquet_mode: int
) -> None:
    """The Parquet files hold previews of prompts and tool output: the mode of the logs they
    come from (Copilot CLI's are 0600), as every file made of logs (docs/export.md)."""
    for log in samples.rglob("*.jsonl"):
        log.chmod(log_mode)
    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        run("export", out, samples)
    finally:
        os.umask(old)
    modes = {p.stat().st_mode & 0o777 for p in out.rglob("*.parquet")}
    assert modes == {parquet_mode}
    assert (out / "_manifest.json").stat().st_mode & 0o777 == 0o600  # file names: private


def test_a_batch_writes_one_file_per_table_and_day_and_batches_follow_start_days(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """Logs are read oldest start first, so a batch of logs spans few days: with batches of
    about three logs, given newest and oldest in turn, no two parts' start days overlap."""
    monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 3 * 20_000)
    sessions = api.sessions(api.read(samples))
    start = dict(sessions.select("file", "started_at").iter_rows())
    by_start = sorted(start, key=lambda f: start[f])
    turns = [by_start[i // 2] if i % 2 else by_start[-1 - i // 2] for i in range(len(by_start))]
    assert sorted(turns) == sorted(by_start)
    out = tmp_path / "out"
    api.export(out, *turns)
    parts = manifest(out)["parts"]
    assert len(parts) > 2
    spans = sorted(
        (min(start[f] for f in p["sources"]), max(start[f] for f in p["sources"])) for p in parts
    )
    assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(spans))
    for part in parts:
        for table in export.TABLES:
            mine = [f for f in part["files"] if f.startswith(f"{table}/")]
            days = {f.split("/")[1] for f in mine}
            assert len(days) == len(mine) >= 1


def test_duckdb_reads_every_table_with_its_date(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    expected = cl.frames(cl.read(samples))
    for table in export.TABLES:
        query = (
            f"SELECT count(*), count(DISTINCT date), min(date) FROM "
            f"read_parquet('{out}/{table}/**/*.parquet', hive_partitioning = true)"
        )
        rows, days, first = duckdb.sql(query).fetchall()[0]
        frame = expected[table]
        assert (rows, days, first) == (
            frame.height,
            frame["date"].n_unique(),
            frame["date"].min(),
        )


def test_events_are_the_log_lines_read_by_hand(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    events = scan(out, "events")
    logs = clean_logs(samples)
    assert len(logs) >= 5
    for log in logs:
        mine = events.filter(pl.col("file") == str(log)).sort("line")
        by_hand = lines_of(log)
        assert mine["line"].to_list() == list(range(1, len(by_hand) + 1))
        assert mine["type"].to_list() == [e["type"] for e in by_hand]
        assert mine["id"].to_list() == [e["id"] for e in by_hand]
        assert mine["parent_id"].to_list() == [e["parentId"] for e in by_hand]
        assert mine["agent_id"].to_list() == [e.get("agentId") for e in by_hand]
        stamps = mine["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_list()
        assert stamps == [e["timestamp"] for e in by_hand]


def turn_rows_by_hand(log: Path) -> tuple[int, dict[str, int]]:
    """Main-agent turn_start lines, and per sub-agent its distinct assistant.message ids."""
    events = lines_of(log)
    main_turns = sum(
        1 for e in events if e["type"] == "assistant.turn_start" and not e.get("agentId")
    )
    calls: dict[str, set[str]] = {}
    for e in events:
        if e["type"] == "assistant.message" and e.get("agentId"):
            calls.setdefault(e["agentId"], set()).add(e["data"]["messageId"])
    return main_turns, {agent: len(ids) for agent, ids in calls.items()}


def check_turns(folder: Path, out: Path) -> None:
    turns = scan(out, "turns")
    logs = clean_logs(folder)
    for log in logs:
        mine = turns.filter(pl.col("file") == str(log))
        main_turns, calls = turn_rows_by_hand(log)
        assert mine.filter(pl.col("agent_id").is_null()).height == main_turns
        per_agent = mine.filter(pl.col("agent_id").is_not_null()).group_by("agent_id").len()
        assert dict(per_agent.iter_rows()) == calls
        sub = mine.filter(pl.col("agent_id").is_not_null()).sort("agent_id", "call_index")
        for agent in calls:
            indexes = sub.filter(pl.col("agent_id") == agent)["call_index"].to_list()
            assert indexes == list(range(1, calls[agent] + 1))


def test_turns_hold_main_turns_and_subagent_calls(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    check_turns(samples, out)
    turns = scan(out, "turns")
    assert turns.filter(pl.col("agent_id").is_not_null()).height > 0
    sub = turns.filter(pl.col("agent_id").is_not_null())
    assert sub["ended_at"].null_count() == sub.height
    assert sub["tool_calls"].sum() > 0


def envelope(kind: str, data: dict[str, Any], number: int, agent: str | None = None) -> str:
    line: dict[str, Any] = {"type": kind, "data": data}
    if agent:
        line["agentId"] = agent
    line.update(
        id=f"e{number}",
        timestamp=f"2026-08-05T10:00:{number:02d}.000Z",
        parentId=f"e{number - 1}" if number > 1 else None,
    )
    return json.dumps(line, separators=(",", ":"))


def test_a_chunked_subagent_reply_is_one_call(tmp_path: Path) -> None:
    """Chunks of one sub-agent reply share a messageId: one call, its tools in it."""
    agent = "call_task"
    lines = [
        ("session.start", {"sessionId": "s1", "startTime": "2026-08-05T10:00:01.000Z"}, None),
        ("user.message", {"content": "go"}, None),
        ("assistant.turn_start", {"turnId": "0"}, None),
        ("subagent.started", {"toolCallId": agent, "agentName": "task"}, agent),
        ("assistant.message", {"messageId": "m1", "content": "a", "chunkIndex": 0}, agent),
        ("assistant.message", {"messageId": "m1", "content": "b", "chunkIndex": 1}, agent),
        ("tool.execution_start", {"toolCallId": "t1", "toolName": "bash"}, agent),
        ("tool.execution_complete", {"toolCallId": "t1", "success": False}, agent),
        ("assistant.message", {"messageId": "m2", "content": "done"}, agent),
        ("subagent.completed", {"toolCallId": agent, "agentName": "task"}, agent),
        ("assistant.turn_end", {"turnId": "0"}, None),
    ]
    log = tmp_path / "s1.jsonl"
    log.write_text("".join(envelope(k, d, n, a) + "\n" for n, (k, d, a) in enumerate(lines, 1)))
    turns = cl.frames(cl.read(log))["turns"].sort("line")
    assert turns.select("agent_id", "turn_index", "call_index", "line").rows() == [
        (None, 1, 1, 3),
        (agent, 1, 1, 5),
        (agent, 1, 2, 9),
    ]
    assert turns["messages"].to_list() == [0, 2, 1]
    assert turns["tool_calls"].to_list() == [0, 1, 0]
    assert turns["failed_tool_calls"].to_list() == [0, 1, 0]


def test_rows_of_a_second_session_in_one_file_take_its_day(samples: Path, tmp_path: Path) -> None:
    """A log holding two sessions: each row lands on its own session's start day, and is
    written there."""
    log = samples / "d4c3f605-7e80-4f91-b2a3-3d4e5f607182.jsonl"
    result = api.read(log)
    events = result.events.sort("line")
    half = events.height // 2
    later = pl.col("timestamp") + pl.duration(days=3)
    second = events.slice(half).with_columns(session_id=pl.lit("second"), timestamp=later)
    two = ReadResult(pl.concat([events.head(half), second]), result.diagnostics)
    tables = export.frames(two)
    out = tmp_path / "out"
    written = export.write_batch(two, out=str(out), run="0123456789abcdef")
    assert not parquet_files(out)  # under temporary names until moved in
    export.move_in(out, "0123456789abcdef", written.part.files, [])
    assert parquet_files(out) == set(written.part.files)
    for table in export.TABLES:  # a file for each day the table has rows on
        days = {f.split("/")[1] for f in written.part.files if f.startswith(f"{table}/")}
        assert days == {f"date={day}" for day in tables[table]["date"].unique()}, table
    assert_same_tables(out, tables)
    # Each session of the file has its own sessions row (and day).
    own_days = dict(tables["sessions"].select("session_id", "date").iter_rows())
    first_day = own_days[events["session_id"][0]]
    assert own_days["second"] == first_day + timedelta(days=3)
    for table in ("events", "turns", "tools"):
        days = dict(tables[table].group_by("session_id").agg(pl.col("date").unique()).iter_rows())
        assert days == {
            events["session_id"][0]: [first_day],
            "second": [first_day + timedelta(days=3)],
        }


def test_turns_agree_with_count(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    counted = json.loads(run("count", samples, "--format", "json").stdout)
    per_file = (
        scan(out, "turns")
        .group_by("session_id")
        .agg(main=pl.col("agent_id").is_null().sum(), sub=pl.col("agent_id").is_not_null().sum())
    )
    figures = {row["session_id"]: (row["main"], row["sub"]) for row in per_file.to_dicts()}
    for row in counted:
        assert figures.get(row["session_id"], (0, 0)) == (row["llm_calls"], row["subagent_calls"])


def test_sessions_have_the_columns_of_sessions_json(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    listed = json.loads(run("sessions", samples, "--format", "json").stdout)
    exported = scan(out, "sessions")
    assert exported.columns == [*listed[0], "date"]
    assert sorted(exported["session_id"].to_list()) == sorted(r["session_id"] for r in listed)


def test_usage_rows_are_usage_json_rows(samples: Path, tmp_path: Path) -> None:
    from copilot_logs.render.formats import records

    out = tmp_path / "out"
    run("export", out, samples)
    rows = json.loads(run("usage", samples, "--format", "json").stdout)["rows"]
    exported = records(scan(out, "usage").drop("date").sort("file"))
    assert exported == sorted(rows, key=lambda r: r["file"])


def test_findings_are_validates(samples: Path, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml settings: every rule
    out = tmp_path / "out"
    run("export", out, samples)
    report = json.loads(run("validate", samples, "--format", "json").stdout)
    found = sorted((f["file"], f["line"] or 0, f["code"]) for f in report["findings"])
    exported = scan(out, "findings").select("file", pl.col("line").fill_null(0), "code")
    assert found
    assert sorted(exported.iter_rows()) == found


def test_empty_batch_gives_the_same_schemas(samples: Path) -> None:
    full = export.frames(api.read(samples))
    empty = export.frames(ReadResult.empty())
    for table in export.TABLES:
        assert empty[table].schema == full[table].schema, table


def test_batches_of_one_log_give_the_tables_of_one_read(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 1)  # every log its own batch
    out = tmp_path / "out"
    api.export(out, samples)
    assert_same_tables(out, cl.frames(cl.read(samples)))


def test_real_samples(real_samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run("export", out, real_samples).exit_code == 0
    assert_same_tables(out, cl.frames(cl.read(real_samples)))
    check_turns(real_samples, out)


def test_real_edge_samples(tmp_path: Path) -> None:
    if not REAL_EDGE.is_dir():
        pytest.skip(NO_EDGE_SAMPLES)
    out = tmp_path / "out"
    assert run("export", out, REAL_EDGE).exit_code == 0
    assert_same_tables(out, cl.frames(cl.read(REAL_EDGE)))
    events = scan(out, "events")
    assert events.height == sum(len(lines_of(p)) for p in REAL_EDGE.glob("*.jsonl"))


# --- incremental -------------------------------------------------------------------------------


def shared_batches(monkeypatch: Any) -> None:
    """Batches of about three logs of sample_sessions."""
    monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 3 * 20_000)


def part_of(out: Path, log: Path) -> dict[str, Any]:
    (part,) = [p for p in manifest(out)["parts"] if str(log) in p["sources"]]
    return part


def rows_per_log(out: Path) -> dict[str, dict[str, int]]:
    return {
        table: dict(scan(out, table).group_by("file").len().iter_rows()) for table in export.TABLES
    }


def test_a_changed_log_sharing_files_with_unchanged_ones(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """The changed log is written to new files; the files it shared lose its rows and keep the
    others'; the files of other batches are not touched."""
    shared_batches(monkeypatch)
    out = tmp_path / "out"
    api.export(out, samples)
    log = samples / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl"
    shared = part_of(out, log)
    assert len(shared["sources"]) > 1
    before, counts = stats(out), rows_per_log(out)
    held = {f for f in shared["files"] if str(log) in pl.read_parquet(out / f)["file"]}
    assert held and held != set(shared["files"])
    info = log.stat()
    os.utime(log, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    result = run("export", out, samples)
    assert "1 written, 10 unchanged, 0 removed" in result.stderr
    after = stats(out)
    others = set(before) - held
    assert others - set(shared["files"]) and all(after[f] == before[f] for f in others)
    assert all(after.get(f) != before[f] for f in held)  # rewritten or removed
    new = part_of(out, log)
    assert new["sources"] == [str(log)]
    for file in new["files"]:
        assert set(pl.read_parquet(out / file)["file"].to_list()) <= {str(log)}
    assert rows_per_log(out) == counts  # every log's rows once, none lost
    assert_same_tables(out, cl.frames(cl.read(samples)))
    assert parquet_files(out) == listed_files(out)


def test_a_removed_log_leaves_the_files_it_shared(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    shared_batches(monkeypatch)
    out = tmp_path / "out"
    api.export(out, samples)
    gone = samples / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f"
    partners = [f for f in part_of(out, gone / "events.jsonl")["sources"] if gone.name not in f]
    assert partners
    shutil.rmtree(gone)
    result = run("export", out, samples)
    assert "0 written, 10 unchanged, 1 removed" in result.stderr
    counts = rows_per_log(out)
    assert not any(gone.name in f for table in counts.values() for f in table)
    assert all(f in counts["events"] and f in counts["sessions"] for f in partners)
    assert_same_tables(out, cl.frames(cl.read(samples)))
    assert parquet_files(out) == listed_files(out)


def test_incremental_export_equals_a_fresh_one(samples: Path, tmp_path: Path) -> None:
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run("export", out, samples)
    log = samples / "e5b4a716-8f91-4a02-83b4-4e5f60718293" / "events.jsonl"
    first = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(first[: len(first) // 2]))  # the log as it was mid-session
    shutil.rmtree(samples / "b2e1d4f3-5c6e-4d7f-9081-1b2c3d4e5f60")
    run("export", out, samples)
    run("export", fresh, samples)
    for table in export.TABLES:
        assert_frame_equal(canonical(scan(out, table)), canonical(scan(fresh, table)))
    assert len(manifest(out)["sources"]) == 10
    assert parquet_files(out) == listed_files(out)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert all(any(folder.iterdir()) for folder in out.glob("*/date=*"))


@pytest.mark.parametrize("where", ["head", "tail"])
def test_same_size_and_mtime_but_new_bytes_is_rewritten(
    samples: Path, tmp_path: Path, where: str
) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    log = samples / "d4c3f605-7e80-4f91-b2a3-3d4e5f607182.jsonl"  # over twice HASH_BYTES
    assert log.stat().st_size > 2 * HASH_BYTES
    info = log.stat()
    lines = log.read_bytes().splitlines(keepends=True)
    index = 1 if where == "head" else len(lines) - 1
    old_type = json.loads(lines[index])["type"].encode()
    new_type = old_type.upper()
    lines[index] = lines[index].replace(b'"type":"' + old_type, b'"type":"' + new_type, 1)
    log.write_bytes(b"".join(lines))
    os.utime(log, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert log.stat().st_size == info.st_size
    # --no-cache: the events cache of today's reader keys on size and mtime alone (issue 12).
    assert "1 written" in run("export", out, samples, "--no-cache").stderr
    assert new_type.decode() in scan(out, "events")["type"].to_list()


NUDGE_CAP_LOG = "d4c3f605-7e80-4f91-b2a3-3d4e5f607182.jsonl"
"""A sample of 12 LLM calls (its generator's manifest, sample_sessions/expected.json), well
over the two windows the key hashes."""
TURN_START = b'"type":"assistant.turn_start"'


def turn_starts(out: Path, log: Path) -> int:
    events = scan(out, "events").filter(pl.col("file") == str(log))
    return events.filter(pl.col("type") == "assistant.turn_start").height


def test_a_log_edited_mid_file_with_its_size_and_mtime_kept_is_exported_again(
    samples: Path, tmp_path: Path
) -> None:
    """Mutation guard (docs/development.md): the growth check judging a log by its size (and
    the hashed windows) alone keeps its old rows, 12 calls for the 11 on disk."""
    out = tmp_path / "out"
    run("export", out, samples)
    log = samples / NUDGE_CAP_LOG
    assert turn_starts(out, log) == 12
    before, data = log.stat(), log.read_bytes()
    middle = data.index(TURN_START, len(data) // 2)
    assert HASH_BYTES < middle < len(data) - 2 * HASH_BYTES  # outside both hashed windows
    with log.open("r+b") as stream:  # in place: the same inode and size
        stream.seek(middle)
        stream.write(b'"type":"assistant.turn_stop!"')
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "1 written, 10 unchanged" in run("export", out, samples).stderr
    assert turn_starts(out, log) == 11  # by hand: one of the 12 renamed


def test_a_log_that_grew_is_exported_again_whole(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    log = samples / NUDGE_CAP_LOG
    data = log.read_bytes()
    lines = data.splitlines(keepends=True)
    log.write_bytes(b"".join(lines[: len(lines) // 2]))
    run("export", out, samples)
    with log.open("ab") as stream:  # as the CLI appends: the same inode
        stream.write(b"".join(lines[len(lines) // 2 :]))
    assert "1 written, 10 unchanged" in run("export", out, samples).stderr
    events = scan(out, "events").filter(pl.col("file") == str(log))
    assert events.height == len(lines)  # one event per line of this undamaged sample
    assert turn_starts(out, log) == 12


def test_gone_logs_are_removed_and_other_files_kept(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    (out / "notes.txt").write_text("mine")
    (out / "events" / "mine.parquet").write_bytes(b"not ours")
    shutil.rmtree(samples / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f")
    result = run("export", out, samples)
    assert "0 written, 10 unchanged, 1 removed" in result.stderr
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "events" / "mine.parquet").read_bytes() == b"not ours"
    (out / "events" / "mine.parquet").unlink()
    assert "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" not in scan(out, "sessions")["session_id"]
    assert parquet_files(out) == listed_files(out)


def test_manifest_of_another_version_rewrites_everything(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    document = manifest(out)
    (out / export.MANIFEST).write_text(json.dumps({**document, "version": 0}))
    before = stats(out)
    assert "11 written" in run("export", out, samples).stderr
    after = stats(out)
    assert not set(before) & set(after)
    assert_same_tables(out, cl.frames(cl.read(samples)))


def test_an_export_of_version_1_is_replaced(samples: Path, tmp_path: Path) -> None:
    """Version 1 wrote one file per log, table and day, listed under each source."""
    out = tmp_path / "out"
    run("export", out, samples)
    old = "sessions/date=2026-08-05/a1f0c3e2-0123456789ab.parquet"
    shutil.copy(out / sorted(listed_files(out))[0], out / old)
    (out / export.MANIFEST).write_text(
        json.dumps(
            {
                "format": "copilot-logs-export",
                "version": 1,
                "sources": {"some.jsonl": {"source": None, "files": [old, "../outside.parquet"]}},
            }
        )
    )
    (tmp_path / "outside.parquet").write_text("keep me")
    for path in out.glob("*/date=*/part-*.parquet"):
        path.unlink()
    result = run("export", out, samples)
    assert "11 written, 0 unchanged, 1 removed" in result.stderr
    assert not (out / old).exists()
    assert (tmp_path / "outside.parquet").read_text() == "keep me"
    assert_same_tables(out, cl.frames(cl.read(samples)))


def test_a_failed_write_leaves_the_old_dataset_and_no_temporary(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    out = tmp_path / "out"
    api.export(out, samples)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    original = pl.DataFrame.write_parquet
    calls = []

    def broken(self: pl.DataFrame, stream: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) > 3:
            stream.write(b"PAR1 half a file")
            raise OSError("disk full")
        original(self, stream, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken)
    (samples / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl").touch()
    with pytest.raises(WriteError, match="disk full"):
        api.export(out, samples)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_an_export_interrupted_while_moving_files_in_is_finished_by_the_next(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """Killed after the manifest recorded the moves: the dataset stays readable, and the next
    export (here with nothing changed) finishes the moves before anything else."""
    shared_batches(monkeypatch)
    out = tmp_path / "out"
    api.export(out, samples)
    log = samples / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl"
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2].rsplit(b"\n", 1)[0] + b"\n")
    moves = []
    real_replace = os.replace

    def killed(source: Any, target: Any) -> None:
        if str(target).endswith(".parquet"):
            moves.append(target)
            if len(moves) == 4:
                raise KeyboardInterrupt
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        api.export(out, samples)
    monkeypatch.setattr(os, "replace", real_replace)
    assert "commit" in manifest(out)
    for table in export.TABLES:
        scan(out, table)  # readable
    assert [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    result = run("export", out, samples)
    assert "0 written, 11 unchanged, 0 removed" in result.stderr
    assert "commit" not in manifest(out)
    assert_same_tables(out, cl.frames(cl.read(samples)))
    assert parquet_files(out) == listed_files(out)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_temporaries_of_a_killed_export_are_removed(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    listed = sorted(listed_files(out))[0]
    stray = export.temporary(out / listed, "fedcba9876543210")
    stray.write_bytes(b"half")
    foreign = out / listed.rsplit("/", 1)[0] / ".notes.tmp"
    foreign.write_text("not ours")
    before = stats(out)
    assert "0 written, 11 unchanged" in run("export", out, samples).stderr
    assert not stray.exists() and foreign.read_text() == "not ours"
    assert stats(out) == before


def test_a_part_with_a_file_deleted_by_hand_is_exported_again(
    samples: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    victim = sorted(listed_files(out))[0]
    (out / victim).unlink()
    result = run("export", out, samples)
    assert "11 written, 0 unchanged" in result.stderr
    assert_same_tables(out, cl.frames(cl.read(samples)))
    assert parquet_files(out) == listed_files(out)


# --- OUT and exit codes ------------------------------------------------------------------------


def test_out_is_a_file(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x")
    result = run("export", out, samples)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "not a folder" in result.stderr
    assert out.read_text() == "x"


def test_out_holds_other_things(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("x")
    result = run("export", out, samples)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "not empty" in result.stderr
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]


def test_out_empty_folder_is_fine(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert run("export", out, samples).exit_code == 0


@pytest.mark.parametrize("text", ["{not json", '{"format": "other", "sources": {}}', "[]"])
def test_foreign_manifest(samples: Path, tmp_path: Path, text: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / export.MANIFEST).write_text(text)
    result = run("export", out, samples)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_unreadable_log_exits_3_and_the_rest_is_exported(samples: Path, tmp_path: Path) -> None:
    empty = samples / "00000000-0000-4000-8000-000000000000"
    empty.mkdir()
    (empty / "events.jsonl").write_bytes(b"")
    out = tmp_path / "out"
    for _ in range(2):  # a log that gave nothing is read (and reported) again
        result = run("export", out, samples)
        assert result.exit_code == 3
        assert "00000000-0000-4000-8000-000000000000" in result.stderr
    assert scan(out, "sessions").filter(pl.col("status") != "unreadable").height == 11


def test_damage_is_reported_on_stderr(samples: Path, tmp_path: Path) -> None:
    result = run("export", tmp_path / "out", samples)
    assert "warning: " in result.stderr and ": cut-line: " in result.stderr
    assert result.stdout == ""


def test_nothing_found_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("export", tmp_path / "out", "--root", empty)
    assert result.exit_code == 0
    assert "No sessions found" in result.stderr
    assert not (tmp_path / "out").exists()


# --- docs/export.md ----------------------------------------------------------------------------

DOC = (PROJECT / "docs" / "export.md").read_text()


def doc_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        assert (dtype.time_unit, dtype.time_zone) == ("ms", "UTC")
        return "timestamp"
    if isinstance(dtype, pl.List):
        inner = dtype.inner
        return "list<struct>" if isinstance(inner, pl.Struct) else f"list<{doc_type(inner)}>"
    names = {pl.String: "string", pl.Int64: "int64", pl.Float64: "float64", pl.Boolean: "bool"}
    return names[type(dtype)]


def doc_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC, re.MULTILINE | re.DOTALL)


def test_docs_give_every_column_with_its_type(samples: Path) -> None:
    tables = export.frames(api.read(samples))
    for table in export.TABLES:
        section = DOC.split(f"\n## `OUT/{table}`\n", 1)[1].split("\n## ", 1)[0]
        rows = re.findall(r"^\| `([a-z_]+)` \| ([a-z0-9<>]+) \| .+ \|$", section, re.MULTILINE)
        schema = tables[table].drop("date").schema
        assert rows == [(name, doc_type(dtype)) for name, dtype in schema.items()], table


@pytest.fixture
def exported(samples: Path, tmp_path: Path, monkeypatch: Any) -> dict[str, Any]:
    """sample_sessions exported to ./copilot-parquet (the docs' folder), and the figures of
    the sessions and usage commands."""
    monkeypatch.chdir(tmp_path)
    run("export", "copilot-parquet", samples)
    return {
        "sessions": json.loads(run("sessions", samples, "--format", "json").stdout),
        "usage": json.loads(run("usage", samples, "--format", "json").stdout)["rows"],
    }


def test_docs_polars_example_runs(exported: dict[str, Any]) -> None:
    (example,) = [block for block in doc_blocks("python") if "scan_parquet" in block]
    namespace: dict[str, Any] = {}
    exec(example, namespace)
    calls = sum(s["llm_calls"] + s["subagent_calls"] for s in exported["sessions"])
    assert namespace["per_day"]["calls"].sum() == calls
    assert namespace["per_day"]["subagent_calls"].sum() == sum(
        s["subagent_calls"] for s in exported["sessions"]
    )


def test_docs_api_example_runs(tmp_path: Path, monkeypatch: Any) -> None:
    (example,) = [block for block in doc_blocks("python") if "cl.frames" in block]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(example, namespace)  # COPILOT_HOME is an empty folder here: no session
    assert list(namespace["tables"]) == list(export.TABLES)
    assert (tmp_path / "copilot-parquet" / export.MANIFEST).is_file()


def test_docs_duckdb_examples_run(exported: dict[str, Any]) -> None:
    (sql,) = doc_blocks("sql")
    statements = [s for s in sql.split(";") if s.strip()]
    results = [duckdb.sql(statement).fetchall() for statement in statements]
    assert len(results) == 3
    sessions, usage = exported["sessions"], exported["usage"]
    assert sum(row[2] for row in results[0]) == sum(
        s["llm_calls"] + s["subagent_calls"] for s in sessions
    )
    assert sum(row[1] or 0 for row in results[1]) == sum(
        m["requests"] or 0 for row in usage for m in row["models"]
    )
    assert sum(row[1] for row in results[2]) == len(scan(Path("copilot-parquet"), "tools"))


def test_the_docs_first_duckdb_example_counts_each_session_of_a_shared_file_once(
    samples: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """Two sessions in one file (a recorder's copy): the example's join must not pair each
    session's row with the other's."""
    expected = json.loads((SAMPLES / "expected.json").read_text())
    pair = ["a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f", "b2e1d4f3-5c6e-4d7f-9081-1b2c3d4e5f60"]
    shared = b"".join((samples / expected[s]["file"]).read_bytes() for s in pair)
    for session in pair:
        shutil.rmtree(samples / session)
    (samples / "two-sessions.jsonl").write_bytes(shared)
    monkeypatch.chdir(tmp_path)
    run("export", "copilot-parquet", samples)
    (sql,) = doc_blocks("sql")
    rows = duckdb.sql(sql.split(";")[0]).fetchall()
    # The truth: the generator's manifest of the samples, and `count` on the same logs.
    truth = sum(e["llm_calls"] + e["subagent_calls"] for e in expected.values())
    premium = sum(e["premium_requests"] or 0 for e in expected.values())
    counted = json.loads(run("count", samples, "--format", "json").stdout)
    assert sum(row[1] for row in rows) == len(expected) == len(counted) == 11
    assert sum(row[2] for row in rows) == truth
    assert truth == sum(c["llm_calls"] + c["subagent_calls"] for c in counted)
    assert sum(row[3] or 0 for row in rows) == pytest.approx(premium)


def test_out_deleted_is_written_whole_again(samples: Path, tmp_path: Path) -> None:
    """Nothing cached may stand in for writing: a deleted OUT comes back whole."""
    out = tmp_path / "out"
    run("export", out, samples)
    expected = cl.frames(cl.read(samples))
    shutil.rmtree(out)
    assert "11 written" in run("export", out, samples).stderr
    assert_same_tables(out, expected)


def test_a_manifest_never_touches_files_outside_out(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    victims = [tmp_path / "victim.parquet", out / "notes.txt", out / "events" / "x.parquet"]
    for victim in victims:
        victim.write_text("keep me")
    document = manifest(out)
    bad = ["../victim.parquet", str(victims[0]), "notes.txt", "events/x.parquet"]
    document["parts"].append({"sources": ["gone.jsonl"], "files": bad})
    document["commit"] = {"run": "0123456789abcdef", "files": bad, "remove": bad}
    (out / export.MANIFEST).write_text(json.dumps(document))
    assert "11 written" in run("export", out, samples).stderr  # a part we cannot trust
    assert all(victim.read_text() == "keep me" for victim in victims)
    victims[2].unlink()  # not a Parquet file: the scans would fail on it
    assert_same_tables(out, cl.frames(cl.read(samples)))


@pytest.mark.parametrize(
    ("damage", "written"),
    [
        ("a source not an entry", "1 written, 10 unchanged"),
        ("a source fingerprint missing a field", "1 written, 10 unchanged"),
        ("a part's files not a list", "11 written, 0 unchanged"),
        ("a part not an object", "11 written, 0 unchanged"),
        ("a commit of another shape", "11 written, 0 unchanged"),
    ],
)
def test_malformed_manifest_entries_are_exported_again(
    samples: Path, tmp_path: Path, damage: str, written: str
) -> None:
    out = tmp_path / "out"
    run("export", out, samples)
    document = manifest(out)
    name = sorted(document["sources"])[0]
    if damage == "a source not an entry":
        document["sources"][name] = "not an entry"
    elif damage == "a source fingerprint missing a field":
        del document["sources"][name]["inode"]
    elif damage == "a part's files not a list":
        document["parts"][0]["files"] = 7
    elif damage == "a part not an object":
        document["parts"].append("not a part")
    else:
        document["commit"] = {"run": "0123456789abcdef", "files": "all"}
    (out / export.MANIFEST).write_text(json.dumps(document))
    result = run("export", out, samples)
    assert result.exit_code == 0
    assert written in result.stderr
    assert_same_tables(out, cl.frames(cl.read(samples)))
    assert parquet_files(out) == listed_files(out)
