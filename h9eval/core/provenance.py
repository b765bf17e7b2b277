"""Provenance for results: git commit and dirty flag, package versions, machine."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from functools import lru_cache
from typing import Any

from h9eval.core.paths import repo_root

__all__ = ["provenance", "git_state", "package_versions", "h9eval_version"]

_PACKAGES = ("h9eval", "pandas", "pyarrow", "matplotlib", "anthropic", "datasets", "rapidfuzz", "tqdm", "dask", "distributed", "quicktok-v1")


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """``{"git_commit": sha or None, "git_dirty": bool or None}`` of the h9eval checkout."""
    root = repo_root()
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        # Untracked files count: a new module that is not committed yet changes what ran.
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"], capture_output=True, text=True, timeout=10
        )
        return {"git_commit": sha.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def h9eval_version() -> str:
    """The installed package's version (the one owner: ``pyproject.toml`` via package metadata)."""
    try:
        return importlib.metadata.version("h9eval")
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path without an install
        return "0+unknown"


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in _PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = None
    return out


def provenance() -> dict[str, Any]:
    """Everything a manifest records about where results came from (no secrets)."""
    return {
        "h9eval_version": h9eval_version(),
        **git_state(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
    }
