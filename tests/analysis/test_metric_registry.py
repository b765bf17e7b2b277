"""Adding a metric is one registry entry: a ``Metric`` registered with ``register_metric`` is a column of the
run table, a metric ``compare`` and ``h9eval compare --metric`` compare, and, with an ``answer_rank``, a row
of the report's answer box. Units and the answer box's choice of targets come from the entries, not names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from h9eval.analysis import compare as C
from h9eval.analysis.report.answer import answer_metrics, answer_section
from h9eval.analysis.report.context import build_context
from h9eval.cli import main
from h9eval.core.errors import ConfigError
from h9eval.results.store import Results, load_results
from h9eval.sweeps.sweep import sweep


def _compactions(results: Results, runs: Any) -> Any:
    # from the stored tables alone: the compaction records of each run
    comp = results.compactions
    n = comp.groupby("run_id").size() if comp is not None and len(comp) else pd.Series(dtype=float)
    return pd.DataFrame({"run_id": runs["run_id"], "compaction_rounds": runs["run_id"].map(n).fillna(0).astype(float)})


ROUNDS = C.Metric(
    name="compaction_rounds",
    higher_is_better=False,
    description="compaction rounds per run",
    label="compaction rounds",
    answer_rank=9,
    compute=_compactions,
)


@pytest.fixture
def registered() -> Iterator[C.Metric]:
    before = list(C.METRICS)
    C.register_metric(ROUNDS)
    try:
        yield ROUNDS
    finally:
        C.METRICS[:] = before


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("registry") / "res"
    spec = {
        "name": "registry",
        "window": 12_000,
        "tasks": {"synthetic": [{"preset": "small", "seeds": list(range(6))}]},
        "probes": {"scorers": ["recall"]},
        "policies": [
            {"kind": "progressive", "name": "harness9-default"},
            {"kind": "progressive", "name": "early", "params": {"warn_frac": 0.5, "soft_frac": 0.6}},
        ],
    }
    assert sweep(spec, out_dir=out, workers=0, progress=False).failed == 0
    return out


def test_a_registered_metric_is_in_the_run_table_compare_and_the_answer_box(
    registered: C.Metric, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = load_results(folder)
    table = C.run_table(res)
    assert "compaction_rounds" in table.columns
    want = res.compactions.groupby("run_id").size()
    got = table.set_index("run_id")["compaction_rounds"]
    assert (got[want.index] == want.astype(float)).all() and got.notna().all()
    cmp = C.compare(res, "early", "harness9-default", metric="compaction_rounds")
    [row] = [c for c in cmp.comparisons if c.metric == "compaction_rounds"]
    assert row.n_tasks == 6 and row.higher_is_better is False
    assert main(["compare", str(folder), "early", "harness9-default", "--metric", "compaction_rounds"]) == 0
    assert "compaction_rounds:" in capsys.readouterr().out
    assert answer_metrics(table)[-1] == "compaction_rounds"
    [box] = answer_section(build_context(res, n_boot=200))
    tables = [payload[0] for kind, payload in box.blocks if kind == "table"]
    targets = [str(x) for t in tables if "target" in t.columns for x in t["target"]]
    assert "compaction rounds (lower is better)" in targets, targets


def test_without_the_entry_nothing_knows_the_metric(folder: Path) -> None:
    res = load_results(folder)
    assert "compaction_rounds" not in C.run_table(res).columns
    with pytest.raises(ConfigError, match="metric"):
        C.compare(res, "early", "harness9-default", metric="compaction_rounds")


def test_a_name_is_registered_once_and_units_are_checked(registered: C.Metric) -> None:
    with pytest.raises(ConfigError, match="already registered"):
        C.register_metric(ROUNDS)
    with pytest.raises(ConfigError, match="unit must be one of"):
        C.Metric(name="x", higher_is_better=True, description="", unit="dollars")


def test_the_answer_box_reads_units_from_the_entries_not_the_names() -> None:
    """A priced metric whose every value is 0 (no price table) is left out; a metric named like a cost but not
    priced is kept (the old rule sniffed ``cost``/``usd`` in the name)."""
    table = pd.DataFrame({"retention": [0.5], "cost_usd": [0.0], "cost_saved": [0.0], "tokens_saved": [0.1]})
    assert answer_metrics(table) == ["retention", "tokens_saved"]
    before = list(C.METRICS)
    try:
        C.register_metric(C.Metric(name="cost_of_rereads", higher_is_better=False, description="", answer_rank=7))
        assert answer_metrics(table.assign(cost_of_rereads=[0.0]))[-1] == "cost_of_rereads"
    finally:
        C.METRICS[:] = before
