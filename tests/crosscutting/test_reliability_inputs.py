"""Degenerate inputs and a hostile environment: one line on stderr, exit 2, no traceback, no
hang, no unbounded work (issue 20 §4)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.core.messages import Message
from h9eval.tasks import Intent, Task, TaskSource, tasks_to_jsonl

ROOT = Path(__file__).resolve().parents[2]

SPEC = """name = "tiny"
window = 16000
history_modes = ["view"]
{extra}
[tasks]
synthetic = [{{ preset = "small", seeds = {seeds} }}]
[[policies]]
kind = "progressive"
params = {{ context_window_tokens = 16000 }}
"""


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], *, match: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err[:2000]
    assert match in err, err
    return err


def _spec(tmp_path: Path, *, extra: str = "", seeds: str = "[0]") -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SPEC.format(extra=extra, seeds=seeds))
    return p


def test_devices_and_fifos_are_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for task in ("/dev/zero", "/dev/urandom", str(fifo)):
        for argv in (["run", "--task", task, "--out", str(tmp_path / "o")], ["tasks", "inspect", task]):
            # A subprocess with a timeout: before the fix /dev/zero ate the memory and a FIFO hung.
            p = subprocess.run(
                [sys.executable, "-m", "h9eval", *argv], env=env, capture_output=True, text=True, timeout=120
            )
            assert p.returncode == 2 and p.stderr.count("\n") == 1, (argv, p.stderr[:500])
            assert "not a regular file or a folder" in p.stderr
    assert not (tmp_path / "o").exists()


def test_the_input_size_limit_is_configurable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", "--out", str(p)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("H9EVAL_MAX_INPUT_BYTES", "1000")
    _one_line(capsys, ["tasks", "inspect", str(p)], match="above the limit of 1,000 (set H9EVAL_MAX_INPUT_BYTES")
    monkeypatch.setenv("H9EVAL_MAX_INPUT_BYTES", str(10**9))
    assert main(["tasks", "inspect", str(p)]) == 0


def test_a_path_with_a_hash_is_a_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "issue#42.jsonl"
    assert main(["tasks", "generate", "--out", str(p)]) == 0
    assert main(["run", "--task", str(p), "--window", "16000", "--out", str(tmp_path / "o")]) == 0
    assert "calls: 40" in capsys.readouterr().out


def test_tasks_inspect_of_a_folder_speaks_to_a_cli_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "generate", "--out", str(tmp_path / "a.jsonl")]) == 0
    capsys.readouterr()
    err = _one_line(capsys, ["tasks", "inspect", str(tmp_path)], match="folder is not an OpenHands conversation")
    assert "load_tasks()" not in err and "h9eval run --task FOLDER" in err


def test_a_session_without_an_assistant_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = Task(
        task_id="quiet",
        messages=(Message("system", "s"), Message("user", "hello")),
        intent=Intent(statement="hello"),
        source=TaskSource(kind="synthetic"),
    )
    p = tasks_to_jsonl([t], tmp_path / "quiet.jsonl")
    rc = main(["run", "--task", str(p), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc in (0, 2) and "Traceback" not in err and "KeyError" not in err


def test_deeply_nested_toml_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "deep.toml"
    p.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")  # 4 KB
    _one_line(capsys, ["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress"], match="h9eval sweep: error:")


def test_a_huge_variable_expansion_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("H9EVAL_HUGE", "x" * 100_000)
    p = tmp_path / "s.toml"
    p.write_text(
        SPEC.format(extra="", seeds="[0]").replace(
            'synthetic = [{ preset = "small", seeds = [0] }]', 'recorded = ["${H9EVAL_HUGE}"]'
        )
    )
    _one_line(capsys, ["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress"], match="h9eval sweep: error:")


@pytest.mark.parametrize(
    "extra, seeds",
    [("repeats = 1000000", "[0]"), ("", "[" + ", ".join(map(str, range(200_000))) + "]")],
    ids=["a-million-repeats", "200k-seeds"],
)
def test_huge_grids_are_refused_before_planning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, seeds: str
) -> None:
    spec = _spec(tmp_path, extra=extra, seeds=seeds)
    _one_line(
        capsys, ["sweep", str(spec), "--out", str(tmp_path / "o"), "--no-progress"], match="above max_cells=100,000"
    )
    assert not (tmp_path / "o").exists()


def test_max_cells_lowers_and_raises_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, seeds="[0, 1]")
    _one_line(
        capsys,
        ["sweep", str(spec), "--out", str(tmp_path / "o"), "--no-progress", "--max-cells", "1"],
        match="at least 2 cells, above max_cells=1",
    )
    assert (
        main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "0", "--no-progress", "--max-cells", "2"])
        == 0
    )


def test_a_cell_folder_replaced_by_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path)
    out = tmp_path / "o"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"]) == 0
    capsys.readouterr()
    (cell,) = (out / "cells").iterdir()
    for f in cell.iterdir():
        f.unlink()
    cell.rmdir()
    cell.write_text("not a folder\n")
    _one_line(
        capsys, ["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"], match="is not a folder"
    )


def test_a_full_disk_in_a_sweep_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import h9eval.results.store as store

    def enospc(df: object, path: Path, table: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(store, "write_table", enospc)
    spec = _spec(tmp_path)
    err = _one_line(
        capsys,
        ["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "0", "--no-progress"],
        match="No space left on device",
    )
    assert "[OSError]" in err


def test_nan_in_a_recorded_session_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from h9eval.core.paths import shared_dir

    src = shared_dir() / "data/recorded/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    if not src.is_file():
        pytest.skip("shared recorded data not available")
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)[:40]
    lines[5] = lines[5].rstrip().removesuffix("}") + ', "costUSD": NaN}\n'
    p = tmp_path / "nan.jsonl"
    p.write_text("".join(lines), encoding="utf-8")
    _one_line(capsys, ["tasks", "inspect", str(p)], match="NaN is not a JSON value")


def test_a_harness9_database_with_deeply_nested_tool_calls_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from h9eval.core.messages import ToolCall
    from h9eval.harness9.session_store import SessionStore

    db = tmp_path / "h9.db"
    s = SessionStore(db)
    s.create_session("s1", title="t")
    s.add_messages(
        "s1",
        [
            Message("user", "hi"),
            Message("assistant", "", (ToolCall("c1", "bash", "{}"),)),
            Message("user", "out", (), "c1"),
        ],
    )
    s.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE messages SET tool_calls = ? WHERE role = 'assistant'", ("[" * 100_000 + "]" * 100_000,))
    con.commit()
    con.close()
    _one_line(capsys, ["run", "--task", f"{db}#s1", "--out", str(tmp_path / "o")], match="JSON nested too deeply")


def test_a_quadratic_probe_grid_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Probe rows grow with checkpoints x live probes: a long task probed every few calls used to
    run for hours. The grid is counted first, refused in one line naming a probe_every_k that
    fits, and the limit can be raised."""
    out = tmp_path / "o"
    err = _one_line(
        capsys,
        [
            "run",
            "--task",
            "synthetic:long:0",
            "--probes",
            "recall",
            "--probe-every",
            "1",
            "--max-probes",
            "500",
            "--out",
            str(out),
        ],
        match="above max_probes=500",
    )
    assert "probe every" in err and not out.exists()
    assert (
        main(
            [
                "run",
                "--task",
                "synthetic:small:0",
                "--probes",
                "recall",
                "--probe-every",
                "1",
                "--max-probes",
                "100000",
                "--out",
                str(out),
            ]
        )
        == 0
    )


def test_the_uncompacted_history_is_searched_once_per_term() -> None:
    """Marking probes answerable searched the whole history prefix again at every checkpoint
    (quadratic in the session); the prefixes now share one text and each term's occurrences."""
    from h9eval.probes.probe import history_index, probes_for
    from h9eval.tasks.synthetic import generate

    task = generate("long", seed=0)
    a, b = history_index(task, 40), history_index(task, len(task.messages) - 1)
    assert a.whole is b.whole and a.text == b.text[: len(a.text)]  # type: ignore[attr-defined]
    probes_for(task, 40)
    searched = dict(a.whole._occ)  # type: ignore[attr-defined]
    probes_for(task, 41)
    assert searched and all(a.whole._occ[t] is occ for t, occ in searched.items())  # type: ignore[attr-defined]


class _CountingStr(str):
    counts = 0

    def count(self, *a: object) -> int:  # type: ignore[override]
        _CountingStr.counts += 1
        return super().count(*a)  # type: ignore[arg-type]


def _line_events(fn: object, *args: object) -> int:
    n = 0

    def tracer(frame: object, event: str, arg: object) -> object:
        nonlocal n
        if event == "line":
            n += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn(*args)  # type: ignore[operator]
    finally:
        sys.settrace(None)
    return n


def test_key_term_extraction_is_linear_in_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4 MB prompt took 118 s: every match was checked against every earlier path span, and
    each hyphenated match counted its term in the whole text again. The work (Python lines
    run, and whole-text counts) now grows with the text, not with its square."""
    from h9eval.tasks import keyterms
    from h9eval.tasks.keyterms import extract_key_terms

    def prompt(n: int) -> str:
        return " ".join(
            f"see src/pkg{i}/mod_{i}.py in lib/make-target-{i % 50}/x.py and ValueError{i}" for i in range(n)
        )

    small, large = _line_events(extract_key_terms, prompt(200)), _line_events(extract_key_terms, prompt(800))
    assert large < 6 * small, (small, large)  # 4x the text: ~4x the lines when linear, ~16x when quadratic
    url = keyterms._URL

    class CountingURL:  # the text the extractor searches, once its URLs are blanked
        def sub(self, repl: object, text: str) -> str:
            return _CountingStr(url.sub(repl, text))  # type: ignore[call-overload]

    monkeypatch.setattr(keyterms, "_URL", CountingURL())
    _CountingStr.counts = 0
    extract_key_terms(prompt(800))
    assert 0 < _CountingStr.counts <= 50  # once per distinct hyphenated term (800 matches of 50 terms)
