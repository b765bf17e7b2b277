"""Offload and record files under hostile ids and planted symlinks (issue 9).

Hostile session / tool call / run ids (``..``, ``../../x``, ``a/b``, ``/abs``, NUL, control
characters, very long ids, unicode) go through the :class:`OffloadHook`, the
:class:`CompactionOffloader`, the :class:`FileRecordStore` and a full replay. After each, the
whole of ``tmp_path`` is walked (without following links): every entry must lie under the folder
it belongs in, offload/record files must be 0600 and the folders h9eval creates 0700. A symlink
planted where a session folder, a file or the records folder should be is never followed.
Replays never share an offload folder, with or without ``out_dir``.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from h9eval.compaction.policies import make_policy
from h9eval.compaction.offload import HOOK_PREFIX, CompactionOffloader, OffloadError, OffloadHook, ToolOutput
from h9eval.core.paths import safe_name
from h9eval.compaction.records import CompactionRecord, FileRecordStore, Tier
from h9eval.core.errors import FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.runs.replay import replay
from h9eval.tasks.synthetic import generate

HOSTILE_IDS: tuple[str, ...] = (
    "..",
    ".",
    "../../x",
    "../../../../../../tmp/h9eval-escape",
    "a/b",
    "a/../../b",
    "/abs/olute",
    "/",
    "x\x00y",
    "\x01\x1b[31m\n\r\t",
    "a" * 5000,
    "é" * 300,
    "ünï/../код",
    "🙂/../🙂",
    "~",
    "-rf",
    " ",
    "a\\..\\..\\b",
    "....//....//x",
    "x.txt",
    "\udcff",  # a lone surrogate (from a surrogateescape-decoded name)
)
N_HOSTILE_IDS = len(HOSTILE_IDS)
"""Quoted in docs/RELIABILITY.md."""

BIG = "line of tool output\n" * 100  # 2,000 bytes: above the thresholds set below


def entries(root: Path) -> list[Path]:
    """Every file, folder and symlink under ``root`` (links not followed)."""
    out = []
    for d, dirs, files in os.walk(root, followlinks=False):
        out.extend(Path(d) / n for n in dirs + files)
    return out


def assert_confined(tmp: Path, allowed: list[Path], ignore: tuple[Path, ...] = ()) -> None:
    """Every entry under ``tmp`` is one of ``allowed``, inside one, or an ancestor of one."""
    for p in entries(tmp):
        if any(p == i or i in p.parents for i in ignore):
            continue
        ok = any(p == a or a in p.parents or p in a.parents for a in allowed)
        assert ok, f"{p} escaped (allowed: {allowed})"


def assert_modes(root: Path, *, dirs_from: Path | None = None) -> None:
    """Files 0600, no symlinks; folders at or below ``dirs_from`` 0700."""
    for p in entries(root):
        st = p.lstat()
        assert not stat.S_ISLNK(st.st_mode), f"{p} is a symlink"
        if stat.S_ISDIR(st.st_mode):
            if dirs_from is not None and (p == dirs_from or dirs_from in p.parents):
                assert stat.S_IMODE(st.st_mode) == 0o700, f"{p}: {oct(stat.S_IMODE(st.st_mode))}"
        else:
            assert stat.S_IMODE(st.st_mode) == 0o600, f"{p}: {oct(stat.S_IMODE(st.st_mode))}"


def ids(v: str) -> str:
    return repr(v[:20]) + (f"..{len(v)}" if len(v) > 20 else "")


# -- the components ---------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=ids)
@pytest.mark.parametrize("harness9_paths", [False, True], ids=["safe", "compat"])
def test_offload_hook_hostile_ids(tmp_path: Path, hostile: str, harness9_paths: bool) -> None:
    root = tmp_path / "root"
    for sid, tid in ((hostile, "call_1"), ("sess", hostile), (hostile, hostile)):
        hook = OffloadHook(root, sid, threshold_bytes=100, harness9_paths=harness9_paths)
        res = hook.after_execute(ToolCall(tid, "bash", "{}"), ToolOutput(tid, BIG))  # never raises
        if not harness9_paths:
            # Safe mode maps every id to one plain component: the offload always happens.
            assert res.output.startswith(HOOK_PREFIX), (sid, tid)
            [entry] = hook.offloaded
            f = root / entry.file_path
            assert f.parent.parent == root / ".harness9" / "tool_results"
            assert f.read_text(encoding="utf-8") == BIG
        else:
            # harness9's raw paths: refused or written, but only ever inside the root.
            assert res.output == BIG or res.output.startswith(HOOK_PREFIX)
    assert_confined(tmp_path, [root])
    if root.exists():
        assert_modes(root, dirs_from=root / ".harness9")


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=ids)
def test_compaction_offloader_hostile_ids(tmp_path: Path, hostile: str) -> None:
    root = tmp_path / "root"
    for harness9_paths in (False, True):
        for sid, tid in ((hostile, "call_1"), ("sess", hostile)):
            off = CompactionOffloader(root, sid, threshold_bytes=100, harness9_paths=harness9_paths)
            try:
                outcome = off.offload_tool_result(Message("tool", BIG, (), tid))
            except OffloadError:
                assert harness9_paths, "safe mode must offload every id"
                continue
            assert (root / outcome.entry.file_path).read_text(encoding="utf-8") == BIG
    assert_confined(tmp_path, [root])
    assert_modes(root, dirs_from=root / ".harness9")


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=ids)
def test_record_store_hostile_session_ids(tmp_path: Path, hostile: str) -> None:
    store = FileRecordStore(tmp_path / "recs")
    store.append(CompactionRecord(session_id=hostile, tier=Tier.SOFT, msgs_before=9, msgs_after=3))
    store.append(CompactionRecord(session_id=hostile, tier=Tier.FULL, msgs_before=9, msgs_after=2))
    files = [p for p in entries(tmp_path) if p.is_file()]
    assert len(files) == 1 and files[0].parent == tmp_path / "recs"
    assert [r.tier for r in store.list(hostile)] == [Tier.SOFT, Tier.FULL]
    assert_modes(tmp_path / "recs", dirs_from=tmp_path / "recs")


def test_distinct_hostile_ids_get_distinct_names() -> None:
    # Ids that clean to the same characters must still name different files.
    names = [safe_name(i) for i in HOSTILE_IDS] + [safe_name(x) for x in ("x/y", "x?y", "x_y", "x y", "x\x01y")]
    assert len(set(names)) == len(names)
    for n in names:
        assert (
            "/" not in n and "\x00" not in n and n not in (".", "..") and len(n.encode("utf-8", "surrogatepass")) <= 200
        )


# -- a full replay ----------------------------------------------------------------------------


def hostile_task(seed: int = 0) -> Any:
    """The small synthetic task with every tool call id replaced by a hostile one."""
    task = generate("small", seed=seed)
    mapping: dict[str, str] = {}

    def new_id(old: str) -> str:
        if old not in mapping:
            base = HOSTILE_IDS[len(mapping) % len(HOSTILE_IDS)]
            mapping[old] = base if len(mapping) < len(HOSTILE_IDS) else f"{base}{len(mapping)}"
        return mapping[old]

    msgs = []
    for m in task.messages:
        if m.tool_calls:
            m = dataclasses.replace(
                m, tool_calls=tuple(dataclasses.replace(tc, id=new_id(tc.id)) for tc in m.tool_calls)
            )
        if m.tool_call_id:
            m = dataclasses.replace(m, tool_call_id=new_id(m.tool_call_id))
        msgs.append(m)
    assert len(mapping) >= len(HOSTILE_IDS) - 1, "every hostile id should be used at least once"
    return dataclasses.replace(task, messages=tuple(msgs))


def offload_policy() -> Any:
    # Low thresholds so that both stages offload on the small task.
    return make_policy(
        "progressive", context_window_tokens=16_000, offload_hook_threshold_bytes=300, offload_threshold_bytes=300
    )


@pytest.mark.parametrize("run_id", ["../../escape", "/abs/run", "a/b\x00c", "é" * 300, ".."], ids=ids)
def test_replay_with_hostile_run_and_tool_ids_stays_in_out_dir(tmp_path: Path, run_id: str) -> None:
    out = tmp_path / "results" / "out"
    res = replay(hostile_task(), offload_policy(), out_dir=out, run_id=run_id)
    c = res.calls
    assert len(c) == res.calls["call_index"].max() + 1
    assert c["offloads_tool_time_count"].sum() > 0 and c["offloads_compaction_count"].sum() > 0
    assert c["compacted"].any()
    assert_confined(tmp_path, [out])
    assert_modes(out / "work", dirs_from=out / "work" / ".harness9")
    assert_modes(out / "compaction_records", dirs_from=out / "compaction_records")
    [session_dir] = (out / "work" / ".harness9" / "tool_results").iterdir()
    assert session_dir.name == safe_name(safe_name(run_id))  # the session id is safe_name(run_id)
    # Every offload the records mention is a real file inside the session folder.
    for r in res.records:
        for o in r.offloaded or ():
            assert (out / "work" / o.file_path).parent == session_dir


def test_two_runs_in_one_out_dir_never_share_an_offload_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_ids = ["x/y", "x?y", "x_y", "x y", "x\x00y"]  # all clean to x_y
    task = hostile_task()
    first_files: dict[Path, bytes] = {}
    for i, rid in enumerate(run_ids):
        replay(task, offload_policy(), out_dir=out, run_id=rid)
        if i == 0:
            first_files = {p: p.read_bytes() for p in entries(out / "work") if p.is_file()}
    folders = sorted(p.name for p in (out / "work" / ".harness9" / "tool_results").iterdir())
    assert folders == sorted(safe_name(safe_name(r)) for r in run_ids) and len(set(folders)) == len(run_ids)
    # Later runs did not touch the first run's offload files.
    assert first_files and all(p.read_bytes() == b for p, b in first_files.items())
    assert len(list((out / "compaction_records").iterdir())) == len(run_ids)
    assert_confined(tmp_path, [out])


def test_two_runs_without_out_dir_never_share_a_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, int]] = []
    real = tempfile.TemporaryDirectory

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            made.append((self.name, stat.S_IMODE(os.stat(self.name).st_mode)))

    import sys

    replay_mod = sys.modules["h9eval.runs.replay"]  # h9eval.runs.replay the attribute is the function
    monkeypatch.setattr(replay_mod.tempfile, "TemporaryDirectory", Recording)
    task = hostile_task()
    a = replay(task, offload_policy(), run_id="same")
    b = replay(task, offload_policy(), run_id="same")
    assert a.calls["offloads_tool_time_count"].sum() > 0 and b.calls["offloads_tool_time_count"].sum() > 0
    assert len(made) == 2 and made[0][0] != made[1][0]
    assert all(mode == 0o700 for _, mode in made)
    assert not any(os.path.exists(n) for n, _ in made), "offload folders are removed after the run"


# -- planted symlinks ---------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("SECRET\n")
    return d


def outside_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "SECRET\n"


@pytest.mark.parametrize("level", [".harness9", "tool_results", "session"])
def test_symlinked_folder_in_the_offload_tree_is_not_followed(tmp_path: Path, outside: Path, level: str) -> None:
    root = tmp_path / "root"
    tree = {
        ".harness9": root / ".harness9",
        "tool_results": root / ".harness9" / "tool_results",
        "session": root / ".harness9" / "tool_results" / "sess",
    }
    link = tree[level]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    hook = OffloadHook(root, "sess", threshold_bytes=100)
    assert hook.after_execute(ToolCall("c1", "bash", "{}"), ToolOutput("c1", BIG)).output == BIG  # fails open
    with pytest.raises(OffloadError):
        CompactionOffloader(root, "sess", threshold_bytes=100).offload_tool_result(Message("tool", BIG, (), "c2"))
    outside_untouched(outside)
    assert link.is_symlink()


@pytest.mark.parametrize("level", [".harness9", "tool_results", "session"])
def test_a_folder_replaced_by_a_symlink_after_a_write_is_not_followed(
    tmp_path: Path, outside: Path, level: str
) -> None:
    """After a first write the offloader writes into the session folder it verified; a folder of
    the tree replaced by a symlink later is noticed (the next write is refused, nothing lands
    outside), and a removed folder is created again."""
    import shutil

    root = tmp_path / "root"
    off = CompactionOffloader(root, "sess", threshold_bytes=100)
    off.offload_tool_result(Message("tool", BIG, (), "c1"))
    session = root / ".harness9" / "tool_results" / "sess"
    assert (session / "c1.txt").read_text() == BIG
    shutil.rmtree(root / ".harness9")
    off.offload_tool_result(Message("tool", BIG, (), "c2"))  # removed: made again, written again
    assert (session / "c2.txt").read_text() == BIG
    link = {".harness9": root / ".harness9", "tool_results": root / ".harness9" / "tool_results", "session": session}[
        level
    ]
    shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(OffloadError):
        off.offload_tool_result(Message("tool", BIG, (), "c3"))
    outside_untouched(outside)
    assert link.is_symlink()


def test_the_session_folder_is_verified_once_then_reached_by_its_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offload file opens cost a quarter of a long write-back run when every write checked every
    folder of the tree again: later writes into the verified session folder make no such check."""
    root = tmp_path / "root"
    off = CompactionOffloader(root, "sess", threshold_bytes=100)
    off.offload_tool_result(Message("tool", BIG, (), "c1"))
    checks: list[str] = []
    real_islink = os.path.islink
    monkeypatch.setattr(os.path, "islink", lambda p: checks.append(str(p)) or real_islink(p))
    for i in range(5):
        off.offload_tool_result(Message("tool", BIG + str(i), (), f"d{i}"))
    assert checks == []
    assert sorted(q.name for q in (root / ".harness9" / "tool_results" / "sess").iterdir()) == [
        "c1.txt",
        "d0.txt",
        "d1.txt",
        "d2.txt",
        "d3.txt",
        "d4.txt",
    ]


@pytest.mark.parametrize("harness9_paths", [False, True], ids=["safe", "compat"])
def test_symlinked_file_is_not_followed(tmp_path: Path, outside: Path, harness9_paths: bool) -> None:
    root = tmp_path / "root"
    session = root / ".harness9" / "tool_results" / "sess"
    session.mkdir(parents=True)
    (session / "c1.txt").symlink_to(outside / "secret.txt")
    hook = OffloadHook(root, "sess", threshold_bytes=100, harness9_paths=harness9_paths)
    assert hook.after_execute(ToolCall("c1", "bash", "{}"), ToolOutput("c1", BIG)).output == BIG
    (session / "c2.txt").symlink_to(outside / "new.txt")  # a dangling link: O_CREAT must not create the target
    with pytest.raises(OffloadError):
        CompactionOffloader(root, "sess", threshold_bytes=100, harness9_paths=harness9_paths).offload_tool_result(
            Message("tool", BIG, (), "c2")
        )
    outside_untouched(outside)


def test_replay_with_a_planted_session_symlink_fails_open(tmp_path: Path, outside: Path) -> None:
    out = tmp_path / "out"
    session = out / "work" / ".harness9" / "tool_results" / "run1"
    session.parent.mkdir(parents=True)
    session.symlink_to(outside, target_is_directory=True)
    res = replay(hostile_task(), offload_policy(), out_dir=out, run_id="run1")
    c = res.calls
    assert len(c) > 0 and c["compacted"].any()
    assert c["offloads_tool_time_count"].sum() == 0 and c["offloads_compaction_count"].sum() == 0
    outside_untouched(outside)
    assert session.is_symlink()


def test_records_never_go_through_a_symlink(tmp_path: Path, outside: Path) -> None:
    # A records folder replaced by a symlink: refused before anything is written or deleted.
    out = tmp_path / "out"
    out.mkdir()
    (outside / "run1.jsonl").write_text("precious\n")
    (out / "compaction_records").symlink_to(outside, target_is_directory=True)
    with pytest.raises(FormatError, match="compaction_records: records folder is a symlink"):
        replay(hostile_task(), offload_policy(), out_dir=out, run_id="run1")
    assert (outside / "run1.jsonl").read_text() == "precious\n"
    (outside / "run1.jsonl").unlink()
    outside_untouched(outside)
    # A record file replaced by a symlink.
    recs = tmp_path / "recs"
    recs.mkdir()
    (recs / "s.jsonl").symlink_to(outside / "secret.txt")
    with pytest.raises(FormatError, match=r"s\.jsonl: is a symlink; refusing to follow it"):
        FileRecordStore(recs).append(CompactionRecord(session_id="s", tier=Tier.SOFT))
    outside_untouched(outside)


def test_lone_surrogate_in_a_recorded_session_replays_into_out_dir(tmp_path: Path) -> None:
    """A JSON ``\\udcff`` escape (a string cut inside a surrogate pair) in a recorded session and
    in hostile ids: harness9 (Go) decodes it to U+FFFD; h9eval must not crash when it writes the
    session store, offload files and parquet tables."""
    import json

    from h9eval.runs.run import run_task
    from h9eval.core.paths import recorded_dir

    src = recorded_dir() / "claude-code" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-aac57f5.jsonl"
    lines = src.read_text(encoding="utf-8").splitlines()
    i = next(n for n, ln in enumerate(lines) if '"content"' in ln and json.loads(ln).get("type") == "user")
    d = json.loads(lines[i])
    content = d["message"]["content"]
    if isinstance(content, str):
        d["message"]["content"] = "\udcff" + content
    else:
        content[0]["text" if "text" in content[0] else "content"] = "\udcff broken"
    lines[i] = json.dumps(d)  # ensure_ascii: the surrogate is written as the escape \udcff
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "\\udcff" in p.read_text(encoding="utf-8")
    [res] = run_task(str(p), "progressive", params={"context_window_tokens": 4000}, out_dir=tmp_path / "out")
    assert len(res.calls) > 0 and (tmp_path / "out" / "manifest.json").exists()
    assert any("\ufffd" in m.content for m in res.final_history) or res.calls["compacted"].any()
    # and the hostile-id task, whose tool call ids include a lone surrogate
    res2 = replay(hostile_task(), offload_policy(), out_dir=tmp_path / "out2", run_id="surrogate-ids")
    assert res2.calls["offloads_tool_time_count"].sum() > 0
