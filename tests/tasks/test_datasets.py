"""Trajectory datasets through `datasets`: every adapter on its fixture (converted from the shipped
recorded sessions), rows that break the schema, samples, filters, local formats, the streamed path,
task specs, sweeps and the export as a DatasetDict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from h9eval.core.errors import ConfigError, FormatError
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.datasets import (
    ADAPTERS,
    DatasetSource,
    dataset_row_task,
    iter_dataset_tasks,
    load_dataset_tasks,
    materialize_sample,
    parse_dataset_spec,
)
from h9eval.tasks.recorded import load_tasks

FIXTURES = Path(__file__).resolve().parents[2] / "examples" / "datasets"
# fixture -> (adapter, rows that break the schema on purpose)
EXPECTED = {
    "nebius_swe_agent": ("nebius_swe_agent", 2),
    "swe_smith": ("swe_smith", 1),
    "swe_rebench_openhands": ("swe_rebench_openhands", 1),
    "swe_zero_openhands": ("swe_zero_openhands", 0),
    "swe_gym_openhands": ("swe_gym_openhands", 0),
}
N_SESSIONS = 5  # the recorded sessions the fixtures were made from (examples/datasets/make_fixtures.py)


def _rows(name: str) -> list[dict[str, Any]]:
    return pq.read_table(FIXTURES / f"{name}.parquet").to_pylist()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_adapter_loads_its_fixture_and_counts_the_broken_rows(name: str) -> None:
    adapter, n_broken = EXPECTED[name]
    sample = load_dataset_tasks(DatasetSource(path=str(FIXTURES / f"{name}.parquet")))
    assert sample.adapter == adapter
    # the sample's provenance is the dataset's (every task's adds its row and adapter)
    per_task = sample.tasks[0].metadata["dataset"]
    assert sample.provenance == {k: v for k, v in per_task.items() if k not in ("row", "adapter")}
    assert len(sample.tasks) == N_SESSIONS
    assert sum(sample.skipped.values()) == n_broken
    assert sample.rows_read == N_SESSIONS + n_broken
    for t in sample.tasks:
        assert t.source.kind == "dataset" and t.source.format == adapter
        assert t.task_id.startswith(f"{adapter}:")
        assert t.n_calls > 0 and t.intent.statement
        prov = t.metadata["dataset"]
        assert prov["adapter"] == adapter and len(prov["file_sha256"]) == 64 and isinstance(prov["row"], int)
    assert len({t.task_id for t in sample.tasks}) == N_SESSIONS


def test_skip_reasons_name_what_broke() -> None:
    sample = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "nebius_swe_agent.parquet")))
    assert any("role 'robot'" in r for r in sample.skipped)
    smith = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_smith.parquet")))
    assert list(smith.skipped) == ["messages is text that is not JSON"]
    rebench = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_rebench_openhands.parquet")))
    assert any("non-empty string 'id'" in r for r in rebench.skipped)


def test_openai_rows_give_back_the_recorded_messages(shared: Path) -> None:
    """The OpenAI-shaped fixture rows are the recorded sessions' messages: reading them back through
    the adapter must give the same transcripts (role, text, calls, result ids) as the recorded loader."""
    root = shared / "data" / "recorded"
    recorded = {
        len(t.messages): t
        for rel in ("mini-swe-agent/deepseek_chat_dev", "openhands/6e57829462844ed99b8f39e7588cdd14")
        for t in load_tasks(root / rel)
    }
    sample = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_zero_openhands.parquet")))
    matched = 0
    for t in sample.tasks:
        r = recorded.get(len(t.messages))
        if r is None:
            continue
        matched += 1
        for a, b in zip(t.messages, r.messages):
            assert (a.role, a.content, a.tool_call_id) == (b.role, b.content, b.tool_call_id)
            assert [(c.id, c.name, c.arguments) for c in a.tool_calls] == [
                (c.id, c.name, c.arguments) for c in b.tool_calls
            ]
    assert matched == 2


def test_a_dataset_matching_no_adapter_is_one_line_naming_it_and_the_column(tmp_path: Path) -> None:
    p = tmp_path / "other.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "q", "answer": "a"}]), p)
    with pytest.raises(FormatError) as e:
        load_dataset_tasks(DatasetSource(path=str(p)))
    msg = str(e.value)
    assert str(p) in msg and "missing" in msg and "answer, question" in msg and "\n" not in msg
    with pytest.raises(FormatError, match="column 'trajectory_id' missing for adapter 'swe_rebench_openhands'"):
        load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_smith.parquet"), adapter="swe_rebench_openhands"))


def test_the_sample_is_seeded_sized_and_reproducible() -> None:
    path = str(FIXTURES / "swe_rebench_openhands.parquet")
    a = [t.task_id for t in load_dataset_tasks(DatasetSource(path=path, n=3, seed=7)).tasks]
    b = [t.task_id for t in load_dataset_tasks(DatasetSource(path=path, n=3, seed=7)).tasks]
    c = [t.task_id for t in load_dataset_tasks(DatasetSource(path=path, n=3, seed=8)).tasks]
    assert a == b and len(a) == 3 and a != c
    every = [t.task_id for t in load_dataset_tasks(DatasetSource(path=path)).tasks]
    assert set(a) <= set(every)


def test_filters_keep_only_matching_rows() -> None:
    path = str(FIXTURES / "nebius_swe_agent.parquet")
    rows = _rows("nebius_swe_agent")[:N_SESSIONS]
    want = sum(1 for r in rows if r["target"])
    s = load_dataset_tasks(DatasetSource(path=path, where={"target": True}))
    assert len(s.tasks) == want and all(t.metadata["resolved"] is True for t in s.tasks)
    r = load_dataset_tasks(DatasetSource(path=path, resolved=False))
    assert len(r.tasks) == N_SESSIONS - want and r.filtered["resolved"] >= want
    calls = sorted(t.n_calls for t in load_dataset_tasks(DatasetSource(path=path)).tasks)
    m = load_dataset_tasks(DatasetSource(path=path, min_turns=calls[2]))
    assert len(m.tasks) == sum(1 for c in calls if c >= calls[2]) and m.filtered["min_turns"] > 0
    with pytest.raises(ConfigError, match="where names column 'targett'"):
        load_dataset_tasks(DatasetSource(path=path, where={"targett": True}))


def test_resolved_flags_of_each_encoding() -> None:
    # swe_zero stores 1 / 0 / -1 (not evaluated): -1 is neither resolved nor unresolved
    s = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_zero_openhands.parquet")))
    assert Counter(t.metadata["resolved"] for t in s.tasks) == Counter({True: 2, False: 2, None: 1})


def test_local_formats_parquet_jsonl_arrow_and_save_to_disk(tmp_path: Path) -> None:
    import datasets

    base = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_rebench_openhands.parquet")))
    ids = [t.task_id for t in base.tasks]
    jsonl = load_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_rebench_openhands.jsonl")))
    assert [t.task_id.partition("@")[0] for t in jsonl.tasks] == [i.partition("@")[0] for i in ids]
    table = pq.read_table(FIXTURES / "swe_rebench_openhands.parquet")
    arrow = tmp_path / "swe_rebench_openhands.arrow"
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    assert [t.task_id for t in load_dataset_tasks(DatasetSource(path=str(arrow))).tasks] == ids
    saved = tmp_path / "saved_swe_rebench_openhands"
    datasets.DatasetDict({"train": datasets.Dataset(table)}).save_to_disk(str(saved))
    assert [t.task_id for t in load_dataset_tasks(DatasetSource(path=str(saved))).tasks] == ids
    with pytest.raises(ConfigError, match="no split 'test'"):
        load_dataset_tasks(DatasetSource(path=str(saved), split="test"))


def test_a_streamed_sample_is_saved_once_and_reloads_row_by_row(tmp_path: Path) -> None:
    src = DatasetSource(path=str(FIXTURES / "swe_rebench_openhands.parquet"), n=3, seed=1, streaming=True)
    streamed = load_dataset_tasks(src)
    assert len(streamed.tasks) == 3
    local = materialize_sample(src, tmp_path)
    again = materialize_sample(src, tmp_path)  # the cache: same file, not written twice
    assert local.path == again.path and len(list(tmp_path.iterdir())) == 1
    assert Path(local.path).name.startswith("swe_rebench_openhands-")
    reloaded = [dataset_row_task(local.path, "train", i) for i in range(3)]
    assert [t.task_id for t in reloaded] == [t.task_id for t in streamed.tasks]
    assert [t.messages for t in reloaded] == [t.messages for t in streamed.tasks]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("dataset:nebius/SWE-agent-trajectories", ("nebius/SWE-agent-trajectories", "train", None)),
        ("dataset:nebius/SWE-agent-trajectories:test#12", ("nebius/SWE-agent-trajectories", "test", 12)),
        ("dataset:/x/a.parquet#3", ("/x/a.parquet", "train", 3)),
        ("dataset:/x/a.parquet:validation", ("/x/a.parquet", "validation", None)),
    ],
)
def test_dataset_specs_parse(spec: str, want: tuple[str, str, int | None]) -> None:
    assert parse_dataset_spec(spec) == want


@pytest.mark.parametrize("spec", ["dataset:/x/a.parquet#x", "dataset:/x/a.parquet#-1", "dataset:"])
def test_bad_dataset_specs_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_dataset_spec(spec)


def test_a_row_spec_loads_one_task_and_an_out_of_range_row_is_named() -> None:
    path = FIXTURES / "swe_smith.parquet"
    [t] = load_tasks_from_spec(f"dataset:{path}#2")
    assert t.metadata["dataset"]["row"] == 2
    with pytest.raises(ConfigError, match="row 99 out of range"):
        load_tasks_from_spec(f"dataset:{path}#99")
    with pytest.raises(FormatError, match="row cannot be replayed"):
        load_tasks_from_spec(f"dataset:{path}#{len(_rows('swe_smith')) - 1}")  # the broken row


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "h9eval", *args], capture_output=True, text=True, timeout=120)


def test_cli_inspect_and_run_a_dataset_row(tmp_path: Path) -> None:
    p = _cli("tasks", "inspect", f"dataset:{FIXTURES / 'swe_zero_openhands.parquet'}", "--json", "--n", "2")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["adapter"] == "swe_zero_openhands" and info["tasks"] == 2
    r = _cli(
        "run",
        "--task",
        f"dataset:{FIXTURES / 'swe_zero_openhands.parquet'}#1",
        "--policy",
        "progressive",
        "--window",
        "20000",
        "--out",
        str(tmp_path / "run"),
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "calls.parquet").is_file()


def test_cli_offline_hub_id_is_one_line_exit_2() -> None:
    p = _cli("tasks", "inspect", "dataset:nebius/SWE-agent-trajectories", "--n", "2")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "nebius/SWE-agent-trajectories" in p.stderr and "Traceback" not in p.stderr


def test_adapters_are_registered_once_each() -> None:
    assert ADAPTERS.names() == sorted(a for a, _ in EXPECTED.values())
    for _, a in ADAPTERS.items():
        assert a.hub_ids and a.required_columns and a.description


def test_iteration_is_lazy() -> None:
    it = iter_dataset_tasks(DatasetSource(path=str(FIXTURES / "swe_rebench_openhands.parquet")))
    first = next(it)
    assert isinstance(first[0], int) and first[1].n_calls > 0


def test_a_local_file_rewritten_with_the_same_size_and_mtime_gives_its_new_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cp -p``, ``rsync -a`` and ``tar x`` keep a file's mtime: a rewrite must still be read anew
    (whole sample, one row by index, and a streamed sample saved for a sweep), not replayed from a
    cache keyed on the mtime while the provenance shows the new file's hash."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))  # no shared Arrow cache
    lines = (FIXTURES / "swe_rebench_openhands.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:2]
    p = tmp_path / "swe_rebench_openhands.jsonl"
    p.write_text(lines[0] + lines[1], encoding="utf-8")
    st = p.stat()
    first = load_dataset_tasks(DatasetSource(path=str(p)))
    ids = [t.task_id for t in first.tasks]
    assert len(ids) == 2 and dataset_row_task(str(p), "train", 0).task_id == ids[0]
    streamed = DatasetSource(path=str(p), streaming=True)
    saved = materialize_sample(streamed, tmp_path / "samples")
    assert [dataset_row_task(saved.path, "train", i).task_id for i in range(2)] == ids

    # the same rows swapped: same size, same mtime, different bytes
    p.write_text(lines[1] + lines[0], encoding="utf-8")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (p.stat().st_size, p.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    second = load_dataset_tasks(DatasetSource(path=str(p)))
    assert second.provenance["file_sha256"] != first.provenance["file_sha256"]
    assert [t.task_id for t in second.tasks] == ids[::-1]
    assert dataset_row_task(str(p), "train", 0).task_id == ids[1]
    resaved = materialize_sample(streamed, tmp_path / "samples")
    assert resaved.path != saved.path
    assert [dataset_row_task(resaved.path, "train", i).task_id for i in range(2)] == ids[::-1]


DEEP = 10_000  # a row this deep used to segfault the JSON builder (exit 139, nothing printed)


def _bad_rows_jsonl(tmp_path: Path) -> Path:
    """A JSON Lines dataset: a good row, a row nested 10,000 deep, a row with non-UTF-8 bytes, a
    row nested deep inside its trajectory, then two good rows (numbered after the bad ones)."""
    lines = (FIXTURES / "swe_rebench_openhands.jsonl").read_text(encoding="utf-8").splitlines()
    nest = "[" * DEEP + "]" * DEEP
    deep_column = lines[1][:-1] + ', "extra": ' + nest + "}"
    deep_trajectory = lines[2].replace('"trajectory": [', '"trajectory": [{"role": "user", "deep": ' + nest + "}, ", 1)
    assert deep_trajectory != lines[2]
    not_utf8 = lines[3].encode().replace(b'"trajectory"', b'"\xff\xfetrajectory"', 1)
    p = tmp_path / "swe_rebench_openhands.jsonl"
    body = [
        lines[0].encode(),
        deep_column.encode(),
        not_utf8,
        deep_trajectory.encode(),
        b"",
        lines[4].encode(),
        lines[1].encode(),
    ]
    p.write_bytes(b"\n".join(body) + b"\n")  # the blank line is not a row (the builder skips it)
    return p


def test_rows_nested_too_deep_or_not_utf8_are_skipped_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    p = _bad_rows_jsonl(tmp_path)
    sample = load_dataset_tasks(DatasetSource(path=str(p)))
    assert sample.skipped == {"row is not UTF-8 text": 1, "row nested deeper than 500 levels": 2}
    assert len(sample.tasks) == 3 and sample.rows_read == 6
    # rows keep their numbers in the file: the good ones after the bad rows are #4 and #5
    assert [t.metadata["dataset"]["row"] for t in sample.tasks] == [0, 4, 5]
    assert [dataset_row_task(str(p), "train", i).task_id for i in (0, 4, 5)] == [t.task_id for t in sample.tasks]
    with pytest.raises(FormatError, match=r"#1: row cannot be replayed: row nested deeper than 500 levels"):
        dataset_row_task(str(p), "train", 1)
    with pytest.raises(FormatError, match=r"#2: row cannot be replayed: row is not UTF-8 text"):
        dataset_row_task(str(p), "train", 2)
    streamed = load_dataset_tasks(DatasetSource(path=str(p), streaming=True))
    assert streamed.skipped == sample.skipped and [t.task_id for t in streamed.tasks] == [
        t.task_id for t in sample.tasks
    ]


def test_parquet_rows_nested_too_deep_or_not_utf8_are_skipped_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parquet string column with non-UTF-8 bytes (pyarrow fails decoding the row) and a JSON-text
    column nested 10,000 deep (json.loads would recurse past the interpreter's limit)."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    table = pq.read_table(FIXTURES / "swe_smith.parquet").slice(0, 3)
    texts = [t.encode() for t in table.column("messages").to_pylist()]
    texts[1] = texts[1].replace(b'"', b'"\xff', 1)
    texts[2] = b'[{"role": "user", "content": ' + b"[" * DEEP + b"]" * DEEP + b"}]"
    column = pa.array(texts, pa.binary()).view(pa.string())  # a view: pyarrow does not validate it
    p = tmp_path / "swe_smith.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("messages"), "messages", column), p)
    sample = load_dataset_tasks(DatasetSource(path=str(p)))
    assert sample.skipped == {"row is not UTF-8 text": 1, "row nested deeper than 500 levels": 1}
    assert len(sample.tasks) == 1 and sample.rows_read == 3


def test_cli_skips_and_counts_rows_nested_too_deep_or_not_utf8(tmp_path: Path) -> None:
    p = _bad_rows_jsonl(tmp_path)
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf")}
    run = [sys.executable, "-m", "h9eval", "tasks", "inspect", "--json"]
    whole = subprocess.run([*run, f"dataset:{p}"], capture_output=True, text=True, timeout=300, env=env)
    assert whole.returncode == 0, whole.stderr  # not 139 (a segfault), not a traceback
    info = json.loads(whole.stdout)
    assert info["tasks"] == 3 and info["skipped"] == {
        "row is not UTF-8 text": 1,
        "row nested deeper than 500 levels": 2,
    }
    one = subprocess.run([*run, f"dataset:{p}#1"], capture_output=True, text=True, timeout=300, env=env)
    assert one.returncode == 2 and one.stderr.count("\n") == 1 and "Traceback" not in one.stderr
    assert "#1: row cannot be replayed: row nested deeper than 500 levels" in one.stderr
