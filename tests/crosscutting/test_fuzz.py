"""Fuzzing with hypothesis (issue 9): parsers and loaders never fail in an undeclared way.

* the anchor parser / merge / format: never raise, always one anchor per type;
* every recorded-session loader on randomly truncated and byte-corrupted copies of the real
  sessions in ``shared/data/recorded``: a :class:`~h9eval.tasks.model.Task` or a
  :class:`~h9eval.core.errors.FormatError`, never ``KeyError``/``TypeError``/``IndexError``/
  ``UnicodeDecodeError``/...;
* tool-pair repair on arbitrary message lists: never raises, leaves no orphan result and no
  call without a result, and is idempotent;
* the conformance case loader and runner on corrupted case JSON: a result or ``FormatError``;
* the sweep-spec parser on arbitrary TOML-like dicts: a spec or ``ConfigError``/``FormatError``.

Example counts are module constants (:data:`EXAMPLES`) so docs/RELIABILITY.md can quote them;
derandomized so CI is reproducible (``HYPOTHESIS_SEED``-free), and sized to run in well under
60 s on 2 cores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h9eval.compaction.anchors import (
    ANCHOR_HEADERS,
    ANCHOR_TYPES,
    NA,
    Anchor,
    anchor_types_for,
    format_anchors,
    merge_anchors,
    parse_anchors_and_summary,
)
from h9eval.compaction.repair import REPAIR_PLACEHOLDER, repair_tool_pairs
from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.paths import conformance_dir, recorded_dir
from h9eval.tasks.model import Task

EXAMPLES: dict[str, int] = {
    "anchors_parse": 300,
    "anchors_merge_format": 200,
    "recorded_per_format": 100,
    "repair": 300,
    "conformance_case": 150,
    "sweep_spec": 200,
}
"""hypothesis ``max_examples`` per property (quoted in docs/RELIABILITY.md)."""

REC = recorded_dir()
# One real session per format (the smaller ones, so each example stays fast).
SESSIONS: dict[str, Path] = {
    "claude_code": REC / "claude-code" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-aac57f5.jsonl",
    "claude_code_compact": REC
    / "claude-code"
    / "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    / "subagents"
    / "agent-acompact-f46190.jsonl",
    "mini_swe_agent": REC / "mini-swe-agent" / "deepseek_chat_dev" / "pylint-dev__astroid-1978.traj.json",
    "swe_agent": REC / "swe-agent" / "pydicom__pydicom-1458.traj",
}
FORMAT_OF = {
    "claude_code": "claude_code",
    "claude_code_compact": "claude_code",
    "mini_swe_agent": "mini_swe_agent",
    "swe_agent": "swe_agent",
}
OPENHANDS = REC / "openhands" / "3f3d5850aca74c6db03728ce9d896373"

N_EXAMPLES_TOTAL = (
    EXAMPLES["anchors_parse"]
    + EXAMPLES["anchors_merge_format"]
    + EXAMPLES["recorded_per_format"] * (len(SESSIONS) * 2 * 2 + 1)  # bytes/structure x detected/forced, + OpenHands
    + EXAMPLES["repair"]
    + EXAMPLES["conformance_case"]
    + EXAMPLES["sweep_spec"]
)
"""The README figure: examples run per ``pytest tests/test_fuzz.py``."""

FAST = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- anchors ------------------------------------------------------------------------------------

HEADER_LINES = [f"### {h}" for h in ANCHOR_HEADERS.values()] + [
    "## Summary",
    "## Anchors",
    "###",
    "### ",
    "##Summary",
    " ### User Intent ",
    "N/A",
    "- N/A",
    "",
]
anchor_text = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(HEADER_LINES), st.text(max_size=40)), max_size=30).map("\n".join),
)


@settings(max_examples=EXAMPLES["anchors_parse"], **FAST)
@given(text=anchor_text, extra=st.sampled_from([(), ("constraint",), ("constraint", "artifact")]))
def test_anchor_parser_never_raises(text: str, extra: tuple[str, ...]) -> None:
    types = anchor_types_for(extra)
    anchors, summary = parse_anchors_and_summary(text, types)
    assert [a.type for a in anchors] == list(types)
    assert all(isinstance(a.content, str) and a.content for a in anchors)  # N/A when absent
    assert isinstance(summary, str)
    if extra == ():
        assert len(anchors) == 5


anchors_st = st.lists(
    st.builds(Anchor, st.sampled_from(ANCHOR_TYPES + ("bogus",)), st.one_of(st.just(NA), st.text(max_size=30))),
    max_size=8,
)


@settings(max_examples=EXAMPLES["anchors_merge_format"], **FAST)
@given(old=st.one_of(st.none(), anchors_st), new=st.one_of(st.none(), anchors_st), na_safe=st.booleans())
def test_anchor_merge_and_format_never_raise(old: list[Anchor] | None, new: list[Anchor] | None, na_safe: bool) -> None:
    overwrites: list[str] = []
    merged = merge_anchors(old, new, na_safe=na_safe, overwrites=overwrites)
    assert [a.type for a in merged] == list(ANCHOR_TYPES)
    text = format_anchors(merged)
    again, _ = parse_anchors_and_summary(text)
    assert len(again) == 5
    assert set(overwrites) <= set(ANCHOR_TYPES) | {"bogus"}


# -- recorded-session loaders ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def originals() -> dict[str, bytes]:
    return {k: p.read_bytes() for k, p in SESSIONS.items()}


corruption = st.tuples(
    st.floats(min_value=0.0, max_value=1.0),  # keep this fraction of the file
    st.lists(st.tuples(st.floats(min_value=0.0, max_value=0.9999), st.integers(0, 255)), max_size=6),  # byte writes
    st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=0.9999),
            st.sampled_from(
                [b"\n", b"{", b"}", b'"', b"]", b"\\", b"\x00", b"\xff", b"null", b"[]", b"{}", b'"\\udcff"']
            ),
        ),
        max_size=4,
    ),
)


def corrupt(data: bytes, c: tuple[float, list[tuple[float, int]], list[tuple[float, bytes]]]) -> bytes:
    keep, writes, inserts = c
    b = bytearray(data[: int(len(data) * keep)])
    for pos, val in writes:
        if b:
            b[int(pos * len(b))] = val
    for pos, ins in inserts:
        i = int(pos * len(b))
        b[i:i] = ins
    return bytes(b)


def load_or_format_error(path: Path, fmt: str | None, seen: dict[str, int]) -> None:
    from h9eval.tasks.recorded import load_task

    try:
        t = load_task(path, fmt)
    except FormatError:
        seen["FormatError"] = seen.get("FormatError", 0) + 1
        return
    assert isinstance(t, Task)
    seen["Task"] = seen.get("Task", 0) + 1


def restructure(data: bytes, jsonl: bool, draw: st.DataObject) -> bytes:
    """Valid JSON of the wrong shape: a random subtree replaced or deleted, and (JSONL) the file
    cut at a line boundary. This reaches the loaders' field handling, past the JSON parser."""
    text = data.decode("utf-8")
    if jsonl:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        keep = draw.draw(st.integers(1, len(lines)))
        lines = lines[:keep]
        for _ in range(draw.draw(st.integers(1, 3))):
            i = draw.draw(st.integers(0, len(lines) - 1))
            lines[i] = json.dumps(mutate_json(json.loads(lines[i]), draw))
        return ("\n".join(lines) + "\n").encode()
    obj = json.loads(text)
    for _ in range(draw.draw(st.integers(1, 3))):
        obj = mutate_json(obj, draw)
    return json.dumps(obj).encode()


@pytest.mark.parametrize("name", sorted(SESSIONS))
@pytest.mark.parametrize("forced", [False, True], ids=["detected", "forced"])
@pytest.mark.parametrize("mode", ["bytes", "structure"])
def test_recorded_loaders_on_corrupted_files(
    name: str, forced: bool, mode: str, originals: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    d = tmp_path_factory.mktemp("fuzz-" + name)
    target = d / SESSIONS[name].name
    jsonl = target.suffix == ".jsonl"
    seen: dict[str, int] = {}

    @settings(max_examples=EXAMPLES["recorded_per_format"], **FAST)
    @given(c=corruption, data=st.data())
    def prop(c: Any, data: st.DataObject) -> None:
        if mode == "bytes":
            target.write_bytes(corrupt(originals[name], c))
        else:
            target.write_bytes(restructure(originals[name], jsonl, data))
        load_or_format_error(target, FORMAT_OF[name] if forced else None, seen)

    prop()
    # The fuzzing reached the state it means to test: broken inputs refused, and (structural
    # mode) inputs that parse far enough to load.
    assert seen.get("FormatError", 0) > 0, seen
    if mode == "structure":
        assert seen.get("Task", 0) > 0, seen


def test_openhands_loader_on_corrupted_folders(tmp_path_factory: pytest.TempPathFactory) -> None:
    d = tmp_path_factory.mktemp("fuzz-openhands") / "conv"
    shutil.copytree(OPENHANDS, d)
    events = sorted((d / "event_service" / "events").iterdir())
    originals = {p: p.read_bytes() for p in events + [d / "event_service" / "base_state.json"]}
    files = sorted(originals)
    seen: dict[str, int] = {}

    @settings(max_examples=EXAMPLES["recorded_per_format"], **FAST)
    @given(which=st.lists(st.integers(0, len(files) - 1), min_size=1, max_size=3), c=corruption, delete=st.booleans())
    def prop(which: list[int], c: Any, delete: bool) -> None:
        touched = [files[i] for i in sorted(set(which))]
        for f in touched:
            if delete and f.name != "base_state.json":
                f.unlink()
            else:
                f.write_bytes(corrupt(originals[f], c))
        try:
            load_or_format_error(d, None, seen)
        finally:
            for f in touched:  # restore for the next example
                f.write_bytes(originals[f])

    prop()
    assert seen.get("FormatError", 0) > 0 and seen.get("Task", 0) > 0, seen


# -- tool-pair repair -----------------------------------------------------------------------------

ids_st = st.sampled_from(["a", "b", "c", "d", "", "../x", "a\x00"])
tool_call_st = st.builds(ToolCall, ids_st, st.sampled_from(["bash", "read_file", ""]), st.just("{}"))
message_st = st.one_of(
    st.builds(Message, st.sampled_from(["system", "user", "assistant", "tool", "weird"]), st.text(max_size=5)),
    st.builds(Message, st.just("assistant"), st.text(max_size=5), st.lists(tool_call_st, max_size=3).map(tuple)),
    st.builds(Message, st.sampled_from(["user", "tool"]), st.text(max_size=5), st.just(()), ids_st),
)


@settings(max_examples=EXAMPLES["repair"], **FAST)
@given(msgs=st.lists(message_st, max_size=25), role=st.sampled_from(["user", "tool"]))
def test_repair_tool_pairs_on_arbitrary_lists(msgs: list[Message], role: str) -> None:
    out = repair_tool_pairs(msgs, placeholder_role=role)
    called = {tc.id for m in out if m.role == "assistant" for tc in m.tool_calls}
    results = {m.tool_call_id for m in out if m.tool_call_id}
    assert results <= called, "no result without its call"
    assert {c for c in called if c} <= results, "no call without a result"
    kept = [m for m in out if not (m.content == REPAIR_PLACEHOLDER and m.role == role)]
    assert all(m in msgs for m in kept), "repair only drops messages or adds placeholders"
    if all(tc.id for m in msgs for tc in m.tool_calls):
        assert repair_tool_pairs(out, placeholder_role=role) == out  # idempotent (empty ids aside)


# -- conformance cases ----------------------------------------------------------------------------

CASES = sorted(conformance_dir().glob("*.json"))

json_value = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(10**12), 10**12), st.floats(allow_nan=False), st.text(max_size=10)
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def mutate_json(obj: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace, delete or keep a random subtree of ``obj``."""
    action = data.draw(st.sampled_from(["keep", "replace", "descend", "descend", "descend"]))
    if action == "replace" or (depth > 6 and action == "descend"):
        return data.draw(json_value)
    if action == "keep":
        return obj
    if isinstance(obj, dict) and obj:
        k = data.draw(st.sampled_from(sorted(obj)))
        out = dict(obj)
        if data.draw(st.booleans()):
            del out[k]
        else:
            out[k] = mutate_json(obj[k], data, depth + 1)
        return out
    if isinstance(obj, list) and obj:
        i = data.draw(st.integers(0, len(obj) - 1))
        out = list(obj)
        out[i] = mutate_json(obj[i], data, depth + 1)
        return out
    return data.draw(json_value)


def test_conformance_loader_and_runner_on_corrupted_cases(tmp_path_factory: pytest.TempPathFactory) -> None:
    from h9eval.harness9.conformance import load_case, run_case

    d = tmp_path_factory.mktemp("fuzz-cases")
    originals = [json.loads(p.read_text(encoding="utf-8")) for p in CASES]
    raw = [p.read_bytes() for p in CASES]

    @settings(max_examples=EXAMPLES["conformance_case"], **FAST)
    @given(i=st.integers(0, len(CASES) - 1), as_bytes=st.booleans(), c=corruption, data=st.data())
    def prop(i: int, as_bytes: bool, c: Any, data: st.DataObject) -> None:
        p = d / "case.json"
        if as_bytes:
            p.write_bytes(corrupt(raw[i], c))
        else:
            p.write_text(json.dumps(mutate_json(originals[i], data)), encoding="utf-8")
        try:
            case = load_case(p)
        except FormatError:
            return
        try:
            out = run_case(case, str(p))
        except FormatError:
            return
        assert isinstance(out, dict)

    prop()


# -- sweep specs ------------------------------------------------------------------------------------

try:
    from h9eval.sweeps.spec import TOP_LEVEL_KEYS, load_spec

    HAVE_SWEEP = True
except ImportError:  # pragma: no cover - the sweep module is optional while it is being written
    HAVE_SWEEP = False

BASE_SPEC: dict[str, Any] = {
    "name": "fuzz",
    "window": 16000,
    "history_modes": ["view", "write_back"],
    "repeats": 1,
    "tasks": {"specs": ["synthetic:small:0"], "synthetic": [{"preset": "small", "seeds": [0, 1]}]},
    "policies": [
        {"kind": "progressive", "params": {"context_window_tokens": 16000}, "grid": {"warn_frac": [0.5, 0.6]}},
        {"kind": "keep_all"},
    ],
    "summarizer": {"variants": ["offline", "offline_free_text"]},
    "probes": {"scorers": ["recall"], "every_k": 10},
}
toml_scalar = st.one_of(
    st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12)
)
toml_value = st.recursive(
    toml_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=10,
)


@pytest.mark.skipif(not HAVE_SWEEP, reason="h9eval.sweeps.sweep not available")
@settings(max_examples=EXAMPLES["sweep_spec"], **FAST)
@given(data=st.data(), fresh=st.booleans())
def test_sweep_spec_parser_on_arbitrary_dicts(data: st.DataObject, fresh: bool) -> None:
    if fresh:
        keys = st.one_of(st.sampled_from(list(TOP_LEVEL_KEYS)), st.text(max_size=10))
        spec = data.draw(st.dictionaries(keys, toml_value, max_size=8))
    else:
        spec = mutate_json(BASE_SPEC, data)
    try:
        s = load_spec(spec)
    except (ConfigError, FormatError):
        return
    assert s is not None
