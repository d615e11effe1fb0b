"""Shared fixtures: no test ever reads the real home directory or ../shared unless present;
the tiers (docs/development.md, "Tiers"): no test of the fast tier starts Python, and a skip
that every clone without some tool meets is one line of the summary."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

# pytest-xdist's workers share the cores: polars' thread pool (sized once, at its import) takes
# each worker's share of them, not all of them.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
if _WORKERS > 1:
    os.environ.setdefault("POLARS_MAX_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

# Hypothesis profiles, chosen by HYPOTHESIS_PROFILE. `default` (make test) keeps hypothesis's
# example counts, and the fuzz tests (tests/test_fuzz.py) run FUZZ_EXAMPLES each so the suite
# stays quick; `fuzz` (make fuzz) runs many more of both. With CI set, examples are
# derandomized so a CI run is repeatable.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
_CI = bool(os.environ.get("CI"))
settings.register_profile("default", deadline=None, suppress_health_check=_SLOW_OK, derandomize=_CI)
# Each fuzz example runs every command in every format (about 15 CLI runs): 100 examples a
# property take several minutes; FUZZ_EXAMPLES sets another count for a longer soak.
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=_SLOW_OK,
    derandomize=_CI,
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
settings.load_profile(PROFILE)
#: The fuzz tests' settings. Under `make test` and `make test-slow`: a few examples, and a failure
#: is shown as drawn (shrinking a hostile log takes minutes); under `make fuzz`: the profile's
#: many, shrunk.
FUZZ_SETTINGS = (
    settings(
        max_examples=6,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
    )
    if PROFILE == "default"
    else settings()
)

PROJECT = Path(__file__).resolve().parent.parent
SAMPLES = PROJECT / "sample_sessions"
REAL_SAMPLES = PROJECT.parent / "shared" / "real-samples"


@pytest.fixture(autouse=True)
def copilot_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Point COPILOT_HOME (and HOME) at an empty temporary folder for every test."""
    home = tmp_path_factory.mktemp("copilot-home")
    monkeypatch.setenv("COPILOT_HOME", str(home))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    yield home


@pytest.fixture
def real_samples() -> Path:
    """../shared/real-samples, skipped cleanly when absent (a user's clone has none)."""
    if not REAL_SAMPLES.is_dir():
        pytest.skip(NO_REAL_SAMPLES)
    return REAL_SAMPLES


@pytest.fixture
def live_cli() -> tuple[str, Path]:
    """(version, binary) of a real Copilot CLI for the tests that run it: the version named
    by COPILOT_RIG_VERSION, else the newest in the rig's cache (docs/recordings.md). Skipped
    cleanly when none is cached: `make test` downloads nothing (`make record-live` does)."""
    from rig import cli

    wanted = os.environ.get("COPILOT_RIG_VERSION")
    root = cli.cache_root()
    names = [wanted] if wanted else [p.name for p in root.iterdir()] if root.is_dir() else []
    versions = sorted(
        (name for name in names if cli.cached(name)),
        key=lambda v: [int(part) if part.isdigit() else 0 for part in v.split(".")],
    )
    if not versions:
        pytest.skip(NO_CLI)
    binary = cli.cached(versions[-1])
    assert binary is not None
    return versions[-1], binary


# --- the tiers ---------------------------------------------------------------------------------

SLOW_TIERS = ("process", "matrix", "fuzz", "browser")
"""The markers of the tiers `make test` leaves to `make test-all` and CI (pyproject.toml
declares them, docs/development.md says which a new test takes)."""

SMALL_TOOLS = {
    *("bash", "sh", "grep", "sed", "jq", "ls", "sha256sum", "git", "make", "ruff"),
    *("true", "sleep", "du"),  # disk's oracle (du) and the pids its lock fixtures need
}
"""Programs a fast test may start: they start in a millisecond. Not Python, nor a shell that
runs it."""


def _starts_python(args: Any) -> str | None:
    """What ``args`` starts, when that is not one of the small tools (or a shell runs Python)."""
    words = [os.fsdecode(args)] if isinstance(args, str | bytes | os.PathLike) else list(args)
    words = [os.fsdecode(word) for word in words]
    program = os.path.basename(words[0].split()[0]) if words and words[0] else ""
    if program not in SMALL_TOOLS:
        return program
    # A word that runs copilot-logs or Python (not a path that merely names them, such as
    # prune's trash folder `.copilot-logs-trash`).
    runs = r"(?:^|[\s;|&(])(?:copilot-logs|python[\d.]*)(?=[\s;|&)]|$)"
    if program in ("bash", "sh") and re.search(runs, " ".join(words[1:])):
        return f"{program} running Python"
    return None


@pytest.fixture(autouse=True)
def fast_tests_start_no_python(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test of the fast tier that starts Python (the CLI, a shell that may run it, pip) fails
    and says which marker it needs: each start costs about a second of the 3-minute budget."""
    if any(request.node.get_closest_marker(tier) for tier in SLOW_TIERS):
        return
    execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def refuse(self: subprocess.Popen[Any], args: Any, *rest: Any) -> Any:
        program = _starts_python(args)
        if program is not None:
            raise AssertionError(
                f"{request.node.nodeid} starts {program!r}: a test that starts a process is "
                "marked `process` (docs/development.md, Tiers), or does its work in-process"
            )
        return execute(self, args, *rest)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


# --- skips every clone without some tool meets: one line each ---------------------------------

SPARK_EXTRA = (
    "the spark extra is not installed (`make test-spark` installs it and runs these tests)"
)
UNSUPPORTED = "a scenario the recording's CLI version does not support (docs/compatibility.md)"
NO_REAL_SAMPLES = "../shared/real-samples is not beside this checkout (a clone has none)"
NO_EDGE_SAMPLES = "../shared/real-samples-edge is not beside this checkout (a clone has none)"
NO_CLI = "no Copilot CLI in the rig's cache (`make record-live` fetches the newest)"
NO_JQ = "jq is not installed (install it to run the examples that pipe into it)"
NO_CHROMIUM = "no Chromium binary found (apt-get install chromium)"
NO_TMUX = "tmux is not installed (apt-get install tmux; CI installs it through .ci/run)"
NO_JAVA = "Spark needs Java 17+ (java on PATH or JAVA_HOME)"
EXPECTED_SKIPS = {
    SPARK_EXTRA,
    UNSUPPORTED,
    NO_REAL_SAMPLES,
    NO_EDGE_SAMPLES,
    NO_CLI,
    NO_JQ,
    NO_CHROMIUM,
    NO_TMUX,
    NO_JAVA,
}
"""Skips for these reasons are reported at the line below: the summary shows each once, with how
many tests it skipped, wherever the tests said it. A skip for another reason is shown where it
was said."""
_SAID_AT = sys._getframe().f_lineno


def _fold(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple):
        message = report.longrepr[2]
        if message.removeprefix("Skipped: ") in EXPECTED_SKIPS:
            report.longrepr = (os.path.relpath(__file__), _SAID_AT, message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport() -> Iterator[None]:
    report = yield
    _fold(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report() -> Iterator[None]:
    report = yield
    _fold(report)
    return report
