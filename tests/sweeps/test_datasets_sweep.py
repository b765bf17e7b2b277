"""A sweep over ``[tasks] datasets``: tasks reloaded by row in the workers, resumed, reported and
exported as a DatasetDict that ``load_from_disk`` reads back table for table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from h9eval.core.errors import ConfigError
from h9eval.results import load_results
from h9eval.results.export import dataset_tables, export_dataset
from h9eval.sweeps.sweep import sweep
from h9eval.sweeps.spec import load_spec

FIXTURES = Path(__file__).resolve().parents[2] / "examples" / "datasets"


def _spec() -> dict[str, Any]:
    return {
        "name": "datasets",
        "window": {"peak_frac": 0.4},
        "tasks": {
            "datasets": [
                {"path": str(FIXTURES / "swe_rebench_openhands.parquet"), "n": 2, "seed": 0},
                {"path": str(FIXTURES / "nebius_swe_agent.parquet"), "n": 1, "seed": 3, "where": {"target": True}},
            ]
        },
        "policies": [{"kind": "keep_all"}, {"kind": "progressive"}],
    }


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ds") / "out"
    r = sweep(_spec(), out_dir=out, workers=2, progress=False)
    assert r.ok == 6 and r.failed == 0
    return out


def test_cells_load_their_task_by_row(swept: Path) -> None:
    r = load_results(swept)
    sources = {c["spec"]["task"]["source"] for c in r.manifest["cells"]}
    assert len(sources) == 3 and all(s.startswith("dataset:") and "#" in s for s in sources)
    assert r.runs["task_id"].str.startswith(("swe_rebench_openhands:", "nebius_swe_agent:")).all()
    assert int(r.compactions.shape[0]) > 0  # progressive compacted on the dataset tasks


def test_resume_reuses_every_cell_and_gives_the_same_tables(swept: Path) -> None:
    before = load_results(swept)
    again = sweep(_spec(), out_dir=swept, workers=0, progress=False)
    assert again.reused == 6 and again.ran == 0
    after = load_results(swept)
    pd.testing.assert_frame_equal(before.calls, after.calls)


def test_report_of_a_dataset_sweep(swept: Path, tmp_path: Path) -> None:
    from h9eval.analysis.report import write_report

    paths = write_report(swept, tmp_path / "rep")
    assert paths.html.is_file() and "swe_rebench_openhands" in paths.html.read_text(encoding="utf-8")


def test_export_round_trips_through_load_from_disk(swept: Path, tmp_path: Path) -> None:
    out = export_dataset(swept, tmp_path / "export")
    back = dataset_tables(out)
    res = load_results(swept)
    for name in ("runs", "calls", "compactions", "probes", "episodes"):
        pd.testing.assert_frame_equal(getattr(res, name).reset_index(drop=True), back[name].reset_index(drop=True))
    with pytest.raises(ConfigError, match="already exists"):
        export_dataset(swept, out)
    export_dataset(swept, out, overwrite=True)


def test_dataset_entries_are_checked_with_their_key_path(tmp_path: Path) -> None:
    bad = _spec()
    bad["tasks"]["datasets"][1]["n"] = 0
    with pytest.raises(ConfigError, match=r"tasks.datasets\[1\]: .*n must be an integer >= 1"):
        load_spec(bad)
    bad = _spec()
    bad["tasks"]["datasets"][0]["path"] = str(tmp_path / "missing.parquet")
    with pytest.raises(ConfigError, match=r"tasks.datasets\[0\].path: no such file or folder, and not a Hub id"):
        load_spec(bad)
    bad = _spec()
    bad["tasks"]["datasets"][0]["wher"] = {}
    with pytest.raises(ConfigError, match="did you mean 'where'"):
        load_spec(bad)
    assert load_spec({**_spec(), "tasks": {"datasets": {"path": "nebius/SWE-agent-trajectories", "n": 5}}}).datasets
