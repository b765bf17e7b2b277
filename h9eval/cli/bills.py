"""``h9eval bills PATH...``: the billing model against the recorded bills of Claude Code sessions."""

from __future__ import annotations

import argparse
import json

from h9eval.cli import add_command
from h9eval.studies.bills import check_bill_files


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "bills")
    p.add_argument("paths", nargs="+", help="Claude Code session files (.jsonl) or folders of them")
    p.add_argument(
        "--prefix-tokens",
        default="first_call",
        help="tokens the record lacks before the transcript (tools, system prompt): 'first_call' (default: the first "
        "call's recorded input less the transcript's estimate) or an integer",
    )
    p.add_argument(
        "--placement", default=None, help="cache breakpoint placement (default: Claude Code's, recorded lifetime)"
    )
    p.add_argument(
        "--calls", action="store_true", help="also list the calls where prediction and record disagree, with why"
    )
    p.add_argument(
        "--json", action="store_true", help="one JSON object per session (summary, compactions, disagreeing calls)"
    )
    p.set_defaults(func=_run)


def _prefix(value: str) -> int | str:
    return int(value) if value.isdigit() else value


def _run(args: argparse.Namespace) -> int:
    checks = check_bill_files(args.paths, prefix_tokens=_prefix(args.prefix_tokens), placement=args.placement)
    ok = True
    for chk in checks:
        s = chk.summary()
        ok &= bool(s["passes"])
        bad = chk.calls[chk.calls["reason"] != ""]
        if args.json:
            cols = ["call_index", "model", "at_s", "pred_read_share", "rec_read_share", "reason"]
            print(
                json.dumps(
                    {
                        **s,
                        "compactions_detail": chk.boundaries,
                        "compaction_calls": chk.compaction_calls,
                        "disagreeing": bad[cols].to_dict("records"),
                    }
                )
            )
            continue
        print(
            f"{s['task_id']}: {s['calls']} calls; cache-read share predicted {100 * s['predicted_read_share']:.2f} % "
            "vs "
            f"recorded {100 * s['recorded_read_share']:.2f} % ({s['read_share_diff_points']:.2f} points); cache-write "
            "share "
            f"{100 * s['predicted_write_share']:.2f} % vs {100 * s['recorded_write_share']:.2f} % "
            f"(x{s['write_share_factor']:.2f}); "
            f"{s['disagreeing_calls']} calls disagree; {'passes' if s['passes'] else 'FAILS'}"
        )
        for b in chk.boundaries:
            print(
                f"  compaction ({b['trigger']}) before call {b['call_index']}: recorded read {b['rec_read_before']} -> "
                f"{b['rec_read']} tokens, {b['rec_write']} written (${b['recorded_rewrite_usd']:.3f} over reading "
                "them); "
                f"predicted {'a miss' if b['predicted_miss'] else 'a hit'} (read {b['pred_read']}, wrote "
                f"{b['pred_write']})"
            )
        for cc in chk.compaction_calls:
            print(
                f"  Claude Code's compaction call ({cc['file']}): read share predicted "
                f"{100 * cc['pred_read_share']:.1f} %, "
                f"recorded {100 * cc['rec_read_share']:.1f} %"
            )
        if args.calls:
            for r in bad.itertuples():
                print(
                    f"  call {r.call_index}: read share {100 * r.pred_read_share:.1f} % predicted, "
                    f"{100 * r.rec_read_share:.1f} % recorded: {r.reason}"
                )
    return 0 if ok else 1
