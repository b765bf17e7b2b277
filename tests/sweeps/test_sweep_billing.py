"""A sweep's [billing] table: validated with key paths, carried to every cell, in every table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from h9eval.analysis.compare import compare, run_table
from h9eval.core.errors import ConfigError
from h9eval.results.store import load_results
from h9eval.sweeps.spec import load_spec
from h9eval.sweeps.sweep import sweep


def _spec(**billing: Any) -> dict[str, Any]:
    return {
        "name": "bill",
        "tasks": {"specs": ["synthetic:small:0", "synthetic:small:1"]},
        "policies": [{"kind": "keep_all"}, {"kind": "progressive", "params": {"context_window_tokens": 16000}}],
        "billing": billing,
    }


@pytest.mark.parametrize(
    ("billing", "match"),
    [
        ({"modle": "x"}, r"^billing: unknown billing key 'modle'; did you mean 'model'"),
        ({"placement": "claude"}, r"^billing: unknown cache placement 'claude'"),
        ({"timing": {"tool": 1}}, r"^billing\.timing: unknown timing key 'tool'; did you mean 'tool_s'"),
        ({"models": {"m": {"input_usd": 1}}}, r"billing\.models\.m: unknown model field 'input_usd'"),
        ({"prefix_tokens": "a"}, r"^billing\.prefix_tokens: expected an integer"),
    ],
)
def test_bad_billing_tables_are_refused_by_key_path(billing: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_spec(_spec(**billing))


def test_the_billing_table_reaches_every_table(tmp_path: Path) -> None:
    spec = _spec(
        model="my-model",
        models={
            "my-model": {
                "provider": "anthropic",
                "input_usd_per_mtok": 2.0,
                "output_usd_per_mtok": 8.0,
                "cache_read_frac": 0.1,
                "cache_write_5m_frac": 1.25,
            }
        },
    )
    out = tmp_path / "bill"
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert r.failed == 0
    res = load_results(out)
    assert set(res.calls["billed_model"]) == {"my-model"} and res.calls["priced"].all()
    assert res.runs["cost_usd"].notna().all() and (res.runs["cache_read_share"] > 0).all()
    table = run_table(res)
    assert table["cost_usd"].notna().all()
    keep_all = table[table["policy_kind"] == "keep_all"]
    assert (keep_all["cost_saved"].abs() < 1e-12).all()  # keep_all sends the uncompacted transcript
    (c,) = compare(res, "keep_all", "progressive", metric="cost_usd").comparisons
    assert c.metric == "cost_usd" and c.n_tasks == 2 and not c.higher_is_better
