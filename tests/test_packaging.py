"""Packaging tells the truth: constraints/floors.txt pins each dependency at the floor that
pyproject.toml declares (so `make test-floors` tests exactly the declared floors), the tools that
decide whether `make test` passes are pinned, and Windows gets a zone database."""

from __future__ import annotations

import tomllib
import zoneinfo

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from copilot_logs.errors import SelectionError
from copilot_logs.timezones import resolve_zone
from tests.conftest import PROJECT

PYPROJECT = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
FLOORS = PROJECT / "constraints" / "floors.txt"


def requirements(*, dev: bool) -> list[Requirement]:
    lines = PYPROJECT["optional-dependencies"]["dev"] if dev else PYPROJECT["dependencies"]
    return [Requirement(line) for line in lines]


def only(requirement: Requirement, operator: str) -> Version | None:
    """The version of the requirement's single ``operator`` clause, None when it has none."""
    versions = [Version(s.version) for s in requirement.specifier if s.operator == operator]
    assert len(versions) <= 1, f"{requirement}: more than one {operator} clause"
    return versions[0] if versions else None


def pins() -> dict[str, Version]:
    """constraints/floors.txt as name -> version, each line ``name==version``."""
    found: dict[str, Version] = {}
    for line in FLOORS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        version = only(requirement, "==")
        assert version is not None and len(requirement.specifier) == 1, f"not a pin: {line}"
        name = canonicalize_name(requirement.name)
        assert name not in found, f"{name} pinned twice"
        found[name] = version
    return found


def floors() -> dict[str, Version]:
    """Every dependency (the dev extra's included) without a platform marker, as name -> its
    ``>=`` floor; each must have one, but for the exactly pinned dev tools."""
    found: dict[str, Version] = {}
    for requirement in requirements(dev=False) + requirements(dev=True):
        if requirement.marker is not None:
            continue
        floor = only(requirement, ">=")
        if floor is None:
            assert only(requirement, "==") is not None, f"{requirement}: no floor, no pin"
            continue
        found[canonicalize_name(requirement.name)] = floor
    return found


def test_the_floors_file_pins_every_dependency_at_its_declared_floor() -> None:
    assert pins() == floors()


def test_the_lint_tools_are_pinned_exactly() -> None:
    pinned = {
        canonicalize_name(requirement.name)
        for requirement in requirements(dev=True)
        if only(requirement, "==") is not None and len(requirement.specifier) == 1
    }
    assert {"ruff", "mypy"} <= pinned


def test_windows_gets_a_zone_database() -> None:
    [tzdata] = [r for r in requirements(dev=False) if canonicalize_name(r.name) == "tzdata"]
    assert tzdata.marker is not None
    assert tzdata.marker.evaluate({"sys_platform": "win32"})
    assert not tzdata.marker.evaluate({"sys_platform": "linux"})
    assert not tzdata.marker.evaluate({"sys_platform": "darwin"})


def test_without_a_system_zone_database_the_zones_come_from_tzdata() -> None:
    """As on Windows: no zone files on disk, so zoneinfo falls back to the tzdata package that
    the Windows marker above installs; the zone handling needs nothing else."""
    zoneinfo.reset_tzpath(to=[])
    zoneinfo.ZoneInfo.clear_cache()
    try:
        assert zoneinfo.TZPATH == ()
        assert resolve_zone("Europe/Berlin") == "Europe/Berlin"
        with pytest.raises(SelectionError, match="unknown time zone"):
            resolve_zone("Mars/Olympus_Mons")
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()
