"""Write the notebooks in this folder (without outputs) from the cell sources below.

    .venv/bin/python notebooks/_build.py            # rewrites notebooks/0*.ipynb

Edit the cells here rather than in JupyterLab when a change should be committed: the
notebooks are committed without outputs (``execution_count`` null, ``outputs`` []), with
deterministic cell ids, and the first code cell of each is tagged ``parameters`` for papermill.
The notebooks are thin: every computation is a call into ``h9eval``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

# A cell is ("md", text), ("params", code) or ("code", code).
NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["01-quickstart"] = [
    (
        "md",
        """# Quickstart: one recorded session, harness9's defaults

This notebook replays one recorded agent session (by default a mini-swe-agent run on
`django__django-15695`) call by call through harness9's `ProgressiveCompactor` with its default
thresholds (warn / soft / full / emergency at 60 / 70 / 80 / 95 % of the window), on a small
context window so that the session crosses every tier. It shows:

* the per-call table (`calls`: tokens in the history, tokens sent, tier, compaction, offloads...),
* the run summary,
* the token curve (history vs tokens sent against the tier bands),
* the tier swimlane (which tier each call's compaction reached).

Everything runs offline (deterministic extractive summarizer); results go to a temporary folder.
The next cell holds the parameters (papermill: `-p window 20000`).""",
    ),
    (
        "params",
        """# Parameters
task = "mini-swe-agent/deepseek_chat_test_1-100/django__django-15695.traj.json"  # under recorded_dir(), or a task spec such as "synthetic:small:0"
window = 40_000          # context window (tokens) of the progressive policy
history_mode = "view"    # "view" (harness9 V1) or "write_back" (harness9 PR #121)
params = {}              # other ProgressiveCompactor parameters, e.g. {"warn_frac": 0.5}
out_dir = None           # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
# (h9eval.analysis.plots return matplotlib Figures; a Figure left as the last expression of a cell is drawn)
import tempfile
from pathlib import Path

import pandas as pd

from h9eval import plots, run_task
from h9eval.core.paths import recorded_dir

pd.set_option("display.max_columns", 50)
pd.set_option("display.width", 200)

spec = str(recorded_dir() / task) if (recorded_dir() / task).exists() else task
out_dir = out_dir or tempfile.mkdtemp(prefix="h9eval-01-")
(result,) = run_task(
    spec,
    "progressive",
    params={"context_window_tokens": window, **params},
    history_mode=history_mode,
    out_dir=out_dir,
)
calls = result.calls
print(result.run_id, "->", out_dir)
print(sorted(p.name for p in Path(out_dir).iterdir()))""",
    ),
    ("md", "## The calls table\n\nOne row per model call; the columns are documented in the README (results schema)."),
    (
        "code",
        """calls[[
    "call_index", "history_tokens", "tokens_sent", "ratio_to_window", "tier_name", "compacted",
    "msgs_before", "msgs_after", "offloads_tool_time_count", "offloads_compaction_count",
    "summarizer_calls", "fallback", "forced_truncation", "overflow",
]].head(15)""",
    ),
    ("md", "## Summary"),
    ("code", "pd.Series(result.summary.row(), dtype=object)"),
    ("md", "The compaction records (harness9's JSONL fields), first rows:"),
    (
        "code",
        """result.compactions[["record_index", "tier_name", "tokens_before", "tokens_after", "msgs_before", "msgs_after", "summarized", "preserved_tail", "n_offloaded", "error"]].head(10)""",
    ),
    ("md", "## Token curve\n\nDashed: the history an uncompacted agent would send; solid: what was sent. Bands: the tiers."),
    ("code", "plots.token_curve(calls, title=f\"{result.task_id}: progressive, {window:,}-token window, {history_mode} mode\")"),
    ("md", "## Tier swimlane"),
    ("code", "plots.tier_swimlane(calls, labels={result.run_id: f\"progressive, {history_mode} mode\"})"),
]

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["02-compare-strategies"] = [
    (
        "md",
        """# harness9's defaults against the peer strategies

A small sweep (`h9eval.sweeps.sweep.sweep` with a spec dict) runs harness9's `ProgressiveCompactor`
(defaults, scaled to a small window) and the peers' strategies behind the same interface —
observation masking, Claude's tool-result clearing, a keep-first/last window, a single-threshold
summary (Codex CLI / Claude Code auto-compact), the masking+summary hybrid — plus the two
controls `keep_all` (upper bound for retention) and `drop_all` (lower bound), over a couple of
recorded sessions and synthetic tasks. Recall probes (offline) measure what each compacted
context still knows of the intent, the anchors and the planted facts.

It shows the per-strategy comparison table (tokens saved, retention and dollars per task with
bootstrap CIs across tasks, cache-read share, overflows, emergency truncations, summarizer
calls), retention per probe kind, the `strategy_comparison` plot (tokens saved vs retention,
Pareto front) and retention against dollars per task. Dollars are billed as the provider bills
them (`h9eval.core.billing`: prompt caching, which every compaction invalidates; list prices of
one dated table; the offline summarizer's tokens priced as the billed model would bill them).""",
    ),
    (
        "params",
        """# Parameters
window = 24_000                  # context window (tokens): below every task's size, so all of them compact
recorded = [                     # under recorded_dir() (or absolute paths)
    "mini-swe-agent/deepseek_chat_test_1-100/django__django-15695.traj.json",
    "openhands/6e57829462844ed99b8f39e7588cdd14",
]
synthetic_preset = "small"
synthetic_seeds = [0, 1]
history_modes = ["view"]         # add "write_back" to compare both
probe_every_k = 10               # probe every k-th call and the last: one checkpoint grid per task, shared by every policy
curve_policies = ["harness9-default", "observation_masking", "summary_single_threshold", "keep_all"]  # token-curve lines
workers = 2
out_dir = None                   # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
# (h9eval.analysis.plots return matplotlib Figures; a Figure left as the last expression of a cell is drawn)
import tempfile
from pathlib import Path

import pandas as pd

from h9eval import metrics as M, plots
from h9eval.core.paths import recorded_dir
from h9eval import load_results
from h9eval import sweep

pd.set_option("display.max_columns", 50)
pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", 60)

spec = {
    "name": "compare-strategies",
    "window": window,
    "history_modes": history_modes,
    "tasks": {
        "recorded": [str(recorded_dir() / p) for p in recorded],
        "synthetic": [{"preset": synthetic_preset, "seeds": synthetic_seeds}],
    },
    "policies": [
        {"kind": "progressive", "name": "harness9-default", "params": {"context_window_tokens": window}},
        {"kind": "observation_masking", "params": {"keep_recent_turns": 10}},
        {"kind": "clear_tool_uses", "params": {"trigger_tokens": int(0.6 * window), "keep_tool_uses": 3}},
        {"kind": "window", "params": {"keep_first": 1, "keep_last": 30}},
        {"kind": "summary_single_threshold", "params": {"context_window_tokens": window}},
        {"kind": "hybrid", "params": {"context_window_tokens": window}},
        {"kind": "keep_all"},
        {"kind": "drop_all"},
    ],
    "summarizer": {"name": "offline"},
    "probes": {"scorers": ["recall"], "every_k": probe_every_k},
}
out_dir = out_dir or tempfile.mkdtemp(prefix="h9eval-02-")
res = sweep(spec, out_dir=Path(out_dir) / "sweep", workers=workers, progress=False)
print(res)
assert res.failed == 0, res.failures""",
    ),
    (
        "code",
        """results = load_results(res.out_dir)
run_metrics = M.run_metrics(results.calls, results.probes, results.runs)
run_metrics[["task_id", "label", "history_mode", "tokens_saved", "retention", "cost_usd", "cache_read_share",
             "peak_tokens_sent", "overflows", "emergencies", "summarizer_calls"]]""",
    ),
    (
        "md",
        "## Comparison table\n\nPer strategy (config): mean over tasks with 95 % bootstrap CIs; `cost_usd` is dollars "
        "per task as the provider bills it (NaN, never 0, for an unpriced model), `cache_read_share` the share of the "
        "agent's input billed as cache reads.",
    ),
    (
        "code",
        """measures = ("tokens_saved", "retention", "cost_usd", "cache_read_share", "peak_tokens_sent")
comparison = M.config_metrics(run_metrics, measures)
comparison.sort_values("retention", ascending=False)[[
    "label", "history_mode", "n_runs", "tokens_saved", "tokens_saved_ci_lo", "tokens_saved_ci_hi",
    "retention", "retention_ci_lo", "retention_ci_hi", "cost_usd", "cost_usd_ci_lo", "cost_usd_ci_hi",
    "cache_read_share", "peak_tokens_sent", "overflows", "emergencies", "summarizer_calls",
]].round(4)""",
    ),
    ("md", "Retention per probe kind (mean over tasks):"),
    (
        "code",
        """kinds = sorted(c for c in run_metrics.columns if c.startswith("retention_") and c != "retention_after_compaction")
M.config_metrics(run_metrics, kinds, n=0).set_index(["label", "history_mode"])[kinds].round(3)""",
    ),
    ("md", "## Tokens saved vs retention"),
    ("code", "plots.strategy_comparison(run_metrics)"),
    (
        "md",
        "## Dollars per task vs retention\n\nA strategy that saves tokens can save far fewer dollars: each compaction "
        "rewrites the cached prefix. The dashed line is the front no other strategy beats on both.",
    ),
    ("code", """plots.retention_cost_frontier(comparison, label="label")"""),
    (
        "md",
        """## One task, call by call

The plots name each line or lane by its `run_id`; to tell the strategies apart on one task the
runs are renamed to their policy name (the `name` of the spec entry, else the kind).""",
    ),
    (
        "code",
        """first_task = results.ok["task_id"].iloc[0]
one = results.ok[(results.ok["task_id"] == first_task) & (results.ok["history_mode"] == history_modes[0])]
name_of = dict(zip(one["run_id"], one["policy_name"]))
one_calls = results.calls[results.calls["run_id"].isin(name_of)].assign(run_id=lambda d: d["run_id"].map(name_of))
plots.token_curve(one_calls, run_ids=curve_policies, title=f"{first_task} ({history_modes[0]} mode)")""",
    ),
    ("code", "plots.tier_swimlane(one_calls, run_ids=list(name_of.values()))"),
]

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["03-tune-thresholds"] = [
    (
        "md",
        """# Tuning the progressive thresholds for a model's window

`h9eval.studies.tune.tune` replays every candidate `ProgressiveCompactor` config (a coarse grid, then
local refinement) on a few tasks with the offline summarizer and recall probes, and recommends
the config with the highest retention among those that never overflow the window and never
reach the emergency tier. Choose a model (its window comes from `h9eval.studies.tune.MODELS`) or a
window in tokens in the parameter cell; the default is a deliberately tiny window and grid so
the notebook runs in seconds.

It shows the model registry, the recommended config as TOML (loadable with
`policy_from_dict(tomllib.loads(text)["policy"])`), the evidence table (one row per evaluated
config) and the tokens-saved vs retention figure.""",
    ),
    (
        "params",
        """# Parameters
model = None                     # a name from h9eval.studies.tune.MODELS (e.g. "gpt-4o-mini"; then use tasks longer than its window, e.g. "synthetic:marathon:0"), or None to use `window`
window = 10_000                  # tokens; used when model is None
tasks = ["synthetic:small:0", "synthetic:small:1"]   # task specs (synthetic or recorded paths)
grid = {
    "warn_frac": [0.5, 0.6],
    "soft_frac": [0.7],
    "full_frac": [0.8],
    "emergency_frac": [0.95],
    "min_tail_messages": [4, 6],
}
refine_rounds = 1
history_mode = "write_back"      # harness9's current agent loop; "view" rarely has a feasible config
max_summarizer_calls = None      # bound on mean summarizer calls per run, or None
workers = 2
out_dir = None                   # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
# (h9eval.analysis.plots return matplotlib Figures; a Figure left as the last expression of a cell is drawn)
import tempfile
import tomllib

import pandas as pd

from h9eval import policy_from_dict
from h9eval.studies.tune import MODELS, tune

pd.set_option("display.max_columns", 50)
pd.set_option("display.width", 200)

pd.DataFrame(MODELS).T""",
    ),
    (
        "code",
        """out_dir = out_dir or tempfile.mkdtemp(prefix="h9eval-03-")
tuned = tune(
    tasks,
    window=None if model else window,
    model=model,
    grid=grid,
    refine_rounds=refine_rounds,
    history_mode=history_mode,
    max_summarizer_calls=max_summarizer_calls,
    workers=workers,
    out_dir=out_dir,
)
print(f"window {tuned.window:,} tokens; feasible: {tuned.feasible}; files: {sorted(p.name for p in tuned.paths.values())}")""",
    ),
    ("md", "## Recommended config"),
    (
        "code",
        """print(tuned.toml)
print("\\n".join(tuned.lines()))  # held-out check, thresholds kept at harness9's values, the tied set, the stand-in caveat
policy_from_dict(tomllib.loads(tuned.toml)["policy"])  # the TOML loads back into a policy""",
    ),
    ("md", "## Evidence\n\nOne row per evaluated config; `best` marks the recommendation."),
    (
        "code",
        """tuned.evidence.drop(columns=["params_json"]).sort_values(["feasible", "retention"], ascending=False).round(3)""",
    ),
    ("code", "tuned.figure()"),
]

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["04-anchor-retention"] = [
    (
        "md",
        """# Anchors: with and without, incremental merging, N/A overwrites

harness9's summaries carry five structured anchors (user intent, execution progress, key
decisions, tried solutions, next steps). At every later compaction the new summary's anchors are
merged into the previous ones: harness9 keeps an old anchor only when the new content is exactly
`N/A`. This notebook measures, with the recall probes:

1. **with vs without anchors**: the offline summarizer (`offline`, anchor format) against its
   free-text variant (`offline_free_text`, a chronological digest with no sections, same budget), both under the
   progressive policy, in a small sweep; plus `na_safe_merge` off/on. The offline summarizer
   writes exactly `N/A` for a section with nothing new, so harness9's merge keeps the old value
   and the `na_overwrites` column stays 0.
2. **N/A overwrites**: harness9's own prompt asks the model to write `- N/A` when nothing
   applies — and `- N/A` is *not* exactly `N/A`, so harness9's merge overwrites a known anchor
   with it. To show this offline, the notebook makes the offline summarizer write `- N/A` as
   the prompt asks (its `na_text="- N/A"`) and replays with `na_safe_merge`
   off (harness9) and on (h9eval's improvement). It shows the `na_overwrites` column, the
   anchor-retention heatmaps (anchor filled in each compaction record; anchor probes over
   compactions) and the drift curves.""",
    ),
    (
        "params",
        """# Parameters
window = 8_000                   # context window (tokens): small, so there are many compactions
history_mode = "write_back"      # merges accumulate across compactions in write-back mode
recorded = ["mini-swe-agent/deepseek_chat_test_1-100/django__django-15695.traj.json"]  # under recorded_dir()
synthetic_preset = "small"
synthetic_seeds = [0, 1, 2]
probe_every_k = 5
workers = 2
out_dir = None                   # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
# (h9eval.analysis.plots return matplotlib Figures; a Figure left as the last expression of a cell is drawn)
import dataclasses
import re
import tempfile
from pathlib import Path

import pandas as pd

from h9eval import metrics as M, plots, run_task
from h9eval.core.paths import recorded_dir
from h9eval import load_results
from h9eval.summarizers import make_summarizer
from h9eval import sweep
from h9eval.tasks import load_tasks_from_spec

pd.set_option("display.max_columns", 50)
pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", 70)

out_dir = out_dir or tempfile.mkdtemp(prefix="h9eval-04-")


def titled(fig, title):
    \"\"\"Retitle a Figure's first axes (the plots' titles are generic).\"\"\"
    fig.axes[0].set_title(title)
    return fig""",
    ),
    ("md", "## 1. With and without anchors (sweep)"),
    (
        "code",
        """spec = {
    "name": "anchors",
    "window": window,
    "history_modes": [history_mode],
    "tasks": {
        "recorded": [str(recorded_dir() / p) for p in recorded],
        "synthetic": [{"preset": synthetic_preset, "seeds": synthetic_seeds}],
    },
    "policies": [
        {"kind": "progressive", "params": {"context_window_tokens": window}, "grid": {"na_safe_merge": [False, True]}},
    ],
    "summarizer": {"variants": ["offline", "offline_free_text"]},
    "probes": {"scorers": ["recall"], "every_k": probe_every_k},
}
res = sweep(spec, out_dir=Path(out_dir) / "sweep", workers=workers, progress=False)
print(res)
assert res.failed == 0, res.failures
results = load_results(res.out_dir)
run_metrics = M.run_metrics(results.calls, results.probes, results.runs)
na = results.calls.groupby("run_id", as_index=False)["na_overwrites"].sum()
run_metrics = run_metrics.merge(na, on="run_id")
anchor_kinds = [c for c in ("retention_execution_progress", "retention_key_decision", "retention_tried_solution", "retention_next_step", "retention_intent") if c in run_metrics.columns]
(
    M.config_metrics(run_metrics, ("retention", *anchor_kinds, "tokens_saved", "na_overwrites"), n=0)
    [["summarizer", "label", "n_runs", "retention", *anchor_kinds, "tokens_saved", "na_overwrites", "summarizer_calls"]]
    .round(3)
)""",
    ),
    (
        "md",
        """Anchor probes over compactions (mean recall score of each anchor kind's probes, by the
number of compactions so far), with anchors (`offline`) and without (`offline_free_text`):""",
    ),
    (
        "code",
        """runs = results.runs_with_params("params")
runs = runs[(runs["status"] == "ok") & ~runs["param.na_safe_merge"].astype(bool)]  # harness9's merge
by_summarizer = {s: list(runs[runs["summarizer"] == s]["run_id"]) for s in ("offline", "offline_free_text")}
titled(plots.anchor_retention_heatmap(results.probes[results.probes["run_id"].isin(by_summarizer["offline"])]), "Anchor probes: with anchors (offline)")""",
    ),
    ("code", "titled(plots.anchor_retention_heatmap(results.probes[results.probes[\"run_id\"].isin(by_summarizer[\"offline_free_text\"])]), \"Anchor probes: free text (offline_free_text)\")"),
    ("md", "Intent and fact retention over calls on one task, one line per summarizer (anchors and free text):"),
    (
        "code",
        """one_task = runs[runs["task_id"] == sorted(runs["task_id"])[0]]
print(one_task["task_id"].iloc[0])
plots.drift_curves(results.probes, run_ids=list(one_task["run_id"]), labels={r: f"{s} summarizer" for r, s in zip(one_task["run_id"], one_task["summarizer"])})""",
    ),
    (
        "md",
        """## 2. N/A overwrites: harness9's merge vs `na_safe_merge`

The offline summarizer's `na_text="- N/A"` makes it write a section with nothing new as `- N/A`,
the form harness9's prompt asks a model for (by default it writes exactly `N/A`).""",
    ),
    (
        "code",
        """tasks = [t for p in recorded for t in load_tasks_from_spec(str(recorded_dir() / p))]
tasks += [t for s in synthetic_seeds for t in load_tasks_from_spec(f"synthetic:{synthetic_preset}:{s}")]
runs_na = {}
for safe in (False, True):
    for t in tasks:
        (r,) = run_task(
            t,
            "progressive",
            params={"context_window_tokens": window, "na_safe_merge": safe},
            summarizer=make_summarizer("offline", na_text="- N/A"),
            history_mode=history_mode,
            probes=["recall"],
            probe_every_k=probe_every_k,
        )
        runs_na[(safe, t.task_id)] = r
calls_na = pd.concat([r.calls for r in runs_na.values()], ignore_index=True)
probes_na = pd.concat([r.probes for r in runs_na.values()], ignore_index=True)
compactions_na = pd.concat([r.compactions for r in runs_na.values()], ignore_index=True)
rm_na = M.run_metrics(calls_na, probes_na).merge(calls_na.groupby("run_id", as_index=False)["na_overwrites"].sum(), on="run_id")
rm_na["na_safe_merge"] = rm_na["run_id"].map({r.run_id: safe for (safe, _), r in runs_na.items()})
rm_na[["task_id", "na_safe_merge", "na_overwrites", "retention", *[c for c in anchor_kinds if c in rm_na.columns], "tokens_saved"]].sort_values(["task_id", "na_safe_merge"]).round(3)""",
    ),
    (
        "md",
        """The calls where harness9's merge overwrote a known anchor (`na_overwrites` > 0; with
`na_safe_merge` the same sections are kept, so the column is 0):""",
    ),
    (
        "code",
        """calls_na[calls_na["na_overwrites"] > 0][["run_id", "call_index", "tier_name", "summarizer_calls", "na_overwrites"]].head(20)""",
    ),
    (
        "md",
        """Anchor filled (share of records whose section carries information) per compaction record,
harness9's merge (first) and `na_safe_merge=True` (second):""",
    ),
    (
        "code",
        """ids_by_safe = {s: [r.run_id for (safe, _), r in runs_na.items() if safe == s] for s in (False, True)}
titled(plots.anchor_retention_heatmap(compactions_na[compactions_na["run_id"].isin(ids_by_safe[False])]), "Anchor filled per record: harness9's merge")""",
    ),
    ("code", "titled(plots.anchor_retention_heatmap(compactions_na[compactions_na[\"run_id\"].isin(ids_by_safe[True])]), \"Anchor filled per record: na_safe_merge=True\")"),
    ("md", "Anchor probes over compactions, harness9's merge then `na_safe_merge=True`:"),
    ("code", "titled(plots.anchor_retention_heatmap(probes_na[probes_na[\"run_id\"].isin(ids_by_safe[False])]), \"Anchor probes: harness9's merge\")"),
    ("code", "titled(plots.anchor_retention_heatmap(probes_na[probes_na[\"run_id\"].isin(ids_by_safe[True])]), \"Anchor probes: na_safe_merge=True\")"),
    ("code", "plots.drift_curves(probes_na, labels={r.run_id: f\"{'na_safe_merge' if safe else 'harness9 merge'}, {task}\" for (safe, task), r in runs_na.items()})"),
]

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["05-token-estimates"] = [
    (
        "md",
        """# How wrong is bytes/4?

harness9 estimates tokens as UTF-8 bytes / 4 and decides its tiers on that estimate. This
notebook compares the estimate (and h9eval's per-content-kind calibrated estimate) with an
offline BPE tokenizer (`BpeCounter`, o200k_base via quicktok) on a few recorded sessions and a
synthetic task:

* the error per content kind (code, logs, prose, JSON...) — `metrics.token_estimate_error`;
* the calls where the real (BPE) count lands in another tier, or over the window, than the
  estimate does — `metrics.tier_misclassification` (`under`: the estimate compacts too late,
  `over`: too early);
* both in `plots.token_estimate_error`;
* what it does in a replay: the progressive policy with `tier_token_counter="harness9"`
  (bytes/4) against `"bpe"`, call by call.""",
    ),
    (
        "params",
        """# Parameters
recorded = [                     # under recorded_dir()
    "mini-swe-agent/deepseek_chat_test_1-100/django__django-15695.traj.json",
    "swe-agent/pydicom__pydicom-1458.traj",
    "claude-code/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl",
]
synthetic = ["synthetic:small:0"]
window = 16_000                  # context window (tokens) for the tiers
replay_task = -1                 # index (in recorded + synthetic) of the task replayed at the end (-1: the synthetic one)""",
    ),
    (
        "code",
        """%matplotlib inline
# (h9eval.analysis.plots return matplotlib Figures; a Figure left as the last expression of a cell is drawn)
import pandas as pd

from h9eval import metrics as M, plots, run_task
from h9eval.core.paths import recorded_dir
from h9eval.tasks import load_tasks_from_spec
from h9eval.analysis.token_accuracy import call_token_table, message_token_table
from h9eval.core.token_counters import BpeCounter

pd.set_option("display.max_columns", 50)
pd.set_option("display.width", 200)

tasks = [t for spec in [str(recorded_dir() / p) for p in recorded] + list(synthetic) for t in load_tasks_from_spec(spec)]
bpe = BpeCounter()
messages = pd.concat([message_token_table(t.messages, counter=bpe, task_id=t.task_id) for t in tasks], ignore_index=True)
messages.head()""",
    ),
    (
        "md",
        """## Error per content kind

`est_error` = sum(bytes/4) / sum(BPE) − 1 (negative: bytes/4 undercounts); `*_abs_error_median`:
the median per-message relative error.""",
    ),
    ("code", "M.token_estimate_error(messages).round(3)"),
    ("md", "Per task:"),
    (
        "code",
        """pd.concat({tid: M.token_estimate_error(g).set_index("kind") for tid, g in messages.groupby("task_id")}, names=["task_id"])[["n_messages", "bytes_per_token", "est_error", "calibrated_error"]].round(3)""",
    ),
    (
        "md",
        """## Tiers: where the estimate and the real count disagree

Per call of an uncompacted replay, the history counted by bytes/4 and by BPE, classified
against harness9's thresholds for the window:""",
    ),
    (
        "code",
        """per_call = pd.concat([call_token_table(t, counter=bpe, context_window_tokens=window) for t in tasks], ignore_index=True)
wrong = M.tier_misclassification(per_call)
print(f"{len(wrong)} of {len(per_call)} calls land in another tier (or window side) by BPE than by bytes/4")
wrong.groupby(["task_id", "direction"]).size().unstack(fill_value=0)""",
    ),
    ("code", "wrong[[\"task_id\", \"call_index\", \"history_tokens\", \"history_tokens_bpe\", \"est_tier\", \"bpe_tier\", \"est_over_window\", \"bpe_over_window\", \"direction\"]].head(20)"),
    ("code", "plots.token_estimate_error(messages, per_call)"),
    (
        "md",
        """## In a replay: tiers decided on bytes/4 vs BPE

The same task through the progressive policy, once with harness9's bytes/4 tier counter and once
with BPE (`tier_token_counter`, an h9eval improvement option):""",
    ),
    (
        "code",
        """task = tasks[replay_task]
replays = {
    counter: run_task(task, "progressive", params={"context_window_tokens": window, "tier_token_counter": counter})[0]
    for counter in ("harness9", "bpe")
}
both = pd.concat([r.calls for r in replays.values()], ignore_index=True)
pd.DataFrame({c: r.summary.row() for c, r in replays.items()})""",
    ),
    ("code", "plots.tier_swimlane(both, labels={r.run_id: f\"tier counter: {c}\" for c, r in replays.items()})"),
    (
        "code",
        """tiers = pd.DataFrame({c: r.calls.set_index("call_index")["tier_name"] for c, r in replays.items()})
print(f"{int((tiers['harness9'] != tiers['bpe']).sum())} of {len(tiers)} calls reach another tier")
tiers[tiers["harness9"] != tiers["bpe"]].head(20)""",
    ),
]

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["06-closed-loop"] = [
    (
        "md",
        """# Closed loop: does the agent still finish the task?

Open-loop replay asks whether a compacted view still *contains* the intent and the facts. Here
compaction sits before every model call of a running agent, the agent's next action depends on
the compacted view, and success is checked against a world's hidden state (`fact_chain`,
`mini_repo`, `ticket_queue`; deterministic, seeded, offline). The agent is the scripted one: a
pure function of the serialised view it receives (see the README on what it can and cannot
stand in for).

This notebook runs one episode, then a small sweep over harness9's default, observation
masking, the hybrid, the single-threshold summary and the controls on the three worlds, and
shows success and cost per configuration with task-level bootstrap intervals, the cost-vs-success
frontier, the failure modes, and the **validation study**: each world seed's `keep_all`
transcript is exported as a task and replayed open loop with recall probes, so we can ask
whether open-loop retention predicts closed-loop success on the same episodes.""",
    ),
    (
        "params",
        """# Parameters
window = 1_500                 # context window (tokens) of the compacting policies: small, so compaction happens
seeds = [0, 1, 2]              # world seeds per world (tasks = worlds x seeds)
agents = ["scripted"]          # add "scripted:raw_only" (trusts only raw tool results) or "scripted:last_k"
workers = 2
out_dir = None                 # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
import tempfile
from pathlib import Path

import pandas as pd

from h9eval.analysis import plots_closedloop as PC
from h9eval.analysis import episodes as R
from h9eval.closedloop import steps_frame
from h9eval.runs.world import format_episode, run_world
from h9eval import load_results, sweep

pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 200)
out_dir = out_dir or tempfile.mkdtemp(prefix="h9eval-06-")""",
    ),
    ("md", "## One episode\n\n`h9eval run --world fact_chain:0 --policy progressive --set context_window_tokens=1500` does the same from the shell."),
    (
        "code",
        """one = run_world("fact_chain:0", agent="scripted", policy="progressive", params={"context_window_tokens": window},
                world_params={"hops": 4, "gap_steps": 3, "padding_bytes": 1200})
print(format_episode(one))
steps_frame([one.episode])[["step", "tool", "tokens_sent", "tier_name", "compacted", "refetch"]]""",
    ),
    ("md", "## A sweep over policies and worlds"),
    (
        "code",
        """worlds = [
    {"kind": "fact_chain", "seeds": seeds, "params": {"hops": 4, "gap_steps": 3, "padding_bytes": 1200}},
    {"kind": "mini_repo", "seeds": seeds, "params": {"n_bugs": 3, "padding_bytes": 1200}},
    {"kind": "ticket_queue", "seeds": seeds, "params": {"n_tickets": 5, "padding_bytes": 1200}},
]
spec = {
    "name": "closed-loop",
    "agents": agents,
    "tasks": {"worlds": worlds},
    "policies": [
        {"kind": "progressive", "name": "harness9-default", "params": {"context_window_tokens": window}},
        {"kind": "observation_masking", "params": {"keep_recent_turns": 3}},
        {"kind": "hybrid", "params": {"context_window_tokens": window}},
        {"kind": "summary_single_threshold", "params": {"context_window_tokens": window}},
        {"kind": "keep_all"},
        {"kind": "drop_all"},
    ],
    "summarizer": {"name": "offline"},
    "probes": {"scorers": ["recall"]},
}
res = sweep(spec, out_dir=Path(out_dir) / "sweep", workers=workers, progress=False)
print(res)
assert res.failed == 0, res.failures
results = load_results(res.out_dir)
episodes = R.episode_table(results)
episodes[["task_id", "agent_id", "config", "success", "failure", "steps", "excess_steps", "tokens_sent_sum",
          "cost_usd", "n_compactions"]].head(12)""",
    ),
    (
        "md",
        "## Success and cost per configuration\n\nThe unit is the world (kind and parameters; its seeds are "
        "averaged inside it): means over worlds with 95 % world-bootstrap intervals; the differences are "
        "paired with `keep_all` on the same worlds, Holm-adjusted; with too few worlds the verdict reads "
        "`insufficient units`. `cost_usd`: dollars per episode as the provider bills its agent and summarizer"
        " calls (prompt caching, list prices; the `episodes` table's billed columns), `cache_read_share` the "
        "share of the agent's input billed as cache reads."
    ),
    (
        "code",
        """table = R.success_cost(episodes)
table[["agent", "config", "n_worlds", "n_seeds", "success", "success_lo", "success_hi", "tokens_sent",
       "cost_usd", "cache_read_share", "success_diff", "success_verdict", "tokens_verdict",
       "excess_steps"]].round(4)""",
    ),
    ("code", "PC.cost_success_frontier(table)"),
    ("md", "## Failure modes"),
    ("code", "modes = R.failure_modes(episodes)\nmodes"),
    ("code", "PC.failure_modes(modes, [k for k, _ in R.FAILURE_KINDS])"),
    (
        "md",
        """## Validation: does open-loop retention predict closed-loop success?

Spearman's rho across tasks between the open-loop retention of a configuration on a world's
exported transcript and that configuration's closed-loop success on the same world seed. A
configuration that always succeeds (or always fails) has nothing to predict: its rho is NaN.""",
    ),
    ("code", "v = R.validation_study(results)\nv.pooled"),
    ("code", "v.per_config"),
    ("code", "v.probes.head(5)  # best predictors first; v.probes.tail(5) are the worst"),
    ("code", "PC.retention_vs_success(v.pairs)"),
]


NOTEBOOKS["07-corpus"] = [
    (
        "md",
        """# A corpus of real trajectories: sample, sweep, compare, export

Public trajectory datasets hold tens of thousands of real agent runs. h9eval reads them through
the `datasets` library: `h9eval.tasks.datasets` has one adapter per dataset
(`nebius/SWE-agent-trajectories`, `nebius/SWE-rebench-openhands-trajectories`,
`nvidia/SWE-Zero-openhands-trajectories`, `SWE-Gym/OpenHands-Sampled-Trajectories`,
`SWE-bench/SWE-smith-trajectories`), each turning a row into a task with provenance (dataset,
file hash or revision, row) and the same derived ground truth as the recorded-session loaders.

This notebook runs offline on the small fixtures in `examples/datasets/` (the shipped recorded
sessions converted to each dataset's documented row schema, plus rows that break it on purpose).
To point it at the Hub, set `sources` to Hub ids, e.g.
`{"path": "nebius/SWE-agent-trajectories", "split": "train", "n": 500, "seed": 0, "where": {"target": True}}`:
a Hub id is streamed (a sample of 500 reads about 500 rows plus the shuffle buffer, never the
whole dataset) and the sample is saved once as a local file that the sweep's workers read.""",
    ),
    (
        "params",
        """# Parameters
sources = [                       # dataset samples: a local file/folder or a Hub id, with n, seed and filters
    {"path": "swe_rebench_openhands.parquet", "n": 3, "seed": 0},
    {"path": "nebius_swe_agent.parquet", "n": 2, "seed": 0, "where": {"target": True}},
]
peak_frac = 0.4                   # each task's window: this fraction of its own uncompacted peak
probe_every_k = 10
workers = 2
out_dir = None                    # None: a fresh temporary folder""",
    ),
    (
        "code",
        """import tempfile
from pathlib import Path

import pandas as pd

from h9eval import load_results, sweep
from h9eval.analysis import metrics as M
from h9eval.core.paths import repo_root
from h9eval.results.export import dataset_tables, export_dataset
from h9eval.tasks.datasets import ADAPTERS, DatasetSource, load_dataset_tasks

pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", 80)
fixtures = repo_root() / "examples" / "datasets"
sources = [{**s, "path": str(fixtures / s["path"]) if (fixtures / s["path"]).exists() else s["path"]} for s in sources]
pd.DataFrame([{"adapter": n, "hub ids": ", ".join(a.hub_ids), "resolved column": a.resolved_column,
               "description": a.description} for n, a in ADAPTERS.items()])""",
    ),
    ("md", "## A sample: what converted, what was skipped and why"),
    (
        "code",
        """sample = load_dataset_tasks(DatasetSource(**{**sources[0], "n": None}))
print(f"adapter {sample.adapter}: {len(sample.tasks)} tasks from {sample.rows_read} rows; skipped {dict(sample.skipped)}")
pd.DataFrame([{"task_id": t.task_id, "calls": t.n_calls, "tokens": t.estimated_tokens,
               "resolved": t.metadata.get("resolved"), "row": t.metadata["dataset"]["row"]} for t in sample.tasks])""",
    ),
    ("md", "## A sweep over the samples: harness9's defaults against two peers and the control"),
    (
        "code",
        """spec = {
    "name": "corpus",
    "window": {"peak_frac": peak_frac},
    "tasks": {"datasets": sources},
    "policies": [
        {"kind": "progressive", "name": "harness9-default"},
        {"kind": "observation_masking", "params": {"keep_recent_turns": 10}},
        {"kind": "summary_single_threshold"},
        {"kind": "keep_all"},
    ],
    "probes": {"scorers": ["recall"], "every_k": probe_every_k},
}
out_dir = Path(out_dir or tempfile.mkdtemp(prefix="h9eval-07-"))
res = sweep(spec, out_dir=out_dir / "sweep", workers=workers, progress=False)
print(res)
assert res.failed == 0, res.failures""",
    ),
    (
        "code",
        """results = load_results(res.out_dir)
run_metrics = M.run_metrics(results.calls, results.probes, results.runs)
M.config_metrics(run_metrics, ("tokens_saved", "retention"))[
    ["label", "n_runs", "tokens_saved", "tokens_saved_ci_lo", "tokens_saved_ci_hi", "retention", "retention_ci_lo",
     "retention_ci_hi"]].round(3)""",
    ),
    (
        "md",
        """The intervals are over tasks (here a handful of fixture rows: wide, and the retention of the
offline extractive summarizer is a stand-in for a model's). `h9eval compare RESULTS A B` gives the
paired verdicts; on a real sample of hundreds of tasks they become informative.

## The results as a Hugging Face dataset

`export_dataset` (CLI: `h9eval export RESULTS DIR`) writes the tables as a `DatasetDict`;
`datasets.load_from_disk` reads it back, and `push_to_hub` on it shares it (not run here).""",
    ),
    (
        "code",
        """exported = export_dataset(results, out_dir / "export")
back = dataset_tables(exported)
assert all(len(back[n]) == len(getattr(results, n)) for n in ("runs", "calls", "compactions", "probes"))
import datasets
datasets.load_from_disk(str(exported))""",
    ),
]


# ---------------------------------------------------------------------------------------------
NOTEBOOKS["08-your-own-policy"] = [
    (
        "md",
        """# Your own policy: write it, register it, sweep it against harness9's default

A policy is a frozen, keyword-only dataclass (its fields are its parameters, validated in
`__post_init__`) whose `start(env)` returns a run object with `_auto` (the policy decides from
the history) and `_force` (compact now). `register_policy` makes its `kind` usable everywhere a
built-in one is: `make_policy`, `run_task`, a sweep spec, and the sweep's worker processes (the
class is sent to them, so a policy defined in a notebook cell sweeps on 2 workers).
`compaction_record` writes the record of one compaction in harness9's shape.

The example keeps the first `keep_head` and the last `keep_tail` messages once the history has
more than `max_messages`, then sweeps it against harness9's default on eight synthetic tasks.
The next cell holds the parameters.""",
    ),
    (
        "params",
        """# Parameters
window = 16_000                  # context window (tokens) of every configuration
seeds = list(range(8))           # synthetic "small" tasks: a verdict on two metrics needs at least 7
workers = 2                      # sweep worker processes (0: in this process)
out_dir = None                   # None: a fresh temporary folder""",
    ),
    (
        "code",
        """from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval import (Compaction, CompactionEnv, Message, Policy, PolicyRun, Tier,
                    compaction_record, register_policy, repair_tool_pairs)


@register_policy
@dataclass(frozen=True, kw_only=True)
class KeepHeadTail(Policy):
    \"\"\"Once the history passes max_messages, keep its first keep_head and last keep_tail messages.\"\"\"

    kind: ClassVar[str] = "keep_head_tail"
    keep_head: int = 2
    \"\"\"Messages kept from the start (the system prompt and the task).\"\"\"
    keep_tail: int = 12
    \"\"\"Newest messages kept.\"\"\"
    max_messages: int = 40
    \"\"\"Compact once the history holds more messages than this.\"\"\"

    def __post_init__(self) -> None:
        self._check(self.keep_tail >= 1, "keep_tail", "must be >= 1", self.keep_tail)
        self._check(self.max_messages > self.keep_head + self.keep_tail, "max_messages", "must exceed keep_head + keep_tail", self.max_messages)

    def start(self, env: CompactionEnv | None = None) -> "KeepHeadTailRun":
        return KeepHeadTailRun(self, env or CompactionEnv())


class KeepHeadTailRun(PolicyRun):
    def __init__(self, policy: KeepHeadTail, env: CompactionEnv) -> None:
        self.policy, self.env = policy, env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        if len(history) <= self.policy.max_messages:  # nothing to do: the view is the history
            return Compaction(tuple(history), compaction_record(self.env, history, history, Tier.NONE))
        return self._force(history)

    def _force(self, history: Sequence[Message]) -> Compaction:
        p = self.policy
        # never send a tool result without its call (or a call without its result)
        view = repair_tool_pairs([*history[: p.keep_head], *history[-p.keep_tail :]])
        return Compaction(tuple(view), compaction_record(self.env, history, view, Tier.SOFT))""",
    ),
    ("md", "## One task, in this process\n\n`run_task` takes the new kind by name, like a built-in one."),
    (
        "code",
        """import tempfile
from pathlib import Path

from h9eval import run_task

out_dir = Path(out_dir or tempfile.mkdtemp(prefix="h9eval-07-"))
(one,) = run_task("synthetic:small:0", "keep_head_tail", params={"keep_tail": 10}, window=window, out_dir=out_dir / "one")
one.summary.row()""",
    ),
    (
        "md",
        """## A sweep on worker processes, against harness9's default

The entry named `harness9-default` is what the report and `compare` treat as harness9's
default. `sweep()` raises `SweepFailed` if any cell fails, so a policy the workers could not
run cannot go unnoticed.""",
    ),
    (
        "code",
        """from h9eval import compare, sweep

spec = {
    "name": "own-policy",
    "window": window,
    "tasks": {"synthetic": [{"preset": "small", "seeds": seeds}]},
    "policies": [
        {"kind": "progressive", "name": "harness9-default", "params": {"context_window_tokens": window}},
        {"kind": "keep_head_tail", "name": "head-tail"},
    ],
    "history_modes": ["view"],
    "probes": {"scorers": ["recall"]},
}
res = sweep(spec, out_dir=out_dir / "sweep", workers=workers, progress=False)
print(res)""",
    ),
    (
        "code",
        """c = compare(res.out_dir, "head-tail", "harness9-default", metric=["retention", "tokens_saved"])
print(c)
c.frame()[["metric", "n_tasks", "mean_diff", "lo", "hi", "verdict"]]""",
    ),
]


# ---------------------------------------------------------------------------------------------
NOTEBOOKS["09-loss-ledger"] = [
    (
        "md",
        """# The loss ledger: what each compaction kept, lost or left stale

Every run records a ledger: at each round, each typed item of the task's ground truth (goal
terms, safety rules, side constraints, preferences, facts, updated values, artifacts, failed
approaches, progress, next steps) is PRESERVED (its exact value is in the view), DEGRADED,
STALE (an old value shown as current) or LOST. This notebook compares harness9's default with
two peers and the controls round by round, finds each type's *cliff round* (survival below 50 %),
and opens one run's compactions to see exactly what left the view.

Survival rounds are *window fills* (the k-th time the uncompacted history outgrew a window): the
same calls for every configuration of a task. The summaries are the offline extractive
stand-in's; `docs/ledger.md` gives its measured gap to a real model's summaries.""",
    ),
    (
        "params",
        """# Parameters
synthetic_seeds = [1, 2]          # medium synthetic tasks (they plant every item type)
peak_frac = 0.3                   # each task's window: this fraction of its uncompacted peak
history_mode = "write_back"
workers = 2
out_dir = None                    # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
import tempfile
from pathlib import Path

import pandas as pd

from h9eval import load_results, sweep
from h9eval.analysis.ledger import cliff_rounds, ledger_summary, survival_curves, survival_plot
from h9eval.analysis.ledger_page import run_diffs

pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", 90)
spec = {
    "name": "ledger",
    "window": {"peak_frac": peak_frac},
    "history_modes": [history_mode],
    "tasks": {"synthetic": [{"preset": "medium", "seeds": synthetic_seeds}]},
    "policies": [
        {"kind": "progressive", "name": "harness9-default"},
        {"kind": "summary_single_threshold"},
        {"kind": "observation_masking"},
        {"kind": "keep_all"},
        {"kind": "drop_all"},
    ],
}
out_dir = Path(out_dir or tempfile.mkdtemp(prefix="h9eval-09-"))
res = sweep(spec, out_dir=out_dir / "sweep", workers=workers, progress=False)
assert res.failed == 0, res.failures
results = load_results(res.out_dir)
results.ledger.groupby(["basis", "state"]).size().unstack(fill_value=0)""",
    ),
    ("md", "## Survival per item type, round by round"),
    (
        "code",
        """curves = survival_curves(results.ledger, results.runs)
survival_plot(curves, history_mode=history_mode)""",
    ),
    (
        "code",
        """cliffs = cliff_rounds(curves)
cliffs.pivot_table(index="label", columns="item_type", values="cliff_round", aggfunc="first")""",
    ),
    ("code", "ledger_summary(results.ledger, results.runs).head(20)"),
    (
        "md",
        """## One run, compaction by compaction

A run with the ledger on stores its compaction diffs (the `diffs` table); `run_diffs` reads one run's:
per compaction round, what left the view, where `N/A` erased an anchor value, and the items that
became LOST or STALE (with the later call that used them again). Nothing is replayed.
`h9eval ledger SWEEP_DIR --run-id RUN_ID` writes the same as an HTML page.""",
    ),
    (
        "code",
        """run_id = results.runs[results.runs["policy_name"] == "harness9-default"]["run_id"].iloc[0]
diffs = run_diffs(results, run_id).diffs
diffs[["round", "call_index", "tier_name", "n_left", "lost", "stale", "na_erased", "used_later"]].head(12)""",
    ),
]

# ---------------------------------------------------------------------------------------------
NOTEBOOKS["10-inspect"] = [
    (
        "md",
        """# Inspect's compaction strategies against harness9's tiers

Inspect (`inspect-ai`) ships its own compaction strategies. `h9eval.integrations.inspect`
registers three of them as h9eval policies that call Inspect's own code: `inspect_trim`
(`CompactionTrim`: keep the input and the last 80 % of the messages), `inspect_edit`
(`CompactionEdit`: clear all but the last 3 tool results) and `inspect_summary`
(`CompactionSummary`: the input and one summary replace the conversation; its summary model is
h9eval's summarizer, the offline extractor here). This notebook sweeps them with harness9's default
and the `keep_all` control over a few of the demo's tasks, under the same probes and loss ledger,
compares tokens saved, retention and item survival, and exports the sweep as Inspect eval logs.

The cells run in this process (`workers=0`): Inspect's strategies are registered in this process by
`register_inspect_policies()`, which worker processes do not call. The summaries of harness9's tiers are the
offline stand-in's, not a model's.""",
    ),
    (
        "params",
        """# Parameters
synthetic_seeds = [1]            # medium synthetic tasks (add seeds for narrower intervals)
recorded = ["mini-swe-agent/deepseek_chat_dev"]   # under recorded_dir()
peak_frac = 0.3                  # each task's window: this fraction of its uncompacted peak
history_mode = "write_back"      # how Inspect runs a strategy (on its own previous output)
out_dir = None                   # None: a fresh temporary folder""",
    ),
    (
        "code",
        """%matplotlib inline
import tempfile
from pathlib import Path

import pandas as pd

from h9eval.integrations.inspect import register_inspect_policies
register_inspect_policies()  # inspect_trim, inspect_edit and inspect_summary
from h9eval import load_results, sweep
from h9eval.analysis import metrics as M
from h9eval.analysis.ledger import survival_curves, survival_plot
from h9eval.core.paths import recorded_dir

pd.set_option("display.width", 200)
spec = {
    "name": "inspect-vs-harness9",
    "window": {"peak_frac": peak_frac},
    "history_modes": [history_mode],
    "tasks": {"synthetic": [{"preset": "medium", "seeds": synthetic_seeds}],
              "recorded": [str(recorded_dir() / p) for p in recorded]},
    "policies": [
        {"kind": "progressive", "name": "harness9-default"},
        {"kind": "inspect_trim"},
        {"kind": "inspect_edit"},
        {"kind": "inspect_summary"},
        {"kind": "keep_all"},
    ],
    "probes": {"scorers": ["recall"], "every_k": 10},
}
out_dir = Path(out_dir or tempfile.mkdtemp(prefix="h9eval-10-"))
res = sweep(spec, out_dir=out_dir / "sweep", workers=0, progress=False)
assert res.failed == 0, res.failures
results = load_results(res.out_dir)
run_metrics = M.run_metrics(results.calls, results.probes, results.runs)
M.config_metrics(run_metrics, ("tokens_saved", "retention"))[
    ["label", "n_runs", "tokens_saved", "tokens_saved_ci_lo", "tokens_saved_ci_hi", "retention", "retention_ci_lo",
     "retention_ci_hi", "overflows"]].round(3)""",
    ),
    ("md", "Survival of each item type after each window fill (the same calls for every strategy):"),
    ("code", "survival_plot(survival_curves(results.ledger, results.runs), history_mode=history_mode)"),
    (
        "md",
        """The same sweep as Inspect eval logs (`h9eval export RESULTS DIR --format inspect`): one log
per configuration, one sample per task, the view sent at each call as a model event, each
compaction as a compaction event and the numbers above as scores; `inspect view --log-dir DIR`
opens them beside your other Inspect logs.""",
    ),
    (
        "code",
        """from inspect_ai.log import read_eval_log

from h9eval.integrations.inspect import sweep_to_eval_logs

exported = sweep_to_eval_logs(res.out_dir, out_dir / "inspect-logs", overwrite=True)
logs = [read_eval_log(str(p)) for p in exported.logs]
pd.DataFrame([{"model": log.eval.model, "samples": len(log.samples),
               **{s.name: round(s.metrics["mean"].value, 3) for s in log.results.scores[:2]},
               "compaction events": sum(e.event == "compaction" for s in log.samples for e in s.events)}
              for log in logs])""",
    ),
    (
        "md",
        """Two tasks give wide intervals, and the retention of harness9's tiers and of
`inspect_summary` here is the offline stand-in's (an extractor answering whatever Inspect's
prompt asks). `h9eval compare RESULTS harness9-default inspect_trim` gives the paired verdict over
tasks; to run harness9's policy inside your own Inspect agents use `H9Compaction` (README,
section Inspect).""",
    ),
]

# ---------------------------------------------------------------------------------------------
def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata = {
        # the project's environment, registered by `make lab` and `make test` (the `kernel` target)
        "kernelspec": {"display_name": "Python (h9eval)", "language": "python", "name": "h9eval"},
        "language_info": {"name": "python"},
    }
    for i, (kind, src) in enumerate(cells):
        cell = new_markdown_cell(src) if kind == "md" else new_code_cell(src)
        cell.id = f"{name[:2]}-{i:02d}"  # deterministic ids: regenerating gives no diff
        if kind == "params":
            cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def main(argv: list[str]) -> None:
    names = argv or list(NOTEBOOKS)
    for name in names:
        path = HERE / f"{name}.ipynb"
        nbformat.write(build(name, NOTEBOOKS[name]), path)
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
