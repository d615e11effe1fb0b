"""Measure ``copilot-logs watch``: latency from an appended turn_start to its ndjson record,
and the CPU an idle watch costs.

``python -m benchmarks.watch_latency [--appends N] [--idle-seconds S]``

Latency: watch follows a temporary root (``--format ndjson``); a session log is written there,
then N times a turn_start line is appended and the time until its record is read on watch's
stdout is taken (median and max). Idle CPU: a second watch follows a root of the 11 sample
sessions, modified just now so every one is followed, for S seconds with nothing written;
its user + system CPU time is read from /proc when it ends (Linux). No test runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"
LOG = SAMPLES / "a1f0c3e2-4b5d-4c6e-8f70-0a1b2c3d4e5f" / "events.jsonl"


def _watch(root: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "copilot_logs", "watch", "--root", str(root)]
    return subprocess.Popen(
        [*command, "--format", "ndjson"], stdout=subprocess.PIPE, text=True, bufsize=1
    )


def latency(appends: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        process = _watch(root)
        assert process.stdout is not None
        time.sleep(2.0)  # started and listing the root
        lines = LOG.read_bytes().splitlines(keepends=True)
        turn_start = next(line for line in lines if b'"assistant.turn_start"' in line)
        log = root / "s" / "events.jsonl"
        log.parent.mkdir()
        log.write_bytes(b"".join(lines[:4]))
        while json.loads(process.stdout.readline())["kind"] != "prompt":
            pass
        delays = []
        for index in range(appends):
            event = json.loads(turn_start)
            event["id"] = f"latency-{index}"
            with log.open("ab") as out:
                out.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
                out.flush()
                written = time.monotonic()
            record = json.loads(process.stdout.readline())
            delays.append(time.monotonic() - written)
            assert record["kind"] == "turn_start"
            time.sleep(0.137)  # not in step with the poll
        process.send_signal(signal.SIGINT)
        process.wait()
        return delays


def idle_cpu(seconds: float) -> float:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "session-state"
        shutil.copytree(SAMPLES, root)
        for path in root.rglob("*.jsonl"):
            os.utime(path)  # recent: every session is followed
        process = _watch(root)
        time.sleep(3.0)  # start-up and the first read are not idle
        before = _cpu(process.pid)
        time.sleep(seconds)
        after = _cpu(process.pid)
        process.send_signal(signal.SIGINT)
        process.communicate()
        return after - before


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()
    delays = latency(args.appends)
    print(
        f"latency append -> ndjson record over {len(delays)} appends: "
        f"median {statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms"
    )
    used = idle_cpu(args.idle_seconds)
    print(
        f"idle CPU following 11 sessions for {args.idle_seconds:g} s: {used:.2f} s "
        f"({used / args.idle_seconds:.1%} of one core)"
    )


if __name__ == "__main__":
    main()
