"""One run's folder (``h9eval run --out DIR``, a replay or a closed-loop episode) as a report: its
tables read into a :class:`~h9eval.results.store.Results` of one run, and an answer box that says
what one run can say (its numbers, no interval and no verdict) and how to get a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.model import Section
from h9eval.core.errors import FormatError
from h9eval.results.io import check_manifest_version, read_table
from h9eval.results.schema import CELL_PARTS, MANIFEST, MARKER, RUN_SUMMARY_KEYS
from h9eval.results.store import Results, empty_table, runs_frame

__all__ = [
    "episode_answer_section",
    "is_episode_folder",
    "is_run_folder",
    "load_episode_folder",
    "load_run_folder",
    "run_answer_section",
    "usd_text",
]


def _manifest(folder: Path) -> dict[str, Any] | None:
    p = folder / MANIFEST
    if not p.is_file():
        return None
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # load_results names the problem
    return m if isinstance(m, dict) else None


def _stored_row(folder: Path) -> Any | None:
    """The runs row a run folder stores (``run.parquet``, written since run specs), else ``None``."""
    p = folder / MARKER
    return read_table(p, "runs") if p.is_file() else None


def is_run_folder(folder: Path) -> bool:
    """``folder`` holds one run's tables (its manifest says ``kind = "run"``)."""
    m = _manifest(folder)
    return m is not None and m.get("kind") == "run"


def load_run_folder(folder: Path) -> Results:
    """The run in ``folder`` as a one-run :class:`Results` (``runs`` has its one row, built from
    the manifest's identity and summary)."""
    import pandas as pd

    m = _manifest(folder)
    if m is None or m.get("kind") != "run":
        raise FormatError("not an h9eval run folder (no manifest.json of kind 'run')", path=str(folder))
    check_manifest_version(m.get("schema_version"), folder / MANIFEST)
    tables = {}
    for name in CELL_PARTS:
        p = folder / f"{name}.parquet"
        if not p.is_file():
            raise FormatError(f"run folder lacks {name}.parquet", path=str(folder))
        tables[name] = read_table(p, name)
    summ = m.get("summary") or {}
    pol = m.get("policy") or {}
    tiers = summ.get("compactions_by_tier") or {}
    task = m.get("task") or {}
    stored = _stored_row(folder)
    # a folder written before run specs has no runs row: its row is read off its manifest
    row = (
        stored.iloc[0].to_dict()
        if stored is not None
        else {
            "run_id": m.get("run_id"),
            "task_id": task.get("task_id"),
            "task_spec": "",
            "policy_name": pol.get("kind"),
            "policy_kind": pol.get("kind"),
            "params_json": json.dumps(pol.get("params") or {}, sort_keys=True),
            "grid_json": "{}",
            "params_hash": pol.get("params_hash"),
            "history_mode": (m.get("replay") or {}).get("history_mode"),
            "summarizer": m.get("summarizer") or "",
            "repeat": 0,
            "status": "ok",
            "error": "",
            **{k: summ.get(k) for k in RUN_SUMMARY_KEYS if not isinstance(summ.get(k), dict)},
            "n_compactions": int(sum(tiers.values())),
            **{f"compactions_{t}": int(tiers.get(t, 0)) for t in ("warn", "soft", "full", "emergency")},
        }
    )
    name = f"{task.get('task_id', '?')}, {pol.get('kind', '?')}"
    return Results(
        path=folder,
        manifest={**m, "name": name},
        runs=runs_frame([row]),
        calls=tables["calls"],
        compactions=tables["compactions"],
        probes=tables["probes"] if len(tables["probes"]) else pd.DataFrame(columns=tables["probes"].columns),
        **_optional(folder),
    )


def _optional(folder: Path) -> dict[str, Any]:
    """The run folder's ledger and diffs tables, where it has them."""
    return {
        n: read_table(folder / f"{n}.parquet", n) for n in ("ledger", "diffs") if (folder / f"{n}.parquet").is_file()
    }


def usd_text(x: Any) -> str:
    """A run's billed dollars, ``unpriced`` when unknown (an unpriced model, or a table written
    before billing: never $0)."""
    return "unpriced" if x is None or x != x else f"${float(x):.4g}"


def run_answer_section(ctx: ReportContext) -> list[Section]:
    """What one run says: its numbers; no interval or verdict (one task, one configuration)."""
    import pandas as pd

    s = Section("The answer", part="answer")
    rm = ctx.rm
    if not len(rm):
        s.note("The run made no model calls: nothing to report.")
        return [s]
    r = rm.iloc[0]
    summ = ctx.results.manifest.get("summary") or {}
    rows = [
        ("configuration", str(r["label"])),
        ("task", str(r["task_id"])),
        ("history mode", str(r["history_mode"])),
        ("window (tokens)", f"{int(summ['context_window_tokens']):,}" if summ.get("context_window_tokens") else "–"),
        (
            "tokens saved",
            f"{float(r['tokens_saved']):.3f}"
            if "tokens_saved" in r and r["tokens_saved"] == r["tokens_saved"]
            else "–",
        ),
        (
            "retention",
            f"{float(r['retention']):.3f}"
            if "retention" in r and r["retention"] == r["retention"]
            else "– (no probes)",
        ),
        (
            "compactions by tier",
            ", ".join(f"{k} {v}" for k, v in (summ.get("compactions_by_tier") or {}).items()) or "none",
        ),
        ("billed USD (agent and summarizer calls)", usd_text(r.get("cost_usd"))),
        ("peak tokens sent", f"{int(summ.get('peak_tokens_sent') or 0):,}"),
        ("summarizer calls", str(summ.get("summarizer_calls", 0))),
        ("overflows", str(summ.get("overflows", 0))),
    ]
    s.table(pd.DataFrame(rows, columns=["what", "value"]), "")
    s.note(
        "One run of one configuration on one task: no interval and no verdict. For a verdict against harness9's "
        "default, "
        "sweep this configuration and a progressive entry named harness9-default over several tasks (h9eval sweep), "
        "then "
        "h9eval report on the sweep's folder."
    )
    return [s]


_EPISODE_FILES = ("episodes.parquet", "calls.parquet")


def is_episode_folder(folder: Path) -> bool:
    """``folder`` holds one closed-loop episode (``h9eval run --world ... --out``)."""
    # an episode folder's manifest says kind "episode"; one written before run specs has none at all (a
    # sweep's folder whose manifest is corrupt also holds these tables, and must reach load_results,
    # which names the manifest's problem)
    if not all((folder / f).is_file() for f in _EPISODE_FILES):
        return False
    m = _manifest(folder)
    return m.get("kind") == "episode" if m is not None else not (folder / MANIFEST).exists()


def load_episode_folder(folder: Path) -> Results:
    """The episode in ``folder`` as a one-run :class:`Results` (its ``episodes`` row, its calls,
    and a ``runs`` row built from the episode's identity)."""
    ep = read_table(folder / "episodes.parquet", "episodes")
    if len(ep) != 1:
        raise FormatError(f"an episode folder holds one episode; episodes.parquet has {len(ep)} rows", path=str(folder))
    e = ep.iloc[0]
    stored = _stored_row(folder)
    # a folder written before run specs has no runs row: its row is read off its episodes row
    row = (
        stored.iloc[0].to_dict()
        if stored is not None
        else {
            "run_id": e["run_id"],
            "task_id": e["task_id"],
            "task_spec": f"world:{e['world_kind']}:{e['seed']}",
            "policy_name": e["policy_name"] or e["policy_kind"],
            "policy_kind": e["policy_kind"],
            "params_json": e["params_json"],
            "grid_json": "{}",
            "params_hash": e["params_hash"],
            "history_mode": e["history_mode"],
            "summarizer": e["summarizer"] or "",
            "repeat": 0,
            "status": "ok",
            "error": "",
            "calls": e["steps"],
            "n_compactions": e["n_compactions"],
            "peak_tokens_sent": e["tokens_sent_peak"],
            "summarizer_calls": e["summarizer_calls"],
            "summarizer_cost_usd": e["summarizer_cost_usd"],
        }
    )
    return Results(
        path=folder,
        manifest={
            **(_manifest(folder) or {}),
            "kind": "episode",
            "name": f"{e['task_id']}, {e['policy_kind']}, agent {e['agent_id']}",
        },
        runs=runs_frame([row]),
        calls=read_table(folder / "calls.parquet", "calls"),
        compactions=empty_table("compactions"),
        probes=empty_table("probes"),
        episodes=ep,
        **_optional(folder),
    )


def episode_answer_section(ctx: ReportContext) -> list[Section]:
    """What one episode says: did the agent finish, at what cost, how it failed."""
    import pandas as pd

    s = Section("The answer", part="answer")
    e = ctx.results.episodes.iloc[0]
    oracle = e["oracle_steps"] if "oracle_steps" in e.index else None
    rows = [
        ("configuration", str(e["policy_name"] or e["policy_kind"])),
        ("world", f"{e['world_kind']} seed {e['seed']}"),
        ("agent", str(e["agent_id"])),
        ("history mode", str(e["history_mode"])),
        ("window (tokens)", f"{int(e['context_window_tokens']):,}"),
        ("success", "yes" if bool(e["success"]) else f"no: {e['failure'] or e['terminated_by']}"),
        ("subgoals reached", f"{int(e['subgoals_reached'])} of {int(e['subgoals_total'])}"),
        (
            "steps",
            f"{int(e['steps'])}"
            + (f" (the keep_all oracle: {int(oracle)})" if oracle is not None and oracle == oracle else ""),
        ),
        ("tokens sent", f"{int(e['tokens_sent_sum']):,} (peak {int(e['tokens_sent_peak']):,})"),
        ("billed USD (agent and summarizer calls)", usd_text(e.get("cost_usd"))),
        ("compactions", f"{int(e['n_compactions'])}"),
    ]
    s.table(pd.DataFrame(rows, columns=["what", "value"]), "")
    s.note(
        "One episode of one configuration on one world seed: no interval and no verdict. For a verdict against "
        "harness9's "
        "default, sweep the worlds ([tasks] worlds) with this configuration and a progressive entry named "
        "harness9-default, "
        "then h9eval report on the sweep's folder."
    )
    if str(e["agent_id"]).startswith("scripted"):
        s.text("Caveats:")
        s.caveats(["The agent is the scripted stand-in, not a language model."])
    return [s]
