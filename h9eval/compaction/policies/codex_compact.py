"""Codex CLI's auto-compact (``codex-rs/core/src/compact.rs``), as its authors built it.

When the conversation reaches ``context_window * 9 / 10`` tokens, the model summarises the
whole history; the new history is the initial context (here: the system message and any
session-prefix messages), then the most recent user messages up to 20,000 tokens, then the
summary as a user message with a hand-off prefix. Later turns are appended to it.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``FULL`` when the history was replaced,
``NONE`` otherwise (the view may be the last compacted history followed by the new messages;
``record.error`` is set when a due compaction failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction._peer import ContinuedRun, PeerDecision, request_peer_summary
from h9eval.compaction.base import CompactionEnv, WindowedPolicy, register
from h9eval.compaction.summary import SummaryCall
from h9eval.compaction.prompts import serialize_conversation
from h9eval.compaction.records import Tier
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "CodexCompact",
    "CodexCompactRun",
    "CODEX_SUMMARY_PREFIX",
    "CODEX_COMPACT_PROMPT",
    "approx_token_count",
    "truncate_to_tokens",
    "build_compacted_history",
    "collect_user_messages",
    "is_session_prefix",
]

#: h9eval's hand-off wording (Codex's own prefix text lives in its ``summary_prefix.md``)
CODEX_SUMMARY_PREFIX = (
    "Another model worked on this task before you and wrote the hand-off summary below. "
    "Build on it; the user's recent messages precede it."
)
#: h9eval's wording for the compaction request (Codex's is its ``compact/prompt.md``)
CODEX_COMPACT_PROMPT = (
    "Write a hand-off summary of the conversation below for another model that will take over "
    "the task: what the user asked for, what has been done and learned, the current state, "
    "decisions and open questions, and the next steps. Output only the summary.\n\n"
    "Conversation:\n{conversation}"
)
_SESSION_PREFIXES = ("<environment_context>", "# agents.md instructions for", "<user_instructions>")


def approx_token_count(text: str) -> int:
    """Codex's ``approx_token_count``: UTF-8 bytes / 4, rounded up."""
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Keep the start and the end of ``text`` within about ``max_tokens`` tokens, with a marker
    naming how many tokens were cut (Codex's ``truncate_text`` with a token policy; h9eval's
    marker wording)."""
    raw = text.encode("utf-8", "surrogatepass")
    budget = max_tokens * 4
    if len(raw) <= budget:
        return text
    head = raw[: budget // 2].decode("utf-8", "ignore")
    tail = raw[len(raw) - (budget - budget // 2) :].decode("utf-8", "ignore") if budget else ""
    cut = approx_token_count(text) - approx_token_count(head) - approx_token_count(tail)
    return f"{head}\n[... {max(cut, 0)} tokens truncated ...]\n{tail}"


def is_session_prefix(m: Message) -> bool:
    """A user message that is part of Codex's initial context (AGENTS.md instructions, the
    environment context), not something the user typed."""
    return m.role == "user" and not m.tool_call_id and m.content.lstrip().lower().startswith(_SESSION_PREFIXES)


def _is_summary(m: Message, prefix: str) -> bool:
    return m.content.startswith(prefix + "\n")


def collect_user_messages(msgs: Sequence[Message], prefix: str = CODEX_SUMMARY_PREFIX) -> list[str]:
    """Codex's ``collect_user_messages``: the text of every user message, in order, except tool
    results, previous summaries and session-prefix messages."""
    return [
        m.content
        for m in msgs
        if m.role == "user" and not m.tool_call_id and not is_session_prefix(m) and not _is_summary(m, prefix)
    ]


def build_compacted_history(
    initial_context: Sequence[Message], user_messages: Sequence[str], summary_text: str, max_tokens: int
) -> tuple[list[Message], bool]:
    """Codex's ``build_compacted_history_with_limit``: the initial context, then the newest user
    messages within ``max_tokens`` (chosen newest first, the one that does not fit truncated
    to what is left, then put back in their order), then the summary as a user message.
    Returns the history and whether a message was truncated."""
    selected: list[str] = []
    truncated = False
    if max_tokens > 0:
        remaining = max_tokens
        for text in reversed(user_messages):
            if remaining == 0:
                break
            t = approx_token_count(text)
            if t <= remaining:
                selected.append(text)
                remaining -= t
            else:
                selected.append(truncate_to_tokens(text, remaining))
                truncated = True
                break
        selected.reverse()
    out = [*initial_context, *(Message("user", t) for t in selected)]
    out.append(Message("user", summary_text or "(no summary available)"))
    return out, truncated


@register
@dataclass(frozen=True, kw_only=True)
class CodexCompact(WindowedPolicy):
    """Codex CLI auto-compact: summarise everything, re-insert the recent user messages.

    The summarizer sees the whole history after the initial context. If it fails, the oldest
    item is trimmed and the summary retried (Codex does so when the compaction request itself
    overflows the window), until one item is left; then the history is left as it is and
    ``record.error`` says so. A forced or manual compaction (``/compact``) compacts now.

    Where this still differs from Codex, and why:

    1. Codex trims and retries only on a context-window error and retries other errors with
       backoff; h9eval's summarizers report no error kinds, so every failure trims. An item
       here is one message (an assistant message goes with all its calls and their results);
       Codex's items are finer (the text and each call are items, a call taking its output).
    2. Tokens are harness9's bytes/4 estimate of the messages (Codex compares the API's token
       usage); the re-insertion budget uses Codex's own bytes/4-rounded-up count of the text.
    3. The initial context is the system message plus the session-prefix user messages found
       in the history (AGENTS.md, environment context); Codex rebuilds it from its settings.
    4. The prompt, the summary prefix and the truncation marker are h9eval's wording.
    5. Codex's ghost snapshots (git state) have no counterpart in a transcript.
    6. In view mode the last compacted history is carried forward (Codex replaces its history).
    """

    kind: ClassVar[str] = "codex_compact"
    source: ClassVar[str] = "Codex CLI auto-compact (compact.rs: user messages re-inserted before a hand-off summary)"
    uses_summarizer: ClassVar[bool] = True
    claims_budget: ClassVar[bool] = False

    context_window_tokens: int = 272_000
    """Model window in tokens. 272,000 is Codex's GPT-5 window."""
    auto_compact_token_limit: int | None = None
    """Compact at this many tokens (``>=``; ``None``: 90 % of the window). The default is
    ``context_window_tokens * 9 // 10``, Codex's integer arithmetic."""
    user_message_max_tokens: int = 20_000
    """Tokens of recent user messages re-inserted before the summary (0: none). Newest first;
    Codex's ``COMPACT_USER_MESSAGE_MAX_TOKENS``."""
    summary_timeout_s: float = 60.0
    """A slower summary fails (seconds)."""

    def __post_init__(self) -> None:
        c = self._check
        c(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
        if self.auto_compact_token_limit is not None:
            c(
                self.auto_compact_token_limit > 0,
                "auto_compact_token_limit",
                "must be > 0",
                self.auto_compact_token_limit,
            )
        c(self.user_message_max_tokens >= 0, "user_message_max_tokens", "must be >= 0", self.user_message_max_tokens)
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)

    @property
    def limit_tokens(self) -> int:
        """The auto-compact limit in tokens."""
        if self.auto_compact_token_limit is not None:
            return self.auto_compact_token_limit
        return self.context_window_tokens * 9 // 10

    def start(self, env: CompactionEnv | None = None) -> CodexCompactRun:
        return CodexCompactRun(self, env or CompactionEnv())


class CodexCompactRun(ContinuedRun):
    """Codex CLI's compaction on one session; ``force`` is its ``/compact`` (compact now,
    whatever the usage)."""

    policy: CodexCompact
    calls: list[SummaryCall]

    def _summarize(self, items: list[Message], extra: dict[str, Any]) -> tuple[str | None, int]:
        """The summary of ``items``, trimming the oldest item after each failure; ``(text or
        None, items trimmed)``."""
        p = self.policy
        trimmed = 0
        while True:
            prompt = CODEX_COMPACT_PROMPT.replace("{conversation}", serialize_conversation(items), 1)
            text = request_peer_summary(
                self.env, self.calls, extra, items, prompt, previous=None, timeout_s=p.summary_timeout_s
            )
            if text is not None or self.env.summarizer is None or len(items) <= 1:
                return text, trimmed
            # drop the oldest item; the results of a dropped call go with it
            items = items[1:]
            while items and items[0].tool_call_id:
                items = items[1:]
            trimmed += 1
            if not items:
                return None, trimmed

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        p = self.policy
        bt = base_tokens if base_tokens is not None else estimate_tokens(base)
        extra: dict[str, Any] = {}
        fields: dict[str, Any] = {}
        error = ""
        view, tier = base, Tier.NONE
        if force or bt >= p.limit_tokens:
            initial = [m for i, m in enumerate(base) if (i == 0 and m.role == "system") or is_session_prefix(m)]
            items = [m for i, m in enumerate(base) if not ((i == 0 and m.role == "system") or is_session_prefix(m))]
            if items:
                text, trimmed = self._summarize(items, extra)
                extra["trimmed_items"] = trimmed
                if text is None:
                    error = "summary failed: the history is left as it is"
                else:
                    users = collect_user_messages(base)
                    view, truncated = build_compacted_history(
                        initial, users, CODEX_SUMMARY_PREFIX + "\n" + text, p.user_message_max_tokens
                    )
                    tier = Tier.FULL
                    kept = len(view) - len(initial) - 1
                    extra.update(reinserted_user_messages=kept, truncated_user_message=truncated)
                    fields = {"summarized": len(items), "preserved_tail": kept, "summary_text": text}
            else:
                extra["skipped"] = "nothing to summarize after the initial context"
        return PeerDecision(work=base, view=view, tier=tier, error=error, extra=extra, fields=fields)
