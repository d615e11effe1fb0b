"""Settings a repository pins in ``[tool.copilot-logs]`` of a ``pyproject.toml``: the nearest one
upward gives validate's ``select``, ``ignore`` and ``strict`` and, in
``[tool.copilot-logs.diff]``, diff's gate; command-line options win (docs/validate.md, "Pinning
the gate in ``pyproject.toml``"; docs/diff.md).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from copilot_logs.errors import CopilotLogsError, ExitCode

TABLE = "copilot-logs"
CWD_GONE = (
    "the current folder no longer exists (it was deleted), and the command needs it (for a "
    "relative path, or the pyproject.toml settings that apply there); cd to a folder that "
    "exists and run again"
)
"""Said when ``os.getcwd()`` fails (here, and by the CLI for any command)."""
DIFF_KEYS = ("fail-if", "min-runs", "alpha", "key", "unit", "fail-on-missing")


class ConfigError(CopilotLogsError):
    """A pyproject.toml whose [tool.copilot-logs] table cannot be used."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Settings:
    """The validate gate: which rules (``select`` None: every rule), and whether warnings fail."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    strict: bool = False

    def merged(
        self, *, select: Sequence[str] = (), ignore: Sequence[str] = (), strict: bool | None = None
    ) -> Settings:
        """These settings under the command line's options."""
        return replace(
            self,
            select=tuple(select) if select else self.select,
            ignore=(*self.ignore, *ignore),
            strict=self.strict if strict is None else strict,
        )


@dataclass(frozen=True)
class DiffSettings:
    """The ``diff`` gate pinned in ``[tool.copilot-logs.diff]``: each field None where the file
    says nothing (the command's default then applies)."""

    fail_if: tuple[str, ...] | None = None
    min_runs: int | None = None
    alpha: float | None = None
    key: str | None = None
    unit: str | None = None
    fail_on_missing: bool | None = None


def _table(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as stream:
            document = tomllib.load(stream)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    except RecursionError:
        raise ConfigError(
            f"{path}: not valid TOML for copilot-logs (values nested too deep to read); "
            "flatten it, or run from another folder"
        ) from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not valid TOML (byte {error.start} is not UTF-8): save it as UTF-8"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it ({error.strerror or error})") from None
    tool = document.get("tool")
    table = tool.get(TABLE) if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{TABLE}] must be a table")
    return table


def find_pyproject(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The nearest pyproject.toml at or above ``start`` (default: the current folder) with a
    [tool.copilot-logs] table (a nearer one without the table is passed over, as ruff does),
    and that table."""
    try:
        start = (start or Path.cwd()).resolve()
    except FileNotFoundError:  # os.getcwd(): the current folder was deleted
        raise ConfigError(CWD_GONE) from None
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        table = _table(candidate) if candidate.is_file() else None
        if table is not None:
            return candidate, table
    return None


def _codes(path: Path, key: str, value: Any) -> tuple[str, ...]:
    """A list of codes/names, or one comma-separated string."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: [tool.{TABLE}] {key} must be a list of rule codes or names")
    from copilot_logs.commands.validate import UnknownRuleError, matching, split_selectors

    selectors = tuple(split_selectors(value))
    for selector in selectors:
        try:
            matching(selector)
        except UnknownRuleError as error:
            raise ConfigError(f"{path}: [tool.{TABLE}] {key}: {error}") from None
    if key == "select" and not selectors:  # an empty select would check nothing, and pass
        raise ConfigError(
            f"{path}: [tool.{TABLE}] select is empty: name the rules to check, or leave it "
            "out to check every rule"
        )
    return selectors


def load_settings(start: Path | None = None) -> Settings:
    """The settings pinned for ``start`` (default: the current folder), or the defaults."""
    found = find_pyproject(start)
    if found is None:
        return Settings()
    path, table = found
    strict = table.get("strict", False)
    if not isinstance(strict, bool):
        raise ConfigError(f"{path}: [tool.{TABLE}] strict must be true or false")
    return Settings(
        select=_codes(path, "select", table["select"]) if "select" in table else None,
        ignore=_codes(path, "ignore", table.get("ignore", [])),
        strict=strict,
    )


def load_diff_settings(start: Path | None = None) -> DiffSettings:
    """The ``diff`` settings pinned for ``start`` (default: the current folder): the
    ``[tool.copilot-logs.diff]`` table of the nearest pyproject.toml with a
    ``[tool.copilot-logs]`` table, each value checked (ConfigError naming the file and key)."""
    found = find_pyproject(start)
    if found is None or "diff" not in found[1]:
        return DiffSettings()
    path, table = found[0], found[1]["diff"]
    where = f"{path}: [tool.{TABLE}.diff]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - set(DIFF_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(DIFF_KEYS)}"
        )
    from copilot_logs.commands.diff import KEYS
    from copilot_logs.commands.diff.metrics import ThresholdError, parse_threshold
    from copilot_logs.commands.diff.runs import UNITS

    fail_if = table.get("fail-if")
    if fail_if is not None:
        fail_if = [fail_if] if isinstance(fail_if, str) else fail_if
        if not isinstance(fail_if, list) or not all(isinstance(t, str) for t in fail_if):
            raise ConfigError(f"{where} fail-if must be a list of thresholds")
        if not fail_if:  # an empty gate would never fail
            raise ConfigError(
                f"{where} fail-if is empty: name the thresholds, or leave it out for the defaults"
            )
        for text in fail_if:
            try:
                parse_threshold(text)
            except ThresholdError as error:
                raise ConfigError(f"{where} fail-if: {error}") from None
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "min-runs": (
            lambda value: type(value) is int and value >= 1,
            "a whole number of at least 1",
        ),
        "alpha": (
            lambda value: type(value) in (int, float) and 0 < value <= 1,
            "a number above 0 and at most 1",
        ),
        "key": (lambda value: value in KEYS, f"one of {', '.join(KEYS)}"),
        "unit": (lambda value: value in UNITS, f"one of {', '.join(UNITS)}"),
        "fail-on-missing": (lambda value: isinstance(value, bool), "true or false"),
    }
    for key, (valid, what) in checks.items():
        if table.get(key) is not None and not valid(table[key]):
            raise ConfigError(f"{where} {key} must be {what}")
    alpha = table.get("alpha")
    return DiffSettings(
        fail_if=tuple(fail_if) if fail_if is not None else None,
        min_runs=table.get("min-runs"),
        alpha=float(alpha) if alpha is not None else None,
        key=table.get("key"),
        unit=table.get("unit"),
        fail_on_missing=table.get("fail-on-missing"),
    )
