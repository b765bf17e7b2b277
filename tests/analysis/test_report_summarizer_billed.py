"""The summarizer section carries each run's billed dollars through its per-configuration table."""

from __future__ import annotations

import math
import types

import pandas as pd
import pytest

from h9eval.analysis.metrics import summarizer_usage
from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.open_loop import summarizer_sections

# config "p": run r1 billed $0.1 + $0.2, run r2 $0.5 -> $0.4 per run; config "q": run r3 has an unpriced call
CALLS = pd.DataFrame(
    {
        "run_id": ["r1", "r1", "r2", "r3", "r3"],
        "call_index": [0, 1, 0, 0, 1],
        "summarizer_calls": [1, 1, 1, 1, 1],
        "summarizer_input_tokens": [100, 100, 200, 50, 50],
        "summarizer_output_tokens": [10, 10, 20, 5, 5],
        "summarizer_cost_usd": [0.0] * 5,
        "summarizer_bill_usd": [0.1, 0.2, 0.5, 0.05, math.nan],
    }
)
RM = pd.DataFrame({"run_id": ["r1", "r2", "r3"], "label": ["p", "p", "q"], "history_mode": ["view"] * 3})


def test_billed_dollars_per_run_survive_the_regrouping() -> None:
    per_run = summarizer_usage(CALLS, None, by="run_id")
    t = RM.merge(per_run.drop(columns=["n_runs", "calls_per_run", "cost_per_run_usd"]), on="run_id")
    u = summarizer_usage(t, by="label").set_index("label")
    assert u.loc["p", "billed_usd_per_run"] == pytest.approx(0.4) and math.isnan(u.loc["q", "billed_usd_per_run"])


def test_summarizer_section_shows_billed_usd_per_run_beside_tokens() -> None:
    res = types.SimpleNamespace(calls=CALLS, runs=pd.DataFrame())
    ctx = ReportContext(
        results=res,
        res=res,
        rm=RM,
        cm=pd.DataFrame(),  # type: ignore[arg-type]
        names={},
        n_boot=10,
        seed=0,
    )
    s = summarizer_sections(ctx)
    (t,) = [b[1][0] for b in s.blocks if b[0] == "table"]
    t = t.set_index("configuration")
    assert t.loc["p (view)", "billed USD per run"] == pytest.approx(0.4)
    assert t.loc["q (view)", "billed USD per run"] == "unpriced"
    assert list(t.columns).index("billed USD per run") > list(t.columns).index("output tokens")


def _policies_ctx(usd: list[float], unpriced: list[int]) -> ReportContext:
    from h9eval.analysis.metrics import config_metrics

    rm = pd.DataFrame(
        {
            "run_id": ["r1", "r2", "r3"],
            "label": ["p", "q", "q"],
            "policy_kind": "progressive",
            "history_mode": "view",
            "tokens_saved": [0.5, 0.7, 0.1],
            "retention": 0.9,
            "cost_usd": usd,
            "unpriced_calls": unpriced,
        }
    )
    cm = config_metrics(rm, n=200)
    res = types.SimpleNamespace(calls=CALLS, runs=pd.DataFrame())
    return ReportContext(results=res, res=res, rm=rm, cm=cm, names={}, n_boot=200, seed=0)  # type: ignore[arg-type]


def test_policies_table_shows_billed_dollars_per_task_beside_tokens_saved() -> None:
    from h9eval.analysis.report.open_loop import policies_sections

    ctx = _policies_ctx([0.2, 0.3, math.nan], [0, 0, 2])
    cm = ctx.cm.set_index("label")
    assert cm.loc["p", "cost_usd"] == pytest.approx(0.2) and cm.loc["p", "cost_usd_ci_lo"] == pytest.approx(0.2)
    assert math.isnan(cm.loc["q", "cost_usd"])  # one run unpriced: not the priced run's 0.3, never $0
    s = policies_sections(ctx)
    (t,) = [b[1][0] for b in s.blocks if b[0] == "table"][:1]
    t = t.set_index("configuration")
    cols = list(t.columns)
    assert cols.index("billed USD per task [95% CI]") == cols.index("tokens saved [95% CI]") + 1
    usd = t["billed USD per task [95% CI]"]
    assert usd["p"].startswith("0.2 [") and usd["q"] == "unpriced"
    # results written before billing: no dollars column at all
    old = policies_sections(_policies_ctx([math.nan] * 3, [0, 0, 0]))
    (t_old,) = [b[1][0] for b in old.blocks if b[0] == "table"][:1]
    assert "billed USD per task [95% CI]" not in t_old.columns
