"""What a sweep will cost before it spends: ``h9eval sweep SPEC --estimate``.

An offline dry run of the same grid: every cell is replayed as the sweep replays it, with each
model summarizer replaced by :class:`CountingSummarizer`, a stand-in that sends nothing. For each
summary the sweep would request it builds the exact prompts the model summarizer would send
(the summarizer's own ``prompts()``), counts the request once per response cache (a request the
sweep's shared cache would answer is counted as a cache hit, not a call), and answers with the
offline summarizer's text, so the replay goes on as it would with a reply.

The output-size model, stated: a reply is as long as the offline summarizer's summary of the same
request (UTF-8 bytes / 4, harness9's token estimate), capped at the request's ``max_tokens``;
``usd_bound`` prices every reply at its full ``max_tokens`` instead (a batched sweep, ``[summarizer]
batch = true``, at the batch fraction of the list price). Input tokens are the prompts'
bytes / 4. Dollars are the summarizer model's list prices (:mod:`h9eval.core.prices`, or the
summarizer's ``prices``); an unpriced model gives NaN (printed ``unpriced``), never $0.

Not estimated, and listed as such: the llm scorer's calls and a live agent's calls (closed-loop
cells with an ``anthropic`` agent are not replayed: replaying them would call the model).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.compaction.summary import SummaryReply, SummaryRequest
from h9eval.core.anthropic import CallLimits
from h9eval.core.messages import utf8_len
from h9eval.core.prices import batch_price_frac
from h9eval.summarizers.anthropic import AnthropicSummarizer, price_for
from h9eval.summarizers.registry import SUMMARIZERS, build_summarizer, make_summarizer
from h9eval.sweeps.cells import Cell, expand_cells
from h9eval.sweeps.spec import SweepSpec, check_call_limits, load_spec
from h9eval.runs.execute import RunObjects, execute
from h9eval.runs.spec import ProbeSpec
from h9eval.sweeps.worker import cell_env

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["OFFLINE_STAND_INS", "CountingSummarizer", "SweepEstimate", "estimate_sweep"]

OFFLINE_STAND_INS: dict[str, str] = {"anthropic": "offline", "anthropic_free_text": "offline_free_text"}
"""The offline summarizer whose summary stands in for each model summarizer's reply."""

_NO_KEY = "h9eval-estimate-sends-nothing"
"""The key a model summarizer is built with for its prompts only: it is never sent."""

ESTIMATE_COLUMNS = (
    "policy_name",
    "grid_json",
    "history_mode",
    "summarizer",
    "model",
    "cells",
    "model_calls",
    "cache_hits",
    "input_tokens",
    "output_tokens",
    "usd",
    "usd_bound",
)


@dataclass
class _Tally:
    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    output_bound_tokens: int = 0


@dataclass
class _Config:
    model: str
    price: tuple[float, float] | None
    cells: int = 0
    tally: _Tally = field(default_factory=_Tally)


class CountingSummarizer:
    """A model summarizer's stand-in that calls nothing (see the module docstring).

    ``model``: the model summarizer (built, never called: its ``prompts`` and ``max_tokens`` say
    what it would send); ``offline``: the summarizer whose text answers; ``seen``: the request
    keys already counted (shared by every cell of one response cache); ``tally``: the counts."""

    def __init__(self, model: AnthropicSummarizer, offline: Any, seen: set[str], tally: _Tally) -> None:
        self.model, self.offline, self.seen, self.tally = model, offline, seen, tally

    @property
    def summarizer_id(self) -> str:
        return self.model.summarizer_id

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        system, user = self.model.prompts(request)
        max_tokens = self.model.max_tokens or request.max_output_tokens
        key = hashlib.sha256(json.dumps([self.summarizer_id, system, user, max_tokens]).encode("utf-8")).hexdigest()
        reply = self.offline.summarize(request)
        tin = (utf8_len(system) + utf8_len(user)) // 4
        tout = min(max_tokens, utf8_len(reply.text or "") // 4)
        if key in self.seen:  # the sweep's shared response cache answers it: no call
            self.tally.cache_hits += 1
        else:
            self.seen.add(key)
            self.tally.calls += 1
            self.tally.input_tokens += tin
            self.tally.output_tokens += tout
            self.tally.output_bound_tokens += max_tokens
        return SummaryReply(text=reply.text, input_tokens=tin, output_tokens=tout, model=self.model.model)


@dataclass
class SweepEstimate:
    """:func:`estimate_sweep`'s answer: ``table`` one row per configuration (policy entry and
    parameters × history mode × summarizer, over tasks and repeats; :data:`ESTIMATE_COLUMNS`);
    ``not_estimated``: what the estimate leaves out, one line each."""

    name: str
    table: pd.DataFrame
    n_cells: int
    not_estimated: list[str] = field(default_factory=list)

    @property
    def model_calls(self) -> int:
        return int(self.table["model_calls"].sum())

    @property
    def usd(self) -> float:
        """Expected dollars of the whole sweep (NaN when a model is unpriced)."""
        return float(self.table["usd"].sum(skipna=False)) if len(self.table) else 0.0

    def __str__(self) -> str:
        t = self.table.copy()
        for col in ("usd", "usd_bound"):
            t[col] = [("unpriced" if math.isnan(v) else f"{v:.4f}") for v in t[col]]
        total = "unpriced" if math.isnan(self.usd) else f"${self.usd:.4f}"
        lines = [
            f"sweep {self.name}: estimate from an offline dry run of {self.n_cells} cells (nothing was called)",
            t.to_string(index=False) if len(t) else "(no configuration calls a model)",
            f"total: {self.model_calls:,} model calls, {int(self.table['input_tokens'].sum()):,} input and "
            f"{int(self.table['output_tokens'].sum()):,} output tokens, {total} "
            "(replies sized as the offline summary, bytes/4 tokens; usd_bound: every reply at max_tokens)",
        ]
        lines += [f"not estimated: {x}" for x in self.not_estimated]
        return "\n".join(lines)


def estimate_sweep(
    spec: SweepSpec | Mapping[str, Any] | str | os.PathLike[str],
    *,
    call_limits: CallLimits | None = None,
    skip_invalid: bool = False,
) -> SweepEstimate:
    """Estimate the model calls, tokens and dollars of :func:`~h9eval.sweeps.sweep.sweep` on
    ``spec`` per configuration, by an offline dry run (module docstring). ``call_limits``: the
    command line's endpoint and models over the spec's, as the sweep takes them. Calls no model,
    needs no key and writes nothing but temporary files."""
    import pandas as pd

    sp = load_spec(spec)
    if call_limits is not None:
        given = {k: v for k, v in dataclasses.asdict(call_limits).items() if v is not None}
        sp = dataclasses.replace(sp, call_limits=dataclasses.replace(sp.call_limits, **given))
        check_call_limits(sp.call_limits, sp.summarizer_params)
    configs: dict[tuple[str, ...], _Config] = {}
    seen: dict[str, set[str]] = {}
    skipped_agents: set[str] = set()
    scorer_cells = 0
    with tempfile.TemporaryDirectory(prefix="h9eval-estimate-") as tmp:
        cells, _ = expand_cells(sp, out_dir=tmp, skip_invalid=skip_invalid or sp.skip_invalid)
        for cell in cells:
            if "llm" in cell.spec.probes.scorers:
                scorer_cells += 1
            if cell.cell_kind == "episode" and not cell.spec.agent.startswith("scripted"):
                skipped_agents.add(cell.spec.agent)
                continue
            # the configuration: the policy entry and its grid point (its varied parameters), mode, summarizer
            key = (cell.policy_name, json.dumps(cell.grid, sort_keys=True), cell.spec.history_mode, cell.summarizer)
            model = _model_summarizer(cell)
            if model is None:  # an offline summarizer (or none) calls nothing: not even replayed
                configs.setdefault(key, _Config(model="", price=(0.0, 0.0))).cells += 1
                continue
            conf = configs.setdefault(key, _Config(model=model.model, price=price_for(model.model, model.prices)))
            conf.cells += 1
            stand_in = CountingSummarizer(
                model,
                make_summarizer(OFFLINE_STAND_INS[cell.summarizer]),
                seen.setdefault(cell.summarizer_cache or "", set()),
                conf.tally,
            )
            _dry_run(cell, tmp, stand_in)
    rows = []
    for (policy, grid, mode, summ), conf in configs.items():
        t, price = conf.tally, conf.price
        if price is not None and sp.batch is not None and conf.model:
            # a batched sweep pays the batch fraction of the list price for every summary
            frac = batch_price_frac(conf.model)
            price = (price[0] * frac, price[1] * frac)
        usd = math.nan if price is None else (t.input_tokens * price[0] + t.output_tokens * price[1]) / 1e6
        bound = math.nan if price is None else (t.input_tokens * price[0] + t.output_bound_tokens * price[1]) / 1e6
        rows.append(
            dict(
                zip(
                    ESTIMATE_COLUMNS,
                    (
                        policy,
                        grid,
                        mode,
                        summ,
                        conf.model,
                        conf.cells,
                        t.calls,
                        t.cache_hits,
                        t.input_tokens,
                        t.output_tokens,
                        usd,
                        bound,
                    ),
                )
            )
        )
    table = pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS))
    notes = [
        f"live agent calls of {a!r} (its episodes are not replayed: that would call the model)"
        for a in sorted(skipped_agents)
    ]
    if scorer_cells:
        notes.append(
            f"the llm scorer's calls ({scorer_cells} cells probe with it; about two calls per probe and checkpoint)"
        )
    return SweepEstimate(name=sp.name, table=table, n_cells=len(cells), not_estimated=notes)


def _model_summarizer(cell: Cell) -> AnthropicSummarizer | None:
    """The cell's model summarizer, built for its prompts and prices only (never called), or
    ``None`` for an offline one (or none)."""
    if cell.summarizer not in OFFLINE_STAND_INS or not issubclass(
        SUMMARIZERS.get(cell.summarizer), AnthropicSummarizer
    ):
        return None
    endpoint = cell.spec.endpoint
    limits = CallLimits(base_url=endpoint.get("base_url"), summarizer_model=endpoint.get("summarizer_model"))
    summ = build_summarizer(cell.summarizer, None, call_limits=limits, api_key=_NO_KEY, **cell.spec.summarizer.params)
    assert isinstance(summ, AnthropicSummarizer)
    return summ


def _dry_run(cell: Cell, tmp: str, stand_in: CountingSummarizer) -> None:
    """Run ``cell`` as the sweep runs it, with ``stand_in`` as its summarizer and without its probes and
    ledger (an estimate needs neither), writing only under ``tmp``."""
    spec = cell.spec.replace(probes=ProbeSpec(), ledger=False)
    execute(
        spec, cell_env(cell, offload_root=Path(tmp) / "work" / cell.cell_dir, objects=RunObjects(summarizer=stand_in))
    )
