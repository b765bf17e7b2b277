"""``h9eval tasks generate|inspect``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from h9eval.core.errors import FormatError
from h9eval.core.paths import check_input_path
from h9eval.tasks import is_sqlite, tasks_to_jsonl
from h9eval.tasks.recorded import inspect_task, summarize_task
from h9eval.tasks.recorded.harness9_db import list_sessions, load_session_task
from h9eval.tasks.synthetic import generate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="generate synthetic tasks or inspect recorded sessions")
    tsub = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    tsub.required = True
    g = tsub.add_parser("generate", help="generate a seeded synthetic task (JSONL)")
    g.add_argument("--preset", default="small", help="small, medium, long or marathon (default small)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True, help="output JSONL path")
    g.set_defaults(func=_generate)
    i = tsub.add_parser("inspect", help="summarize a recorded session, task file or harness9 database")
    i.add_argument("path")
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
    check_input_path(args.path, what="task")
    if is_sqlite(Path(args.path)):
        info = _inspect_db(args.path, args.session)
    else:
        try:
            info = inspect_task(args.path, format=args.format)
        except FormatError as e:
            if Path(args.path).is_dir() and "load_tasks()" in str(e):  # the library's advice, not a CLI user's
                raise FormatError(
                    "folder is not an OpenHands conversation (expected event_service/events/event-NNNNN-*.json); "
                    "`tasks inspect` reads one session: give one of its files, or run every session under it "
                    "with `h9eval run --task FOLDER`",
                    path=args.path,
                ) from None
            raise
    if args.json:
        print(json.dumps(info, ensure_ascii=False, sort_keys=True, default=str))
    else:
        for k, v in info.items():
            print(f"{k:>28}: {v}")
    return 0


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
