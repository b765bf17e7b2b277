"""Where h9eval finds the shared reference data (``shared/`` beside the project)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_dir", "conformance_dir", "recorded_dir", "repo_root"]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


#: where the project's shared folder lives on its own machines, for a checkout elsewhere
_WORKPLACE_SHARED = Path("/work/shared")


def shared_dir() -> Path:
    """``$H9EVAL_SHARED``, else ``<repo>/../shared`` (how CI lays it out), else the
    workplace's ``/work/shared`` (a scratch clone in a temporary folder)."""
    env = os.environ.get("H9EVAL_SHARED")
    if env:
        return Path(env)
    beside = repo_root().parent / "shared"
    if not beside.exists() and _WORKPLACE_SHARED.exists():
        return _WORKPLACE_SHARED
    return beside


def conformance_dir() -> Path:
    return shared_dir() / "reference" / "conformance"


def recorded_dir() -> Path:
    return shared_dir() / "data" / "recorded"


def prepare_out_dir(path: str | os.PathLike[str], *, what: str = "output folder") -> Path:
    """Create ``path`` as a folder (parents too) or raise :class:`FormatError` naming it when a
    file is in the way (at ``path`` or above it) or it cannot be created; an existing folder is
    kept as it is. ``what`` names the folder in the messages."""
    from h9eval.errors import FormatError

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise FormatError(f"{what} path exists and is not a folder", path=str(p))
    blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
    if blocker is not None:
        raise FormatError(f"{blocker} is not a folder; cannot create the {what} under it", path=str(p))
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FormatError(f"cannot create the {what} ({e.strerror or e})", path=str(p)) from None
    return p
