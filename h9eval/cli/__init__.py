"""The ``h9eval`` command: thin wrappers over the library functions a notebook calls.

Each subcommand lives in a module of this package exposing ``register(subparsers)``; the
:data:`COMMANDS` table below names them. Bad input (any :class:`h9eval.core.errors.H9InputError`)
prints one line on stderr and exits with status 2; no traceback is shown unless ``H9EVAL_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, NoReturn

from h9eval.core.errors import CellsFailed, H9InputError, SummarizerError
from h9eval.core.provenance import h9eval_version
from h9eval.core.storage import storage_error_line

__all__ = ["main", "build_parser", "COMMANDS", "Command", "add_command"]


class Command(NamedTuple):
    """One subcommand: the module whose ``register(subparsers)`` defines its arguments, and the
    one line ``h9eval --help`` shows for it."""

    module: str
    help: str


#: Every command, in the order ``h9eval --help`` lists them. The one owner of each command's
#: name and help line: ``h9eval --help`` is written from this table alone, and only the module of
#: the command being run is imported (each imports its own share of h9eval, which costs a second
#: for all of them together). The command modules take their help from here (:func:`add_command`).
COMMANDS: dict[str, Command] = {
    "conformance": Command("h9eval.cli.conformance", "run harness9 conformance cases against the port"),
    "policies": Command("h9eval.cli.policies", "list compaction policies, their parameters and defaults"),
    "tasks": Command("h9eval.cli.tasks", "generate synthetic tasks or inspect recorded sessions"),
    "run": Command(
        "h9eval.cli.run", "replay a task through a policy, call by call (or run a closed-loop episode: --world)"
    ),
    "sweep": Command("h9eval.cli.sweep", "run a grid of replays from a TOML spec (resumable)"),
    "report": Command(
        "h9eval.cli.report", "write report.html (self-contained) and report.md for a sweep or harness9 records"
    ),
    "ledger": Command("h9eval.cli.ledger", "what each compaction of one run kept, lost or left stale (an HTML page)"),
    "compare": Command(
        "h9eval.cli.compare",
        "compare two configurations of a sweep, task-level paired (bootstrap CI over tasks, adjusted, verdict)",
    ),
    "tune": Command("h9eval.cli.tune", "search progressive tier thresholds for a context window"),
    "export": Command(
        "h9eval.cli.export", "write a sweep as a Hugging Face DatasetDict folder or as Inspect eval logs"
    ),
    "bills": Command(
        "h9eval.cli.bills",
        "replay recorded Claude Code sessions as recorded and compare predicted cache shares with their real bills",
    ),
    "demo": Command("h9eval.cli.demo", "conformance, a step-by-step compaction, the demo sweep and its report"),
}

#: what ``--import`` needs (it registers the user's policies); ~0.1 s, so imported only when given
_USER_POLICIES = "h9eval.compaction.user"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own usage errors: exit 2, no traceback
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``: the installed metadata is read only when asked for (not for every command)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"h9eval {h9eval_version()}")
        parser.exit()


def add_command(sub: argparse._SubParsersAction, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of command ``name`` (a key of :data:`COMMANDS`), with its help line from the table;
    ``kwargs`` go to ``add_parser`` (a description, ...)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=COMMANDS[name].help, **kwargs)
    return parser


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``h9eval`` parser. ``commands``: the commands whose modules are imported and whose
    arguments are defined (default: every command); the others are listed with their help line
    only and accept anything (enough to tell which command a command line names)."""
    full = set(COMMANDS) if commands is None else set(commands)
    p = _Parser(
        prog="h9eval", description="Evaluate LLM-agent context compaction (harness9 port, peers, probes, sweeps)."
    )
    p.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="FILE.py|MODULE",
        help="import your own policies (registered with register_policy) before the command runs; repeatable",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, command in COMMANDS.items():
        if name in full:
            importlib.import_module(command.module).register(sub)
        else:
            add_command(sub, name, add_help=False)
    return p


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    # Twice, with one parser builder: first with every command a placeholder, which settles the
    # top-level options, `h9eval --help`, a missing or an unknown command (argparse's own
    # messages, exit 2) without importing any command module; then with the named command's
    # arguments defined.
    args = list(sys.argv[1:] if argv is None else argv)
    first, _rest = build_parser(commands=()).parse_known_args(args)
    return build_parser(commands=(first.command,)).parse_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        if args.imports:
            user = importlib.import_module(_USER_POLICIES)
            for source in args.imports:
                user.import_policies(source)
        rc = args.func(args)
    except H9InputError as e:
        print(f"h9eval {args.command}: error: {e}", file=sys.stderr)
        if os.environ.get("H9EVAL_DEBUG"):
            raise
        return 2
    except (OSError, sqlite3.Error, RecursionError) as e:
        # The environment, not the input: a full or read-only disk, a locked database, input
        # nested too deeply to parse. Still one line (the traceback would hide the cause).
        if isinstance(e, BrokenPipeError):
            return 0
        if os.environ.get("H9EVAL_DEBUG"):
            raise
        msg = storage_error_line(e) if not isinstance(e, RecursionError) else " ".join(str(e).split())
        print(f"h9eval {args.command}: error: {msg[:500]} [{type(e).__name__}]", file=sys.stderr)
        return 2
    except CellsFailed as e:  # a sweep's cells failed (not bad input): the finished ones are kept
        print(f"h9eval {args.command}: error: {e}", file=sys.stderr)
        if os.environ.get("H9EVAL_DEBUG"):
            raise
        return 1
    except SummarizerError as e:  # a model API that stopped a command (a batched sweep's Batches API)
        print(f"h9eval {args.command}: error: {e}", file=sys.stderr)
        if os.environ.get("H9EVAL_DEBUG"):
            raise
        return 1
    except KeyboardInterrupt:
        print("h9eval: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
