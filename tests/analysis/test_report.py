"""report: a small real sweep → report.html (self-contained) + report.md with every section;
harness9 records → records report; the CLI; a headless-Chromium render when available."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from chromium import CHROMIUM, chromium

from h9eval.cli import main

RESULTS = (
    "Strategy comparison: each configuration vs",
    "Policies compared",
    "Token curves",
    "Tier transitions",
    "Anchor retention",
    "What compaction loses: the loss ledger",
    "Drift",
    "improvement options vs the faithful default",
)
DETAILS = (
    "Configurations",
    "What produced these numbers",
    "Coverage: did the data exercise the policies?",
    "Probe validity",
    "Emergency checkpoints",
    "Token-estimate error",
    "Setup and provenance",
)
SECTIONS = ("The answer", *RESULTS, *DETAILS)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from h9eval.sweeps.sweep import sweep

    out = tmp_path_factory.mktemp("sweep")
    spec = {
        "name": "report-test",
        "tasks": {"specs": ["synthetic:small:0", "synthetic:small:1"]},
        "policies": [
            {
                "kind": "progressive",
                "params": {"context_window_tokens": 14000},
                "grid": {"na_safe_merge": [False, True]},
            },
            {
                "kind": "progressive",
                "name": "tight",
                "params": {"context_window_tokens": 14000, "warn_frac": 0.4, "soft_frac": 0.5, "full_frac": 0.6},
            },
        ],
        "history_modes": ["write_back"],
        "probes": {"scorers": ["recall"], "every_k": 5},
    }
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert r.ok == 6 and r.failed == 0
    return out


@pytest.fixture(scope="module")
def report(sweep_dir: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from h9eval.analysis.report import write_report

    return write_report(sweep_dir, tmp_path_factory.mktemp("report"), n_boot=200)


def test_sections_and_figures(report) -> None:  # type: ignore[no-untyped-def]
    md = report.markdown.read_text(encoding="utf-8")
    h = report.html.read_text(encoding="utf-8")
    for s in SECTIONS:
        assert s in md and s in h, s
    heads = re.findall(r"^## \d+\. (.*)$", md, re.M)
    pos = [next(i for i, t in enumerate(heads) if s in t) for s in SECTIONS]
    assert pos == sorted(pos), heads
    # the answer is open at the top; everything else is collapsible, the details last
    assert h.index("<section class='answer'>") < h.index("<details>")
    assert h.count("<details>") == len(heads) - 1 and "<details open" not in h
    assert h.index("Setup, provenance and checks") > h.index("<summary>Policies compared</summary>")
    names = {p.name for p in report.figures}
    assert {
        "token_curve_0.png",
        "strategy_comparison.png",
        "tier_transitions.png",
        "tier_swimlane.png",
        "anchor_retention_probes.png",
        "retention_by_kind.png",
        "drift.png",
        "token_estimate_error.png",
    } <= names
    # every summarizer is offline: no empty cost panel, one line instead
    assert "summarizer_cost.png" not in names and "Every summarizer in these results is offline" in md
    for p in report.figures:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{p.name})" in md
    assert h.count("data:image/png;base64,") == len(report.figures)
    # the option comparison names the option and gives a verdict
    assert "na_safe_merge=True" in md
    assert re.search(r"(better|worse|inconclusive|equivalent within)", md) and "does not help" not in md
    # the loss ledger's diff pages are written beside the report and linked by configuration name, not run id
    assert re.search(
        r"\[Diff view of tight \(write_back mode, synthetic-small-\d\): [^]]*\]\(ledger/[^)]+\.html\)", md
    ), md[-3000:]
    assert all((report.out_dir / link).is_file() for link in re.findall(r"\]\((ledger/[^)]+\.html)\)", md))
    # the coverage table: every configuration compacted on both tasks at this window
    assert "reached soft" in md and "never compacted on" in md and "after the policy compacted at least once" in md


def test_answer_box_holds_the_best_per_target_with_verdict_and_caveats(report) -> None:  # type: ignore[no-untyped-def]
    md = report.markdown.read_text(encoding="utf-8")
    answer = md[md.index("## 1. The answer") : md.index("## 2.")]
    # one row per target in the sweep's one history mode, against the default the spec names
    assert (
        "| mode | target | best configuration | its mean | default's mean | Δ vs default [adj. CI] | verdict | tasks |"
        in answer
    )
    assert re.search(
        r"\| write_back \| retention \| (tight|progressive \[na_safe_merge=True\]|none above the default) \|", answer
    )
    assert re.search(r"\| write_back \| tokens saved \| (tight|progressive \[na_safe_merge=True\]) \|", answer), answer
    # two tasks: too few for any verdict, starred, and the recommendation follows the verdicts
    assert "inconclusive*" in answer and "too few for a verdict" in answer
    assert "open loop, write_back mode: keep progressive [na_safe_merge=False]" in answer
    assert "Summaries by the offline extractive stand-in (offline)" in answer


def test_recommendation_follows_the_verdicts() -> None:
    from h9eval.analysis.report.answer import AnswerRow, TargetVerdicts, recommendations

    def one(by: dict[str, dict[str, tuple[str, float]]], best_rows: tuple[tuple[str, str, str], ...] = ()) -> str:
        v = TargetVerdicts(
            scope="open loop",
            history_mode="view",
            default="h9",
            by_config=by,
            primary="retention",
            default_means={"retention": 0.80, "tokens_saved": 0.50},
        )
        rows = [
            AnswerRow(
                scope="open loop",
                history_mode="view",
                target=t,
                best=c,
                default="h9",
                value=1.0,
                default_value=0.5,
                diff=0.5,
                lo=0.0,
                hi=0.0,
                verdict=x,
                n_tasks=8,
                higher_is_better=True,
            )
            for t, c, x in best_rows
        ]
        return recommendations([v], rows)[0]

    # better on tokens, retention inconclusive: recommended; the best on a target that is worse elsewhere is
    # not, and says why
    line = one(
        {
            "a": {"retention": ("inconclusive", 0.81), "tokens_saved": ("better", 0.6)},
            "b": {"retention": ("worse", 0.70), "tokens_saved": ("better", 0.9)},
            "c": {"retention": ("inconclusive", 0.85), "tokens_saved": ("inconclusive", 0.5)},
        },
        (("retention", "c", "inconclusive"), ("tokens saved", "b", "better")),
    )
    assert line.startswith(
        "open loop, view mode: use a. It is better than h9 on tokens saved and not worse on the rest "
        "(retention inconclusive)."
    )
    assert "c has the best mean retention, but its difference from h9 is inconclusive" in line
    assert "b is best on tokens saved but worse than h9 on retention" in line
    # better on one target and worse on another: the default stays, the trade named
    line = one({"b": {"retention": ("worse", 0.70), "tokens_saved": ("better", 0.9)}})
    assert line.startswith("open loop, view mode: keep h9.") and "1 trade one target for another: b" in line
    # nothing above the default's mean: no "why not" line
    line = one({"d": {"retention": ("inconclusive", 0.79), "tokens_saved": ("inconclusive", 0.5)}})
    assert "keep h9" in line and "Not recommended" not in line and "2 of 2 comparisons are inconclusive" in line


def test_a_best_that_only_ties_the_default_is_not_named() -> None:
    from h9eval.analysis.report.answer import AnswerRow, _answer_table

    def row(best: str, value: float, verdict: str) -> AnswerRow:
        return AnswerRow(
            scope="closed loop, agent a",
            history_mode="view",
            target="success",
            best=best,
            default="h9",
            value=value,
            default_value=0.0,
            diff=value,
            lo=0.0,
            hi=value,
            verdict=verdict,
            n_tasks=6,
            higher_is_better=True,
        )

    t = _answer_table([row("hybrid", 0.0, "inconclusive"), row("masking", 0.5, "inconclusive")])
    assert list(t["best configuration"]) == ["none above the default", "masking"]


def test_answer_metrics_add_dollars_only_when_the_results_carry_them() -> None:
    import pandas as pd

    from h9eval.analysis.report.answer import answer_metrics

    t = pd.DataFrame({"retention": [0.5, 0.7], "tokens_saved": [0.1, 0.2], "summarizer_cost_usd": [0.0, 0.0]})
    assert answer_metrics(t) == ["retention", "tokens_saved"]
    assert answer_metrics(t.assign(summarizer_cost_usd=[0.01, 0.02])) == [
        "retention",
        "tokens_saved",
        "summarizer_cost_usd",
    ]
    assert answer_metrics(t.assign(retention=float("nan"))) == ["tokens_saved"]  # no probes: no retention target


def test_sections_and_answer_lines_plug_in_with_one_call(sweep_dir: Path) -> None:
    from h9eval.analysis import report as report_pkg
    from h9eval.analysis.report import answer
    from h9eval.analysis.report.context import build_context
    from h9eval.analysis.report.model import Section
    from h9eval.core.errors import ConfigError
    from h9eval.results.store import load_results

    def extra(ctx):  # type: ignore[no-untyped-def]
        s = Section("Plugged-in section")
        s.text(f"{len(ctx.rm)} runs seen.")
        return [s]

    def caveat(ctx):  # type: ignore[no-untyped-def]
        return ["A plugged-in caveat."]

    before = (list(report_pkg.SECTIONS), list(answer.CAVEATS))
    try:
        report_pkg.add_section(extra, part="details", loop="open", before=report_pkg.trust.setup_sections)
        answer.add_caveat(caveat)
        with pytest.raises(ConfigError, match="part must be one of results, details"):
            report_pkg.add_section(extra, part="answer")
        with pytest.raises(ConfigError, match="loop must be one of open, closed, any"):
            report_pkg.add_section(extra, loop="both")
        with pytest.raises(ConfigError, match="is not a registered section"):
            report_pkg.add_section(extra, before=caveat)
        secs = report_pkg.report_sections(build_context(load_results(sweep_dir), n_boot=50))
        titles = [s.title for s in secs]
        assert (
            titles[0] == "The answer"
            and (
                "caveats",
                [
                    "Summaries by the offline extractive stand-in (offline), not a model: "
                    "these rank compaction mechanisms, not a model's summaries.",
                    "A plugged-in caveat.",
                ],
            )
            in secs[0].blocks
        )
        assert titles.index("Plugged-in section") == titles.index("Setup and provenance") - 1
        assert (
            secs[titles.index("Plugged-in section")].part == "details"
            and ("text", "6 runs seen.") in secs[titles.index("Plugged-in section")].blocks
        )
    finally:
        report_pkg.SECTIONS[:] = before[0]
        answer.CAVEATS[:] = before[1]


def test_short_lists_say_how_many() -> None:
    from h9eval.analysis.report import short_list

    assert short_list([f"t{i}" for i in range(12)], "tasks") == "12 tasks: t0, t1, t2, …"
    assert short_list(["a", "b", "c", "d"], "tasks") == "4 tasks: a, b, c, d"
    assert short_list([f"t{i}" for i in range(6)]) == "t0, t1, t2, … (6 in all)"
    assert short_list([]) == ""


def test_tables_go_through_the_styler_and_long_cells_are_cut() -> None:
    import pandas as pd

    from h9eval.analysis.report.render import MAX_CELL_CHARS, html_table, markdown_table

    df = pd.DataFrame({"label_name": ["x " * 200, "y"], "n": [1.5, float("nan")]})
    h = html_table(df, "cap", uid="t9")
    assert 'id="T_t9"' in h and "<caption>cap</caption>" in h and "label_\u200bname" in h
    assert "chars)" in h and "x " * 100 not in h and "–" in h
    assert 'class="data row0 col0 t"' in h.replace("  ", " ") or "col0 t" in h
    md = markdown_table(df)
    assert md.splitlines()[0] == "| label_name | n |" and "1.500" in md
    assert all(len(c) < MAX_CELL_CHARS + 20 for line in md.splitlines() for c in line.split("|"))


def test_tables_and_figures_use_the_spec_names(report) -> None:  # type: ignore[no-untyped-def]
    md = report.markdown.read_text(encoding="utf-8")
    # the grid's two points get the grid value; the named entry keeps its name; no generated label anywhere
    for name in ("progressive [na_safe_merge=False]", "progressive [na_safe_merge=True]", "tight"):
        assert f"| {name} | write_back |" in md, name
    assert "progressive(" not in md
    # the configurations table says what each name changes
    assert re.search(
        r"\| tight \| progressive \| context_window_tokens=14000, full_frac=0.6, soft_frac=0.5, warn_frac=0.4 \|", md
    )


def test_config_names_are_unique_and_minimal() -> None:
    import pandas as pd

    from h9eval.analysis.report import config_names

    runs = pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(6)],
            "status": ["ok"] * 6,
            "policy_name": ["tail", "tail", "h9", "h9", "keep_all", "tail"],
            "policy_kind": ["progressive", "progressive", "progressive", "progressive", "keep_all", "progressive"],
            "params_hash": ["a", "b", "c", "c", "d", "a"],
            "grid_json": [
                '{"min_tail_messages": 2}',
                '{"min_tail_messages": 12}',
                "{}",
                "{}",
                "{}",
                '{"min_tail_messages": 2}',
            ],
            "params_json": ["{}"] * 6,
            "summarizer": ["offline", "offline", "offline", "offline_free_text", "offline", "offline"],
            "history_mode": ["view", "view", "view", "view", "view", "write_back"],
        }
    )
    names = config_names(runs)
    assert names == {
        "r0": "tail [min_tail_messages=2]",
        "r1": "tail [min_tail_messages=12]",
        "r2": "h9:offline",
        "r3": "h9:offline_free_text",
        "r4": "keep_all",
        "r5": "tail [min_tail_messages=2]",  # the same configuration in another mode keeps its name
    }


def test_html_is_self_contained(report) -> None:  # type: ignore[no-untyped-def]
    h = report.html.read_text(encoding="utf-8")
    assert "<script" not in h.lower()
    assert "http://" not in h and "https://" not in h
    assert "<link" not in h.lower()
    assert not re.search(r"src=['\"](?!data:)", h)


# Measured in a copy of the page with every <details> open and this script added (the report
# itself carries none): overflowing boxes, shrunk figures, and per table cell a column narrower
# than its header's longest word or a row taller than a screen.
_MEASURE = """<script>window.onload=function(){
var cv=document.createElement('canvas').getContext('2d');
function words(el){var cs=getComputedStyle(el);cv.font=cs.fontWeight+' '+cs.fontSize+' '+cs.fontFamily;
 return Math.max.apply(null,el.textContent.split(/[\\s\\u200b]+/).map(function(w){return cv.measureText(w).width;}));}
var over=[].slice.call(document.querySelectorAll('table,pre,figure,img'))
.filter(function(e){return e.scrollWidth>e.clientWidth+1
  ||e.getBoundingClientRect().right>document.documentElement.clientWidth+1})
.map(function(e){return e.tagName+':'+e.scrollWidth+'/'+e.clientWidth});
var narrow=[],tall=[],cells=0;
[].slice.call(document.querySelectorAll('table')).forEach(function(t,ti){
 [].slice.call(t.querySelectorAll('th,td')).forEach(function(c){cells++;
  var cs=getComputedStyle(c),
      inner=c.getBoundingClientRect().width-parseFloat(cs.paddingLeft)-parseFloat(cs.paddingRight);
  if(c.scrollWidth>c.clientWidth+1||(c.tagName=='TH'&&inner+1<words(c)))
   narrow.push(ti+':'+c.textContent.slice(0,40));});
 [].slice.call(t.rows).forEach(function(r){
  if(r.getBoundingClientRect().height>900)tall.push(ti+':'+r.textContent.slice(0,40));});});
var small=[].slice.call(document.images).filter(function(i){return i.naturalWidth>1.4*i.clientWidth}).length;
var doc=document.documentElement;
document.body.setAttribute('data-m',JSON.stringify({w:doc.scrollWidth,h:doc.scrollHeight,over:over,small:small,
imgs:document.images.length,narrow:narrow,tall:tall,cells:cells,tables:document.querySelectorAll('table').length}));}
</script>"""


def _measure(page: str, tmp_path: Path, name: str) -> dict:  # type: ignore[type-arg]
    probe = tmp_path / f"{name}.html"
    probe.write_text(
        page.replace("<details>", "<details open>").replace("</body>", _MEASURE + "</body>"), encoding="utf-8"
    )
    dom = chromium(
        "--window-size=1100,900",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probe.as_uri(),
        profile=tmp_path / f"p-{name}",
    ).stdout
    found = re.search(r'data-m="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def closed_loop_report(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from h9eval.analysis.report import write_report
    from h9eval.sweeps.sweep import sweep

    out = tmp_path_factory.mktemp("cl")
    spec = {
        "name": "cl-report-test",
        "tasks": {"worlds": [{"kind": "fact_chain", "seeds": [0, 1, 2], "params": {"padding_bytes": 600}}]},
        "policies": [
            {"kind": "progressive", "name": "harness9-default", "params": {"context_window_tokens": 1500}},
            {"kind": "observation_masking", "params": {"keep_recent_turns": 2}},
            {"kind": "keep_all"},
            {"kind": "drop_all"},
        ],
        "probes": {"scorers": ["recall"]},
    }
    assert sweep(spec, out_dir=out, workers=0, progress=False).failed == 0
    return write_report(out, tmp_path_factory.mktemp("clrep"), n_boot=100)


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium to render the report)"
)
def test_every_table_reads_in_headlesschromium(  # type: ignore[no-untyped-def]
    report, closed_loop_report, tmp_path: Path
) -> None:
    """Both reports as a reader sees them at 1,100 px with every section open: nothing wider than
    the page, figures not shrunk past legibility, no column narrower than its header's longest
    word, no cell overflowing, no table row taller than a screen; and a full-height screenshot."""
    from PIL import Image

    for name, rep in (("open", report), ("closed", closed_loop_report)):
        m = _measure(rep.html.read_text(encoding="utf-8"), tmp_path, name)
        assert m["tables"] >= 4 and m["cells"] > 50, m
        assert m["narrow"] == [] and m["tall"] == [], m
        assert m["w"] <= 1100, m  # no horizontal scroll at a 1,100 px window
        assert m["over"] == [], m  # no table, code block or figure wider than its box
        assert m["imgs"] == len(rep.figures) and m["small"] == 0, m  # no figure scaled below ~70 %
    shot = tmp_path / "shot.png"
    chromium("--window-size=1100,1600", f"--screenshot={shot}", report.html.resolve().as_uri(), profile=tmp_path / "p2")
    with Image.open(shot) as im:
        colours = im.convert("L").getextrema()
    assert colours[0] < 80 and colours[1] > 230  # text and background, not a blank page


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium to render the report)"
)
def test_a_wide_table_wraps_at_spaces_not_inside_words(tmp_path: Path) -> None:
    """A table as wide as the old coverage table (snake_case headers, a long list of task ids)
    fits the page by wrapping text at spaces, never squeezing a column below its header."""
    import pandas as pd

    from h9eval.analysis.report.model import Section
    from h9eval.analysis.report.render import render

    cols = [
        "label",
        "history_mode",
        "summarizer",
        "n_tasks",
        "reached_warn",
        "reached_soft",
        "reached_full",
        "reached_emergency",
        "n_compactions",
    ]
    df = pd.DataFrame(
        [["harness9-legacy-emergency", "write_back", "offline_free_text", 10, 9, 8, 7, 6, 1234]] * 3, columns=cols
    )
    df["never compacted on"] = " ".join(f"swe_agent:pydicom__pydicom-{i}" for i in range(30))
    s = Section("Wide")
    s.table(df, "A wide table.")
    rep = render("wide", [s], tmp_path / "wide")
    m = _measure(rep.html.read_text(encoding="utf-8"), tmp_path, "wide")
    assert m["narrow"] == [] and m["over"] == [] and m["tall"] == [] and m["w"] <= 1100, m


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium to render the report)"
)
def test_the_table_check_catches_a_squeezed_column(tmp_path: Path) -> None:
    """The check above can fail: a column forced narrower than its header (letters wrapping one
    by one, as the hand-built tables did) and a row taller than a screen are both reported."""
    squeezed = (
        "<!DOCTYPE html><html><body style='width:400px'><table style='table-layout:fixed;width:300px'>"
        "<tr><th style='width:20px'>history_mode</th><th>n</th></tr>"
        "<tr><td style='overflow-wrap:anywhere'>" + "x" * 900 + "</td><td>1</td></tr></table></body></html>"
    )
    m = _measure(squeezed, tmp_path, "bad")
    assert m["narrow"] and m["tall"], m


def test_records_report_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from h9eval.compaction.policies import make_policy
    from h9eval.runs.replay import replay
    from h9eval.tasks.synthetic import generate

    run = tmp_path / "run"
    replay(generate("small", seed=2), make_policy("progressive", context_window_tokens=12000), out_dir=run)
    recs = run / "compaction_records"
    assert any(recs.glob("*.jsonl"))
    out = tmp_path / "rec_report"
    assert main(["report", "--records", str(recs), "--out", str(out)]) == 0
    md = (out / "report.md").read_text(encoding="utf-8")
    for s in ("Records", "Token curve", "Tier transitions", "Anchor retention"):
        assert s in md
    assert (out / "figures" / "records_token_curve.png").exists()
    assert (out / "figures" / "anchor_retention_records.png").exists()
    h = (out / "report.html").read_text(encoding="utf-8")
    assert "https://" not in h and "<script" not in h
    assert "wrote" in capsys.readouterr().out


def test_cli_sweep_report_and_errors(sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(sweep_dir), "--out", str(tmp_path / "r"), "--n-boot", "200"]) == 0
    assert (tmp_path / "r" / "report.html").exists()
    # without --out the report goes where the README says: RESULTS_DIR/report.html
    assert main(["report", str(sweep_dir), "--n-boot", "200"]) == 0
    assert (sweep_dir / "report.html").exists() and (sweep_dir / "report.md").exists()
    # reproducible: the same results and seed give a byte-identical page
    assert (sweep_dir / "report.html").read_bytes() == (tmp_path / "r" / "report.html").read_bytes()
    assert f"wrote {sweep_dir / 'report.html'}" in capsys.readouterr().out
    assert main(["report", "--records", str(sweep_dir)]) == 2
    assert "--records needs --out" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(sweep_dir), "--n-boot", "10"]) == 2
    assert "--n-boot must be at least 100" in capsys.readouterr().err


def test_report_on_one_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    argv = [
        "run",
        "--task",
        "synthetic:small:0",
        "--policy",
        "progressive",
        "--window",
        "12000",
        "--probes",
        "recall",
        "--out",
        str(run),
    ]
    assert main(argv) == 0
    assert main(["report", str(run), "--n-boot", "200"]) == 0
    assert f"wrote {run / 'report.html'}" in capsys.readouterr().out
    md = (run / "report.md").read_text(encoding="utf-8")
    answer = md[md.index("## 1. The answer") : md.index("## 2.")]
    assert "| configuration | progressive |" in answer and "| task | synthetic-small-0 |" in answer
    assert re.search(r"\| tokens saved \| 0\.\d{3} \|", answer) and re.search(r"\| retention \| [01]\.\d{3} \|", answer)
    assert "no interval and no verdict" in answer
    for title in ("Token curves", "Tier transitions", "Setup and provenance"):
        assert title in md, title
    assert "Strategy comparison" not in md and "Policies compared" not in md
    assert "One run in" in md and "Sweep " not in md
    # one closed-loop episode's folder: did the agent finish, at what cost
    ep = tmp_path / "ep"
    argv = [
        "run",
        "--world",
        "fact_chain:1",
        "--policy",
        "progressive",
        "--set",
        "context_window_tokens=1500",
        "--world-set",
        "padding_bytes=600",
    ]
    assert main([*argv, "--out", str(ep)]) == 0
    assert main(["report", str(ep)]) == 0
    md = (ep / "report.md").read_text(encoding="utf-8")
    answer = md[md.index("## 1. The answer") : md.index("## 2.")]
    assert "| success | yes |" in answer and "| world | fact_chain seed 1 |" in answer and "scripted stand-in" in answer
    assert "Token curves" in md and "ran no probes" not in md and "One episode in" in md
    # a folder that is neither a run nor a sweep: one line, exit 2
    (tmp_path / "other").mkdir()
    assert main(["report", str(tmp_path / "other")]) == 2


def test_offline_summarizers_are_recognised_for_the_caveat() -> None:
    # one owner: the report's trust sections read compare.is_offline, they keep no copy of it
    from h9eval.analysis.compare import is_offline
    from h9eval.analysis.report import trust
    from h9eval.summarizers.registry import summarizer_names

    offline = {n for n in summarizer_names() if is_offline(n)}
    assert {"offline", "offline_free_text"} <= offline
    assert not offline & {"anthropic", "anthropic_free_text"}
    assert not hasattr(trust, "is_offline")


def test_the_recommendation_names_what_it_left_out_and_why() -> None:
    """Mutant killed: the excluded configurations computed for the choice but not shown with it."""
    from h9eval.analysis.report.answer import TargetVerdicts, excluded_reasons, recommendations

    why = excluded_reasons(["keep_all", "drop_all"], {"window": 3, "keep_all": 40}, {"keep_all", "window", "h9"})
    # drop_all did not run in this mode; keep_all is a control before it is an overflow
    assert why == {"keep_all": "a control", "window": "3 call(s) over the window"}
    v = TargetVerdicts(
        scope="open loop",
        history_mode="view",
        default="h9",
        primary="retention",
        by_config={"a": {"retention": ("inconclusive", 0.7)}},
        default_means={"retention": 0.8},
        excluded=why,
    )
    (line,) = recommendations([v])
    assert line.endswith("Left out of the choice: keep_all (a control); window (3 call(s) over the window).")
