"""Every figure or table quoted in README.md and docs/*.md between ``<!-- gen:NAME -->`` markers is what its
generator (``scripts/docgen/NAME.py``) gives today: a sample output that no longer matches the code fails here,
and a marker without a generator (a block typed by hand) is an error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_generated_block_is_current() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, f"stale or hand-typed generated blocks:\n{r.stdout}\n{r.stderr}"


def test_the_check_names_a_stale_block(tmp_path: Path) -> None:
    """The check can fail: a copy of the tree with one generated block edited by hand is named."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    page = ROOT / "docs" / "architecture.md"
    text = page.read_text(encoding="utf-8")
    assert "<!-- gen:layers -->" in text
    edited = text.replace("<!-- gen:layers -->\n", "<!-- gen:layers -->\nhand-typed line\n", 1)
    made = gen_docs._text(gen_docs.generators()["layers"])
    bodies = {m.group("name"): m.group("body") for m in gen_docs.BLOCK.finditer(edited)}
    assert bodies["layers"] != made and bodies["layers"].replace("hand-typed line\n", "", 1) == made
