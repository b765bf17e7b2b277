"""``h9eval run --policy-file recommended.toml``: the tuner's recommendation runs as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from h9eval.studies.tune import to_toml
from h9eval.cli import main


def _params(out: Path) -> dict[str, object]:
    params = json.loads(next(out.rglob("manifest.json")).read_text())["policy"]["params"]
    return {k: params[k] for k in ("warn_frac", "min_tail_messages")}


def test_the_tuners_toml_runs_and_set_overrides_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "recommended.toml"
    rec.write_text(
        to_toml({"context_window_tokens": 16000, "warn_frac": 0.45, "min_tail_messages": 4}, comment="tuned")
    )
    assert main(["run", "--task", "synthetic:small", "--policy-file", str(rec), "--out", str(tmp_path / "a")]) == 0
    assert "context_window_tokens: 16000" in capsys.readouterr().out
    assert _params(tmp_path / "a") == {"warn_frac": 0.45, "min_tail_messages": 4}
    assert (
        main(
            [
                "run",
                "--task",
                "synthetic:small",
                "--policy-file",
                str(rec),
                "--set",
                "min_tail_messages=8",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    assert _params(tmp_path / "b") == {"warn_frac": 0.45, "min_tail_messages": 8}


@pytest.mark.parametrize(
    ("text", "extra", "expect"),
    [
        (
            '[policy]\nkind = "progressive"\nwarn_fracc = 0.5\n',
            [],
            "[policy]: unknown parameter of policy 'progressive' 'warn_fracc'; did you mean 'warn_frac'?",
        ),
        ("[policy]\nwarn_frac = 0.5\n", [], "expected a [policy] table with a kind"),
        ('[policy\nkind = "x"\n', [], "not a policy file (TOML with a [policy] table, or JSON)"),
        ('[policy]\nkind = "progressive"\n', ["--policy", "hybrid"], "--policy hybrid conflicts with --policy-file"),
    ],
)
def test_a_bad_policy_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, extra: list[str], expect: str
) -> None:
    f = tmp_path / "p.toml"
    f.write_text(text)
    assert (
        main(["run", "--task", "synthetic:small", "--policy-file", str(f), *extra, "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0] and ("p.toml" in err[0] or "--policy" in expect), err
    assert not (tmp_path / "o").exists()
