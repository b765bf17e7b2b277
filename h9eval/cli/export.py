"""``h9eval export RESULTS --format dataset DIR``: a sweep's tables as a Hugging Face dataset."""

from __future__ import annotations

import argparse

from h9eval.results.export import EXPORT_FORMATS, export_dataset


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a sweep's results tables as a Hugging Face DatasetDict folder")
    p.add_argument("results_dir", help="a sweep's results folder")
    p.add_argument("out_dir", help="the folder to write (datasets.load_from_disk reads it)")
    p.add_argument("--format", default="dataset", choices=EXPORT_FORMATS, help="export format (default dataset)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT_DIR if it exists")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    out = export_dataset(args.results_dir, args.out_dir, overwrite=args.overwrite)
    print(f"wrote {out} (datasets.load_from_disk({str(out)!r}); push with DatasetDict.push_to_hub)")
    return 0
