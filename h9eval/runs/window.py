"""The run's window sized on a task: a task's uncompacted peak, its written-back peak, a window that is a
fraction of it (``window = { peak_frac = f }``, ``--window-peak-frac``), and the one window value a spec
holds from the options a user has (:func:`window_value`)."""

from __future__ import annotations

import math

from h9eval.compaction.policies import make_policy
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.runs.spec import MIN_WINDOW_TOKENS, PeakFrac
from h9eval.tasks.model import Task

__all__ = [
    "peak_frac_window",
    "uncompacted_peak_tokens",
    "window_value",
    "written_back_peak_tokens",
]


def uncompacted_peak_tokens(task: Task, *, system_prompt: str | None = None) -> int:
    """The most tokens the uncompacted transcript sends at one call of ``task``.

    Args:
        task: the task.
        system_prompt: the system prompt the replay prepends when the transcript has none (default:
            the replay's).

    Returns:
        The largest ``raw_tokens_sent`` of its replay (every message before its last model call, the
        prepended system prompt and the tool schemas); 0 for a task without a model call.
    """
    last = max((i for i, m in enumerate(task.messages) if m.role == "assistant"), default=None)
    if last is None:
        return 0
    head = list(task.messages[:last])
    if not task.messages or task.messages[0].role != "system":
        head.insert(0, Message("system", system_prompt if system_prompt is not None else ReplayConfig().system_prompt))
    return estimate_tokens(head) + estimate_tool_tokens(task.tools)


def written_back_peak_tokens(task: Task, *, writeback_rules: str = "v3") -> int:
    """The most tokens ``task`` sends at one call in ``write_back`` mode when harness9's default only
    offloads (its tool-time hook and warn tier act at every call and are written back, nothing is
    summarised): what its write-back history grows to before its summary tiers have anything left to
    do, measured by a replay of the default's own code.

    Args:
        task: the task.
        writeback_rules: harness9's write-back rules.

    Returns:
        That peak in tokens (0 for a task without a model call).
    """
    raw = uncompacted_peak_tokens(task)
    if raw == 0:
        return 0
    # a window ten times the peak keeps every ratio under 0.1: above the tiny warn threshold, far
    # below soft, so every call runs the warn tier and nothing else
    window = 10 * raw
    offload_only = make_policy(
        "progressive", warn_frac=1e-9, soft_frac=0.97, full_frac=0.98, emergency_frac=0.99, context_window_tokens=window
    )
    cfg = ReplayConfig(history_mode="write_back", writeback_rules=writeback_rules, context_window_tokens=window)
    r = replay(task, offload_only, summarizer=None, config=cfg, session_store=False)
    return int(r.calls["tokens_sent"].max()) if len(r.calls) else 0


def peak_frac_window(task: Task, peak_frac: float, *, history_mode: str = "view") -> int:
    """A window sized to ``task``: ``peak_frac`` times its peak, rounded up (at least 1 token).

    In ``view`` mode the peak is :func:`uncompacted_peak_tokens`, in ``write_back`` mode
    :func:`written_back_peak_tokens` (the history harness9's default writes back is smaller, so the
    same fraction of the uncompacted peak would not exercise its summary tiers there).

    Args:
        task: the task.
        peak_frac: in (0, 1]; 0.5: the transcript would need twice the window at its end.
        history_mode: ``view`` or ``write_back``.

    Returns:
        The window in tokens.
    """
    frac = PeakFrac(peak_frac).frac  # the one check of a peak fraction
    peak = written_back_peak_tokens(task) if history_mode == "write_back" else uncompacted_peak_tokens(task)
    return max(1, math.ceil(peak * frac))


def window_value(window: int | None = None, window_peak_frac: float | None = None) -> int | PeakFrac | None:
    """The spec's one window field from the two options a user has (``--window``, ``--window-peak-frac``).

    Args:
        window: tokens, or ``None``.
        window_peak_frac: a fraction of each task's peak, or ``None``.

    Returns:
        An int, a :class:`~h9eval.runs.spec.PeakFrac` or ``None``.

    Raises:
        ConfigError: both given, or an invalid value.
    """
    if window is not None and window_peak_frac is not None:
        raise ConfigError(f"give window ({window}) or window_peak_frac ({window_peak_frac}), not both")
    if window_peak_frac is not None:
        return PeakFrac(window_peak_frac)
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < MIN_WINDOW_TOKENS):
        raise ConfigError(f"window must be an integer >= {MIN_WINDOW_TOKENS:,} tokens, got {window!r}")
    return window
