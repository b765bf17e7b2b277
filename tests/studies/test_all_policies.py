"""Every policy on one task at one window, one command (issue 27), and configuration names a
shell takes unquoted."""

from __future__ import annotations

from pathlib import Path

import pytest

from h9eval.studies.all_policies import all_policies_spec, compare_all_policies
from h9eval.analysis.compare import shell_name
from h9eval.analysis.headline import DEFAULT_NAME
from h9eval.compaction.policies import ServerCompactionPolicy, registry, task_independent_registry
from h9eval.core.errors import ConfigError

#: every registered policy but the provider-side ones (their cassettes cover the tasks they were recorded on)
RUNNABLE = sorted(k for k, cls in registry().items() if not issubclass(cls, ServerCompactionPolicy))


def test_the_spec_has_every_registered_policy_at_its_defaults() -> None:
    spec = all_policies_spec(["/data/runs/my session.jsonl"], window=12_000)
    kinds = [p["kind"] for p in spec["policies"]]
    assert {"anthropic_server_compaction", "openai_server_compaction"} <= set(registry()) - set(RUNNABLE)
    assert sorted(task_independent_registry()) == RUNNABLE
    assert sorted(kinds) == RUNNABLE and kinds[0] == "progressive" and spec["policies"][0]["name"] == DEFAULT_NAME
    assert all("params" not in p for p in spec["policies"])  # the spec's window is every policy's
    assert spec["name"] == "all-policies-my-session.jsonl-w12000" and spec["window"] == 12_000
    with pytest.raises(ConfigError, match="window must be a positive"):
        all_policies_spec(["synthetic:small:0"], window=0)


def test_one_task_gives_a_table_and_says_why_there_is_no_verdict(tmp_path: Path) -> None:
    a = compare_all_policies(["synthetic:small:0"], window=12_000, out_dir=tmp_path / "all", workers=0, progress=False)
    kinds = [p["kind"] for p in all_policies_spec(["synthetic:small:0"], window=12_000)["policies"]]
    skipped = [s.where for s in a.sweep.skipped]
    at = kinds.index("claude_code_compact")
    assert skipped == [f"policies[{at}] cell {{}}"] and "claude_code_compact" not in set(
        a.table["config"]
    )  # its 33,000-token reserve
    assert a.sweep.ok == len(RUNNABLE) - 1 and a.headline is None and a.n_tasks == 1
    t = a.table
    assert len(t) == len(RUNNABLE) - 1 and set(t["config"]) >= {DEFAULT_NAME, "keep_all", "drop_all"}
    assert t["retention"].is_monotonic_decreasing or t["retention"].isna().any()
    row = t.set_index("config")
    assert (
        row.loc[DEFAULT_NAME, "n_compactions"] > 0 and row.loc["keep_all", "n_compactions"] == 0
    )  # the window reached harness9's tiers
    assert row.loc["drop_all", "retention"] < row.loc["keep_all", "retention"] == 1.0
    text = str(a)
    assert (
        "no verdicts against harness9-default (a paired verdict needs at least 6 tasks" in text
        and f"skipped policies[{at}]" in text
        and f"results: {tmp_path / 'all'}" in text
    )


@pytest.mark.parametrize(
    ("label", "name"),
    [
        (
            "progressive [min_tail_messages=4, warn_frac=0.5]:offline",
            "progressive:min_tail_messages=4,warn_frac=0.5:offline",
        ),
        ("base:offline", "base:offline"),
        ("my policy (v2)", "my-policy-v2"),
        ("harness9-default", "harness9-default"),
    ],
)
def test_shell_names(label: str, name: str) -> None:
    assert shell_name(label) == name


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ([], "give a sweep spec (SPEC.toml) or --task PATH --window TOKENS"),
        (["--task", "synthetic:small:0"], "--task needs --window TOKENS"),
        (["examples/sweep-small.toml", "--window", "1000"], "--window and --history-mode go with --task"),
        (["examples/sweep-small.toml", "--task", "synthetic:small:0"], "not both"),
        (["--task", "synthetic:small:0", "--window", "-5"], "window must be a positive number of tokens, got -5"),
    ],
)
def test_the_one_liner_refuses_bad_input_in_one_line(
    args: list[str], expect: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from h9eval.cli import main

    assert main(["sweep", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0], err
    assert not (tmp_path / "o").exists()
