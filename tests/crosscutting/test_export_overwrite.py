"""``export --overwrite`` replaces only what an earlier export of the same kind wrote (issue 42):
never the results folder it reads, a folder inside it or holding it, nor a folder with other
files in it (a parent with sibling results)."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.core.paths import EXPORT_MARKER

V1 = Path(__file__).parents[1] / "data" / "results-v1"


def _digest(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()
    }


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    d = tmp_path / "parent" / "sweep"
    shutil.copytree(V1, d)
    (tmp_path / "parent" / "sibling").mkdir()
    (tmp_path / "parent" / "sibling" / "runs.parquet").write_bytes(b"someone else's results")
    return d


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["export", *argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["dataset", "inspect"])
def test_overwrite_never_removes_the_source_its_parent_or_a_folder_it_did_not_write(
    sweep_dir: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    if fmt == "inspect":
        pytest.importorskip("inspect_ai")
    parent = sweep_dir.parent
    before = _digest(parent)
    plain = parent / "notes"
    plain.mkdir()
    (plain / "mine.txt").write_text("keep me")
    targets = {
        sweep_dir: "is the results folder it exports",
        parent: "holds the results folder it exports",
        sweep_dir / "cells": "is inside the results folder it exports",
        plain: "not an export h9eval wrote",
    }
    for target, said in targets.items():
        code, err = _export(capsys, str(sweep_dir), str(target), "--format", fmt, "--overwrite")
        assert code == 2 and err.count("\n") == 1 and said in err, (target, err)
    assert _digest(parent) == before | {"notes/mine.txt": hashlib.sha256(b"keep me").hexdigest()}


def test_overwrite_replaces_an_earlier_export_of_the_same_kind_only(
    sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exported"
    assert _export(capsys, str(sweep_dir), str(out))[0] == 0
    assert (out / EXPORT_MARKER).read_text() == "dataset\n"
    (out / "stale.txt").write_text("from the earlier export")  # replaced whole: not left beside the new one
    code, err = _export(capsys, str(sweep_dir), str(out))
    assert code == 2 and "already exists (pass --overwrite" in err
    assert _export(capsys, str(sweep_dir), str(out), "--overwrite")[0] == 0
    assert not (out / "stale.txt").exists() and (out / EXPORT_MARKER).is_file()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # no temporary folder left
    if importlib.util.find_spec("inspect_ai"):
        code, err = _export(capsys, str(sweep_dir), str(out), "--format", "inspect", "--overwrite")
        assert code == 2 and "is an export of another kind" in err and (out / "dataset_dict.json").is_file()


def test_a_leftover_temporary_folder_of_another_export_is_not_removed(
    sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    planted = tmp_path / f".exported.tmp-{os.getpid()}"
    planted.mkdir()
    (planted / "x").write_text("not the export's")
    assert _export(capsys, str(sweep_dir), str(tmp_path / "exported"))[0] == 0
    assert (planted / "x").read_text() == "not the export's"
