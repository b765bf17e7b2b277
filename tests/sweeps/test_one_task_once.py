"""One task once (issue 45): the same transcript listed twice (two copies of a session, a file and a
folder holding it) is one task of a sweep, with a warning naming the duplicate; the manifest keeps it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from h9eval.core.paths import recorded_dir
from h9eval.sweeps.sweep import sweep


def test_the_same_session_in_two_files_is_one_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = recorded_dir() / "swe-agent" / "pydicom__pydicom-1458.traj"
    (tmp_path / "a").mkdir()
    shutil.copy(src, tmp_path / "a" / "one.traj")
    shutil.copy(src, tmp_path / "a" / "two.traj")
    spec = {
        "name": "once",
        "window": 16_000,
        "tasks": [str(tmp_path / "a"), "synthetic:small:0", str(src)],
        "policies": [{"kind": "keep_all"}],
    }
    r = sweep(spec, out_dir=tmp_path / "s", workers=0, progress=True)
    err = capsys.readouterr().err
    assert r.n_cells == 2 and r.ok == 2  # the session once, the synthetic task once
    assert len(r.duplicates) == 2 and {d.where for d in r.duplicates} == {"tasks.specs[0]", "tasks.specs[2]"}
    assert all(d.same_as_where == "tasks.specs[0]" for d in r.duplicates)
    assert "warning: 2 task(s) left out, each the same transcript as an earlier task" in err
    assert "warning: 2 task(s) left out" in str(r)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert len(manifest["duplicate_tasks"]) == 2 and len(manifest["cells"]) == 2


def test_distinct_sessions_are_all_kept(tmp_path: Path) -> None:
    spec = {"name": "distinct", "tasks": ["synthetic:small:0", "synthetic:small:1"], "policies": [{"kind": "keep_all"}]}
    r = sweep(spec, out_dir=tmp_path / "s", workers=0, progress=False)
    assert r.n_cells == 2 and r.duplicates == [] and "warning" not in str(r)
