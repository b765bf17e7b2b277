"""Every results table's columns, its schema version and the versions its reader accepts: the
one owner of the on-disk schema (the writers and readers in :mod:`h9eval.results.io` and
:mod:`h9eval.results.store` take everything from here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

CALLS_SCHEMA_VERSION = 1
"""Version of the ``calls`` table (one row per model call; bump on a change of meaning).

Columns are only ever appended at the end, without a bump: a column added later is absent
from older files, and the readers of :mod:`h9eval.analysis` treat it as unknown (NaN), never
as a value. Added since version 1 was first written: ``raw_tokens_sent``,
``fallback_cause`` (why the summaries behind a fallback failed), ``offload_write_failures``
(offload files the file system refused since the previous call), the billed columns from
``billed_model`` to ``priced`` (the provider's bill of the call; :mod:`h9eval.core.billing`),
``min_gain_deferred`` and ``summarizer_breaker_skips`` (summaries the circuit breaker refused)."""


CALL_COLUMNS = (
    "schema_version",
    "run_id",
    "task_id",
    "policy_kind",
    "params_hash",
    "history_mode",
    "call_index",
    "message_index",
    "context_window_tokens",
    "history_tokens",
    "history_messages",
    "tool_schema_tokens",
    "tokens_sent",
    "ratio_to_window",
    "tier",
    "tier_name",
    "compacted",
    "msgs_before",
    "msgs_after",
    "view_tokens",
    "offloads_tool_time_count",
    "offloads_tool_time_bytes",
    "offloads_compaction_count",
    "offloads_compaction_bytes",
    "summarizer_calls",
    "summarizer_input_tokens",
    "summarizer_output_tokens",
    "summarizer_latency_s",
    "summarizer_cache_hits",
    "summarizer_cost_usd",
    "fallback",
    "fallback_error",
    "forced_truncation",
    "overflow",
    "overflow_tokens",
    "written_back",
    "manual_compact",
    "thrash_avoided",
    "masked_results",
    "na_overwrites",
    "na_overwrites_prevented",
    "raw_tokens_sent",  # tokens the uncompacted transcript would send at this call (tool schemas included)
    "fallback_cause",
    "offload_write_failures",
    # the bill as the provider would charge it (h9eval.core.billing; docs/billing.md)
    "billed_model",  # the model the call is billed as (recorded, configured, or the default)
    "call_at_s",  # seconds since the first call: recorded timestamps or the stated timing model
    "uncached_input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "cache_read_tokens",
    "billed_output_tokens",
    "agent_cost_usd",  # the agent's call; NaN when the model is unpriced
    "summarizer_bill_usd",  # the summarizer's calls for this call, billed as summarizer_model
    "cost_usd",  # agent_cost_usd + summarizer_bill_usd; NaN when either is unpriced
    "raw_cost_usd",  # the uncompacted transcript's call under the same billing
    "invalidation_usd",  # dollars paid to rewrite tokens that were not new since the previous call
    "priced",  # bool: every model of the call has prices
    "min_gain_deferred",  # bool: progressive's minimum-gain rule deferred a summary at this call
    "summarizer_breaker_skips",  # summaries not requested: the summarizer's circuit breaker was open
    "summarizer_batched_calls",  # of summarizer_calls, those sent through the Message Batches API (half price)
)

_CALL_KIND_COLUMNS = {
    "bool": (
        "compacted",
        "fallback",
        "forced_truncation",
        "overflow",
        "written_back",
        "manual_compact",
        "thrash_avoided",
        "priced",
        "min_gain_deferred",
    ),
    "str": (
        "run_id",
        "task_id",
        "policy_kind",
        "params_hash",
        "history_mode",
        "tier_name",
        "fallback_error",
        "fallback_cause",
        "billed_model",
    ),
    "float64": (
        "ratio_to_window",
        "summarizer_latency_s",
        "summarizer_cost_usd",
        *(
            "call_at_s",
            "agent_cost_usd",
            "summarizer_bill_usd",
            "cost_usd",
            "raw_cost_usd",
            "invalidation_usd",
        ),
    ),
}

_UNKNOWN_UNLESS_MEASURED = (
    "call_at_s",
    "agent_cost_usd",
    "summarizer_bill_usd",
    "cost_usd",
    "raw_cost_usd",
    "invalidation_usd",
)
"""Billed columns a loop that does not bill leaves unknown (NaN), never $0."""

CALL_DTYPES: dict[str, str] = {
    c: next((kind for kind, cols in _CALL_KIND_COLUMNS.items() if c in cols), "int64") for c in CALL_COLUMNS
}
"""The dtype of every ``calls`` column (both loops write the table through :func:`calls_frame`)."""

_CALL_DERIVED = ("schema_version", "ratio_to_window", "overflow", "overflow_tokens")


def call_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """One ``calls`` row (:data:`CALL_COLUMNS` in order) from what a loop measured, by column.

    Derived here, the same for every loop: ``schema_version``, ``ratio_to_window`` (tokens sent
    over the window), ``overflow`` and ``overflow_tokens``. A column the loop does not measure is
    zero, empty or false. A key that is no column (or a derived one) is a ``KeyError``: a typo
    must not become a silent zero."""
    unknown = [k for k in values if k not in CALL_DTYPES or k in _CALL_DERIVED]
    if unknown:
        raise KeyError(f"call_row: not a measured calls column: {', '.join(sorted(unknown))}")
    sent, window = int(values["tokens_sent"]), int(values["context_window_tokens"])
    derived = {
        "schema_version": CALLS_SCHEMA_VERSION,
        "ratio_to_window": sent / window,
        "overflow": sent > window,
        "overflow_tokens": max(sent - window, 0),
    }
    return {c: derived[c] if c in derived else values[c] if c in values else _unmeasured(c) for c in CALL_COLUMNS}


def _unmeasured(column: str) -> Any:
    return float("nan") if column in _UNKNOWN_UNLESS_MEASURED else _UNMEASURED[CALL_DTYPES[column]]


_UNMEASURED: dict[str, Any] = {"bool": False, "str": "", "float64": 0.0, "int64": 0}


def calls_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The ``calls`` table of :func:`call_row` rows, with :data:`CALL_DTYPES` (no rows: the
    columns only)."""
    import pandas as pd

    if not rows:
        return pd.DataFrame(columns=list(CALL_COLUMNS))
    return pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=CALL_DTYPES[c]) for c in CALL_COLUMNS})


COMPACTIONS_SCHEMA_VERSION = 1
"""Version of the ``compactions`` table (one row per compaction record)."""


COMPACTION_COLUMNS: tuple[str, ...] = (
    "schema_version",  # int, COMPACTIONS_SCHEMA_VERSION
    "run_id",  # str: h9eval run id, or "harness9:<session>" for harness9's own records
    "session_id",  # str: the session the records belong to (file name for harness9's files)
    "record_index",  # int: 0-based position in the session's record sequence
    "record_id",  # str: the record's UUID ("" when unset)
    "timestamp",  # str: RFC 3339 with nanoseconds, as written (not parsed: offsets vary)
    "tier",  # int: 0 none .. 4 emergency
    "tier_name",  # str: none, warn, soft, full, emergency
    "tokens_before",  # int: harness9 estimate of the input
    "tokens_after",  # int: harness9 estimate of the output
    "msgs_before",  # int: messages in
    "msgs_after",  # int: messages out
    "n_anchors",  # int: anchors in the record (0 when null)
    "anchors_json",  # str | None: JSON list of {type, content}; None where harness9 wrote null
    "n_offloaded",  # int: offloaded tool results (0 when null)
    "offloaded_bytes",  # int: sum of the offloaded entries' bytes
    "offloaded_json",  # str | None: JSON list of offload entries; None where harness9 wrote null
    "summarized",  # int: messages summarised
    "preserved_tail",  # int: messages kept verbatim
    "summary_text",  # str
    "compression_ratio",  # float: tokens_after / tokens_before, 0 when before is 0
    "duration_ns",  # int: nanoseconds
    "error",  # str: "" when none
)


COMPACTION_INT_COLUMNS = (
    "schema_version",
    "record_index",
    "tier",
    "tokens_before",
    "tokens_after",
    "msgs_before",
    "msgs_after",
    "n_anchors",
    "n_offloaded",
    "offloaded_bytes",
    "summarized",
    "preserved_tail",
    "duration_ns",
)


RUNS_SCHEMA_VERSION = 1
"""Version of the ``runs`` table (one row per cell of a sweep)."""

MANIFEST_SCHEMA_VERSION = 2
"""Version of ``manifest.json`` (of a run or a sweep) and of the results-folder layout. Version 2: each
cell (and a run folder) stores its :class:`~h9eval.runs.spec.RunSpec` under ``spec``; a version-1 cell's
fields are flat (:meth:`h9eval.sweeps.cells.Cell.from_dict` reads both, with the same cell hashes)."""

READABLE_MANIFEST_VERSIONS: tuple[int, ...] = (1, 2)
"""The manifest versions the readers accept."""

TABLES: tuple[str, ...] = ("runs", "calls", "compactions", "probes", "episodes", "ledger", "diffs")
OPTIONAL_TABLES: tuple[str, ...] = ("episodes", "ledger", "diffs")
"""Tables a results folder may lack: folders written before the closed loop have no ``episodes``
(read as an empty table), and a replay cell writes no ``episodes`` part; folders written before the
loss ledger have no ``ledger`` (read as an empty table), and so do episode cells written before
the closed-loop ledger; folders written before run specs have no ``diffs`` (their ledger pages show the
ledger's items without what left each view)."""
CELL_PARTS: tuple[str, ...] = ("calls", "compactions", "probes")
MARKER = "run.parquet"
MANIFEST = "manifest.json"
CONSOLIDATED = "consolidated.json"


# name -> pandas dtype. Nullable dtypes, because a failed cell has no headline numbers.
RUN_COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "sweep": "string",
    "run_id": "string",
    "cell_hash": "string",  # sha256[:16] of everything that determines the cell's results
    "task_id": "string",
    "task_spec": "string",  # the spec entry the task came from (path, synthetic:P:S, ...)
    "policy_name": "string",  # the [[policies]] entry's name (default: its kind)
    "policy_kind": "string",
    "params_json": "string",  # resolved parameters, sorted JSON
    "grid_json": "string",  # the grid point only (the parameters this entry varies)
    "params_hash": "string",
    "history_mode": "string",
    "summarizer": "string",  # the summarizer variant (registered name)
    "repeat": "Int64",
    "status": "string",  # ok | failed
    "error": "string",  # "" when ok: exception type and message
    "wall_time_s": "float64",  # seconds the cell took (execution-dependent)
    "calls": "Int64",
    "n_compactions": "Int64",  # calls whose compaction changed what is sent (Compaction.changed_what_is_sent)
    "compaction_records": "Int64",  # compaction records written (also at calls where nothing changed)
    "compactions_warn": "Int64",
    "compactions_soft": "Int64",
    "compactions_full": "Int64",
    "compactions_emergency": "Int64",
    "peak_tokens_sent": "Int64",
    "final_tokens_sent": "Int64",
    "peak_history_tokens": "Int64",
    "offloads_tool_time": "Int64",
    "offloads_compaction": "Int64",
    "summarizer_calls": "Int64",
    "summarizer_cache_hits": "Int64",  # execution-dependent: which cell asked first
    "summarizer_cost_usd": "float64",
    "fallbacks": "Int64",
    "forced_truncations": "Int64",
    "overflows": "Int64",
    "probe_rows": "Int64",
    "cost_usd": "float64",  # dollars as the provider bills the run (NaN: an unpriced model)
    "raw_cost_usd": "float64",  # the uncompacted transcript under the same billing
    "cache_read_share": "float64",  # cache reads over the agent's billed input
    "invalidation_usd": "float64",  # dollars paid to rewrite what was not new since the previous call
    "summarizer_breaker_skips": "Int64",  # summaries the summarizer's circuit breaker refused (each fell back)
}


RUN_SUMMARY_KEYS: tuple[str, ...] = (
    "calls",
    "compactions",
    "compactions_by_tier",
    "compaction_records",
    "peak_tokens_sent",
    "final_tokens_sent",
    "peak_history_tokens",
    "offloads_tool_time",
    "offloads_compaction",
    "summarizer_calls",
    "summarizer_cost_usd",
    "fallbacks",
    "fallback_causes",
    "forced_truncations",
    "overflows",
    "cost_usd",
    "raw_cost_usd",
    "cache_read_share",
    "invalidation_usd",
    "summarizer_breaker_skips",
)
"""The headline numbers of one run, in the order ``h9eval run`` prints them. ``compactions`` (and
``compactions_by_tier``, the same calls by tier) counts the calls whose compaction changed what
is sent (:attr:`h9eval.compaction.base.Compaction.changed_what_is_sent`, the calls table's
``compacted``); ``compaction_records`` counts the records written (the ``compactions`` table's
rows), which harness9 also writes at calls where nothing changed. This is what
``ReplayResult.summary()`` computes and a sweep's run row copies (every key but
``compactions``, the row's ``n_compactions``, ``compactions_by_tier``, a dict the row spreads
over ``compactions_<tier>``,
and ``fallback_causes``, fallback calls per cause, is a column of :data:`RUN_COLUMNS`)."""


EXECUTION_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("wall_time_s", "summarizer_cache_hits"),
    "calls": ("summarizer_latency_s", "summarizer_cache_hits"),
    "compactions": (),
    "probes": ("latency_s", "judge_latency_s", "answer_latency_s"),
    "episodes": (),
    "ledger": (),
    "diffs": (),
}


SORT_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "calls": ("run_id", "call_index"),
    "compactions": ("run_id", "record_index"),
    "probes": ("run_id",),  # then the replay's own (deterministic) order within a run
    "episodes": ("run_id",),
    "ledger": ("run_id",),  # then round and item order, as the ledger writes them
    "diffs": ("run_id", "round"),
}


PROBE_SCHEMA_VERSION = 2
"""Version of the ``probes`` table (one row per checkpoint, probe, method and scope). Version 2
appended ``answer_pinned``, ``placebo_rate``, ``placebo_excluded`` and ``after_compaction``;
version-1 tables are still read (pinned unknown: False; no placebo: NaN / False;
``after_compaction`` derived from ``n_compactions``). Since version 2 the replay probes one
checkpoint grid per task (:func:`h9eval.probes.drift.checkpoint_grid`) instead of after
every compaction: the rows mean the same, there are fewer of them."""


PROBE_COLUMNS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "task_id",
    "checkpoint_call_index",
    "message_index",
    "n_compactions",
    "tier_at_checkpoint",
    "tokens_at_checkpoint",
    "probe_id",
    "probe_kind",
    "method",
    "scope",
    "score",
    "baseline_score",
    "passed",
    "answerable",
    "answer_pinned",
    "placebo_rate",
    "placebo_excluded",
    "after_compaction",  # bool | None: the policy had compacted at least once by this checkpoint
)


EPISODES_SCHEMA_VERSION = 2
"""Version of the ``episodes`` table (one row per closed-loop episode). Version 2 appended the
billed columns ``cost_usd``, ``summarizer_bill_usd``, ``cache_read_share`` and
``invalidation_usd`` (the episode's calls as the provider bills them, :mod:`h9eval.core.billing`);
version-1 tables are still read, with those columns unknown (NaN), never $0."""


# name -> pandas dtype (nullable, like RUN_COLUMNS). The identity columns a sweep adds, then
# every measure of ``Episode.summary()``, then the pairing with the keep_all oracle.
EPISODE_COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "run_id": "string",
    "task_id": "string",  # world-<kind>[-<params hash>]-<seed>: the task-level pairing key
    "policy_name": "string",
    "params_json": "string",
    "summarizer": "string",
    "repeat": "Int64",
    "world_kind": "string",
    "world_params": "string",  # sorted JSON
    "seed": "Int64",
    "agent_id": "string",
    "policy_kind": "string",
    "params_hash": "string",
    "history_mode": "string",
    "summarizer_id": "string",
    "context_window_tokens": "Int64",
    "success": "boolean",
    "subgoals_reached": "Int64",
    "subgoals_total": "Int64",
    "subgoals_frac": "float64",
    "failure": "string",  # the world's failure kind, "" on success
    "terminated_by": "string",  # done | max_steps | loop | hard_failure
    "steps": "Int64",
    "n_compactions": "Int64",
    "first_compaction_step": "Int64",  # -1 when nothing was compacted
    "tokens_sent_sum": "Int64",
    "tokens_sent_peak": "Int64",
    "summarizer_calls": "Int64",
    "summarizer_input_tokens": "Int64",
    "summarizer_output_tokens": "Int64",
    "summarizer_cost_usd": "float64",
    "agent_input_tokens": "Int64",
    "agent_output_tokens": "Int64",
    "agent_cache_read_tokens": "Int64",
    "agent_cache_creation_tokens": "Int64",
    "agent_cost_usd": "float64",
    "refetches_justified": "Int64",
    "refetches_wasted": "Int64",
    "redundant_read_calls": "Int64",
    "offloads_tool_time": "Int64",
    "side_effects": "Int64",
    "duplicate_side_effects": "Int64",
    "wrong_side_effects": "Int64",
    "violations_before_compaction": "Int64",
    "violations_after_compaction": "Int64",
    "hallucinated_completion": "boolean",
    "protocol_errors": "Int64",
    "loop_detected": "boolean",
    "hard_failure": "boolean",
    "invented_values": "Int64",
    "facts_needed": "Int64",
    "facts_present_at_need": "Int64",
    "oracle_steps": "Int64",  # steps of the keep_all episode of the same world, seed, agent, mode
    "excess_steps": "Int64",
    # version 2: the episode's calls as the provider bills them (h9eval.core.billing.bill_totals of its
    # calls rows; NaN when a call is unpriced)
    "cost_usd": "float64",  # agent and summarizer calls, billed
    "summarizer_bill_usd": "float64",  # the summarizer's calls, billed as the billing's summarizer model
    "cache_read_share": "float64",  # cache reads over the agent's billed input
    "invalidation_usd": "float64",  # dollars paid to rewrite what was not new since the previous call
}


LEDGER_SCHEMA_VERSION = 1
"""Version of the ``ledger`` table (one row per compaction round and item live at it:
:mod:`h9eval.probes.ledger`)."""

LEDGER_COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "run_id": "string",
    "task_id": "string",
    "basis": "string",  # fill (the k-th window of new content: same calls for every config) | compaction
    "round": "Int64",  # 1-based, per basis: the k-th fill, or the k-th call whose view rewrote what was sent
    "call_index": "Int64",
    "message_index": "Int64",  # the last transcript message the view covers (closed loop: the call)
    "tier_name": "string",
    "item_id": "string",
    "item_type": "string",  # h9eval.probes.items.ITEM_TYPES
    "state": "string",  # PRESERVED | DEGRADED | STALE | LOST
    "location": "string",  # where an exact value survived (tail, summary, anchor:<type>, placeholder, ...)
    "pinned": "boolean",  # the value is in the task's system or first task message
    "value": "string",
    "introduced_at": "Int64",  # transcript index (closed loop: the first call whose view held it)
    "next_use_call": "Int64",  # the first later call that uses the value (LOST/STALE/DEGRADED items; closed
    # loop: the first call at or after the round whose action touched it: rule broken, needed, re-read, redone)
}


DIFFS_SCHEMA_VERSION = 1
"""Version of the ``diffs`` table (one row per compaction round of a run: what left the view, the
summary written, the anchors before and after, the items whose state changed: :mod:`h9eval.probes.diffs`)."""

DIFFS_COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "run_id": "string",
    "round": "Int64",  # the ledger's compaction round (1-based)
    "call_index": "Int64",
    "tier_name": "string",
    "n_left": "Int64",  # messages of the previous view that left this one
    "left_json": "string",  # JSON list: previews of the first of them (h9eval.probes.diffs.MAX_LEFT_SHOWN)
    "summary": "string",  # the summary in this view when it is new (null: none, or the previous one's)
    "anchors_before_json": "string",  # JSON object: anchor type -> text in the previous view's summary
    "anchors_after_json": "string",  # JSON object: anchor type -> text in this view's summary
    "na_erased_json": "string",  # JSON list: anchor types whose known value now reads N/A
    "lost_json": "string",  # JSON lists of "type: value": items whose state became LOST ...
    "stale_json": "string",  # ... STALE
    "degraded_json": "string",  # ... DEGRADED
    "recovered_json": "string",  # ... PRESERVED again
    "used_later_json": "string",  # JSON object: "type: value" -> first later call that used it
    "touched_json": "string",  # JSON object: "type: value" -> what that call did (closed loop)
}
DIFFS_STRUCTURED: tuple[str, ...] = tuple(c.removesuffix("_json") for c in DIFFS_COLUMNS if c.endswith("_json"))
"""The diffs columns stored as JSON (``<name>_json``), decoded by :func:`h9eval.results.tables.decode_diffs`."""


SCHEMA_VERSIONS: dict[str, int] = {
    "runs": RUNS_SCHEMA_VERSION,
    "calls": CALLS_SCHEMA_VERSION,
    "compactions": COMPACTIONS_SCHEMA_VERSION,
    "probes": PROBE_SCHEMA_VERSION,
    "episodes": EPISODES_SCHEMA_VERSION,
    "ledger": LEDGER_SCHEMA_VERSION,
    "diffs": DIFFS_SCHEMA_VERSION,
}
"""The version each table is written with (parquet metadata ``h9eval_schema_version``)."""

READABLE_VERSIONS: dict[str, tuple[int, ...]] = {
    "runs": (1,),
    "calls": (1,),
    "compactions": (1,),
    "probes": (1, 2),
    "episodes": (1, 2),
    "ledger": (1,),
    "diffs": (1,),
}
"""The versions of each table the readers accept; a file of any other version is refused by name."""
