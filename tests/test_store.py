"""The store: one entry per log, the same frames as a fresh read, unchanged logs not read again,
grown logs read from where the entry stopped, and never a stale, corrupt or foreign answer."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from copilot_logs import store
from copilot_logs.cli import main
from copilot_logs.ingest import reader
from copilot_logs.ingest.logfile import Source
from copilot_logs.ingest.reader import ReadResult
from copilot_logs.store import SWEPT, collect, pool
from copilot_logs.store.collect import read_all
from synth import SessionBuilder, bash, nul_tail

from .conftest import SAMPLES


def ordered(result: ReadResult) -> tuple[pl.DataFrame, pl.DataFrame]:
    return result.events.sort("file", "line"), result.diagnostics.sort("file", "line", "kind")


def assert_same(left: ReadResult, right: ReadResult) -> None:
    for a, b in zip(ordered(left), ordered(right), strict=True):
        assert_frame_equal(a, b)


def sample_sources() -> list[Source]:
    return [
        Source(p, p.parent.name if p.name == "events.jsonl" else p.stem)
        for p in sorted(SAMPLES.rglob("*.jsonl"))
    ]


def entries() -> list[Path]:
    return sorted(store.folder().glob("*.entry"))


def leftovers() -> list[Path]:
    """What the store folder holds besides its entries (and the mark of the last sweep)."""
    return [
        p for p in store.folder().iterdir() if not p.name.endswith(".entry") and p.name != SWEPT
    ]


def test_cached_read_equals_fresh_read(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    fresh = read_all(sources)
    first = read_all(sources, use_cache=True)
    assert_same(first, fresh)
    assert len(entries()) == len(sources)  # one entry per log
    monkeypatch.setattr(reader, "read_many", lambda *a, **k: pytest.fail("read again"))
    monkeypatch.setattr(collect, "read_many", lambda *a, **k: pytest.fail("read again"))
    second = read_all(sources, use_cache=True)
    assert_same(second, fresh)


def test_file_names_follow_the_caller(tmp_path: Path) -> None:
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("done")
    path = builder.write(tmp_path / "s" / "events.jsonl")
    read_all([Source(path, "s")], use_cache=True)
    relative = Path(os.path.relpath(path))
    again = read_all([Source(relative, "s")], use_cache=True)
    assert again.events["file"].unique().to_list() == [str(relative)]
    assert again.diagnostics.height == 0


def grow(tmp_path: Path) -> tuple[Path, SessionBuilder, int]:
    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one", [bash("ls", "a")])
    path = builder.write(tmp_path / "s" / "events.jsonl")
    size = path.stat().st_size
    read_all([Source(path, "s")], use_cache=True)
    builder.turn("two")
    builder.turn("three")
    path.write_bytes(builder.to_bytes())
    return path, builder, size


def test_grown_file_reads_only_new_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first growth of a log is read whole (its entry kept no CRC of the bytes read: a
    log never touched again costs no second pass); from then on only the new bytes."""
    path, builder, _ = grow(tmp_path)
    offsets: list[Any] = []
    real = collect.read_many

    def spy(jobs: Any) -> Any:
        offsets.extend(resume.end if resume else 0 for _, resume in jobs)
        return real(jobs)

    monkeypatch.setattr(collect, "read_many", spy)
    read_all([Source(path, "s")], use_cache=True)
    assert offsets == [0]
    size = path.stat().st_size
    builder.turn("four")
    path.write_bytes(builder.to_bytes())
    read_all([Source(path, "s")], use_cache=True)
    assert offsets == [0, size]
    again = path.stat().st_size
    builder.turn("five")
    path.write_bytes(builder.to_bytes())
    grown = read_all([Source(path, "s")], use_cache=True)
    assert offsets == [0, size, again]  # the CRC went on over the bytes read at each growth
    assert_same(grown, read_all([Source(path, "s")]))
    assert grown.events["line"].to_list() == list(range(1, len(builder.lines()) + 1))


def test_rewritten_file_is_read_whole(tmp_path: Path) -> None:
    path, _, _ = grow(tmp_path)
    other = SessionBuilder(seed=5)
    other.user_message("something else")
    for n in range(6):
        other.turn(f"step {n}")
    path.write_bytes(other.to_bytes())  # longer, but not a continuation
    assert_same(read_all([Source(path, "s")], use_cache=True), read_all([Source(path, "s")]))


def test_changed_file_is_read_again(tmp_path: Path) -> None:
    path, _, _ = grow(tmp_path)
    read_all([Source(path, "s")], use_cache=True)
    path.write_bytes(nul_tail(path.read_bytes()))
    os.utime(path, ns=(1, 1))
    result = read_all([Source(path, "s")], use_cache=True)
    assert "nul-bytes" in result.diagnostics["kind"].to_list()


def test_batches_give_the_same_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    whole = read_all(sources)
    monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 4000)
    assert len(collect.batches(sources, 4000)) > 3
    assert_same(read_all(sources), whole)
    assert_same(read_all(sources, use_cache=True), whole)
    assert_same(read_all(sources, use_cache=True), whole)


def test_cli_no_cache_writes_nothing(copilot_home: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", str(SAMPLES), "--no-cache", "--format", "json"])
    assert result.exit_code == 0
    assert not (copilot_home / "cache").exists()
    CliRunner().invoke(main, ["sessions", str(SAMPLES), "--format", "json"])
    assert len(entries()) == len(sample_sources())


def test_parallel_parse_equals_sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    sequential = read_all(sources)
    monkeypatch.setattr(pool, "FRAMES_PARALLEL_BYTES", 0)
    monkeypatch.setattr(pool, "MAX_BATCH_BYTES", 20_000)
    monkeypatch.setenv(pool.CPUS_VARIABLE, "2")
    seen: list[Source] = []
    in_workers = read_all(sources, on_read=seen.append)
    assert_same(in_workers, sequential)
    assert sorted(s.name for s in seen) == sorted(s.name for s in sources)


def test_rewritten_longer_file_with_the_same_beginning_is_read_whole(tmp_path: Path) -> None:
    """A /rewind rewrites the file: the same first lines, then something else, longer."""
    builder = SessionBuilder()
    builder.user_message("go")
    for n in range(4):
        builder.turn(f"step {n}", [bash("ls", "a")])
    path = builder.write(tmp_path / "s" / "events.jsonl")
    read_all([Source(path, "s")], use_cache=True)
    lines = builder.lines()
    rewritten = b"\n".join(lines[:6]) + b"\n" + b"x" * (path.stat().st_size) + b"\n"
    path.write_bytes(rewritten)
    assert_same(read_all([Source(path, "s")], use_cache=True), read_all([Source(path, "s")]))


def test_event_split_across_the_cached_end_is_rejoined(tmp_path: Path) -> None:
    from synth import split_line

    builder = SessionBuilder()
    builder.user_message("go")
    builder.turn("one")
    builder.user_message("second prompt")
    lines = builder.lines()
    first, second = split_line(lines[-1])
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join([*lines[:-1], first]) + b"\n")  # the writer is mid-event
    read_all([Source(path, "s")], use_cache=True)
    path.write_bytes(b"\n".join([*lines[:-1], first, second]) + b"\n")
    cached = read_all([Source(path, "s")], use_cache=True)
    assert_same(cached, read_all([Source(path, "s")]))
    assert "split-event" in cached.diagnostics["kind"].to_list()


def test_workers_start_early_only_when_there_is_a_lot_to_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from multiprocessing import forkserver

    started: list[bool] = []
    monkeypatch.setattr(forkserver, "ensure_running", lambda: started.append(True))
    monkeypatch.setenv(pool.CPUS_VARIABLE, "2")
    sources = sample_sources()
    total = sum(s.size for s in sources)
    monkeypatch.setattr(pool, "FRAMES_PARALLEL_BYTES", total + 1)
    pool.start_workers_early(sources, use_cache=False)
    assert started == []
    monkeypatch.setattr(pool, "FRAMES_PARALLEL_BYTES", total)
    pool.start_workers_early([*sources, Source(None, "stdin")], use_cache=False)
    assert started == []  # standard input is read here, never by a worker
    pool.start_workers_early(sources, use_cache=False)
    assert started == [True]
    read_all(sources, use_cache=True)  # now cached: nothing left to parse
    started.clear()
    pool.start_workers_early(sources, use_cache=True)
    assert started == []


# --- The key fails closed --------------------------------------------------------------------


def turns_log(turns: int, seed: int = 0) -> bytes:
    builder = SessionBuilder(seed=seed)
    builder.user_message("go")
    for n in range(turns):
        builder.turn(f"step {n}", [bash("ls", "a")])
    builder.shutdown()
    return builder.to_bytes()


def llm_calls(args: list[str]) -> int:
    result = CliRunner().invoke(main, ["count", "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return sum(row["llm_calls"] for row in msgspec.json.decode(result.stdout))


def total(args: list[str]) -> int:
    result = CliRunner().invoke(main, ["count", "--total", *args])
    assert result.exit_code == 0, result.output
    return int(result.stdout)


def same_size_rewrite(path: Path) -> None:
    """Rewrite the log in place with other events of the same size, and put its modification
    time back (`cp -p`, `rsync -t`, `tar x`, an editor that restores mtime)."""
    before = path.stat()
    data = path.read_bytes()
    changed = data.replace(b'"type":"assistant.turn_start"', b'"type":"assistant.turn_stop!"', 1)
    assert len(changed) == len(data) and changed != data
    path.write_bytes(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


@pytest.mark.parametrize("command", [llm_calls, total])
def test_a_same_size_same_mtime_rewrite_is_not_served_stale(command: Any, tmp_path: Path) -> None:
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(turns_log(3))
    assert command([str(path)]) == 3
    same_size_rewrite(path)
    assert command([str(path)]) == 2
    assert command([str(path), "--no-cache"]) == 2


def restamp(log: Path) -> None:
    """Make the entry of ``log`` claim the log's current stat, ctime included (what a rewrite
    that kept the ctime would look like): only the hashes can tell then."""
    entry = store.entry_path(log)
    raw = entry.read_bytes()
    _, length, _ = store.PREFIX.unpack(raw[: store.PREFIX.size])
    header = msgspec.msgpack.decode(raw[store.PREFIX.size : store.PREFIX.size + length])
    stamp = store.stamp_of(log)
    assert stamp is not None
    header["stamp"] = msgspec.structs.asdict(stamp)
    encoded = msgspec.msgpack.encode(header)
    prefix = store.PREFIX.pack(store.MAGIC, len(encoded), __import__("zlib").crc32(encoded))
    entry.write_bytes(prefix + encoded + raw[store.PREFIX.size + length :])
    assert store.find(Source(log, "s")).header is not None


@pytest.mark.parametrize("command", [llm_calls, total])
def test_the_hashes_catch_a_rewrite_with_the_same_ctime(command: Any, tmp_path: Path) -> None:
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(turns_log(3))
    assert command([str(path)]) == 3
    same_size_rewrite(path)
    restamp(path)
    assert command([str(path)]) == 2


def long_log(turns: int) -> tuple[SessionBuilder, bytes]:
    """A log far longer than the two 4 KB windows the key hashes."""
    builder = SessionBuilder(seed=7)
    builder.user_message("go")
    for n in range(turns):
        builder.turn(f"step {n}", [bash("ls", "a")])
    data = builder.to_bytes()
    assert len(data) > 8 * store.entry.HASH_BYTES
    return builder, data


def edit_mid_file(path: Path) -> None:
    """Rewrite, in place and with the same size, the turn_start nearest the middle of the log
    (far from both hashed windows), and put its modification time back."""
    before = path.stat()
    data = path.read_bytes()
    marker = b'"type":"assistant.turn_start"'
    middle = data.find(marker, len(data) // 2)
    assert store.entry.HASH_BYTES < middle < len(data) - 2 * store.entry.HASH_BYTES
    changed = data[:middle] + b'"type":"assistant.turn_stop!"' + data[middle + len(marker) :]
    with path.open("r+b") as stream:  # in place: the same inode
        stream.write(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )


@pytest.mark.parametrize("command", [llm_calls, total])
def test_freshness_is_not_judged_by_size_alone(command: Any, tmp_path: Path) -> None:
    """Mutation guard (docs/development.md): store/entry.py judging an entry fresh by the size
    (and the hashed windows) alone serves 40 for this log's 39 turns."""
    path = long_log(40)[0].write(tmp_path / "s" / "events.jsonl")
    assert command([str(path)]) == 40
    edit_mid_file(path)
    assert command([str(path)]) == 39  # by hand: one turn_start of the 40 is gone


def append_turn(path: Path, builder: SessionBuilder) -> None:
    """Append one more turn, as the CLI appends (the same inode)."""
    before = builder.to_bytes()
    builder.turn("one more", [bash("ls", "b")])
    with path.open("ab") as stream:
        stream.write(builder.to_bytes()[len(before) :])


@pytest.mark.parametrize("command", [llm_calls, total])
def test_an_in_place_edit_then_an_append_is_not_served_stale(command: Any, tmp_path: Path) -> None:
    """Mutation guard: a grown log is read on from where its entry stopped only when the CRC
    of every byte read before still matches (the two hashed windows cannot see this edit)."""
    builder = long_log(40)[0]
    path = builder.write(tmp_path / "s" / "events.jsonl")
    assert command([str(path)]) == 40
    append_turn(path, builder)
    assert command([str(path)]) == 41  # the first growth: read whole, its CRC kept
    edit_mid_file(path)
    append_turn(path, builder)
    assert command([str(path)]) == 41  # by hand: 42 turns written, one turn_start edited away


NOT_CONTINUING = {
    "a second session appended (cat b >> a)": lambda old, builder: SessionBuilder(seed=11),
    "the log appended to itself (cat a >> a)": lambda old, builder: old,
    "lines lost in between": lambda old, builder: builder,
}


@pytest.mark.parametrize("case", sorted(NOT_CONTINUING))
def test_new_lines_that_do_not_continue_the_old_read_as_a_whole_read_does(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why store/__init__.py no longer re-reads a grown log whose first new event does not
    continue the parentId chain: once its old bytes are proven unchanged, reading on from
    where the entry stopped gives exactly what a whole read gives, whatever follows."""
    builder = SessionBuilder(seed=3)
    builder.user_message("go")
    builder.turn("one", [bash("ls", "a")])
    path = builder.write(tmp_path / "s" / "events.jsonl")
    source = Source(path, "s")
    read_all([source], use_cache=True)
    append_turn(path, builder)
    read_all([source], use_cache=True)  # the first growth: the entry now keeps a CRC
    old = path.read_bytes()
    extra = NOT_CONTINUING[case](old, builder)
    if isinstance(extra, SessionBuilder):
        if extra is builder:  # two turns written, only the second one on disk
            append_turn(Path(os.devnull), builder)
            before = builder.to_bytes()
            append_turn(Path(os.devnull), builder)
            added = builder.to_bytes()[len(before) :]
        else:
            extra.user_message("another task")
            extra.turn("two")
            added = extra.to_bytes()
    else:
        added = extra
    with path.open("ab") as stream:
        stream.write(added)
    offsets: list[int] = []
    real = collect.read_many

    def spy(jobs: Any) -> Any:
        offsets.extend(resume.end if resume else 0 for _, resume in jobs)
        return real(jobs)

    monkeypatch.setattr(collect, "read_many", spy)
    grown = read_all([source], use_cache=True)
    assert offsets == [len(old)]  # read on from the entry, not whole
    assert_same(grown, read_all([source]))


# --- A corrupt, foreign or other-version entry is ignored and rewritten -----------------------


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1 :]


def header_of(entry: Path) -> tuple[dict[str, Any], bytes]:
    raw = entry.read_bytes()
    _, length, _ = store.PREFIX.unpack(raw[: store.PREFIX.size])
    header = msgspec.msgpack.decode(raw[store.PREFIX.size : store.PREFIX.size + length])
    return header, raw[store.PREFIX.size + length :]


def with_header(header: dict[str, Any], body: bytes) -> bytes:
    import zlib

    encoded = msgspec.msgpack.encode(header)
    return store.PREFIX.pack(store.MAGIC, len(encoded), zlib.crc32(encoded)) + encoded + body


def other_body(body: bytes, header: dict[str, Any]) -> bytes:
    """A body of another shape (one column more), with a valid CRC."""
    import io
    import zlib

    events_length, _, rows = header["body"]
    events = pl.read_ipc(io.BytesIO(body[:events_length])).with_columns(extra=pl.lit(1))
    buffer = io.BytesIO()
    events.write_ipc(buffer)
    new = buffer.getvalue()
    header["body"] = [len(new), zlib.crc32(new), rows]
    return new + body[events_length:]


def with_figures(header: dict[str, Any], **figures: Any) -> dict[str, Any]:
    return {**header, "figures": {**header["figures"], **figures}}


DAMAGES = {
    "bit-flip in the header": lambda raw, entry: flip(raw, store.PREFIX.size + 40),
    "bit-flip in the body": lambda raw, entry: flip(raw, len(raw) - 100),
    "truncated": lambda raw, entry: raw[: len(raw) // 2],
    "empty": lambda raw, entry: b"",
    "a pickle": lambda raw, entry: b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.",
    "negative count, valid CRC": lambda raw, entry: with_header(
        with_figures(header_of(entry)[0], llm_calls=-281474976710653), header_of(entry)[1]
    ),
    "wrong value types, valid CRC": lambda raw, entry: with_header(
        {**with_figures(header_of(entry)[0], llm_calls="3"), "stamp": [1, 2]},
        header_of(entry)[1],
    ),
    "unknown field, valid CRC": lambda raw, entry: with_header(
        {**header_of(entry)[0], "extra": 1}, header_of(entry)[1]
    ),
    "another version": lambda raw, entry: with_header(
        {**header_of(entry)[0], "version": store.VERSION + 1}, header_of(entry)[1]
    ),
    "another copilot-logs": lambda raw, entry: with_header(
        {**header_of(entry)[0], "code": "0" * 32}, header_of(entry)[1]
    ),
    "another log's entry": lambda raw, entry: with_header(
        {**header_of(entry)[0], "path": "/elsewhere/events.jsonl"}, header_of(entry)[1]
    ),
    "wrong schema, valid CRC": lambda raw, entry: with_header(
        header_of(entry)[0], other_body(header_of(entry)[1], header_of(entry)[0])
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_entry_is_never_served_and_is_rewritten(damage: str, tmp_path: Path) -> None:
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(turns_log(3))
    source = Source(path, "s")
    fresh = read_all([source])
    entry = store.entry_path(path)

    def damaged_entry() -> None:
        store.clear()
        read_all([source], use_cache=True)
        entry.write_bytes(DAMAGES[damage](entry.read_bytes(), entry))

    damaged_entry()
    found = store.find(source)
    assert found.state is store.State.MISS or store.load_frames(source, found) is None
    assert total([str(path)]) == 3  # the header-only reader neither crashes nor trusts it
    damaged_entry()
    assert_same(read_all([source], use_cache=True), fresh)
    found = store.find(source)
    assert found.state is store.State.FRESH and store.load_frames(source, found) is not None
    damaged_entry()
    assert llm_calls([str(path)]) == 3


# --- Private, atomic, safe under concurrent runs, bounded ------------------------------------


def test_the_store_is_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        read_all(sample_sources(), use_cache=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(store.folder().stat().st_mode) == 0o700
    assert stat.S_IMODE(store.folder().parent.stat().st_mode) == 0o700
    modes = {stat.S_IMODE(entry.stat().st_mode) for entry in entries()}
    assert modes == {0o600}


def test_a_failed_rename_leaves_no_temporary_file(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    fresh = read_all(sources)

    def failing(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "replace", failing)
    assert_same(read_all(sources, use_cache=True), fresh)
    assert total([str(SAMPLES)]) > 0
    assert leftovers() == [] and entries() == []


@pytest.mark.process
@pytest.mark.xdist_group("concurrency")
def test_concurrent_runs_leave_one_whole_entry_per_log(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for n in range(12):
        path = root / f"s{n}" / "events.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(turns_log(n % 4 + 1, seed=n))
    commands = [["sessions"], ["count"], ["count", "--total"], ["validate"]] * 2
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "copilot_logs", *command, "--root", str(root)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for command in commands
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert b"Traceback" not in err
    assert leftovers() == []
    assert len(entries()) == 12
    for path in sorted(root.rglob("events.jsonl")):
        assert store.find(Source(path, path.parent.name)).state is store.State.FRESH


def test_entries_of_logs_that_are_gone_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    paths = []
    for n in range(3):
        path = root / f"s{n}" / "events.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(turns_log(2, seed=n))
        paths.append(path)
    llm_calls(["--root", str(root)])
    assert len(entries()) == 3
    paths[0].unlink()
    paths[1].write_bytes(turns_log(4, seed=9))  # a run that writes also tidies the store
    llm_calls(["--root", str(root)])
    assert len(entries()) == 3  # the headers are read to find gone logs once a day only
    os.utime(store.folder() / SWEPT, (1, 1))
    paths[2].write_bytes(turns_log(5, seed=9))
    llm_calls(["--root", str(root)])
    assert sorted(entries()) == sorted(store.entry_path(p) for p in paths[1:])


def test_the_store_keeps_under_its_size_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = sample_sources()
    read_all(sources, use_cache=True)
    sizes = {entry: entry.stat().st_size for entry in entries()}
    limit = sum(sizes.values()) // 2
    store.prune(limit)
    assert 0 < sum(entry.stat().st_size for entry in entries()) <= limit
    monkeypatch.setenv(store.MAX_MB_VARIABLE, "0")
    assert store.max_bytes() == 0
    read_all(sources, use_cache=True)
    assert entries() == []
    monkeypatch.setenv(store.MAX_MB_VARIABLE, "not a number")
    assert store.max_bytes() == store.DEFAULT_MAX_MB << 20


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    """Only temporary files of ours (named as the store names them, holding the start of an
    entry) are removed, once an hour old."""
    read_all(sample_sources(), use_cache=True)
    old = store.folder() / ".k3j_9x2a.tmp"
    young = store.folder() / ".a8d7f6e5.tmp"
    empty = store.folder() / ".emptyfil.tmp"
    not_ours = store.folder() / ".notes000.tmp"
    for path, data in [(old, store.MAGIC), (young, store.MAGIC), (empty, b""), (not_ours, b"x")]:
        path.write_bytes(data)
    for path in (old, empty, not_ours):
        os.utime(path, (1, 1))
    store.prune()
    assert not old.exists() and not empty.exists()
    assert young.exists() and not_ours.exists()


# --- cache info / clear ------------------------------------------------------------------------


def test_cache_info_and_clear(copilot_home: Path) -> None:
    runner = CliRunner()
    empty = msgspec.json.decode(runner.invoke(main, ["cache", "info", "--format", "json"]).stdout)
    assert empty == {"path": str(store.folder()), "entries": 0, "bytes": 0, "trusted": True}
    assert store.folder() == copilot_home / "cache" / "copilot-logs" / "store"
    runner.invoke(main, ["sessions", str(SAMPLES)])
    held = msgspec.json.decode(runner.invoke(main, ["cache", "info", "--format", "json"]).stdout)
    on_disk = sum(p.stat().st_size for p in store.folder().iterdir())
    assert held == {
        "path": str(store.folder()),
        "entries": len(sample_sources()),
        "bytes": on_disk,
        "trusted": True,
    }
    table = runner.invoke(main, ["cache", "info"]).stdout
    assert str(store.folder()) in table and f"{len(sample_sources())} session logs" in table
    cleared = runner.invoke(main, ["cache", "clear"])
    assert cleared.exit_code == 0
    assert not store.folder().exists()
    again = msgspec.json.decode(runner.invoke(main, ["cache", "info", "--format", "json"]).stdout)
    assert (again["entries"], again["bytes"]) == (0, 0)


# --- A command's value per log: a warm run reads no events ------------------------------------

COMMANDS = [
    ["sessions", "--format", "json"],
    ["count", "--format", "json"],
    ["count", "--by", "day", "--tz", "UTC", "--format", "json"],
    ["audit", "--format", "json", "--all"],
    ["validate", "--format", "json"],
    ["usage", "--format", "json"],
    ["timeline", "--format", "json"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:3]))
def test_a_warm_run_equals_a_cold_one(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    cold = runner.invoke(main, [*command, str(SAMPLES), "--no-cache"])
    first = runner.invoke(main, [*command, str(SAMPLES)])
    second = runner.invoke(main, [*command, str(SAMPLES)])
    for run in (first, second):
        assert (run.exit_code, run.stdout, run.stderr) == (cold.exit_code, cold.stdout, cold.stderr)


def test_values_that_split_by_file_are_answered_without_the_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = CliRunner()
    cold = runner.invoke(main, ["sessions", str(SAMPLES), "--format", "json", "--no-cache"])
    runner.invoke(main, ["sessions", str(SAMPLES), "--format", "json"])
    with monkeypatch.context() as patched:
        patched.setattr(store, "read", lambda *a, **k: pytest.fail("the events were read"))
        warm = runner.invoke(main, ["sessions", str(SAMPLES), "--format", "json"])
    assert (warm.stdout, warm.stderr, warm.exit_code) == (cold.stdout, cold.stderr, cold.exit_code)
    # Another command's value is added to the same entries, the first one's kept.
    runner.invoke(main, ["count", str(SAMPLES), "--format", "json", "--tz", "UTC"])
    for entry in entries():
        assert [key for key, _, _ in header_of(entry)[0]["results"]] == [
            "copilot_logs.commands.count.count(by='session', zone='UTC')",
            "copilot_logs.commands.sessions.summarize",
        ]


COUNT_KEY = "copilot_logs.commands.count.count(by='session', zone="
"""The start of the key of count's value (the zone is the machine's)."""


def with_count_rows(entry: Path, change: Any) -> None:
    """Rewrite the rows of count's value in an entry's header with ``change(rows)``, the
    header's CRC made valid again (what a crafted or buggy entry looks like)."""
    header, body = header_of(entry)
    for result in header["results"]:
        if result[0].startswith(COUNT_KEY):
            result[2][0] = change(result[2][0])
    entry.write_bytes(with_header(header, body))


def set_column(name: str, values: list[Any]) -> Any:
    def change(rows: list[Any]) -> list[Any]:
        schema, height, columns = rows
        columns[[column for column, _ in schema].index(name)] = values
        return [schema, height, columns]

    return change


ROW_DAMAGES = {
    "bit-flip in the rows": None,
    "a text in a count column": set_column("llm_calls", ["3"]),
    "a column shorter than the rows": set_column("llm_calls", []),
    "an unknown dtype": lambda rows: [
        [[name, "Object" if name == "llm_calls" else text] for name, text in rows[0]],
        *rows[1:],
    ],
    "a negative height": lambda rows: [rows[0], -1, rows[2]],
    "a column missing": lambda rows: [rows[0], rows[1], rows[2][1:]],
}


@pytest.mark.parametrize("damage", sorted(ROW_DAMAGES))
def test_damaged_result_rows_are_never_served(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(turns_log(3))
    assert llm_calls([str(path)]) == 3
    entry = store.entry_path(path)
    if ROW_DAMAGES[damage] is None:
        raw = entry.read_bytes()
        at = raw.index(COUNT_KEY.encode()) + len(COUNT_KEY) + 40  # inside the kept rows
        entry.write_bytes(flip(raw, at))
    else:
        with_count_rows(entry, ROW_DAMAGES[damage])
    read_again: list[int] = []
    original = store.read
    monkeypatch.setattr(store, "read", lambda *a, **k: read_again.append(1) or original(*a, **k))
    assert llm_calls([str(path)]) == 3  # computed again from the frames, never the rows
    assert read_again
    read_again.clear()
    assert llm_calls([str(path)]) == 3  # and the entry was rewritten whole: served again
    assert not read_again


def test_result_rows_of_another_copilot_logs_are_never_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(turns_log(3))
    assert llm_calls([str(path)]) == 3
    entry = store.entry_path(path)
    _, body = header_of(entry)
    with_count_rows(entry, set_column("llm_calls", [7]))
    assert llm_calls([str(path)]) == 7  # (rows that fit are served: the CRC vouches for them)
    entry.write_bytes(with_header({**header_of(entry)[0], "code": "0" * 32}, body))
    assert llm_calls([str(path)]) == 3


def test_a_warm_run_looks_each_log_up_once_and_starts_no_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from copilot_logs.store import entry as entry_store

    runner = CliRunner()
    command = ["sessions", str(SAMPLES), "--format", "json"]
    cold = runner.invoke(main, [*command, "--no-cache"])
    runner.invoke(main, command)
    monkeypatch.setenv(pool.CPUS_VARIABLE, "4")
    monkeypatch.setattr(pool, "FRAMES_PARALLEL_BYTES", 0)  # workers for any read
    monkeypatch.setattr(pool, "executor", lambda *a, **k: pytest.fail("a worker started"))
    opened: list[str] = []
    original = entry_store.load_header
    monkeypatch.setattr(entry_store, "load_header", lambda e: opened.append(e) or original(e))
    warm = runner.invoke(main, command)
    assert (warm.stdout, warm.exit_code) == (cold.stdout, cold.exit_code)
    assert sorted(opened) == sorted(str(store.entry_path(s.path)) for s in sample_sources())


@pytest.mark.process
def test_functions_are_described_the_same_in_every_process() -> None:
    from functools import partial

    from copilot_logs.commands import count

    described = store.describe(partial(count.count, by="day", zone="UTC"))
    assert described == "copilot_logs.commands.count.count(by='day', zone='UTC')"
    code = (
        "from functools import partial; from copilot_logs import store\n"
        "from copilot_logs.commands import count\n"
        "print(store.describe(partial(count.count, by='day', zone='UTC')))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.stdout.strip() == described
    assert store.describe(lambda result: result) is None
    assert store.describe(partial(count.count, by=object())) is None
    ordered_sets = {store.describe(partial(count.count, by={"a", "b", "c"})) for _ in range(5)}
    assert len(ordered_sets) == 1


def test_rows_of_every_kept_dtype_build_the_same_frame() -> None:
    from datetime import UTC, date, datetime, timedelta

    from copilot_logs.store.entry import frame_of, split_rows

    models = pl.List(pl.Struct({"model": pl.String, "cost": pl.Float64}))
    frame = pl.DataFrame(
        {
            "file": ["a", "b", "a"],
            "at": [datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC), None, datetime(1969, 1, 1)],
            "day": [date(2026, 1, 2), date(1969, 12, 31), None],
            "took": [timedelta(milliseconds=1500), None, timedelta(days=-1)],
            "cost": [float("nan"), float("inf"), -0.5],
            "big": [2**64 - 1, 0, None],
            "ok": [True, None, False],
            "none": [None, None, None],
            "tags": [["x", None], [], None],
            "models": [[{"model": "m", "cost": 1.5}], None, [{"model": None, "cost": None}]],
        },
        schema_overrides={
            "at": pl.Datetime("ms", "UTC"),
            "took": pl.Duration("ms"),
            "big": pl.UInt64,
            "models": models,
        },
    )
    split = split_rows(frame)
    assert split is not None
    empty, by_file = split
    rebuilt = frame_of([("a", by_file["a"]), ("b", by_file["b"]), ("c", empty)])
    assert_frame_equal(rebuilt, pl.concat([frame.filter(pl.col("file") == f) for f in "ab"]))


@pytest.mark.parametrize("cost", [2.0, 0.1, float("nan"), float("inf"), None])
def test_nested_rows_keep_their_exact_values(cost: float | None) -> None:
    """Usage's per-model column (a list of structs) comes back with its floats as floats (2.0
    stays 2.0, never the integer 2) and NaN and infinities as they were, not as nulls."""
    from copilot_logs.store.entry import frame_of, split_rows

    models = pl.List(pl.Struct({"model": pl.String, "cost": pl.Float64, "calls": pl.Int64}))
    frame = pl.DataFrame(
        {
            "file": ["a", "a", "b"],
            "models": [[{"model": "m", "cost": cost, "calls": 3}], [], None],
        },
        schema_overrides={"models": models},
    )
    split = split_rows(frame)
    assert split is not None
    rebuilt = frame_of([(name, rows) for name, rows in sorted(split[1].items())])
    assert_frame_equal(rebuilt, frame)
    assert split_rows(frame.with_columns(pl.col("file").cast(pl.Categorical))) is None
    assert split_rows(frame.with_columns(kind=pl.lit("x", dtype=pl.Categorical))) is None
    assert split_rows(frame.drop("file")) is None


def test_the_code_stamp_covers_modules_outside_the_store() -> None:
    """An edit anywhere in the package (here: count's core) makes every entry stale."""
    import copilot_logs
    from copilot_logs.store.entry import code_stamp as cached

    code_stamp = cached.__wrapped__  # computed afresh: the process keeps its first stamp
    target = Path(copilot_logs.__file__).parent / "commands" / "count.py"
    before, info = code_stamp(), target.stat()
    try:
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        assert code_stamp() != before
    finally:
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert code_stamp() == before


@pytest.mark.parametrize("command", [llm_calls, total])
def test_a_log_edited_while_it_is_read_is_never_read_on_from_its_entry(
    command: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation guard: an entry is written only when the log's stamp after the read is the
    stamp it was looked up with. Else the CRC and windows taken at the write (of the edited
    bytes) would vouch for the rows read before the edit, and the next growth would be read on
    from them."""
    from copilot_logs.ingest.reader import FileReader

    builder = long_log(40)[0]
    path = builder.write(tmp_path / "s" / "events.jsonl")
    assert command([str(path)]) == 40
    append_turn(path, builder)
    real_run = FileReader.run
    edits = []

    def run_then_edit(self: FileReader, lines: Any) -> None:
        real_run(self, lines)
        if not edits:  # the log is edited just after it was read, before its entry is written
            edits.append(path)
            edit_mid_file(path)

    monkeypatch.setattr(FileReader, "run", run_then_edit)
    assert command([str(path)]) == 41  # what was read: 41 turns, the edit came after
    monkeypatch.setattr(FileReader, "run", real_run)
    assert edits == [path]
    append_turn(path, builder)
    assert command([str(path)]) == 41  # by hand: 42 turns written, one turn_start edited away
