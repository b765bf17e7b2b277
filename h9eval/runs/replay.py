"""Replay a task through a policy call by call, as harness9's agent loop does (spec §2.2).

The transcript is walked in order; what happens before each model call (the tool-time
``OffloadHook`` as a tool result arrives, a manual ``/compact``, the compaction, the
write-back) is the step both loops share, :class:`~h9eval.compaction.step.CallStep`; the tokens
sent are the view's estimate plus the tool schemas'. Two history modes:

* ``view`` (harness9 V1): the compacted list is only that call's input; history keeps growing.
* ``write_back`` (harness9 PR #121): an effective compaction replaces the history (and the
  session store), under the V3 rules by default (``writeback_rules="v2"`` for the first
  version: no write-back of emergency results, and no token-only effectiveness).

The run's window is :func:`~h9eval.compaction.step.run_window`'s: the config's window replaces
the policy's default window. Token totals are kept as running byte sums, so a call costs O(1)
beyond what the policy itself does (harness9's view mode re-summarises the whole head at every
call above the threshold: that cost is the policy's, not the replay's).

The loop is :class:`_ReplayLoop` (the transcript walk, the calls rows, the probes); the files of
a run are :class:`_RunOutputs` (opened before the loop, the tables and manifest written after it).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import uuid
from contextlib import ExitStack
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from h9eval.compaction.base import CompactionEnv, LogicalClock, Policy, WallClock, params_hash, policy_params
from h9eval.compaction.offload import reset_write_failures, write_failure_count, write_failures
from h9eval.compaction.records import (
    EXTRA_MIN_GAIN_DEFERRED,
    EXTRA_OFFLOAD_PLACEHOLDERS,
    EXTRA_SUMMARY_CALLS,
    CompactionRecord,
    FileRecordStore,
    Tier,
)
from h9eval.compaction.step import (
    HISTORY_MODES,
    WRITEBACK_RULES,
    CallRequest,
    CallStep,
    StepRules,
    run_window,
    tool_time_hook,
)
from h9eval.compaction.summary import Summarizer
from h9eval.core.anthropic import redact_secret_params
from h9eval.core.billing import (
    BillingConfig,
    SessionBiller,
    SessionBills,
    SummaryUsage,
    bill_columns,
    bill_totals,
    recorded_call_times,
)
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.core.paths import prepare_out_dir, refuse_symlink, safe_name, write_json_atomic
from h9eval.core.provenance import provenance
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tool_tokens
from h9eval.harness9.session_store import SessionStore
from h9eval.probes.drift import DEFAULT_MAX_PROBES, check_probe_budget, checkpoint_grid
from h9eval.probes.diffs import compaction_diffs
from h9eval.probes.ledger import run_ledger
from h9eval.probes.runner import CallCheckpoint, ProbeFn
from h9eval.results.io import write_table
from h9eval.results.schema import (
    CELL_PARTS,
    MANIFEST,
    MANIFEST_SCHEMA_VERSION,
    PROBE_COLUMNS,
    RUN_SUMMARY_KEYS,
    call_row,
    calls_frame,
)
from h9eval.results.tables import diffs_table, ledger_table, records_to_frame
from h9eval.summarizers.offline import OfflineSummarizer
from h9eval.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HISTORY_MODES", "ReplayConfig", "ReplayResult", "replay"]

# The default summarizer: stateless and frozen, so one instance serves every replay.
_OFFLINE = OfflineSummarizer()


@dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """How to replay.

    ``history_mode``: ``view`` (default) or ``write_back``. ``writeback_rules``: ``v3``
    (default, newest harness9) or ``v2``. ``manual_compact_at``: call indices (0-based) at
    which a ``/compact`` runs before the turn. ``tool_time_offload``: ``None`` → on for
    policies that declare a hook threshold (harness9's), else off.
    ``context_window_tokens``: the run's window: it replaces a policy's default window, and a
    policy without one is measured against it (``None``: the policy's own, else
    :data:`~h9eval.core.tokens.DEFAULT_CONTEXT_WINDOW_TOKENS`). ``system_prompt``:
    prepended (never persisted) when a transcript has
    no system message, as harness9's engine does. ``v1_alias_offload`` (view mode only):
    emulate harness9 V1's alias bug, where the compaction-time offload rewrote the engine's
    history in place, so offloaded tool results stay placeholders in later calls (approximate:
    in V1 a failed summary's fallback view also held the placeholders). ``keep_views``: keep every view sent (memory!).
    ``deterministic``:
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
    billing: BillingConfig = field(default_factory=BillingConfig)
    """How the calls are billed (models, cache placement, timing): :mod:`h9eval.core.billing`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "manual_compact_at", tuple(self.manual_compact_at))
        if self.history_mode not in HISTORY_MODES:
            raise ConfigError(
                f"ReplayConfig.history_mode must be one of {', '.join(HISTORY_MODES)}, got {self.history_mode!r}"
            )
        if self.writeback_rules not in WRITEBACK_RULES:
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
    calls: pd.DataFrame
    compactions: pd.DataFrame
    probes: pd.DataFrame
    records: list[CompactionRecord] = field(default_factory=list)
    views: list[tuple[Message, ...]] | None = None
    final_history: list[Message] = field(default_factory=list)
    out_dir: Path | None = None
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """The window the run's ratios and overflows were measured against."""
    offload_write_failures: tuple[str, ...] = ()
    """OS errors of offload writes that failed (the run went on without them, as harness9 does)."""
    ledger: pd.DataFrame | None = None
    """The loss ledger (:mod:`h9eval.probes.ledger`): each compaction round x live item's state;
    ``None`` when the replay was asked for none (``ledger=False``)."""
    diffs: pd.DataFrame | None = None
    """What each compaction round took out of the view (:mod:`h9eval.probes.diffs`), with the ledger."""

    def summary(self) -> dict[str, Any]:
        """Headline numbers of the run (what ``h9eval run`` prints): the run's identity and
        window, then :data:`~h9eval.results.schema.RUN_SUMMARY_KEYS`, then probe means."""
        head: dict[str, Any] = {
            "run_id": self.run_id,
            "task_id": self.task_id,
            "policy": self.policy_kind,
            "history_mode": self.config.history_mode,
            "context_window_tokens": self.context_window_tokens,
        }
        c = self.calls
        if len(c) == 0:
            return {**head, "calls": 0}
        numbers = _headline_numbers(c)
        numbers["compaction_records"] = len(self.compactions)
        failed = {"offload_write_failures": len(self.offload_write_failures)} if self.offload_write_failures else {}
        return {**head, **{k: numbers[k] for k in RUN_SUMMARY_KEYS}, **failed, **self._probe_summary()}

    def _probe_summary(self) -> dict[str, Any]:
        p = self.probes
        if p is None or not len(p) or "score" not in p.columns:
            return {}
        ok = p[p["answerable"].astype(bool)]
        # A pinned probe's answer sits in the system or first task message, which every policy keeps
        # verbatim or nearly: it measures pinning, not memory, so it is kept apart here as in every
        # retention the analysis reports (pinned_retention).
        if "answer_pinned" in ok.columns:
            pinned = ok["answer_pinned"].fillna(False).astype(bool)
        else:
            pinned = ok["answerable"].astype(bool) & False  # a table of before pinning was recorded
        out: dict[str, Any] = {"probe_rows": len(p)}
        for (method, scope), g in ok[~pinned].groupby(["method", "scope"]):
            out[f"mean_{method}_{scope}"] = round(float(g["score"].mean()), 3)
        for (method, scope), g in ok[pinned].groupby(["method", "scope"]):
            out[f"mean_{method}_{scope}_pinned"] = round(float(g["score"].mean()), 3)
        return out


def _headline_numbers(c: pd.DataFrame) -> dict[str, Any]:
    """Every key of RUN_SUMMARY_KEYS, from a non-empty calls table."""
    tiers = c[c["compacted"]]["tier_name"].value_counts().to_dict()
    return {
        "calls": len(c),
        "compactions": int(c["compacted"].sum()),
        "compactions_by_tier": {k: int(v) for k, v in sorted(tiers.items())},
        "peak_tokens_sent": int(c["tokens_sent"].max()),
        "final_tokens_sent": int(c["tokens_sent"].iloc[-1]),
        "peak_history_tokens": int(c["history_tokens"].max()),
        "offloads_tool_time": int(c["offloads_tool_time_count"].sum()),
        "offloads_compaction": int(c["offloads_compaction_count"].sum()),
        "summarizer_calls": int(c["summarizer_calls"].sum()),
        # an unpriced summarizer call makes the run's cost unknown, never $0
        "summarizer_cost_usd": float(c["summarizer_cost_usd"].sum(skipna=False)),
        "fallbacks": int(c["fallback"].sum()),
        "fallback_causes": _cause_counts(c),
        # absent from calls tables written before the breaker: unknown, not 0
        "summarizer_breaker_skips": int(c["summarizer_breaker_skips"].sum())
        if "summarizer_breaker_skips" in c
        else None,
        "forced_truncations": int(c["forced_truncation"].sum()),
        "overflows": int(c["overflow"].sum()),
        **_bill_numbers(c),
    }


def _bill_numbers(c: pd.DataFrame) -> dict[str, float | None]:
    """The run's billed dollars and cache-read share (``None``: an unpriced call, or no bills)."""
    totals = bill_totals(c)
    return {k: totals[k] for k in ("cost_usd", "raw_cost_usd", "cache_read_share", "invalidation_usd")}


def _cause_counts(c: pd.DataFrame) -> dict[str, int]:
    """Fallback calls per cause (``fallback_cause``; absent from files written before it was added)."""
    if "fallback_cause" not in c.columns:
        return {}
    fb = c[c["fallback"].astype(bool)]
    counts = fb["fallback_cause"].fillna("").replace("", "unknown").value_counts()
    return {str(k): int(v) for k, v in sorted(counts.items())}


@dataclass(frozen=True, kw_only=True)
class _RunFacts:
    """The columns every calls row of one run repeats."""

    run_id: str
    task_id: str
    policy_kind: str
    params_hash: str
    history_mode: str
    context_window_tokens: int
    tool_schema_tokens: int


class _RunOutputs:
    """The files of one run.

    On entry: the offload folder (``<out>/work``, the caller's, or a fresh temporary one removed
    on exit) and, with an ``out`` folder, harness9's record store and SQLite session store, both
    emptied of a previous run of the same session. The session store gets the history the
    run ends with (:meth:`append` and :meth:`replace_history` follow it, :meth:`flush` writes
    it). After the loop :meth:`write` writes the tables and the manifest.

    The store is a copy swapped in only when the run completes, so nothing sees it before
    :meth:`flush`: writing each write-back as it happens (harness9's ``persist``) would leave
    the same messages at the end at the price of SQLite work at every compaction.
    """

    def __init__(
        self,
        out: Path | None,
        *,
        session_id: str,
        title: str,
        session_store: bool,
        offload_root: str | os.PathLike[str] | None,
    ) -> None:
        self.out = out
        self.session_id = session_id
        self.offload_root: str | os.PathLike[str] = offload_root if offload_root is not None else ""
        self._root_given = offload_root is not None
        self.records: FileRecordStore | None = None
        self._title = title
        self._want_sessions = session_store
        self._sessions: SessionStore | None = None
        self._pending: list[Message] = []  # messages added since the last rewrite
        self._stored: list[Message] = []  # the last rewritten history as stored (system message aside)
        self._close = ExitStack()
        # Nothing of an earlier run in ``out`` is replaced before this run is complete: the
        # session store is a copy swapped in at the end, the earlier records are kept aside.
        self._sessions_tmp: Path | None = None
        self._records_prev: Path | None = None
        self._done = False

    def __enter__(self) -> Self:
        with ExitStack() as stack:  # undone if opening fails half way
            if not self._root_given:
                if self.out is not None:
                    self.offload_root = self.out / "work"
                    refuse_symlink(self.offload_root, what="offload folder")
                else:
                    self.offload_root = stack.enter_context(tempfile.TemporaryDirectory(prefix="h9eval-offload-"))
            if self.out is not None:
                self._open_stores(stack, self.out)
            self._close = stack.pop_all()
        return self

    def _open_stores(self, stack: ExitStack, out: Path) -> None:
        prepare_out_dir(out, what="results folder")
        if self._want_sessions:
            # Opened (and so validated) before anything already in ``out`` is replaced: a corrupt
            # sessions.db must fail the run without deleting the previous run's records. The run
            # writes a copy (closing the store first folds its WAL into the file).
            final = out / "sessions.db"
            if final.exists():
                SessionStore(final).close()
            self._sessions_tmp = out / f".sessions.db.{uuid.uuid4().hex[:12]}.tmp"
            stack.callback(self._drop_sessions_tmp)
            if final.exists():
                shutil.copyfile(final, self._sessions_tmp)
            self._sessions = SessionStore(self._sessions_tmp, sync_each_commit=False)
            stack.callback(self._sessions.close)
        self.records = FileRecordStore(out / "compaction_records")
        rec = self.records.path_for(self.session_id)
        if not os.path.islink(self.records.directory) and os.path.isfile(rec) and not os.path.islink(rec):
            # Kept aside, not deleted: restored if this run does not complete.
            self._records_prev = rec.with_name(f".{rec.name}.prev")
            os.replace(rec, self._records_prev)
        self.records.remove(self.session_id)  # a rerun into the same folder replaces, never appends twice
        if self._sessions is not None:
            if self._sessions.has_session(self.session_id):
                self._sessions.delete_session(self.session_id)  # a rerun into the same folder replaces it
            self._sessions.create_session(self.session_id, title=self._title)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # After a run that completed, the session copy and the kept-aside records wait for
        # :meth:`write`, which swaps them in with the tables; after a failure they are undone.
        self._done = exc_type is None
        self._close.close()
        if not self._done:
            self._undo()

    def _drop_sessions_tmp(self) -> None:
        """Remove the unfinished copy of the session store (after a failed run)."""
        if self._sessions_tmp is not None and not self._done:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(f"{self._sessions_tmp}{suffix}")
                except FileNotFoundError:
                    pass
            self._sessions_tmp = None

    def _undo(self) -> None:
        """Drop this run's session copy and put the earlier records back."""
        self._done = False
        self._drop_sessions_tmp()
        if self._records_prev is not None and self.records is not None:
            os.replace(self._records_prev, self.records.path_for(self.session_id))
            self._records_prev = None

    def _commit(self) -> None:
        """Swap this run's session store in and drop the earlier records (the tables are in)."""
        if self._sessions_tmp is not None:
            os.replace(self._sessions_tmp, self._sessions_tmp.parent / "sessions.db")
            self._sessions_tmp = None
        if self._records_prev is not None:
            os.unlink(self._records_prev)
            self._records_prev = None

    def append(self, m: Message) -> None:
        """``m`` joined the history (the store gets it at :meth:`flush`)."""
        self._pending.append(m)

    def replace_history(self, history: list[Message]) -> None:
        """The history was rewritten (a write-back or a ``/compact``)."""
        self._stored = (
            history[1:] if history and history[0].role == "system" else list(history)
        )  # as SessionStore stores it
        self._pending = []

    def flush(self) -> None:
        """Store the history the run ended with (the end of a run that completed)."""
        if self._sessions is not None:
            self._sessions.add_messages(
                self.session_id, [*self._stored, *(x for x in self._pending if x.role != "system")]
            )

    def write(
        self, result: ReplayResult, task: Task, summarizer: Summarizer | None, spec: Mapping[str, Any] | None
    ) -> None:
        """The tables and ``manifest.json`` (nothing without an ``out`` folder); ``spec``: the run's
        :class:`~h9eval.runs.spec.RunSpec` as JSON (what reruns it)."""
        if self.out is None:
            return
        manifest = {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "kind": "run",
            "run_id": result.run_id,
            **({"spec": dict(spec)} if spec is not None else {}),
            "task": {"task_id": task.task_id, "version": task.version, "source": dataclasses.asdict(task.source)},
            "policy": {"kind": result.policy_kind, "params": result.params, "params_hash": result.params_hash},
            "replay": dataclasses.asdict(result.config),
            "summarizer": summarizer.summarizer_id if summarizer is not None else None,
            "provenance": provenance(),
            "summary": result.summary(),
        }
        # Each table is staged under a hidden name and all are renamed at the end, so a failure
        # (a full disk) leaves the earlier run's tables as they were, not a mix of two runs.
        staged: list[tuple[Path, Path]] = []
        try:
            refuse_symlink(self.out / MANIFEST, what="run manifest")
            staged.append((self.out / f".{MANIFEST}.staged", self.out / MANIFEST))
            write_json_atomic(staged[-1][0], redact_secret_params(manifest))
            for name in (*CELL_PARTS, "ledger", "diffs"):
                table = getattr(result, name)
                if table is None:
                    continue
                final = self.out / f"{name}.parquet"
                refuse_symlink(final, what="results table")
                staged.append((self.out / f".{name}.parquet.staged", final))
                write_table(table, staged[-1][0], name)
        except BaseException:
            for tmp, _ in staged:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
            self._undo()
            raise
        for tmp, final in staged[1:] + staged[:1]:  # the manifest last, as before
            os.replace(tmp, final)
        self._commit()


class _ReplayLoop:
    """harness9's agent loop over a recorded transcript. The step before each model call (the
    tool-time hook, a manual ``/compact``, the compaction and the write-back) is the shared
    :class:`~h9eval.compaction.step.CallStep`; the replay's own side is the transcript walk,
    V1's aliasing (:meth:`_alias_offloads`), the session store, the calls rows (:meth:`_log`)
    and the probes (:meth:`_probe`)."""

    def __init__(
        self,
        task: Task,
        step: CallStep,
        cfg: ReplayConfig,
        run: _RunFacts,
        *,
        outputs: _RunOutputs,
        probe_fn: ProbeFn | None,
        probe_every_k: int | None,
    ) -> None:
        self.task = task
        self.step = step
        self.cfg = cfg
        self.run_facts = run
        self.outputs = outputs
        self.probe_fn = probe_fn
        self.raw_bytes = step.history_bytes  # the uncompacted transcript so far, as recorded
        self.rows: list[dict[str, Any]] = []
        self.probe_rows: list[dict[str, Any]] = []
        self.records: list[CompactionRecord] = []
        self.views: list[tuple[Message, ...]] | None = [] if cfg.keep_views else None
        self.n_calls = sum(1 for m in task.messages if m.role == "assistant")
        self.grid = frozenset(checkpoint_grid(self.n_calls, probe_every_k))
        self.call_index = -1
        self.n_compactions = 0
        self._write_failures_seen = 0
        self._manual_at = set(cfg.manual_compact_at)
        self.raw: list[Message] = list(step.history)  # the uncompacted transcript so far, as recorded
        self.biller = _biller(task, cfg, run.tool_schema_tokens, self.n_calls)
        self._appended_bytes = step.history_bytes  # bytes that joined the history since the last call
        self._previous_output: Message | None = None

    def run(self) -> None:
        for i, m in enumerate(self.task.messages):
            if m.role == "assistant":
                self._model_call(i, m)
            else:
                self._arrive(m)
            self.raw_bytes += m.nbytes
            self.raw.append(m)
            self._appended_bytes += m.nbytes
        self.outputs.flush()

    def _arrive(self, m: Message) -> None:
        self.step.arrive(m)
        self.outputs.append(self.step.history[-1])

    def _alias_offloads(self, rec: CompactionRecord | None) -> None:
        """harness9 V1's alias bug (ReplayConfig.v1_alias_offload): offloaded results stay
        placeholders in the history."""
        if not self.cfg.v1_alias_offload or rec is None:
            return
        ph: dict[str, str] = rec.extra.get(EXTRA_OFFLOAD_PLACEHOLDERS) or {}
        if ph:
            aliased = [x.with_content(ph[x.tool_call_id]) if x.tool_call_id in ph else x for x in self.step.history]
            self.step.replace_history(aliased)

    def _model_call(self, i: int, m: Message) -> None:
        self.call_index += 1
        req = self.step.before_call(manual=self.call_index in self._manual_at)
        if req.stats.written_back:
            self.outputs.replace_history(self.step.history)
        self._alias_offloads(req.compactions[-1].record)
        row = self._log(i, req, self._bill(req, m))
        self._probe(i, row, req.view)
        self._arrive(m)

    def _bill(self, req: CallRequest, output: Message) -> SessionBills:
        summ = [
            SummaryUsage(sc.input_tokens, sc.output_tokens, sc.batched)
            for c in req.compactions
            if c.record is not None
            for sc in c.record.extra.get(EXTRA_SUMMARY_CALLS, [])
        ]
        bills = self.biller.call(
            self.call_index,
            view=req.view,
            raw_view=self.raw,
            output=output,
            previous_output=self._previous_output,
            appended_tokens=self._appended_bytes // 4,
            summarizer_calls=summ,
        )
        self._appended_bytes = 0
        self._previous_output = output
        return bills

    def _new_write_failures(self) -> int:
        n = write_failure_count(self.outputs.offload_root)
        new, self._write_failures_seen = n - self._write_failures_seen, n
        return new

    def _log(self, i: int, req: CallRequest, bills: SessionBills) -> dict[str, Any]:
        run = self.run_facts
        row = call_row(
            {
                **vars(run),
                **vars(req.stats),
                "call_index": self.call_index,
                "message_index": i,
                "raw_tokens_sent": self.raw_bytes // 4 + run.tool_schema_tokens,
                "offload_write_failures": self._new_write_failures(),
                **bill_columns(bills),
                "min_gain_deferred": any(
                    c.record is not None and bool(c.record.extra.get(EXTRA_MIN_GAIN_DEFERRED)) for c in req.compactions
                ),
            }
        )
        self.rows.append(row)
        self.records.extend(c.record for c in req.compactions if c.record is not None and c.record.tier != Tier.NONE)
        if self.views is not None:
            self.views.append(req.view)
        self.n_compactions += int(row["compacted"])
        return row

    def _probe(self, i: int, row: dict[str, Any], view: tuple[Message, ...]) -> None:
        if self.probe_fn is None:
            return
        if self.call_index not in self.grid:
            return
        at = CallCheckpoint(
            run_id=self.run_facts.run_id,
            call_index=self.call_index,
            tier_name=row["tier_name"],
            tokens_sent=row["tokens_sent"],
            n_compactions=self.n_compactions,
        )
        # the view covers the transcript up to the message before this call's output
        self.probe_rows.extend(self.probe_fn(self.task, view, i - 1, at))


def _biller(task: Task, cfg: ReplayConfig, tool_schema_tokens: int, n_calls: int) -> SessionBiller:
    """The run's biller: recorded models and timestamps when the task has one per call."""
    recorded = task.metadata.get("recorded_calls")
    recorded = recorded if isinstance(recorded, list) and len(recorded) == n_calls else None
    prefix = cfg.billing.prefix_tokens if cfg.billing.prefix_tokens is not None else tool_schema_tokens
    return SessionBiller(
        cfg.billing,
        prefix_tokens=prefix,
        recorded_models=[c.get("model") for c in recorded] if recorded else None,
        recorded_times_s=recorded_call_times(recorded),
    )


def replay(
    task: Task,
    policy: Policy,
    *,
    summarizer: Summarizer | None = _OFFLINE,
    config: ReplayConfig | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    offload_root: str | os.PathLike[str] | None = None,
    probe_fn: ProbeFn | None = None,
    probe_every_k: int | None = None,
    max_probes: int = DEFAULT_MAX_PROBES,
    session_store: bool = True,
    session_id: str | None = None,
    ledger: bool = False,
    spec: Mapping[str, Any] | None = None,
) -> ReplayResult:
    """Run ``task`` through ``policy``; see the module docstring.

    ``summarizer``: the summarizer (default: the offline one), or ``None`` (no summarizer:
    summaries fail → fallback); names are resolved by the caller
    (:func:`~h9eval.summarizers.registry.build_summarizer`). ``out_dir``: when given,
    ``calls.parquet``, ``compactions.parquet``, ``probes.parquet``, harness9's
    ``compaction_records/*.jsonl``, ``sessions.db`` (unless ``session_store`` is false) and
    ``manifest.json`` are written there. ``offload_root``: where offload files go (default
    ``<out_dir>/work``, or a fresh temporary folder). ``probe_fn`` is called on the task's
    checkpoint grid (:func:`~h9eval.probes.drift.checkpoint_grid`: every ``probe_every_k``-th
    call and the last one, the same calls for every policy); a grid that would score more
    than ``max_probes`` probes is refused before anything runs
    (:func:`~h9eval.probes.drift.check_probe_budget`). ``session_id``: names
    offload folders and record files (default: derived from the run id); sweeps pass the task
    id so identical summary prompts hit the shared cache. ``ledger``: also compute the loss
    ledger (:mod:`h9eval.probes.ledger`: every compaction round's view against the task's typed
    items) into ``ReplayResult.ledger`` and ``ledger.parquet``, and what each round took out of the
    view (:mod:`h9eval.probes.diffs`) into ``ReplayResult.diffs`` and ``diffs.parquet``; the views are
    kept for them (they share the history's message objects, so a view costs a pointer per message).
    ``spec``: the run's :class:`~h9eval.runs.spec.RunSpec` as JSON, stored in the run folder's manifest
    (:func:`~h9eval.runs.execute.execute` passes it).
    """
    import pandas as pd

    cfg = config or ReplayConfig()
    keep_views = cfg.keep_views
    if ledger and not keep_views:
        cfg = dataclasses.replace(cfg, keep_views=True)
    if probe_fn is not None:
        check_probe_budget(task, probe_every_k, max_probes)
    at_window = run_window(policy, cfg.context_window_tokens)
    policy, window = at_window.policy, at_window.window_tokens
    params = policy_params(policy)
    phash = params_hash(policy.kind, params)
    run_id = run_id or f"{task.task_id}--{policy.kind}-{phash}-{cfg.history_mode}"
    session_id = safe_name(session_id if session_id is not None else run_id) or "session"
    facts = _RunFacts(
        run_id=run_id,
        task_id=task.task_id,
        policy_kind=policy.kind,
        params_hash=phash,
        history_mode=cfg.history_mode,
        context_window_tokens=window,
        tool_schema_tokens=estimate_tool_tokens(task.tools),
    )
    rules = StepRules(
        history_mode=cfg.history_mode, writeback_rules=cfg.writeback_rules, tool_time_offload=cfg.tool_time_offload
    )
    first: list[Message] = []
    if not task.messages or task.messages[0].role != "system":
        # harness9 prepends a freshly built system prompt when history lacks one (spec §2.1);
        # its compactor leaves a list without a system message untouched.
        first.append(Message("system", cfg.system_prompt))
    out = Path(out_dir) if out_dir is not None else None
    with _RunOutputs(
        out, session_id=session_id, title=task.task_id, session_store=session_store, offload_root=offload_root
    ) as outputs:
        reset_write_failures(outputs.offload_root)
        env = CompactionEnv(
            summarizer=summarizer,
            offload_root=outputs.offload_root,
            session_id=session_id,
            record_store=outputs.records,
            clock=LogicalClock() if cfg.deterministic else WallClock(),
            seed=cfg.seed if cfg.deterministic else None,
        )
        step = CallStep(
            policy.start(env),
            rules,
            window_tokens=window,
            tool_schema_tokens=facts.tool_schema_tokens,
            hook=tool_time_hook(policy, rules, env),
            history=first,
        )
        loop = _ReplayLoop(task, step, cfg, facts, outputs=outputs, probe_fn=probe_fn, probe_every_k=probe_every_k)
        loop.run()
    calls = calls_frame(loop.rows)
    ledger_frame = diffs_frame = None
    if ledger:
        assert loop.views is not None
        ledger_frame = ledger_table(run_ledger(task, calls, loop.views, run_id=run_id))
        diffs_frame = diffs_table(compaction_diffs(loop.views, ledger_frame, run_id=run_id))
        if not keep_views:  # kept only for the ledger: the caller did not ask for them
            loop.views = None
            cfg = dataclasses.replace(cfg, keep_views=False)
    result = ReplayResult(
        run_id=run_id,
        task_id=task.task_id,
        policy_kind=policy.kind,
        params=params,
        params_hash=phash,
        config=cfg,
        calls=calls,
        compactions=records_to_frame(loop.records, run_id=run_id, session_id=session_id),
        probes=pd.DataFrame(loop.probe_rows, columns=list(PROBE_COLUMNS)),
        records=loop.records,
        views=loop.views,
        final_history=step.history,
        out_dir=out,
        context_window_tokens=window,
        offload_write_failures=tuple(write_failures(outputs.offload_root)),
        ledger=ledger_frame,
        diffs=diffs_frame,
    )
    reset_write_failures(outputs.offload_root)
    outputs.write(result, task, summarizer, spec)
    return result
