"""What every registered policy sends, call by call, on one short transcript: a text snapshot checked in
(``tests/data/view-snapshots/<policy>.txt``), so a refactor that changes any view (a message kept, dropped,
reordered, a summary or placeholder reworded) fails here, naming the policy and the first call that differs.

A view is written as the transcript indices of the messages it sends verbatim (``7``) and a short hash of
every message it made (``S1``: a summary, a placeholder, a masked result), each made message's text once at
the end, in order of first use. After an intended change, regenerate with
``H9EVAL_UPDATE_SNAPSHOTS=1 pytest tests/compaction/test_view_snapshots.py`` and review the diff.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest

from h9eval.compaction.policies import make_policy, registry
from h9eval.core.messages import Message
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.tasks.synthetic import generate

SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "view-snapshots"
WINDOW = 4_000  # the 31-message transcript (about 9,100 tokens) overflows it: every windowed policy compacts
#: parameters that make a policy act on this short transcript (its defaults are sized for 200k windows)
PARAMS: dict[str, dict[str, Any]] = {
    "claude_code_compact": {"output_reserve_tokens": 500, "buffer_tokens": 300},
    "clear_tool_uses": {"trigger_tokens": 3_000},
}
#: policies that answer from a recorded cassette, which covers its own requests only
CASSETTE = {"anthropic_server_compaction", "openai_server_compaction"}
KINDS = sorted(k for k in registry() if k not in CASSETTE)


def _text(m: Message) -> str:
    calls = "".join(f"\n  -> {tc.name}({tc.arguments})" for tc in m.tool_calls)
    head = m.role + (f" {m.tool_call_id}" if m.tool_call_id else "") + (" [error]" if m.is_error else "")
    return f"{head}: {m.content}{calls}"


def render(kind: str) -> str:
    """The snapshot of ``kind`` on the fixed transcript: one line per call, then the made messages."""
    task = generate("small", seed=0, n_turns=12)
    policy = make_policy(kind, **PARAMS.get(kind, {}))
    res = replay(task, policy, config=ReplayConfig(context_window_tokens=WINDOW, keep_views=True), session_id="snap")
    assert res.views is not None
    index = {id(m): i for i, m in enumerate(task.messages)}
    by_value = {m: i for i, m in reversed(list(enumerate(task.messages)))}
    made: dict[str, int] = {}
    lines = [f"# {kind} at a {WINDOW}-token window on synthetic:small:0 (12 turns); {len(res.views)} calls"]
    for call, view in enumerate(res.views):
        out = []
        for m in view:
            i = index.get(id(m), by_value.get(m))
            if i is not None:
                out.append(str(i))
            else:
                out.append(f"S{made.setdefault(_text(m), len(made) + 1)}")
        tier = res.calls["tier"].iloc[call] if "tier" in res.calls.columns else ""
        lines.append(f"call {call:>2} [{tier}]: {' '.join(out)}")
    lines.append("")
    for text, n in made.items():
        lines.append(f"--- S{n}\n{text}")
    return "\n".join(lines) + "\n"


def _check(kind: str) -> None:
    path = SNAPSHOTS / f"{kind}.txt"
    got = render(kind)
    if os.environ.get("H9EVAL_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot for {kind}: run with H9EVAL_UPDATE_SNAPSHOTS=1 and review it"
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "checked in", "now", n=1))
        pytest.fail(f"{kind} sends other views than its snapshot:\n{diff[:4000]}")


@pytest.mark.parametrize("kind", KINDS)
def test_every_policy_sends_the_views_of_its_snapshot(kind: str) -> None:
    _check(kind)


def test_every_registered_policy_has_a_snapshot_or_a_stated_reason() -> None:
    assert set(registry()) == set(KINDS) | CASSETTE
    assert {p.stem for p in SNAPSHOTS.glob("*.txt")} == set(KINDS)


def test_the_snapshots_see_compaction_and_a_change_of_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshots can fail: most policies compact on the transcript, and progressive with a tail one message
    shorter (a refactor's off-by-one) no longer matches its snapshot."""
    compacting = [k for k in KINDS if "S1" in (SNAPSHOTS / f"{k}.txt").read_text(encoding="utf-8") or k == "drop_all"]
    assert len(compacting) >= 6, compacting
    want = (SNAPSHOTS / "progressive.txt").read_text(encoding="utf-8")
    assert render("progressive") == want
    monkeypatch.setitem(PARAMS, "progressive", {"min_tail_messages": 5})
    assert render("progressive") != want
