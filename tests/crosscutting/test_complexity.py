"""No function too big to hold in one's head: radon's cyclomatic complexity of every function in
the package stays at or below 40 (the replay loop, the sweep spec parser, the recorded-session
loaders and the synthetic renderer were split for this)."""

from __future__ import annotations

from pathlib import Path

import pytest

radon_complexity = pytest.importorskip("radon.complexity")

PKG = Path(__file__).resolve().parents[2] / "h9eval"
MAX_COMPLEXITY = 40


def test_no_function_above_the_complexity_limit() -> None:
    too_big = []
    for path in sorted(PKG.rglob("*.py")):
        for block in radon_complexity.cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                too_big.append(f"{path.relative_to(PKG.parent)}:{block.lineno} {block.fullname} ({block.complexity})")
    assert not too_big, "functions above complexity 40:\n" + "\n".join(too_big)
