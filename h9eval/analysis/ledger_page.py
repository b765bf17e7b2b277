"""The diff view of one run: what each compaction took out of the view and what it cost, drawn from the
run's stored tables (it runs nothing).

A run with the ledger on stores, beside its ``ledger`` table, its ``diffs`` table (:mod:`h9eval.probes.diffs`):
for each compaction round the messages that left the view, the summary written, the anchors before and
after the merge (where ``N/A`` erased a value the previous summary had), and the items that changed state,
each LOST or STALE one with the first later call that used it again. :func:`load_diffs` reads them for a
run folder (``h9eval run --out``, a replay's or an episode's) or a sweep cell; :func:`ledger_page_html`
renders one page and :func:`write_ledger_page` writes it (``h9eval ledger RUN_DIR``). A folder written
before the diffs table existed shows its ledger's items per round without what left each view.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.paths import refuse_symlink, write_text_atomic
from h9eval.probes.diffs import item_changes
from h9eval.results.io import read_table
from h9eval.results.schema import MANIFEST, MARKER
from h9eval.results.store import Results, cell_dir_name
from h9eval.results.tables import decode_diffs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunDiffs", "ledger_page_html", "load_diffs", "run_diffs", "write_ledger_page"]


@dataclass(frozen=True, kw_only=True)
class RunDiffs:
    """One run's ledger and diffs, and what the page says about the run."""

    run_id: str
    ledger: pd.DataFrame
    diffs: pd.DataFrame
    """Decoded (:func:`~h9eval.results.tables.decode_diffs`): one row per compaction round; from the
    ledger alone (no ``left``, ``summary`` or anchors) for a folder written before the diffs table."""
    about: str
    """The run in one HTML line (escaped)."""
    episode: bool
    stored: bool
    """The diffs came from the stored table (``False``: rebuilt from the ledger alone)."""


def _read(path: Path, table: str) -> pd.DataFrame | None:
    return read_table(path, table) if path.is_file() else None


def _diffs_of(run_id: str, ledger: pd.DataFrame, diffs: pd.DataFrame | None) -> tuple[pd.DataFrame, bool]:
    """The run's decoded diffs: the stored rows (``diffs`` is the stored table, ``None`` when the folder
    predates it), else the item changes of its ledger alone."""
    import pandas as pd

    if diffs is not None:
        return decode_diffs(diffs[diffs["run_id"] == run_id]).reset_index(drop=True), True
    rows = [{"run_id": run_id, **r} for r in item_changes(ledger[ledger["run_id"] == run_id])]
    return pd.DataFrame(
        rows,
        columns=[
            "run_id",
            "round",
            "call_index",
            "tier_name",
            "lost",
            "stale",
            "degraded",
            "recovered",
            "used_later",
            "touched",
        ],
    ), False


def _episode_about(row: Mapping[str, Any]) -> str:
    ok = bool(row["success"]) if row["success"] is not None and str(row["success"]) != "<NA>" else False
    verdict = "succeeded" if ok else "failed: " + html.escape(str(row.get("failure") or row.get("terminated_by") or ""))
    return (
        f"<b>Episode</b> {html.escape(str(row['run_id']))}<br><b>World</b> {html.escape(str(row['world_kind']))} "
        f"seed {html.escape(str(row['seed']))}, agent {html.escape(str(row['agent_id']))} ({verdict})<br>"
        f"<b>Policy</b> {html.escape(str(row['policy_kind']))}, {html.escape(str(row['history_mode']))} mode, "
        f"window {int(row['context_window_tokens']):,} tokens"
    )


def _replay_about(run_id: str, policy: str, mode: str, window: int | None) -> str:
    w = f"{window:,} tokens" if window is not None else "unknown"
    return (
        f"<b>Run</b> {html.escape(run_id)}<br><b>Policy</b> {html.escape(policy)}, {html.escape(mode)} mode, window {w}"
    )


def _window(calls: pd.DataFrame | None, run_id: str) -> int | None:
    if calls is None or not len(calls):
        return None
    mine = calls[calls["run_id"] == run_id]
    return int(mine["context_window_tokens"].iloc[0]) if len(mine) else None


def run_diffs(res: Results, run_id: str) -> RunDiffs:
    """The diffs of one run of a loaded sweep (its stored tables).

    Args:
        res: the sweep's results (:func:`~h9eval.results.store.load_results`).
        run_id: one of its runs.

    Returns:
        The run's :class:`RunDiffs`.
    """
    runs = res.runs[res.runs["run_id"] == run_id]
    if not len(runs):
        some = ", ".join(list(res.runs["run_id"])[:3])
        raise ConfigError(f"{res.path}: no run {run_id!r} (e.g. {some})")
    ledger = res.ledger[res.ledger["run_id"] == run_id]
    # a sweep written before the diffs table has none at all, while its ledger has compaction rounds
    has_rounds = bool((res.ledger["basis"] == "compaction").any()) if len(res.ledger) else False
    diffs, stored = _diffs_of(run_id, ledger, res.diffs if len(res.diffs) or not has_rounds else None)
    ep = res.episodes[res.episodes["run_id"] == run_id] if len(res.episodes) else res.episodes
    if len(ep):
        about = _episode_about(ep.iloc[0].to_dict())
    else:
        row = runs.iloc[0]
        about = _replay_about(run_id, str(row["policy_kind"]), str(row["history_mode"]), _window(res.calls, run_id))
    return RunDiffs(run_id=run_id, ledger=ledger, diffs=diffs, about=about, episode=bool(len(ep)), stored=stored)


def _manifest(folder: Path) -> dict[str, Any] | None:
    p = folder / MANIFEST
    if not p.is_file():
        return None
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FormatError(f"cannot read the manifest ({e})", path=str(p)) from None
    if not isinstance(m, dict):
        raise FormatError("not an h9eval manifest (expected a JSON object)", path=str(p))
    return m


def load_diffs(path: str | os.PathLike[str], run_id: str | None = None) -> RunDiffs:
    """The diffs of a run from its folder: a run folder (``h9eval run --out``: a replay's or an
    episode's), or a sweep folder with ``run_id`` naming one of its cells (read from that cell's own
    tables, not the whole sweep's).

    Args:
        path: the folder.
        run_id: the sweep cell (a sweep folder only).

    Returns:
        The run's :class:`RunDiffs`.

    Raises:
        FormatError: not a run or sweep folder, or its tables are unreadable.
        ConfigError: a sweep folder without a ``run_id`` of its cells.
    """
    folder = Path(path)
    m = _manifest(folder)
    if m is not None and m.get("kind") == "sweep":
        cells = {c.get("run_id"): c for c in m.get("cells", []) if isinstance(c, Mapping)}
        if run_id is None or run_id not in cells:
            some = ", ".join(str(k) for k in list(cells)[:3])
            raise ConfigError(f"{folder}: a sweep folder needs --run-id naming one of its cells (e.g. {some})")
        folder = folder / "cells" / cell_dir_name(run_id)
        if not (folder / MARKER).is_file():
            raise FormatError(f"cell {run_id!r} has not finished (no {MARKER})", path=str(folder))
        row = read_table(folder / MARKER, "runs").iloc[0]
        if str(row["status"]) != "ok":
            raise ConfigError(f"cell {run_id!r} failed ({row['error']}): it has no ledger")
    elif m is None and not (folder / "episode.json").is_file():
        raise FormatError("no manifest.json: not an h9eval run or sweep folder", path=str(folder))
    ledger = _read(folder / "ledger.parquet", "ledger")
    if ledger is None:
        raise FormatError("no ledger.parquet: the run was made without its ledger (ledger=False)", path=str(folder))
    rid = str(ledger["run_id"].iloc[0]) if len(ledger) else (run_id or str((m or {}).get("run_id", "")))
    diffs, stored = _diffs_of(rid, ledger, _read(folder / "diffs.parquet", "diffs"))
    episodes = _read(folder / "episodes.parquet", "episodes")
    if episodes is not None and len(episodes):
        ep = {str(k): v for k, v in episodes.iloc[0].to_dict().items()}
        return RunDiffs(
            run_id=str(ep["run_id"]),
            ledger=ledger,
            diffs=diffs,
            about=_episode_about(ep),
            episode=True,
            stored=stored,
        )
    if m is not None and m.get("kind") == "sweep":
        about = _replay_about(
            rid,
            str(row["policy_kind"]),
            str(row["history_mode"]),
            _window(_read(folder / "calls.parquet", "calls"), rid),
        )
    else:
        mm = m or {}
        replay_cfg = mm.get("replay") or {}
        policy = (mm.get("policy") or {}).get("kind", "?")
        about = _replay_about(
            str(mm.get("run_id", rid)),
            str(policy),
            str(replay_cfg.get("history_mode", "?")),
            _window(_read(folder / "calls.parquet", "calls"), rid),
        )
    return RunDiffs(run_id=rid, ledger=ledger, diffs=diffs, about=about, episode=False, stored=stored)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}
h1{font-size:1.4em} details{border:1px solid #ddd;border-radius:6px;margin:.6em 0;padding:.4em .8em}
summary{cursor:pointer;font-weight:600} .lost{color:#b00020} .stale{color:#a15c00} .ok{color:#1b6e20}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.5em;border-radius:4px;font-size:.85em;max-height:24em;overflow:auto}
table{border-collapse:collapse;font-size:.9em}
td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
ul{margin:.3em 0 .3em 1.2em;padding:0} li{margin:.1em 0}"""


def _ul(items: Sequence[str], cls: str = "") -> str:
    if not items:
        return "<p><i>none</i></p>"
    return "<ul>" + "".join(f'<li class="{html.escape(cls)}">{html.escape(x)}</li>' for x in items) + "</ul>"


def _then(item: str, r: Any, later: str) -> str:
    """An item that changed state, with the first later call that used or touched it (and what it did)."""
    if item not in r.used_later:
        return item
    what = r.touched.get(item)
    return f"{item} ({later} {r.used_later[item]}" + (f": {what})" if what else ")")


def ledger_page_html(run: RunDiffs) -> str:
    """The diff view of one run as a self-contained HTML page (every value escaped).

    Args:
        run: the run's :class:`RunDiffs`.

    Returns:
        The page.
    """
    diffs, ledger = run.diffs, run.ledger
    later = "touched at call" if run.episode else "used again at call"
    fill = ledger[(ledger["basis"] == "fill") & ~ledger["pinned"].astype(bool)]
    by_type = (
        fill.pivot_table(
            index="item_type",
            columns="round",
            values="state",
            aggfunc=lambda s: f"{(s == 'PRESERVED').mean():.0%}",
            observed=True,
        )
        if len(fill)
        else None
    )
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Ledger {html.escape(run.run_id)}</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>What each compaction kept and lost</h1><p>{run.about}; {len(diffs)} compaction rounds shown (the "
        f"first {len(diffs)} view rewrites).</p>",
        "<p>An item is PRESERVED only when its exact value is in the view; DEGRADED when part of it is (a "
        "file name without its path, digits without their prefix or unit); STALE when an older value "
        "shows and the current one does not; LOST otherwise. Items pinned in the system or first task "
        "message are left out. The summarizer is the offline extractive stand-in unless the run used a "
        "model.</p>",
    ]
    if not run.stored:
        parts.append(
            "<p><i>This run was recorded before runs stored what left each view: the rounds below list the "
            "items that changed state; run it again for the messages, summaries and anchors.</i></p>"
        )
    if by_type is not None:
        parts.append(
            "<h2>Items kept exactly after each window fill</h2><p>Round k: the first call after the "
            "uncompacted history outgrew k windows; blank: no item of that type was live.</p>"
            + by_type.astype(object).where(by_type.notna(), "").to_html(escape=True)
        )
    parts.append("<h2>Compaction rounds</h2>")
    rounds: list[Any] = list(diffs.itertuples(index=False))  # the decoded JSON columns: lists and dicts
    for r in rounds:
        n_left = int(getattr(r, "n_left", 0) or 0)
        left = list(getattr(r, "left", []) or [])
        head = (
            f"Round {int(r.round)}: call {int(r.call_index)}, tier {html.escape(str(r.tier_name))}; {n_left} messages "
            f"left the view; lost {len(r.lost)}, stale {len(r.stale)}, degraded {len(r.degraded)}, recovered "
            f"{len(r.recovered)}"
        )
        body = []
        if run.stored:
            body += [
                f"<h4>Left the view ({n_left})</h4>",
                _ul(left + ([f"… {n_left - len(left)} more"] if n_left > len(left) else [])),
            ]
        body.append("<h4>Items that changed state</h4>")
        for state, items in (("lost", r.lost), ("stale", r.stale)):
            body.append(f"<p class='{state}'>{state.upper()}</p>" + _ul([_then(x, r, later) for x in items], state))
        body.append("<p>DEGRADED</p>" + _ul(r.degraded) + "<p class='ok'>RECOVERED</p>" + _ul(r.recovered, "ok"))
        after = getattr(r, "anchors_after", None) or {}
        if after:
            before = getattr(r, "anchors_before", None) or {}
            erased = set(getattr(r, "na_erased", None) or ())
            rows = "".join(
                f"<tr><td>{html.escape(t)}</td><td>{html.escape(before.get(t, ''))}</td>"
                f"<td>{html.escape(after.get(t, ''))}</td><td class='lost'>"
                f"{'N/A erased a known value' if t in erased else ''}</td></tr>"
                for t in after
            )
            body.append(
                "<h4>Anchors before and after the merge</h4><table><tr><th>anchor</th><th>before</th>"
                f"<th>after</th><th></th></tr>{rows}</table>"
            )
        summary = getattr(r, "summary", None)
        if isinstance(summary, str) and summary:
            body.append(f"<h4>Summary written</h4><pre>{html.escape(summary)}</pre>")
        parts.append(f"<details><summary>{head}</summary>{''.join(body)}</details>")
    parts.append("</body></html>")
    return "".join(parts)


def write_ledger_page(
    path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, run_id: str | None = None
) -> Path:
    """Write the diff view of one run (:func:`load_diffs`) as one HTML page.

    Args:
        path: a run folder, or a sweep folder with ``run_id``.
        out: the page (default ``<run folder>/ledger.html``, or ``ledger-<cell>.html`` in a sweep folder).
        run_id: the sweep cell.

    Returns:
        The page's path.
    """
    page = ledger_page_html(load_diffs(path, run_id))
    folder = Path(path)
    target = (
        Path(out)
        if out is not None
        else folder / ("ledger.html" if run_id is None else f"ledger-{cell_dir_name(run_id)}.html")
    )
    return write_page(target, page)


def write_page(target: Path, page: str) -> Path:
    """Write a rendered page (refusing a planted link at its path)."""
    refuse_symlink(target, what="ledger page")
    write_text_atomic(target, page)
    return target
