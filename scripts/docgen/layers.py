"""docs/architecture.md's layer diagram: which package imports which, drawn from the code by the layer test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TEST = Path(__file__).resolve().parents[2] / "tests" / "crosscutting" / "test_layers.py"


def generate() -> str:
    spec = importlib.util.spec_from_file_location("h9eval_test_layers", TEST)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return "```\n" + mod.layer_diagram() + "\n```"
