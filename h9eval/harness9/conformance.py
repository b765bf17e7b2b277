"""Run harness9 reference cases (``shared/reference/conformance/FORMAT.md``) against the port.

Every case file is fed to the same code users run; the harness9 compatibility switches are set
from the case (``compat=True``, Go path building, and the legacy forced truncation for cases
tagged ``compact_force:legacy_last1``). Nothing here knows individual cases.
"""

from __future__ import annotations

import json
import lzma
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.compaction.anchors import Anchor, format_anchors, merge_anchors, parse_anchors_and_summary
from h9eval.compaction.base import CompactionEnv
from h9eval.compaction.offload import (
    OFFLOAD_COMPACTION_THRESHOLD_BYTES,
    OFFLOAD_HOOK_THRESHOLD_BYTES,
    OffloadHook,
    ToolOutput,
)
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.compaction.records import CompactionRecord
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.compaction.budget import budget_compact, budget_for_window, force_legacy_last1, force_anchor_greedy_v3
from h9eval.core.errors import FormatError
from h9eval.core.messages import Message, ToolCall, messages_from_json
from h9eval.compaction.summary import ScriptedSummarizer
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "KINDS",
    "LEGACY_TAG",
    "CaseResult",
    "CaseTiming",
    "CaseTimer",
    "ConformanceReport",
    "discover_cases",
    "load_case",
    "run_case",
    "run_conformance",
    "compare",
]

KINDS = (
    "estimate_tokens",
    "determine_tier",
    "progressive",
    "token_budget",
    "repair_tool_pairs",
    "parse_anchors",
    "merge_anchors",
    "offload_hook",
)
LEGACY_TAG = "compact_force:legacy_last1"


@dataclass
class CaseResult:
    path: str
    name: str
    kind: str
    passed: bool
    differences: list[str] = field(default_factory=list)
    timing: CaseTiming | None = None

    def one_line(self, max_diffs: int = 3) -> str:
        shown = "; ".join(self.differences[:max_diffs])
        more = len(self.differences) - max_diffs
        return f"FAIL {self.path}: {shown}" + (f"; (+{more} more differences)" if more > 0 else "")


@dataclass
class ConformanceReport:
    results: list[CaseResult]

    @property
    def n_passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def n_failed(self) -> int:
        return len(self.results) - self.n_passed

    def summary_line(self) -> str:
        return f"{self.n_passed} passed, {self.n_failed} failed"


# -- discovery and loading --------------------------------------------------------------------
def discover_cases(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Case files under the given files/folders: ``*.json`` and ``*.json.xz``, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(
                sorted(
                    q for q in p.rglob("*") if q.is_file() and (q.name.endswith(".json") or q.name.endswith(".json.xz"))
                )
            )
        elif p.exists():
            out.append(p)
        else:
            raise FormatError("no such file or folder", path=str(p))
    return out


def load_case(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        raw = lzma.decompress(p.read_bytes()) if p.name.endswith(".xz") else p.read_bytes()
        case = json.loads(raw.decode("utf-8"))
    except OSError as e:
        raise FormatError(f"cannot read case file: {e.strerror or e}", path=str(p)) from None
    except lzma.LZMAError as e:
        raise FormatError(f"not a valid xz file: {e}", path=str(p)) from None
    except UnicodeDecodeError:
        raise FormatError("case file is not UTF-8", path=str(p)) from None
    except json.JSONDecodeError as e:
        raise FormatError(
            f"not JSON ({e.msg}); expected one case object", path=str(p), where=f"line {e.lineno}"
        ) from None
    if not isinstance(case, dict):
        raise FormatError("expected a case object with kind, input and expected", path=str(p))
    for k in ("kind", "input", "expected"):
        if k not in case:
            raise FormatError(f"case lacks field {k!r}", path=str(p))
    if case["kind"] not in KINDS:
        raise FormatError(
            f"unknown case kind {case['kind']!r}; expected one of {', '.join(KINDS)}", path=str(p), where="kind"
        )
    if not isinstance(case["input"], dict) or not isinstance(case["expected"], dict):
        raise FormatError("fields 'input' and 'expected' must be objects", path=str(p))
    return case


# -- message conversion (FORMAT.md §2.1 role mapping) -------------------------------------------
def _msgs_in(objs: Any, where: str, path: str) -> list[Message]:
    ms = messages_from_json(objs, where=where, path=path)
    return [Message("user", m.content, m.tool_calls, m.tool_call_id, m.is_error) if m.role == "tool" else m for m in ms]


def _msgs_out(ms: Sequence[Message]) -> list[dict[str, Any]]:
    out = []
    for m in ms:
        d: dict[str, Any] = {"role": "tool" if (m.role == "user" and m.tool_call_id) else m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [tc.to_json() for tc in m.tool_calls]
        if m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


def _anchors_in(objs: Any, where: str, path: str) -> list[Anchor] | None:
    if objs is None:
        return None
    if not isinstance(objs, list):
        raise FormatError("expected a list of anchors or null", path=path, where=where)
    try:
        return [Anchor(str(a["type"]), str(a["content"])) for a in objs]
    except (KeyError, TypeError):
        raise FormatError("anchor needs 'type' and 'content'", path=path, where=where) from None


def _anchors_out(anchors: Sequence[Anchor] | None) -> list[dict[str, str]]:
    return [a.to_json() for a in anchors or ()]


def _files_under(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = p.read_bytes().decode("utf-8", "replace")
    return out


# -- running ----------------------------------------------------------------------------------
def _median(values: list[int]) -> float:
    import statistics  # with fractions and decimal, a tenth of start-up: only when timing is asked for

    return statistics.median(values)


class CaseTimer:
    """Times the compaction calls of one case (never its parsing or comparison): total
    nanoseconds and each call's nanoseconds under the tier it ended in."""

    def __init__(self, *, read_prompts: bool = False) -> None:
        self.read_prompts = read_prompts
        """The scripted summarizer reads every prompt, so the time includes building them (a
        model client always reads them; without it the port builds none, harness9's Go code
        builds each)."""
        self.total_ns = 0
        self.total_cpu_ns = 0
        self.by_tier: dict[str, list[int]] = {}

    def add(self, tier: str, ns: int, cpu_ns: int = 0) -> None:
        self.total_ns += ns
        self.total_cpu_ns += cpu_ns
        self.by_tier.setdefault(tier, []).append(ns)

    def timing(self, name: str) -> CaseTiming:
        return CaseTiming(
            case=name,
            steps=sum(len(v) for v in self.by_tier.values()),
            compaction_ns=self.total_ns,
            compaction_cpu_ns=self.total_cpu_ns,
            tier_median_ns={k: int(_median(v)) for k, v in sorted(self.by_tier.items())},
        )


@dataclass(frozen=True)
class CaseTiming:
    """What ``h9eval conformance --timing`` prints for one case (one JSON line)."""

    case: str
    steps: int
    compaction_ns: int
    tier_median_ns: dict[str, int]
    compaction_cpu_ns: int = 0
    """This process's CPU time inside the compaction calls: on a machine shared with other jobs
    the wall time ``compaction_ns`` also counts the time the process waited for a core."""

    def json_line(self) -> str:
        return json.dumps(
            {
                "case": self.case,
                "steps": self.steps,
                "compaction_ns": self.compaction_ns,
                "compaction_cpu_ns": self.compaction_cpu_ns,
                "tier_median_ns": self.tier_median_ns,
            }
        )


def run_case(case: dict[str, Any], path: str = "<case>", timer: CaseTimer | None = None) -> dict[str, Any]:
    """Compute the ``expected`` object of a case with the port (``timer`` collects the time spent
    inside its compaction calls)."""
    kind, inp = case["kind"], case["input"]
    legacy = LEGACY_TAG in (case.get("tags") or [])
    try:
        return _RUNNERS[kind](inp, path, legacy, timer or CaseTimer())
    except FormatError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise FormatError(
            f"malformed input for kind {kind!r}: {type(e).__name__}: {e}", path=path, where="input"
        ) from None


def _estimate(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    ms = _msgs_in(inp["messages"], "input.messages", path)
    return {"tokens": estimate_tokens(ms), "per_message": [estimate_tokens([m]) for m in ms]}


def _policy(cfg: dict[str, Any], legacy: bool, fallback: Any = "default") -> ProgressiveCompactor:
    fb_max: int | None = None
    fb_tail: int | None = 6
    if fallback == "nil":
        fb_tail = None
    elif isinstance(fallback, dict):
        fb_max, fb_tail = int(fallback["max_tokens"]), int(fallback["min_tail_messages"])
    elif fallback != "default":
        raise ValueError(f"config.fallback must be 'default', 'nil' or an object, got {fallback!r}")
    return ProgressiveCompactor(
        compat=True,
        context_window_tokens=int(cfg["context_window"]),
        warn_frac=float(cfg["warn_threshold"]),
        soft_frac=float(cfg["soft_threshold"]),
        full_frac=float(cfg["full_threshold"]),
        emergency_frac=float(cfg["emergency_threshold"]),
        min_tail_messages=int(cfg["min_tail_messages"]),
        offload_threshold_bytes=int(cfg.get("offload_threshold", OFFLOAD_COMPACTION_THRESHOLD_BYTES)),
        fallback_max_tokens=fb_max,
        fallback_min_tail_messages=fb_tail,
        forced_truncation="legacy_last1" if legacy else "anchor_greedy_v3",
    )


def _tier(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    cfg = inp["config"]
    p = _policy(cfg, legacy)
    ms = _msgs_in(inp["messages"], "input.messages", path)
    tokens = estimate_tokens(ms)
    w = p.context_window_tokens
    head, tail = p.split(ms)
    return {
        "tokens": tokens,
        "ratio": tokens / w if w > 0 else None,
        "tier": p.tier_for_tokens(tokens).label,
        "split": {"head": _msgs_out(head) if head is not None else None, "tail": _msgs_out(tail)},
    }


def _record_out(rec: CompactionRecord | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {
        "tier": rec.tier.label,
        "tokens_before": rec.tokens_before,
        "tokens_after": rec.tokens_after,
        "msgs_before": rec.msgs_before,
        "msgs_after": rec.msgs_after,
        "summarized": rec.summarized,
        "preserved_tail": rec.preserved_tail,
        "compression_ratio": round(rec.compression_ratio, 6),
        "anchors": _anchors_out(rec.anchors),
        "offloaded": [
            {
                "tool_call_id": o.tool_call_id,
                "tool_name": o.tool_name,
                "file": o.file_path,
                "bytes": o.bytes,
                "lines": o.lines,
            }
            for o in rec.offloaded or ()
        ],
        "summary_text": rec.summary_text,
        "error": rec.error,
    }


def _progressive(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    cfg = inp["config"]
    policy = _policy(cfg, legacy, cfg.get("fallback", "default"))
    sm = inp.get("summarizer")
    summarizer = None
    if sm is not None:
        summarizer = ScriptedSummarizer(
            sm.get("responses") or [], sm.get("fail_on_calls") or [], read_prompts=timer.read_prompts
        )
    with tempfile.TemporaryDirectory(prefix="h9conf-") as tmp:
        root = Path(tmp) / "work"
        env = CompactionEnv(
            summarizer=summarizer,
            offload_root=root if cfg.get("offloader") else None,
            session_id=str(cfg.get("session_id", "")),
            harness9_paths=True,
            seed=0,
        )
        run = policy.start(env)
        init = cfg.get("initial_state")
        if init:
            run.set_last_summary(str(init.get("last_summary", "")))
            run.set_last_anchors(_anchors_in(init.get("last_anchors"), "input.config.initial_state.last_anchors", path))
        steps_out = []
        # Each step's messages live until the case ends, as a session's history does (and as the
        # Go driver keeps its inputs): freeing the previous step's whole history would otherwise
        # fall inside the next compaction call (when the compactor lets go of it) and be timed.
        inputs: list[list[Message]] = []
        for i, step in enumerate(inp["steps"]):
            ms = _msgs_in(step["messages"], f"input.steps[{i}].messages", path)
            inputs.append(ms)
            snapshot = list(ms)
            n_calls = len(run.calls)
            op = step.get("op", "compact_with_record")
            if op == "compact_with_record":
                c0, t0 = time.process_time_ns(), time.perf_counter_ns()
                res = run.compact(ms)
            elif op == "compact_force":
                c0, t0 = time.process_time_ns(), time.perf_counter_ns()
                res = run.compact(ms, force=True)
            else:
                raise ValueError(f"input.steps[{i}].op must be compact_with_record or compact_force, got {op!r}")
            timer.add(res.tier.label, time.perf_counter_ns() - t0, time.process_time_ns() - c0)
            if ms != snapshot:
                raise AssertionError("compaction mutated its input")
            steps_out.append(
                {
                    "messages": _msgs_out(res.view),
                    "record": _record_out(res.record),
                    "summarizer_inputs": [
                        {
                            "call": c.call,
                            "template": c.template,
                            "previous_compaction": c.previous_compaction,
                            "conversation": c.conversation,
                            "outcome": c.outcome,
                        }
                        for c in run.calls[n_calls:]
                    ],
                    "state_after": {
                        "last_summary": run.last_summary,
                        "last_anchors": _anchors_out(run.last_anchors) if run.last_anchors is not None else None,
                    },
                    "offload_files": _files_under(root) if root.exists() else {},
                }
            )
    return {"steps": steps_out}


def _token_budget(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    c = inp["compactor"]
    if "context_window" in c:
        max_tokens, tail = budget_for_window(int(c["context_window"])), 6
    else:
        max_tokens, tail = int(c["max_tokens"]), int(c["min_tail_messages"])
    ms = _msgs_in(inp["messages"], "input.messages", path)
    op = inp["op"]
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    if op == "compact":
        out = budget_compact(ms, max_tokens, tail)
    elif op == "compact_force":
        out = force_legacy_last1(ms) if legacy else force_anchor_greedy_v3(ms, max_tokens)
    else:
        raise ValueError(f"input.op must be compact or compact_force, got {op!r}")
    timer.add(op, time.perf_counter_ns() - t0, time.process_time_ns() - c0)
    return {"messages": _msgs_out(out), "tokens_before": estimate_tokens(ms), "tokens_after": estimate_tokens(out)}


def _repair(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    return {"messages": _msgs_out(repair_tool_pairs(_msgs_in(inp["messages"], "input.messages", path)))}


def _parse(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    text = inp["text"]
    if not isinstance(text, str):
        raise ValueError("input.text must be a string")
    anchors, summary = parse_anchors_and_summary(text)
    return {"anchors": _anchors_out(anchors), "summary": summary, "formatted": format_anchors(anchors)}


def _merge(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    merged = merge_anchors(
        _anchors_in(inp.get("old"), "input.old", path), _anchors_in(inp.get("new"), "input.new", path)
    )
    return {"anchors": _anchors_out(merged), "formatted": format_anchors(merged)}


def _hook(inp: dict[str, Any], path: str, legacy: bool, timer: CaseTimer) -> dict[str, Any]:
    cfg, tc, r = inp["config"], inp["tool_call"], inp["result"]
    with tempfile.TemporaryDirectory(prefix="h9conf-") as tmp:
        root = Path(tmp) / "work"
        root.mkdir()
        hook = OffloadHook(
            root,
            str(cfg.get("session_id", "")),
            threshold_bytes=OFFLOAD_HOOK_THRESHOLD_BYTES if cfg.get("threshold") is None else int(cfg["threshold"]),
            preview_lines=20 if cfg.get("preview_lines") is None else int(cfg["preview_lines"]),
            harness9_paths=True,
        )
        call = ToolCall(str(tc.get("id", "")), str(tc.get("name", "")), str(tc.get("arguments", "") or ""))
        out = hook.after_execute(
            call, ToolOutput(str(r.get("tool_call_id", "")), str(r.get("output", "")), bool(r.get("is_error", False)))
        )
        return {
            "result": {"tool_call_id": out.tool_call_id, "output": out.output, "is_error": out.is_error},
            "files": _files_under(root),
        }


_RUNNERS = {
    "estimate_tokens": _estimate,
    "determine_tier": _tier,
    "progressive": _progressive,
    "token_budget": _token_budget,
    "repair_tool_pairs": _repair,
    "parse_anchors": _parse,
    "merge_anchors": _merge,
    "offload_hook": _hook,
}


# -- comparison -------------------------------------------------------------------------------
def compare(expected: Any, actual: Any, where: str = "") -> Iterator[str]:
    """Differences per FORMAT.md §5: exact except ``compression_ratio`` (1e-6); numbers compared
    numerically; key order ignored."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            w = f"{where}.{k}" if where else k
            if k not in actual:
                yield f"{w}: missing (expected {_short(expected[k])})"
            elif k not in expected:
                continue  # the port may report more than the case pins
            else:
                yield from compare(expected[k], actual[k], w)
        return
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{where}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            yield from compare(e, a, f"{where}[{i}]")
        return
    num = (int, float)
    if (
        isinstance(expected, num)
        and isinstance(actual, num)
        and not isinstance(expected, bool)
        and not isinstance(actual, bool)
    ):
        tol = 1e-6 if where.endswith("compression_ratio") else 0.0
        if not (math.isclose(expected, actual, rel_tol=0, abs_tol=tol) or expected == actual):
            yield f"{where}: expected {expected!r}, got {actual!r}"
        return
    if expected != actual or type(expected) is not type(actual):
        yield f"{where}: expected {_short(expected)}, got {_short(actual)}"


def _short(v: Any, n: int = 120) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[: n - 3] + "..."


def run_conformance(
    paths: Sequence[str | os.PathLike[str]],
    *,
    on_case: Callable[[CaseResult], None] | None = None,
    read_prompts: bool = False,
) -> ConformanceReport:
    """Run every case under ``paths``. Raises :class:`FormatError` for an unreadable case.
    ``on_case`` sees each result as soon as its case has run (the CLI streams timing lines);
    ``read_prompts``: see :class:`CaseTimer`."""
    results = []
    for p in discover_cases(paths):
        case = load_case(p)
        timer = CaseTimer(read_prompts=read_prompts)
        actual = run_case(case, str(p), timer)
        diffs = list(compare(case["expected"], actual))
        name = str(case.get("name", p.stem))
        r = CaseResult(str(p), name, case["kind"], not diffs, diffs, timer.timing(name))
        results.append(r)
        if on_case is not None:
            on_case(r)
    return ConformanceReport(results)
