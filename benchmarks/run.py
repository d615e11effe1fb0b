"""Time copilot-logs against the floor and the obvious loops on one seeded corpus.

``python -m benchmarks.run [--size-mb N] [--repeat K] [--json PATH] [--keep] [--only NAME...]``
(``make bench BENCH_ARGS="--size-mb 100"``). In one run, on one corpus with the page cache
warm, every benchmark runs K times as a child process; the table gives the median wall time,
the peak memory, the ratio to ``grep -F -c`` and to the orjson loop, the count each tool gave
and whether it was exact (the expected figures come from the corpus manifest), and the
target the issue sets for that row.

Memory: the peak resident set of the command as the kernel records it, through the launcher
of :mod:`benchmarks.peak` (so tiny tools like cat show the launcher's ~8 MB floor); for a
command with worker processes that is its largest process, so the summed proportional set
size (PSS) of its processes is also sampled every 100 ms and the larger figure is shown,
marked ``*``.

Cold and warm: "cold" copilot-logs rows run with ``--no-cache`` (the page cache stays warm, as
the issue asks); "warm" rows run with the cache after one untimed priming run. The cache lives
in a temporary XDG_CACHE_HOME for the run. When a command has no ``--no-cache`` flag yet the
cold row runs it as is (noted) and there is no warm row.

No test runs this and nothing asserts on time.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from benchmarks.corpus import Manifest, ensure_corpus, session_files
from benchmarks.disk_tree import SCAFFOLDS, SMALL_FILES, ensure_tree
from benchmarks.peak import Peak, launched, read_report

PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = PROJECT / "bench-results.json"
GREP_F_PATTERN = '"type":"assistant.turn_start"'
GREP_PATTERN = "assistant.turn_start"
JQ_FILTER = 'fromjson? | select(type == "object" and .type == "assistant.turn_start") | 1'
RSS_LIMIT_MB = 250.0
QUICK_SECONDS = 0.2
SAMPLE_EVERY_S = 0.1
REFERENCE_GREP = "grep-F"
REFERENCE_ORJSON = "orjson"
REFERENCE_POLARS = "polars"
CPUS_VARIABLE = "COPILOT_LOGS_CPUS"
"""Read by copilot_logs.store.pool: the core count the command plans its workers for."""

Counter = Callable[[bytes], int | None]


# --------------------------------------------------------------------------------------------
# Measuring one child process
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    seconds: float
    max_rss_mb: float
    """Peak resident set of the largest process of the child's tree (kernel, exact)."""
    tree_pss_mb: float
    """Sampled peak of the summed PSS while the tree had more than one process, else 0."""
    processes: int
    returncode: int
    stdout: bytes
    stderr: bytes


def _parents() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                raw = stat.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        parents[int(name)] = int(raw[raw.rindex(b")") + 2 :].split()[1])
    return parents


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class _TreeSampler(threading.Thread):
    """Samples the summed PSS of the measured processes, only while there is more than one
    (one process is measured exactly by the kernel; PSS counts forked workers' shared pages
    once)."""

    def __init__(self, launcher: int) -> None:
        super().__init__(daemon=True)
        self.launcher = launcher
        self.peak_kb = 0
        self.processes = 1
        self.done = threading.Event()

    def run(self) -> None:
        if not os.path.exists("/proc/self/smaps_rollup"):
            return
        while not self.done.wait(SAMPLE_EVERY_S):
            pids = _tree(self.launcher)[1:]
            if len(pids) > 1:
                self.processes = max(self.processes, len(pids))
                self.peak_kb = max(self.peak_kb, sum(_pss_kb(pid) for pid in pids))


def measure(
    argv: Sequence[str], *, env: dict[str, str], keep_stdout: bool, sample_tree: bool
) -> Sample:
    """Run ``argv`` once through the launcher of :mod:`benchmarks.peak`: wall time from spawn
    to exit and the kernel's peak RSS of the command (not of this big runner)."""
    handle, name = tempfile.mkstemp(prefix="copilot-logs-bench-")
    os.close(handle)
    report = Path(name)
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            stdout: int | IO[bytes] = out if keep_stdout else subprocess.DEVNULL
            launcher = subprocess.Popen(launched(argv, report), stdout=stdout, stderr=err, env=env)
            sampler = _TreeSampler(launcher.pid) if sample_tree else None
            if sampler is not None:
                sampler.start()
            launcher.wait()
            if sampler is not None:
                sampler.done.set()
                sampler.join()
            out.seek(0)
            err.seek(0)
            errors = err.read()[-4000:]
            try:
                peak = read_report(report)
            except (OSError, ValueError):
                # The launcher could not start the command (not found): its traceback says why.
                peak = Peak(0.0, 0, launcher.returncode or 1)
            return Sample(
                seconds=peak.seconds,
                max_rss_mb=peak.max_rss_mb,
                tree_pss_mb=(sampler.peak_kb / 1024) if sampler is not None else 0.0,
                processes=sampler.processes if sampler is not None else 1,
                returncode=peak.returncode,
                stdout=out.read() if keep_stdout else b"",
                stderr=errors,
            )
    finally:
        report.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------
# What to run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What the issue asks of a row: a ratio to grep -F -c, or seconds, and memory."""

    max_ratio: float | None = None
    max_polars_ratio: float | None = None
    max_seconds: float | None = None
    exact: bool = False
    max_rss_mb: float | None = RSS_LIMIT_MB

    def describe(self) -> str:
        parts = []
        if self.max_ratio is not None:
            parts.append(f"≤{self.max_ratio:g}× grep")
        if self.max_polars_ratio is not None:
            parts.append(f"≤{self.max_polars_ratio:g}× polars")
        if self.max_seconds is not None:
            parts.append(f"<{self.max_seconds:g} s")
        if self.exact:
            parts.append("exact")
        if self.max_rss_mb is not None:
            parts.append(f"<{self.max_rss_mb:g} MB")
        return ", ".join(parts)


@dataclass(frozen=True)
class Bench:
    id: str
    label: str
    argv: list[str]
    group: str  # floor | baseline | copilot-logs
    mode: str = ""  # cold | warm for copilot-logs rows
    counter: Counter | None = None
    expected: int | None = None
    ok_codes: tuple[int, ...] = (0,)
    target: Target | None = None
    prime: bool = False
    note: str = ""
    skip: str = ""
    env: dict[str, str] = field(default_factory=dict)
    covers: float = 1.0
    """The share of the corpus's bytes the command reads (the polars one-liner: the undamaged
    files only); its time is scaled to the whole corpus for the ratios."""


@dataclass
class Result:
    bench: Bench
    samples: list[Sample] = field(default_factory=list)
    count: int | None = None
    error: str = ""

    @property
    def median_s(self) -> float | None:
        return statistics.median(s.seconds for s in self.samples) if self.samples else None

    @property
    def max_rss_mb(self) -> float | None:
        return max(s.max_rss_mb for s in self.samples) if self.samples else None

    @property
    def tree_pss_mb(self) -> float:
        return max((s.tree_pss_mb for s in self.samples), default=0.0)

    @property
    def peak_mb(self) -> float | None:
        rss = self.max_rss_mb
        return None if rss is None else max(rss, self.tree_pss_mb)

    @property
    def right(self) -> bool | None:
        if self.count is None or self.bench.expected is None:
            return None
        return self.count == self.bench.expected


def _sum_lines(stdout: bytes) -> int:
    return sum(int(line) for line in stdout.split())


def _count_lines(stdout: bytes) -> int:
    return stdout.count(b"\n")


def _integer(stdout: bytes) -> int | None:
    text = stdout.strip()
    return int(text) if text.isdigit() else None


def _sum_llm_calls(stdout: bytes) -> int | None:
    rows = orjson.loads(stdout)
    if not isinstance(rows, list):
        return None
    return sum(int(row.get("llm_calls") or 0) for row in rows if isinstance(row, dict))


def _rows(stdout: bytes) -> int | None:
    rows = orjson.loads(stdout)
    return len(rows) if isinstance(rows, list) else None


def _disk_rows(stdout: bytes) -> int | None:
    found = orjson.loads(stdout)
    return len(found["rows"]) if isinstance(found, dict) else None


DISK_FILE_LIMIT = 64
"""``ulimit -n`` of the disk row (issue 38: an editor crashed with EMFILE on 10,313 folders)."""


def disk_bench(cli: list[str], root: Path | None) -> Bench:
    """``disk`` on 10,000 scaffold folders and one folder of 200,000 small files
    (:mod:`benchmarks.disk_tree`), under ``ulimit -n 64``, on two cores (taskset where there are
    more): the target is under 60 s."""
    label = f"disk ({SCAFFOLDS:,} scaffolds + {SMALL_FILES:,} files, ulimit -n 64)"
    if root is None:
        return Bench("disk", label, [], "copilot-logs", skip="not asked for (--only)")
    pin = ["taskset", "-c", "0,1"] if (os.cpu_count() or 2) > 2 and shutil.which("taskset") else []
    limited = f'ulimit -n {DISK_FILE_LIMIT} && exec "$@"'
    argv = ["sh", "-c", limited, "sh", *pin, *cli, "disk", "--root", str(root), "--format", "json"]
    return Bench(
        "disk",
        label,
        [*argv, "--no-cache"],
        "copilot-logs",
        mode="cold",
        counter=_disk_rows,
        expected=SCAFFOLDS + 1,
        target=Target(max_seconds=60.0),
        env={CPUS_VARIABLE: "2"},
        note="a tree of its own, not the corpus: one row per session folder",
    )


CCUSAGE = "CCUSAGE"
"""The ccusage executable of the peer row (else ``ccusage`` on PATH); never a dependency."""
CCUSAGE_INSTALL = "npm install ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24"


def _ccusage_sessions(stdout: bytes) -> int | None:
    report = orjson.loads(stdout)
    sessions = report.get("sessions") if isinstance(report, dict) else None
    return len(sessions) if isinstance(sessions, list) else None


def ccusage_bench(folder: Path, manifest: Manifest, work: Path) -> Bench:
    """The native peer (issue 39): ``ccusage copilot session --json --offline`` on the corpus,
    through a Copilot home of its own whose ``session-state`` is a link to the corpus, and an
    empty HOME. Its count is the sessions it found, against the corpus's."""
    label = "ccusage copilot session (peer)"
    program = os.environ.get(CCUSAGE) or shutil.which("ccusage")
    if not program:
        then = f"{CCUSAGE}=node_modules/.bin/ccusage"
        skip = f"ccusage is not installed ({CCUSAGE_INSTALL}; then {then})"
        return Bench("ccusage", label, [], "baseline", skip=skip)
    home = work / "ccusage"
    (home / "home").mkdir(parents=True, exist_ok=True)
    (home / "copilot").mkdir(exist_ok=True)
    link = home / "copilot" / "session-state"
    if not link.is_symlink():
        link.symlink_to(folder, target_is_directory=True)
    return Bench(
        "ccusage",
        label,
        [program, "copilot", "session", "--json", "--offline"],
        "baseline",
        counter=_ccusage_sessions,
        expected=manifest.sessions,
        env={"HOME": str(home / "home"), "COPILOT_HOME": str(home / "copilot")},
        note="issue 39's target: usage (cold) within 2× this row; its count is the sessions it "
        "found",
    )


def copilot_logs_argv() -> list[str]:
    script = Path(sys.executable).with_name("copilot-logs")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "copilot_logs"]


@dataclass(frozen=True)
class Capabilities:
    """What a copilot-logs command accepts, read from its --help (commands land over time)."""

    exists: bool
    json: bool
    no_cache: bool


def capabilities(cli: list[str], command: str, env: dict[str, str]) -> Capabilities:
    done = subprocess.run(
        [*cli, command, "--help"], capture_output=True, env=env, text=True, check=False
    )
    if done.returncode != 0:
        return Capabilities(False, False, False)
    text = done.stdout
    return Capabilities(True, "json" in text and "--format" in text, "--no-cache" in text)


def undamaged(files: list[Path]) -> list[Path]:
    """The files every line of which is one JSON object, ending with a newline: what the polars
    one-liner can read without stopping."""
    clean = []
    for path in files:
        data = path.read_bytes()
        if not data.endswith(b"\n"):
            continue
        try:
            if all(isinstance(orjson.loads(line), dict) for line in data.split(b"\n")[:-1]):
                clean.append(path)
        except orjson.JSONDecodeError:
            continue
    return clean


def plan(
    folder: Path,
    files: list[Path],
    manifest: Manifest,
    env: dict[str, str],
    cores: Sequence[int] = (),
    disk_root: Path | None = None,
) -> list[Bench]:
    paths = [str(p) for p in files]
    clean = undamaged(files)
    clean_share = sum(p.stat().st_size for p in clean) / max(1, manifest.bytes)
    root = str(folder)
    llm_calls = manifest.llm_calls
    benches = [
        Bench("cat", "cat > /dev/null", ["cat", *paths], "floor"),
        Bench(
            REFERENCE_GREP,
            "grep -F -c",
            ["grep", "-F", "-c", "-h", GREP_F_PATTERN, *paths],
            "floor",
            counter=_sum_lines,
            expected=llm_calls,
            ok_codes=(0, 1),
        ),
        Bench(
            "grep",
            "grep -c (the docs)",
            ["grep", "-c", "-h", GREP_PATTERN, *paths],
            "floor",
            counter=_sum_lines,
            expected=llm_calls,
            ok_codes=(0, 1),
        ),
        Bench(
            "jq",
            "jq select turn_start",
            ["jq", "-R", "-c", JQ_FILTER, *paths],
            "baseline",
            counter=_count_lines,
            expected=llm_calls,
            skip="" if shutil.which("jq") else "jq is not installed",
        ),
        Bench(
            "json",
            "json.loads loop",
            [sys.executable, "-m", "benchmarks.baselines", "json", *paths],
            "baseline",
            counter=_integer,
            expected=llm_calls,
        ),
        Bench(
            REFERENCE_ORJSON,
            "orjson loop",
            [sys.executable, "-m", "benchmarks.baselines", "orjson", *paths],
            "baseline",
            counter=_integer,
            expected=llm_calls,
        ),
        Bench(
            REFERENCE_POLARS,
            "polars scan_ndjson one-liner",
            [sys.executable, "-m", "benchmarks.baselines", "polars", *map(str, clean)],
            "baseline",
            counter=_integer,
            covers=clean_share,
            note=f"on the {len(clean):,} undamaged files ({clean_share:.0%} of the bytes): it "
            "stops at the first damaged line; the × polars ratios use its time scaled to the "
            "whole corpus",
        ),
        ccusage_bench(folder, manifest, Path(env["XDG_CACHE_HOME"]).parent),
    ]
    cli = copilot_logs_argv()
    largest = str(folder / manifest.largest_file)
    commands: list[tuple[str, str, list[str], Counter | None, int | None, tuple[int, ...]]] = [
        (
            "count-total",
            "count --total",
            ["count", "--total", "--root", root],
            _integer,
            llm_calls,
            (0,),
        ),
        ("count", "count", ["count", "--root", root], _sum_llm_calls, llm_calls, (0,)),
        ("sessions", "sessions", ["sessions", "--root", root], _rows, manifest.sessions, (0,)),
        # Damaged lines are findings: validate and audit exit 1 on this corpus by design.
        ("validate", "validate", ["validate", "--root", root], None, None, (0, 1)),
        ("audit", "audit", ["audit", "--root", root], None, None, (0, 1)),
        ("timeline", "timeline (largest session)", ["timeline", largest], None, None, (0,)),
        ("usage", "usage", ["usage", "--root", root], None, None, (0,)),
    ]
    for bench_id, label, args, counter, expected, ok_codes in commands:
        caps = capabilities(cli, args[0], env)
        if not caps.exists:
            benches.append(
                Bench(bench_id, label, [], "copilot-logs", skip=f"no `{args[0]}` command yet")
            )
            continue
        if bench_id == "count-total":
            argv = [*cli, *args]
        elif caps.json:
            argv = [*cli, *args, "--format", "json"]
        else:
            argv, counter, expected = [*cli, *args], None, None
        exact = bench_id == "count-total"
        if bench_id == "count-total":
            cold, warm = Target(max_ratio=3.0, exact=True), Target(max_ratio=1.0, exact=True)
        elif bench_id == "timeline":
            cold, warm = Target(max_ratio=6.0), Target(max_ratio=2.0)
        else:
            cold, warm = Target(max_polars_ratio=2.0), Target(max_ratio=1.5)
        common: dict[str, Any] = {
            "group": "copilot-logs",
            "counter": counter,
            "expected": expected,
            "ok_codes": ok_codes,
        }
        if caps.no_cache:
            benches.append(
                Bench(
                    bench_id,
                    f"{label} (cold)",
                    [*argv, "--no-cache"],
                    mode="cold",
                    target=cold,
                    **common,
                )
            )
            benches.append(
                Bench(
                    bench_id,
                    f"{label} (warm)",
                    argv,
                    mode="warm",
                    prime=True,
                    target=warm,
                    **common,
                )
            )
        else:
            benches.append(
                Bench(
                    bench_id,
                    f"{label} (cold)",
                    argv,
                    mode="cold",
                    target=cold,
                    note="no --no-cache flag yet: run as is",
                    **common,
                )
            )
        if bench_id in ("count-total", "sessions") and caps.no_cache:
            for count in cores:
                benches.append(
                    Bench(
                        bench_id,
                        f"{label} (cold, {count} cores simulated)",
                        [*argv, "--no-cache"],
                        mode="cores",
                        target=Target(exact=exact),
                        env={CPUS_VARIABLE: str(count)},
                        **common,
                    )
                )
    # export cold, into a fresh folder each run (a second run into the same one is incremental).
    out = str(Path(env["XDG_CACHE_HOME"]).parent / "export-out")
    wrapped = ["sh", "-c", 'rm -rf "$0" && exec "$@"', out, *cli, "export", out, "--root", root]
    note = "target: within 2× of sessions (cold): compare their × grep -F"
    benches.append(
        Bench(
            "export",
            "export (cold)",
            [*wrapped, "--no-cache"],
            "copilot-logs",
            mode="cold",
            note=note,
            skip="" if capabilities(cli, "export", env).exists else "no `export` command yet",
        )
    )
    benches.append(_diff_bench(cli, files, env))
    benches.append(disk_bench(cli, disk_root))
    quick = Target(max_seconds=QUICK_SECONDS)
    benches.append(Bench("version", "--version", [*cli, "--version"], "copilot-logs", target=quick))
    benches.append(Bench("help", "--help", [*cli, "--help"], "copilot-logs", target=quick))
    return benches


DIFF_SIDE = 1_000
"""Sessions a side of the ``diff`` row (issue 37: 1,000 a side from a warm store in < 10 s)."""


def _diff_bench(cli: list[str], files: list[Path], env: dict[str, str]) -> Bench:
    """``diff`` of two folders of :data:`DIFF_SIDE` sessions each (links to the corpus's first
    and last sessions: they overlap where the corpus holds fewer than twice as many), from a
    warm store, every run pooled (``--key none``)."""
    side = min(DIFF_SIDE, len(files))
    label = f"diff ({side:,} sessions a side)"
    if not capabilities(cli, "diff", env).exists:
        return Bench("diff", label, [], "copilot-logs", skip="no `diff` command yet")
    work = Path(env["XDG_CACHE_HOME"]).parent
    folders = []
    for name, chosen in (("diff-base", files[:side]), ("diff-candidate", files[-side:])):
        folder = work / name
        folder.mkdir(exist_ok=True)
        for number, log in enumerate(chosen):
            # A session folder, or a flat <id>.jsonl: linked under a name of its own.
            target = log.parent if log.name == "events.jsonl" else log
            link = folder / (f"{number:05d}" + ("" if target.is_dir() else ".jsonl"))
            if not link.exists():
                link.symlink_to(target)
        folders.append(str(folder))
    overlap = max(0, 2 * side - len(files))
    return Bench(
        "diff",
        f"{label} (warm)",
        [*cli, "diff", *folders, "--key", "none", "--format", "json"],
        "copilot-logs",
        mode="warm",
        prime=True,
        # The corpus holds damaged and killed sessions: the gate may fail (1), a file may
        # give no event (3).
        ok_codes=(0, 1, 3),
        target=Target(max_seconds=10.0),
        note=f"two folders of the corpus's sessions, --key none ({overlap:,} on both sides)",
    )


def run_bench(bench: Bench, repeat: int, env: dict[str, str]) -> Result:
    result = Result(bench)
    if bench.skip:
        result.error = bench.skip
        return result
    keep_stdout = bench.counter is not None or bench.group == "copilot-logs"
    sample_tree = bench.group == "copilot-logs"
    runs = repeat + (1 if bench.prime else 0)
    env = {**env, **bench.env}
    for index in range(runs):
        sample = measure(bench.argv, env=env, keep_stdout=keep_stdout, sample_tree=sample_tree)
        if sample.returncode not in bench.ok_codes or b"Traceback" in sample.stderr:
            tail = sample.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            result.error = f"exit {sample.returncode}: {tail[0][:200]}"
            return result
        if bench.prime and index == 0:
            continue
        if bench.counter is not None and result.count is None:
            try:
                result.count = bench.counter(sample.stdout)
            except ValueError as error:  # orjson.JSONDecodeError is a ValueError
                result.error = f"could not read a count from its output: {error}"
                return result
        result.samples.append(
            Sample(
                sample.seconds,
                sample.max_rss_mb,
                sample.tree_pss_mb,
                sample.processes,
                sample.returncode,
                b"",
                b"",
            )
        )
    return result


def warm_page_cache(files: Sequence[Path]) -> None:
    """Read every file once so that all rows, cold ones included, see the same warm cache."""
    for path in files:
        with path.open("rb") as stream:
            while stream.read(1 << 24):
                pass


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def verdict(result: Result, grep_s: float | None, polars_s: float | None = None) -> bool | None:
    """Whether the row meets its target; None when it has none or could not be judged."""
    target = result.bench.target
    median = result.median_s
    if target is None or median is None:
        return None
    checks = []
    if target.max_ratio is not None:
        ratio = _ratio(median, grep_s)
        if ratio is None:
            return None
        checks.append(ratio <= target.max_ratio)
    if target.max_polars_ratio is not None:
        ratio = _ratio(median, polars_s)
        if ratio is None:
            return None
        checks.append(ratio <= target.max_polars_ratio)
    if target.max_seconds is not None:
        checks.append(median < target.max_seconds)
    if target.exact:
        checks.append(result.right is True)
    if target.max_rss_mb is not None and result.peak_mb is not None:
        checks.append(result.peak_mb < target.max_rss_mb)
    return all(checks)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass

    def version(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError:
            return ""
        lines = (done.stdout or done.stderr).strip().splitlines()
        # A clean `git status --porcelain` prints nothing at all.
        return lines[0] if done.returncode == 0 and lines else ""

    def package(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return ""

    commit = version(["git", "-C", str(PROJECT), "rev-parse", "--short", "HEAD"])
    dirty = version(["git", "-C", str(PROJECT), "status", "--porcelain"])
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "copilot_logs": package("copilot-logs"),
        "polars": package("polars"),
        "orjson": package("orjson"),
        "grep": version(["grep", "--version"]),
        "jq": version(["jq", "--version"]),
        "commit": f"{commit}{'+dirty' if dirty else ''}",
        "locale": os.environ.get("LC_ALL") or os.environ.get("LANG") or "",
    }


def shown_argv(argv: Sequence[str], corpus: Path) -> list[str]:
    """The command as run, with the corpus folder as $CORPUS and its file list folded."""
    shown: list[str] = []
    files = 0
    for arg in [*argv, ""]:
        if arg.endswith(".jsonl") and arg.startswith(str(corpus)) and shown[-1:] != ["timeline"]:
            files += 1
            continue
        if files:
            shown.append(f"<{files} session files>")
            files = 0
        if arg:
            shown.append(arg.replace(str(corpus), "$CORPUS").replace(str(PROJECT) + "/", ""))
    return shown


def result_record(
    result: Result,
    grep_s: float | None,
    orjson_s: float | None,
    corpus: Path,
    polars_s: float | None = None,
) -> dict[str, Any]:
    bench = result.bench
    median = result.median_s
    return {
        "id": bench.id,
        "name": bench.label,
        "group": bench.group,
        "mode": bench.mode or None,
        "argv": shown_argv(bench.argv, corpus),
        "runs": len(result.samples),
        "seconds": [round(s.seconds, 4) for s in result.samples],
        "median_s": None if median is None else round(median, 4),
        "max_rss_mb": None if result.max_rss_mb is None else round(result.max_rss_mb, 1),
        "tree_pss_mb": round(result.tree_pss_mb, 1),
        "processes": max((s.processes for s in result.samples), default=0),
        "peak_mb": None if result.peak_mb is None else round(result.peak_mb, 1),
        "ratio_grep_f": _round(_ratio(median, grep_s)),
        "ratio_orjson": _round(_ratio(median, orjson_s)),
        "ratio_polars": _round(_ratio(median, polars_s)),
        "simulated_cores": int(bench.env[CPUS_VARIABLE]) if CPUS_VARIABLE in bench.env else None,
        "count": result.count,
        "expected": bench.expected,
        "right": result.right,
        "target": bench.target.describe() if bench.target else None,
        "meets_target": verdict(result, grep_s, polars_s),
        "note": bench.note or None,
        "error": result.error or None,
    }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def print_table(
    results: list[Result],
    grep_s: float | None,
    orjson_s: float | None,
    title: str,
    load: tuple[float, float],
    polars_s: float | None = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column("benchmark", no_wrap=True)
    for header in ("median s", "peak RSS MB", "× grep -F", "× orjson", "× polars", "count"):
        table.add_column(header, justify="right", no_wrap=True)
    for header in ("exact", "target", "met"):
        table.add_column(header, no_wrap=True)
    footnotes: list[str] = []

    def mark(text: str) -> str:
        if text not in footnotes:
            footnotes.append(text)
        return f" [{footnotes.index(text) + 1}]"

    for result in results:
        bench = result.bench
        label = bench.label + (mark(bench.note) if bench.note else "")
        if result.error:
            label += mark(result.error)
            table.add_row(label, *["—"] * 7, "", "")
            continue
        median = result.median_s
        peak = result.peak_mb
        star = "*" if result.tree_pss_mb > (result.max_rss_mb or 0) else ""
        met = verdict(result, grep_s, polars_s)
        table.add_row(
            label,
            "—" if median is None else f"{median:.3f}",
            "—" if peak is None else f"{peak:.0f}{star}",
            _fmt_ratio(_ratio(median, grep_s)),
            _fmt_ratio(_ratio(median, orjson_s)),
            _fmt_ratio(_ratio(median, polars_s)),
            "—" if result.count is None else f"{result.count:,}",
            _exactness(result),
            bench.target.describe() if bench.target else "",
            "" if met is None else ("yes" if met else "no"),
        )
    console = Console(width=max(150, shutil.get_terminal_size().columns), highlight=False)
    console.print(title, markup=False)
    console.print(table)
    for number, text in enumerate(footnotes, 1):
        console.print(f"[{number}] {text}", markup=False)
    if any(r.tree_pss_mb > (r.max_rss_mb or 0) for r in results):
        console.print("* summed PSS of the command's processes (sampled every 100 ms)")
    cores = os.cpu_count() or 1
    # Only the load before counts: the run itself loads the machine.
    if load[0] > cores / 2:
        console.print(
            f"load average {load[0]:.1f} on {cores} cores when the run began: other work "
            "shared the machine, the times are noisy."
        )


def _exactness(result: Result) -> str:
    right = result.right
    if right is None:
        return "—"
    if right:
        return "yes"
    expected = result.bench.expected or 1
    off = (result.count or 0) - expected
    share = off / expected
    return f"no ({off:+,} = {share:+.{1 if abs(share) >= 0.001 else 2}%})"


def _fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}×"


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

IDS = (
    "cat",
    REFERENCE_GREP,
    "grep",
    "jq",
    "json",
    REFERENCE_ORJSON,
    REFERENCE_POLARS,
    "ccusage",
    "count-total",
    "count",
    "sessions",
    "validate",
    "audit",
    "timeline",
    "usage",
    "diff",
    "export",
    "disk",
    "version",
    "help",
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Time copilot-logs against cat, grep, jq and Python loops on a seeded "
        "real-shaped corpus (medians of --repeat runs, peak memory, exactness).",
    )
    parser.add_argument(
        "--size-mb", type=int, default=1024, help="corpus size in MB [default: 1024]"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs per benchmark [default: 3]"
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus seed [default: 0]")
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        metavar="PATH",
        help="where to write the results [default: bench-results.json in the project]",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the corpus for later runs (a corpus this run built is removed otherwise)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=IDS,
        metavar="NAME",
        help=f"run only these ({', '.join(IDS)}); grep-F, orjson and polars always run, "
        "as the ratios need them",
    )
    parser.add_argument(
        "--cores",
        nargs="*",
        type=int,
        default=[4, 8, 16],
        metavar="N",
        help="also run cold `sessions` and `count --total` as if the machine had N cores "
        f"(${CPUS_VARIABLE}), for their memory [default: 4 8 16]",
    )
    args = parser.parse_args(argv)
    if args.size_mb < 1 or args.repeat < 1:
        parser.error("--size-mb and --repeat must be at least 1")
    return args


def log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def compile_package() -> None:
    """Byte-compile copilot_logs first, as an installed package is: with PYTHONDONTWRITEBYTECODE
    set (some sandboxes and CI images set it) every timed run would compile its modules again."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(PROJECT / "copilot_logs")], check=True
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    folder, manifest, built = ensure_corpus(args.size_mb, args.seed)
    compile_package()
    log(
        f"corpus: {folder} ({manifest.bytes / 1e6:,.0f} MB, {manifest.files:,} files, "
        f"{manifest.lines:,} lines; {'built' if built else 'reused'}"
        + (f" in {manifest.generated_seconds:.1f} s)" if built else ")")
    )
    try:
        files = session_files(folder)
        warm_page_cache(files)
        with tempfile.TemporaryDirectory(prefix="copilot-logs-bench-") as work:
            env = dict(os.environ)
            # The cache of the warm rows and an empty home, so no run reads the user's logs.
            env["XDG_CACHE_HOME"] = str(Path(work) / "cache")
            env["COPILOT_HOME"] = str(Path(work) / "home")
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
            env.setdefault("NO_COLOR", "1")
            disk_root = None
            if not args.only or "disk" in args.only:
                started = time.perf_counter()
                disk_root, _ = ensure_tree()
                log(f"disk tree: {disk_root} ({time.perf_counter() - started:.1f} s)")
            benches = plan(folder, files, manifest, env, args.cores, disk_root)
            if args.only:
                wanted = {*args.only, REFERENCE_GREP, REFERENCE_ORJSON, REFERENCE_POLARS}
                benches = [b for b in benches if b.id in wanted]
            results = []
            for bench in benches:
                if not bench.skip:
                    log(f"running {bench.label} ({args.repeat}x)")
                results.append(run_bench(bench, args.repeat, env))
    finally:
        if built and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)

    by_id = {r.bench.id: r for r in results if not r.bench.mode or r.bench.mode == "cold"}
    grep_s = by_id[REFERENCE_GREP].median_s if REFERENCE_GREP in by_id else None
    orjson_s = by_id[REFERENCE_ORJSON].median_s if REFERENCE_ORJSON in by_id else None
    polars = by_id.get(REFERENCE_POLARS)
    polars_s = None
    if polars is not None and polars.median_s is not None and polars.bench.covers > 0:
        polars_s = polars.median_s / polars.bench.covers  # scaled to the whole corpus
    info = machine()
    title = (
        f"copilot-logs {info['copilot_logs']} ({info['commit']}) "
        f"on {manifest.bytes / 1e6:,.0f} MB: "
        f"{manifest.files:,} files, {manifest.lines:,} lines, {manifest.llm_calls:,} LLM calls; "
        f"median of {args.repeat}; {info['cores']} cores, {info['cpu']}, Python {info['python']}"
    )
    load = (load_before, os.getloadavg()[0])
    print_table(results, grep_s, orjson_s, title, load, polars_s)
    report = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m benchmarks.run " + " ".join(sys.argv[1:] if argv is None else argv),
        "repeat": args.repeat,
        "machine": info,
        "load_average": {"before": round(load[0], 2), "after": round(load[1], 2)},
        "corpus": {"path": str(folder), "kept": args.keep or not built, **manifest.__dict__},
        "reference_seconds": {
            "grep_f": _round(grep_s, 4),
            "orjson": _round(orjson_s, 4),
            "polars_scaled": _round(polars_s, 4),
        },
        "results": [result_record(r, grep_s, orjson_s, folder, polars_s) for r in results],
        "wall_seconds": round(time.perf_counter() - began, 1),
    }
    args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    log(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
