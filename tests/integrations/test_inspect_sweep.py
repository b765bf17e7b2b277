"""Inspect's CompactionSummary as the peer ``inspect_summary`` (its threshold, its summary taken from
h9eval's summarizer, in a sweep beside harness9's progressive), and a sweep exported as Inspect eval
logs (one per configuration; Inspect's own reader opens them; scores equal the sweep's tables)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from h9eval.sweeps.cells import Cell

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log  # noqa: E402

from h9eval.analysis.metrics import run_metrics  # noqa: E402
from h9eval.cli import main  # noqa: E402
from h9eval.compaction.base import POLICIES, CompactionEnv  # noqa: E402
from h9eval.compaction.policies import make_policy  # noqa: E402
from h9eval.compaction.records import Tier  # noqa: E402
from h9eval.compaction.summary import SummaryReply, SummaryRequest  # noqa: E402
from h9eval.core.errors import ConfigError, FormatError  # noqa: E402
from h9eval.core.tokens import estimate_tokens  # noqa: E402
from h9eval.core.paths import EXPORT_MARKER  # noqa: E402
from h9eval.integrations.inspect import (  # noqa: E402
    INSPECT_POLICIES,
    from_inspect,
    register_inspect_policies,
    sweep_to_eval_logs,
)
from h9eval.results.store import load_results  # noqa: E402
from h9eval.runs.run import run_task  # noqa: E402
from h9eval.sweeps.sweep import sweep  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

WINDOW = 9000
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def registered() -> Iterator[tuple[str, ...]]:
    """The Inspect peers registered for this module, removed after it (other tests walk every
    registered policy)."""
    kinds = register_inspect_policies()
    yield kinds
    for cls in INSPECT_POLICIES:
        if cls.kind in POLICIES:
            POLICIES.remove(cls.kind)


class _Marked:
    """An h9eval summarizer whose summaries say who wrote them, keeping the requests it got."""

    summarizer_id = "marked/v1"

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[SummaryRequest] = []
        self.fail = fail

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        self.requests.append(request)
        if self.fail:
            raise RuntimeError("summarizer down")
        return SummaryReply(
            text=f"MARKED SUMMARY #{len(self.requests)} of {len(request.head)} messages",
            input_tokens=10,
            output_tokens=5,
        )


@pytest.mark.parametrize("frac", [0.5, 0.8])
def test_inspect_summary_compacts_at_its_threshold(registered: Any, frac: float) -> None:
    window = 12_000  # a call of this task lands between the two thresholds (and below Inspect's 0.9)
    [r] = run_task(
        "synthetic:small:0",
        "inspect_summary",
        params={"context_window_tokens": window, "threshold_frac": frac},
        history_mode="write_back",
    )
    calls, comps = r.calls, r.compactions
    assert calls["compacted"].sum() > 0 and set(comps["tier_name"]) == {"full"}
    # write-back (Inspect's own behaviour): a call compacts exactly when its history reaches the threshold
    assert list(calls["compacted"]) == list(calls["history_tokens"] >= frac * window)
    # what Inspect's summary keeps: the system message, the task statement and the summary
    assert (comps["msgs_after"] == 3).all() and (comps["summarized"] == comps["msgs_before"] - 2).all()


def test_the_summary_is_the_h9eval_summarizers(registered: Any) -> None:
    summ = _Marked()
    [r] = run_task(
        "synthetic:small:0",
        make_policy("inspect_summary", context_window_tokens=WINDOW),
        summarizer=summ,
        history_mode="write_back",
    )
    done = r.compactions[r.compactions["tier_name"] == "full"]
    assert len(done) == len(summ.requests) > 0
    assert list(done["summary_text"]) == [
        f"MARKED SUMMARY #{i + 1} of {len(q.head)} messages" for i, q in enumerate(summ.requests)
    ]
    assert int(r.calls["summarizer_calls"].sum()) == len(summ.requests)
    # the summarizer was given Inspect's own prompt and the conversation, and Inspect wrapped its reply
    first = summ.requests[0]
    assert "tasked with summarizing conversations" in first.user_prompt and "Conversation:" in first.user_prompt
    assert first.head[0].role == "system" and first.head[0].content in first.user_prompt
    final = r.final_history
    assert any("[CONTEXT COMPACTION SUMMARY]" in m.content and "MARKED SUMMARY" in m.content for m in final)


def test_a_failed_summary_leaves_the_history_and_says_why(registered: Any, tmp_path: Path) -> None:
    history = list(generate("small", seed=0).messages)
    assert estimate_tokens(history) > 0.9 * WINDOW
    summ = _Marked(fail=True)
    run = make_policy("inspect_summary", context_window_tokens=WINDOW).start(
        CompactionEnv(summarizer=summ, offload_root=str(tmp_path))
    )
    comp = run.compact(history)
    assert len(summ.requests) == 1 and list(comp.view) == history
    assert comp.record is not None and comp.record.error.startswith("summary failed")
    assert comp.record.tier == Tier.NONE
    # in a run: asked at every call above the threshold, never compacted
    [r] = run_task(
        "synthetic:small:0",
        make_policy("inspect_summary", context_window_tokens=WINDOW),
        summarizer=_Marked(fail=True),
        history_mode="write_back",
    )
    assert int(r.calls["summarizer_calls"].sum()) > 0 and not r.calls["compacted"].any()


def test_inspect_summary_config_is_validated(registered: Any) -> None:
    with pytest.raises(ConfigError, match="threshold_frac"):
        make_policy("inspect_summary", threshold_frac=0)
    with pytest.raises(ConfigError, match="summary_timeout_s"):
        make_policy("inspect_summary", summary_timeout_s=0)


@pytest.fixture(scope="module")
def swept(registered: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec: dict[str, Any] = {
        "name": "t-inspect",
        "window": WINDOW,
        "tasks": {"synthetic": [{"preset": "small", "seeds": list(SEEDS)}]},
        "policies": [{"kind": "progressive", "name": "harness9"}, {"kind": "inspect_summary", "name": "inspect"}],
        "history_modes": ["write_back"],
        "probes": {"scorers": ["recall"], "every_k": 10},
    }
    out = tmp_path_factory.mktemp("sw") / "t-inspect"
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert (r.n_cells, r.ok) == (4, 4)
    return out


def test_inspect_summary_runs_in_a_sweep_beside_progressive_under_the_same_probes(swept: Path) -> None:
    res = load_results(swept)
    runs = res.runs.set_index("run_id")
    assert (runs["n_compactions"] > 0).all() and (runs["summarizer_calls"] > 0).all()
    probes = res.probes.merge(res.runs[["run_id", "policy_name"]], on="run_id")
    asked = {
        name: set(map(tuple, g[["task_id", "checkpoint_call_index", "probe_id"]].to_numpy().tolist()))
        for name, g in probes.groupby("policy_name")
    }
    assert set(asked) == {"harness9", "inspect"} and asked["harness9"] == asked["inspect"] and asked["inspect"]


@pytest.fixture(scope="module")
def exported(swept: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return sweep_to_eval_logs(swept, tmp_path_factory.mktemp("ex") / "logs")


def test_a_sweep_exports_as_one_eval_log_per_configuration(swept: Path, exported: Any) -> None:
    res = load_results(swept)
    metrics = run_metrics(res.calls, res.probes, res.runs).set_index("run_id")
    assert len(exported.logs) == 2 and exported.n_samples == len(SEEDS) * 2 and exported.skipped == ()
    models = set()
    for path in exported.logs:
        log = read_eval_log(str(path), resolve_attachments=True)  # Inspect's own reader
        models.add(log.eval.model)
        assert log.status == "success" and log.eval.task == "h9eval/t-inspect"
        assert sorted(s.id for s in log.samples) == [f"synthetic-small-{seed}" for seed in SEEDS]
        for s in log.samples:
            run_id = s.metadata["run_id"]
            want = metrics.loc[run_id]
            assert {k: v.value for k, v in s.scores.items()} == pytest.approx({k: float(want[k]) for k in s.scores})
            for k in ("retention", "tokens_saved", "peak_tokens_sent", "n_compactions"):
                assert s.scores[k].value == pytest.approx(float(want[k]))
            calls = res.calls[res.calls["run_id"] == run_id].sort_values("call_index")
            model_events = [e for e in s.events if e.event == "model"]
            compactions = [e for e in s.events if e.event == "compaction"]
            assert len(model_events) == len(calls) and len(compactions) == int(calls["compacted"].sum()) > 0
            # the view sent at each call, as the sweep measured it
            sent = [estimate_tokens(from_inspect(e.input)) for e in model_events]
            assert sent == [int(v) for v in calls["view_tokens"]]
        for score in log.results.scores:
            values = [s.scores[score.name].value for s in log.samples if score.name in s.scores]
            assert score.metrics["mean"].value == pytest.approx(sum(values) / len(values))
    assert models == {"h9eval/harness9", "h9eval/inspect"}


def test_the_export_is_the_same_file_twice(swept: Path, tmp_path: Path) -> None:
    a = sweep_to_eval_logs(swept, tmp_path / "a", log_format="json")
    b = sweep_to_eval_logs(swept, tmp_path / "b", log_format="json")
    assert [p.read_bytes() for p in a.logs] == [p.read_bytes() for p in b.logs]
    json.loads(a.logs[0].read_text(encoding="utf-8"))


def test_a_cell_that_replays_differently_is_refused(swept: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(swept, copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    changed = manifest["cells"][1]
    changed["spec"]["window"] = WINDOW // 2  # the cell now replays at another window than it ran at
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    # the cell is named by its run id, which the manifest entry now gives (its window is in its params)
    with pytest.raises(FormatError, match=Cell.from_dict(changed).run_id):
        sweep_to_eval_logs(copy, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half written


def test_the_export_command(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "logs"
    assert main(["export", str(swept), str(out), "--format", "inspect", "--log-format", "json"]) == 0
    assert "wrote 2 eval logs, 4 samples" in capsys.readouterr().out
    assert sorted(p.suffix for p in out.iterdir() if p.name != EXPORT_MARKER) == [".json", ".json"]
    assert main(["export", str(swept), str(out), "--format", "inspect"]) == 2  # exists, no --overwrite
    assert "already exists" in capsys.readouterr().err
    assert main(["export", str(swept), str(tmp_path / "d"), "--log-format", "json"]) == 2
    assert "--log-format is for --format inspect" in capsys.readouterr().err


def test_the_command_line_does_not_import_inspect_until_asked() -> None:
    code = "import sys, h9eval.cli; print('inspect_ai' in sys.modules)"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_a_failed_cell_is_skipped_and_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import h9eval.sweeps.worker as sw

    real = sw.execute

    def flaky(spec: Any, env: Any) -> Any:
        if spec.task.task_id.endswith("-1"):
            raise RuntimeError("boom")
        return real(spec, env)

    monkeypatch.setattr(sw, "execute", flaky)
    spec = {
        "name": "t-failed",
        "window": WINDOW,
        "tasks": {"synthetic": [{"preset": "small", "seeds": [0, 1]}]},
        "policies": [{"kind": "progressive"}],
    }
    r = sweep(spec, out_dir=tmp_path / "sw", workers=0, progress=False, on_failure="return")
    assert (r.ok, r.failed) == (1, 1)
    monkeypatch.setattr(sw, "execute", real)
    out = sweep_to_eval_logs(tmp_path / "sw", tmp_path / "logs")
    assert out.n_samples == 1 and len(out.skipped) == 1
    assert out.skipped[0].startswith("synthetic-small-1--") and out.skipped[0].endswith(": failed")


def test_a_sweep_of_unregistered_policies_is_refused_with_the_way_to_register_them(swept: Path, tmp_path: Path) -> None:
    for cls in INSPECT_POLICIES:
        POLICIES.remove(cls.kind)
    try:
        with pytest.raises(ConfigError, match=r"not registered here \(inspect_summary\).*register_inspect_policies"):
            sweep_to_eval_logs(swept, tmp_path / "out")
    finally:
        register_inspect_policies()
