"""The closed-loop loss ledger: the world's items judged at each round of an episode, and the
agent's first later action that touched a lost one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from h9eval.closedloop.agents import make_agent
from h9eval.closedloop.agents.base import Action
from h9eval.closedloop.episode import run_episode
from h9eval.closedloop.ledger import episode_items, episode_ledger, first_touches
from h9eval.closedloop.worlds import make_world
from h9eval.cli import main
from h9eval.results.io import read_table


def _ledger(ep: object) -> pd.DataFrame:
    return pd.DataFrame(episode_ledger(ep, run_id="r", task_id="t"))  # type: ignore[arg-type]


def test_drop_all_loses_items_and_names_the_action_that_touched_one() -> None:
    world = make_world("fact_chain", hops=8, padding_bytes=1500, task_file=True)
    ep = run_episode(world, make_agent("scripted"), "drop_all", seed=1, max_steps=60, history_mode="write_back")
    led = _ledger(ep)
    rounds = led[led["basis"] == "compaction"]
    assert len(rounds) and (rounds["state"] == "LOST").all()
    lost = rounds[rounds["item_id"] == "start_key"].iloc[0]
    assert lost["call_index"] == 1 and lost["next_use_call"] == 1
    # the action: the agent, its view empty, re-read the task file, which names the start key again
    touch = next(t for t in first_touches(ep)["start_key"] if t.call_index == lost["next_use_call"])
    assert touch.kind == "re-read" and "TASK.md" in touch.detail
    assert ep.steps[1].tool == "read_file"


def test_keep_all_keeps_every_item_at_its_window_fills() -> None:
    world = make_world("fact_chain", hops=8, padding_bytes=1500)
    ep = run_episode(
        world,
        make_agent("scripted"),
        "keep_all",
        seed=1,
        max_steps=60,
        history_mode="write_back",
        context_window_tokens=1500,
    )
    led = _ledger(ep)
    assert set(led["basis"]) == {"fill"} and len(led) >= 2  # it never compacts: window fills only
    assert (led["state"] == "PRESERVED").all() and led["next_use_call"].isna().all()
    assert ep.steps[-1].raw_tokens_sent == ep.steps[-1].tokens_sent  # nothing dropped: raw is what is sent


def test_items_carry_the_worlds_types_and_the_superseded_rule() -> None:
    world = make_world("constraints", n_meetings=8, update_after=3, padding_bytes=300)
    ep = run_episode(world, make_agent("scripted"), "keep_all", seed=2, max_steps=60)
    items = {i.item_id: i for i in episode_items(ep)}
    assert {i.item_type for i in items.values()} == {"safety_rule", "user_preference", "superseded_value"}
    first, update = items["banned_day"], items["banned_day_updated"]
    assert first.value.startswith("never book on ") and update.stale_values == (first.value,)
    assert first.until == update.introduced_at > first.introduced_at == 0


class _RuleBreaker:
    """Lists a meeting's slots, then books it on ``day`` (as an agent that lost the rule might)."""

    agent_id = "test:rule-breaker"

    def __init__(self, day: str) -> None:
        self.day = day

    def act(self, view_json: str) -> Action:
        text = "\n".join(m["content"] for m in json.loads(view_json)["messages"])
        slot = re.search(rf"slot (S-\w+) for (M-\w+): day={self.day}\b", text)
        if slot:
            return Action.call("book", meeting_id=slot.group(2), slot_id=slot.group(1))
        meeting = re.search(r"Meetings: (M-\w+)", text)
        return Action.call("list_slots", meeting_id=meeting.group(1)) if meeting else Action.finish("done")


def test_a_broken_rule_is_the_touch_of_the_lost_rule() -> None:
    probe = make_world("constraints", n_meetings=4, update_after=None, slots_per_meeting=20, padding_bytes=0)
    probe.reset(3)
    banned = probe.ground_truth()[0].value
    world = make_world("constraints", n_meetings=4, update_after=None, slots_per_meeting=20, padding_bytes=0)
    # a window of the newest two messages: the task (and its rule) leaves the view at the first call after it
    ep = run_episode(
        world,
        _RuleBreaker(banned),
        {"kind": "sliding_window", "max_messages": 2},
        seed=3,
        max_steps=3,
        history_mode="write_back",
    )
    assert [v.rule for v in ep.outcome.violations] == ["constraint"]
    led = _ledger(ep)
    rule = led[(led["item_id"] == "banned_day") & (led["basis"] == "compaction")].iloc[0]
    assert rule["state"] == "LOST" and rule["item_type"] == "safety_rule"
    touch = next(t for t in first_touches(ep)["banned_day"] if t.call_index == rule["next_use_call"])
    assert touch.kind == "rule broken" and touch.call_index == ep.outcome.violations[0].step - 1


def test_run_world_writes_the_ledger_and_its_page_draws_from_the_stored_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ep"
    assert (
        main(
            [
                "run",
                "--world",
                "fact_chain:1",
                "--policy",
                "drop_all",
                "--world-set",
                "padding_bytes=1500",
                "--world-set",
                "hops=8",
                "--world-set",
                "task_file=true",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    led = read_table(out / "ledger.parquet", "ledger")
    assert len(led) and (led["state"] == "LOST").all() and led["next_use_call"].notna().any()
    assert main(["ledger", str(out)]) == 0
    page = (out / "ledger.html").read_text(encoding="utf-8")
    assert "<b>Episode</b>" in page and "start_key" not in page  # values, not ids, are shown
    assert re.search(r"fact: K-[0-9a-f]{8} \(touched at call 1: re-read: read_file", page)
    (out / "episode.json").unlink()  # the page runs nothing: the episode's own record is not needed
    assert main(["ledger", str(out)]) == 0
    (out / "diffs.parquet").write_bytes(b"not parquet")
    capsys.readouterr()
    assert main(["ledger", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "diffs.parquet" in err[0]
