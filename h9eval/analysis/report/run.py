"""One run's folder (``h9eval run --out DIR``) as a report: its tables read into a
:class:`~h9eval.results.store.Results` of one run, and an answer box that says what one run can
say (its numbers, no interval and no verdict) and how to get a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.model import Section
from h9eval.core.errors import FormatError
from h9eval.results.io import check_manifest_version, read_table
from h9eval.results.schema import CELL_PARTS, MANIFEST, RUN_SUMMARY_KEYS
from h9eval.results.store import Results, runs_frame

__all__ = ["is_run_folder", "load_run_folder", "run_answer_section"]


def _manifest(folder: Path) -> dict[str, Any] | None:
    p = folder / MANIFEST
    if not p.is_file():
        return None
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # load_results names the problem
    return m if isinstance(m, dict) else None


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
    row = {
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
    name = f"{task.get('task_id', '?')}, {pol.get('kind', '?')}"
    return Results(
        path=folder,
        manifest={**m, "name": name},
        runs=runs_frame([row]),
        calls=tables["calls"],
        compactions=tables["compactions"],
        probes=tables["probes"] if len(tables["probes"]) else pd.DataFrame(columns=tables["probes"].columns),
    )


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
        ("tokens saved", f"{float(r['tokens_saved']):.3f}" if "tokens_saved" in r and r["tokens_saved"] == r["tokens_saved"] else "–"),
        ("retention", f"{float(r['retention']):.3f}" if "retention" in r and r["retention"] == r["retention"] else "– (no probes)"),
        ("compactions by tier", ", ".join(f"{k} {v}" for k, v in (summ.get("compactions_by_tier") or {}).items()) or "none"),
        ("peak tokens sent", f"{int(summ.get('peak_tokens_sent') or 0):,}"),
        ("summarizer calls", str(summ.get("summarizer_calls", 0))),
        ("overflows", str(summ.get("overflows", 0))),
    ]
    s.table(pd.DataFrame(rows, columns=["what", "value"]), "")
    s.note(
        "One run of one configuration on one task: no interval and no verdict. For a verdict against harness9's default, "
        "sweep this configuration and a progressive entry named harness9-default over several tasks (h9eval sweep), then "
        "h9eval report on the sweep's folder."
    )
    return [s]
