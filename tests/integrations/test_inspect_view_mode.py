"""Inspect's strategies as h9eval policies compact the history they are given at every call (the
whole history in view mode), as their documentation says: no view is carried forward between calls."""

from __future__ import annotations

import pytest

pytest.importorskip("inspect_ai")

from h9eval.compaction.base import CompactionEnv  # noqa: E402
from h9eval.compaction.policies import make_policy  # noqa: E402
from h9eval.core.messages import Message, ToolCall  # noqa: E402
from h9eval.integrations.inspect import register_inspect_policies  # noqa: E402


def _history(n_turns: int) -> list[Message]:
    out = [Message("system", "You fix bugs."), Message("user", "Fix the failing test.")]
    for i in range(n_turns):
        out.append(Message("assistant", f"step {i}", (ToolCall(f"call_{i}", "bash", '{"cmd": "ls"}'),)))
        out.append(Message("tool", f"output {i}\n" + "a line of output\n" * 60, (), f"call_{i}"))
    return out


@pytest.mark.parametrize("kind", ["inspect_trim", "inspect_edit"])
def test_each_call_compacts_the_history_it_is_given(kind: str) -> None:
    register_inspect_policies()
    run = make_policy(kind, context_window_tokens=3000).start(CompactionEnv())
    history = _history(12)
    first = run.compact(history)
    assert first.record is not None and int(first.record.tier) > 0  # the state this test means to reach
    again = run.compact(history + [Message("user", "go on")])
    # a carried view (the first result plus the new message) would be under the threshold: no compaction
    assert again.record is not None and int(again.record.tier) > 0
    assert "carried_over" not in again.record.extra and again.record.msgs_before == len(history) + 1
