"""``h9eval tasks generate|inspect``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from h9eval.cli import add_command
from h9eval.core.errors import FormatError
from h9eval.core.paths import check_input_path
from h9eval.tasks import is_sqlite, tasks_to_jsonl
from h9eval.tasks.datasets import DatasetSource, dataset_row_task, load_dataset_tasks, parse_dataset_spec
from h9eval.tasks.recorded import inspect_task, summarize_task
from h9eval.tasks.recorded.harness9_db import list_sessions, load_session_task
from h9eval.tasks.synthetic import generate


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "tasks")
    tsub = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    tsub.required = True
    g = tsub.add_parser("generate", help="generate a seeded synthetic task (JSONL)")
    g.add_argument("--preset", default="small", help="small, medium, long or marathon (default small)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True, help="output JSONL path")
    g.set_defaults(func=_generate)
    i = tsub.add_parser("inspect", help="summarize a recorded session, task file, harness9 database or dataset")
    i.add_argument("path", help="a file or folder, or dataset:PATH_OR_ID[:SPLIT][#ROW] (a trajectory dataset)")
    i.add_argument("--n", type=int, default=None, help="dataset: rows to sample (seeded; default every row)")
    i.add_argument("--seed", type=int, default=0, help="dataset: the sample's seed (default 0)")
    i.add_argument("--format", default=None, help="force a recorded format instead of detecting it")
    i.add_argument("--session", default=None, help="session id inside a harness9 database")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(func=_inspect)


def _generate(args: argparse.Namespace) -> int:
    t = generate(args.preset, seed=args.seed)
    path = tasks_to_jsonl([t], args.out)
    print(f"wrote {path} ({len(t.messages)} messages, {t.n_calls} calls, {t.estimated_tokens} estimated tokens)")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    if args.path.startswith("dataset:"):
        info = _inspect_dataset(args.path, n=args.n, seed=args.seed)
    else:
        info = _inspect_path(args)
    if args.json:
        print(json.dumps(info, ensure_ascii=False, sort_keys=True, default=str))
    else:
        for k, v in info.items():
            print(f"{k:>28}: {v}")
    return 0


def _inspect_path(args: argparse.Namespace) -> dict[str, object]:
    check_input_path(args.path, what="task")
    if is_sqlite(Path(args.path)):
        return _inspect_db(args.path, args.session)
    try:
        return inspect_task(args.path, format=args.format)
    except FormatError as e:
        if Path(args.path).is_dir() and "load_tasks()" in str(e):  # the library's advice, not a CLI user's
            raise FormatError(
                "folder is not an OpenHands conversation (expected event_service/events/event-NNNNN-*.json); "
                "`tasks inspect` reads one session: give one of its files, or run every session under it "
                "with `h9eval run --task FOLDER`",
                path=args.path,
            ) from None
        raise


def _inspect_dataset(spec: str, *, n: int | None, seed: int) -> dict[str, object]:
    """One row's task summary (``#ROW``), or the sample's: adapter, provenance, skips by reason."""
    path, split, row = parse_dataset_spec(spec)
    if row is not None:
        t = dataset_row_task(path, split, row)
        return {**summarize_task(t), "dataset": t.metadata.get("dataset"), "resolved": t.metadata.get("resolved")}
    sample = load_dataset_tasks(DatasetSource(path=path, split=split, n=n, seed=seed))
    return {
        "format": "dataset",
        "adapter": sample.adapter,
        "provenance": dict(sample.provenance),
        "rows_read": sample.rows_read,
        "tasks": len(sample.tasks),
        "skipped": dict(sample.skipped),
        "filtered": dict(sample.filtered),
        "calls": sum(t.n_calls for t in sample.tasks),
        "estimated_tokens": sum(t.estimated_tokens for t in sample.tasks),
        "task_ids": [t.task_id for t in sample.tasks],
    }


def _inspect_db(path: str, session: str | None) -> dict[str, object]:
    if session is None:
        return {"format": "harness9_db", "sessions": list_sessions(path)}
    t = load_session_task(path, session)
    md = t.metadata
    extra = {"compacted_history": md["compacted_history"], "intent_source": md["intent_source"]}
    if md["compacted_history"]:
        extra["compaction_message_indices"] = md["compaction_message_indices"]
        extra["compaction_note"] = md["compaction_note"]
    return {**summarize_task(t), **extra}
