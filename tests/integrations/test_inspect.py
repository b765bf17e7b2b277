"""Inspect interoperability, offline: an Inspect eval with h9eval's progressive policy as its
compaction strategy (Inspect's own agent loop, a scripted model), the conversion on every message
shape the recorded loaders produce, logs both ways, and Inspect's strategies as h9eval policies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import Task as InspectTask  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.agent import react  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, get_model  # noqa: E402
from inspect_ai.tool import tool  # noqa: E402

from h9eval.integrations.inspect import (  # noqa: E402
    INSPECT_POLICIES,
    SCRIPTED_MODEL,
    H9Compaction,
    from_inspect,
    register_inspect_policies,
    run_to_eval_log,
    tasks_from_eval_log,
    to_inspect,
)
from h9eval import ReplayConfig, replay  # noqa: E402
from h9eval.compaction.policies import make_policy  # noqa: E402
from h9eval.runs.run import run_task  # noqa: E402
from h9eval.tasks import load_tasks_from_spec  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

WINDOW = 20_000
PADDING = "log line with some padding text\n" * 90  # ~720 tokens: below the offload threshold (4,000 bytes)


@tool
def bash():  # type: ignore[no-untyped-def]
    async def execute(cmd: str) -> str:
        """Run a shell command.

        Args:
            cmd: The command.
        """
        return f"output of {cmd}\n{PADDING}"

    return execute


def _agent_replies(n_steps: int, summaries: list[str]):  # type: ignore[no-untyped-def]
    """A scripted agent: ``n_steps`` bash calls, then submit; a summary request (harness9's
    compaction system prompt) gets an anchored summary, its user prompt kept in ``summaries``."""
    step = [0]

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        if messages and "compaction engine" in messages[0].text:
            summaries.append(messages[1].text)
            return ModelOutput.from_content(
                "m",
                "## Anchors\n### User Intent\nFix pkg/store\n### Execution Progress\n"
                "- ran ls\n### Key Decisions\nN/A\n### Tried Solutions\nN/A\n"
                "### Next Steps\n- keep going\n## Summary\nListing steps.",
            )
        step[0] += 1
        if step[0] > n_steps:
            return ModelOutput.for_tool_call("m", "submit", {"answer": "done"})
        return ModelOutput.for_tool_call("m", "bash", {"cmd": f"ls step{step[0]}"})

    return reply


@pytest.fixture(scope="module")
def eval_log(tmp_path_factory):  # type: ignore[no-untyped-def]
    summaries: list[str] = []
    model = get_model(f"{SCRIPTED_MODEL}/agent", outputs=_agent_replies(32, summaries), memoize=False)
    strategy = H9Compaction("progressive", window_tokens=WINDOW, offload_root=str(tmp_path_factory.mktemp("off")))
    task = InspectTask(
        dataset=[Sample(input="Fix the failing test in pkg/store; never touch vendor/.", target="done")],
        solver=react(tools=[bash()], compaction=strategy),
    )
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path_factory.mktemp("logs")), display="none")
    return log, summaries


def test_progressive_compacts_inside_an_inspect_agent_at_the_expected_calls(eval_log) -> None:  # type: ignore[no-untyped-def]
    log, summaries = eval_log
    assert log.status == "success", log.error
    [sample] = log.samples
    records = [
        e.data["h9eval_compaction"]
        for e in sample.events
        if e.event == "info" and isinstance(e.data, dict) and "h9eval_compaction" in e.data
    ]
    assert records, "the policy never ran"
    # Inspect calls the strategy from harness9's soft threshold on (70 % of the window), never below
    # (the token counts differ a little: Inspect's includes the tool definitions)
    assert all(int(r["tokens_before"]) >= 0.6 * WINDOW for r in records)
    assert {int(r["tier"]) for r in records} & {2, 3}  # a summary tier (soft or full)
    assert summaries and "Anchors" in summaries[0]  # the summary was asked of Inspect's own model


def test_message_conversion_round_trips_every_recorded_shape(shared: Path) -> None:
    tasks = load_tasks_from_spec(str(shared / "data" / "recorded"))
    assert len(tasks) >= 8
    for t in tasks:
        back = from_inspect(to_inspect(list(t.messages)))
        assert len(back) == len(t.messages), t.task_id
        for a, b in zip(back, t.messages):
            assert (
                a.role if b.role in ("system", "user", "assistant", "tool") else b.role
            ) == b.role or b.role not in ("system", "user", "assistant", "tool")
            assert a.content == b.content and a.tool_call_id == b.tool_call_id and a.is_error == b.is_error
            assert [(c.id, c.name) for c in a.tool_calls] == [(c.id, c.name) for c in b.tool_calls]
            for ca, cb in zip(a.tool_calls, b.tool_calls):
                try:
                    assert json.loads(ca.arguments) == json.loads(cb.arguments)
                except ValueError:
                    assert ca.arguments == cb.arguments  # not JSON: carried as text


def test_unchanged_messages_keep_their_inspect_identity() -> None:
    t = generate("small", seed=0)
    originals = to_inspect(list(t.messages))
    converted = from_inspect(originals)
    kept = to_inspect(converted[:5] + converted[7:], originals, converted)
    assert kept[0] is originals[0] and kept[5] is originals[7]


def test_a_run_exported_as_an_eval_log_opens_and_comes_back_as_a_task(tmp_path: Path) -> None:
    t = generate("small", seed=0)
    r = replay(t, make_policy("progressive", context_window_tokens=9000), config=ReplayConfig(keep_views=True))
    path = run_to_eval_log(r, t, tmp_path / "run.eval")
    log = read_eval_log(str(path))
    [sample] = log.samples
    model_events = [e for e in sample.events if e.event == "model"]
    compactions = [e for e in sample.events if e.event == "compaction"]
    assert len(model_events) == len(r.calls) and len(compactions) == int(r.calls["compacted"].sum())
    assert sample.scores["compactions"].value == float(r.summary()["compactions"])
    [back] = tasks_from_eval_log(path)
    assert [(m.role, m.content) for m in back.messages] == [(m.role, m.content) for m in t.messages]
    [again] = run_task(back, "progressive", window=9000)
    assert len(again.calls) == len(r.calls)


@pytest.fixture
def inspect_policies():  # type: ignore[no-untyped-def]
    """Registered for the test, removed after it: other tests walk every registered policy."""
    from h9eval.compaction.base import POLICIES

    kinds = register_inspect_policies()
    assert register_inspect_policies() == kinds  # a second call does nothing
    yield kinds
    for cls in INSPECT_POLICIES:
        POLICIES.remove(cls.kind)


def test_inspect_strategies_run_as_h9eval_policies(inspect_policies) -> None:  # type: ignore[no-untyped-def]
    for kind, tier in (("inspect_trim", "soft"), ("inspect_edit", "warn")):
        [r] = run_task("synthetic:small:0", kind, params={"context_window_tokens": 9000}, history_mode="write_back")
        s = r.summary.shown()
        assert s["compactions"] > 0 and set(s["compactions_by_tier"]) == {tier}, (kind, s)
        assert s["peak_tokens_sent"] < 3 * 9000
    with pytest.raises(Exception, match="preserve"):
        make_policy("inspect_trim", preserve=1.5)
