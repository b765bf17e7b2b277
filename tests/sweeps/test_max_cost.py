"""``--max-cost-usd`` (a spec's ``max_cost_usd``): a sweep stops before the model call that would take
its spending past the cap, leaves the unfinished cells pending, and a rerun continues them without
paying again for the replies it already has. Against the fake Messages server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from h9eval.cli import main  # noqa: E402
from h9eval.core.budget import SPEND_FILE, Budget, call_bound_usd  # noqa: E402
from h9eval.core.errors import BudgetExceeded, ConfigError  # noqa: E402
from tests.fake_messages import FakeMessages, fake_messages_server  # noqa: E402

KEY = "sk-ant-h9eval-cap-test-key"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessages]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with fake_messages_server() as s:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        yield s


def _spec(tmp_path: Path, **extra: Any) -> Path:
    p = tmp_path / "spec.toml"
    lines = [
        'name = "cap"',
        "window = 16000",
        'tasks = ["synthetic:small:0", "synthetic:small:1"]',
        *(f"{k} = {json.dumps(v)}" for k, v in extra.items()),
        "[[policies]]",
        'kind = "progressive"',
        "[summarizer]",
        'name = "anthropic"',
    ]
    p.write_text("\n".join(lines) + "\n")
    return p


def _sweep(spec: Path, out: Path, *flags: str) -> int:
    return main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress", *flags])


def test_the_cap_stops_before_the_call_that_would_pass_it_and_a_rerun_continues(
    tmp_path: Path, server: FakeMessages, capsys: pytest.CaptureFixture[str]
) -> None:
    full = tmp_path / "full"
    assert _sweep(_spec(tmp_path), full) == 0
    n_full = server.requests
    assert n_full >= 6
    server.requests = 0

    out = tmp_path / "capped"
    capsys.readouterr()
    assert _sweep(_spec(tmp_path, max_cost_usd=0.1), out) == 3
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("STOPPED")]
    assert (
        len(lines) == 1
        and "would take the spending past max_cost_usd $0.1" in lines[0]
        and "run the same command" in lines[0]
    )
    ledger = json.loads((out / SPEND_FILE).read_text())
    first = server.requests
    assert 0 < first < n_full and ledger["calls"] == first
    assert ledger["spent_usd"] <= 0.1 and ledger["reserved_usd"] == 0
    # the refused call, at its bound, would have passed the cap; every call made fitted under it
    bound = float(re.search(r"up to \$([0-9.]+)\)", ledger["stopped"]).group(1))
    assert ledger["spent_usd"] + bound > 0.1 and bound >= call_bound_usd(0, 1, (3.0, 15.0))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"]["state"] == "stopped" and manifest["status"]["pending"] >= 1

    # the rerun (with room to finish) continues: finished cells are kept, cached replies are not bought again
    assert _sweep(_spec(tmp_path, max_cost_usd=100.0), out) == 0
    assert server.requests == n_full
    assert json.loads((out / "manifest.json").read_text())["status"]["state"] == "finished"


def test_the_command_line_cap_replaces_the_spec_one(tmp_path: Path, server: FakeMessages) -> None:
    assert _sweep(_spec(tmp_path, max_cost_usd=100.0), tmp_path / "o", "--max-cost-usd", "0.0001") == 3
    assert server.requests == 0  # not even the first call fits


def test_an_unpriced_model_cannot_be_capped(
    tmp_path: Path, server: FakeMessages, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, max_cost_usd=1.0, summarizer_model="qwen3-8b")
    assert _sweep(spec, tmp_path / "o") == 1  # the cell fails naming the reason; nothing is sent
    assert "no price" in capsys.readouterr().out and server.requests == 0


def test_budget_reservations_add_up(tmp_path: Path) -> None:
    b = Budget(str(tmp_path / SPEND_FILE), 1.0)
    b.start()
    b.reserve(0.5, who="a")
    b.reserve(0.4, who="b")  # 0.9 held
    with pytest.raises(BudgetExceeded, match=r"past max_cost_usd \$1 \(\$0.0000 spent\)"):
        b.reserve(0.2, who="c")
    with pytest.raises(BudgetExceeded):  # once stopped, every later call is refused
        b.reserve(0.0, who="d")
    b.settle(0.5, 0.1)
    assert b.state()["spent_usd"] == pytest.approx(0.1) and b.state()["reserved_usd"] == pytest.approx(0.4)
    b.start()
    assert b.stopped() == ""


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), "1", True])
def test_bad_caps_are_refused(value: Any) -> None:
    from h9eval.sweeps.spec import load_spec

    with pytest.raises(ConfigError, match=r"max_cost_usd must be a number of US dollars > 0"):
        load_spec(
            {"name": "x", "tasks": ["synthetic:small:0"], "policies": [{"kind": "keep_all"}], "max_cost_usd": value}
        )
