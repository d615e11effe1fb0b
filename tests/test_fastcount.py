"""`count --total`: the full reader's count and warnings, read without frames, and kept in the
store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import synth
from copilot_logs import store
from copilot_logs.cli import main
from copilot_logs.commands import count, count_total
from copilot_logs.ingest import reader
from copilot_logs.ingest.calls import Figures
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadState, read_bytes
from copilot_logs.store import pool
from synth import SessionBuilder, bash, task

from .conftest import REAL_SAMPLES, SAMPLES


def session(turns: int = 3, *, subagent_calls: int = 0, seed: int = 0) -> SessionBuilder:
    builder = SessionBuilder(seed=seed)
    builder.user_message("go")
    for n in range(turns):
        builder.turn(f"step {n}", [bash(f"echo {n}", "ok")])
    if subagent_calls:
        builder.turn("delegating", [task("sub", llm_calls=subagent_calls)])
    builder.turn("done")
    builder.shutdown()
    return builder


DAMAGE_COLUMNS = ("line", "kind", "message", "more_lines", "new_lines")


def full_count(data: bytes) -> tuple[int, int]:
    table = count.count(read_bytes(data))
    return int(table["llm_calls"].sum()), int(table["subagent_calls"].sum())


def counted(data: bytes, tmp_path: Path) -> tuple[Figures, ReadState | None]:
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    return count_total.count_file(Source(path, "s"))


def read_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Where each of the next reads of ``count --total`` starts in its file (0: read whole)."""
    starts: list[int] = []
    real_count = reader.count_calls

    def spy(source: Source, counter: Any, resume: ReadState | None = None) -> Any:
        starts.append(resume.end if resume is not None else 0)
        return real_count(source, counter, resume)

    monkeypatch.setattr(reader, "count_calls", spy)
    return starts


@settings(max_examples=30, deadline=None)
@given(turns=st.integers(0, 6), subagent_calls=st.integers(0, 3), seed=st.integers(0, 99))
def test_total_equals_the_calls_written_on_clean_logs(
    turns: int, subagent_calls: int, seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    builder = session(turns, subagent_calls=subagent_calls, seed=seed)
    data = builder.to_bytes()
    figures, state = counted(data, tmp_path_factory.mktemp("total"))
    written = (builder.calls_written["main"], builder.calls_written["subagent"])
    assert (figures.llm_calls, figures.subagent_calls) == written == full_count(data)
    assert figures.damage == () and state is not None and state.end == len(data)


def test_total_equals_full_reader_on_every_sample(tmp_path: Path) -> None:
    files = list(SAMPLES.rglob("*.jsonl"))
    if REAL_SAMPLES.is_dir():
        files += list(REAL_SAMPLES.glob("*.jsonl"))
    damaged_files = 0
    for path in files:
        data = path.read_bytes()
        figures, _ = count_total.count_file(Source(path, "s"))
        assert (figures.llm_calls, figures.subagent_calls) == full_count(data), path
        reported = read_bytes(data).diagnostics.select(DAMAGE_COLUMNS).rows()
        assert list(figures.damage) == reported, path
        damaged_files += bool(reported)
    assert damaged_files == 1  # the damaged sample


def damaged(kind: str) -> bytes:
    lines = session(3).lines()
    if kind == "nul-tail":
        return synth.nul_tail(synth.join_lines(lines))
    if kind == "cut":
        return synth.cut(synth.join_lines(lines))
    if kind == "crlf":
        lines[3] = synth.crlf(lines[3])
    elif kind == "split":
        message = next(i for i, line in enumerate(lines) if b'"assistant.message"' in line)
        lines[message : message + 1] = list(synth.split_line(lines[message]))
    elif kind == "glued":
        lines[4:6] = [synth.glue_truncated(lines[4], lines[5])]
    elif kind == "duplicate":
        lines.insert(5, lines[4])
    elif kind == "blank":
        lines.insert(3, b"")
    elif kind == "not-an-event":
        lines.insert(3, b'{"hello":1}')
    elif kind == "dropped":
        del lines[4]
    elif kind == "invalid-utf8":
        message = next(i for i, line in enumerate(lines) if b'"assistant.message"' in line)
        lines[message] = synth.invalid_utf8(lines[message])
    return synth.join_lines(lines)


DAMAGE = ["nul-tail", "cut", "crlf", "split", "glued", "duplicate", "blank", "not-an-event"]


def test_a_dropped_line_is_no_damage_to_the_total(tmp_path: Path) -> None:
    """The reader reports no gap in the parentId chain, and counts what is there: so does the
    total, to the end."""
    data = damaged("dropped")
    assert read_bytes(data).diagnostics.height == 0
    figures, state = counted(data, tmp_path)
    assert figures.damage == () and state is not None and state.end == len(data)
    assert (figures.llm_calls, figures.subagent_calls) == full_count(data) == (3, 0)


def test_total_on_damaged_file_matches_full_count_and_reports(tmp_path: Path) -> None:
    data = damaged("glued")
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    result = CliRunner().invoke(main, ["count", "--total", str(path)])
    assert result.stdout == f"{full_count(data)[0]}\n"
    assert f"{path}:5: truncated-event" in result.stderr


def write(tmp_path: Path, data: bytes, name: str = "s1") -> Path:
    path = tmp_path / "root" / name / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def total(*args: str) -> str:
    result = CliRunner().invoke(main, ["count", "--total", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def entries() -> list[Path]:
    return sorted(store.folder().glob("*.entry"))


def test_cache_is_written_under_the_cache_folder(tmp_path: Path, copilot_home: Path) -> None:
    path = write(tmp_path, session(2).to_bytes())
    assert total(str(path)) == "3\n"
    assert store.folder() == copilot_home / "cache" / "copilot-logs" / "store"
    [entry] = entries()
    assert entry == store.entry_path(path)
    found = store.find(Source(path, "s1"))
    assert found.state is store.State.FRESH and found.header is not None
    assert (found.header.path, found.header.figures.llm_calls) == (str(path.absolute()), 3)
    assert found.header.body is None  # counts only: count --total builds no frames
    assert not (copilot_home / "session-state").exists()


def test_unchanged_file_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, session(2).to_bytes())
    total(str(path))
    monkeypatch.setattr(reader, "count_calls", lambda *a, **k: pytest.fail("file was read again"))
    assert total(str(path)) == "3\n"


def test_no_cache_reads_and_leaves_the_cache_alone(tmp_path: Path) -> None:
    path = write(tmp_path, session(2).to_bytes())
    assert total("--no-cache", str(path)) == "3\n"
    assert entries() == []


def test_changed_file_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path, session(2).to_bytes())
    total(str(path))
    path.write_bytes(session(5, seed=1).to_bytes())
    os.utime(path, ns=(1, 1))
    assert total(str(path)) == "6\n"


def test_grown_file_reads_only_its_new_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a log was seen to grow (the first growth is read whole, and a CRC of the bytes
    read is kept from then on), each growth is read from where the entry stopped."""
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one")
    path = write(tmp_path, builder.to_bytes())
    assert total(str(path)) == "1\n"
    builder.turn("two")
    path.write_bytes(builder.to_bytes())
    starts = read_starts(monkeypatch)
    assert total(str(path)) == "2\n"
    assert starts == [0]
    second = builder.to_bytes()
    builder.turn("three")
    path.write_bytes(builder.to_bytes())
    assert total(str(path)) == "3\n"
    assert starts == [0, len(second)]


def test_file_rewritten_to_a_longer_one_is_read_whole(tmp_path: Path) -> None:
    path = write(tmp_path, session(1).to_bytes())
    total(str(path))
    path.write_bytes(session(4, seed=7).to_bytes())  # longer, but not a continuation
    assert total(str(path)) == "5\n"


def test_parallel_count_matches_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = []
    for n in range(6):
        path = write(tmp_path, session(n, seed=n).to_bytes(), name=f"s{n}")
        sources.append(Source(path, f"s{n}"))
    broken = write(tmp_path, damaged("glued"), name="broken")
    sources.append(Source(broken, "broken"))
    sequential = count_total.count_sources(sources, use_cache=False)
    monkeypatch.setattr(pool, "SCAN_PARALLEL_BYTES", 0)
    monkeypatch.setenv(pool.CPUS_VARIABLE, "2")
    both = count_total.count_sources(sources, use_cache=False)
    assert (both.llm_calls, both.damage) == (sequential.llm_calls, sequential.damage)
    assert sequential.llm_calls == sum(n + 1 for n in range(6)) + full_count(damaged("glued"))[0]
    assert [row[2] for row in sequential.damage] == ["truncated-event"]


@pytest.mark.parametrize("kind", [*DAMAGE, "invalid-utf8", "dropped"])
def test_damage_is_counted_and_reported_as_count_does(kind: str, tmp_path: Path) -> None:
    data = damaged(kind)
    figures, _ = counted(data, tmp_path)
    assert (figures.llm_calls, figures.subagent_calls) == full_count(data)
    reported = read_bytes(data).diagnostics.select(DAMAGE_COLUMNS).rows()
    assert list(figures.damage) == reported
    assert bool(reported) == (kind != "dropped")  # every damage is reported, and only damage


def test_warm_total_repeats_the_warnings_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, damaged("glued"))
    first = CliRunner().invoke(main, ["count", "--total", str(path)])
    monkeypatch.setattr(count_total, "count_file", lambda *a, **k: pytest.fail("read again"))
    second = CliRunner().invoke(main, ["count", "--total", str(path)])
    assert (second.stdout, second.stderr) == (first.stdout, first.stderr)
    assert "truncated-event" in second.stderr


def test_unreadable_file_exits_3(tmp_path: Path) -> None:
    path = write(tmp_path, b"")
    result = CliRunner().invoke(main, ["count", "--total", str(path)])
    assert result.exit_code == 3
    assert result.stdout == "0\n"
    assert "empty-file" in result.stderr


@pytest.mark.process
@pytest.mark.parametrize("cache", ["--no-cache", "cold store", "warm store", "after sessions"])
def test_total_never_imports_polars(cache: str, tmp_path: Path) -> None:
    clean = write(tmp_path, session(2).to_bytes(), name="clean")
    broken = write(tmp_path, damaged("split"), name="broken")
    option = "'--no-cache', " if cache == "--no-cache" else ""
    code = (
        "import sys; from copilot_logs.cli import main\n"
        f"try:\n    main(['count', '--total', {option}sys.argv[1], sys.argv[2]])\n"
        "except SystemExit:\n    pass\n"
        "print('polars' in sys.modules)"
    )
    if cache == "warm store":
        total(str(clean), str(broken))
    if cache == "after sessions":  # full entries: their headers answer
        CliRunner().invoke(main, ["sessions", str(clean), str(broken)])
    out = subprocess.run(
        [sys.executable, "-c", code, str(clean), str(broken)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == [str(3 + full_count(damaged("split"))[0]), "False"]
    assert len(list(store.folder().glob("*.entry"))) == (0 if cache == "--no-cache" else 2)


@pytest.mark.process
def test_a_total_read_on_one_core_imports_no_worker_machinery(tmp_path: Path) -> None:
    """Less to read than is worth a worker (pool.SCAN_PARALLEL_BYTES): multiprocessing and
    concurrent.futures, most of the start-up cost of a small total, are never imported."""
    log = write(tmp_path, session(2).to_bytes())
    code = (
        "import sys; from copilot_logs.cli import main\n"
        "try:\n    main(['count', '--total', '--no-cache', sys.argv[1]])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted({'multiprocessing', 'concurrent.futures'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == ["3", "[]"]


def test_the_total_reads_through_the_block_reader_every_command_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean runs are decoded whole by the one clean lane (counting, so only the fields a
    count reads), and the damaged lines, here an event split over two lines and a glued line
    further on, by the line reader; the figures, the warnings and where the read ended are
    count's."""
    lines = session(6).lines()
    lines[2:3] = synth.split_line(lines[2])  # an event split over lines 3 and 4
    lines[9:11] = [synth.glue_truncated(lines[9], lines[10])]  # a glued line further on
    data = synth.join_lines(lines)
    runs: list[bool] = []
    real = reader.decode_run

    def spy(*args: Any, counting: bool = False) -> Any:
        run = real(*args, counting=counting)
        runs.append(counting and run is not None)
        return run

    monkeypatch.setattr(reader, "decode_run", spy)
    monkeypatch.setattr(reader, "FALLBACK_LINES", 2)
    figures, state = counted(data, tmp_path)
    assert any(runs) and all(runs[-3:])  # clean runs decoded whole, after the damage too
    assert (figures.llm_calls, figures.subagent_calls) == full_count(data)
    reported = read_bytes(data).diagnostics.select(DAMAGE_COLUMNS).rows()
    assert [row[:2] for row in reported] == [
        (3, "split-event"),
        (4, "split-event"),
        (10, "truncated-event"),
    ]
    assert list(figures.damage) == reported
    assert state is not None and state.end == len(data)


def test_the_total_warns_of_damage_exactly_as_count_does(tmp_path: Path) -> None:
    """The same warning lines, in the same order (by file, line, kind), as ``count`` prints for
    the damaged sample, whose line 42 holds two kinds of damage."""

    def warnings(*args: str) -> list[str]:
        run = CliRunner().invoke(main, ["count", *args, "--no-cache", str(SAMPLES)])
        assert run.exit_code == 0, run.stderr
        return [line for line in run.stderr.splitlines() if line.startswith("warning:")]

    expected = warnings()
    assert len([line for line in expected if ":42: " in line]) == 2
    assert warnings("--total") == expected


def test_the_total_refuses_an_unknown_zone_as_count_does() -> None:
    for args in (["count", "--total"], ["count"]):
        result = CliRunner().invoke(main, [*args, "--tz", "Bogus/Zone", str(SAMPLES)])
        assert result.exit_code == 2, (args, result.output)
        assert "unknown time zone" in result.output


def test_a_raw_control_character_in_an_unread_payload_is_counted_as_count_counts_it(
    tmp_path: Path,
) -> None:
    """JSON allows no raw control character in a string: the line is invalid whatever reads
    it. The count's reader keeps events whose payload it does not need from their envelope;
    it must not vouch for such a line (count skipped it, count --total counted it: 2 vs 3)."""
    lines = session(2).lines()
    turn = next(i for i, line in enumerate(lines) if b'"assistant.turn_start"' in line)
    lines[turn] = lines[turn].replace(b'"turnId":"', b'"turnId":"\x03', 1)
    data = synth.join_lines(lines)
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    figures, _ = count_total.count_file(Source(path, "s"))
    assert figures.llm_calls == 3 - 1  # three turns by hand, the damaged one skipped
    assert (figures.llm_calls, figures.subagent_calls) == full_count(data)
    assert [row[:2] for row in figures.damage] == [(turn + 1, "invalid-json")]


def hand_written(fifth: bytes) -> bytes:
    """Two main-agent turns, written by hand; line 5 is ``fifth``."""
    return b"".join(
        line + b"\n"
        for line in (
            b'{"type":"session.start","data":{"sessionId":"s-1","version":1},"id":"e1",'
            b'"timestamp":"2026-08-05T07:49:01.000Z","parentId":null}',
            b'{"type":"user.message","data":{"content":"go"},"id":"e2",'
            b'"timestamp":"2026-08-05T07:49:02.000Z","parentId":"e1"}',
            b'{"type":"assistant.turn_start","data":{"turnId":"0"},"id":"e3",'
            b'"timestamp":"2026-08-05T07:49:03.000Z","parentId":"e2"}',
            b'{"type":"assistant.turn_end","data":{"turnId":"0"},"id":"e4",'
            b'"timestamp":"2026-08-05T07:49:04.000Z","parentId":"e3"}',
            fifth,
            b'{"type":"assistant.turn_end","data":{"turnId":"1"},"id":"e6",'
            b'"timestamp":"2026-08-05T07:49:06.000Z","parentId":"e5"}',
        )
    )


WARNED = {
    "no timestamp": (
        b'{"type":"assistant.turn_start","data":{"turnId":"1"},"id":"e5","parentId":"e4"}',
        "incomplete-envelope: assistant.turn_start event lacks timestamp; kept",
    ),
    "a number beyond 64 bits": (
        b'{"type":"assistant.turn_start","data":{"turnId":"1"},"id":"e5",'
        b'"timestamp":"2026-08-05T07:49:05.000Z","parentId":"e4"}\n'
        b'{"type":"session.usage_checkpoint","data":{"totalNanoAiu":10000000000000000000},'
        b'"id":"e5b","timestamp":"2026-08-05T07:49:05.500Z","parentId":"e5"}',
        "out-of-range-number: out-of-range number at data.totalNanoAiu (10000000000000000000): "
        "beyond what a 64-bit column holds; read as null, the rest of the event kept",
    ),
}


@pytest.mark.parametrize("cache", ["--no-cache", "with the store"])
@pytest.mark.parametrize("case", sorted(WARNED))
def test_the_total_warns_as_count_does_of_a_hand_written_log(
    case: str, cache: str, tmp_path: Path
) -> None:
    """Issue 23: count warned of a line without timestamp (incomplete-envelope) and --total
    said nothing. Both warn now, of the same line, cold and warm, and agree with the hand
    count (2 calls)."""
    fifth, message = WARNED[case]
    path = write(tmp_path, hand_written(fifth))
    line = 5 if case == "no timestamp" else 6
    warning = f"warning: {path}:{line}: {message}"
    args = ["--no-cache"] if cache == "--no-cache" else []
    for _ in range(2):  # cold, then (with the store) warm
        counted_json = CliRunner().invoke(main, ["count", *args, "--format", "json", str(path)])
        assert sum(row["llm_calls"] for row in orjson.loads(counted_json.stdout)) == 2
        assert warning in counted_json.stderr.splitlines()
        totalled = CliRunner().invoke(main, ["count", "--total", *args, str(path)])
        assert (totalled.exit_code, totalled.stdout) == (0, "2\n")
        assert totalled.stderr.splitlines() == [warning]


def test_a_log_appended_to_itself_is_counted_as_a_whole_read_counts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cat a >> a` after the log was counted and seen to grow once (so its entry keeps a CRC):
    the total goes on from the entry, and reads the replayed lines once, as a whole read does
    (the entry keeps the ids its read saw); it once counted them twice."""
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one")
    path = write(tmp_path, builder.to_bytes())
    assert total(str(path)) == "1\n"
    builder.turn("two")
    path.write_bytes(builder.to_bytes())  # the first growth: read whole, its CRC kept
    assert total(str(path)) == "2\n"
    old = path.read_bytes()
    with path.open("ab") as stream:
        stream.write(old)
    starts = read_starts(monkeypatch)
    result = CliRunner().invoke(main, ["count", "--total", str(path)])
    assert result.stdout == "2\n"  # by hand: two turns, each written twice
    assert starts == [len(old)]  # read on from the entry, not whole
    lines = old.count(b"\n")
    assert f"{path}:{lines + 1}: duplicate-id" in result.stderr
    assert (
        result.stdout
        == CliRunner().invoke(main, ["count", "--total", "--no-cache", str(path)]).stdout
    )
