"""The task model's serialisations: JSONL, pandas, Hugging Face datasets (local files only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from h9eval.core.errors import FormatError
from h9eval.tasks import (
    Task,
    tasks_from_dataframe,
    tasks_from_dataset,
    tasks_from_jsonl,
    tasks_to_dataframe,
    tasks_to_dataset,
    tasks_to_jsonl,
)
from h9eval.tasks.synthetic import generate


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return [generate("small", seed=s) for s in (0, 1)]


def test_jsonl_round_trip_is_byte_stable(tasks: list[Task], tmp_path: Path) -> None:
    a = tasks_to_jsonl(tasks, tmp_path / "a.jsonl")
    back = tasks_from_jsonl(a)
    assert [t.content_hash() for t in back] == [t.content_hash() for t in tasks]
    b = tasks_to_jsonl(back, tmp_path / "b.jsonl")
    assert a.read_bytes() == b.read_bytes()


def test_dataframe_round_trip(tasks: list[Task], tmp_path: Path) -> None:
    df = tasks_to_dataframe(tasks)
    assert list(df["task_id"]) == [t.task_id for t in tasks] and (df["n_messages"] > 0).all()
    df.to_parquet(tmp_path / "t.parquet")
    import pandas as pd

    back = tasks_from_dataframe(pd.read_parquet(tmp_path / "t.parquet"))
    assert [t.content_hash() for t in back] == [t.content_hash() for t in tasks]


def test_hf_dataset_round_trip_offline(tasks: list[Task], tmp_path: Path) -> None:
    import datasets

    ds = tasks_to_dataset(tasks)
    assert isinstance(ds, datasets.Dataset) and ds.num_rows == 2
    assert [t.content_hash() for t in tasks_from_dataset(ds)] == [t.content_hash() for t in tasks]
    # written and read back as local parquet: no hub involved (HF_*_OFFLINE are set)
    ds.to_parquet(str(tmp_path / "d.parquet"))
    local = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "d.parquet"), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert [t.content_hash() for t in tasks_from_dataset(local)] == [t.content_hash() for t in tasks]


def test_intent_and_facts_in_force(tasks: list[Task]) -> None:
    t = generate("long", seed=0)
    assert t.intent.changes, "the long preset refines the goal"
    first = t.intent.changes[0]
    assert t.intent.at(first.message_index - 1).statement == t.intent.statement
    assert t.intent.at(first.message_index).statement == first.statement
    sup = [f for f in t.facts if f.superseded_at is not None]
    assert sup
    f = sup[0]
    assert f.live_at(f.message_index) and not f.live_at(f.superseded_at) and not f.live_at(f.message_index - 1)


def test_bad_task_lines(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"task_id": "x"}\nnot json\n', encoding="utf-8")
    with pytest.raises(FormatError, match=r"t\.jsonl:line 1: missing field"):
        tasks_from_jsonl(p)
    p.write_text('{"schema_version": 99, "task_id": "x"}\n', encoding="utf-8")
    with pytest.raises(FormatError, match=r"line 1: task schema_version 99 is not supported"):
        tasks_from_jsonl(p)
