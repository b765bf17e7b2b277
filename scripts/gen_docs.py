"""Regenerate the figures and tables quoted in README.md and docs/*.md, or check that they are current.

A quoted figure or table stands between two markers, ``<!-- gen:NAME -->`` and ``<!-- /gen:NAME -->``;
``scripts/docgen/NAME.py`` defines ``generate() -> str``, the block's text from a real run (a benchmark's
stored figures, a demo folder, a command's output). One file a generator, so adding one touches no list.

    python scripts/gen_docs.py                 rewrite every block of every page
    python scripts/gen_docs.py NAME ...        only those blocks
    python scripts/gen_docs.py --check [NAME]  exit 1 naming each block whose text differs from its generator's
    python scripts/gen_docs.py --list          the blocks found, by page, and their generators

A marker without a generator, or a generator whose block is on no page, is an error (exit 2): nothing is
quoted by hand and nothing is generated for nobody.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATORS_DIR = Path(__file__).resolve().parent / "docgen"
BLOCK = re.compile(r"(<!-- gen:(?P<name>[a-z0-9_-]+) -->\n)(?P<body>.*?)(<!-- /gen:(?P=name) -->)", re.S)


def pages() -> list[Path]:
    """The pages that may quote generated blocks: the README and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def generators() -> dict[str, Callable[[], str]]:
    """NAME -> its ``generate`` function, one per ``scripts/docgen/NAME.py``."""
    out: dict[str, Callable[[], str]] = {}
    for path in sorted(GENERATORS_DIR.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"docgen_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out[path.stem.replace("_", "-")] = mod.generate
    return out


def blocks_by_page() -> dict[Path, list[str]]:
    """Each page's generated blocks, by name, in page order."""
    return {p: [m.group("name") for m in BLOCK.finditer(p.read_text(encoding="utf-8"))] for p in pages()}


def _text(gen: Callable[[], str]) -> str:
    body = gen()
    return body if body.endswith("\n") else body + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    gens = generators()
    found = blocks_by_page()
    quoted = {n for names in found.values() for n in names}
    orphans = sorted(quoted - gens.keys())
    unused = sorted(gens.keys() - quoted)
    if orphans or unused:
        for n in orphans:
            print(f"gen_docs: block {n!r} has no generator (expected scripts/docgen/{n.replace('-', '_')}.py)")
        for n in unused:
            print(f"gen_docs: generator {n!r} fills no block (expected <!-- gen:{n} --> on a page)")
        return 2
    if args.list:
        for page, names in found.items():
            for n in names:
                print(f"{page.relative_to(ROOT)}: {n}")
        return 0
    wanted = set(args.names) or quoted
    unknown = sorted(wanted - quoted)
    if unknown:
        print(f"gen_docs: unknown block(s) {', '.join(unknown)}; known: {', '.join(sorted(quoted)) or 'none'}")
        return 2
    made = {n: _text(gens[n]) for n in sorted(wanted)}
    stale: list[str] = []
    for page in found:
        text = page.read_text(encoding="utf-8")

        def fill(m: re.Match[str], page: Path = page) -> str:
            name = m.group("name")
            if name not in made:
                return m.group(0)
            if m.group("body") != made[name]:
                stale.append(f"{page.relative_to(ROOT)}: {name}")
            return m.group(1) + made[name] + m.group(4)

        new = BLOCK.sub(fill, text)
        if not args.check and new != text:
            page.write_text(new, encoding="utf-8")
    if args.check and stale:
        for s in stale:
            print(f"gen_docs: stale block {s} (run python scripts/gen_docs.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
