"""Policies that use no summarizer run once per sweep, not once per summarizer variant, and the
manifest says so (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

from h9eval.compaction.policies import registry
from h9eval.compaction.summary import Summarizer
from h9eval.runs.replay import replay
from h9eval.sweeps.cells import expand_cells
from h9eval.sweeps.spec import load_spec
from h9eval.sweeps.sweep import sweep
from h9eval.tasks.synthetic import generate

SPEC = {
    "name": "variants",
    "window": 16_000,
    "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
    "policies": [
        {"kind": "progressive"},
        {"kind": "observation_masking", "grid": {"keep_recent_turns": [3, 5]}},
        {"kind": "keep_all"},
    ],
    "summarizer": {"variants": ["offline", "offline_free_text"]},
}


# every policy at a size where the small task makes it act
SMALL = {
    "progressive": {"context_window_tokens": 8_000},
    "summary_single_threshold": {"context_window_tokens": 8_000},
    "hybrid": {"context_window_tokens": 8_000},
    "codex_compact": {"context_window_tokens": 8_000},
    "claude_code_compact": {"context_window_tokens": 40_000, "output_reserve_tokens": 1_000, "buffer_tokens": 30_000},
    "openhands_condenser": {"max_size": 20},
    # registered only when a test of the Inspect integration ran earlier in the same process
    "inspect_summary": {"context_window_tokens": 8_000},
}


class _Counting:
    """Counts summary calls and fails them all (so the replay needs none to pass)."""

    def __init__(self) -> None:
        self.n = 0

    @property
    def summarizer_id(self) -> str:
        return "counting"

    def summarize(self, request: object) -> object:
        self.n += 1
        raise RuntimeError("not expected")


def test_the_flag_is_true_exactly_for_the_policies_that_call_the_summarizer() -> None:
    """Each registered policy is replayed at a small window with a counting summarizer: the
    policies that never call it are exactly those with ``uses_summarizer`` false."""
    task = generate("small", seed=0)
    called = {}
    for kind, cls in registry().items():
        s = _Counting()
        assert isinstance(s, Summarizer)
        pol = cls(**SMALL.get(kind, {}))
        replay(task, pol, summarizer=s)
        called[kind] = s.n > 0
    flagged = {k: registry()[k].uses_summarizer for k in called}
    assert called == flagged, {k for k in called if called[k] != flagged[k]}
    assert sum(flagged.values()) >= 6 and not all(flagged.values()), "both kinds must be reached"


def test_cells_run_once_for_a_policy_without_summarizer(tmp_path: Path) -> None:
    cells, _ = expand_cells(load_spec(SPEC), out_dir=tmp_path)
    by_kind: dict[str, list] = {}
    for c in cells:
        by_kind.setdefault(c.policy_kind, []).append(c)
    assert sorted(c.summarizer for c in by_kind["progressive"]) == ["offline", "offline_free_text"]
    assert [c.summarizer for c in by_kind["observation_masking"]] == ["offline", "offline"]  # 2 grid points, 1 variant
    assert [c.summarizer for c in by_kind["keep_all"]] == ["offline"]
    assert all(
        c.summarizer_variants == ("offline", "offline_free_text")
        for c in by_kind["keep_all"] + by_kind["observation_masking"]
    )
    assert {c.summarizer_variants for c in by_kind["progressive"]} == {("offline",), ("offline_free_text",)}
    assert len(cells) == 5


def test_the_manifest_says_so(tmp_path: Path) -> None:
    res = sweep(SPEC, out_dir=tmp_path / "v", workers=0, progress=False)
    assert res.n_cells == 5 and res.ok == 5
    m = json.loads((tmp_path / "v" / "manifest.json").read_text())
    note = m["summarizer_independent"]
    assert note["policies"] == ["keep_all", "observation_masking"]
    assert note["ran_with"] == "offline" and note["stands_for"] == ["offline", "offline_free_text"]
    assert all(c["summarizer_variants"] for c in m["cells"])


def test_one_variant_changes_nothing(tmp_path: Path) -> None:
    one = {**SPEC, "summarizer": {"variants": ["offline"]}}
    cells, _ = expand_cells(load_spec(one), out_dir=tmp_path)
    assert len(cells) == 4 and all(c.summarizer_variants == ("offline",) for c in cells)
