"""Manifests of schema version 1 (written before run specs, by the code of the commit that introduced
generated doc blocks) keep their identities: every cell entry read by today's code gives back the run id
and the cell hash it was written with, so a folder written then resumes with its cells reused while the
code is unchanged. And a version-1 results folder still reports, compares and resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.results.store import load_results
from h9eval.sweeps.cells import Cell
from h9eval.sweeps.sweep import sweep

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = sorted((DATA / "manifests-v1").glob("*.json"))


def test_the_golden_manifests_cover_both_window_kinds_and_both_loops() -> None:
    entries = [e for p in GOLDEN for e in json.loads(p.read_text())["cells"]]
    assert {json.loads(p.read_text())["schema_version"] for p in GOLDEN} == {1}
    assert {e.get("cell_kind", "replay") for e in entries} == {"replay", "episode"}
    assert any(e.get("window_peak_frac") for e in entries) and any(isinstance(e.get("window"), int) for e in entries)
    assert {e["history_mode"] for e in entries} == {"view", "write_back"} and any(e["grid"] for e in entries)


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_todays_specs_give_the_version_1_run_ids_and_cell_hashes(path: Path) -> None:
    for e in json.loads(path.read_text())["cells"]:
        cell = Cell.from_dict(e)
        assert cell.spec.run_id == e["run_id"]
        assert cell.spec.cell_hash(h9eval_version=e["h9eval_version"], source_hash=e["source_hash"]) == e["cell_hash"]
        # and through today's manifest form (version 2) the same again
        again = Cell.from_dict(json.loads(json.dumps(cell.to_dict())))
        assert again.spec == cell.spec and again.spec.run_id == e["run_id"]


def test_a_version_1_folder_reports_compares_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "v1"
    shutil.copytree(DATA / "results-v1", folder)
    assert main(["report", str(folder)]) == 0
    assert (folder / "report.html").stat().st_size > 0
    assert main(["compare", str(folder), "progressive", "keep_all"]) == 0
    assert "progressive vs keep_all" in capsys.readouterr().out
    before = load_results(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    r = sweep(manifest["spec"], out_dir=folder, workers=0, progress=False)
    assert r.failed == 0
    after = load_results(folder)
    assert json.loads((folder / "manifest.json").read_text())["schema_version"] == 2
    assert sorted(after.runs["task_id"]) == sorted(before.runs["task_id"])
    assert set(after.runs["policy_kind"]) == set(before.runs["policy_kind"])
