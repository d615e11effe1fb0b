"""The Copilot CLI of a given version: fetched once from the npm registry into a cache outside
the repository (the package ``@github/copilot-linux-x64`` holds the whole CLI as one binary)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@github/copilot-linux-x64"


class FetchError(Exception):
    """The CLI could not be fetched (no registry, no such version)."""


def cache_root() -> Path:
    """``$COPILOT_RIG_CACHE``, else ``~/.cache/copilot-logs-rig`` of the user's real home (the
    recorder and the tests give the CLI a fresh HOME, which must not hide the cache)."""
    override = os.environ.get("COPILOT_RIG_CACHE")
    if override:
        return Path(override)
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "copilot-logs-rig"


def cached(version: str) -> Path | None:
    """That version's binary when it is in the cache already (nothing is fetched)."""
    target = cache_root() / version / "copilot"
    return target if target.is_file() else None


def binary(version: str) -> Path:
    """The path of that version's ``copilot``, fetched when not cached yet."""
    target = cache_root() / version / "copilot"
    if target.is_file():
        return target
    if shutil.which("npm") is None:
        raise FetchError("npm is not installed")
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            ["npm", "pack", "--silent", f"{PACKAGE}@{version}", "--pack-destination", scratch],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        tarballs = list(Path(scratch).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            reason = (done.stderr.strip().splitlines() or ["no tarball"])[-1]
            raise FetchError(f"npm pack {PACKAGE}@{version} failed: {reason}")
        with tarfile.open(tarballs[0]) as archive:
            member = archive.getmember("package/copilot")
            source = archive.extractfile(member)
            if source is None:
                raise FetchError(f"{PACKAGE}@{version} holds no package/copilot")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f".partial-{os.getpid()}")
            with source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out)
            partial.chmod(0o755)
            partial.replace(target)
    return target


def newest() -> str:
    """The newest version the registry lists."""
    done = subprocess.run(
        ["npm", "view", PACKAGE, "version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise FetchError(f"npm view {PACKAGE} failed")
    return done.stdout.strip()
