"""Threshold tuner: search the progressive compactor's tier fractions, tail and offload
thresholds for a context window, and recommend the config that retains the most.

``tune(["synthetic:small:0"], window=200_000)`` replays every candidate config on every task
(through :func:`h9eval.sweeps.sweep.sweep` when the tasks are specs, else :func:`h9eval.runs.replay.replay`
directly) with the offline summarizer and the ``recall`` probes, then picks the config with the
highest mean retention (mean recall-probe score) among those that never overflow the window,
never reach the emergency tier and stay within the summarizer-call and cost bounds. The search
is a coarse grid (every valid combination of ``grid``) followed by ``refine_rounds`` rounds of
local refinement: each numeric parameter is moved half-way towards its grid neighbours around
the current best, one at a time.

The window comes from ``window`` or from ``model`` via :data:`MODELS` (override or extend with
:func:`load_models`). The result carries the recommended config as TOML text (readable by
``policy_from_dict(tomllib.loads(text)["policy"])``), the evidence table, and a figure.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.core.paths import atomic_write, prepare_out_dir, write_text_atomic
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.compaction.policies import make_policy
from h9eval.sweeps.sweep import sweep
from h9eval.analysis import metrics as M
from h9eval.probes.runner import make_probe_fn
from h9eval.summarizers.registry import make_summarizer
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.analysis.plots import tune_evidence
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.tasks import load_tasks_from_spec

__all__ = ["MODELS", "DEFAULT_GRID", "TuneResult", "tune", "load_models", "model_info", "to_toml"]

MODELS: dict[str, dict[str, Any]] = {
    # context windows (tokens) and list prices (USD per million input/output tokens) as published
    # by the vendors when this table was written; prices change, so override them with
    # load_models() for cost bounds that matter. None = unknown.
    "claude-sonnet-4-6": {"context_window_tokens": 200_000, "input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0},
    "claude-sonnet-4-5": {"context_window_tokens": 200_000, "input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0},
    "claude-opus-4-1": {"context_window_tokens": 200_000, "input_usd_per_mtok": 15.0, "output_usd_per_mtok": 75.0},
    "claude-haiku-4-5": {"context_window_tokens": 200_000, "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 5.0},
    "gpt-4o": {"context_window_tokens": 128_000, "input_usd_per_mtok": 2.5, "output_usd_per_mtok": 10.0},
    "gpt-4o-mini": {"context_window_tokens": 128_000, "input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.6},
    "gpt-4.1": {"context_window_tokens": 1_047_576, "input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0},
    "gemini-2.5-pro": {"context_window_tokens": 1_048_576, "input_usd_per_mtok": 1.25, "output_usd_per_mtok": 10.0},
    "kimi-k3": {"context_window_tokens": 1_048_576, "input_usd_per_mtok": None, "output_usd_per_mtok": None},
}
"""Built-in model registry: ``context_window_tokens`` and optional prices per million tokens."""

DEFAULT_GRID: dict[str, list[Any]] = {
    "warn_frac": [0.5, 0.6, 0.7],
    "soft_frac": [0.6, 0.7, 0.8],
    "full_frac": [0.7, 0.8, 0.85],
    "emergency_frac": [0.9, 0.95],
    "min_tail_messages": [4, 6, 10],
    "offload_threshold_bytes": [2000, 4000],
}
"""The coarse grid when none is given (invalid orderings such as ``warn >= soft`` are skipped)."""

_INT_PARAMS = ("min_tail_messages", "offload_threshold_bytes", "offload_hook_threshold_bytes")


# -- models ------------------------------------------------------------------------------------
def load_models(path: str | os.PathLike[str] | None = None, *, base: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """:data:`MODELS` updated from a user TOML or JSON file (``.json`` → JSON, else TOML).

    The file maps model names to tables (``[models."my-model"]`` or top-level
    ``["my-model"]``) with ``context_window_tokens`` and optional ``input_usd_per_mtok`` /
    ``output_usd_per_mtok``; a bare integer is a window. Entries replace or extend the built-ins.
    """
    out = {k: dict(v) for k, v in (base if base is not None else MODELS).items()}
    if path is None:
        return out
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{p}: cannot read models file ({e.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: models file is not UTF-8 text; expected TOML or JSON") from None
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except (ValueError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'TOML'} ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("models"), dict):
        data = data["models"]
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a table of models")
    for name, v in data.items():
        entry = {"context_window_tokens": v} if isinstance(v, int) else dict(v) if isinstance(v, dict) else None
        if entry is None or not isinstance(entry.get("context_window_tokens"), int) or entry["context_window_tokens"] <= 0:
            raise ConfigError(f"{p}: models.{name}.context_window_tokens must be a positive integer, got {v!r}")
        out[str(name)] = {**out.get(str(name), {}), **entry}
    return out


def model_info(name: str, models: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A model's registry entry; unknown names get a did-you-mean :class:`ConfigError`."""
    reg = models if models is not None else MODELS
    if name not in reg:
        raise ConfigError(did_you_mean(name, list(reg), what="model"))
    return dict(reg[name])


# -- candidates --------------------------------------------------------------------------------
def _valid(params: Mapping[str, Any]) -> bool:
    try:
        make_policy("progressive", **params)
    except ConfigError:
        return False
    return True


def _grid_points(grid: Mapping[str, Sequence[Any]], base: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = sorted(grid)
    pts = []
    for combo in itertools.product(*(list(grid[k]) for k in keys)):
        p = {**base, **dict(zip(keys, combo))}
        if _valid(p):
            pts.append(p)
    return pts


def _refine(best: Mapping[str, Any], grid: Mapping[str, Sequence[Any]], round_: int) -> list[dict[str, Any]]:
    """Neighbours of ``best``: each numeric grid parameter moved half-way (a quarter in round 2,
    ...) towards the next lower and higher grid value, the others kept."""
    out = []
    shrink = 2 ** (round_ + 1)
    for k, values in sorted(grid.items()):
        vals = sorted(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
        if len(vals) < 2 or k not in best:
            continue
        cur = best[k]
        lower = [v for v in vals if v < cur]
        higher = [v for v in vals if v > cur]
        step = min(b - a for a, b in zip(vals, vals[1:]))
        for nb in (lower[-1] if lower else cur - step, higher[0] if higher else cur + step):
            v = cur + (nb - cur) / shrink
            v = int(round(v)) if k in _INT_PARAMS else round(float(v), 4)
            if v == cur:
                continue
            p = {**best, k: v}
            if _valid(p):
                out.append(p)
    return out


def _key(p: Mapping[str, Any]) -> str:
    return json.dumps(dict(p), sort_keys=True, default=str)


# -- evaluation --------------------------------------------------------------------------------
def _evaluate_sweep(specs: Sequence[str], configs: list[dict[str, Any]], out: Path, workers: int, history_mode: str) -> Any:
    spec = {
        "name": out.name,
        "tasks": {"specs": list(specs)},
        "policies": [{"kind": "progressive", "name": f"cfg{i:03d}", "params": dict(c)} for i, c in enumerate(configs)],
        "probes": {"scorers": ["recall"]},
        "summarizer": {"name": "offline"},
        "history_modes": [history_mode],
    }
    r = sweep(spec, out_dir=out, workers=0 if workers <= 1 else workers, progress=False)
    res = r.load()

    rm = M.run_metrics(res.calls, res.probes, res.runs)
    name_to_cfg = {f"cfg{i:03d}": i for i in range(len(configs))}
    names = res.runs.set_index("run_id")["policy_name"].to_dict()
    rm["config_index"] = [name_to_cfg.get(names.get(rid, ""), -1) for rid in rm["run_id"]]
    failed = res.runs[res.runs["status"] != "ok"]
    if len(failed):
        raise ConfigError(f"tune: {len(failed)} replay(s) failed, first: {failed['error'].iloc[0]}")
    return rm, res.calls


def _evaluate_direct(tasks: Sequence[Any], configs: list[dict[str, Any]], history_mode: str) -> Any:
    import pandas as pd


    probe_fn = make_probe_fn(["recall"])
    rms, calls = [], []
    for i, c in enumerate(configs):
        pol = make_policy("progressive", **c)
        for t in tasks:
            r = replay(t, pol, summarizer=make_summarizer("offline"), config=ReplayConfig(history_mode=history_mode), probe_fn=probe_fn, session_store=False)
            rm = M.run_metrics(r.calls, r.probes, None)
            rm["config_index"] = i
            rms.append(rm)
            calls.append(r.calls)
    return pd.concat(rms, ignore_index=True), pd.concat(calls, ignore_index=True)


def _aggregate(rm: Any, calls: Any, configs: list[dict[str, Any]], model: Mapping[str, Any] | None) -> Any:
    """Per config: retention, tokens saved, overflows, emergencies, summarizer calls and cost."""
    import pandas as pd

    cols = ["summarizer_input_tokens", "summarizer_output_tokens"]
    tok = calls.groupby("run_id")[cols].sum().reset_index()
    rm = rm.merge(tok, on="run_id", how="left")
    rows = []
    pin = (model or {}).get("input_usd_per_mtok")
    pout = (model or {}).get("output_usd_per_mtok")
    for i, c in enumerate(configs):
        g = rm[rm["config_index"] == i]
        cost = g["summarizer_cost_usd"].astype(float).fillna(0)
        if pin is not None and pout is not None:
            # the offline summarizer costs nothing: price its token counts as the model would
            est = (g["summarizer_input_tokens"].astype(float) * pin + g["summarizer_output_tokens"].astype(float) * pout) / 1e6
            cost = cost.where(cost > 0, est)
        rows.append(
            {
                "config_index": i,
                **{k: c.get(k) for k in sorted(c) if k != "context_window_tokens"},
                "n_tasks": int(g["task_id"].nunique()),
                "retention": float(g["retention"].mean()) if len(g) else math.nan,
                "retention_min": float(g["retention"].min()) if len(g) else math.nan,
                "tokens_saved": float(g["tokens_saved"].mean()) if len(g) else math.nan,
                "overflows": int(g["overflows"].sum()),
                "emergencies": int(g["emergencies"].sum()),
                "fallbacks": int(g["fallbacks"].sum()),
                "summarizer_calls_per_run": float(g["summarizer_calls"].mean()) if len(g) else 0.0,
                "cost_usd_per_run": float(cost.mean()) if len(g) else 0.0,
            }
        )
    return pd.DataFrame(rows)


# -- result ------------------------------------------------------------------------------------
@dataclass
class TuneResult:
    """What :func:`tune` found.

    ``params``: the recommended ``ProgressiveCompactor`` parameters (with the window).
    ``toml``: the same as TOML text (``[policy]`` table). ``evidence``: one row per evaluated
    config (``stage`` ``grid`` or ``refine<k>``, the varied parameters, ``retention``,
    ``tokens_saved``, ``overflows``, ``emergencies``, ``summarizer_calls_per_run``,
    ``cost_usd_per_run``, ``feasible``, ``best``). ``feasible``: whether the recommendation
    meets every constraint (else it is the least-violating config). ``paths``: files written
    to ``out_dir`` (``recommended.toml``, ``evidence.csv``, ``tune.png``), if any.
    """
    params: dict[str, Any]
    toml: str
    evidence: Any
    feasible: bool
    window: int
    model: str | None = None
    history_mode: str = "write_back"
    paths: dict[str, Path] = field(default_factory=dict)

    def figure(self) -> Any:
        """Tokens saved vs retention of every evaluated config (:func:`h9eval.analysis.plots.tune_evidence`)."""
        return tune_evidence(self.evidence)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def to_toml(params: Mapping[str, Any], *, comment: str = "") -> str:
    """``[policy]`` TOML for a progressive config (``None`` values are left out: TOML has no
    null, and the policy's default for them is ``None``)."""
    lines = [f"# {ln}" for ln in comment.splitlines()] if comment else []
    lines += ["[policy]", 'kind = "progressive"']
    lines += [f"{k} = {_toml_value(v)}" for k, v in sorted(params.items()) if v is not None]
    return "\n".join(lines) + "\n"


def tune(
    tasks: Sequence[Any],
    *,
    window: int | None = None,
    model: str | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    refine_rounds: int = 1,
    max_summarizer_calls: float | None = None,
    max_cost_usd: float | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    models: Mapping[str, Mapping[str, Any]] | None = None,
    base_params: Mapping[str, Any] | None = None,
    history_mode: str = "write_back",
) -> TuneResult:
    """Search progressive thresholds for ``window`` (tokens) or ``model``'s window.

    ``tasks``: task specs (``synthetic:small:0``, recorded paths...) or :class:`Task` objects.
    ``grid``: parameter → values (default :data:`DEFAULT_GRID`; any ``ProgressiveCompactor``
    field works, invalid combinations are skipped). ``refine_rounds``: local refinement rounds
    after the grid (default 1; 0 = grid only). ``max_summarizer_calls``: bound on the mean
    summarizer calls per run; ``max_cost_usd``: bound on the mean summarizer cost per run (USD;
    the offline summarizer's token counts are priced at ``model``'s rates when it has them).
    ``out_dir``: where sweeps, ``recommended.toml``, ``evidence.csv`` and ``tune.png`` go
    (default: a temporary folder, nothing kept). ``workers``: sweep worker processes (1 =
    in-process). ``models``: a registry from :func:`load_models` (default :data:`MODELS`).
    ``base_params``: fixed progressive parameters for every candidate. ``history_mode``:
    ``write_back`` (default; harness9's current agent loop writes an effective compaction back
    into the history) or ``view`` (harness9 V1: the history never shrinks, so any task longer
    than the window reaches the emergency tier whatever the thresholds, and nothing is feasible).
    """
    import pandas as pd

    if not tasks:
        raise ConfigError("tune needs at least one task")
    if refine_rounds < 0:
        raise ConfigError(f"refine_rounds must be >= 0, got {refine_rounds}")
    minfo = model_info(model, models) if model is not None else None
    if window is None:
        if minfo is None:
            raise ConfigError("tune needs a window (tokens) or a model name to look one up")
        window = int(minfo["context_window_tokens"])
    if window <= 0:
        raise ConfigError(f"window must be > 0 tokens, got {window}")
    if workers < 0:
        raise ConfigError(f"workers must be >= 0 (0 or 1 = in this process), got {workers}")
    if history_mode not in ("view", "write_back"):
        raise ConfigError(f"history_mode must be 'view' or 'write_back', got {history_mode!r}")
    g = dict(grid) if grid is not None else dict(DEFAULT_GRID)

    fields = {f.name for f in dataclasses.fields(ProgressiveCompactor)}
    for k in g:
        if k not in fields:
            raise ConfigError(did_you_mean(k, sorted(fields), what="parameter of policy 'progressive'"))
        if not isinstance(g[k], (list, tuple)) or not g[k]:
            raise ConfigError(f"grid.{k} must be a non-empty list, got {g[k]!r}")
    base = {**(base_params or {}), "context_window_tokens": window}
    specs = [t for t in tasks if isinstance(t, str)]
    use_sweep = len(specs) == len(tasks)
    task_objs: list[Any] = []
    if not use_sweep:
        for t in tasks:
            task_objs.extend(load_tasks_from_spec(t) if isinstance(t, str) else [t])

    tmp = tempfile.TemporaryDirectory(prefix="h9eval-tune-") if out_dir is None else None
    root = Path(out_dir) if out_dir is not None else Path(tmp.name)  # type: ignore[union-attr]
    prepare_out_dir(root, what="tune output folder")
    seen: dict[str, int] = {}
    frames: list[Any] = []

    def run_stage(stage: str, cands: list[dict[str, Any]]) -> None:
        new = [c for c in cands if _key(c) not in seen]
        if not new:
            return
        if use_sweep:
            rm, calls = _evaluate_sweep(specs, new, root / f"sweep_{stage}", workers, history_mode)
        else:
            rm, calls = _evaluate_direct(task_objs, new, history_mode)
        ev = _aggregate(rm, calls, new, minfo)
        ev.insert(0, "stage", stage)
        ev["params_json"] = [_key(c) for c in new]
        for c in new:
            seen[_key(c)] = len(seen)
        frames.append(ev)

    def feasible(ev: Any) -> Any:
        ok = (ev["overflows"] == 0) & (ev["emergencies"] == 0)
        if max_summarizer_calls is not None:
            ok &= ev["summarizer_calls_per_run"] <= max_summarizer_calls
        if max_cost_usd is not None:
            ok &= ev["cost_usd_per_run"] <= max_cost_usd
        return ok

    def best_row(ev: Any) -> Any:
        ev = ev.assign(feasible=feasible(ev), violations=ev["overflows"] + ev["emergencies"])
        f = ev[ev["feasible"]]
        if len(f):
            return f.sort_values(["retention", "tokens_saved", "summarizer_calls_per_run"], ascending=[False, False, True], kind="stable").iloc[0]
        return ev.sort_values(["violations", "retention"], ascending=[True, False], kind="stable").iloc[0]

    try:
        grid_pts = _grid_points(g, base)
        if not grid_pts:
            raise ConfigError("no valid config in the grid (check that warn < soft < full < emergency is possible)")
        run_stage("grid", grid_pts)
        for k in range(refine_rounds):
            cur = json.loads(best_row(pd.concat(frames, ignore_index=True))["params_json"])
            run_stage(f"refine{k + 1}", _refine(cur, g, k))
        ev = pd.concat(frames, ignore_index=True)
        ev["feasible"] = feasible(ev)
        b = best_row(ev)
        ev["best"] = ev["params_json"] == b["params_json"]
        params = json.loads(b["params_json"])
        is_feasible = bool(b["feasible"]) if "feasible" in b else bool(feasible(ev[ev["best"]]).iloc[0])
        n_tasks = int(b["n_tasks"])
        comment = (
            f"h9eval tune: recommended ProgressiveCompactor for a {window:,}-token window"
            + (f" ({model})" if model else "")
            + f", {history_mode} history mode"
            + f"\nmean retention {b['retention']:.3f} over {n_tasks} task(s), tokens saved {b['tokens_saved']:.3f}, "
            f"{b['summarizer_calls_per_run']:.1f} summarizer calls per run, {int(b['overflows'])} overflows, "
            f"{int(b['emergencies'])} emergency truncations; {len(ev)} configs evaluated"
            + ("" if is_feasible else "\nWARNING: no config met every constraint; this one violates the fewest")
        )
        toml = to_toml(params, comment=comment)
        result = TuneResult(params=params, toml=toml, evidence=ev, feasible=is_feasible, window=window, model=model, history_mode=history_mode)
        if out_dir is not None:
            result.paths["toml"] = root / "recommended.toml"
            write_text_atomic(result.paths["toml"], toml)
            result.paths["evidence"] = root / "evidence.csv"
            write_text_atomic(result.paths["evidence"], ev.to_csv(index=False))
            result.paths["figure"] = root / "tune.png"
            with atomic_write(result.paths["figure"]) as f:
                result.figure().savefig(f, dpi=110, format="png")
        return result
    finally:
        if tmp is not None:
            tmp.cleanup()
