"""Sweeps and the results store: spec validation, parallel runs, resume after a kill, failed
cells, Dask, and the reader's refusals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from h9eval.core.errors import ConfigError, FormatError
from h9eval.results.store import TABLES, drop_execution_columns, load_results
from h9eval.sweeps.cells import expand_cells
from h9eval.sweeps.spec import load_spec
from h9eval.sweeps.sweep import SweepFailed, sweep

ROOT = Path(__file__).resolve().parents[2]
SMALLEST_SWE = "data/recorded/swe-agent/pydicom__pydicom-1458.traj"  # 25 messages, 12 calls


def _has_synthetic() -> bool:
    try:
        import h9eval.tasks.synthetic  # noqa: F401
    except ImportError:
        return False
    return True


def _has_probes() -> bool:
    try:
        from h9eval.probes import make_scorer

        make_scorer("recall")
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def task_source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two tiny synthetic tasks: the generator's 'small' preset, else a task JSONL built here."""
    if _has_synthetic():
        return {"synthetic": [{"preset": "small", "seeds": [0, 1]}]}
    from h9eval.core.messages import Message, ToolCall
    from h9eval.tasks import Intent, Task, TaskSource, tasks_to_jsonl

    tasks = []
    for s in range(2):
        msgs = [Message("system", "sys"), Message("user", f"fix bug {s}")]
        for i in range(30):
            msgs.append(Message("assistant", f"step {i}", (ToolCall(f"c{i}", "bash", "{}"),)))
            msgs.append(Message("user", ("output line\n" * (200 + 40 * i)), (), f"c{i}"))
        msgs.append(Message("assistant", "done"))
        tasks.append(
            Task(
                task_id=f"tiny-{s}",
                messages=tuple(msgs),
                intent=Intent(statement=f"fix bug {s}"),
                source=TaskSource(kind="synthetic"),
            )
        )
    path = tasks_to_jsonl(tasks, tmp_path_factory.mktemp("tasks") / "tiny.jsonl")
    return {"specs": [str(path)]}


@pytest.fixture(scope="module")
def spec(task_source: dict[str, Any], shared: Path) -> dict[str, Any]:
    """3 tasks × (2 progressive points + keep_all) × 2 history modes = 18 cells; one more grid
    point (warn_frac 0.75 >= soft_frac 0.7) is invalid and skipped."""
    d: dict[str, Any] = {
        "name": "t-sweep",
        "window": 16000,
        "tasks": {**task_source, "recorded": [str(shared / SMALLEST_SWE)]},
        "policies": [
            {
                "kind": "progressive",
                "params": {"context_window_tokens": 16000},
                "grid": {"warn_frac": [0.5, 0.6, 0.75]},
            },
            {"kind": "keep_all"},
        ],
        "history_modes": ["view", "write_back"],
        "skip_invalid": True,
    }
    if _has_probes():
        d["probes"] = {"scorers": ["recall"], "every_k": 10}
    return d


@pytest.fixture(scope="module")
def reference(spec: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "t-sweep"
    r = sweep(spec, out_dir=out, workers=2, progress=False)
    assert (r.n_cells, r.ok, r.failed, r.ran, len(r.skipped)) == (18, 18, 0, 18, 1)
    return out


def _tables(path: Path) -> dict[str, Any]:
    res = load_results(path)
    return {n: drop_execution_columns(getattr(res, n), n) for n in TABLES}


def _assert_same_tables(a: Path, b: Path) -> None:
    import pandas.testing as pdt

    ta, tb = _tables(a), _tables(b)
    for n in TABLES:
        pdt.assert_frame_equal(ta[n], tb[n], check_dtype=True, obj=n)


# -- spec parsing and validation ------------------------------------------------------------
def test_toml_spec_parses_with_relative_paths_and_env(
    tmp_path: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H9EVAL_SHARED", str(shared))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cache.sqlite").touch()
    p = tmp_path / "s.toml"
    p.write_text(
        'name = "x"\nrepeats = 2\n[tasks]\nrecorded = ["${H9EVAL_SHARED}/' + SMALLEST_SWE + '"]\n'
        'specs = ["synthetic:small:3"]\n'
        '[[policies]]\nkind = "progressive"\ngrid = { warn_frac = [0.5, 0.6], min_tail_messages = [4, 6] }\n'
        '[summarizer]\nvariants = ["offline", "offline_free_text"]\ncache = "sub/cache.sqlite"\n'
    )
    sp = load_spec(p)
    assert sp.recorded == (str((shared / SMALLEST_SWE).resolve()),)
    assert sp.summarizer_cache == str((tmp_path / "sub" / "cache.sqlite").resolve())
    assert sp.policies[0].points()[1] == {"warn_frac": 0.5, "min_tail_messages": 6}
    assert sp.history_modes == ("view",) and sp.repeats == 2
    if _has_synthetic():
        cells, skipped = expand_cells(sp, out_dir=tmp_path / "out")
        # 2 tasks × 4 grid points × 2 summarizers × 1 mode × 2 repeats
        assert len(cells) == 32 and not skipped
        assert len({c.run_id for c in cells}) == 32
        assert {c.summarizer_cache for c in cells} == {
            str((tmp_path / "sub" / "cache.sqlite").resolve()),
            str((tmp_path / "sub" / "cache.r1.sqlite").resolve()),
        }


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text('name = "x"\n[tasks\n')
    with pytest.raises(FormatError, match=r"bad\.toml: not valid TOML"):
        load_spec(p)


def _base(shared: Path) -> dict[str, Any]:
    return {"name": "v", "tasks": {"recorded": [str(shared / SMALLEST_SWE)]}, "policies": [{"kind": "keep_all"}]}


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        ({"polices": []}, r"unknown top-level key 'polices'; did you mean 'policies'"),
        ({"name": "a/b"}, r"^name: must start with a letter"),
        ({"name": None}, r"^name: must start"),
        ({"tasks": {"recordd": []}}, r"^tasks\.recordd: unknown key 'recordd'; did you mean 'recorded'"),
        ({"tasks": {}}, r"^tasks: no tasks given"),
        ({"tasks": {"recorded": ["/no/such/file.traj"]}}, r"^tasks\.recorded\[0\]: no such file or folder"),
        ({"tasks": {"specs": ["nope.jsonl"]}}, r"^tasks\.specs\[0\]: no such file or folder"),
        (
            {"tasks": {"synthetic": [{"preset": "small", "sedes": [1]}]}},
            r"^tasks\.synthetic\[0\]\.sedes: unknown key 'sedes'; did you mean 'seeds'",
        ),
        (
            {"tasks": {"synthetic": [{"preset": "small", "seeds": []}]}},
            r"^tasks\.synthetic\[0\]\.seeds: expected a non-empty list",
        ),
        (
            {"tasks": {"synthetic": [{"preset": "small", "seeds": [1, 1]}]}},
            r"^tasks\.synthetic\[0\]\.seeds: must not repeat",
        ),
        ({"policies": []}, r"^policies: required"),
        (
            {"policies": [{"kind": "progresive"}]},
            r"^policies\[0\]\.kind: unknown policy 'progresive'; did you mean 'progressive'",
        ),
        ({"policies": [{"grid": {}}]}, r"^policies\[0\]\.kind: required"),
        (
            {"policies": [{"kind": "keep_all"}, {"kind": "progressive", "grid": {"warn_fracc": [0.5]}}]},
            r"^policies\[1\]\.grid\.warn_fracc: unknown parameter of policy 'progressive' 'warn_fracc'; did you mean "
            r"'warn_frac'",
        ),
        (
            {"policies": [{"kind": "progressive", "params": {"min_tail": 3}}]},
            r"^policies\[0\]\.params\.min_tail: unknown parameter of policy 'progressive' 'min_tail'; did you mean "
            r"'min_tail_messages'",
        ),
        (
            {"policies": [{"kind": "progressive", "gird": {}}]},
            r"^policies\[0\]\.gird: unknown key 'gird'; did you mean 'grid'",
        ),
        (
            {"policies": [{"kind": "progressive", "grid": {"warn_frac": 0.5}}]},
            r"^policies\[0\]\.grid\.warn_frac: expected a non-empty list",
        ),
        (
            {"policies": [{"kind": "progressive", "grid": {"warn_frac": [0.5]}, "params": {"warn_frac": 0.4}}]},
            r"^policies\[0\]\.grid\.warn_frac: is also set in params",
        ),
        (
            {"history_modes": ["view", "writeback"]},
            r"^history_modes\[1\]: unknown history mode 'writeback'; did you mean 'write_back'",
        ),
        ({"history_modes": ["view", "view"]}, r"^history_modes: must not repeat"),
        (
            {"summarizer": {"variants": ["offline", "ofline_free_text"]}},
            r"^summarizer\.variants\[1\]: unknown summarizer 'ofline_free_text'; did you mean 'offline_free_text'",
        ),
        ({"summarizer": {"name": "offlin"}}, r"^summarizer\.name: unknown summarizer 'offlin'; did you mean 'offline'"),
        ({"summarizer": {"nmae": "offline"}}, r"^summarizer\.nmae: unknown key 'nmae'; did you mean 'name'"),
        ({"summarizer": {"name": "offline", "variants": ["offline"]}}, r"^summarizer: give name or variants"),
        (
            {"summarizer": {"params": {"max_itemz": 3}}},
            r"^summarizer\.params\.max_itemz: unknown parameter of summarizer 'offline' 'max_itemz'",
        ),
        ({"probes": {"every_k": 0}}, r"^probes\.every_k: must be a positive integer"),
        ({"probes": {"scorer": ["recall"]}}, r"^probes\.scorer: unknown key 'scorer'; did you mean 'scorers'"),
        ({"repeats": 0}, r"^repeats: must be an integer >= 1"),
        ({"repeats": True}, r"^repeats: must be an integer >= 1"),
        ({"window": -5}, r"^window: must be an integer >= 1,000 \(tokens\)"),
        ({"window": 999}, r"^window: must be an integer >= 1,000 \(tokens\)"),
        ({"history_modes": "view"}, r"^history_modes: expected a list of history modes"),
        ({"writeback_rules": "v4"}, r"^writeback_rules: must be 'v2' or 'v3'"),
        ({"skip_invalid": "yes"}, r"^skip_invalid: must be true or false"),
    ],
)
def test_spec_errors_name_the_key_path(shared: Path, patch: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_spec({**_base(shared), **patch})


@pytest.mark.skipif(not _has_probes(), reason="h9eval.probes not available")
def test_unknown_scorer_names_the_key_path(shared: Path) -> None:
    with pytest.raises(ConfigError, match=r"^probes\.scorers\[0\]: .*unknown scorer 'recal'; did you mean 'recall'"):
        load_spec({**_base(shared), "probes": {"scorers": ["recal"]}})


def test_invalid_grid_cell_names_the_cell_or_is_skipped(shared: Path, tmp_path: Path) -> None:
    d = {
        **_base(shared),
        "policies": [
            {"kind": "keep_all"},
            {"kind": "progressive", "grid": {"warn_frac": [0.5, 0.8], "soft_frac": [0.7]}},
        ],
    }
    with pytest.raises(
        ConfigError, match=r"^policies\[1\] cell \{warn_frac=0\.8, soft_frac=0\.7\}: .*warn_frac.*must be < soft_frac"
    ):
        expand_cells(load_spec(d), out_dir=tmp_path)
    cells, skipped = expand_cells(load_spec(d), out_dir=tmp_path, skip_invalid=True)
    assert len(cells) == 2
    assert [s.where for s in skipped] == ["policies[1] cell {warn_frac=0.8, soft_frac=0.7}"]
    cells2, skipped2 = expand_cells(load_spec({**d, "skip_invalid": True}), out_dir=tmp_path)
    assert [c.run_id for c in cells2] == [c.run_id for c in cells] and skipped2 == skipped


def test_a_task_listed_twice_is_one_task(shared: Path, tmp_path: Path) -> None:
    d = {**_base(shared), "tasks": {"recorded": [str(shared / SMALLEST_SWE)] * 2}}
    once = {**_base(shared), "tasks": {"recorded": [str(shared / SMALLEST_SWE)]}}
    dups: list[Any] = []
    cells, _ = expand_cells(load_spec(d), out_dir=tmp_path, duplicates=dups)
    assert [c.run_id for c in cells] == [c.run_id for c in expand_cells(load_spec(once), out_dir=tmp_path)[0]]
    assert [(x.where, x.same_as_where) for x in dups] == [("tasks.recorded[1]", "tasks.recorded[0]")]


# -- running --------------------------------------------------------------------------------
def test_sweep_runs_in_workers_and_loads(reference: Path, spec: dict[str, Any]) -> None:
    res = load_results(reference)
    assert not res.from_parts
    runs = res.runs
    assert len(runs) == 18 and set(runs["status"]) == {"ok"}
    assert runs["run_id"].is_unique and list(runs["run_id"]) == sorted(runs["run_id"])
    assert set(runs["history_mode"]) == {"view", "write_back"}
    prog = runs[runs["policy_kind"] == "progressive"]
    assert (prog["n_compactions"] > 0).all(), "the window must make every progressive cell compact"
    assert (prog["summarizer_calls"] > 0).any()
    assert set(json.loads(g)["warn_frac"] for g in prog["grid_json"]) == {0.5, 0.6}
    # per-call rows add up to the headline numbers, with no duplicates
    assert len(res.calls) == int(runs["calls"].sum())
    assert not res.calls.duplicated(["run_id", "call_index"]).any()
    assert (
        res.calls.groupby("run_id")["compacted"].sum().reindex(runs["run_id"]).tolist()
        == runs["n_compactions"].tolist()
    )
    assert len(res.compactions) > 0 and not res.compactions.duplicated(["run_id", "record_index"]).any()
    if "probes" in spec:
        assert len(res.probes) == int(runs["probe_rows"].sum()) > 0
    m = res.manifest
    assert m["schema_version"] == 2 and m["kind"] == "sweep" and m["name"] == "t-sweep"
    assert {"git_commit", "git_dirty", "packages", "h9eval_version"} <= set(m["provenance"])
    assert m["spec"]["policies"][0]["grid"]["warn_frac"] == [0.5, 0.6, 0.75]  # as passed
    assert m["spec_resolved"]["summarizer_cache"] == str(reference / "summary_cache.sqlite")
    assert len(m["cells"]) == 18 and {"run_id", "cell_hash", "task_id", "policy_name", "spec"} <= set(m["cells"][0])
    assert {"task", "policy", "window", "history_mode", "summarizer", "probes"} <= set(m["cells"][0]["spec"])
    assert [s["grid"] for s in m["skipped"]] == [{"warn_frac": 0.75}] and len(res.skipped) == 1
    assert m["status"]["state"] == "finished" and m["status"]["ok"] == 18
    assert (reference / "summary_cache.sqlite").exists()
    wide = res.runs_with_params()
    assert set(wide["param.warn_frac"].dropna()) == {0.5, 0.6}


def test_resume_after_kill_gives_the_same_tables(reference: Path, spec: dict[str, Any], tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(_to_toml(spec))
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "h9eval",
        "sweep",
        str(spec_file),
        "--out",
        str(out),
        "--workers",
        "2",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    markers = lambda: list(out.glob("cells/*/run.parquet"))  # noqa: E731
    deadline = time.monotonic() + 60
    while len(markers()) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker processes
    proc.wait()
    n_at_kill = len(markers())
    assert 3 <= n_at_kill < 18, f"kill must land mid-sweep (markers: {n_at_kill})"
    assert not (out / "consolidated.json").exists()
    partial = load_results(out)  # readable mid-sweep, from the cell parts
    assert partial.from_parts and len(partial.runs) == n_at_kill and len(partial.pending()) == 18 - n_at_kill

    rerun = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert "18 cells: 18 ok, 0 failed, 1 skipped" in rerun.stdout
    assert f"{18 - n_at_kill} run now, {n_at_kill} reused" in rerun.stdout
    assert f"results: {out}" in rerun.stdout
    _assert_same_tables(reference, out)
    res = load_results(out)
    assert not res.calls.duplicated(["run_id", "call_index"]).any() and res.runs["run_id"].is_unique
    assert len(res.manifest["invocations"]) == 2


def test_failed_cell_is_recorded_and_rerun_on_resume(shared: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "prompts.json"  # missing at first: the cell fails when it summarises
    d = {
        **_base(shared),
        "name": "fails",
        "window": 3000,
        "policies": [
            {
                "kind": "progressive",
                "params": {"context_window_tokens": 3000},
                "grid": {"prompt_file": [None, str(prompt)]},
            }
        ],
    }
    out = tmp_path / "out"
    r = sweep(d, out_dir=out, workers=2, progress=False, on_failure="return")
    assert (r.ok, r.failed) == (1, 1)
    [(rid, err)] = r.failures
    assert "ConfigError: prompt file" in err
    res = load_results(out)
    failed = res.failed
    assert failed["run_id"].tolist() == [rid] and failed["calls"].isna().all()
    assert set(res.calls["run_id"]) == set(res.ok["run_id"])  # no partial rows of the failed cell

    prompt.write_text(json.dumps({"system": "Summarise."}))
    r2 = sweep(d, out_dir=out, workers=0, progress=False)
    assert (r2.ok, r2.failed, r2.ran, r2.reused) == (2, 0, 1, 1)
    res2 = load_results(out)
    assert set(res2.runs["status"]) == {"ok"} and rid in set(res2.calls["run_id"])


def test_monkeypatched_crash_fails_only_its_cell(shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import h9eval.sweeps.worker as sw

    real = sw.execute

    def flaky(spec: Any, env: Any) -> Any:
        if spec.history_mode == "write_back":
            raise RuntimeError("boom")
        return real(spec, env)

    monkeypatch.setattr(sw, "execute", flaky)
    d = {**_base(shared), "history_modes": ["view", "write_back"]}
    with pytest.raises(SweepFailed, match=r"sweep \S+: 1 of 2 cells failed; first: .*RuntimeError: boom") as failed:
        sweep(d, out_dir=tmp_path / "o", workers=0, progress=False)  # a failure the caller cannot miss
    r = failed.value.result
    assert (r.ok, r.failed) == (1, 1) and r.failures[0][1].startswith("RuntimeError: boom")
    monkeypatch.setattr(sw, "execute", real)
    r2 = sweep(d, out_dir=tmp_path / "o", workers=0, progress=False)
    assert (r2.ok, r2.ran, r2.reused) == (2, 1, 1)


def test_resume_reruns_cells_when_h9eval_code_changed(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import h9eval.core.provenance as prov

    d = {**_base(shared), "history_modes": ["view", "write_back"]}
    out = tmp_path / "o"

    def manifest_cells() -> list[dict[str, Any]]:
        return json.loads((out / "manifest.json").read_text())["cells"]

    def run_hashes() -> set[str]:
        return set(load_results(out).runs["cell_hash"])

    r1 = sweep(d, out_dir=out, workers=0, progress=False)
    assert (r1.ok, r1.ran, r1.reused) == (2, 2, 0)
    real = prov.source_hash()
    assert {(c["h9eval_version"], c["source_hash"]) for c in manifest_cells()} == {(prov.h9eval_version(), real)}
    hashes1 = run_hashes()

    r2 = sweep(d, out_dir=out, workers=0, progress=False)  # same code: both cells kept
    assert (r2.ok, r2.ran, r2.reused) == (2, 0, 2) and run_hashes() == hashes1

    monkeypatch.setattr(prov, "source_hash", lambda: "0" * 64)  # h9eval's source changed
    r3 = sweep(d, out_dir=out, workers=0, progress=False)
    assert (r3.ok, r3.ran, r3.reused) == (2, 2, 0)
    assert {c["source_hash"] for c in manifest_cells()} == {"0" * 64}
    assert json.loads((out / "manifest.json").read_text())["source_hash"] == "0" * 64
    hashes3 = run_hashes()
    assert hashes3.isdisjoint(hashes1) and hashes3 == {c["cell_hash"] for c in manifest_cells()}

    r4 = sweep(d, out_dir=out, workers=0, progress=False)  # unchanged again: reused
    assert (r4.ran, r4.reused) == (0, 2)

    monkeypatch.setattr(prov, "h9eval_version", lambda: "999.0")  # a new release, same source
    r5 = sweep(d, out_dir=out, workers=0, progress=False)
    assert (r5.ran, r5.reused) == (2, 0) and {c["h9eval_version"] for c in manifest_cells()} == {"999.0"}


def test_tree_hash_covers_every_py_file_by_relative_path(tmp_path: Path) -> None:
    from h9eval.core.provenance import source_hash, tree_hash

    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "pkg").mkdir(parents=True)
        (root / "x.py").write_text("X = 1\n")
        (root / "pkg" / "y.py").write_text("Y = 2\n")
    h = tree_hash(a)
    assert h == tree_hash(b)  # the checkout's location does not matter
    (a / "notes.txt").write_text("not code")
    (a / "pkg" / "y.pyc").write_bytes(b"\0")
    assert tree_hash(a) == h
    (a / "pkg" / "y.py").write_text("Y = 3\n")
    assert tree_hash(a) != h
    (a / "pkg" / "y.py").write_text("Y = 2\n")
    (a / "pkg" / "y.py").rename(a / "pkg" / "z.py")
    assert tree_hash(a) != h
    (a / "pkg" / "z.py").rename(a / "pkg" / "y.py")
    (a / "pkg" / "new.py").write_text("")
    assert tree_hash(a) != h
    assert source_hash() == tree_hash(ROOT / "h9eval")


def test_dask_local_cluster_gives_the_same_tables(reference: Path, spec: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    r = sweep(spec, out_dir=tmp_path / "dask", workers=2, scheduler="local", progress=False)
    assert (r.ok, r.failed) == (18, 0)
    _assert_same_tables(reference, tmp_path / "dask")


def _consolidated_bytes(out: Path) -> dict[str, bytes]:
    return {n: (out / f"{n}.parquet").read_bytes() for n in TABLES}


@pytest.mark.parametrize("workers", [0, 2])
def test_streamed_consolidation_writes_the_bytes_of_a_consolidation_at_the_end(
    spec: dict[str, Any], tmp_path: Path, workers: int
) -> None:
    """The tables taken in cell by cell while the sweep runs (handed over in process, read back
    from a pool) are the bytes a consolidation of the finished folder writes."""
    from h9eval.results.store import consolidate, read_manifest

    out = tmp_path / "s"
    sweep(spec, out_dir=out, workers=workers, progress=False)
    streamed = _consolidated_bytes(out)
    consolidate(out, read_manifest(out))
    assert _consolidated_bytes(out) == streamed


def test_a_part_copied_into_a_reused_cell_is_refused_at_consolidation(spec: dict[str, Any], tmp_path: Path) -> None:
    """A resumed sweep reads its reused cells at the end, with the part checks of the reader."""
    out = tmp_path / "s"
    sweep(spec, out_dir=out, workers=0, progress=False)
    a, b = sorted((out / "cells").iterdir())[:2]
    shutil.copyfile(a / "calls.parquet", b / "calls.parquet")
    with pytest.raises(FormatError, match=r"calls\.parquet: cell part holds rows of run .*; expected only"):
        sweep(spec, out_dir=out, workers=0, progress=False)


def test_a_part_handed_over_with_another_cells_rows_is_not_taken_in(spec: dict[str, Any], tmp_path: Path) -> None:
    """The tables a cell hands over in process pass the same checks as those read from disk:
    one holding another cell's rows is dropped, and the cell read from its folder instead."""
    from h9eval.results.io import read_arrow
    from h9eval.results.store import Consolidation, read_manifest

    out = tmp_path / "s"
    sweep(spec, out_dir=out, workers=0, progress=False)
    m = read_manifest(out)
    expected = _consolidated_bytes(out)
    a, b = sorted((out / "cells").iterdir())[:2]
    written = {n: read_arrow(b / f"{n}.parquet", n) for n in ("calls", "compactions", "probes")}
    written["calls"] = read_arrow(a / "calls.parquet", "calls")
    written["runs"] = read_arrow(b / "run.parquet", "runs")
    c = Consolidation(out, m)
    c.add(written["runs"].column("run_id")[0].as_py(), written)
    c.finish()
    assert _consolidated_bytes(out) == expected


# -- the reader -----------------------------------------------------------------------------
def test_stale_consolidated_tables_are_bypassed(reference: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    (copy / "consolidated.json").write_text(json.dumps({"fingerprint": "old"}))
    res = load_results(copy)
    assert res.from_parts
    _assert_same_tables(reference, copy)


def test_load_results_refuses_unknown_versions_and_foreign_folders(
    reference: Path, tmp_path: Path, shared: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    m = json.loads((copy / "manifest.json").read_text())
    m["schema_version"] = 99
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(
        FormatError,
        match=r"manifest\.json: manifest schema_version 99 is not supported; this h9eval reads schema_version 1",
    ):
        load_results(copy)

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("hello")
    with pytest.raises(FormatError, match=r"foreign: no manifest\.json; not an h9eval sweep"):
        load_results(foreign)
    with pytest.raises(FormatError, match=r"foreign: folder exists, is not empty and has no manifest\.json"):
        sweep(_base(shared), out_dir=foreign)
    (foreign / "manifest.json").write_text("{not json")
    with pytest.raises(FormatError, match=r"manifest\.json:line 1: manifest is not JSON"):
        load_results(foreign)
    (foreign / "manifest.json").write_text(json.dumps({"schema_version": 1, "kind": "run"}))
    with pytest.raises(FormatError, match=r"not an h9eval sweep manifest"):
        load_results(foreign)

    broken = tmp_path / "broken"
    shutil.copytree(reference, broken)
    (broken / "consolidated.json").unlink()
    victim = sorted(broken.glob("cells/*/calls.parquet"))[0]
    victim.write_bytes(b"garbage")
    with pytest.raises(FormatError, match=rf"{victim.name}: not a readable parquet table"):
        load_results(broken)

    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(victim.with_name("run.parquet"))
    t = t.replace_schema_metadata({**(t.schema.metadata or {}), b"h9eval_schema_version": b"7"})
    pq.write_table(t, victim.with_name("run.parquet"))
    with pytest.raises(
        FormatError,
        match=r"run\.parquet: runs table schema_version 7 is not supported; this h9eval reads schema_version 1",
    ):
        load_results(broken)
    pq.write_table(pa.table({"a": [1]}), victim.with_name("run.parquet"))
    with pytest.raises(FormatError, match=r"run\.parquet: parquet file lacks h9eval_schema_version"):
        load_results(broken)


# -- helpers --------------------------------------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def _to_toml(d: dict[str, Any]) -> str:
    """Enough TOML for the test spec (inline tables; no tomli_w dependency)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in d.items() if not isinstance(v, dict | list) or k == "history_modes"]
    for k, v in d.items():
        if isinstance(v, dict):
            lines.append(f"[{k}]")
            lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items()]
    for p in d["policies"]:
        lines.append("[[policies]]")
        lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in p.items()]
    return "\n".join(lines) + "\n"


def test_resume_reuses_a_cell_only_when_its_hash_is_equal(shared: Path, tmp_path: Path) -> None:
    """The run ids stay the same when the window or the probe grid changes (neither is in the
    id): only the cell hash tells the finished cell is stale. A resume that ignored it would
    reuse both cells and keep the old window in the tables."""
    d = {**_base(shared), "history_modes": ["view", "write_back"], "window": 9000}
    out = tmp_path / "o"
    r1 = sweep(d, out_dir=out, workers=0, progress=False)
    assert (r1.ran, r1.reused) == (2, 0)
    ids1 = set(load_results(out).runs["run_id"])
    r2 = sweep({**d, "window": 7000}, out_dir=out, workers=0, progress=False)
    res = load_results(out)
    assert set(res.runs["run_id"]) == ids1, "the test needs run ids that do not change"
    assert (r2.ran, r2.reused) == (2, 0)
    assert set(res.calls["context_window_tokens"]) == {7000}
    r3 = sweep({**d, "window": 7000}, out_dir=out, workers=0, progress=False)
    assert (r3.ran, r3.reused) == (0, 2)


def test_window_peak_frac_sizes_every_policys_window_per_task(shared: Path, tmp_path: Path) -> None:
    """window = { peak_frac = 0.5 }: each task's window is half its uncompacted peak, for every
    policy (progressive left at its default included), so harness9's default compacts on every
    task; a policy entry that sets its own window is refused at parse time."""
    from h9eval.runs.window import peak_frac_window
    from h9eval.tasks import load_tasks_from_spec

    spec = {
        "name": "peak",
        "tasks": {"recorded": [str(shared / SMALLEST_SWE)], "synthetic": [{"preset": "small", "seeds": [0]}]},
        "window": {"peak_frac": 0.5},
        "policies": [{"kind": "progressive"}, {"kind": "keep_all"}],
    }
    out = tmp_path / "o"
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert (r.ok, r.failed) == (4, 0)
    res = load_results(out)
    want = {
        t.task_id: peak_frac_window(t, 0.5)
        for s in (str(shared / SMALLEST_SWE), "synthetic:small:0")
        for t in load_tasks_from_spec(s)
    }
    got = res.calls.groupby("task_id")["context_window_tokens"].unique().to_dict()
    assert {k: list(v) for k, v in got.items()} == {k: [w] for k, w in want.items()}
    prog = res.runs[res.runs["policy_kind"] == "progressive"]
    assert (prog["n_compactions"] > 0).all() and prog["params_hash"].nunique() == 1
    assert "context_window_tokens" not in json.loads(prog["params_json"].iloc[0])
    manifest = json.loads((out / "manifest.json").read_text())
    assert {c["spec"]["window"]["peak_frac"] for c in manifest["cells"]} == {0.5}
    with pytest.raises(
        ConfigError, match=r"^policies\[0\]\.params\.context_window_tokens: conflicts with window\.peak_frac"
    ):
        load_spec({**spec, "policies": [{"kind": "progressive", "params": {"context_window_tokens": 8000}}]})
    for bad in ({"peak_frac": 0}, {"peak_frac": 2}, {"peak_frac": True}):
        with pytest.raises(ConfigError, match=r"^window\.peak_frac: must be a number in \(0, 1\]"):
            load_spec({**spec, "window": bad})
    with pytest.raises(ConfigError, match=r"^window\.peak_fracc: unknown key"):
        load_spec({**spec, "window": {"peak_fracc": 0.5}})
