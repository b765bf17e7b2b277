"""Robust to the stand-in: a comparison of two summarizing strategies is repeated under each
offline extractor, called robust only when every extractor gives the same verdict, and the
stand-in caveat is printed beside the verdict. Fixed tables; the verdicts follow from exact
sign-flip p-values computed by hand (8 tasks all one way: 2/256)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from h9eval.analysis import compare as C
from h9eval.analysis.stats import INCONCLUSIVE, WORSE

SUMMS = ("offline", "offline_recent", "offline_free_text")


def _table(free_text_diffs: tuple[float, ...]) -> pd.DataFrame:
    rows = []
    for sm in SUMMS:
        diffs = free_text_diffs if sm == "offline_free_text" else (-0.1,) * 8
        for i, d in enumerate(diffs):
            for cfg, v in ((f"codex:{sm}", 0.5 + d), (f"h9:{sm}", 0.5)):
                rows.append(
                    {
                        "config": cfg,
                        "task_id": f"t{i}",
                        "history_mode": "view",
                        "summarizer": sm,
                        "summarizer_calls": 3,
                        "retention": v,
                    }
                )
    return pd.DataFrame(rows)


def _rob(table: pd.DataFrame) -> pd.DataFrame:
    return C.stand_in_robustness(
        table, [(f"codex:{sm}", f"h9:{sm}") for sm in SUMMS], [C.metric_spec("retention")], margin=0
    )


def test_not_robust_when_one_extractor_disagrees() -> None:
    """Mutant killed: "robust" when most extractors agree."""
    mixed = (-0.1, 0.1, -0.1, 0.1, -0.1, 0.05, -0.05, 0.0)
    rob = _rob(_table(mixed)).set_index("summarizer")
    # by hand: 8 of 8 tasks lower -> p = 2/256 < 0.05 -> worse; the mixed one has mean -0.0125, p far above 0.05
    assert rob.loc["offline", "verdict"] == rob.loc["offline_recent", "verdict"] == WORSE
    assert rob.loc["offline", "p_adjusted"] == pytest.approx(2 / 256)
    assert rob.loc["offline_free_text", "verdict"] == INCONCLUSIVE
    assert not rob["robust"].any()
    line = "retention: worse under offline, worse under offline_recent, inconclusive under offline_free_text"
    assert C.robust_lines(rob.reset_index()) == [line + " -> NOT robust to the stand-in"]


def test_robust_when_every_extractor_agrees_and_not_with_one_extractor_alone() -> None:
    rob = _rob(_table((-0.1,) * 8))
    assert rob["robust"].all() and set(rob["verdict"]) == {WORSE}
    one = C.stand_in_robustness(
        _table((-0.1,) * 8), [("codex:offline", "h9:offline")], [C.metric_spec("retention")], margin=0
    )
    assert not one["robust"].any()  # one extractor cannot show robustness


def test_the_caveat_names_the_offline_extractors_that_were_called() -> None:
    t = _table((-0.1,) * 8)
    (cav,) = C.stand_in_caveats(t, ["codex:offline", "h9:offline"])
    assert "offline extractive stand-in (offline)" in cav and "not a language model" in cav
    t.loc[t["config"].str.startswith("codex:offline_recent"), "summarizer_calls"] = 0
    t.loc[t["config"].str.startswith("h9:offline_recent"), "summarizer_calls"] = 0
    assert C.stand_in_caveats(t, ["codex:offline_recent", "h9:offline_recent"]) == []  # never summarized: no caveat


def test_compare_prints_the_verdict_under_each_extractor_and_the_caveat(results_dir: Path) -> None:
    c = C.compare(results_dir, "thrash", "base", n_resamples=200)
    assert {x.a for x in c.comparisons} == {"thrash:offline", "thrash:offline_free_text"}
    text = str(c)
    assert "stand-in: retention:" in text and "under offline," in text and "under offline_free_text" in text
    assert "caveat: summaries from the offline extractive stand-in" in text
    single = str(C.compare(results_dir, "thrash:offline", "base:offline", n_resamples=200))
    assert "under offline_free_text" in single and "caveat:" in single


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.analysis.test_compare import results_dir as build

    return build.__wrapped__(tmp_path_factory)  # type: ignore[attr-defined]


def test_a_strategy_without_its_suffix_pairs_with_a_policy_that_calls_no_summarizer() -> None:
    t = _table((-0.1,) * 8)
    t = t[~t["config"].str.startswith("h9:")]
    keep = t[t["config"] == "codex:offline"].assign(
        config="keep_all", retention=0.6, summarizer="offline", summarizer_calls=0
    )
    t = pd.concat([t, keep], ignore_index=True)
    bases = C.base_labels(t)
    labels = sorted(t["config"].unique())
    pairs = C.extractor_pairs(t, bases, labels, "codex", "keep_all")
    assert pairs == [(f"codex:{sm}", "keep_all") for sm in sorted(SUMMS)]
    assert C.other_extractors(t, bases, "codex:offline", "keep_all") == [
        ("codex:offline_free_text", "keep_all"),
        ("codex:offline_recent", "keep_all"),
    ]


def _family_comps(table: pd.DataFrame, pairs: list[tuple[str, str]]) -> list[Any]:
    from h9eval.analysis.stats import compare_family

    comps: list[Any] = []
    for a, b in pairs:
        comps += compare_family([C.pairs_for(table, a, b, C.metric_spec("retention"), margin=0)])
    return comps


def test_extractor_robustness_groups_a_strategy_over_its_extractors_for_the_report() -> None:
    """Mutants killed: "robust" when most extractors agree; a strategy that calls no summarizer, or
    one compared under a single extractor, shown as if its verdict could vary with the extractor."""
    from h9eval.analysis.report.open_loop import robustness_table

    mixed = (-0.1, 0.1, -0.1, 0.1, -0.1, 0.05, -0.05, 0.0)
    t = _table(mixed)
    # a strategy with one extractor only, and a policy that calls no summarizer (its label has no suffix)
    one = t[t["config"] == "codex:offline"].assign(config="solo:offline", retention=0.3)
    keep = t[t["config"] == "codex:offline"].assign(config="keep_all", retention=0.9, summarizer_calls=0)
    t = pd.concat([t, one, keep], ignore_index=True)
    pairs = [(f"codex:{sm}", f"h9:{sm}") for sm in SUMMS] + [("solo:offline", "h9:offline"), ("keep_all", "h9:offline")]
    rob = C.extractor_robustness(t, _family_comps(t, pairs))
    assert list(rob.columns) == list(C.EXTRACTOR_ROBUSTNESS_COLUMNS)
    assert set(rob["strategy"]) == {"codex"} and set(rob["baseline"]) == {"h9"}
    verdicts = dict(zip(rob["summarizer"], rob["verdict"]))
    # by hand: 8 of 8 lower, exact sign-flip p = 2/256 -> worse; the mixed extractor is inconclusive
    assert verdicts == {"offline": WORSE, "offline_recent": WORSE, "offline_free_text": INCONCLUSIVE}
    assert not rob["robust"].any()
    table = robustness_table(rob)
    assert table["robust to the stand-in"].tolist() == ["NO"]
    assert table["verdict under offline_free_text"].iloc[0] == "inconclusive (7)"  # 7 of 8 tasks differ
    agree = _table((-0.1,) * 8)
    rob2 = C.extractor_robustness(agree, _family_comps(agree, [(f"codex:{sm}", f"h9:{sm}") for sm in SUMMS]))
    assert rob2["robust"].all() and robustness_table(rob2)["robust to the stand-in"].tolist() == ["yes"]
    assert len(C.extractor_robustness(agree, [])) == 0
