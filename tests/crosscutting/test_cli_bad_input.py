"""Every CLI command against broken inputs (issue 9): exit 2, one line naming the problem, no
traceback, and nothing already on disk damaged.

Each case builds its broken input in ``tmp_path`` (truncated copies of the real recorded
sessions, non-JSON lines, empty files, binary garbage, a folder where a file is expected, …),
runs ``python -m h9eval …`` in a subprocess (the way a user meets the error) and checks:

* exit status 2;
* stderr is one line (argparse usage errors: usage + one error line) that names the file /
  line / field and says what was expected (each case lists regexes the line must match);
* no ``Traceback`` on stdout or stderr, and nothing on stdout;
* every file the case declares "protected" (an existing results folder, an existing ``--out``
  file, the input itself) keeps its bytes and mtime, and no new file appears beside them.

:data:`N_BROKEN_INPUTS` is the figure quoted in the README's Reliability section.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from h9eval.core.lock import LOCK_NAME
from h9eval.core.paths import conformance_dir, recorded_dir

PYTHON = sys.executable
REC = recorded_dir()
CC_SESSION = REC / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CC_SUBAGENT = REC / "claude-code" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-aac57f5.jsonl"
MINI = REC / "mini-swe-agent" / "deepseek_chat_dev" / "pylint-dev__astroid-1978.traj.json"
SWE = REC / "swe-agent" / "pydicom__pydicom-1458.traj"
OPENHANDS = REC / "openhands" / "3f3d5850aca74c6db03728ce9d896373"
CASE_FILE = conformance_dir() / "merge_anchors-na-keeps-old.json"

MINIMAL_SPEC = '[tasks]\nspecs = ["synthetic:small:0"]\n\n[[policies]]\nkind = "keep_all"\n'


@dataclass
class Case:
    """One broken invocation: ``argv`` after ``python -m h9eval``; ``expect``: regexes the error
    line must match; ``protect``: paths (files or folders) whose contents must not change."""

    argv: list[str]
    expect: list[str]
    protect: list[Path] = field(default_factory=list)
    usage_error: bool = False  # argparse's own errors print a usage line first
    env: dict[str, str] = field(default_factory=dict)


Builder = Callable[[Path], Case]
CASES: dict[str, Builder] = {}


def case(name: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        assert name not in CASES, name
        CASES[name] = fn
        return fn

    return deco


# -- input builders ----------------------------------------------------------------------------


def head_bytes(src: Path, n: int, dst: Path) -> Path:
    """The first ``n`` bytes of ``src`` (a truncated download / a killed writer)."""
    with open(src, "rb") as f:
        dst.write_bytes(f.read(n))
    return dst


def first_lines(src: Path, n: int) -> list[str]:
    out = []
    with open(src, encoding="utf-8") as f:
        for line in f:
            out.append(line)
            if len(out) == n:
                break
    return out


def with_bad_line(src: Path, dst: Path, *, at: int, bad: str, n: int = 12) -> Path:
    """The first ``n`` lines of a JSONL file with line ``at`` (1-based) replaced by ``bad``."""
    lines = first_lines(src, n)
    lines[at - 1] = bad + "\n"
    dst.write_text("".join(lines), encoding="utf-8")
    return dst


def garbage(dst: Path, n: int = 4096, seed: int = 9) -> Path:
    import random

    dst.write_bytes(bytes(random.Random(seed).randrange(256) for _ in range(n)))
    return dst


def good_task_jsonl(tmp: Path) -> Path:
    from h9eval.tasks import tasks_to_jsonl
    from h9eval.tasks.synthetic import generate

    return tasks_to_jsonl([generate("small", seed=0)], tmp / "task.jsonl")


_REFERENCE_RUN: list[Path] = []  # set by the module fixture below


@pytest.fixture(scope="module", autouse=True)
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``h9eval run`` results folder (compactions, records, sessions.db, work/), made
    once; cases copy it to test that a failing command pointed at it leaves it alone."""
    from h9eval.runs.run import run_task

    src = tmp_path_factory.mktemp("reference") / "run"
    run_task("synthetic:small:0", "progressive", params={"context_window_tokens": 16000}, out_dir=src)
    _REFERENCE_RUN[:] = [src]
    if _has_module("h9eval.sweeps.sweep"):
        from h9eval.sweeps.sweep import sweep

        spec = {
            "name": "tiny",
            "tasks": {"specs": ["synthetic:small:0"]},
            "policies": [{"kind": "keep_all"}, {"kind": "progressive", "params": {"context_window_tokens": 16000}}],
        }
        sw = tmp_path_factory.mktemp("reference") / "sweep"
        sweep(spec, out_dir=sw, workers=0, progress=False)
        _REFERENCE_SWEEP[:] = [sw]
    return src


def existing_run(tmp: Path, name: str = "results") -> Path:
    dst = tmp / name
    shutil.copytree(_REFERENCE_RUN[0], dst, symlinks=True)
    return dst


_REFERENCE_SWEEP: list[Path] = []


def existing_sweep(tmp: Path, name: str = "sweep") -> Path:
    """A copy of a real (tiny, two-cell) sweep results folder."""
    dst = tmp / name
    shutil.copytree(_REFERENCE_SWEEP[0], dst, symlinks=True)
    return dst


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def spec_file(tmp: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def foreign_folder(tmp: Path) -> Path:
    d = tmp / "my-thesis"
    d.mkdir()
    (d / "chapter1.md").write_text("# precious work\n", encoding="utf-8")
    (d / "data.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    return d


def existing_file(tmp: Path, name: str = "keep.jsonl") -> Path:
    p = tmp / name
    p.write_text('{"precious": true}\n', encoding="utf-8")
    return p


# -- conformance -------------------------------------------------------------------------------


@case("conformance/missing-path")
def _(t: Path) -> Case:
    return Case(["conformance", str(t / "nope")], [r"nope: no such file or folder"])


@case("conformance/empty-case-file")
def _(t: Path) -> Case:
    p = t / "empty.json"
    p.write_text("")
    return Case(["conformance", str(p)], [r"empty\.json:line 1: not JSON", r"expected one case object"], [p])


@case("conformance/binary-garbage")
def _(t: Path) -> Case:
    p = garbage(t / "case.json")
    return Case(["conformance", str(p)], [r"case\.json: case file is not UTF-8"], [p])


@case("conformance/truncated-case")
def _(t: Path) -> Case:
    p = head_bytes(CASE_FILE, CASE_FILE.stat().st_size // 2, t / "truncated.json")
    return Case(["conformance", str(p)], [r"truncated\.json:line \d+: not JSON", r"expected one case object"], [p])


@case("conformance/case-lacks-field")
def _(t: Path) -> Case:
    d = json.loads(CASE_FILE.read_text(encoding="utf-8"))
    del d["expected"]
    p = t / "nofield.json"
    p.write_text(json.dumps(d))
    return Case(["conformance", str(p)], [r"nofield\.json: case lacks field 'expected'"], [p])


@case("conformance/unknown-kind")
def _(t: Path) -> Case:
    d = json.loads(CASE_FILE.read_text(encoding="utf-8"))
    d["kind"] = "merge_anchor"
    p = t / "kind.json"
    p.write_text(json.dumps(d))
    return Case(["conformance", str(p)], [r"kind\.json:kind: unknown case kind 'merge_anchor'; expected one of"], [p])


@case("conformance/malformed-input")
def _(t: Path) -> Case:
    d = json.loads(CASE_FILE.read_text(encoding="utf-8"))
    d["input"] = {"old": 42, "new": "x"}
    p = t / "input.json"
    p.write_text(json.dumps(d))
    return Case(["conformance", str(p)], [r"input\.json", r"(malformed input|expected a list of anchors)"], [p])


@case("conformance/bad-xz")
def _(t: Path) -> Case:
    p = t / "case.json.xz"
    p.write_bytes(b"\xfd7zXZ\x00 not really xz")
    return Case(["conformance", str(t)], [r"case\.json\.xz: not a valid xz file"], [p])


@case("conformance/case-is-a-list")
def _(t: Path) -> Case:
    p = t / "list.json"
    p.write_text("[1, 2, 3]")
    return Case(["conformance", str(p)], [r"list\.json: expected a case object with kind, input and expected"], [p])


# -- tasks inspect -----------------------------------------------------------------------------


@case("inspect/claude-code-truncated")
def _(t: Path) -> Case:
    p = head_bytes(CC_SESSION, 5000, t / "session.jsonl")
    return Case(
        ["tasks", "inspect", str(p)],
        [r"session\.jsonl:line \d+: not valid JSON", r"expected one Claude Code session record"],
        [p],
    )


@case("inspect/claude-code-non-json-line")
def _(t: Path) -> Case:
    p = with_bad_line(CC_SUBAGENT, t / "agent.jsonl", at=5, bad="{oops this is not json")
    return Case(["tasks", "inspect", str(p)], [r"agent\.jsonl:line 5: not valid JSON"], [p])


@case("inspect/claude-code-record-not-object")
def _(t: Path) -> Case:
    p = with_bad_line(CC_SUBAGENT, t / "agent.jsonl", at=4, bad="[1, 2, 3]")
    return Case(["tasks", "inspect", str(p)], [r"agent\.jsonl:line 4", r"expected"], [p])


@case("inspect/empty-file")
def _(t: Path) -> Case:
    p = t / "empty.jsonl"
    p.write_text("")
    return Case(
        ["tasks", "inspect", str(p)], [r"empty\.jsonl: file is empty; expected a Claude Code JSONL session"], [p]
    )


@case("inspect/blank-lines-only")
def _(t: Path) -> Case:
    p = t / "blank.jsonl"
    p.write_text("\n\n   \n")
    return Case(["tasks", "inspect", str(p)], [r"blank\.jsonl: file is empty"], [p])


@case("inspect/binary-garbage")
def _(t: Path) -> Case:
    p = garbage(t / "garbage.json")
    return Case(["tasks", "inspect", str(p)], [r"garbage\.json:line \d+: not valid UTF-8"], [p])


def inspect_eval_log(dst: Path) -> Path:
    """A zip laid out as Inspect writes a ``.eval`` log (its header entry and one sample)."""
    import zipfile

    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t", "model": "m"}}))
        z.writestr("samples/1_epoch_1.json", json.dumps({"id": 1, "epoch": 1, "messages": []}))
    return dst


INSPECT_ADVICE = r"eval logs are read through the Python API: h9eval\.integrations\.inspect_logs\.tasks_from_eval_log"


@case("inspect/inspect-eval-log")
def _(t: Path) -> Case:
    p = inspect_eval_log(t / "2026-01-01_task_abc.eval")
    return Case(
        ["tasks", "inspect", str(p)], [r"task_abc\.eval: an Inspect eval log \(\.eval, a zip", INSPECT_ADVICE], [p]
    )


@case("inspect/inspect-json-log")
def _(t: Path) -> Case:
    p = t / "log.json"
    p.write_text(json.dumps({"version": 2, "status": "success", "eval": {"task": "t", "model": "m"}, "samples": []}))
    return Case(["tasks", "inspect", str(p)], [r"log\.json: an Inspect eval log \(JSON\)", INSPECT_ADVICE], [p])


@case("inspect/zip-archive")
def _(t: Path) -> Case:
    import zipfile

    p = t / "sessions.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a.jsonl", "{}\n")
    return Case(["tasks", "inspect", str(p)], [r"sessions\.zip: a zip archive, not a session file; expected"], [p])


@case("inspect/directory-for-file")
def _(t: Path) -> Case:
    d = t / "session.jsonl"
    d.mkdir()
    return Case(
        ["tasks", "inspect", str(d)],
        [r"session\.jsonl: folder is not an OpenHands conversation \(expected event_service/events/"],
    )


@case("inspect/missing-file")
def _(t: Path) -> Case:
    return Case(["tasks", "inspect", str(t / "nope.jsonl")], [r"nope\.jsonl: no such file or folder"])


@case("inspect/mini-swe-agent-truncated")
def _(t: Path) -> Case:
    p = head_bytes(MINI, 20000, t / "x.traj.json")
    return Case(
        ["tasks", "inspect", str(p)],
        [r"x\.traj\.json:line \d+ column \d+: not valid JSON", r"expected a Claude Code"],
        [p],
    )


@case("inspect/swe-agent-truncated")
def _(t: Path) -> Case:
    p = head_bytes(SWE, 20000, t / "x.traj")
    return Case(["tasks", "inspect", str(p)], [r"x\.traj:line \d+ column \d+: not valid JSON"], [p])


@case("inspect/swe-agent-wrong-shape")
def _(t: Path) -> Case:
    d = json.loads(SWE.read_text(encoding="utf-8"))
    d["history"] = "not a list"
    p = t / "x.traj"
    p.write_text(json.dumps(d))
    return Case(["tasks", "inspect", str(p), "--format", "swe_agent"], [r"x\.traj", r"history"], [p])


@case("inspect/mini-swe-agent-wrong-shape")
def _(t: Path) -> Case:
    d = json.loads(MINI.read_text(encoding="utf-8"))
    d["messages"] = [{"role": 7, "content": None}]
    p = t / "x.traj.json"
    p.write_text(json.dumps(d))
    return Case(
        ["tasks", "inspect", str(p), "--format", "mini_swe_agent"],
        [r"x\.traj\.json:messages\[0\]: message needs a string 'role'"],
        [p],
    )


@case("inspect/openhands-truncated-event")
def _(t: Path) -> Case:
    d = t / "conv"
    shutil.copytree(OPENHANDS, d)
    ev = sorted((d / "event_service" / "events").iterdir())[3]
    head_bytes(ev, ev.stat().st_size // 2, ev)
    return Case(
        ["tasks", "inspect", str(d)],
        [r"conv:" + re_escape(ev.name) + r": not valid JSON", r"expected an OpenHands V1 event object"],
        [d],
    )


@case("inspect/openhands-event-not-object")
def _(t: Path) -> Case:
    d = t / "conv"
    shutil.copytree(OPENHANDS, d)
    ev = sorted((d / "event_service" / "events").iterdir())[1]
    ev.write_text('"just a string"')
    return Case(
        ["tasks", "inspect", str(d)], [r"conv:" + re_escape(ev.name) + r": expected an event object, got str"], [d]
    )


@case("inspect/openhands-folder-wrong-shape")
def _(t: Path) -> Case:
    d = t / "conv"
    (d / "event_service").mkdir(parents=True)
    (d / "event_service" / "base_state.json").write_text("{}")
    return Case(["tasks", "inspect", str(d), "--format", "openhands"], [r"conv", r"event_service/events"], [d])


@case("inspect/openhands-single-event")
def _(t: Path) -> Case:
    ev = sorted((OPENHANDS / "event_service" / "events").iterdir())[1]
    p = t / ev.name
    shutil.copyfile(ev, p)
    return Case(["tasks", "inspect", str(p)], [r"single OpenHands event; pass the conversation folder"], [p])


@case("inspect/unknown-json-shape")
def _(t: Path) -> Case:
    p = t / "obj.json"
    p.write_text('{"foo": 1}')
    return Case(["tasks", "inspect", str(p)], [r"obj\.json: unknown format; expected a Claude Code JSONL session"], [p])


@case("inspect/unknown-format-name")
def _(t: Path) -> Case:
    return Case(
        ["tasks", "inspect", str(SWE), "--format", "swe-agent"],
        [r"unknown recorded format 'swe-agent'; did you mean 'swe_agent'"],
    )


@case("inspect/forced-wrong-format")
def _(t: Path) -> Case:
    return Case(
        ["tasks", "inspect", str(CC_SESSION), "--format", "swe_agent"],
        [re_escape(CC_SESSION.name), r"expected a SWE-agent trajectory object"],
    )


@case("inspect/deeply-nested-json")
def _(t: Path) -> Case:
    p = t / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    return Case(["tasks", "inspect", str(p)], [r"deep\.json", r"(nested too deeply|unknown format)"], [p])


@case("inspect/fake-sqlite")
def _(t: Path) -> Case:
    p = t / "h9.db"
    p.write_bytes(b"SQLite format 3\x00" + b"\x00garbage" * 50)
    return Case(["tasks", "inspect", str(p)], [r"h9\.db: not a readable SQLite database"], [p])


@case("inspect/db-unknown-session")
def _(t: Path) -> Case:
    from h9eval.harness9.session_store import SessionStore

    p = t / "h9.db"
    s = SessionStore(p)
    s.create_session("real-session", title="t")
    s.close()
    return Case(["tasks", "inspect", str(p), "--session", "no-such-session"], [r"h9\.db", r"no-such-session"], [p])


# -- tasks generate ----------------------------------------------------------------------------


@case("generate/unknown-preset")
def _(t: Path) -> Case:
    out = existing_file(t)
    return Case(
        ["tasks", "generate", "--preset", "smal", "--out", str(out)],
        [r"unknown preset 'smal'; did you mean 'small'\?"],
        [out],
    )


@case("generate/negative-seed")
def _(t: Path) -> Case:
    out = existing_file(t)
    return Case(
        ["tasks", "generate", "--seed", "-1", "--out", str(out)],
        [r"seed must be a non-negative integer; got -1"],
        [out],
    )


@case("generate/out-under-a-regular-file")
def _(t: Path) -> Case:
    f = existing_file(t, "notes.txt")
    return Case(
        ["tasks", "generate", "--out", str(f / "task.jsonl")],
        [r"notes\.txt", r"(not a folder|Not a directory|exists)"],
        [t],
    )


@case("generate/out-is-a-folder")
def _(t: Path) -> Case:
    d = t / "tasks.jsonl"
    d.mkdir()
    (d / "inside.txt").write_text("keep me")
    return Case(
        ["tasks", "generate", "--out", str(d)], [r"tasks\.jsonl", r"(is a folder|Is a directory|is a directory)"], [t]
    )


@case("generate/seed-not-int")
def _(t: Path) -> Case:
    return Case(
        ["tasks", "generate", "--seed", "x", "--out", str(t / "x.jsonl")],
        [r"--seed: invalid int value: 'x'"],
        [t],
        usage_error=True,
    )


# -- run -----------------------------------------------------------------------------------------


def run_argv(task: str | Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--task", str(task), "--out", str(out), *extra]


@case("run/truncated-recorded-session")
def _(t: Path) -> Case:
    out = existing_run(t)
    p = head_bytes(CC_SESSION, 7777, t / "s.jsonl")
    return Case(run_argv(p, out), [r"s\.jsonl:line \d+: not valid JSON"], [out, p])


@case("run/task-jsonl-non-json-line")
def _(t: Path) -> Case:
    out = existing_run(t)
    p = good_task_jsonl(t)
    with open(p, "a", encoding="utf-8") as f:
        f.write("this is not json\n")
    return Case(
        run_argv(p, out), [r"task\.jsonl:line 2: line is not JSON", r"expected one task object per line"], [out, p]
    )


@case("run/task-jsonl-missing-field")
def _(t: Path) -> Case:
    out = existing_run(t)
    p = good_task_jsonl(t)
    d = json.loads(p.read_text(encoding="utf-8"))
    d["messages"] = "no"
    p.write_text(json.dumps(d) + "\n")
    return Case(run_argv(p, out), [r"task\.jsonl:line 1\.messages: expected a list of messages, got str"], [out, p])


@case("run/task-jsonl-bad-message")
def _(t: Path) -> Case:
    out = existing_run(t)
    p = good_task_jsonl(t)
    d = json.loads(p.read_text(encoding="utf-8"))
    d["messages"][3]["content"] = 12
    p.write_text(json.dumps(d) + "\n")
    return Case(
        run_argv(p, out), [r"task\.jsonl:line 1\.messages\[3\]: field 'content' must be a string, got int"], [out, p]
    )


@case("run/empty-task-folder")
def _(t: Path) -> Case:
    out = existing_run(t)
    d = t / "sessions"
    d.mkdir()
    (d / "README.txt").write_text("no sessions here")
    return Case(run_argv(d, out), [r"sessions", r"no (recorded )?sessions? (found|under)"], [out, d])


@case("run/folder-with-a-broken-session")
def _(t: Path) -> Case:
    out = existing_run(t)
    d = t / "sessions"
    d.mkdir()
    shutil.copyfile(SWE, d / "a.traj")
    garbage(d / "b.traj")
    return Case(run_argv(d, out), [r"b\.traj:line \d+: not valid UTF-8"], [out, d])


@case("run/inspect-eval-log")
def _(t: Path) -> Case:
    p = inspect_eval_log(t / "log.eval")
    return Case(
        ["run", "--task", str(p), "--out", str(t / "o")], [r"log\.eval: an Inspect eval log", INSPECT_ADVICE], [t]
    )


@case("run/missing-task")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(run_argv(t / "gone.jsonl", out), [r"gone\.jsonl: no such file or folder"], [out])


@case("run/bad-synthetic-spec")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small:x", out), [r"task spec 'synthetic:small:x': seed must be an integer, got 'x'"], [out]
    )


@case("run/unknown-synthetic-preset")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(run_argv("synthetic:marathn", out), [r"unknown preset 'marathn'; did you mean 'marathon'\?"], [out])


@case("run/unknown-policy")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--policy", "progresive"),
        [r"unknown policy 'progresive'; did you mean 'progressive'\? available: "],
        [out],
    )


@case("run/set-violates-validation")
def _(t: Path) -> Case:
    out = existing_run(t)
    argv = run_argv("synthetic:small", out, "--set", "warn_frac=0.9", "--set", "soft_frac=0.7")
    return Case(argv, [r"warn_frac must be < soft_frac \(0\.7\), got 0\.9"], [out])


@case("run/set-wrong-type")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--set", "warn_frac=abc"), [r"warn_frac", r"abc", r"(number|float)"], [out]
    )


@case("run/set-negative-window")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--set", "context_window_tokens=-5"), [r"context_window_tokens", r"-5"], [out]
    )


@case("run/set-unknown-parameter")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--set", "warn_fracc=0.5"),
        [r"unknown parameter of policy 'progressive' 'warn_fracc'; did you mean 'warn_frac'\?"],
        [out],
    )


@case("run/set-not-key-value")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--set", "warn_frac"), [r"--set 'warn_frac': expected key=value"], [out]
    )


@case("run/unknown-summarizer")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--summarizer", "antropic"),
        [r"unknown summarizer 'antropic'; did you mean 'anthropic'\?"],
        [out],
    )


@case("run/anthropic-without-key")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--summarizer", "anthropic"),
        [r"needs an API key: set ANTHROPIC_API_KEY"],
        [out],
    )


@case("run/unknown-scorer")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--probes", "recal"),
        [r"unknown scorer 'recal'; did you mean 'recall'\?"],
        [out],
    )


@case("run/window-zero")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--window", "0"), [r"window must be an integer >= 1,000 tokens, got 0"], [out]
    )


@case("run/window-one")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--window", "1"), [r"window must be an integer >= 1,000 tokens, got 1"], [out]
    )


@case("run/compact-at-not-int")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(run_argv("synthetic:small", out, "--compact-at", "3,x"), [r"--compact-at", r"'x'", r"integer"], [out])


@case("run/cache-is-a-folder")
def _(t: Path) -> Case:
    out = existing_run(t)
    d = t / "cache.sqlite"
    d.mkdir()
    return Case(
        run_argv("synthetic:small", out, "--summarizer-cache", str(d)),
        [r"cache path '.*cache\.sqlite' is a directory; expected a database file"],
        [out, d],
    )


@case("run/cache-is-garbage")
def _(t: Path) -> Case:
    out = existing_run(t)
    c = garbage(t / "cache.sqlite", 8192)
    return Case(
        run_argv("synthetic:small", out, "--summarizer-cache", str(c)),
        [r"cache\.sqlite", r"not an? (SQLite )?database"],
        [out, c],
    )


@case("run/out-under-a-regular-file")
def _(t: Path) -> Case:
    f = existing_file(t, "notes.txt")
    return Case(
        run_argv("synthetic:small", f / "results"), [r"notes\.txt", r"(not a folder|Not a directory|exists)"], [t]
    )


@case("run/out-is-a-regular-file")
def _(t: Path) -> Case:
    f = existing_file(t, "results")
    return Case(run_argv("synthetic:small", f), [r"results", r"(not a folder|File exists|exists)"], [t])


@case("run/corrupt-sessions-db-in-out")
def _(t: Path) -> Case:
    out = existing_run(t)
    garbage(out / "sessions.db", 512)
    return Case(
        run_argv("synthetic:small:0", out, "--set", "context_window_tokens=16000"),
        [r"sessions\.db: cannot open as a harness9 session database"],
        [out],
    )


@case("run/bad-history-mode")
def _(t: Path) -> Case:
    out = existing_run(t)
    return Case(
        run_argv("synthetic:small", out, "--history-mode", "writeback"),
        [r"--history-mode: invalid choice: 'writeback'"],
        [out],
        usage_error=True,
    )


@case("run/missing-out")
def _(t: Path) -> Case:
    # --out is optional for a closed-loop --world run, so its absence with --task is h9eval's error
    return Case(["run", "--task", "synthetic:small"], [r"--task: --out FOLDER is required"], [t])


# -- sweep ---------------------------------------------------------------------------------------


@case("sweep/missing-spec")
def _(t: Path) -> Case:
    return Case(["sweep", str(t / "nope.toml"), "--out", str(t / "o")], [r"nope\.toml: no such sweep spec file"], [t])


@case("sweep/invalid-toml")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t\n' + MINIMAL_SPEC)
    return Case(["sweep", str(p), "--out", str(t / "o")], [r"spec\.toml: not valid TOML", r"line 1"], [t])


@case("sweep/binary-spec")
def _(t: Path) -> Case:
    p = garbage(t / "spec.toml")
    return Case(["sweep", str(p), "--out", str(t / "o")], [r"spec\.toml: cannot read sweep spec", r"utf-8"], [t])


@case("sweep/spec-is-a-folder")
def _(t: Path) -> Case:
    d = t / "spec.toml"
    d.mkdir()
    return Case(["sweep", str(d), "--out", str(t / "o")], [r"spec\.toml"], [t])


@case("sweep/unknown-top-level-key")
def _(t: Path) -> Case:
    p = spec_file(t, 'nmae = "t"\n' + MINIMAL_SPEC)
    return Case(["sweep", str(p), "--out", str(t / "o")], [r"unknown top-level key 'nmae'; did you mean 'name'\?"], [t])


@case("sweep/unknown-policy-key")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC + "parms = {}\n")
    return Case(
        ["sweep", str(p), "--out", str(t / "o")], [r"policies\[0\]", r"'parms'", r"did you mean 'params'\?"], [t]
    )


@case("sweep/unknown-policy-kind")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC.replace("keep_all", "progresive"))
    return Case(
        ["sweep", str(p), "--out", str(t / "o")],
        [r"policies\[0\]\.kind: unknown policy 'progresive'; did you mean 'progressive'\?"],
        [t],
    )


@case("sweep/unknown-grid-parameter")
def _(t: Path) -> Case:
    text = 'name = "t"\n' + MINIMAL_SPEC.replace("keep_all", "progressive") + "grid = { warn_fracc = [0.5] }\n"
    p = spec_file(t, text)
    return Case(
        ["sweep", str(p), "--out", str(t / "o")],
        [r"policies\[0\]\.grid\.warn_fracc", r"did you mean 'warn_frac'\?"],
        [t],
    )


@case("sweep/invalid-grid-cell")
def _(t: Path) -> Case:
    text = (
        'name = "t"\n'
        + MINIMAL_SPEC.replace("keep_all", "progressive")
        + "grid = { warn_frac = [0.6, 0.8], soft_frac = [0.7] }\n"
    )
    p = spec_file(t, text)
    return Case(
        ["sweep", str(p), "--out", str(t / "o")],
        [r"policies\[0\] cell \{warn_frac=0\.8, soft_frac=0\.7\}", r"must be < soft_frac"],
        [t],
    )


@case("sweep/grid-not-a-list")
def _(t: Path) -> Case:
    text = 'name = "t"\n' + MINIMAL_SPEC.replace("keep_all", "progressive") + "grid = { warn_frac = 0.5 }\n"
    p = spec_file(t, text)
    return Case(["sweep", str(p), "--out", str(t / "o")], [r"policies\[0\]\.grid\.warn_frac", r"list"], [t])


@case("sweep/repeats-wrong-type")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\nrepeats = "two"\n' + MINIMAL_SPEC)
    return Case(["sweep", str(p), "--out", str(t / "o")], [r"repeats: must be an integer >= 1, got 'two'"], [t])


@case("sweep/unknown-history-mode")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\nhistory_modes = ["vue"]\n' + MINIMAL_SPEC)
    return Case(
        ["sweep", str(p), "--out", str(t / "o")],
        [r"history_modes\[0\]: unknown history mode 'vue'; did you mean 'view'\?"],
        [t],
    )


@case("sweep/unknown-summarizer")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC + '\n[summarizer]\nname = "ofline"\n')
    return Case(
        ["sweep", str(p), "--out", str(t / "o")],
        [r"summarizer\.name: unknown summarizer 'ofline'; did you mean 'offline' or 'offline_recent'\?"],
        [t],
    )


@case("sweep/broken-recorded-task")
def _(t: Path) -> Case:
    head_bytes(CC_SESSION, 5000, t / "s.jsonl")
    p = spec_file(t, 'name = "t"\n[tasks]\nrecorded = ["s.jsonl"]\n\n[[policies]]\nkind = "keep_all"\n')
    return Case(
        ["sweep", str(p), "--out", str(t / "o")], [r"tasks\.recorded\[0\]", r"s\.jsonl:line \d+: not valid JSON"], [t]
    )


@case("sweep/out-is-a-regular-file")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC)
    f = existing_file(t, "results")
    return Case(["sweep", str(p), "--out", str(f)], [r"results: results path exists and is not a folder"], [t])


@case("sweep/out-is-a-foreign-folder")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC)
    d = foreign_folder(t)
    return Case(
        ["sweep", str(p), "--out", str(d)],
        [r"my-thesis: folder exists, is not empty and has no manifest\.json; refusing"],
        [d, p],
    )


@case("sweep/out-is-a-run-folder")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC)
    out = existing_run(t)
    return Case(
        ["sweep", str(p), "--out", str(out)], [r"manifest\.json: not an h9eval sweep manifest \(kind 'run'"], [out, p]
    )


@case("sweep/out-has-corrupt-manifest")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC)
    d = t / "o"
    d.mkdir()
    (d / "manifest.json").write_text('{"schema_version": 1, "kind": "sweep", "cel')
    return Case(["sweep", str(p), "--out", str(d)], [r"manifest\.json:line 1: manifest is not JSON"], [d, p])


@case("sweep/negative-workers")
def _(t: Path) -> Case:
    p = spec_file(t, 'name = "t"\n' + MINIMAL_SPEC)
    return Case(
        ["sweep", str(p), "--workers", "-1", "--out", str(t / "o")], [r"workers must be an integer >= 0, got -1"], [t]
    )


# -- policies and the top level --------------------------------------------------------------


@case("policies/unknown-option")
def _(t: Path) -> Case:
    return Case(["policies", "--jsn"], [r"unrecognized arguments: --jsn"], usage_error=True)


@case("top/unknown-command")
def _(t: Path) -> Case:
    return Case(["swep", "x.toml"], [r"invalid choice: 'swep'"], usage_error=True)


# -- report ----------------------------------------------------------------------------------
# Known bugs in modules still being written by their owners are marked in KNOWN_BUGS (xfail,
# not strict): the case starts passing when they are fixed.

KNOWN_BUGS: dict[str, str] = {}


@case("report/foreign-folder")
def _(t: Path) -> Case:
    d = foreign_folder(t)
    return Case(["report", str(d)], [r"my-thesis: no manifest\.json; not an h9eval sweep results folder"], [d])


@case("report/unknown-schema-version")
def _(t: Path) -> Case:
    sw = existing_sweep(t)
    m = json.loads((sw / "manifest.json").read_text(encoding="utf-8"))
    m["schema_version"] = 99
    (sw / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    return Case(
        ["report", str(sw)],
        [r"manifest\.json: manifest schema_version 99 is not supported; this h9eval reads schema_version 1"],
        [sw],
    )


@case("report/corrupt-manifest")
def _(t: Path) -> Case:
    sw = existing_sweep(t)
    head_bytes(sw / "manifest.json", 100, sw / "manifest.json")
    return Case(["report", str(sw)], [r"manifest\.json:line \d+: manifest is not JSON"], [sw])


@case("report/manifest-is-a-list")
def _(t: Path) -> Case:
    sw = existing_sweep(t)
    (sw / "manifest.json").write_text("[]", encoding="utf-8")
    return Case(["report", str(sw)], [r"manifest\.json", r"(not an h9eval|expected)"], [sw])


@case("report/truncated-cell-marker")
def _(t: Path) -> Case:
    sw = existing_sweep(t)
    (sw / "consolidated.json").unlink()  # make the reader rebuild from the cell parts
    marker = sorted((sw / "cells").glob("*/run.parquet"))[0]
    head_bytes(marker, 100, marker)
    return Case(
        ["report", str(sw)], [re_escape(marker.parent.name) + r"/run\.parquet: not a readable parquet table"], [sw]
    )


@case("report/cell-table-foreign-parquet")
def _(t: Path) -> Case:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sw = existing_sweep(t)
    (sw / "consolidated.json").unlink()
    marker = sorted((sw / "cells").glob("*/run.parquet"))[0]
    pq.write_table(pa.table({"x": [1, 2]}), marker)
    return Case(["report", str(sw)], [r"run\.parquet: parquet file lacks h9eval_schema_version"], [sw])


def manifest_only(tmp: Path) -> Path:
    """A sweep folder that kept its manifest and lost its tables and cells (a copy that stopped
    after the first file, a sweep killed before any cell finished)."""
    sw = existing_sweep(tmp)
    for p in sorted(sw.iterdir()):
        if p.name != "manifest.json":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    return sw


NO_TABLES = r"sweep: has manifest\.json but no results tables \(runs\.parquet, .*\) and no finished cell"


@case("report/manifest-without-tables")
def _(t: Path) -> Case:
    sw = manifest_only(t)
    return Case(["report", str(sw), "--out", str(t / "rep")], [NO_TABLES, r"expected a sweep with at least one"], [t])


@case("compare/manifest-without-tables")
def _(t: Path) -> Case:
    sw = manifest_only(t)
    return Case(["compare", str(sw), "keep_all", "progressive"], [NO_TABLES], [sw])


@case("compare/list-manifest-without-tables")
def _(t: Path) -> Case:
    sw = manifest_only(t)
    return Case(["compare", str(sw), "--list"], [NO_TABLES], [sw])


@case("report/missing-folder")
def _(t: Path) -> Case:
    return Case(["report", str(t / "gone")], [r"gone: no such results folder"])


@case("report/records-non-json-line")
def _(t: Path) -> Case:
    run = existing_run(t)
    recs = run / "compaction_records"
    f = sorted(recs.glob("*.jsonl"))[0]
    lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) >= 2
    lines[1] = "not json at all\n"
    f.write_text("".join(lines), encoding="utf-8")
    return Case(
        ["report", "--records", str(recs), "--out", str(t / "rep")],
        [re_escape(f.name) + r":line 2: line is not JSON", r"expected one compaction record per line"],
        [run],
    )


@case("report/records-missing-field")
def _(t: Path) -> Case:
    run = existing_run(t)
    recs = run / "compaction_records"
    f = sorted(recs.glob("*.jsonl"))[0]
    lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
    d = json.loads(lines[0])
    del d["tokens_before"]
    lines[0] = json.dumps(d) + "\n"
    f.write_text("".join(lines), encoding="utf-8")
    return Case(
        ["report", "--records", str(recs), "--out", str(t / "rep")],
        [re_escape(f.name) + r":line 1: record lacks field 'tokens_before'"],
        [run],
    )


@case("report/records-without-out")
def _(t: Path) -> Case:
    run = existing_run(t)
    return Case(["report", "--records", str(run / "compaction_records")], [r"--records needs --out DIR"], [run])


@case("report/records-and-results")
def _(t: Path) -> Case:
    run = existing_run(t)
    argv = ["report", str(run), "--records", str(run / "compaction_records"), "--out", str(t / "rep")]
    return Case(argv, [r"give either RESULTS_DIR or --records DIR, not both"], [run])


@case("report/no-arguments")
def _(t: Path) -> Case:
    return Case(["report"], [r"give a sweep.s or a run.s RESULTS_DIR, or --records DIR --out DIR"])


@case("report/out-is-a-regular-file")
def _(t: Path) -> Case:
    sw = existing_sweep(t)
    f = existing_file(t, "report")
    return Case(["report", str(sw), "--out", str(f)], [r"report", r"(not a folder|exists)"], [sw, f])


# -- tune ------------------------------------------------------------------------------------


def tune_argv(*extra: str) -> list[str]:
    return ["tune", "--tasks", "synthetic:small:0", *extra]


@case("tune/window-zero")
def _(t: Path) -> Case:
    return Case(tune_argv("--window", "0"), [r"window must be > 0 tokens, got 0"], [t])


@case("tune/window-negative")
def _(t: Path) -> Case:
    return Case(tune_argv("--window", "-5"), [r"window must be > 0 tokens, got -5"], [t])


@case("tune/window-not-int")
def _(t: Path) -> Case:
    return Case(tune_argv("--window", "200k"), [r"--window: invalid int value: '200k'"], [t], usage_error=True)


@case("tune/unknown-model")
def _(t: Path) -> Case:
    return Case(
        tune_argv("--model", "claude-sonet-4-5"),
        [r"unknown model 'claude-sonet-4-5'; did you mean 'claude-sonnet-4-5'"],
        [t],
    )


@case("tune/grid-not-json")
def _(t: Path) -> Case:
    return Case(tune_argv("--window", "16000", "--grid", "{warn_frac: [0.5]}"), [r"--grid is not JSON"], [t])


@case("tune/grid-unknown-parameter")
def _(t: Path) -> Case:
    return Case(
        tune_argv("--window", "16000", "--grid", '{"warn_fracc": [0.5]}'),
        [r"'warn_fracc'; did you mean 'warn_frac'\?"],
        [t],
    )


@case("tune/grid-value-not-list")
def _(t: Path) -> Case:
    return Case(
        tune_argv("--window", "16000", "--grid", '{"warn_frac": 0.5}'),
        [r"grid\.warn_frac must be a non-empty list, got 0\.5"],
        [t],
    )


@case("tune/broken-task")
def _(t: Path) -> Case:
    p = head_bytes(CC_SESSION, 5000, t / "s.jsonl")
    return Case(["tune", "--tasks", str(p), "--window", "16000"], [r"s\.jsonl:line \d+: not valid JSON"], [t])


@case("tune/models-file-bad-window")
def _(t: Path) -> Case:
    m = t / "models.toml"
    m.write_text('[models.my-model]\ncontext_window_tokens = "big"\n', encoding="utf-8")
    return Case(
        tune_argv("--model", "my-model", "--models-file", str(m)),
        [r"models\.toml", r"context_window_tokens must be a positive integer, got .*'big'"],
        [t],
    )


@case("tune/models-file-binary")
def _(t: Path) -> Case:
    m = garbage(t / "models.toml")
    return Case(tune_argv("--model", "x", "--models-file", str(m)), [r"models\.toml"], [t])


@case("tune/out-is-a-regular-file")
def _(t: Path) -> Case:
    f = existing_file(t, "tune-out")
    return Case(
        tune_argv("--window", "16000", "--grid", '{"warn_frac": [0.5]}', "--out", str(f)),
        [r"tune-out", r"(not a folder|exists)"],
        [t],
    )


def re_escape(s: str) -> str:
    import re

    return re.escape(s)


@case("sweep/empty-task-folder")
def _(t: Path) -> Case:
    empty = t / "sessions"
    empty.mkdir()
    p = spec_file(t, f'name = "e"\n[tasks]\nrecorded = ["{empty}"]\n\n[[policies]]\nkind = "keep_all"\n')
    return Case(
        ["sweep", str(p), "--out", str(t / "o")], [r"tasks\.recorded\[0\]: no sessions found in .*sessions"], [t]
    )


@case("report/records-empty-folder")
def _(t: Path) -> Case:
    d = t / "compaction_records"
    d.mkdir()
    return Case(
        ["report", "--records", str(d), "--out", str(t / "rep")],
        [r"compaction_records: no compaction record files"],
        [t],
    )


@case("tune/negative-workers")
def _(t: Path) -> Case:
    return Case(tune_argv("--window", "16000", "--workers", "-1"), [r"workers must be >= 0 .*got -1"], [t])


N_BROKEN_INPUTS = len(CASES)
"""The number of broken invocations tried (quoted in docs/RELIABILITY.md)."""


# -- the check -------------------------------------------------------------------------------


def snapshot(paths: list[Path]) -> dict[str, tuple[str, int, bytes | None]]:
    """Every entry under ``paths``: kind, mtime (ns) and bytes (files) — lstat, no following."""
    snap: dict[str, tuple[str, int, bytes | None]] = {}

    def add(p: Path) -> None:
        if p.name == LOCK_NAME:  # the folder lock's file holds its holder's pid while held: coordination, not data
            return
        st = p.lstat()
        if p.is_symlink():
            snap[str(p)] = ("link", st.st_mtime_ns, os.readlink(p).encode())
        elif p.is_dir():
            snap[str(p)] = ("dir", 0, None)  # a folder's mtime changes when a tmp file comes and goes
            for q in sorted(p.iterdir()):
                add(q)
        else:
            snap[str(p)] = ("file", st.st_mtime_ns, p.read_bytes())

    for p in paths:
        if os.path.lexists(p):
            add(p)
    return snap


def run_cli(argv: list[str], cwd: Path, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "H9EVAL_DEBUG")}
    env.update(env_extra or {})
    return subprocess.run(
        [PYTHON, "-m", "h9eval", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_BUGS[n], strict=False)) if n in KNOWN_BUGS else n
        for n in sorted(CASES)
    ],
)
def test_bad_input_fails_cleanly(name: str, tmp_path: Path) -> None:
    import re

    work = tmp_path / "w"
    work.mkdir()
    c = CASES[name](work)
    before = snapshot(c.protect)
    proc = run_cli(c.argv, cwd=work, env_extra=c.env)
    out, err = proc.stdout, proc.stderr
    where = f"\n$ h9eval {' '.join(c.argv)}\n--- stdout\n{out}\n--- stderr\n{err}"
    assert "Traceback" not in out + err, where
    assert proc.returncode == 2, where
    assert out == "", where
    lines = err.rstrip("\n").split("\n")
    if c.usage_error:  # argparse: a (wrapped) usage block, then one error line
        assert lines[0].startswith("usage: h9eval") and re.match(r"h9eval[a-z ]*: error: ", lines[-1]), where
    else:
        assert len(lines) == 1, where
        assert re.match(rf"h9eval {re.escape(c.argv[0])}: error: ", lines[0]), where
    for rx in c.expect:
        assert re.search(rx, lines[-1]), f"stderr does not match {rx!r}{where}"
    after = snapshot(c.protect)
    assert after.keys() == before.keys(), f"files appeared or vanished: {sorted(after.keys() ^ before.keys())}{where}"
    for k, v in before.items():
        assert after[k] == v, f"{k} was modified{where}"


def test_broken_input_count() -> None:
    """The README figure: how many broken invocations are tried, and over which commands."""
    commands = {n.split("/")[0] for n in CASES}
    assert {"conformance", "inspect", "generate", "run", "sweep", "report", "tune", "policies"} <= commands
    assert N_BROKEN_INPUTS >= 60
    print(f"\nh9eval CLI: {N_BROKEN_INPUTS} broken inputs over {len(commands)} command groups")
