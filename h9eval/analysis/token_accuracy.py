"""How well the token estimates agree with a BPE count: per-message and per-call tables (the
inputs of :func:`h9eval.analysis.metrics.token_estimate_error` and
:func:`~h9eval.analysis.metrics.tier_misclassification`), and the corpus the calibrated
estimate's bytes-per-token factors were measured on (``python -m h9eval.analysis.token_accuracy``
prints them again)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from h9eval.core.messages import Message
from h9eval.core.paths import shared_dir
from h9eval.core.token_counters import (
    CJK_SAMPLE,
    MILLI_TOKENS,
    CalibratedEstimate,
    bpe_counter,
    calibrate,
    content_kind,
    message_fields,
)
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, TokenCounter
from h9eval.tasks.model import Task
from h9eval.tasks.recorded import load_tasks
from h9eval.tasks.synthetic import generate

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["calibration_corpus", "message_token_table", "call_token_table"]


def calibration_corpus(recorded_dir: str | os.PathLike[str] | None = None) -> list[Message]:
    """The messages :data:`DEFAULT_BYTES_PER_TOKEN` was measured on (see its comment).

    ``recorded_dir``: recorded sessions folder (default ``<shared>/data/recorded``; skipped when
    absent).
    """
    msgs: list[Message] = []
    for preset, seeds in (("small", range(5)), ("long", (7,))):
        for seed in seeds:
            msgs.extend(generate(preset, seed=seed).messages)
    if recorded_dir is None:
        recorded_dir = shared_dir() / "data" / "recorded"
    p = Path(recorded_dir)
    if p.exists():
        for t in load_tasks(p):
            msgs.extend(t.messages)
    msgs.extend(Message("user", s) for s in CJK_SAMPLE)
    return msgs


def message_token_table(
    messages: Sequence[Message], *, counter: TokenCounter | None = None, task_id: str = ""
) -> pd.DataFrame:
    """One row per message: ``task_id``, ``message_index``, ``role``, ``kind`` (content kind of
    the content, or of the arguments for a call without content), ``bytes``, ``est_tokens``
    (bytes/4, unfloored float), ``calibrated_tokens`` (float) and ``bpe_tokens`` (``counter``,
    default ``BpeCounter()``). Input of :func:`h9eval.analysis.metrics.token_estimate_error`."""
    import pandas as pd

    bpe = counter or bpe_counter()
    cal = CalibratedEstimate()
    rows = []
    for i, m in enumerate(messages):
        fields = message_fields(m)
        main = m.content or (m.tool_calls[0].arguments if m.tool_calls else "")
        rows.append(
            {
                "task_id": task_id,
                "message_index": i,
                "role": m.role,
                "kind": content_kind(main),
                "bytes": m.nbytes,
                "est_tokens": m.nbytes / 4,
                "calibrated_tokens": sum(cal.field_units(s) for s in fields) / MILLI_TOKENS,
                "bpe_tokens": bpe.message_units(m),
            }
        )
    return pd.DataFrame(
        rows,
        columns=["task_id", "message_index", "role", "kind", "bytes", "est_tokens", "calibrated_tokens", "bpe_tokens"],
    )


def call_token_table(
    task: Task, *, counter: TokenCounter | None = None, context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
) -> pd.DataFrame:
    """Per model call of an uncompacted replay of ``task``: the history (transcript prefix
    before each assistant message) counted by bytes/4 (``history_tokens``, floored once, as
    harness9), by the calibrated estimate (``history_tokens_calibrated``) and by BPE
    (``history_tokens_bpe``). Columns also ``task_id``, ``call_index``, ``message_index``,
    ``context_window_tokens``. Input of :func:`h9eval.analysis.metrics.tier_misclassification`."""
    import pandas as pd

    bpe = counter or bpe_counter()
    cal = CalibratedEstimate()
    rows = []
    b = bu = cu = 0
    ci = -1
    for i, m in enumerate(task.messages):
        if m.role == "assistant":
            ci += 1
            rows.append(
                {
                    "task_id": task.task_id,
                    "call_index": ci,
                    "message_index": i,
                    "context_window_tokens": context_window_tokens,
                    "history_tokens": b // 4,
                    "history_tokens_calibrated": cal.finish(cu),
                    "history_tokens_bpe": bu,
                }
            )
        b += m.nbytes
        bu += bpe.message_units(m)
        cu += cal.message_units(m)
    return pd.DataFrame(
        rows,
        columns=[
            "task_id",
            "call_index",
            "message_index",
            "context_window_tokens",
            "history_tokens",
            "history_tokens_calibrated",
            "history_tokens_bpe",
        ],
    )


def _main() -> None:  # pragma: no cover - the measurement behind DEFAULT_BYTES_PER_TOKEN
    corpus = calibration_corpus()
    factors = calibrate(corpus)
    print(json.dumps(factors, indent=2))


if __name__ == "__main__":  # pragma: no cover
    _main()
