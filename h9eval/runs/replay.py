"""Replay a task through a policy call by call, as harness9's agent loop does (spec §2.2).

The transcript is walked in order. A tool result passes through the tool-time
:class:`~h9eval.compaction.offload.OffloadHook` as it arrives (policies that carry
``offload_hook_threshold_bytes``, i.e. harness9's, or when asked). Before every assistant
message (one model call) the compactor runs on the history; the tokens sent are the view's
estimate plus the tool schemas'. Two history modes:

* ``view`` (harness9 V1): the compacted list is only that call's input; history keeps growing.
* ``write_back`` (harness9 PR #121): an effective compaction replaces the history (and the
  session store), under the V3 rules by default (``writeback_rules="v2"`` for the first
  version: no write-back of emergency results, and no token-only effectiveness).

Token totals are kept as running byte sums, so a call costs O(1) beyond what the policy itself
does (harness9's view mode re-summarises the whole head at every call above the threshold:
that cost is the policy's, not the replay's).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.compaction.base import Compaction, CompactionEnv, LogicalClock, Policy, WallClock, params_hash, policy_params
from h9eval.compaction.offload import OFFLOAD_HOOK_THRESHOLD_BYTES, OffloadHook, ToolOutput
from h9eval.core.paths import safe_name
from h9eval.compaction.records import CompactionRecord, FileRecordStore, Tier
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.paths import prepare_out_dir, write_json_atomic
from h9eval.results.io import write_table
from h9eval.results.schema import CALL_COLUMNS, CALLS_SCHEMA_VERSION, MANIFEST, MANIFEST_SCHEMA_VERSION
from h9eval.compaction.summary import Summarizer
from h9eval.tasks.model import Task
from h9eval.core.tokens import estimate_tool_tokens

__all__ = ["ReplayConfig", "ReplayResult", "replay", "HISTORY_MODES"]

HISTORY_MODES = ("view", "write_back")


@dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """How to replay.

    ``history_mode``: ``view`` (default) or ``write_back``. ``writeback_rules``: ``v3``
    (default, newest harness9) or ``v2``. ``manual_compact_at``: call indices (0-based) at
    which a ``/compact`` runs before the turn. ``tool_time_offload``: ``None`` → on for
    policies with ``offload_hook_threshold_bytes`` (harness9's), else off.
    ``context_window_tokens``: the window for ratios and overflow when the policy has none
    (default 200,000). ``system_prompt``: prepended (never persisted) when a transcript has
    no system message, as harness9's engine does. ``v1_alias_offload`` (view mode only):
    emulate harness9 V1's alias bug, where the compaction-time offload rewrote the engine's
    history in place, so offloaded tool results stay placeholders in later calls (approximate:
    in V1 a failed summary's fallback view also held the placeholders). ``keep_views``: keep every view sent (memory!). ``deterministic``:
    seeded record ids and a logical clock, so reruns are byte-identical (default on).
    """

    history_mode: str = "view"
    writeback_rules: str = "v3"
    manual_compact_at: tuple[int, ...] = ()
    tool_time_offload: bool | None = None
    context_window_tokens: int | None = None
    keep_views: bool = False
    deterministic: bool = True
    seed: int = 0
    system_prompt: str = "You are a software engineering agent. Use the available tools to complete the user's task."
    v1_alias_offload: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "manual_compact_at", tuple(self.manual_compact_at))
        if self.history_mode not in HISTORY_MODES:
            raise ConfigError(f"ReplayConfig.history_mode must be one of {', '.join(HISTORY_MODES)}, got {self.history_mode!r}")
        if self.writeback_rules not in ("v2", "v3"):
            raise ConfigError(f"ReplayConfig.writeback_rules must be v2 or v3, got {self.writeback_rules!r}")
        if self.v1_alias_offload and self.history_mode != "view":
            raise ConfigError("ReplayConfig.v1_alias_offload emulates a view-mode bug: it needs history_mode='view'")
        if self.context_window_tokens is not None and self.context_window_tokens <= 0:
            raise ConfigError(f"ReplayConfig.context_window_tokens must be > 0, got {self.context_window_tokens}")


@dataclass
class ReplayResult:
    """Everything a replay produced. ``calls``/``compactions``/``probes`` are tidy DataFrames."""

    run_id: str
    task_id: str
    policy_kind: str
    params: dict[str, Any]
    params_hash: str
    config: ReplayConfig
    calls: Any
    compactions: Any
    probes: Any
    records: list[CompactionRecord] = field(default_factory=list)
    views: list[tuple[Message, ...]] | None = None
    final_history: list[Message] = field(default_factory=list)
    out_dir: Path | None = None

    def summary(self) -> dict[str, Any]:
        """Headline numbers of the run (what ``h9eval run`` prints)."""
        c = self.calls
        if len(c) == 0:
            return {"calls": 0}
        tiers = c[c["compacted"]]["tier_name"].value_counts().to_dict()
        return {
            "run_id": self.run_id,
            "task_id": self.task_id,
            "policy": self.policy_kind,
            "history_mode": self.config.history_mode,
            "calls": int(len(c)),
            "compactions_by_tier": {k: int(v) for k, v in sorted(tiers.items())},
            "peak_tokens_sent": int(c["tokens_sent"].max()),
            "final_tokens_sent": int(c["tokens_sent"].iloc[-1]),
            "peak_history_tokens": int(c["history_tokens"].max()),
            "offloads_tool_time": int(c["offloads_tool_time_count"].sum()),
            "offloads_compaction": int(c["offloads_compaction_count"].sum()),
            "summarizer_calls": int(c["summarizer_calls"].sum()),
            "summarizer_cost_usd": float(c["summarizer_cost_usd"].sum()),
            "fallbacks": int(c["fallback"].sum()),
            "forced_truncations": int(c["forced_truncation"].sum()),
            "overflows": int(c["overflow"].sum()),
            **self._probe_summary(),
        }

    def _probe_summary(self) -> dict[str, Any]:
        p = self.probes
        if p is None or not len(p) or "score" not in p.columns:
            return {}
        ok = p[p["answerable"].astype(bool)]
        out: dict[str, Any] = {"probe_rows": int(len(p))}
        for (method, scope), g in ok.groupby(["method", "scope"]):
            out[f"mean_{method}_{scope}"] = round(float(g["score"].mean()), 3)
        return out


def _writes_back(rec: CompactionRecord | None, view: Sequence[Message], rules: str) -> bool:
    """harness9's write-back predicate (spec §2.3)."""
    if rec is None or not view:
        return False
    if rules == "v2":
        return rec.error == "" and (rec.msgs_after < rec.msgs_before or bool(rec.offloaded))
    if rec.error != "" and rec.tier != Tier.EMERGENCY:
        return False
    return rec.msgs_after < rec.msgs_before or rec.tokens_after < rec.tokens_before or bool(rec.offloaded)


ProbeFn = Callable[[Task, Sequence[Message], int, dict[str, Any]], list[dict[str, Any]]]


def replay(
    task: Task,
    policy: Policy,
    *,
    summarizer: Summarizer | None | str = "offline",
    config: ReplayConfig | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    offload_root: str | os.PathLike[str] | None = None,
    probe_fn: ProbeFn | None = None,
    probe_every_k: int | None = None,
    session_store: bool = True,
    session_id: str | None = None,
) -> ReplayResult:
    """Run ``task`` through ``policy``; see the module docstring.

    ``summarizer``: a Summarizer, ``None`` (no summarizer: summaries fail → fallback), or a
    registered name (default ``offline``). ``out_dir``: when given, ``calls.parquet``,
    ``compactions.parquet``, ``probes.parquet``, harness9's ``compaction_records/*.jsonl``,
    ``sessions.db`` and ``manifest.json`` are written there. ``offload_root``: where offload
    files go (default ``<out_dir>/work``, or a fresh temporary folder). ``probe_fn`` is called
    after every compaction, every ``probe_every_k`` calls and at the last call.
    ``session_id``: names offload folders and record files (default: derived from the run
    id); sweeps pass the task id so identical summary prompts hit the shared cache.
    """
    import pandas as pd

    cfg = config or ReplayConfig()
    if isinstance(summarizer, str):
        from h9eval.summarizers.registry import make_summarizer

        summarizer = make_summarizer(summarizer)
    params = policy_params(policy)
    phash = params_hash(policy.kind, params)
    run_id = run_id or f"{task.task_id}--{policy.kind}-{phash}-{cfg.history_mode}"
    session_id = safe_name(session_id if session_id is not None else run_id) or "session"
    window = int(getattr(policy, "context_window_tokens", 0) or 0) or cfg.context_window_tokens or 200_000
    if cfg.context_window_tokens is not None and not hasattr(policy, "context_window_tokens"):
        window = cfg.context_window_tokens

    out = Path(out_dir) if out_dir is not None else None
    tmp_ctx = None
    if offload_root is None:
        if out is not None:
            offload_root = out / "work"
        else:
            tmp_ctx = tempfile.TemporaryDirectory(prefix="h9eval-offload-")
            offload_root = tmp_ctx.name
    store = None
    sessions = None
    if out is not None:
        prepare_out_dir(out, what="results folder")
    if out is not None and session_store:
        from h9eval.harness9.session_store import SessionStore

        # Opened (and so validated) before anything already in ``out`` is replaced: a corrupt
        # sessions.db must fail the run without deleting the previous run's records.
        sessions = SessionStore(out / "sessions.db")
    if out is not None:
        store = FileRecordStore(out / "compaction_records")
        store.remove(session_id)  # a rerun into the same folder replaces, never appends twice
    if sessions is not None:
        if sessions.has_session(session_id):
            sessions.delete_session(session_id)  # a rerun into the same folder replaces it
        sessions.create_session(session_id, title=task.task_id)

    env = CompactionEnv(
        summarizer=summarizer,
        offload_root=offload_root,
        session_id=session_id,
        record_store=store,
        clock=LogicalClock() if cfg.deterministic else WallClock(),
        seed=cfg.seed if cfg.deterministic else None,
    )
    compactor = policy.start(env)
    hook_on = cfg.tool_time_offload if cfg.tool_time_offload is not None else hasattr(policy, "offload_hook_threshold_bytes")
    hook = (
        OffloadHook(offload_root, session_id, threshold_bytes=int(getattr(policy, "offload_hook_threshold_bytes", OFFLOAD_HOOK_THRESHOLD_BYTES)))
        if hook_on
        else None
    )
    tool_tokens = estimate_tool_tokens(task.tools)
    manual = set(cfg.manual_compact_at)

    history: list[Message] = []
    if not task.messages or task.messages[0].role != "system":
        # harness9 prepends a freshly built system prompt when history lacks one (spec §2.1);
        # its compactor leaves a list without a system message untouched.
        history.append(Message("system", cfg.system_prompt))
    hist_bytes = sum(m.nbytes for m in history)
    pending: list[Message] = []  # messages not yet in the session store
    calls_by_id: dict[str, ToolCall] = {}
    rows: list[dict[str, Any]] = []
    probe_rows: list[dict[str, Any]] = []
    records: list[CompactionRecord] = []
    views: list[tuple[Message, ...]] | None = [] if cfg.keep_views else None
    hook_count = hook_bytes = 0
    n_calls = sum(1 for m in task.messages if m.role == "assistant")
    call_index = -1
    n_compactions = 0

    def persist_replace(new_history: list[Message]) -> None:
        nonlocal pending
        if sessions is not None:
            sessions.replace_history(session_id, new_history)
        pending = []

    try:
        for i, m in enumerate(task.messages):
            if m.role != "assistant":
                if m.tool_call_id and hook is not None:
                    tc = calls_by_id.get(m.tool_call_id, ToolCall(m.tool_call_id, "", ""))
                    before = len(hook.offloaded)
                    res = hook.after_execute(tc, ToolOutput(m.tool_call_id, m.content, m.is_error))
                    if len(hook.offloaded) > before:
                        hook_count += 1
                        hook_bytes += hook.offloaded[-1].bytes
                        m = m.with_content(res.output)
                history.append(m)
                pending.append(m)
                hist_bytes += m.nbytes
                continue

            call_index += 1
            is_manual = call_index in manual
            comps: list[Compaction] = []
            written = False
            if is_manual:
                mc = compactor.compact_manual(history) if hasattr(compactor, "compact_manual") else compactor.compact_force(history)
                comps.append(mc)
                # harness9's /compact rewrites the session unconditionally (spec §2.4)
                history = list(mc.view)
                hist_bytes = sum(x.nbytes for x in history)
                persist_replace(history)
                written = True
            h_tokens, h_msgs = hist_bytes // 4, len(history)
            comp = compactor.compact(history, tokens=h_tokens)
            comps.append(comp)
            view = comp.view
            rec = comp.record
            if cfg.history_mode == "write_back" and _writes_back(rec, view, cfg.writeback_rules) and list(view) != history:
                history = list(view)
                hist_bytes = sum(x.nbytes for x in history)
                persist_replace(history)
                written = True
            # the record already holds harness9's estimate of the view: no second O(n) pass
            if cfg.v1_alias_offload and rec is not None and rec.extra.get("offload_placeholders"):
                ph = rec.extra["offload_placeholders"]
                history = [x.with_content(ph[x.tool_call_id]) if x.tool_call_id in ph else x for x in history]
                hist_bytes = sum(x.nbytes for x in history)
            view_tokens = rec.tokens_after if rec is not None else sum(x.nbytes for x in view) // 4
            sent = view_tokens + tool_tokens
            row = _row(
                task, policy, phash, cfg, call_index, i, window, h_tokens, h_msgs, tool_tokens, sent, view_tokens, comps,
                hook_count, hook_bytes, written, is_manual,
            )
            row["run_id"] = run_id
            hook_count = hook_bytes = 0
            rows.append(row)
            for c in comps:
                if c.record is not None and c.record.tier != Tier.NONE:
                    records.append(c.record)
            if views is not None:
                views.append(view)
            n_compactions += int(row["compacted"])
            if probe_fn is not None and (
                row["compacted"]
                or (probe_every_k and call_index % probe_every_k == 0)
                or call_index == n_calls - 1
            ):
                # the view covers the transcript up to the message before this call's output
                probe_rows.extend(probe_fn(task, view, i - 1, {**row, "run_id": run_id, "n_compactions": n_compactions}))
            history.append(m)
            pending.append(m)
            hist_bytes += m.nbytes
            for tc in m.tool_calls:
                calls_by_id[tc.id] = tc
        if sessions is not None and pending:
            sessions.add_messages(session_id, [x for x in pending if x.role != "system"])
    finally:
        if sessions is not None:
            sessions.close()
        if tmp_ctx is not None:
            tmp_ctx.cleanup()

    calls_df = pd.DataFrame(rows, columns=list(CALL_COLUMNS))
    from h9eval.results.tables import records_to_frame

    comp_df = records_to_frame(records, run_id=run_id, session_id=session_id)
    probes_df = _probe_frame(probe_rows)
    result = ReplayResult(
        run_id=run_id,
        task_id=task.task_id,
        policy_kind=policy.kind,
        params=params,
        params_hash=phash,
        config=cfg,
        calls=calls_df,
        compactions=comp_df,
        probes=probes_df,
        records=records,
        views=views,
        final_history=history,
        out_dir=out,
    )
    if out is not None:
        _write_outputs(result, task, summarizer, out)
    return result


def _probe_frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    try:
        from h9eval.probes import PROBE_COLUMNS
    except ImportError:
        return pd.DataFrame(rows)
    return pd.DataFrame(rows, columns=list(PROBE_COLUMNS))


def _row(
    task: Task,
    policy: Policy,
    phash: str,
    cfg: ReplayConfig,
    call_index: int,
    message_index: int,
    window: int,
    h_tokens: int,
    h_msgs: int,
    tool_tokens: int,
    sent: int,
    view_tokens: int,
    comps: list[Compaction],
    hook_count: int,
    hook_bytes: int,
    written: bool,
    manual: bool,
) -> dict[str, Any]:
    main = comps[-1]
    rec = main.record
    tier = rec.tier if rec is not None else Tier.NONE
    summ = [sc for c in comps if c.record is not None for sc in c.record.extra.get("summary_calls", [])]
    off = [o for c in comps if c.record is not None for o in (c.record.offloaded or [])]
    errors = [c.record.error for c in comps if c.record is not None and c.record.error]
    fallback_err = next((e for e in errors if e.startswith("LLM summary failed")), "")
    compacted = any(
        c.record is not None and c.record.tier != Tier.NONE and (len(c.view) != c.record.msgs_before or c.record.tokens_after != c.record.tokens_before or bool(c.record.offloaded))
        for c in comps
    )
    return {
        "schema_version": CALLS_SCHEMA_VERSION,
        "run_id": "",  # set by the caller
        "task_id": task.task_id,
        "policy_kind": policy.kind,
        "params_hash": phash,
        "history_mode": cfg.history_mode,
        "call_index": call_index,
        "message_index": message_index,
        "context_window_tokens": window,
        "history_tokens": h_tokens,
        "history_messages": h_msgs,
        "tool_schema_tokens": tool_tokens,
        "tokens_sent": sent,
        "ratio_to_window": sent / window,
        "tier": int(tier),
        "tier_name": tier.label,
        "compacted": compacted,
        "msgs_before": rec.msgs_before if rec is not None else h_msgs,
        "msgs_after": len(main.view),
        "view_tokens": view_tokens,
        "offloads_tool_time_count": hook_count,
        "offloads_tool_time_bytes": hook_bytes,
        "offloads_compaction_count": len(off),
        "offloads_compaction_bytes": sum(o.bytes for o in off),
        "summarizer_calls": len(summ),
        "summarizer_input_tokens": sum(s.input_tokens for s in summ),
        "summarizer_output_tokens": sum(s.output_tokens for s in summ),
        "summarizer_latency_s": float(sum(s.latency_s for s in summ)),
        "summarizer_cache_hits": sum(1 for s in summ if s.cache_hit),
        "summarizer_cost_usd": float(sum(s.cost_usd for s in summ)),
        "fallback": bool(fallback_err),
        "fallback_error": fallback_err,
        "forced_truncation": any(c.record is not None and c.record.tier == Tier.EMERGENCY for c in comps),
        "overflow": sent > window,
        "overflow_tokens": max(sent - window, 0),
        "written_back": written,
        "manual_compact": manual,
        "thrash_avoided": bool(rec is not None and rec.extra.get("thrash_avoided")),
        "masked_results": int(rec.extra.get("masked", 0)) if rec is not None else 0,
        "na_overwrites": len(rec.extra.get("na_overwrites", [])) if rec is not None else 0,
        "na_overwrites_prevented": len(rec.extra.get("na_overwrites_prevented", [])) if rec is not None else 0,
    }


def _write_outputs(result: ReplayResult, task: Task, summarizer: Any, out: Path) -> None:
    from h9eval.core.provenance import provenance

    for name in ("calls", "compactions", "probes"):
        df = getattr(result, name)
        write_table(df, out / f"{name}.parquet", name)
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "kind": "run",
        "run_id": result.run_id,
        "task": {"task_id": task.task_id, "version": task.version, "source": dataclasses.asdict(task.source)},
        "policy": {"kind": result.policy_kind, "params": result.params, "params_hash": result.params_hash},
        "replay": dataclasses.asdict(result.config),
        "summarizer": getattr(summarizer, "summarizer_id", None) if summarizer is not None else None,
        "provenance": provenance(),
        "summary": result.summary(),
    }
    write_json_atomic(out / MANIFEST, manifest)
