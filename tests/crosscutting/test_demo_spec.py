"""The demo's sweep specs load and plan (a spec error would otherwise surface only in `make demo`)."""

from __future__ import annotations

from pathlib import Path

from h9eval.cli.demo import DEMO_SPEC
from h9eval.sweeps.cells import expand_cells
from h9eval.sweeps.spec import load_spec


def test_every_demo_spec_loads_and_expands(tmp_path: Path) -> None:
    specs = sorted(DEMO_SPEC.parent.glob("*.toml"))
    assert DEMO_SPEC in specs
    for path in specs:
        cells, _skipped = expand_cells(load_spec(path), out_dir=tmp_path / path.stem)
        assert cells, path
