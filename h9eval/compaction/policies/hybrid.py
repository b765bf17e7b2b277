"""The JetBrains hybrid: observation masking always, an LLM summary when masking is not enough.

Two styles: ``h9eval`` (the default: token-triggered, masking first, harness9-format summary
as by ``summary_single_threshold``) and ``jetbrains`` (the study's code: SWE-agent's
``SummarizeEveryNTurns`` with a static checkpoint, then ``LastNObservations``).

Tier mapping (see :mod:`h9eval.compaction._peer`): ``FULL`` when a summary replaced messages,
``SOFT`` when the summary failed and its fallback dropped messages, ``WARN`` when only tool
outputs were masked, ``NONE`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction._peer import ContinuedRun, PeerDecision, RawHistory, peer_record, request_peer_summary
from h9eval.compaction.base import Compaction, CompactionEnv, PolicyRun, WindowedPolicy, register
from h9eval.compaction.masking import MASK_PLACEHOLDER, WINDOW_UNITS, IncrementalMasking, mask_observations
from h9eval.compaction.prompts import serialize_conversation
from h9eval.compaction.summary import SummaryCall
from h9eval.compaction.records import EXTRA_MASKED, Tier
from h9eval.compaction.policies.summary_single_threshold import SummarySingleThreshold, SummaryThresholdRun
from h9eval.core.messages import Message
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = ["Hybrid", "HYBRID_STYLES", "CHECKPOINT_PROMPT"]

HYBRID_STYLES = ("h9eval", "jetbrains")

#: h9eval's wording for the study's checkpoint request (its structure: the previous checkpoint,
#: or the problem statement before the first one, then the turns to fold in)
CHECKPOINT_PROMPT = (
    "You keep a state checkpoint for a coding agent so that it can continue without the turns "
    "below. Record the user's requirements, what has been completed and what is pending, the "
    "current state of files, functions and tests, the changes made, and failed attempts. Be "
    "concise; output only the checkpoint.\n\n{context}\nTurns to fold in:\n{conversation}"
)


@register
@dataclass(frozen=True, kw_only=True)
class Hybrid(WindowedPolicy):
    """JetBrains 'The Complexity Trap' hybrid: masking first, a summary as the backstop.

    ``style="h9eval"`` (the default) masks old tool outputs at every call and, when the
    *masked* history is still at ``summary_threshold_frac`` of the window, summarises it as
    ``summary_single_threshold`` does.

    ``style="jetbrains"`` is the study's code as published: the summarizer sees the raw turns
    (before masking); the first two messages (system prompt and task statement) are kept
    verbatim; the summary is an assistant message ``Checkpoint for the last N turns:`` right
    after them and replaces the previous one (the study's static checkpointing, which passes
    the previous checkpoint to the summarizer); the kept turns follow, then the outputs are
    masked. It summarises when the unsummarised turns reach
    ``summarize_every_turns + keep_last_turns``, folding the oldest ``summarize_every_turns`` of
    them into the checkpoint (the paper's N=43, M=10, the defaults). Its summary is free text, so it does not use
    ``keep_last_messages``, ``anchors`` or ``prompt_file``, and it uses
    ``summary_threshold_frac`` only with ``token_trigger``.

    Where this still differs from the study, and why:

    1. (h9eval style) Summaries are triggered on tokens, like every other policy here, so the
       peers can be compared at one window; the summarizer sees the masked head.
    2. (jetbrains style) A *turn* is an assistant message with everything up to the next
       assistant message (its results, any user follow-up). The study pairs an assistant
       message with the one observation after it and drops everything else once a checkpoint
       exists; SWE-agent transcripts hold nothing else, but h9eval's recorded ones do, and a
       follow-up the agent never sees again would be a loss the study never measured.
    3. (jetbrains style) A failed summary keeps the turns unsummarised (the study does so when
       its API-call limit is reached) and records the error; the next call tries again.
    4. The prompt wording is h9eval's; the study's summary template is its own text.
    5. A forced or manual compaction masks and summarises now, whatever the usage (the
       jetbrains style folds every unsummarised turn but the last ``keep_last_turns``).
    """

    kind: ClassVar[str] = "hybrid"
    source: ClassVar[str] = "JetBrains 'Complexity Trap' hybrid (observation masking + LLM summary)"
    uses_summarizer: ClassVar[bool] = True
    claims_budget: ClassVar[bool] = False

    keep_recent_turns: int = 10
    """Tool outputs older than this many ``window_unit`` are masked at every call. 10 is the study's
    window."""
    placeholder: str = MASK_PLACEHOLDER
    """What a masked tool output becomes."""
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Model window in tokens."""
    summary_threshold_frac: float = 0.80
    """Summarise when the masked history is still at this fraction of the window (``>=``)."""
    keep_last_messages: int = 6
    """(h9eval style) Messages kept verbatim after the summary. 6 is harness9's tail; the study's
    summarizer also keeps the most recent turns."""
    anchors: bool = True
    """(h9eval style) Ask for harness9's anchored summary, as ``summary_single_threshold`` does."""
    summary_timeout_s: float = 60.0
    """A slower summary fails (seconds)."""
    prompt_file: str | None = None
    """(h9eval style) JSON file of prompt templates (see :mod:`h9eval.compaction.prompts`)."""
    window_unit: str = "assistant_turns"
    """What ``keep_recent_turns`` counts: ``assistant_turns`` or ``tool_results``. ``tool_results``
    is the study's ``LastNObservations``; see ``observation_masking``."""
    style: str = "h9eval"
    """``h9eval`` (token-triggered, masking first) or ``jetbrains`` (the study's code)."""
    summarize_every_turns: int = 43
    """(jetbrains style) Turns folded into the checkpoint at each summary (the paper's N)."""
    keep_last_turns: int = 10
    """(jetbrains style) Newest turns never summarised (the paper's M)."""
    token_trigger: bool = False
    """(jetbrains style) Also summarise on tokens, at ``summary_threshold_frac``. Every
    unsummarised turn but the last ``keep_last_turns`` is folded in when the view is still at
    ``summary_threshold_frac`` of the window (``>=``); the study triggers on turns only."""

    def __post_init__(self) -> None:
        c = self._check
        c(self.keep_recent_turns >= 0, "keep_recent_turns", "must be >= 0", self.keep_recent_turns)
        c(
            self.window_unit in WINDOW_UNITS,
            "window_unit",
            f"must be one of {', '.join(WINDOW_UNITS)}",
            self.window_unit,
        )
        c(self.style in HYBRID_STYLES, "style", f"must be one of {', '.join(HYBRID_STYLES)}", self.style)
        c(self.summarize_every_turns >= 1, "summarize_every_turns", "must be >= 1", self.summarize_every_turns)
        c(self.keep_last_turns >= 0, "keep_last_turns", "must be >= 0", self.keep_last_turns)
        c(self.placeholder != "", "placeholder", "must not be empty", self.placeholder)
        c(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
        c(
            isinstance(self.summary_threshold_frac, (int, float)) and 0 < self.summary_threshold_frac <= 1,
            "summary_threshold_frac",
            "must be a fraction of the window in (0, 1]",
            self.summary_threshold_frac,
        )
        c(self.keep_last_messages >= 0, "keep_last_messages", "must be >= 0", self.keep_last_messages)
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)

    def summary_policy(self) -> SummarySingleThreshold:
        """The summary stage as a ``summary_single_threshold`` policy."""
        return SummarySingleThreshold(
            context_window_tokens=self.context_window_tokens,
            threshold_frac=self.summary_threshold_frac,
            keep_last_messages=self.keep_last_messages,
            anchors=self.anchors,
            summary_timeout_s=self.summary_timeout_s,
            prompt_file=self.prompt_file,
        )

    def start(self, env: CompactionEnv | None = None) -> HybridRun | JetBrainsHybridRun:
        if self.style == "jetbrains":
            return JetBrainsHybridRun(self, env or CompactionEnv())
        return HybridRun(self, env or CompactionEnv())


class HybridRun(ContinuedRun):
    """The summary policy over a masked working list: it continues from the last summary's
    view (the summary runner's continuation), masks it, then decides as the summary policy."""

    def __init__(self, policy: Hybrid, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.summary = SummaryThresholdRun(policy.summary_policy(), env)
        self.cont = self.summary.cont
        self.calls = self.summary.calls  # the one list the summary runner appends its calls to
        self._masker = IncrementalMasking(policy.keep_recent_turns, policy.placeholder, window_unit=policy.window_unit)

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        masked, n, masked_bytes = self._masker.mask(base)  # kept up to date between calls: O(new messages)
        return self.summary.decide_base(
            list(masked),
            base_tokens=masked_bytes // 4,
            force=force,
            unchanged_tier=Tier.WARN if n else Tier.NONE,
            extra={EXTRA_MASKED: n},
        )


def _head_len(msgs: Sequence[Message]) -> int:
    """The study keeps ``history[:2]`` (system prompt, task statement): the system message
    and the first message after it when that is a plain user message."""
    k = 1 if msgs and msgs[0].role == "system" else 0
    if len(msgs) > k and msgs[k].role == "user" and not msgs[k].tool_call_id:
        k += 1
    return k


def _turns(msgs: Sequence[Message]) -> list[list[Message]]:
    """Split into turns: each assistant message starts one, which holds everything up to the
    next assistant message (leading non-assistant messages form a turn of their own)."""
    turns: list[list[Message]] = []
    for m in msgs:
        if m.role == "assistant" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


class JetBrainsHybridRun(PolicyRun):
    """The study's hybrid on one session: the checkpoint and how many raw turns it covers."""

    def __init__(self, policy: Hybrid, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.calls: list[SummaryCall] = []
        self.checkpoint: Message | None = None
        self.summarized_turns = 0
        self.raw = RawHistory()

    def _fold(self, head: list[Message], todo: list[list[Message]], extra: dict[str, object]) -> str | None:
        p = self.policy
        if self.checkpoint is not None:
            context = f"<PREVIOUS_CHECKPOINT>\n{self.checkpoint.content}\n</PREVIOUS_CHECKPOINT>\n"
        else:
            task = head[-1].content if head and head[-1].role == "user" else ""
            context = f"<PROBLEM_STATEMENT>\n{task}\n</PROBLEM_STATEMENT>\n"
        raw_msgs = [m for t in todo for m in t]
        prompt = CHECKPOINT_PROMPT.replace("{context}", context, 1).replace(
            "{conversation}", serialize_conversation(raw_msgs), 1
        )
        prev = self.checkpoint.content if self.checkpoint is not None else None
        return request_peer_summary(
            self.env, self.calls, extra, raw_msgs, prompt, previous=prev, timeout_s=p.summary_timeout_s
        )

    def _run(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        p = self.policy
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        raw, _ = self.raw.raw(history)
        k = _head_len(raw)
        head, turns = raw[:k], _turns(raw[k:])
        if self.summarized_turns > len(turns):  # an unrelated, shorter history: start over
            self.checkpoint, self.summarized_turns = None, 0
        todo_n = 0
        unprocessed = turns[self.summarized_turns :]
        if len(unprocessed) >= p.summarize_every_turns + p.keep_last_turns:
            todo_n = p.summarize_every_turns
        elif (force or p.token_trigger) and len(unprocessed) > p.keep_last_turns:
            over = force
            if not over:
                view_now = self._view(head, unprocessed)[0]
                over = estimate_tokens(view_now) >= p.summary_threshold_frac * p.context_window_tokens
            if over:
                todo_n = len(unprocessed) - p.keep_last_turns
        extra: dict[str, object] = {}
        fields: dict[str, Any] = {}
        error = ""
        summarized = False
        if todo_n:
            todo = unprocessed[:todo_n]
            text = self._fold(head, todo, extra)
            if text is None:
                error = "summary failed: kept the turns unsummarised"
            else:
                self.checkpoint = Message("assistant", f"Checkpoint for the last {len(todo)} turns:\n{text}")
                self.summarized_turns += len(todo)
                unprocessed = unprocessed[todo_n:]
                summarized = True
                fields = {
                    "summarized": sum(len(t) for t in todo),
                    "preserved_tail": sum(len(t) for t in unprocessed),
                    "summary_text": text,
                }
        view, n = self._view(head, unprocessed)
        extra["masked"] = n
        if summarized:
            tier = Tier.FULL
        elif n:
            tier = Tier.WARN
        else:
            tier = Tier.NONE
            if self.checkpoint is not None:
                extra["carried_over"] = True
        if self.checkpoint is None and n == 0:
            view = list(history)  # nothing done: the input as it is
        self.raw.remember(raw, view)
        rec = peer_record(
            self.env, history, view, tier, tokens_before=tb, start_ns=start_ns, error=error, extra=extra, **fields
        )
        return Compaction(tuple(view), rec)

    def _view(self, head: list[Message], unprocessed: list[list[Message]]) -> tuple[list[Message], int]:
        p = self.policy
        body = [m for t in unprocessed for m in t]
        view = [*head, self.checkpoint, *body] if self.checkpoint is not None else [*head, *body]
        return mask_observations(view, p.keep_recent_turns, p.placeholder, window_unit=p.window_unit)

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._run(history, None, force=True)
