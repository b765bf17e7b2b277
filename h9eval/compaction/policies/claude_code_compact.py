"""Claude Code's auto-compact, as its users deobfuscated it.

Claude Code compacts when the conversation reaches its *effective* window (the model window
minus the tokens reserved for the summary's output, at most 20,000) minus a 13,000-token
buffer: 167,000 of 200,000, about 83.5 %. The conversation is then replaced by a summary,
followed by the files the agent read most recently (re-read, within a token budget) and the
todo list, as far as the transcript shows them. Later turns are appended to that.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``FULL`` when the conversation was
replaced, ``NONE`` otherwise (the view may be the last compacted conversation followed by the
new messages; ``record.error`` is set when a due compaction failed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction._peer import ContinuedRun, PeerDecision, request_peer_summary
from h9eval.compaction.repair import call_positions, paired_calls
from h9eval.compaction.base import CompactionEnv, WindowedPolicy, register
from h9eval.compaction.summary import SummaryCall
from h9eval.compaction.prompts import serialize_conversation
from h9eval.compaction.records import Tier
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "ClaudeCodeCompact",
    "ClaudeCodeCompactRun",
    "CLAUDE_CODE_SUMMARY_INTRO",
    "CLAUDE_CODE_COMPACT_PROMPT",
    "recent_files",
    "latest_todos",
]

#: h9eval's wording for the message that opens the compacted conversation
CLAUDE_CODE_SUMMARY_INTRO = (
    "This session continues an earlier conversation that ran out of context. "
    "Its summary follows; the recently read files and the todo list come after it.\n\n"
)
#: h9eval's wording for the compaction request (Claude Code's prompt is its own text)
CLAUDE_CODE_COMPACT_PROMPT = (
    "Summarize the conversation below in detail so that the work can continue without it: "
    "the user's explicit requests and intent, key technical concepts, files and code sections "
    "examined or changed (with their paths), errors and how they were fixed, problem solving "
    "so far, all user messages, pending tasks, the current work, and the next step. Output "
    "only the summary.\n\nConversation:\n{conversation}"
)


def _args(arguments: str) -> dict[str, Any]:
    try:
        v = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def recent_files(
    msgs: Sequence[Message], *, read_tools: Sequence[str], max_files: int, max_file_tokens: int, max_total_tokens: int
) -> list[tuple[str, str]]:
    """``[(path, content)]`` of the most recently read files, newest first: the last successful
    result of a read-tool call per ``file_path``, at most ``max_files``, each within
    ``max_file_tokens`` (larger ones are skipped) and all within ``max_total_tokens``."""
    positions = call_positions(msgs)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    used = 0
    pairs = paired_calls(msgs)
    for i in sorted(pairs, reverse=True):
        r = msgs[i]
        mi, k = positions[pairs[i]]
        tc = msgs[mi].tool_calls[k]
        if tc.name not in read_tools or r.is_error:
            continue
        path = _args(tc.arguments).get("file_path")
        if not isinstance(path, str) or not path or path in seen:
            continue
        seen.add(path)
        t = len(r.content.encode("utf-8", "surrogatepass")) // 4
        if t > max_file_tokens or used + t > max_total_tokens:
            continue
        out.append((path, r.content))
        used += t
        if len(out) >= max_files:
            break
    return out


def latest_todos(msgs: Sequence[Message], todo_tools: Sequence[str]) -> str | None:
    """The todo list of the last todo-tool call, one ``- [status] content`` line per item (the
    raw arguments when they are not a ``todos`` list); ``None`` when there is none."""
    for m in reversed(msgs):
        if m.role != "assistant":
            continue
        for tc in reversed(m.tool_calls):
            if tc.name in todo_tools:
                todos = _args(tc.arguments).get("todos")
                if not isinstance(todos, list):
                    return tc.arguments
                lines = []
                for t in todos:
                    if isinstance(t, dict):
                        lines.append(f"- [{t.get('status', '')}] {t.get('content', '')}")
                    else:
                        lines.append(f"- {t}")
                return "\n".join(lines) if lines else "(empty)"
    return None


@register
@dataclass(frozen=True, kw_only=True)
class ClaudeCodeCompact(WindowedPolicy):
    """Claude Code auto-compact: a summary, the recently read files and the todo list.

    Compacts when the conversation reaches the effective window (the window minus
    ``output_reserve_tokens``) minus ``buffer_tokens`` (167,000 of 200,000 by default). The
    view after a compaction is the system message, then one user message with the summary,
    then one user message per re-attached file (newest first, as read last in the transcript)
    and one with the todo list. If the summary fails the conversation is left as it is and
    ``record.error`` says so. A forced or manual compaction (``/compact``) compacts now.

    Where this still differs from Claude Code, and why:

    1. Claude Code is closed source; the threshold and the re-attachment limits are what its
       users deobfuscated (window - min(max output, 20,000) - 13,000; 5 files, 5,000 tokens
       each, 50,000 in all), not read from its code.
    2. Files are re-attached from the transcript's last read of each file, not re-read from
       disk (a replay has no file system): a file edited after its last read shows the old
       content. Files over the per-file limit are skipped, not truncated.
    3. Tokens are harness9's bytes/4 estimate, not the API's usage counts.
    4. The summary prompt and the wording of the attached messages are h9eval's.
    5. Claude Code attaches files and todos as system-reminder attachments inside messages;
       here they are plain user messages after the summary.
    6. In view mode the last compacted conversation is carried forward (Claude Code replaces
       its conversation and marks the boundary in its transcript).
    """

    kind: ClassVar[str] = "claude_code_compact"
    source: ClassVar[str] = "Claude Code auto-compact (effective window - 13k; summary + recent files + todo list)"
    uses_summarizer: ClassVar[bool] = True
    claims_budget: ClassVar[bool] = False

    context_window_tokens: int = 200_000
    """Model window in tokens."""
    output_reserve_tokens: int = 20_000
    """Tokens reserved for the summary's output; the effective window is the window minus this.
    20,000 is Claude Code's cap."""
    buffer_tokens: int = 13_000
    """Compact at the effective window minus this many tokens (``>=``)."""
    read_tools: tuple[str, ...] = ("Read",)
    """Tools whose results are file contents (the path in the ``file_path`` argument)."""
    max_files: int = 5
    """Recently read files re-attached after a compaction."""
    max_file_tokens: int = 5_000
    """A file of more tokens than this is not re-attached."""
    max_files_tokens: int = 50_000
    """Token budget of all re-attached files together."""
    todo_tools: tuple[str, ...] = ("TodoWrite",)
    """Tools whose latest call holds the todo list (in its ``todos`` argument)."""
    summary_timeout_s: float = 60.0
    """A slower summary fails (seconds)."""

    def __post_init__(self) -> None:
        c = self._check
        for name in ("read_tools", "todo_tools"):
            v = getattr(self, name)
            c(not isinstance(v, str), name, "must be a list of tool names, not a string", v)
            object.__setattr__(self, name, tuple(v))
            for t in getattr(self, name):
                c(isinstance(t, str) and t != "", name, "entries must be non-empty tool names", t)
        c(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
        c(self.output_reserve_tokens >= 0, "output_reserve_tokens", "must be >= 0", self.output_reserve_tokens)
        c(self.buffer_tokens >= 0, "buffer_tokens", "must be >= 0", self.buffer_tokens)
        c(
            self.threshold_tokens > 0,
            "buffer_tokens",
            "must leave a positive threshold (window - output_reserve_tokens - buffer_tokens = "
            f"{self.threshold_tokens})",
            self.buffer_tokens,
        )
        c(self.max_files >= 0, "max_files", "must be >= 0", self.max_files)
        c(self.max_file_tokens >= 0, "max_file_tokens", "must be >= 0", self.max_file_tokens)
        c(self.max_files_tokens >= 0, "max_files_tokens", "must be >= 0", self.max_files_tokens)
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)

    @property
    def threshold_tokens(self) -> int:
        """The auto-compact threshold: effective window minus the buffer."""
        return self.context_window_tokens - self.output_reserve_tokens - self.buffer_tokens

    def start(self, env: CompactionEnv | None = None) -> ClaudeCodeCompactRun:
        return ClaudeCodeCompactRun(self, env or CompactionEnv())


class ClaudeCodeCompactRun(ContinuedRun):
    """Claude Code's compaction on one session; ``force`` is its ``/compact`` (compact now,
    whatever the usage)."""

    policy: ClaudeCodeCompact
    calls: list[SummaryCall]

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        p = self.policy
        bt = base_tokens if base_tokens is not None else estimate_tokens(base)
        extra: dict[str, Any] = {}
        fields: dict[str, Any] = {}
        error = ""
        view, tier = base, Tier.NONE
        if force or bt >= p.threshold_tokens:
            sys = base[:1] if base and base[0].role == "system" else []
            rest = base[len(sys) :]
            if rest:
                prompt = CLAUDE_CODE_COMPACT_PROMPT.replace("{conversation}", serialize_conversation(rest), 1)
                text = request_peer_summary(
                    self.env, self.calls, extra, rest, prompt, previous=None, timeout_s=p.summary_timeout_s
                )
                if text is None:
                    error = "summary failed: the conversation is left as it is"
                else:
                    files = recent_files(
                        rest,
                        read_tools=p.read_tools,
                        max_files=p.max_files,
                        max_file_tokens=p.max_file_tokens,
                        max_total_tokens=p.max_files_tokens,
                    )
                    todos = latest_todos(rest, p.todo_tools)
                    attached = [
                        Message("user", f"[re-attached file {path}, as last read]\n{content}")
                        for path, content in files
                    ]
                    if todos is not None:
                        attached.append(Message("user", "[todo list]\n" + todos))
                    view = [*sys, Message("user", CLAUDE_CODE_SUMMARY_INTRO + text), *attached]
                    tier = Tier.FULL
                    extra.update(reattached_files=[path for path, _ in files], todo_list=todos is not None)
                    fields = {"summarized": len(rest), "preserved_tail": 0, "summary_text": text}
            else:
                extra["skipped"] = "nothing to summarize"
        return PeerDecision(work=base, view=view, tier=tier, error=error, extra=extra, fields=fields)
