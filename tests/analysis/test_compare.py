"""``compare``, ``compare_factor``, the option verdicts and ``h9eval compare`` on a real tiny sweep:
6 synthetic tasks x (faithful progressive, the anti-thrash variant) x (anchored, free-text
summaries), in a window small enough that every run compacts. Numbers are checked against the
runs table the sweep wrote (an independent per-run source), labels tell summarizer variants
apart, and bad input is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from h9eval.analysis import compare as C
from h9eval.analysis import options as O
from h9eval.analysis import stats as S
from h9eval.analysis.metrics import IMPROVEMENT_OPTIONS
from h9eval.cli import main
from h9eval.core.errors import ConfigError, FormatError
from h9eval.results.store import load_results
from h9eval.sweeps.sweep import sweep

WINDOW = 6000
N_TASKS = 6


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec: dict[str, Any] = {
        "name": "t-compare",
        "window": WINDOW,
        "tasks": {"synthetic": [{"preset": "small", "seeds": list(range(N_TASKS))}]},
        "policies": [
            {"kind": "progressive", "name": "base", "params": {"context_window_tokens": WINDOW}},
            {
                "kind": "progressive",
                "name": "thrash",
                "params": {"context_window_tokens": WINDOW, "anti_thrash_frac": 0.1},
            },
        ],
        "summarizer": {"variants": ["offline", "offline_free_text"]},
        "history_modes": ["view"],
        "probes": {"scorers": ["recall"], "every_k": 10},
    }
    out = tmp_path_factory.mktemp("cmp") / "t-compare"
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert (r.n_cells, r.ok) == (N_TASKS * 4, N_TASKS * 4)
    return out


@pytest.fixture(scope="module")
def res(results_dir: Path) -> Any:
    return load_results(results_dir)


def test_every_run_compacted(res: Any) -> None:
    assert (res.runs["n_compactions"] > 0).all()


def test_labels_carry_the_spec_name_and_the_summarizer(res: Any) -> None:
    labels = set(C.config_labels(res.runs))
    assert labels == {"base:offline", "base:offline_free_text", "thrash:offline", "thrash:offline_free_text"}
    one = res.runs[res.runs["summarizer"] == "offline"]
    assert set(C.config_labels(one)) == {"base", "thrash"}  # one summarizer: no suffix


def test_unnamed_entries_of_one_kind_get_their_parameters_in_the_label(res: Any) -> None:
    r = res.runs[res.runs["summarizer"] == "offline"].copy()
    r["policy_name"] = "progressive"
    assert set(C.config_labels(r)) == {
        "progressive [context_window_tokens=6000]",
        "progressive [anti_thrash_frac=0.1, context_window_tokens=6000]",
    }


def _per_task(res: Any, policy: str, summ: str, col: str) -> dict[str, float]:
    r = res.runs[(res.runs["policy_name"] == policy) & (res.runs["summarizer"] == summ)]
    return {str(t): float(v) for t, v in zip(r["task_id"], r[col])}


def test_compare_matches_the_runs_table_and_an_independent_computation(res: Any) -> None:
    c = C.compare(res, "thrash:offline", "base:offline", metric="summarizer_calls", seed=4)
    (pc,) = c.comparisons
    a, b = (
        _per_task(res, "thrash", "offline", "summarizer_calls"),
        _per_task(res, "base", "offline", "summarizer_calls"),
    )
    tasks = sorted(a)
    d = np.array([a[t] - b[t] for t in tasks])
    assert pc.task_ids == tuple(tasks) and pc.n_tasks == N_TASKS
    assert pc.n_differ == int(np.count_nonzero(d)) and pc.n_differ > 0
    assert pc.mean_diff == pytest.approx(d.mean())
    # few tasks differ: the exact sign-flip test decides, and the interval printed is its inversion
    from signflip_ref import inverted_interval

    assert pc.p_method == "sign-flip" and (pc.lo, pc.hi) == pytest.approx(inverted_interval(d, 0.95), abs=1e-6)
    # the bootstrap interval, used when more tasks differ, is checked in test_stats
    assert pc.higher_is_better is False and pc.family_size == 1 and pc.adjusted_level == 0.95
    # the anti-thrash guard exists to cut summarizer calls; it does on every task here
    assert (d < 0).all() and pc.verdict == "better"
    assert c.history_modes == ("view",)


def test_several_metrics_are_one_adjusted_family(res: Any) -> None:
    c = C.compare(res, "thrash:offline", "base:offline", metric=["retention", "summarizer_calls", "emergencies"])
    assert [x.metric for x in c.comparisons] == ["retention", "summarizer_calls", "emergencies"]
    assert all(x.family_size == 3 and x.method == "holm" for x in c.comparisons)
    assert max(x.adjusted_level for x in c.comparisons) == pytest.approx(1 - 0.05 / 3)
    assert "holm" in str(c) and "n_differ=" in str(c)
    ret = c.comparisons[0]
    assert ret.equivalence_margin == C.DEFAULT_RETENTION_MARGIN == 0.005


def test_anchors_and_free_text_are_two_configurations(res: Any) -> None:
    c = C.compare(res, "base:offline_free_text", "base:offline", metric=["retention", "anchor_retention"], margin=0.01)
    assert all(x.n_tasks == N_TASKS for x in c.comparisons)
    assert all(x.equivalence_margin == 0.01 for x in c.comparisons)
    f = C.compare_factor(res, "summarizer", metric="retention")
    pairs = {(x.a, x.b) for x in f.comparisons}
    assert pairs == {("base:offline_free_text", "base:offline"), ("thrash:offline_free_text", "thrash:offline")}
    assert all(x.family_size == 2 for x in f.comparisons)


def test_compare_factor_on_a_parameter_finds_the_default_as_baseline(res: Any) -> None:
    f = C.compare_factor(res, "anti_thrash_frac", metric="summarizer_calls")
    assert {(x.a, x.b) for x in f.comparisons} == {
        ("thrash:offline", "base:offline"),
        ("thrash:offline_free_text", "base:offline_free_text"),
    }
    with pytest.raises(ConfigError, match="unknown factor 'warn_fracc'; did you mean 'warn_frac'"):
        C.compare_factor(res, "warn_fracc")
    with pytest.raises(ConfigError, match="differ in 'warn_frac' only"):
        C.compare_factor(res, "warn_frac")


def test_bad_names_are_config_errors(res: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown configuration 'bse:offline'; did you mean 'base:offline'"):
        C.compare(res, "bse:offline", "base:offline")
    with pytest.raises(ConfigError, match="unknown metric 'retension'; did you mean 'retention'"):
        C.compare(res, "thrash:offline", "base:offline", metric="retension")
    with pytest.raises(ConfigError, match="unknown history mode"):
        C.compare(res, "thrash:offline", "base:offline", history_mode="write_back")
    with pytest.raises(ConfigError, match="same configuration"):
        C.compare(res, "base:offline", "base:offline")
    with pytest.raises(FormatError, match="not an h9eval sweep results folder"):
        C.compare(tmp_path, "a", "b")


def test_option_verdicts_judge_anti_thrash_on_its_targets(res: Any) -> None:
    assert {t.option for t in O.OPTION_TARGETS} == set(IMPROVEMENT_OPTIONS)
    for t in O.OPTION_TARGETS:
        for m in t.targets:
            C.metric_spec(m)
    vs = O.judge_options(res)
    assert {(v.variant, v.baseline) for v in vs} == {
        ("thrash:offline", "base:offline"),
        ("thrash:offline_free_text", "base:offline_free_text"),
    }
    v = next(v for v in vs if v.variant == "thrash:offline")
    assert v.options == ("anti_thrash_frac",) and [c.metric for c in v.targets] == ["summarizer_calls", "emergencies"]
    assert [c.metric for c in v.guard] == ["retention"]
    assert all(c.family_size == 6 for c in (*v.targets, *v.guard))  # 2 variants x 3 metrics
    assert v.overall == O.overall_verdict(v.targets, v.guard)
    assert "summarizer_calls" in "\n".join(v.lines())


def _pc(metric: str, verdict: str) -> S.PairedComparison:
    return S.PairedComparison(
        a="A",
        b="B",
        metric=metric,
        n_tasks=10,
        n_differ=10,
        mean_a=0.0,
        mean_b=0.0,
        mean_diff=0.0,
        lo=0.0,
        hi=0.0,
        level=0.95,
        adjusted_level=0.95,
        p_value=0.5,
        p_adjusted=0.5,
        method="holm",
        family_size=1,
        verdict=verdict,
        equivalence_margin=None,
        higher_is_better=True,
        n_resamples=10,
        seed=0,
    )


def test_overall_option_verdict_rule() -> None:
    ov = O.overall_verdict
    assert ov([_pc("summarizer_calls", "better")], [_pc("retention", "inconclusive")]) == "better"
    assert ov([_pc("summarizer_calls", "better")], [_pc("retention", "worse")]) == "worse"
    assert ov([_pc("summarizer_calls", "inconclusive")], [_pc("retention", "better")]) == "inconclusive"
    assert ov([_pc("x", "equivalent within ±0.005")], [_pc("retention", "equivalent within ±0.005")]) == "inconclusive"


# -- the command ----------------------------------------------------------------------------------
def test_cli_prints_one_line_per_metric(results_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "compare",
            str(results_dir),
            "thrash:offline",
            "base:offline",
            "--metric",
            "summarizer_calls",
            "--metric",
            "retention",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    lines = [ln for ln in out.splitlines() if ln.strip().startswith(("summarizer_calls:", "retention:"))]
    assert len(lines) == 2 and all(
        "n_tasks=6" in ln and "n_differ=" in ln and "CI=[" in ln and "->" in ln for ln in lines
    )


def test_cli_json_and_list(results_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "compare",
                str(results_dir),
                "thrash:offline",
                "base:offline",
                "--metric",
                "all",
                "--margin",
                "retention=0.02",
                "--json",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    by = {c["metric"]: c for c in d["comparisons"]}
    assert set(by) == {m.name for m in C.METRICS} and d["method"] == "holm"
    assert by["retention"]["equivalence_margin"] == 0.02 and by["tokens_saved"]["equivalence_margin"] == 0.005
    # the family holds only the metrics in which some task differs (the others cannot reject anything)
    fam = [c for c in d["comparisons"] if c["in_family"]]
    assert all(c["family_size"] == len(fam) for c in d["comparisons"]) and 0 < len(fam) < len(C.METRICS)
    assert all(c["n_differ"] == 0 for c in d["comparisons"] if not c["in_family"])
    assert main(["compare", str(results_dir), "--list"]) == 0
    assert capsys.readouterr().out.split() == [
        "base:offline",
        "base:offline_free_text",
        "thrash:offline",
        "thrash:offline_free_text",
    ]


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["nope:offline", "base:offline"], "unknown configuration 'nope:offline'"),
        (["thrash:offline", "base:offline", "--metric", "tokens"], "unknown metric 'tokens'"),
        (["thrash:offline", "base:offline", "--margin", "x"], "--margin 'x': expected a number"),
        (["thrash:offline", "base:offline", "--level", "95"], "level must be in (0, 1)"),
        (["thrash:offline"], "give two configurations"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    results_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], expect: str
) -> None:
    assert main(["compare", str(results_dir), *args]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1 and expect in cap.err


def test_cli_refuses_a_folder_that_is_not_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(tmp_path), "a", "b"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "not an h9eval sweep results folder" in err and len(err.strip().splitlines()) == 1


def _with_a_second_mode(res: Any) -> Any:
    """The sweep's results plus a copy of every run in write_back mode, where the anti-thrash
    variant made one more summarizer call per run than it did in view mode."""
    import dataclasses

    import pandas as pd

    def twin(df: Any) -> Any:
        d = df.copy()
        d["run_id"] = d["run_id"] + "-wb"
        if "history_mode" in d.columns:
            d["history_mode"] = "write_back"
        return d

    calls = twin(res.calls)
    extra = (
        calls["run_id"].str.startswith("synthetic")
        & calls["run_id"].str.contains("--thrash-")
        & (calls["call_index"] == 0)
    )
    calls.loc[extra, "summarizer_calls"] += 1
    return dataclasses.replace(
        res,
        runs=pd.concat([res.runs, twin(res.runs)], ignore_index=True),
        calls=pd.concat([res.calls, calls], ignore_index=True),
        probes=pd.concat([res.probes, twin(res.probes)], ignore_index=True),
    )


def test_history_modes_nest_inside_the_task(res: Any) -> None:
    two = _with_a_second_mode(res)
    view = C.compare(res, "thrash:offline", "base:offline", metric="summarizer_calls").comparisons[0]
    both = C.compare(two, "thrash:offline", "base:offline", metric="summarizer_calls")
    (pc,) = both.comparisons
    assert both.history_modes == ("view", "write_back")
    assert pc.n_tasks == N_TASKS  # not 2 x 6 independent pairs
    assert pc.mean_diff == pytest.approx(view.mean_diff + 0.5)  # the mean of the two modes' differences
    only_wb = C.compare(
        two, "thrash:offline", "base:offline", metric="summarizer_calls", history_mode="write_back"
    ).comparisons[0]
    assert only_wb.mean_diff == pytest.approx(view.mean_diff + 1)
    f = C.compare_factor(two, "history_mode", metric="summarizer_calls")
    by = {(x.a, x.b): x for x in f.comparisons}
    assert set(by) >= {
        ("thrash:offline@write_back", "thrash:offline@view"),
        ("base:offline@write_back", "base:offline@view"),
    }
    assert by[("thrash:offline@write_back", "thrash:offline@view")].mean_diff == pytest.approx(1.0)
    assert by[("base:offline@write_back", "base:offline@view")].n_differ == 0


def test_a_configuration_that_never_compacted_on_a_task_is_flagged() -> None:
    import pandas as pd

    from h9eval.analysis.compare import _notes

    t = pd.DataFrame(
        {"config": ["a", "a", "b", "b"], "task_id": ["t1", "t2", "t1", "t2"], "n_compactions": [0, 3, 2, 1]}
    )
    assert _notes(t, "a", "b") == [
        "a never compacted on 1 task(s) (its scores there are the uncompacted transcript's): t1"
    ]
    assert _notes(t.assign(n_compactions=[1, 3, 2, 1]), "a", "b") == []
