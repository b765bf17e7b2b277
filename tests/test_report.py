"""report: a small real sweep → report.html (self-contained) + report.md with every section;
harness9 records → records report; the CLI; a headless-Chromium render when available."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from h9eval.cli import main

SECTIONS = (
    "Setup and provenance",
    "What produced these numbers",
    "Policies compared",
    "Strategy comparison: each configuration vs",
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
    assert {"token_curve_0.png", "token_curve_1.png", "strategy_comparison.png", "tier_transitions.png", "tier_swimlane.png", "anchor_retention_probes.png", "drift.png", "summarizer_cost.png", "token_estimate_error.png"} <= names
    for p in report.figures:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{p.name})" in md
    assert h.count("data:image/png;base64,") == len(report.figures)
    # the option comparison names the option and gives a verdict; the recommendation is data-driven
    assert "na_safe_merge=True" in md
    assert re.search(r"(better|worse|inconclusive|equivalent within)", md) and "does not help" not in md
    assert "Use progressive" in md and "highest mean retention" in md


def test_html_is_self_contained(report) -> None:  # type: ignore[no-untyped-def]
    h = report.html.read_text(encoding="utf-8")
    assert "<script" not in h.lower()
    assert "http://" not in h and "https://" not in h
    assert "<link" not in h.lower()
    assert not re.search(r"src=['\"](?!data:)", h)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium to render the report)")
def test_renders_in_headless_chromium(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shot = tmp_path / "shot.png"
    cmd = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--window-size=1200,2400", f"--screenshot={shot}", report.html.resolve().as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    assert shot.exists() and shot.stat().st_size > 10_000


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
    assert main(["report", "--records", str(sweep_dir)]) == 2
    assert "--records needs --out" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
