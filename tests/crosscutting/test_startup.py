"""Start-up: ``import h9eval`` and ``h9eval --help`` import almost nothing of h9eval, a command
imports only its own module, and the lazy tables behind both stay true to what they stand for.

The package ``__init__`` runs whenever any h9eval module is imported (every command, every sweep
worker); its public names are PEP 562 lazy exports (``h9eval._EXPORTS``, ``h9eval._MODULES``) and
the CLI's commands a table (``h9eval.cli.COMMANDS``). Each check runs in a fresh interpreter,
where ``sys.modules`` shows what an import cost. The times themselves are measured in
``benchmarks/bench_speed.py`` (``bench_startup``), not here.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import h9eval
from h9eval.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]

#: all of h9eval that ``import h9eval`` may import: the version's reader and what it stands on
IMPORT_H9EVAL = {"h9eval", "h9eval.core", "h9eval.core.errors", "h9eval.core.paths", "h9eval.core.provenance"}
#: ... and ``h9eval --help``: the CLI package and the modules its error handling needs
HELP = IMPORT_H9EVAL | {"h9eval.cli", "h9eval.core.storage"}


def _h9eval_modules_after(code: str) -> set[str]:
    """The h9eval modules imported once ``code`` ran in a fresh interpreter (stdout is the
    code's own; the module list goes to stderr's last line)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return {m for m in json.loads(r.stderr.strip().splitlines()[-1]) if m.split(".")[0] == "h9eval"}


def test_import_h9eval_imports_only_the_version_reader() -> None:
    assert _h9eval_modules_after("import h9eval") == IMPORT_H9EVAL


def test_help_lists_every_command_and_imports_no_command_module() -> None:
    code = "from h9eval.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
    assert _h9eval_modules_after(code) <= HELP
    r = subprocess.run(
        [sys.executable, "-m", "h9eval", "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    listed = " ".join(r.stdout.split())  # argparse wraps the help lines
    for name, command in COMMANDS.items():
        assert f" {name} {command.help}" in listed, name


def test_a_command_imports_its_own_module_only() -> None:
    code = "from h9eval.cli import main\ntry:\n    main(['run', '--help'])\nexcept SystemExit as e:\n"
    code += "    assert e.code == 0\n"
    loaded = _h9eval_modules_after(code)
    assert "h9eval.cli.run" in loaded
    other_commands = {c.module for c in COMMANDS.values()} - {"h9eval.cli.run"}
    assert not loaded & other_commands, loaded & other_commands
    assert not any(m.startswith("h9eval.sweeps") for m in loaded), sorted(loaded)


def test_an_unknown_or_missing_command_is_argparse_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, expected in ((["nosuch"], "invalid choice: 'nosuch'"), ([], "required: COMMAND")):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and err[0].startswith("usage: h9eval") and expected in err[1], err


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_the_full_parser_has_every_command_from_its_module_with_the_table_help() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub.choices) == list(COMMANDS)
    assert {a.dest: a.help for a in sub._choices_actions} == {n: c.help for n, c in COMMANDS.items()}
    for name in COMMANDS:
        # the table's module defines the command (a wrong one registers another name twice, which
        # argparse refuses); the others stay placeholders without a single argument
        only = _subcommands(build_parser(commands=[name]))
        assert only[name]._actions, name
        assert not any(only[n]._actions for n in COMMANDS if n != name), name


def test_import_runs_before_any_command(tmp_path: Path) -> None:
    """``--import`` still reaches every command: the user's module is imported before the command
    runs, whichever it is (here ``tasks``, which needs no policy at all)."""
    mark = tmp_path / "imported.txt"
    user = tmp_path / "mine.py"
    user.write_text(f"from pathlib import Path\nPath({str(mark)!r}).write_text('yes')\n")
    out = tmp_path / "t.jsonl"
    assert main(["--import", str(user), "tasks", "generate", "--out", str(out)]) == 0
    assert mark.read_text() == "yes" and out.exists()


def _type_checking_imports() -> dict[str, str]:
    """name -> module, as the ``if TYPE_CHECKING:`` block of h9eval/__init__.py imports it (what
    type checkers and IDEs see), read from the source."""
    tree = ast.parse((ROOT / "h9eval" / "__init__.py").read_text(encoding="utf-8"))
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def test_the_lazy_tables_are_the_public_names_and_what_type_checkers_see() -> None:
    tables = {**h9eval._EXPORTS, **h9eval._MODULES}
    assert not set(h9eval._EXPORTS) & set(h9eval._MODULES)
    assert set(h9eval.__all__) == {"__version__", *tables}, set(h9eval.__all__) ^ {"__version__", *tables}
    assert len(h9eval.__all__) == len(set(h9eval.__all__))
    # the TYPE_CHECKING block imports each name from its table's owner (a submodule: from its package)
    seen = _type_checking_imports()
    owners = {**h9eval._EXPORTS, **{n: path.rsplit(".", 1)[0] for n, path in h9eval._MODULES.items()}}
    assert seen == owners, {
        n: (seen.get(n), owners.get(n)) for n in set(seen) | set(owners) if seen.get(n) != owners.get(n)
    }


@pytest.mark.parametrize("name", sorted(h9eval._EXPORTS))
def test_every_lazy_name_is_its_owners_object(name: str) -> None:
    assert getattr(h9eval, name) is getattr(importlib.import_module(h9eval._EXPORTS[name]), name)


def test_every_lazy_module_and_the_star_import() -> None:
    for name, path in h9eval._MODULES.items():
        assert getattr(h9eval, name) is importlib.import_module(path), name
    space: dict[str, object] = {}
    exec("from h9eval import *", space)
    assert set(h9eval.__all__) <= set(space) and set(h9eval.__all__) <= set(dir(h9eval))
    assert all(space[n] is getattr(h9eval, n) for n in h9eval.__all__ if n != "__version__")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        h9eval.no_such_name  # noqa: B018


def test_a_task_run_loads_neither_the_closed_loop_nor_the_recorded_or_dataset_loaders(tmp_path: Path) -> None:
    """A run of a task file (what a 10-call run times) imports what replaying it needs, not the
    closed loop's worlds and agents, the recorded formats' parsers or the datasets adapters (each
    is imported where its kind of input is met)."""
    from h9eval.tasks import tasks_to_jsonl
    from h9eval.tasks.synthetic import generate

    task = generate("small", seed=0)
    task_file = tmp_path / "task.jsonl"
    tasks_to_jsonl([task], task_file)
    code = (
        "from h9eval.cli import main\n"
        f"assert main(['run', '--task', {str(task_file)!r}, '--out', {str(tmp_path / 'out')!r}]) == 0\n"
    )
    loaded = _h9eval_modules_after(code)
    assert "h9eval.runs.replay" in loaded
    for heavy in ("h9eval.closedloop", "h9eval.tasks.recorded", "h9eval.tasks.datasets"):
        assert not any(m == heavy or m.startswith(heavy + ".") for m in loaded), heavy


def test_run_help_still_lists_every_world(capsys: pytest.CaptureFixture[str]) -> None:
    from h9eval.closedloop.worlds import world_registry

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"KIND:SEED ({', '.join(world_registry())})" in text
    args = build_parser().parse_args(["run", "--world", "fact_chain:3"])
    assert args.world == "fact_chain:3"
    assert build_parser().parse_args(["run", "--task", "x"]).world is None
