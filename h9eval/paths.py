"""Where h9eval finds the shared reference data (``shared/`` beside the project)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_dir", "conformance_dir", "recorded_dir", "repo_root"]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """``$H9EVAL_SHARED`` or ``<repo>/../shared``."""
    env = os.environ.get("H9EVAL_SHARED")
    return Path(env) if env else repo_root().parent / "shared"


def conformance_dir() -> Path:
    return shared_dir() / "reference" / "conformance"


def recorded_dir() -> Path:
    return shared_dir() / "data" / "recorded"
