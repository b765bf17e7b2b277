"""Behaviour digests for speed work: what every registered policy produces, hashed.

For each registered policy that runs on any task (not the provider-side ones, which replay their
cassettes), in both history modes, one ``run_task`` on a 300-turn synthetic task
(with a results folder, so the offloader and the session store run as in ``h9eval run``) at a
window of a third of the task's uncompacted peak (so every compacting policy compacts); the
digest covers the calls table, the compactions table (their timing columns aside) and the final
history. A speed change must leave every digest unchanged:

    python benchmarks/behaviour_digest.py --write before.json    # on the commit before
    python benchmarks/behaviour_digest.py --check before.json    # after: exit 1 on any change
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# Columns that measure time, or name the run, not behaviour (a run id's format is a naming rule).
_SKIPPED_COLUMNS = frozenset({"summarizer_latency_s", "duration_ns", "run_id"})


def _frame_digest(frame: Any, out_dir: str) -> str:
    cols = [c for c in frame.columns if c not in _SKIPPED_COLUMNS]
    text = frame[cols].to_json(orient="split", index=False, double_precision=10)
    return hashlib.sha256(text.replace(out_dir, "<out>").encode()).hexdigest()[:16]


def digests(n_turns: int = 300, seed: int = 3, peak_frac: float = 0.33) -> dict[str, dict[str, str]]:
    """``{"<policy>/<mode>": {"calls": ..., "compactions": ..., "final_history": ...}}``."""
    from h9eval.compaction.policies import task_independent_registry
    from h9eval.core.errors import ConfigError
    from h9eval.core.messages import messages_to_json
    from h9eval.runs.run import run_task
    from h9eval.summarizers.offline import clear_caches
    from h9eval.tasks.synthetic import generate

    task = generate("long", seed=seed, n_turns=n_turns)
    out: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="h9eval-digest-") as tmp:
        for policy in sorted(task_independent_registry()):
            for mode in ("view", "write_back"):
                clear_caches()
                folder = str(Path(tmp) / f"{policy}-{mode}")
                try:
                    res = run_task(task, policy, history_mode=mode, window_peak_frac=peak_frac, out_dir=folder)[0]
                except ConfigError as e:  # a policy whose defaults cannot run at this window: its refusal is its digest
                    out[f"{policy}/{mode}"] = {"refused": str(e).replace(folder, "<out>")}
                    continue
                hist = json.dumps(messages_to_json(res.final_history), sort_keys=True).replace(folder, "<out>")
                out[f"{policy}/{mode}"] = {
                    "calls": _frame_digest(res.calls, folder),
                    "compactions": _frame_digest(res.compactions, folder),
                    "final_history": hashlib.sha256(hist.encode()).hexdigest()[:16],
                    "n_compactions": str(len(res.compactions)),
                }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the digests to this JSON file")
    group.add_argument("--check", type=Path, help="compare against digests written before; exit 1 on a change")
    args = ap.parse_args(argv)
    now = digests()
    if args.write:
        args.write.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} digests written to {args.write}")
        return 0
    before = json.loads(args.check.read_text())
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in changed:
        print(f"CHANGED {k}: {before.get(k)} -> {now.get(k)}")
    print(f"{len(now) - len(changed)}/{len(now)} unchanged")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
