"""``h9eval export RESULTS DIR``: a sweep's tables as a Hugging Face dataset (``--format dataset``) or
the sweep as Inspect eval logs, one per configuration (``--format inspect``; the ``h9eval[inspect]`` extra)."""

from __future__ import annotations

import argparse

from h9eval.cli import add_command
from h9eval.core.errors import ConfigError
from h9eval.integrations.inspect_logs import INSPECT_LOG_FORMATS, sweep_to_eval_logs
from h9eval.results.export import EXPORT_FORMATS, export_dataset

FORMATS = (*EXPORT_FORMATS, "inspect")
"""``dataset`` (:mod:`h9eval.results.export`) and ``inspect`` (:mod:`h9eval.integrations.inspect_logs`)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "export")
    p.add_argument("results_dir", help="a sweep's results folder")
    p.add_argument(
        "out_dir",
        help="the folder to write (datasets.load_from_disk reads a dataset; "
        "inspect view --log-dir reads the eval logs)",
    )
    p.add_argument(
        "--format",
        default="dataset",
        choices=FORMATS,
        help="dataset: the tables as a DatasetDict (default); inspect: one Inspect eval log per "
        "configuration, one sample per task, each cell replayed for its views",
    )
    p.add_argument(
        "--log-format",
        default=None,
        choices=INSPECT_LOG_FORMATS,
        help="with --format inspect: Inspect's file format (default eval)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace OUT_DIR if it exists")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.log_format is not None and args.format != "inspect":
        raise ConfigError(f"--log-format is for --format inspect (the format is {args.format!r})")
    if args.format == "inspect":
        res = sweep_to_eval_logs(
            args.results_dir, args.out_dir, log_format=args.log_format or "eval", overwrite=args.overwrite
        )
        print(
            f"wrote {len(res.logs)} eval logs, {res.n_samples} samples, to {res.out_dir} "
            f"(inspect view --log-dir {str(res.out_dir)!r})"
        )
        for line in res.skipped:
            print(f"  skipped {line}")
        return 0
    out = export_dataset(args.results_dir, args.out_dir, overwrite=args.overwrite)
    print(f"wrote {out} (datasets.load_from_disk({str(out)!r}); push with DatasetDict.push_to_hub)")
    return 0
