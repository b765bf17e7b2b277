"""A hard link planted at every file a command writes is never written through (issue 28).

As for symbolic links (test_reliability_symlinks.py): a reference run learns every file the
command writes, with its SQLite ``-wal``/``-shm``/``-journal`` companions and the folder lock;
then, for each, a fresh output folder gets a *hard link* at exactly that path to a file outside
it with known bytes, and the command runs again. Whatever it does (a one-line refusal with exit
2, or success after replacing the name), the outside file's bytes must be unchanged: a file
with more than one link is never written through (sessions.db and its companions, offload
files, the lock file, the summary cache's companions were, before)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.core.lock import LOCK_NAME


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _plant_points(root: Path, extra: Path | None) -> list[tuple[Path, str]]:
    """(folder, relative path) of every file written, one per folder and suffix, plus companions."""
    seen: set[tuple[str, str]] = set()
    points: list[tuple[Path, str]] = []
    for base in (root, extra) if extra is not None else (root,):
        for rel in _files(base):
            p = base / rel
            kind = (str(base), str(Path(rel).parent), p.suffix)
            if len(Path(rel).parts) > 1 and kind in seen:
                continue
            seen.add(kind)
            points.append((base, rel))
            if p.suffix in (".db", ".sqlite"):
                points += [(base, rel + s) for s in ("-wal", "-shm", "-journal")]
    points.append((root, LOCK_NAME))
    return list(dict.fromkeys(points))


def _outside(d: Path, rel: str) -> Path:
    d.mkdir(parents=True)
    t = d / "precious"
    if rel.endswith((".db", ".sqlite")):
        con = sqlite3.connect(t)
        con.execute("CREATE TABLE outside (x)")
        con.commit()
        con.close()
    else:
        t.write_bytes(b"outside bytes\n" * 64)
    return t


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, argv: Callable[[Path, Path], list[str]]
) -> int:
    ref, ref_cache = tmp_path / f"{name}-ref", tmp_path / f"{name}-ref-cache"
    ref_cache.mkdir()
    assert main(argv(ref, ref_cache)) == 0
    capsys.readouterr()
    points = _plant_points(ref, ref_cache)
    for i, (base, rel) in enumerate(points):
        case = tmp_path / f"{name}-{i}"
        out, cache = case / "out", case / "cache"
        cache.mkdir(parents=True)
        link = (out if base == ref else cache) / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        target = _outside(case / "outside", rel)
        os.link(target, link)
        before = _digest(target)
        rc = main(argv(out, cache))
        err = capsys.readouterr().err
        assert rc in (0, 2), (rel, rc, err)
        if rc == 2:
            assert err.count("\n") == 1 and "Traceback" not in err, (rel, err)
        assert _digest(target) == before, f"{name}: the hard link at {rel} was written through"
    return len(points)


def test_run_never_writes_through_a_planted_hard_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = _check(
        tmp_path,
        capsys,
        "run",
        lambda out, cache: [
            "run",
            "--task",
            "synthetic:small:1",
            "--window",
            "16000",
            "--summarizer-cache",
            str(cache / "c.sqlite"),
            "--out",
            str(out),
        ],
    )
    assert n >= 12


SPEC = """
name = "tiny"
window = 16000
history_modes = ["view"]
[tasks]
synthetic = [{ preset = "small", seeds = [0] }]
[[policies]]
kind = "progressive"
params = { context_window_tokens = 16000 }
"""


def test_sweep_never_writes_through_a_planted_hard_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    n = _check(
        tmp_path,
        capsys,
        "sweep",
        lambda out, cache: ["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"],
    )
    assert n >= 6
