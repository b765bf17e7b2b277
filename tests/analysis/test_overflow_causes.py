"""Each overflow names the message that made the request too large, and the recommendation says
what it left out and why. Fixed tables; sizes from harness9's estimate computed here."""

from __future__ import annotations

import pandas as pd

from h9eval.analysis import metrics as M
from h9eval.analysis.coverage import overflow_causes
from h9eval.core.messages import assistant, system, user
from h9eval.core.tokens import estimate_tokens
from h9eval.tasks.model import Intent, Task, TaskSource


def _task() -> Task:
    msgs = (system("s"), user("do it"), assistant("x" * 4000), user("ok"))
    return Task(task_id="T", source=TaskSource(kind="recorded"), messages=msgs, intent=Intent(statement="do it"))


def test_each_overflow_names_its_newest_message_and_whether_it_alone_is_too_large() -> None:
    t = _task()
    big, small = estimate_tokens([t.messages[2]]), estimate_tokens([t.messages[3]])
    calls = pd.DataFrame(
        [
            {
                "run_id": "r1",
                "task_id": "T",
                "history_mode": "view",
                "call_index": 0,
                "message_index": 2,
                "tokens_sent": big + 10,
                "context_window_tokens": 500,
                "overflow": True,
                "overflow_tokens": big + 10 - 500,
                "policy_kind": "keep_all",
            },
            {
                "run_id": "r1",
                "task_id": "T",
                "history_mode": "view",
                "call_index": 1,
                "message_index": 3,
                "tokens_sent": 1200,
                "context_window_tokens": 1100,
                "overflow": True,
                "overflow_tokens": 100,
                "policy_kind": "keep_all",
            },
            {
                "run_id": "r1",
                "task_id": "T",
                "history_mode": "view",
                "call_index": 2,
                "message_index": 3,
                "tokens_sent": 10,
                "context_window_tokens": 1100,
                "overflow": False,
                "overflow_tokens": 0,
                "policy_kind": "keep_all",
            },
        ]
    )
    oc = overflow_causes(calls, [t], names={"r1": "keep_all"})
    assert len(oc) == 2 and list(oc["message_index"]) == [2, 3]
    assert list(oc["message_tokens"]) == [big, small] and big > 500
    assert list(oc["message_alone_over_window"]) == [True, False]
    assert oc["cause"].iloc[0] == f"message 2 (assistant, {big:,} tokens) is larger than the 500-token window by itself"
    assert f"arrived with {1200 - small:,} tokens already in the request" in oc["cause"].iloc[1]


def test_the_recommendation_says_what_it_left_out_and_why() -> None:
    cm = pd.DataFrame(
        {
            "label": ["a", "b", "c"],
            "retention": [0.9, 0.8, 0.7],
            "tokens_saved": [0.1, 0.2, 0.3],
            "overflows": [3, 0, 0],
            "emergencies": [0, 2, 0],
        }
    )
    best = M.recommend(cm)
    assert best is not None and best["label"] == "c"
    assert best["excluded_why"] == ["a: 3 call(s) over the window", "b: 2 emergency truncation(s)"]
