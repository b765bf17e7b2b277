"""The README's first result: `h9eval compare` on a fresh run of examples/sweep-small.toml (about 15 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOWN_METRICS = ("retention", "tokens_saved")


def _h9eval(*args: str, cwd: Path) -> str:
    env = dict(os.environ)
    r = subprocess.run(
        [sys.executable, "-m", "h9eval", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if r.returncode != 0:
        raise RuntimeError(f"h9eval {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


def generate() -> str:
    with tempfile.TemporaryDirectory(prefix="h9eval-first-") as d:
        out = Path(d) / "small"
        _h9eval("sweep", str(ROOT / "examples" / "sweep-small.toml"), "--out", str(out), cwd=ROOT)
        text = _h9eval("compare", str(out), "masking", "harness9-default", "--metric", "all", cwd=ROOT)
    lines = text.splitlines()
    head = [ln for ln in lines if ln and not ln.startswith(" ")][:1]
    shown = [ln for ln in lines if ln.strip().split(":", 1)[0] in SHOWN_METRICS]
    return "```\n" + "\n".join(head + shown + ["  ..."]) + "\n```"
