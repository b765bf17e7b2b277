"""``h9eval policies``: the registered policies with their parameters and defaults."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policies", help="list compaction policies, their parameters and defaults")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from h9eval.cli.describe import describe_policies, format_policies_table

    if args.json:
        print(json.dumps(describe_policies(), indent=2, default=str))
    else:
        print(format_policies_table())
    return 0
