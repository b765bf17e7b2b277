"""report: a small real sweep → report.html (self-contained) + report.md with every section;
harness9 records → records report; the CLI; a headless-Chromium render when available."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from h9eval.cli import main

SECTIONS = (
    "Read this first",
    "Setup and provenance",
    "What produced these numbers",
    "Configurations",
    "Policies compared",
    "Strategy comparison: each configuration vs",
    "Coverage: did the data exercise the policies?",
    "Token curves",
    "Tier transitions",
    "Anchor retention",
    "Drift",
    "Probe validity",
    "Emergency checkpoints",
    "Summarizer calls and cost",
    "Token-estimate error",
    "improvement options vs the faithful default",
    "Recommendation",
)
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or "") if p and Path(p).exists()), None)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from h9eval.sweeps.sweep import sweep

    out = tmp_path_factory.mktemp("sweep")
    spec = {
        "name": "report-test",
        "tasks": {"specs": ["synthetic:small:0", "synthetic:small:1"]},
        "policies": [
            {"kind": "progressive", "params": {"context_window_tokens": 14000}, "grid": {"na_safe_merge": [False, True]}},
            {"kind": "progressive", "name": "tight", "params": {"context_window_tokens": 14000, "warn_frac": 0.4, "soft_frac": 0.5, "full_frac": 0.6}},
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
    assert "summarizer_cost.png" not in names and "Every summarizer in this sweep is offline" in md
    for p in report.figures:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{p.name})" in md
    assert h.count("data:image/png;base64,") == len(report.figures)
    # the option comparison names the option and gives a verdict; the recommendation is data-driven
    assert "na_safe_merge=True" in md
    assert re.search(r"(better|worse|inconclusive|equivalent within)", md) and "does not help" not in md
    assert re.search(r"Use (progressive \[na_safe_merge=(True|False)\]|tight) \(write_back mode", md) and "highest mean retention" in md
    # the coverage table: every configuration compacted on both tasks at this window
    assert "reached_soft" in md and "never_compacted_tasks" in md and "after the policy compacted at least once" in md


def test_summarizer_caveat_comes_first(report) -> None:  # type: ignore[no-untyped-def]
    h = report.html.read_text(encoding="utf-8")
    first = h.index("<section>")
    caveat = h[first : h.index("</section>", first)]
    assert "Read this first" in caveat and "class='caveat'" in caveat
    assert "written by: offline" in caveat and "rank the compaction mechanisms" in caveat and "not a language model" in caveat


def test_tables_and_figures_use_the_spec_names(report) -> None:  # type: ignore[no-untyped-def]
    md = report.markdown.read_text(encoding="utf-8")
    # the grid's two points get the grid value; the named entry keeps its name; no generated label anywhere
    for name in ("progressive [na_safe_merge=False]", "progressive [na_safe_merge=True]", "tight"):
        assert f"| {name} | write_back |" in md, name
    assert "progressive(" not in md
    # the configurations table says what each name changes
    assert re.search(r"\| tight \| progressive \| context_window_tokens=14000, full_frac=0.6, soft_frac=0.5, warn_frac=0.4 \|", md)


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
            "grid_json": ['{"min_tail_messages": 2}', '{"min_tail_messages": 12}', "{}", "{}", "{}", '{"min_tail_messages": 2}'],
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


_MEASURE = """<script>window.onload=function(){var over=[].slice.call(document.querySelectorAll('table,pre,figure,img'))
.filter(function(e){return e.scrollWidth>e.clientWidth+1||e.getBoundingClientRect().right>document.documentElement.clientWidth+1})
.map(function(e){return e.tagName+':'+e.scrollWidth+'/'+e.clientWidth});
var small=[].slice.call(document.images).filter(function(i){return i.naturalWidth>1.4*i.clientWidth}).length;
document.body.setAttribute('data-m',JSON.stringify({w:document.documentElement.scrollWidth,h:document.documentElement.scrollHeight,over:over,small:small,imgs:document.images.length}));}</script>"""


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium to render the report)")
def test_renders_in_headless_chromium(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The page as a reader sees it at 1,100 px: nothing wider than the page, figures not shrunk
    past legibility, and a full-height screenshot of the whole report."""
    from PIL import Image

    # measure in a copy with a script added (the report itself carries none)
    probe = tmp_path / "measure.html"
    probe.write_text(report.html.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    dom = _chromium("--window-size=1100,900", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri(), profile=tmp_path / "p1").stdout
    found = re.search(r'data-m="([^"]*)"', dom)
    assert found, dom[-2000:]
    m = json.loads(html.unescape(found.group(1)))
    assert m["w"] <= 1100, m  # no horizontal scroll at a 1,100 px window
    assert m["over"] == [], m  # no table, code block or figure wider than its box
    assert m["imgs"] == len(report.figures) and m["small"] == 0, m  # no figure scaled below ~70 %
    assert 2000 < m["h"] < 30000, m
    shot = tmp_path / "shot.png"
    _chromium(f"--window-size=1100,{m['h']}", f"--screenshot={shot}", report.html.resolve().as_uri(), profile=tmp_path / "p2")
    with Image.open(shot) as im:
        assert im.size == (1100, m["h"])  # the whole page is in the screenshot
        colours = im.convert("L").resize((64, 256)).getextrema()
    assert colours[0] < 80 and colours[1] > 230  # text and background, not a blank page


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
    assert main(["report", str(sweep_dir), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "report.html").exists()
    # without --out the report goes where the README says: RESULTS_DIR/report.html
    assert main(["report", str(sweep_dir)]) == 0
    assert (sweep_dir / "report.html").exists() and (sweep_dir / "report.md").exists()
    assert f"wrote {sweep_dir / 'report.html'}" in capsys.readouterr().out
    assert main(["report", "--records", str(sweep_dir)]) == 2
    assert "--records needs --out" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_offline_summarizers_are_recognised_for_the_caveat() -> None:
    from h9eval.analysis.report import _is_offline
    from h9eval.summarizers.registry import summarizer_names

    offline = {n for n in summarizer_names() if _is_offline(n)}
    assert {"offline", "offline_free_text"} <= offline
    assert not offline & {"anthropic", "anthropic_free_text"}
