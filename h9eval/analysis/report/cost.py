"""The report's cost section: dollars as the provider bills them, beside tokens, and the
retention-vs-dollars frontier (:mod:`h9eval.core.billing`; ``docs/billing.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from h9eval.analysis import plots
from h9eval.analysis.report.model import Section
from h9eval.core.prices import PRICES_AS_OF

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cost_by_configuration", "cost_sections"]

COST_CAVEAT = (
    f"List prices of {PRICES_AS_OF} with prompt caching as the billing model predicts it (validated on recorded "
    "Claude Code bills, docs/billing.md); the offline summarizer's tokens are priced as the billed model would bill "
    "them, and the time between calls of synthetic tasks comes from a stated timing model."
)


def cost_by_configuration(rm: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and history mode (``rm``: :func:`h9eval.analysis.metrics.run_metrics`
    with ``label``): runs, mean tokens saved beside mean dollars per task, the uncompacted
    transcript's dollars, the share of dollars saved, cache-read share, invalidation dollars,
    unpriced calls and mean retention."""
    import pandas as pd

    need = {"label", "history_mode", "cost_usd"}
    if not len(rm) or not need <= set(rm.columns):
        return pd.DataFrame()
    g = rm.groupby(["label", "history_mode"], sort=True)
    out = pd.DataFrame(
        {
            "runs": g.size(),
            "tokens_saved": g["tokens_saved"].mean(),
            "cost_usd": g["cost_usd"].mean(),
            "raw_cost_usd": g["raw_cost_usd"].mean(),
            "cost_saved": g["cost_saved"].mean(),
            "cache_read_share": g["cache_read_share"].mean(),
            "invalidation_usd": g["invalidation_usd"].mean(),
            "unpriced_calls": g["unpriced_calls"].sum(),
            "retention": g["retention"].mean() if "retention" in rm.columns else float("nan"),
        }
    ).reset_index()
    return out.rename(columns={"label": "configuration"})


def cost_sections(rm: pd.DataFrame) -> list[Section]:
    """The cost section (empty list for results without billed columns)."""
    t = cost_by_configuration(rm)
    if not len(t) or t["cost_usd"].isna().all() and not t["unpriced_calls"].any():
        return []
    s = Section("Cost as providers bill it")
    s.caveat(COST_CAVEAT)
    s.text(
        "Dollars per task beside tokens saved: a compaction rewrites the cached prefix, so the calls after it pay "
        "for cache writes where they would have paid a tenth for reads. cost_saved is the share of the uncompacted "
        "transcript's dollars saved under the same billing; invalidation_usd what rewriting non-new tokens cost."
    )
    if t["unpriced_calls"].any():
        s.note("Some calls were billed as an unpriced model: their dollars are missing (never 0).")
    show = t.copy()
    for c in ("tokens_saved", "cost_saved", "cache_read_share", "retention"):
        show[c] = show[c].round(3)
    for c in ("cost_usd", "raw_cost_usd", "invalidation_usd"):
        show[c] = show[c].round(4)
    s.table(show, "Per configuration and history mode: means over tasks (dollars per task, list prices).")
    s.figure(
        "retention_cost_frontier",
        plots.retention_cost_frontier(t),
        "Retention against dollars per task; the dashed line is the front of configurations no other beats on both.",
    )
    return [s]
