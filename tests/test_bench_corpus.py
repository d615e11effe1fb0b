"""The benchmark corpus is deterministic and its manifest holds the exact figures.

``make bench`` marks each tool's count right or wrong against the manifest, so the manifest
must agree with the reader on a corpus that carries every kind of damage the generator makes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import copilot_logs as cl
from benchmarks import baselines
from benchmarks.corpus import (
    GREP_F_PATTERN,
    TURN_START,
    Manifest,
    ensure_corpus,
    generate,
    session_files,
    write_single_file,
)

SIZE_MB = 6


def digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for path in session_files(folder):
        sha.update(path.relative_to(folder).as_posix().encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()


def grep_lines(files: list[Path], pattern: bytes) -> int:
    return sum(
        sum(1 for line in path.read_bytes().split(b"\n") if pattern in line) for path in files
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    folder = tmp_path_factory.mktemp("bench") / "corpus"
    return folder, generate(folder, SIZE_MB, seed=3)


def test_the_manifest_figures_are_what_the_reader_finds(corpus: tuple[Path, Manifest]) -> None:
    folder, manifest = corpus
    result = cl.read(root=folder)
    counts = cl.count(result)

    assert int(counts["llm_calls"].sum()) == manifest.llm_calls
    assert counts.height == manifest.sessions == manifest.files
    assert manifest.damaged_files > 0
    assert not result.diagnostics.is_empty()
    assert Manifest.read(folder) == manifest


def test_the_manifest_predicts_grep_and_grep_is_too_high(corpus: tuple[Path, Manifest]) -> None:
    folder, manifest = corpus
    files = session_files(folder)

    assert grep_lines(files, GREP_F_PATTERN) == manifest.grep_f_lines
    assert grep_lines(files, TURN_START) == manifest.grep_lines
    assert manifest.llm_calls < manifest.grep_f_lines < manifest.grep_lines
    assert sum(path.stat().st_size for path in files) == manifest.bytes
    assert manifest.bytes >= SIZE_MB << 20


def test_the_baseline_loops_agree_with_each_other(corpus: tuple[Path, Manifest]) -> None:
    folder, manifest = corpus
    paths = [str(p) for p in session_files(folder)]

    plain = baselines.json_loop(paths)

    assert plain == baselines.orjson_loop(paths)
    # They parse but do not drop replayed lines, nor see a cut turn_start: close, not exact.
    assert abs(plain - manifest.llm_calls) <= manifest.damaged_files


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not(
    tmp_path: Path, corpus: tuple[Path, Manifest]
) -> None:
    folder, _ = corpus
    again, manifest, built = ensure_corpus(SIZE_MB, seed=3, folder=tmp_path / "again")
    other = generate(tmp_path / "other", SIZE_MB, seed=4)

    assert built
    assert digest(again) == digest(folder)
    assert digest(tmp_path / "other") != digest(folder)
    assert other.llm_calls != manifest.llm_calls or other.bytes != manifest.bytes
    assert ensure_corpus(SIZE_MB, seed=3, folder=again)[2] is False  # found, not rebuilt


def test_a_single_file_of_many_pieces_reads_as_one_clean_session(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    figures = write_single_file(path, 4, seed=1, piece_mb=1)

    result = cl.read(path)

    assert path.stat().st_size == figures["bytes"] >= 4 << 20
    assert int(cl.count(result)["llm_calls"].sum()) == figures["llm_calls"]
    assert result.events["session_id"].n_unique() == 1
    assert result.diagnostics.is_empty()
    # parentId chains every line to the one before it, across the pieces too.
    events = result.events
    assert (
        events["parent_id"].slice(1).to_list()
        == events["event_id"].slice(0, events.height - 1).to_list()
    )


def test_the_peer_row_reads_the_corpus_through_a_home_of_its_own_or_says_what_to_install(
    corpus: tuple[Path, Manifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import run

    folder, manifest = corpus
    monkeypatch.delenv(run.CCUSAGE, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    absent = run.ccusage_bench(folder, manifest, tmp_path)
    assert absent.skip.startswith("ccusage is not installed (npm install ccusage@20.0.24")
    assert not (tmp_path / "ccusage").exists()

    monkeypatch.setenv(run.CCUSAGE, "/opt/peer/ccusage")
    row = run.ccusage_bench(folder, manifest, tmp_path)
    assert not row.skip
    assert row.argv == ["/opt/peer/ccusage", "copilot", "session", "--json", "--offline"]
    state = Path(row.env["COPILOT_HOME"]) / "session-state"
    assert state.resolve() == folder.resolve()
    assert Path(row.env["HOME"]).is_dir() and not any(Path(row.env["HOME"]).iterdir())
    assert row.expected == manifest.sessions
    # Its count is the sessions it lists (ccusage's JSON: {"sessions": [...], "totals": ...}).
    assert row.counter is not None
    assert row.counter(b'{"sessions":[{"sessionId":"a"},{"sessionId":"b"}],"totals":{}}') == 2
    assert row.counter(b'{"totals":{}}') is None
