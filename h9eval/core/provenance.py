"""Provenance for results: git commit and dirty flag, package versions, machine."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from h9eval.core.paths import repo_root

__all__ = ["git_state", "h9eval_version", "package_versions", "provenance", "source_hash", "tree_hash"]

_PACKAGES = (
    "h9eval",
    "pandas",
    "pyarrow",
    "matplotlib",
    "anthropic",
    "datasets",
    "rapidfuzz",
    "tqdm",
    "dask",
    "distributed",
    "quicktok-v1",
)


@lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """``{"git_commit": sha or None, "git_dirty": bool or None}`` of the h9eval checkout."""
    import subprocess  # only when provenance is recorded: start-up (every command) does without it

    root = repo_root()
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        # Untracked files count: a new module that is not committed yet changes what ran.
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return {"git_commit": sha.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in _PACKAGES:
        try:
            out[p] = _metadata().version(p)
        except _metadata().PackageNotFoundError:
            out[p] = None
    return out


def _platform() -> Any:
    import platform

    return platform


def _metadata() -> Any:
    # importlib.metadata (email, zipfile, csv...) costs a sixth of ``import h9eval``: imported
    # when a version is asked for, not at start-up.
    import importlib.metadata

    return importlib.metadata


@lru_cache(maxsize=1)
def h9eval_version() -> str:
    """h9eval's version from the installed package's metadata (``0+unknown`` for a checkout on
    ``sys.path`` without an install); ``h9eval.__version__`` is this value."""
    metadata = _metadata()
    try:
        return str(metadata.version("h9eval"))
    except metadata.PackageNotFoundError:
        return "0+unknown"


def provenance() -> dict[str, Any]:
    """Everything a manifest records about where results came from (no secrets)."""
    return {
        "h9eval_version": h9eval_version(),
        **git_state(),
        "python": _platform().python_version(),
        "platform": _platform().platform(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
    }


def tree_hash(root: Path) -> str:
    """sha256 (hex) of every ``.py`` file under ``root``: relative path and bytes, in sorted
    path order, so the same tree gives the same hash on any machine and any checkout path."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py"), key=lambda q: q.relative_to(root).as_posix()):
        data = p.read_bytes()
        rel = p.relative_to(root).as_posix().encode()
        # lengths delimit the fields, so no two different trees feed the same byte stream
        h.update(b"%d:%s%d:" % (len(rel), rel, len(data)))
        h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=1)
def source_hash() -> str:
    """:func:`tree_hash` of the h9eval package this process runs, computed once per process: a
    sweep reuses a finished cell only when the code that produced it is the same."""
    return tree_hash(Path(__file__).resolve().parents[1])
