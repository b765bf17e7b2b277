"""A report on harness9's own ``compaction_records/*.jsonl`` (read with
:func:`h9eval.harness9.records_dir.read_records_dir`): sessions, token curve from tokens
before/after, tier transitions between consecutive records, anchors filled per record."""

from __future__ import annotations

import os
from pathlib import Path

from h9eval.analysis import metrics
from h9eval.analysis import plots
from h9eval.analysis.report.model import Section
from h9eval.analysis.report.render import ReportPaths, render
from h9eval.core.errors import FormatError
from h9eval.harness9.records_dir import read_records_dir

__all__ = ["write_report_from_records"]


def write_report_from_records(records_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> ReportPaths:
    """Report on harness9's own ``compaction_records/*.jsonl`` (read with
    :func:`h9eval.harness9.records_dir.read_records_dir`): sessions, token curve from tokens
    before/after, tier transitions between consecutive records, anchors filled per record."""
    import pandas as pd

    rp = Path(records_dir)
    if rp.is_dir() and not any(rp.glob("*.jsonl")) and not any(rp.glob("*/*.jsonl")):
        raise FormatError("no compaction record files (<session>.jsonl) found", path=str(rp))
    comps = read_records_dir(records_dir)
    secs: list[Section] = []
    s = Section("Records")
    s.text(
        f"{len(comps):,} compaction record(s) in {comps['session_id'].nunique() if len(comps) else 0} session(s) from "
        f"{records_dir}."
    )
    if len(comps):
        per = (
            comps.groupby("session_id")
            .agg(
                records=("record_index", "size"),
                first_tokens_before=("tokens_before", "first"),
                max_tokens_before=("tokens_before", "max"),
                mean_compression_ratio=("compression_ratio", "mean"),
                errors=("error", lambda e: int((e.astype(str) != "").sum())),
            )
            .reset_index()
        )
        s.table(per, "Per session.")
        s.table(comps["tier_name"].value_counts().rename_axis("tier").reset_index(name="records"), "Records by tier.")
    secs.append(s)
    s = Section("Token curve")
    s.figure(
        "records_token_curve",
        plots.records_token_curve(comps),
        "Tokens before (dashed) and after (solid) each compaction, per session.",
    )
    secs.append(s)
    s = Section("Tier transitions")
    if len(comps):
        pseudo = pd.DataFrame(
            {"run_id": comps["session_id"], "call_index": comps["record_index"], "tier_name": comps["tier_name"]}
        )
        s.table(
            metrics.tier_transitions(pseudo).reset_index(),
            "From one record's tier (rows) to the next record's (columns), per session.",
        )
        s.figure(
            "tier_transitions", plots.tier_transition_matrix(pseudo), "Tier transitions between consecutive records."
        )
    else:
        s.note("No records.")
    secs.append(s)
    s = Section("Anchor retention")
    if len(comps) and comps["anchors_json"].notna().any():
        s.figure(
            "anchor_retention_records",
            plots.anchor_retention_heatmap(comps),
            "Share of sessions whose record at each index has the anchor section filled (not N/A).",
        )
        s.table(metrics.anchor_retention(comps).reset_index(), "Anchor type × record index.")
    else:
        s.note("No record carries anchors (only warn-tier offloads or emergency truncations).")
    secs.append(s)
    return render(f"harness9 compaction records: {Path(records_dir).name}", secs, Path(out_dir))
