"""The envelope scan behind `count --total`: the full reader's count, or no count at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import synth
from copilot_logs import store
from copilot_logs.cli import main
from copilot_logs.commands import count, count_total
from copilot_logs.ingest import reader
from copilot_logs.ingest.calls import CallCounter
from copilot_logs.ingest.decode.envelope import Source
from copilot_logs.ingest.reader import read_bytes
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


def scan_file(path: Path) -> CallCounter | None:
    """The scan's counts when it vouches for the whole file, else None."""
    counter = CallCounter()
    scanned = count_total.scan_file(path, counter)
    return counter if scanned is not None and scanned.whole else None


def scan(data: bytes, tmp_path: Path) -> CallCounter | None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    return scan_file(path)


@settings(max_examples=30, deadline=None)
@given(turns=st.integers(0, 6), subagent_calls=st.integers(0, 3), seed=st.integers(0, 99))
def test_scan_equals_full_reader_on_clean_logs(
    turns: int, subagent_calls: int, seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = session(turns, subagent_calls=subagent_calls, seed=seed).to_bytes()
    totals = scan(data, tmp_path_factory.mktemp("scan"))
    assert totals is not None
    assert (totals.llm_calls, totals.subagent_calls) == full_count(data)


def test_scan_equals_full_reader_on_every_clean_sample(tmp_path: Path) -> None:
    files = list(SAMPLES.rglob("*.jsonl"))
    if REAL_SAMPLES.is_dir():
        files += list(REAL_SAMPLES.glob("*.jsonl"))
    vouched = 0
    for path in files:
        totals = scan_file(path)
        if totals is not None:
            vouched += 1
            assert (totals.llm_calls, totals.subagent_calls) == full_count(path.read_bytes()), path
    assert vouched >= len(files) - 1  # only the damaged sample is left to the reader


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


@pytest.mark.parametrize("kind", [*DAMAGE, "invalid-utf8"])
def test_any_damage_leaves_the_file_to_the_full_reader(kind: str, tmp_path: Path) -> None:
    assert scan(damaged(kind), tmp_path) is None


def test_a_dropped_line_is_no_damage_to_the_scan(tmp_path: Path) -> None:
    """The reader reports no gap in the parentId chain, and counts what is there: so does the
    scan, to the end."""
    data = damaged("dropped")
    assert read_bytes(data).diagnostics.height == 0
    totals = scan(data, tmp_path)
    assert totals is not None
    assert (totals.llm_calls, totals.subagent_calls) == full_count(data)


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
    assert (found.header.path, found.header.llm_calls) == (str(path.absolute()), 3)
    assert found.header.body is None  # counts only: count --total builds no frames
    assert not (copilot_home / "session-state").exists()


def test_unchanged_file_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, session(2).to_bytes())
    total(str(path))
    monkeypatch.setattr(count_total, "_scan", lambda *a, **k: pytest.fail("file was read again"))
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
    read is kept from then on), each growth is scanned from where the entry stopped."""
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one")
    path = write(tmp_path, builder.to_bytes())
    assert total(str(path)) == "1\n"
    builder.turn("two")
    path.write_bytes(builder.to_bytes())
    starts: list[int] = []
    real_scan = count_total._scan

    def spy(source: Source, counter: CallCounter, limit: int, start: int = 0, *args: Any) -> Any:
        starts.append(start)
        return real_scan(source, counter, limit, start, *args)

    monkeypatch.setattr(count_total, "_scan", spy)
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


def test_parallel_scan_matches_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = []
    for n in range(6):
        path = write(tmp_path, session(n, seed=n).to_bytes(), name=f"s{n}")
        sources.append(Source(path, f"s{n}"))
    broken = write(tmp_path, damaged("glued"), name="broken")
    sources.append(Source(broken, "broken"))
    sequential = count_total.scan_sources(sources, use_cache=False)
    monkeypatch.setattr(pool, "SCAN_PARALLEL_BYTES", 0)
    monkeypatch.setenv(pool.CPUS_VARIABLE, "2")
    both = count_total.scan_sources(sources, use_cache=False)
    assert (both.llm_calls, both.damage) == (sequential.llm_calls, sequential.damage)
    assert sequential.llm_calls == sum(n + 1 for n in range(6)) + full_count(damaged("glued"))[0]
    assert [row[2] for row in sequential.damage] == ["truncated-event"]


@pytest.mark.parametrize("kind", [*DAMAGE, "invalid-utf8", "dropped"])
def test_full_read_fallback_counts_like_count(kind: str, tmp_path: Path) -> None:
    data = damaged(kind)
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    totals = count_total.count_file(Source(path, "s"))
    assert (totals.llm_calls, totals.subagent_calls) == full_count(data)
    reported = read_bytes(data).diagnostics.select(DAMAGE_COLUMNS).rows()
    assert list(totals.damage) == reported


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


def test_full_reader_goes_on_from_the_first_line_the_scan_cannot_vouch_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = damaged("cut")
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    offsets: list[int] = []
    real = reader.count_calls

    def spy(source: Source, counter: CallCounter, resume: Any, *more: Any) -> Any:
        offsets.append(resume.offset if resume else 0)
        return real(source, counter, resume, *more)

    monkeypatch.setattr(reader, "count_calls", spy)
    totals = count_total.count_file(Source(path, "s"))
    assert offsets == [data.rindex(b"\n") + 1]  # only the cut last line was read again
    assert (totals.llm_calls, totals.subagent_calls) == full_count(data)
    assert [row[1] for row in totals.damage] == ["cut-line"]


def test_the_reader_reads_only_the_damaged_lines_and_the_scan_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = session(6).lines()
    lines[2:3] = synth.split_line(lines[2])  # an event split over lines 3 and 4
    lines[9:11] = [synth.glue_truncated(lines[9], lines[10])]  # a glued line further on
    data = synth.join_lines(lines)
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    windows: list[int] = []
    real = reader.count_window

    def spy(lines: bytes, counter: CallCounter, resume: Any, diagnostics: Any) -> Any:
        windows.append(lines.count(b"\n"))
        return real(lines, counter, resume, diagnostics)

    monkeypatch.setattr(reader, "count_window", spy)
    monkeypatch.setattr(reader, "count_calls", lambda *a: pytest.fail("read to the end"))
    totals = count_total.count_file(Source(path, "s"))
    assert windows == [3, 2]  # the two halves and the next line; the glued line and the next
    assert (totals.llm_calls, totals.subagent_calls) == full_count(data)
    reported = read_bytes(data).diagnostics.select(DAMAGE_COLUMNS).rows()
    assert list(totals.damage) == reported
    assert totals.progress is not None and totals.progress.end == len(data)


def test_the_total_warns_of_damage_exactly_as_count_does(tmp_path: Path) -> None:
    """The same warning lines, in the same order (by file, line, kind), as ``count`` prints for
    the damaged sample, whose line 42 holds two kinds of damage."""

    def warnings(*args: str) -> list[str]:
        run = subprocess.run(
            [sys.executable, "-m", "copilot_logs", "count", *args, "--no-cache", str(SAMPLES)],
            capture_output=True,
            text=True,
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
        )
        assert run.returncode == 0, run.stderr
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
    totals = count_total.count_file(Source(path, "s"))
    assert totals.llm_calls == 3 - 1  # three turns by hand, the damaged one skipped
    assert (totals.llm_calls, totals.subagent_calls) == full_count(data)
    assert [row[:2] for row in totals.damage] == [(turn + 1, "invalid-json")]
