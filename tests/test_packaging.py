"""Packaging tells the truth: constraints/floors.txt pins each dependency at the floor that
pyproject.toml declares (so `make test-floors` tests exactly the declared floors), the tools that
decide whether `make test` passes are pinned, Windows gets a zone database, and the wheel holds
only what users run (not the test-data generator `synth/`)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
import zoneinfo
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from copilot_logs.cli.options import resolve_zone
from copilot_logs.errors import SelectionError
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


# ---- what the wheel holds -----------------------------------------------------------------------

#: Not part of a source tree that setuptools sees: environments, caches, build output, VCS.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv*", ".*cache", ".hypothesis", "__pycache__", "*.egg-info", "build", "dist"
)


def package_sources() -> set[str]:
    """Every module and data file of copilot_logs in the source tree, as wheel paths."""
    return {
        path.relative_to(PROJECT).as_posix()
        for pattern in ("*.py", "*.json", "*.css", "*.js", "*.md")
        for path in (PROJECT / "copilot_logs").rglob(pattern)
        if "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The file names in the wheel that `pip wheel` builds from a copy of the project (a copy,
    so that no stale build/ folder of the working tree can add or hide a file)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(PROJECT, source, ignore=_NOT_SOURCE)
    dist = tmp / "dist"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(dist),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = dist.glob("copilot_logs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.mark.process
def test_the_wheel_holds_the_package_and_nothing_else(wheel_names: list[str]) -> None:
    assert not [name for name in wheel_names if name.split("/")[0] == "synth"]
    shipped = {name for name in wheel_names if ".dist-info/" not in name}
    assert shipped == package_sources()


def imported_names(path: Path) -> set[str]:
    """What a file imports, as dotted names: ``synth``, ``synth.session``, ``.synth``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names.add(module)
            names.update(f"{module.rstrip('.')}.{alias.name}" for alias in node.names)
    return names


def test_the_package_never_imports_the_test_data_generator() -> None:
    assert not (PROJECT / "copilot_logs" / "synth.py").exists()
    importers = {
        source: sorted(
            name for name in imported_names(PROJECT / source) if "synth" in name.split(".")
        )
        for source in package_sources()
        if source.endswith(".py")
    }
    assert {source: names for source, names in importers.items() if names} == {}


# --- what `make test` installs (issue 24) ------------------------------------------------------


def _make_dry_run(target: str) -> list[str]:
    """The commands `make TARGET` would run from scratch (printed, not run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "--dry-run", "--always-make", "--no-print-directory", target],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_make_test_leaves_out_the_spark_extra_and_test_spark_installs_it() -> None:
    installs = [line for line in _make_dry_run("test") if "pip install" in line]
    assert installs and not [line for line in installs if "spark" in line]
    spark = _make_dry_run("test-spark")
    assert any("pip install" in line and "spark]" in line for line in spark)
    assert any("pytest" in line and "tests/test_spark.py" in line for line in spark)


def test_make_test_leaves_out_rotel_and_test_otel_installs_it() -> None:
    installs = [line for line in _make_dry_run("test") if "pip install" in line]
    assert not [line for line in installs if "otel-test" in line]
    otel = _make_dry_run("test-otel")
    assert any("pip install" in line and "otel-test]" in line for line in otel)
    assert any("pytest" in line and "tests/test_otel_collector.py" in line for line in otel)
    extras = PYPROJECT["optional-dependencies"]
    assert not [r for r in extras["dev"] if r.startswith("rotel")]
    assert [r for r in extras["otel-test"] if r.startswith("rotel")]


def test_ci_runs_the_otel_collector_tests_after_make_test() -> None:
    steps = [
        line.strip()
        for line in (PROJECT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert steps.index("make test") < steps.index("make test-otel")


@pytest.mark.process
def test_without_rotel_the_collector_tests_skip_saying_how_to_run_them(tmp_path: Path) -> None:
    """rotel hidden by a package of the same name that cannot be imported."""
    shadow = tmp_path / "shadow" / "rotel"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError('hidden', name='rotel')\n")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"),
            "tests/test_otel_collector.py",
        ],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{PROJECT}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, done.stdout
    assert "1 skipped" in done.stdout
    assert "the otel-test extra is not installed (`make test-otel` installs rotel" in done.stdout


def test_ci_runs_the_spark_tests_after_make_test() -> None:
    steps = [
        line.strip()
        for line in (PROJECT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert steps.index("make test") < steps.index("make test-spark")


SPARK_TESTS = "tests/test_spark.py"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]


@pytest.mark.process
def test_without_pyspark_the_spark_tests_skip_saying_how_to_run_them(tmp_path: Path) -> None:
    """pyspark and pyarrow hidden by packages of the same names that cannot be imported: the
    Spark tests and the executor's Arrow tests skip, in one line that names the extra."""
    for name in ("pyspark", "pyarrow"):
        shadow = tmp_path / "shadow" / name
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text(f"raise ModuleNotFoundError('hidden', name={name!r})\n")
    done = subprocess.run(
        [*PYTEST, SPARK_TESTS],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{PROJECT}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, done.stdout  # all skipped
    assert "1 skipped" in done.stdout
    assert "the spark extra is not installed (`make test-spark`" in done.stdout
    arrow = subprocess.run(
        [*PYTEST, SPARK_TESTS, "tests/test_spark_engine.py"],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{PROJECT}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    [skipped] = [line for line in arrow.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped.startswith("SKIPPED [4] ") and "the spark extra is not installed" in skipped
