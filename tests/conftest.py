"""Shared fixtures: no test ever reads the real home directory or ../shared unless present."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

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
#: The fuzz tests' settings. Under `make test`: a few examples, and a failure is shown as drawn
#: (shrinking a hostile log takes minutes); under `make fuzz`: the profile's many, shrunk.
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
        pytest.skip("../shared/real-samples is not beside this checkout")
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
        pytest.skip("no Copilot CLI in the rig's cache (make record-live fetches the newest)")
    binary = cli.cached(versions[-1])
    assert binary is not None
    return versions[-1], binary
