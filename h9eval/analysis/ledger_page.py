"""The diff view of one run: what each compaction took out of the view and what it cost.

:func:`replay_for_ledger` replays a run again (deterministically: a run folder from its
manifest, a sweep cell from its manifest entry) keeping its views; :func:`compaction_diffs` is
the DataFrame a notebook reads: for each compaction round (the run's own view rewrites, see
:func:`h9eval.probes.ledger.events_from_replay`) the messages that left the view, the summary
written, the anchors before and after the merge (where ``N/A`` erased a value the previous
summary had), and the items that changed state, each LOST or STALE one with the first later
call that used it again. :func:`write_ledger_page` renders it as one HTML page
(``h9eval ledger RUN_DIR``).
"""

from __future__ import annotations

import html
import json
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.compaction.anchors import (
    ANCHOR_TYPES,
    COMPACTION_MARKER,
    EXTRA_ANCHOR_TYPES,
    is_no_information,
    parse_anchors_and_summary,
)
from h9eval.closedloop.agents import make_agent
from h9eval.closedloop.episode import Episode, StressSettings, run_episode
from h9eval.closedloop.ledger import episode_ledger, first_touches
from h9eval.closedloop.worlds import make_world
from h9eval.compaction.policies import make_policy
from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.messages import Message
from h9eval.core.paths import refuse_symlink, write_text_atomic
from h9eval.results.io import read_table
from h9eval.results.store import cell_dir_name
from h9eval.results.tables import ledger_table
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.summarizers.registry import build_summarizer
from h9eval.sweeps.cells import Cell
from h9eval.sweeps.worker import replay_cell, run_episode_cell
from h9eval.tasks import load_tasks_from_spec

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["compaction_diffs", "episode_diffs", "episode_for_ledger", "replay_for_ledger", "write_ledger_page"]

_PREVIEW_CHARS = 160
_ALL_ANCHORS = (*ANCHOR_TYPES, *EXTRA_ANCHOR_TYPES)


def _task_spec(source: dict[str, Any]) -> str:
    kind = source.get("kind")
    if kind == "synthetic":
        return f"synthetic:{source['preset']}:{source['seed']}"
    if kind == "dataset":
        return f"dataset:{source['path']}"
    if kind == "harness9_db":
        return f"{source['path']}#{source['session']}"
    return str(source["path"])


def replay_for_ledger(path: str | os.PathLike[str], run_id: str | None = None) -> ReplayResult:
    """Replay a run again with its views kept: ``path`` is a run folder (``h9eval run --out``) or
    a sweep folder with ``run_id`` naming one of its replay cells."""
    folder = Path(path)
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        raise FormatError("no manifest.json: not an h9eval run or sweep folder", path=str(folder))
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FormatError(f"cannot read the manifest ({e})", path=str(mpath)) from None
    if manifest.get("kind") == "sweep":
        cells = {c.get("run_id"): c for c in manifest.get("cells", [])}
        if run_id is None or run_id not in cells:
            some = ", ".join(list(cells)[:3])
            raise ConfigError(f"{folder}: a sweep folder needs --run-id naming one of its cells (e.g. {some})")
        entry = cells[run_id]
        if entry.get("cell_kind", "replay") != "replay":
            raise ConfigError(f"{run_id}: a closed-loop episode is not replayed (episode_for_ledger runs it again)")
        cell = Cell.from_dict(entry)
        with tempfile.TemporaryDirectory(prefix="h9eval-ledger-") as work:
            return replay_cell(cell, offload_root=work, keep_views=True)
    if manifest.get("kind") != "run":
        raise FormatError(f"manifest kind {manifest.get('kind')!r}; expected 'run' or 'sweep'", path=str(mpath))
    tasks = [
        t
        for t in load_tasks_from_spec(_task_spec(manifest["task"]["source"]))
        if t.task_id == manifest["task"]["task_id"]
    ]
    if not tasks:
        raise FormatError(f"task {manifest['task']['task_id']!r} not found at its source again", path=str(mpath))
    policy = make_policy(manifest["policy"]["kind"], **manifest["policy"]["params"])
    # billing never changes a view: the replay bills with the defaults (the manifest holds the
    # run's billing as plain data, which the page does not need)
    replay_d = {k: v for k, v in manifest["replay"].items() if k != "billing"}
    cfg = ReplayConfig(**{**replay_d, "keep_views": True})
    summarizer = _summarizer(manifest.get("summarizer"), mpath)
    with tempfile.TemporaryDirectory(prefix="h9eval-ledger-") as work:
        return replay(
            tasks[0],
            policy,
            summarizer=summarizer,
            config=cfg,
            run_id=manifest["run_id"],
            offload_root=work,
            ledger=True,
        )


def _summarizer(summarizer_id: str | None, where: Path) -> Any:
    """The run's summarizer again from its id (``offline/v2{params}``); a model summarizer is not
    called again (its replies would cost money and could differ): its page needs an offline one."""
    if summarizer_id is None:
        return None
    name, _, rest = summarizer_id.partition("/")
    if not name.startswith("offline"):
        raise ConfigError(
            f"{where}: the ledger page replays the run, and only offline summarizers are replayed "
            f"(this run used {name!r})"
        )
    params = json.loads(rest[rest.index("{") :]) if "{" in rest else {}
    return build_summarizer(name, **params)


def _key(m: Message) -> tuple[str, str, str]:
    return (m.role, m.tool_call_id, m.content)


def _preview(m: Message) -> str:
    text = " ".join(m.content.split())
    calls = "; ".join(f"{tc.name}({tc.arguments[:60]})" for tc in m.tool_calls)
    body = text[:_PREVIEW_CHARS] + ("…" if len(text) > _PREVIEW_CHARS else "")
    return f"[{m.role}] {body}" + (f" {{calls: {calls}}}" if calls else "")


def _summary_of(view: Sequence[Message]) -> str | None:
    for m in view:
        if COMPACTION_MARKER in m.content:
            return m.content
    return None


def _anchors(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    anchors, _ = parse_anchors_and_summary(text, _ALL_ANCHORS)
    return {a.type: a.content for a in anchors}


def compaction_diffs(result: ReplayResult) -> pd.DataFrame:
    """One row per compaction round of ``result`` (which must hold its views and ledger):
    ``round``, ``call_index``, ``tier_name``, ``left`` (previews of the messages that left the
    view), ``n_left``, ``summary`` (the summary in this view when it is new, else ``None``),
    ``anchors_before``/``anchors_after`` (type -> text), ``na_erased`` (anchor types that had a
    value and now read N/A), ``lost``/``stale``/``degraded``/``recovered`` (item values whose state
    changed to that since the previous round), ``used_later`` (value -> first later call) and
    ``touched`` (value -> what that call did; closed-loop episodes only, see :func:`episode_diffs`)."""
    if result.views is None or result.ledger is None:
        raise ConfigError("compaction_diffs needs a replay with keep_views and the ledger (replay_for_ledger)")
    return _diffs(result.views, result.ledger, {})


def episode_diffs(episode: Episode, ledger: pd.DataFrame) -> pd.DataFrame:
    """:func:`compaction_diffs` of a closed-loop episode (its views and its ledger rows,
    :func:`h9eval.closedloop.ledger.episode_ledger`); ``touched`` says what the first later action
    that touched each lost item did, as the world saw it (a rule broken, a re-read, a redone step)."""
    touches = first_touches(episode)
    described = {(item, t.call_index): f"{t.kind}: {t.detail}" for item, ts in touches.items() for t in ts}
    return _diffs(episode.views, ledger, described)


def _diffs(
    views: Sequence[Sequence[Message]], ledger: pd.DataFrame, described: dict[tuple[str, int], str]
) -> pd.DataFrame:
    import pandas as pd

    led = ledger[ledger["basis"] == "compaction"]
    rows = []
    previous_state: dict[str, str] = {}
    for rnd, g in led.groupby("round", sort=True):
        call = int(g["call_index"].iloc[0])
        view = views[call]
        prev = views[call - 1] if call > 0 else ()
        now = Counter(_key(m) for m in view)
        left = []
        for m in prev:
            k = _key(m)
            if now[k] > 0:
                now[k] -= 1
            else:
                left.append(_preview(m))
        before, after = _summary_of(prev), _summary_of(view)
        a_before, a_after = _anchors(before), _anchors(after)
        erased = [
            t
            for t, v in a_after.items()
            if is_no_information(v) and not is_no_information(a_before.get(t, "")) and t in a_before
        ]
        changed: dict[str, list[str]] = {"lost": [], "stale": [], "degraded": [], "recovered": []}
        used: dict[str, int] = {}
        touched: dict[str, str] = {}
        for r in g.itertuples(index=False):
            old = previous_state.get(r.item_id, "PRESERVED")
            if r.state != old:
                key = "recovered" if r.state == "PRESERVED" else r.state.lower()
                changed[key].append(f"{r.item_type}: {r.value}")
                if r.state in ("LOST", "STALE") and not pd.isna(r.next_use_call):
                    used[f"{r.item_type}: {r.value}"] = int(r.next_use_call)
                    what = described.get((r.item_id, int(r.next_use_call)))
                    if what is not None:
                        touched[f"{r.item_type}: {r.value}"] = what
            previous_state[r.item_id] = r.state
        rows.append(
            {
                "round": int(rnd),
                "call_index": call,
                "tier_name": str(g["tier_name"].iloc[0]),
                "n_left": len(left),
                "left": left,
                "summary": after if after != before else None,
                "anchors_before": a_before,
                "anchors_after": a_after,
                "na_erased": erased,
                **changed,
                "used_later": used,
                "touched": touched,
            }
        )
    return pd.DataFrame(rows)


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
    return "<ul>" + "".join(f'<li class="{cls}">{html.escape(x)}</li>' for x in items) + "</ul>"


def _then(item: str, r: Any, later: str) -> str:
    """An item that changed state, with the first later call that used or touched it (and what it did)."""
    if item not in r.used_later:
        return item
    what = r.touched.get(item)
    return f"{item} ({later} {r.used_later[item]}" + (f": {what})" if what else ")")


def _is_episode(folder: Path, run_id: str | None) -> bool:
    """A closed-loop episode: a sweep's episode cell, or a world run folder (``run --world --out``)."""
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        return (folder / "episode.json").is_file()
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # replay_for_ledger names the problem
    cells = {c.get("run_id"): c for c in manifest.get("cells", [])} if manifest.get("kind") == "sweep" else {}
    return cells.get(run_id, {}).get("cell_kind") == "episode"


def episode_for_ledger(path: str | os.PathLike[str], run_id: str | None = None) -> tuple[Episode, str, str]:
    """A closed-loop episode run again, with its views: ``(episode, run_id, task_id)``. ``path`` is a
    sweep folder with ``run_id`` naming one of its episode cells, or a world run folder (``h9eval run
    --world ... --out``, from its ``episode.json``). Only an agent that acts the same again is rerun
    (the scripted agent; a live agent from its cassette in a sweep)."""
    folder = Path(path)
    if (folder / "manifest.json").is_file():
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        entry = {c.get("run_id"): c for c in manifest.get("cells", [])}[run_id]
        cell = Cell.from_dict(entry)
        if not cell.agent.startswith("scripted") and "cassette=" not in cell.agent:
            raise ConfigError(
                f"{run_id}: the ledger page runs the episode again, which a live agent does only from "
                f"a cassette (agent {cell.agent!r})"
            )
        return run_episode_cell(cell), str(cell.run_id), str(cell.task_id)
    jpath = folder / "episode.json"
    try:
        d = json.loads(jpath.read_text(encoding="utf-8"))
        summary, cfg = d["summary"], dict(d["config"])
        row = read_table(folder / "episodes.parquet", "episodes").iloc[0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise FormatError(f"cannot read the episode ({type(e).__name__}: {e})", path=str(jpath)) from None
    if not str(summary["agent_id"]).startswith("scripted"):
        raise ConfigError(
            f"{folder}: the ledger page runs the episode again, which only the scripted agent does "
            f"offline (this one used {summary['agent_id']!r})"
        )
    stress = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.pop("stress", {}).items()}
    ep = run_episode(
        make_world(summary["world_kind"], **json.loads(summary["world_params"])),
        make_agent(summary["agent_id"]),
        make_policy(summary["policy_kind"], **d["policy_params"]),
        seed=int(summary["seed"]),
        summarizer=_summarizer(summary["summarizer_id"] or None, jpath),
        stress=StressSettings(**stress),
        **cfg,
    )
    return ep, str(row["run_id"]), str(row["task_id"])


def write_ledger_page(
    path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, run_id: str | None = None
) -> Path:
    """Replay the run (see :func:`replay_for_ledger`; a closed-loop episode runs again, see
    :func:`episode_for_ledger`) and write its diff view as one HTML page: ``out`` (default
    ``<run folder>/ledger.html``, or ``ledger-<cell>.html`` in a sweep folder)."""
    if _is_episode(Path(path), run_id):
        ep, rid, task_id = episode_for_ledger(path, run_id)
        ledger = ledger_table(episode_ledger(ep, run_id=rid, task_id=task_id))
        diffs = episode_diffs(ep, ledger)
        verdict = "succeeded" if ep.success else "failed: " + html.escape(ep.outcome.failure or ep.terminated_by)
        about = (
            f"<b>Episode</b> {html.escape(rid)}<br><b>World</b> {html.escape(ep.world_kind)} seed {ep.seed}, "
            f"agent {html.escape(ep.agent_id)} ({verdict})<br>"
            f"<b>Policy</b> {html.escape(ep.policy_kind)}, {html.escape(ep.config.history_mode)} mode, window "
            f"{ep.context_window_tokens:,} tokens"
        )
        later = "touched at call"
    else:
        res = replay_for_ledger(path, run_id)
        diffs = compaction_diffs(res)
        assert res.ledger is not None
        ledger, rid = res.ledger, res.run_id
        about = (
            f"<b>Run</b> {html.escape(res.run_id)}<br><b>Policy</b> {html.escape(res.policy_kind)}, "
            f"{html.escape(res.config.history_mode)} mode, window {res.context_window_tokens:,} tokens"
        )
        later = "used again at call"
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
        f"<!doctype html><html><head><meta charset='utf-8'><title>Ledger {html.escape(rid)}</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>What each compaction kept and lost</h1><p>{about}; {len(diffs)} compaction rounds shown (the "
        f"first {len(diffs)} view rewrites).</p>",
        "<p>An item is PRESERVED only when its exact value is in the view; DEGRADED when part of it is (a "
        "file name without its path, digits without their prefix or unit); STALE when an older value "
        "shows and the current one does not; LOST otherwise. Items pinned in the system or first task "
        "message are left out. The summarizer is the offline extractive stand-in unless the run used a "
        "model.</p>",
    ]
    if by_type is not None:
        parts.append(
            "<h2>Items kept exactly after each window fill</h2><p>Round k: the first call after the "
            "uncompacted history outgrew k windows; blank: no item of that type was live.</p>"
            + by_type.astype(object).where(by_type.notna(), "").to_html(escape=True)
        )
    parts.append("<h2>Compaction rounds</h2>")
    for r in diffs.itertuples(index=False):
        head = (
            f"Round {r.round}: call {r.call_index}, tier {html.escape(r.tier_name)}; {r.n_left} messages left "
            f"the view; lost {len(r.lost)}, stale {len(r.stale)}, degraded {len(r.degraded)}, recovered "
            f"{len(r.recovered)}"
        )
        body = [
            f"<h4>Left the view ({r.n_left})</h4>",
            _ul(r.left[:40] + ([f"… {len(r.left) - 40} more"] if len(r.left) > 40 else [])),
        ]
        body.append("<h4>Items that changed state</h4>")
        for state, items in (("lost", r.lost), ("stale", r.stale)):
            body.append(f"<p class='{state}'>{state.upper()}</p>" + _ul([_then(x, r, later) for x in items], state))
        body.append("<p>DEGRADED</p>" + _ul(r.degraded) + "<p class='ok'>RECOVERED</p>" + _ul(r.recovered, "ok"))
        if r.anchors_after:
            rows = "".join(
                f"<tr><td>{html.escape(t)}</td><td>{html.escape(r.anchors_before.get(t, ''))}</td>"
                f"<td>{html.escape(r.anchors_after.get(t, ''))}</td><td class='lost'>"
                f"{'N/A erased a known value' if t in r.na_erased else ''}</td></tr>"
                for t in r.anchors_after
            )
            body.append(
                "<h4>Anchors before and after the merge</h4><table><tr><th>anchor</th><th>before</th>"
                f"<th>after</th><th></th></tr>{rows}</table>"
            )
        if isinstance(r.summary, str) and r.summary:
            body.append(f"<h4>Summary written</h4><pre>{html.escape(r.summary)}</pre>")
        parts.append(f"<details><summary>{head}</summary>{''.join(body)}</details>")
    parts.append("</body></html>")
    folder = Path(path)
    target = (
        Path(out)
        if out is not None
        else folder / ("ledger.html" if run_id is None else f"ledger-{cell_dir_name(run_id)}.html")
    )
    refuse_symlink(target, what="ledger page")
    write_text_atomic(target, "".join(parts))
    return target
