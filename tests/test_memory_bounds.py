"""Peak memory is bounded on any input: a file with a 50 MB line, and a file of 200,000 events.

Each case runs ``python -m copilot_logs count --total FILE`` (and, on the long line,
``sessions``: the full reader) in a child process and checks the count it prints and its peak
resident set, as the kernel records it (``ru_maxrss``), against the issue's bound of 250 MB.
Nothing here measures time.

Why the peak RSS and not an address-space limit (``RLIMIT_AS``): polars' allocator and thread
pool reserve address space they never touch (on the 2-core machine these figures were taken
on, ``count --total`` peaks near 1.1 GB of virtual memory for 0.2 GB resident), and the
reservation grows with the number of cores. A limit low enough to mean 250 MB kills a healthy
process; one high enough to be safe on any machine bounds nothing. Resident memory is what the
issue bounds, and the kernel records its peak exactly, so no sampling can miss a spike.

The command runs under the launcher of :mod:`benchmarks.peak`: a child forked straight from
this pytest process (which holds the generated logs) would inherit this process's own peak as
its floor.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from benchmarks.peak import launched, read_report
from synth import SessionBuilder, bash, view

# Bounds measured on processes of their own (tier `process`).
# Bounds: one worker runs the tests that race processes or measure them, one after another.
pytestmark = [pytest.mark.process, pytest.mark.xdist_group("concurrency")]

RSS_LIMIT_MB = 250
LONG_LINE_BYTES = 50 << 20
MANY_EVENTS = 200_000
# Log lines quoted in a tool output: a text search counts them, a parser must not.
QUOTED_TURN = '{"type":"assistant.turn_start","data":{"turnId":"0"},"id":"x","parentId":null}\n'


def main_turns(builder: SessionBuilder) -> int:
    return sum(
        1
        for event in builder.events
        if event["type"] == "assistant.turn_start" and "agentId" not in event
    )


def count_total(path: Path, report: Path) -> tuple[int, float]:
    """The integer ``count --total`` prints for ``path`` and the command's peak RSS in MB."""
    out, peak_mb = run(["count", "--total", str(path)], report)
    return int(out), peak_mb


def run(args: list[str], report: Path) -> tuple[bytes, float]:
    """What ``copilot-logs ARGS`` prints on stdout (without the cache) and its peak RSS in MB."""
    command = [sys.executable, "-m", "copilot_logs", *args, "--no-cache"]
    done = subprocess.run(launched(command, report), capture_output=True, timeout=300, check=False)
    peak = read_report(report)
    assert peak.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout, peak.max_rss_mb


def test_a_50_mb_line_among_normal_events_is_counted_within_the_memory_bound(
    tmp_path: Path,
) -> None:
    block = QUOTED_TURN + "".join(
        f"src/module_{i}.ts:{i}: export function f{i}()\n" for i in range(64)
    )
    # content and detailedContent both hold the output, as the CLI writes them.
    output = (block * (LONG_LINE_BYTES // 2 // len(block) + 1))[: LONG_LINE_BYTES // 2]
    b = SessionBuilder(seed=6)
    b.user_message("Find every exported function.")
    b.turn(
        "Searching.", [bash("grep -rn 'export function' src", "src/a.ts:1: export function a()")]
    )
    b.turn("Reading the full listing.", [bash("cat listing.txt", output)])
    b.turn("Checking one file.", [view("src/module_1.ts", "export function f1() {}")])
    b.turn("Done: the functions are listed above.")
    b.shutdown()
    path = b.write(tmp_path / "long-line.jsonl")
    longest = max(len(line) for line in b.lines())
    assert longest > LONG_LINE_BYTES
    expected = main_turns(b)
    del b, output

    llm_calls, peak_mb = count_total(path, tmp_path / "peak")

    assert llm_calls == expected == 4
    assert peak_mb < RSS_LIMIT_MB, f"peak RSS {peak_mb:.0f} MB on a {longest >> 20} MB line"

    # The full reader too (what every other command reads with): the same bound.
    out, peak_mb = run(["sessions", str(path), "--format", "json"], tmp_path / "peak")
    assert [row["llm_calls"] for row in orjson.loads(out)] == [4]
    assert peak_mb < RSS_LIMIT_MB, f"sessions: peak RSS {peak_mb:.0f} MB on a long line"


def test_a_file_of_200000_events_is_counted_within_the_memory_bound(tmp_path: Path) -> None:
    # The collector would walk the builder's growing event list over and over; it holds no
    # cycles, so pausing it only saves time.
    gc.disable()
    try:
        b = SessionBuilder(seed=7)
        while b.event_count < MANY_EVENTS:
            b.user_message("Next step.")
            for _ in range(20):
                b.turn("Working.")
        b.shutdown()
        path = b.write(tmp_path / "many-events.jsonl")
        expected = main_turns(b)
        events = b.event_count
        del b
    finally:
        gc.enable()

    llm_calls, peak_mb = count_total(path, tmp_path / "peak")

    assert llm_calls == expected
    assert peak_mb < RSS_LIMIT_MB, f"peak RSS {peak_mb:.0f} MB on {events:,} events"
