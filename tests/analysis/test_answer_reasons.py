"""The answer box states true reasons (issue 45): with nothing to compare harness9's default with,
it names what it left out and why, and never mentions controls that were not run."""

from __future__ import annotations

from pathlib import Path

from h9eval.analysis.report import write_report
from h9eval.sweeps.sweep import sweep


def _answer(tmp_path: Path, policies: list[dict[str, object]], *, window: int = 12000, n_tasks: int = 2) -> str:
    tasks = [f"synthetic:small:{i}" for i in range(n_tasks)]
    spec = {"name": "reasons", "window": window, "tasks": tasks, "policies": policies}
    assert sweep(spec, out_dir=tmp_path / "s", workers=0, progress=False).failed == 0
    md = write_report(tmp_path / "s", tmp_path / "rep", n_boot=100).markdown.read_text(encoding="utf-8")
    return md[md.index("## 1. The answer") : md.index("## 2.")]


def test_a_configuration_left_out_for_overflowing_is_named_with_its_reason(tmp_path: Path) -> None:
    default = {"kind": "progressive", "name": "harness9-default"}
    never_masks = {"kind": "observation_masking", "name": "masking", "params": {"keep_recent_turns": 1000}}
    answer = _answer(tmp_path, [default, never_masks])
    assert "Left out: masking (" in answer and "call(s) over the window in view mode" in answer
    assert "control" not in answer.split("Caveats")[0]  # none ran: none is mentioned


def test_only_the_default_says_so(tmp_path: Path) -> None:
    answer = _answer(tmp_path, [{"kind": "progressive", "name": "harness9-default"}])
    assert "harness9's default (harness9-default) is the only configuration run here" in answer
    assert "control" not in answer.split("Caveats")[0]


def test_dollars_saved_is_explained_on_the_first_screen(tmp_path: Path) -> None:
    answer = _answer(
        tmp_path,
        [{"kind": "progressive", "name": "harness9-default"}, {"kind": "token_budget"}, {"kind": "keep_all"}],
        window=16000,
        n_tasks=3,
    )
    assert "| dollars saved (share) |" in answer
    assert (
        "Dollars saved (share) is 1 - a configuration's billed dollars / the same transcript's sent uncompacted"
        in answer
    )
    assert "invalidates the provider's prompt cache" in answer
    assert "harness9-default here: cache reads " in answer and "(the uncompacted transcript: cache reads " in answer
