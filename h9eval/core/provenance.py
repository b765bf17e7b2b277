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
    unknown = {"git_commit": None, "git_dirty": None}
    try:
        # One process for both: the v2 header names the commit; any other line is a change.
        # Untracked files count: a new module that is not committed yet changes what ran.
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v2", "--branch", "--untracked-files=normal"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return unknown
    if out.returncode != 0:
        return unknown
    lines = out.stdout.splitlines()
    sha = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), "(initial)")
    if sha == "(initial)":  # no commit yet: as ``git rev-parse HEAD`` fails there
        return unknown
    return {"git_commit": sha, "git_dirty": any(not ln.startswith("#") for ln in lines)}


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str | None]:
    return {p: _version(p) for p in _PACKAGES}


def _version(name: str) -> str | None:
    """The installed version of distribution ``name`` (``None`` when it is not installed), read from
    the header of its metadata file: ``importlib.metadata.version`` parses the whole file as an email
    (long descriptions included), a twentieth of a short run's CPU for a dozen packages."""
    metadata = _metadata()
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line:
            break  # the headers end at the first blank line
        if line.startswith("Version:"):
            return line[len("Version:") :].strip()
    return dist.version  # type: ignore[no-any-return]  # an unusual file: the library's own parse


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
    return _version("h9eval") or "0+unknown"


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
