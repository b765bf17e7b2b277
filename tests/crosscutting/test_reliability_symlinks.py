"""A symlink planted at every path a command writes is never followed (issue 20 §1).

Each command is run once into a fresh folder to learn every path it writes (files, folders,
and for each file its ``<name>.tmp`` and SQLite ``-wal`` / ``-journal`` companions). Then, for
each of those paths, a fresh output folder gets a symbolic link at exactly that path, pointing
at a file or folder outside it holding known bytes, and the command is run again. Whatever the
command does (a one-line error with exit 2, or success), the link's target must be unchanged,
nothing may appear beside it, and the path must still be that link (or, removed, lead nowhere
outside).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.core.errors import FormatError
from h9eval.core.paths import atomic_write, check_db_file, prepare_out_dir

SPEC = """
name = "tiny"
window = 16000
history_modes = ["view"]
[tasks]
synthetic = [{ preset = "small", seeds = [0] }]
[[policies]]
kind = "progressive"
params = { context_window_tokens = 16000 }
[summarizer]
variants = ["offline"]
"""


def _walk(root: Path) -> list[str]:
    out = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.append(str((Path(d) / n).relative_to(root)))
    return sorted(out)


def _plant_points(root: Path) -> list[str]:
    """Every path under ``root`` (below the top level: one file per folder and suffix, as the
    files of one folder are written by one code path), plus each file's companions."""
    seen: set[tuple[str, str]] = set()
    points: list[str] = []
    for rel in _walk(root):
        p = root / rel
        if p.is_file() and len(Path(rel).parts) > 1:
            kind = (str(Path(rel).parent), p.suffix)
            if kind in seen:
                continue
            seen.add(kind)
        points.append(rel)
        if p.is_file() and not rel.endswith(("-wal", "-shm")):
            points.append(rel + ".tmp")
        if p.suffix in (".db", ".sqlite"):
            points += [rel + "-wal", rel + "-journal"]
    return list(dict.fromkeys(points))


def _fingerprint(p: Path) -> dict[str, str]:
    if p.is_dir():
        return {
            str(q.relative_to(p)): hashlib.sha256(q.read_bytes()).hexdigest()
            for q in sorted(p.rglob("*"))
            if q.is_file()
        } | {"<entries>": ",".join(_walk(p))}
    return {"": hashlib.sha256(p.read_bytes()).hexdigest()}


def _target(outside: Path, like: Path) -> Path:
    """A file or folder outside the output folder, of the kind found at ``like`` in the reference run."""
    if like.is_dir():
        t = outside / "dir"
        t.mkdir()
        (t / "keep.txt").write_text("outside\n")
        return t
    t = outside / "file"
    if like.suffix in (".db", ".sqlite"):
        con = sqlite3.connect(t)
        con.execute("CREATE TABLE outside (x)")
        con.commit()
        con.close()
    else:
        t.write_bytes(b"outside bytes\n")
    return t


def _check_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, argv: Callable[[Path], list[str]]
) -> int:
    """Plant a link at every path ``argv`` writes; returns how many links were planted."""
    ref = tmp_path / f"{name}-ref"
    assert main(argv(ref)) == 0
    capsys.readouterr()
    points = _plant_points(ref)
    assert points, "the reference run wrote nothing"
    for i, rel in enumerate(points):
        case = tmp_path / f"{name}-{i}"
        out = case / "out"
        outside = case / "outside"
        outside.mkdir(parents=True)
        like = (
            ref / rel
            if (ref / rel).exists()
            else ref / rel.removesuffix(".tmp").removesuffix("-wal").removesuffix("-journal")
        )
        target = _target(outside, like if not rel.endswith((".tmp", "-wal", "-journal")) else ref / "nonexistent")
        link = out / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
        before = _fingerprint(outside)
        rc = main(argv(out))
        err = capsys.readouterr().err
        assert rc in (0, 2), (rel, rc, err)
        if rc == 2:
            # progress lines may come first; the error itself is one line
            errors = [line for line in err.splitlines() if ": error: " in line]
            assert len(errors) == 1 and "Traceback" not in err, (rel, err)
        assert _fingerprint(outside) == before, f"{name}: the link at {rel} was followed"
        # A link may be removed (a rerun clears a session's record file) but never written through.
        assert link.is_symlink() or out.resolve() in Path(os.path.realpath(link)).parents, (
            f"{name}: {rel} now leads outside"
        )
    return len(points)


def test_run_never_follows_a_planted_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = _check_command(
        tmp_path,
        capsys,
        "run",
        lambda out: ["run", "--task", "synthetic:small:1", "--window", "16000", "--out", str(out)],
    )
    assert n >= 15


def test_tasks_generate_never_follows_a_planted_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = _check_command(tmp_path, capsys, "gen", lambda out: ["tasks", "generate", "--out", str(out / "t.jsonl")])
    assert n == 2  # t.jsonl, t.jsonl.tmp


def test_sweep_and_report_never_follow_a_planted_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    n = _check_command(
        tmp_path,
        capsys,
        "sweep",
        lambda out: ["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"],
    )
    assert n >= 15
    res = tmp_path / "sweep-ref"

    def report(out: Path) -> list[str]:
        return ["report", str(res), "--out", str(out)]

    n_report = _check_command(tmp_path, capsys, "report", report)
    assert n_report >= 5


def test_a_linked_output_folder_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    with pytest.raises(FormatError, match="link: output folder is a symbolic link"):
        prepare_out_dir(tmp_path / "link")
    with pytest.raises(FormatError, match="is a symbolic link"):
        with atomic_write(tmp_path / "link"):
            pass
    (real / "x.db").write_bytes(b"")
    os.symlink(real / "x.db", tmp_path / "y.db")
    with pytest.raises(FormatError, match="y.db: database is a symbolic link"):
        check_db_file(tmp_path / "y.db")
    os.mkfifo(tmp_path / "fifo.db")
    with pytest.raises(FormatError, match="not a regular file"):
        check_db_file(tmp_path / "fifo.db")
