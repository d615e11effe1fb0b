"""Shared fixtures: no test ever reads the real home directory or ../shared unless present."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
