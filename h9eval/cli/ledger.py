"""``h9eval ledger RUN_DIR [--run-id ID] [--out FILE]``: one run's loss ledger as an HTML page."""

from __future__ import annotations

import argparse

from h9eval.cli import add_command
from h9eval.analysis.ledger_page import write_ledger_page


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "ledger")
    p.add_argument("run_dir", help="a run folder (h9eval run --out), or a sweep folder with --run-id")
    p.add_argument("--run-id", default=None, help="the cell of a sweep folder to show")
    p.add_argument("--out", default=None, metavar="FILE", help="the page to write (default RUN_DIR/ledger.html)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    page = write_ledger_page(args.run_dir, args.out, run_id=args.run_id)
    print(f"wrote {page}")
    return 0
