"""Run a command through a tiny launcher that reports its wall time and exact peak memory.

Why a launcher: a process's peak resident set (``ru_maxrss``) starts from the memory it had
*before* ``exec``, and a child spawned by a big process (pytest holding a generated log, the
benchmark runner) begins as a view of its parent's memory, so its reported peak is at least the
parent's. Spawned instead from a fresh ``python -I -S`` that imports nothing, the floor is that
launcher's ~8 MB. The launcher ``wait4``s its one child, so the figure is that command's own
(for a command with worker processes, that of its largest process), measured by the kernel
rather than sampled.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LAUNCHER = """\
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
began = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - began
code = os.waitstatus_to_exitcode(status)
scale = 1 if sys.platform == "darwin" else 1024
with open(report, "w") as out:
    out.write(f"{seconds!r} {usage.ru_maxrss * scale} {code}")
sys.exit(code if 0 <= code < 256 else 1)
"""


@dataclass(frozen=True)
class Peak:
    seconds: float
    """Wall time from spawn to exit, the launcher's own start-up excluded."""
    max_rss_bytes: int
    returncode: int

    @property
    def max_rss_mb(self) -> float:
        return self.max_rss_bytes / (1 << 20)


def launched(argv: Sequence[str], report: Path) -> list[str]:
    """The command line that runs ``argv`` under the launcher, which writes to ``report``."""
    return [sys.executable, "-I", "-S", "-c", LAUNCHER, str(report), *argv]


def read_report(report: Path) -> Peak:
    seconds, rss, code = report.read_text().split()
    return Peak(float(seconds), int(rss), int(code))
