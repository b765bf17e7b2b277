"""The legacy ``summarizer_cost_usd`` of a model h9eval has no prices for is unknown (NaN, shown as
"unpriced"), never $0: through the summary cache, the replay's calls and run summary, and the
analysis aggregates a report and the tuner read. Prices have one owner (core/prices.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from h9eval.compaction.policies import make_policy
from h9eval.compaction.summary import SummaryReply, SummaryRequest
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.summarizers.cache import CachedSummarizer
from h9eval.summarizers.offline import OfflineSummarizer
from h9eval.tasks import load_tasks_from_spec


class UnpricedSummarizer:
    """The offline summary, reported as an unpriced model's reply (as the Anthropic summarizer does)."""

    summarizer_id = "unpriced-model"

    def __init__(self) -> None:
        self.inner = OfflineSummarizer()

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        r = self.inner.summarize(request)
        return SummaryReply(
            text=r.text,
            input_tokens=100,
            output_tokens=10,
            cost_usd=math.nan,
            model="my-local-model",
            extra={"cost_known": False},
        )


def _run(summarizer: object, tmp_path: Path) -> pd.DataFrame:
    (task,) = load_tasks_from_spec("synthetic:small:0")
    pol = make_policy("progressive", context_window_tokens=15_000)
    res = replay(
        task,
        pol,
        summarizer=summarizer,
        config=ReplayConfig(context_window_tokens=15_000),  # type: ignore[arg-type]
        session_store=False,
    )
    assert res.calls["summarizer_calls"].sum() > 0  # the state this test means to check
    return res


def test_an_unpriced_summarizer_is_unknown_in_every_aggregate_never_zero(tmp_path: Path) -> None:
    """Mutants killed: a run summary or an aggregate that skips the unknown values (pandas' default),
    the summary cache turning NaN into $0 (or dropping the reply: SQLite stores NaN as NULL)."""
    from h9eval.analysis import metrics

    res = _run(UnpricedSummarizer(), tmp_path)
    c = res.calls
    summ = c["summarizer_calls"] > 0
    assert c.loc[summ, "summarizer_cost_usd"].isna().all() and (c.loc[~summ, "summarizer_cost_usd"] == 0).all()
    assert math.isnan(res.summary()["summarizer_cost_usd"])
    rm = metrics.run_metrics(c)
    assert rm["summarizer_cost_usd"].isna().all()
    assert metrics.config_metrics(rm)["summarizer_cost_usd"].isna().all()
    usage = metrics.summarizer_usage(c)
    assert usage["summarizer_cost_usd"].isna().all() and usage["cost_per_run_usd"].isna().all()
    # the offline summarizer is free: 0, a known value
    free = _run(OfflineSummarizer(), tmp_path)
    assert res.calls["summarizer_calls"].sum() == free.calls["summarizer_calls"].sum()
    assert (
        free.summary()["summarizer_cost_usd"] == 0.0
        and metrics.run_metrics(free.calls)["summarizer_cost_usd"].eq(0).all()
    )
    # through the summary cache: stored (a hit the second time), and unknown again when read
    cached = CachedSummarizer(UnpricedSummarizer(), tmp_path / "c.sqlite")
    from tests.summarizers.test_offline import HEAD, req

    first, second = cached.summarize(req(HEAD)), cached.summarize(req(HEAD))
    assert second.cache_hit and math.isnan(first.cost_usd) and math.isnan(second.cost_usd)


def test_the_report_shows_unpriced_not_a_dash_or_zero() -> None:
    from h9eval.analysis.report.open_loop import unpriced_cells

    cells = unpriced_cells(pd.Series([0.25, math.nan, 0.0]))
    assert cells.tolist() == [0.25, "unpriced", 0.0]
