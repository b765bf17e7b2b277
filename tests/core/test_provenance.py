"""Provenance: the versions read from metadata headers agree with ``importlib.metadata``, and the
git state comes from one ``git status`` as ``rev-parse`` and ``status`` gave it."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
from pathlib import Path

import pytest

from h9eval.core import provenance

GIT = shutil.which("git")


def test_every_recorded_version_is_the_one_importlib_metadata_reads() -> None:
    for name in (*provenance.package_versions(), "pip", "surely-not-installed-h9eval-xyz"):
        try:
            expected: str | None = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            expected = None
        assert provenance._version(name) == expected, name
    assert provenance.h9eval_version() == importlib.metadata.version("h9eval")


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=True)
    return r.stdout.strip()


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_git_state_commit_and_dirty_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance, "repo_root", lambda: tmp_path)

    def state() -> dict[str, object]:
        provenance.git_state.cache_clear()
        return provenance.git_state()

    try:
        assert state() == {"git_commit": None, "git_dirty": None}  # not a repository
        _git(tmp_path, "init", "-q")
        (tmp_path / "a.py").write_text("x = 1\n")
        assert state() == {"git_commit": None, "git_dirty": None}  # no commit yet
        _git(tmp_path, "add", "a.py")
        _git(tmp_path, "commit", "-q", "-m", "a")
        sha = _git(tmp_path, "rev-parse", "HEAD")
        assert state() == {"git_commit": sha, "git_dirty": False}
        (tmp_path / "new.py").write_text("y = 2\n")  # untracked counts
        assert state() == {"git_commit": sha, "git_dirty": True}
        (tmp_path / "new.py").unlink()
        (tmp_path / "a.py").write_text("x = 2\n")  # a modified file counts
        assert state() == {"git_commit": sha, "git_dirty": True}
    finally:
        provenance.git_state.cache_clear()
