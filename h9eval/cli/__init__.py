"""The ``h9eval`` command: thin wrappers over the library functions a notebook calls.

Each subcommand lives in a module of this package exposing ``register(subparsers)``. Bad input
(any :class:`h9eval.core.errors.H9InputError`) prints one line on stderr and exits with status 2;
no traceback is shown unless ``H9EVAL_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence

from h9eval.cli import bills, compare, conformance, demo, export, ledger, policies, report, run, sweep, tasks, tune
from h9eval.compaction.user import import_policies
from h9eval.core.errors import H9InputError, SummarizerError
from h9eval.core.provenance import h9eval_version
from h9eval.core.storage import storage_error_line
from h9eval.sweeps.sweep import SweepFailed

__all__ = ["main", "build_parser"]

# The commands, in the order ``h9eval --help`` lists them.
_COMMANDS = (conformance, policies, tasks, run, sweep, report, ledger, compare, tune, export, bills, demo)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors: exit 2, no traceback
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


def build_parser() -> argparse.ArgumentParser:
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
    for mod in _COMMANDS:
        mod.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        for source in args.imports:
            import_policies(source)
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
    except SweepFailed as e:  # cells failed (not bad input): the finished ones are kept
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
