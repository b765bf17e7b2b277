"""The deterministic, extractive, offline summarizers (the default; no network, no randomness).

:class:`OfflineSummarizer` reads the structured head of a :class:`SummaryRequest` (never the
prompt text) and writes a reply in harness9's anchor format (spec §3.10-§3.11, §4)::

    ## Anchors

    ### User Intent
    <task statement>
    Latest user request: <latest refinement>

    ### Execution Progress
    - bash: grep -n "class RenameIndex" django/... -> ok
    ...

    ## Summary
    <counts, last outcome, key paths>

so that the compactor's ``parse_anchors_and_summary`` recovers every section.
:class:`OfflineFreeTextSummarizer` renders the same material as prose under ``## Summary``
only (every anchor then parses as ``N/A``).

Heuristics (all case-insensitive unless noted; every item is whitespace-collapsed and clipped):

* **Intent.** The task statement is the first *substantial* user message (>= 40 characters,
  else the first non-empty one) that is not a tool result (``tool_call_id != ""``), not a
  ``[Context Compaction]`` message and not an observation (``OBSERVATION:`` prefix or a
  ``<returncode>`` tag). Inside ``<pr_description>``/``<issue>``/``<task>`` tags only the tag
  body is used; lines such as ``Consider the following PR description:`` or a lone
  ``Description`` are dropped; the text is clipped to ``max_intent_chars`` at a sentence end
  when possible. Later user messages are refinements; the latest one wins and is written as
  ``Latest user request: ...``. When a prior intent exists (``request.previous_anchors`` or
  a ``[Context Compaction]`` message in the head), every user message in the head is a
  refinement, except one whose text repeats the prior task statement.
* **Execution progress.** One line per executed tool call: tool name, a short argument (the
  ``command``/``path``/``query``/... field of the JSON arguments, first line, a leading
  ``cd DIR &&`` dropped) and ``ok``, ``failed`` or ``no result`` from the paired tool result.
  Consecutive identical lines collapse to ``(xN)``. Beyond ``max_progress_lines`` the oldest
  lines are grouped into one ``earlier: N tool calls (bash x40, edit x2; 3 failed)`` line.
  A head without tool calls falls back to the first sentence of each assistant message.
* **Failure.** A tool result failed when ``is_error`` is set, or it carries an explicit exit
  status (``<returncode>N</returncode>``, ``exit code N``, ``exit status N``) that is not 0;
  without an explicit status, when it contains ``Traceback (most recent call last)``, a line
  starting with ``Error:``/``error:``/``fatal:``, ``FAILED`` (case-sensitive) or
  ``command not found``. An explicit status of 0 wins over error-looking text, because grep
  or cat output of source code is full of ``except ValueError:``.
* **Tried solutions.** Each failed call with its error line: the last ``XxxError: ...`` /
  ``XxxException`` line (the end of a traceback), else the first line with ``error``,
  ``FAILED``, ``fatal`` or ``not found``, else the first output line.
* **Key decisions.** Assistant sentences containing a choice cue: ``I'll use``, ``let's use``,
  ``going with``, ``decided``, ``instead of``, ``rather than``, ``because``, ``chose``,
  ``opt for``, ``the fix is``, ``the issue is``, ``root cause``, ``the best approach``...
* **Next steps.** From the latest assistant message with a plan cue (``next``, ``plan``,
  ``TODO``, ``then`` at a sentence start, ``after that``, numbered ``1.`` lines or
  ``- [ ]`` checklists): its list lines when it has some, else its cue sentences. With no such
  message, the ``Let me ...``/``I need to ...``/``I'll ...`` sentences of the last assistant
  message.
* **Constraints** (only when requested). User sentences with ``must``, ``never``, ``don't``,
  ``do not``, ``always``, ``only``, ``should not``, ``cannot``, ``avoid``.
* **Artifacts** (only when requested). Paths written by edit/write/create/str_replace/insert/
  apply_patch tool calls, by ``sed -i``, ``> file``/``>> file`` (not ``/dev/null``), ``tee``,
  ``cp``/``mv`` (destination), ``touch``; then the most referenced paths and the most
  frequent backticked identifiers of the assistant text.
* **Summary.** Counts of the segment, running totals (parsed back from the previous summary's
  ``Totals so far`` line), the last tool outcome, the last assistant note and key paths.

Incremental merging (harness9 MergeAnchors keeps an old anchor only when the new content is
exactly ``N/A``): when ``request.previous_anchors`` is not ``None`` a section with nothing new
is written as ``N/A``; a section with new items is written in full, prior bullets first, so
the overwrite loses nothing but what the caps drop. Without previous anchors a
``[Context Compaction]`` message in the head supplies the prior content, written back
unchanged when nothing new was found (no merge will happen).

Budget: the reply is at most ``request.max_output_tokens * 4`` UTF-8 bytes (harness9's
bytes/4 estimate). Over budget, the largest bullet section loses its oldest item (counted in
an ``earlier``/``more`` line) until every section has one item, then item texts are clipped
shorter (down to 40 characters), then summary lines are dropped, and as a last resort the
text is cut at the byte budget. Every step is deterministic.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

from h9eval.compaction.anchors import (
    ANCHOR_HEADERS,
    ANCHOR_TYPES,
    COMPACTION_MARKER,
    EXTRA_ANCHOR_TYPES,
    NA,
    go_trim,
    is_no_information,
    parse_anchors_and_summary,
)
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall
from h9eval.compaction.summary import SummaryReply, SummaryRequest

__all__ = [
    "OfflineSummarizer",
    "OfflineFreeTextSummarizer",
    "Extraction",
    "ToolStep",
    "extract",
    "HEURISTICS_VERSION",
]

# Bumped whenever a heuristic changes the output, so cached replies of the old version miss.
HEURISTICS_VERSION = 1

_ALL_TYPES = ANCHOR_TYPES + EXTRA_ANCHOR_TYPES

# ---------------------------------------------------------------------------------------------
# Small text helpers


def _collapse(s: str) -> str:
    return " ".join(s.split())


def _clip(s: str, n: int) -> str:
    """Whitespace-collapsed ``s`` of at most ``n`` characters (``...`` marks a cut)."""
    s = _collapse(s)
    if len(s) <= n:
        return s
    if n <= 3:
        return s[:n]
    return s[: n - 3].rstrip() + "..."


def _clip_sentence(s: str, n: int) -> str:
    """Like :func:`_clip` but prefers to end at a sentence end in the second half."""
    s = _collapse(s)
    if len(s) <= n:
        return s
    cut = s[:n]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    if end >= n // 2:
        return cut[: end + 1]
    return _clip(s, n)


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])|\n+")


def _sentences(text: str) -> list[str]:
    return [t for t in (go_trim(p) for p in _SENT_SPLIT.split(text)) if t]


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


def _cut_bytes(s: str, n: int) -> str:
    """The longest prefix of ``s`` with at most ``n`` UTF-8 bytes (never splits a character)."""
    b = s.encode("utf-8")
    if len(b) <= n:
        return s
    return b[:n].decode("utf-8", errors="ignore")


# ---------------------------------------------------------------------------------------------
# Message classification


def _is_compaction(m: Message) -> bool:
    return not m.is_tool_result and m.content.lstrip().startswith(COMPACTION_MARKER)


_OBSERVATION = re.compile(r"^\s*(OBSERVATION:|Observation:|<returncode>)|<returncode>-?\d+</returncode>")


def _is_user_text(m: Message) -> bool:
    """A user-authored message: role user, not a tool result, compaction or observation."""
    if m.role != "user" or m.is_tool_result or _is_compaction(m):
        return False
    return bool(m.content.strip()) and not _OBSERVATION.search(m.content[:2000])


_TASK_TAG = re.compile(r"<(pr_description|issue|task|problem_statement)>(.*?)(?:</\1>|$)", re.S)
_BOILERPLATE = re.compile(
    r"^\s*((consider|here is|below is|the following)\b.*:\s*$|description:?\s*$|<[^>]+>\s*$)", re.I
)


def _intent_text(content: str, max_chars: int) -> str:
    """The task statement of one user message (see the module docstring)."""
    m = _TASK_TAG.search(content)
    body = m.group(2) if m else content
    lines = [ln for ln in body.split("\n") if ln.strip() and not _BOILERPLATE.match(ln)]
    return _clip_sentence(" ".join(lines) or body, max_chars)


# ---------------------------------------------------------------------------------------------
# Tool calls and results

_ARG_KEYS = ("command", "cmd", "path", "file_path", "filename", "file", "query", "pattern", "url", "code", "input")
_CD_PREFIX = re.compile(r"^\s*cd\s+\S+\s*&&\s*")


def _parse_args(tc: ToolCall) -> object:
    try:
        return json.loads(tc.arguments) if tc.arguments else {}
    except ValueError:
        return tc.arguments


def _short_arg(tc: ToolCall, n: int = 80) -> str:
    """The one argument that identifies a call, first line only, clipped to ``n`` chars."""
    args = _parse_args(tc)
    text = ""
    if isinstance(args, dict):
        cmd = args.get("command")
        path = args.get("path") or args.get("file_path")
        # str_replace_editor-style tools: "command" is a sub-command, the path is the point.
        if isinstance(cmd, str) and isinstance(path, str) and " " not in cmd:
            text = f"{cmd} {path}"
        else:
            for k in _ARG_KEYS:
                v = args.get(k)
                if isinstance(v, str) and v.strip():
                    text = v
                    break
            else:
                text = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
    elif isinstance(args, str):
        text = args
    first = next((ln for ln in text.split("\n") if ln.strip()), "")
    return _clip(_CD_PREFIX.sub("", first), n)


_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit (?:status|code):?\s*(-?\d+)|\bexited with code\s*(-?\d+)", re.I)
_FAIL_TEXT = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:Error|error|ERROR|fatal):|\bFAILED\b|command not found", re.M
)
_EXC_LINE = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Exit|Interrupt)\b.*|E\s+\w+Error.*)$", re.M)
_ERR_LINE = re.compile(r"error|FAILED|fatal|not found|denied|cannot|No such file", re.I)
_TAG_LINE = re.compile(r"^\s*</?(output|returncode|warning)>.*$|<returncode>-?\d+</returncode>", re.M)


def _exit_status(content: str) -> int | None:
    m = _RC.search(content)
    if not m:
        return None
    return int(next(g for g in m.groups() if g is not None))


def _failed(result: Message) -> bool:
    if result.is_error:
        return True
    rc = _exit_status(result.content)
    if rc is not None:
        return rc != 0
    return bool(_FAIL_TEXT.search(result.content))


def _body_lines(content: str) -> list[str]:
    return [ln.strip() for ln in _TAG_LINE.sub("", content).split("\n") if ln.strip()]


def _error_line(content: str, n: int) -> str:
    """The line that says why a call failed: the last exception line (a traceback ends with
    it), else the last error-looking line, else the last output line, else ``exit N``."""
    body = _TAG_LINE.sub("", content)
    exc = _EXC_LINE.findall(body)
    if exc:
        return _clip(exc[-1], n)
    lines = _body_lines(content)
    for ln in reversed(lines):
        if _ERR_LINE.search(ln):
            return _clip(ln, n)
    if lines:
        return _clip(lines[-1], n)
    rc = _exit_status(content)
    return f"exit {rc}" if rc is not None else ""


# ---------------------------------------------------------------------------------------------
# Written files

_WRITE_TOOL = re.compile(r"write|edit|create|str_replace|insert|apply_patch|patch|replace", re.I)
_EDITOR_WRITE_CMDS = {"create", "str_replace", "insert", "write", "undo_edit", "edit", "overwrite", "append"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update) File:\s*(\S+)|^\+\+\+ b/(\S+)", re.M)
_REDIRECT = re.compile(r"(?<![\d&>])(>>?)\s*([^\s;&|<>()]+)")
_PATH = re.compile(r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}|[\w-]+\.(?:py|js|ts|go|rs|java|c|h|cpp|md|txt|json|toml|yaml|yml|cfg|ini|sh|rst))\b")


def _written_paths(tc: ToolCall) -> list[tuple[str, str]]:
    """``(path, how)`` pairs a call writes; ``how`` is ``created`` or ``modified``."""
    args = _parse_args(tc)
    out: list[tuple[str, str]] = []
    name = tc.name.lower()
    if isinstance(args, dict):
        cmd = args.get("command")
        path = args.get("path") or args.get("file_path") or args.get("filename") or args.get("file")
        is_shell = isinstance(cmd, str) and " " in cmd.strip() or name in ("bash", "shell", "execute_bash", "run", "terminal", "exec")
        if isinstance(path, str) and not is_shell and _WRITE_TOOL.search(name):
            sub = cmd if isinstance(cmd, str) else ""
            if not sub or sub in _EDITOR_WRITE_CMDS:
                created = "create" in name or "write" in name or sub in ("create", "write", "overwrite")
                out.append((path, "created" if created else "modified"))
        for k in ("patch", "input", "diff"):
            v = args.get(k)
            if isinstance(v, str) and ("apply_patch" in name or "patch" in name or "*** Begin Patch" in v):
                out += [(a or b, "modified") for a, b in _PATCH_FILE.findall(v)]
        if is_shell and isinstance(cmd, str):
            out += _shell_writes(cmd)
    elif isinstance(args, str) and "apply_patch" in name:
        out += [(a or b, "modified") for a, b in _PATCH_FILE.findall(args)]
    return out


def _shell_writes(cmd: str) -> list[tuple[str, str]]:
    # Only the first line: a heredoc body (Python, SQL...) is full of '>' that are not redirections.
    line = cmd.split("\n", 1)[0]
    out: list[tuple[str, str]] = []
    for part in re.split(r"&&|\|\||;|\|", line):
        part = part.strip()
        for op, target in _REDIRECT.findall(part):
            if target.startswith("/dev/") or target.startswith("&") or target.startswith("<"):
                continue
            out.append((target, "created" if op == ">" else "modified"))
        try:
            toks = shlex.split(part, posix=True)
        except ValueError:
            toks = part.split()
        if not toks:
            continue
        prog = toks[0]
        if prog == "sed" and any(t.startswith("-i") for t in toks[1:]):
            files = [t for t in toks[1:] if not t.startswith("-") and _PATH.fullmatch(t)]
            out += [(f, "modified") for f in files]
        elif prog in ("cp", "mv") and len(toks) >= 3 and not toks[-1].startswith("-"):
            out.append((toks[-1], "written"))
        elif prog in ("touch", "tee"):
            out += [(t, "created" if prog == "touch" else "modified") for t in toks[1:] if not t.startswith("-")]
    return out


_BACKTICK_ID = re.compile(r"`([A-Za-z_][\w.]*(?:\(\))?)`")


# ---------------------------------------------------------------------------------------------
# Extraction


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One executed tool call: ``label`` (``name: short arg``), its outcome and error line."""

    name: str
    label: str
    outcome: str  # "ok", "failed" or "no result"
    error: str = ""
    output_first_line: str = ""


@dataclass
class Extraction:
    """Everything the offline summarizers extract from a head; lists are oldest first."""

    task: str = ""
    refinement: str = ""
    steps: list[ToolStep] = field(default_factory=list)
    chat_progress: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    written: list[tuple[str, str]] = field(default_factory=list)
    paths: Counter[str] = field(default_factory=Counter)
    identifiers: Counter[str] = field(default_factory=Counter)
    prior_anchors: dict[str, str] = field(default_factory=dict)
    prior_summary: str = ""
    plan_age: int = 0
    n_messages: int = 0
    n_user: int = 0
    n_assistant: int = 0
    last_assistant_note: str = ""

    @property
    def n_calls(self) -> int:
        return len(self.steps)

    @property
    def n_failed(self) -> int:
        return sum(s.outcome == "failed" for s in self.steps)


_DECISION = re.compile(
    r"\b(I'?ll use|I will use|I'm going to use|we'll use|let'?s use|let us use|going with|go with|"
    r"decided|decide to|decision|instead of|rather than|chose|choose to|opt(?:ed)? for|because|"
    r"the (?:best|right|correct|simplest|cleanest) (?:approach|fix|way|solution)|the fix (?:is|should|will)|"
    r"root cause|the (?:issue|problem|bug) is)\b",
    re.I,
)
_PLAN_CUE = re.compile(r"\b(next|plan|TODO|after that|afterwards)\b|^then,?\s+(?:I|we|let)\b", re.I)
_LIST_LINE = re.compile(r"^\s*(?:\d+[.)]\s+|-\s*\[[ xX]?\]\s*|[-*]\s+TODO\b)")
_WEAK_PLAN = re.compile(r"^(?:now,?\s+)?(let me|let's|I need to|I'll|I will|we need to|I should)\b", re.I)
_LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]\s+|\d+[.)]\s+)+")
# Assistant turns after which a stated plan is superseded by the latest "let me ..." sentence.
_PLAN_STALE_TURNS = 3
_CONSTRAINT = re.compile(r"\b(must|never|don't|do not|always|only|should not|shouldn't|cannot|can't|avoid)\b", re.I)


def _prior_from_head(head: Sequence[Message]) -> tuple[dict[str, str], str]:
    """Anchors and summary of the latest ``[Context Compaction]`` message in the head."""
    for m in reversed(head):
        if _is_compaction(m):
            text = m.content.lstrip()[len(COMPACTION_MARKER) :]
            anchors, summary = parse_anchors_and_summary(text, _ALL_TYPES)
            # "## Offloaded References" follows the summary; it is not part of it.
            summary = summary.split("\n## Offloaded References", 1)[0]
            return {a.type: a.content for a in anchors if a.content != NA}, go_trim(summary)
    return {}, ""


def extract(
    head: Sequence[Message],
    *,
    previous_anchors: Iterable[tuple[str, str]] | None = None,
    previous_summary: str = "",
    max_intent_chars: int = 400,
    max_item_chars: int = 200,
) -> Extraction:
    """Extract the material of both offline summarizers from ``head`` (see module docstring).

    ``previous_anchors`` (the compactor's last anchors) take precedence over the anchors of a
    ``[Context Compaction]`` message in the head; character caps are per item.
    """
    ex = Extraction()
    ex.prior_anchors, ex.prior_summary = _prior_from_head(head)
    for typ, content in previous_anchors or ():
        if content != NA and content:
            ex.prior_anchors[typ] = content
    if previous_summary:
        ex.prior_summary = previous_summary
    prior_task = _intent_lines(ex.prior_anchors.get("user_intent", ""))[0]

    results = {m.tool_call_id: m for m in head if m.is_tool_result}
    user_msgs: list[Message] = []
    for m in head:
        if m.role in ("system",) and not m.is_tool_result:
            continue
        ex.n_messages += 1
        if _is_user_text(m):
            user_msgs.append(m)
            ex.n_user += 1
        elif m.is_assistant and not m.is_tool_result:
            ex.n_assistant += 1
            _read_assistant(ex, m, results, max_item_chars)

    # Intent: the first substantial user message is the task unless a prior intent exists.
    refinements = user_msgs
    if not prior_task and user_msgs:
        # "Substantial": a one-word "continue" or "ok" before the real task is not the task.
        i = next((k for k, u in enumerate(user_msgs) if len(_collapse(u.content)) >= 40), 0)
        ex.task = _intent_text(user_msgs[i].content, max_intent_chars)
        refinements = user_msgs[i + 1 :]
    news = [
        u
        for u in refinements
        if not prior_task or not _same_task(_intent_text(u.content, max_intent_chars), prior_task)
    ]
    if news:
        ex.refinement = _intent_text(news[-1].content, max_intent_chars)
    for u in user_msgs:
        for s in _sentences(_TASK_TAG.sub(lambda mt: mt.group(2), u.content)):
            if _CONSTRAINT.search(s) and 12 <= len(s):
                ex.constraints.append(_clip(_LIST_MARK.sub("", s), max_item_chars))
    ex.constraints = _dedupe(ex.constraints)
    ex.decisions = _dedupe(ex.decisions)
    ex.written = _dedupe(ex.written)
    return ex


def _same_task(a: str, b: str) -> bool:
    a, b = a.rstrip("."), b.rstrip(".")
    k = min(len(a), len(b), 60)
    return k > 0 and a[:k] == b[:k]


def _read_assistant(ex: Extraction, m: Message, results: dict[str, Message], n: int) -> None:
    text = m.content
    sents = _sentences(text)
    if sents:
        note = ""
        for s in sents:
            note = f"{note} {s}".strip()
            if len(note) >= 40:
                break
        ex.last_assistant_note = _clip(note, n)
        ex.chat_progress.append(_clip(note, n))
    for s in sents:
        if _DECISION.search(s):
            ex.decisions.append(_clip(_LIST_MARK.sub("", s), n))
    plan = _plan_items(text, n)
    if plan:
        ex.next_steps = plan
        ex.plan_age = 0
    else:
        ex.plan_age += 1
        weak = [s for s in sents if _WEAK_PLAN.search(s)]
        # A stated plan goes stale after a few more turns; then the latest "let me ..." is
        # a better guess at what comes next.
        if weak and (not ex.next_steps or ex.plan_age > _PLAN_STALE_TURNS):
            ex.next_steps = ["(current) " + _clip(weak[-1], n)]
    for ident in _BACKTICK_ID.findall(text):
        if len(ident) >= 3:
            ex.identifiers[ident] += 1
    for tc in m.tool_calls:
        res = results.get(tc.id)
        label = f"{tc.name}: {_short_arg(tc)}".rstrip(": ")
        if res is None:
            ex.steps.append(ToolStep(tc.name, label, "no result"))
        else:
            failed = _failed(res)
            first = next(iter(_body_lines(res.content)), "")
            ex.steps.append(
                ToolStep(
                    tc.name,
                    label,
                    "failed" if failed else "ok",
                    _error_line(res.content, n) if failed else "",
                    _clip(first, n),
                )
            )
        ex.written += _written_paths(tc)
        # Only the first line of a command: heredoc bodies mention paths they never touch.
        for p in _PATH.findall(tc.arguments.split("\\n", 1)[0]):
            ex.paths[p.lstrip("./") if p.startswith("./") else p] += 1


def _plan_items(text: str, n: int) -> list[str]:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    listed = [_LIST_LINE.sub("", ln).strip() for ln in lines if _LIST_LINE.match(ln)]
    has_cue = any(_PLAN_CUE.search(s) for s in _sentences(text))
    if listed and (has_cue or any("[ ]" in ln or "TODO" in ln for ln in lines)):
        return [_clip(x, n) for x in listed if x]
    cued = [_clip(s, n) for s in _sentences(text) if _PLAN_CUE.search(s) and not _LIST_LINE.match(s)]
    if cued:
        return cued
    if listed and any(_WEAK_PLAN.search(s) for s in _sentences(text)):
        return [_clip(x, n) for x in listed if x]
    return []


def _dedupe(items: Iterable[object]) -> list:  # type: ignore[type-arg]
    seen: set[object] = set()
    out = []
    for it in items:
        if it not in seen:
            seen.add(it)
            out.append(it)
    return out


def _intent_lines(content: str) -> list[str]:
    lines = [go_trim(ln) for ln in content.split("\n") if go_trim(ln) and not is_no_information(ln)]
    return lines or [""]


def _bullets(content: str) -> list[str]:
    """Bullet items of a prior anchor (``- `` stripped; N/A lines dropped)."""
    out = []
    for ln in content.split("\n"):
        t = go_trim(ln)
        if not t or is_no_information(t):
            continue
        out.append(t[2:] if t.startswith("- ") else t)
    return out


# ---------------------------------------------------------------------------------------------
# Sections and the budget


@dataclass
class _Section:
    """A list of items of which the newest ``keep`` are rendered; ``overflow`` describes the
    dropped ones in one line (or ``None``)."""

    type: str
    items: list[str]
    keep: int
    overflow: Callable[[int], str | None] | None = None
    bullets: bool = True
    na_if_empty: bool = True

    def visible(self, cap: int) -> list[str]:
        shown = self.items[len(self.items) - self.keep :] if self.keep < len(self.items) else list(self.items)
        shown = [_clip(x, cap) for x in shown]
        dropped = len(self.items) - len(shown)
        if dropped > 0 and self.overflow is not None:
            line = self.overflow(dropped)
            if line:
                shown.insert(0, _clip(line, max(cap, 60)))
        return shown


def _collapse_steps(steps: Sequence[ToolStep]) -> list[tuple[str, list[ToolStep]]]:
    """Consecutive identical ``label -> outcome`` lines as one ``(xN)`` line."""
    out: list[tuple[str, list[ToolStep]]] = []
    for s in steps:
        line = f"{s.label} -> {s.outcome}"
        if out and out[-1][1][0].label == s.label and out[-1][1][0].outcome == s.outcome:
            out[-1][1].append(s)
        else:
            out.append((line, [s]))
    return [(line if len(g) == 1 else f"{line} (x{len(g)})", g) for line, g in out]


def _steps_overflow(groups: list[list[ToolStep]]) -> Callable[[int], str | None]:
    def describe(dropped: int) -> str | None:
        # `dropped` counts rendered lines; prior bullets (not steps) are not in `groups`.
        gone = [s for g in groups[:dropped] for s in g]
        if not gone:
            return f"earlier: {dropped} more items"
        by_tool = Counter(s.name for s in gone)
        tools = ", ".join(f"{k} x{v}" for k, v in sorted(by_tool.items(), key=lambda kv: (-kv[1], kv[0])))
        failed = sum(s.outcome == "failed" for s in gone)
        return f"earlier: {len(gone)} tool calls ({tools}; {failed} failed)"

    return describe


def _more(what: str) -> Callable[[int], str | None]:
    return lambda k: f"(+{k} earlier {what} omitted)"


_TOTALS = re.compile(r"Totals so far: (\d+) messages, (\d+) tool calls, (\d+) failed")


@dataclass(frozen=True, kw_only=True)
class OfflineSummarizer:
    """Deterministic extractive summarizer in harness9's anchor format (module docstring).

    ``max_progress_lines``: Execution Progress bullets kept, oldest grouped into one
    ``earlier`` line; default 12. ``max_items``: bullets kept in every other section; default 6.
    ``max_item_chars``: characters per bullet before the budget shrinks them; default 200.
    ``max_intent_chars``: characters of the task statement and of the latest refinement;
    default 400. The byte budget comes from ``request.max_output_tokens`` (x4 bytes).
    ``na_text``: what a section with nothing (new) says; default ``N/A``, which harness9's
    merge skips. ``- N/A`` is what harness9's prompt asks a model to write, and what a compliant
    model does: harness9's merge then overwrites known anchors with it (the trap the
    ``na_safe_merge`` option removes).
    """

    max_progress_lines: int = 12
    max_items: int = 6
    max_item_chars: int = 200
    max_intent_chars: int = 400
    na_text: str = "N/A"

    name = "offline"
    # The reply depends on the structured head, not only on the prompt text: the cache keys it.
    uses_structured_input = True
    model = "offline"

    def __post_init__(self) -> None:
        for f in ("max_progress_lines", "max_items"):
            if getattr(self, f) < 1:
                raise ConfigError(f"{f} ({getattr(self, f)}) must be >= 1")
        for f in ("max_item_chars", "max_intent_chars"):
            if getattr(self, f) < 40:
                raise ConfigError(f"{f} ({getattr(self, f)}) must be >= 40 characters")
        if not is_no_information(self.na_text) or "\n" in self.na_text:
            raise ConfigError(f"na_text must be a one-line 'no information' text such as N/A or - N/A, got {self.na_text!r}")

    @property
    def summarizer_id(self) -> str:
        params = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return f"{self.name}/v{HEURISTICS_VERSION}{params}"

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        t0 = time.perf_counter()
        ex = extract(
            request.head,
            previous_anchors=request.previous_anchors,
            previous_summary=request.previous_summary,
            max_intent_chars=self.max_intent_chars,
            max_item_chars=self.max_item_chars,
        )
        text = self._render(ex, request)
        return SummaryReply(
            text=text,
            input_tokens=(_utf8_len(request.system_prompt) + _utf8_len(request.user_prompt)) // 4,
            output_tokens=_utf8_len(text) // 4,
            # No model latency offline: reporting 0 keeps results byte-identical across reruns;
            # the compute time is kept in ``extra`` for anyone profiling the heuristics.
            latency_s=0.0,
            model=self.model,
            extra={"n_tool_calls": ex.n_calls, "n_failed": ex.n_failed, "compute_s": time.perf_counter() - t0},
        )

    # -- building sections --------------------------------------------------------------------

    def _sections(self, ex: Extraction, types: Sequence[str], merge: bool) -> list[_Section]:
        n = self.max_items
        groups = _collapse_steps(ex.steps)
        new: dict[str, tuple[list[str], int, Callable[[int], str | None] | None]] = {
            "execution_progress": (
                [g[0] for g in groups] if groups else ex.chat_progress[-self.max_progress_lines :],
                self.max_progress_lines,
                None,
            ),
            "key_decision": (ex.decisions, n, _more("decisions")),
            "tried_solution": (
                _dedupe(f"{s.label} -> failed: {s.error}".rstrip(": ") for s in ex.steps if s.outcome == "failed"),
                n,
                _more("failures"),
            ),
            "next_step": (ex.next_steps, n, _more("steps")),
            "constraint": (ex.constraints, n, _more("constraints")),
            "artifact": (self._artifacts(ex), n + 2, _more("artifacts")),
        }
        out: list[_Section] = []
        for typ in types:
            if typ == "user_intent":
                out.append(self._intent_section(ex, merge))
                continue
            if typ not in new:
                continue
            items, keep, overflow = new[typ]
            prior = _bullets(ex.prior_anchors.get(typ, ""))
            if typ == "execution_progress" and groups:
                # The overflow line needs the structured steps; prior bullets come first and are
                # dropped first, so the callback counts them before the steps.
                overflow = self._progress_overflow(len(prior), [g[1] for g in groups])
            if not items:
                # Nothing new: N/A lets harness9's merge keep the old value; without a merge
                # the prior content must be written back or it is lost.
                items = [] if merge else prior
            else:
                items = _dedupe(prior + list(items))
            out.append(_Section(typ, items, keep, overflow))
        return out

    def _progress_overflow(self, n_prior: int, groups: list[list[ToolStep]]) -> Callable[[int], str | None]:
        inner = _steps_overflow(groups)

        def describe(dropped: int) -> str | None:
            if dropped <= n_prior:
                return f"(+{dropped} earlier progress items omitted)"
            line = inner(dropped - n_prior)
            return line if n_prior == 0 else f"{line}; +{n_prior} earlier items"

        return describe

    def _intent_section(self, ex: Extraction, merge: bool) -> _Section:
        prior = _intent_lines(ex.prior_anchors.get("user_intent", ""))
        task = ex.task or prior[0]
        if not ex.task and not ex.refinement:
            lines = [] if merge else [ln for ln in prior if ln]
        else:
            lines = [task] if task else []
            if ex.refinement:
                lines.append("Latest user request: " + ex.refinement)
        return _Section("user_intent", lines, max(len(lines), 1), None, bullets=False)

    def _artifacts(self, ex: Extraction) -> list[str]:
        # Newest items survive the caps, so the most referenced written files go last:
        # scratch scripts are written once, the files under repair are read again and again.
        order = sorted(range(len(ex.written)), key=lambda i: (ex.paths[ex.written[i][0]], i))
        items = [f"{ex.written[i][0]} ({ex.written[i][1]})" for i in order]
        written = {p for p, _ in ex.written}
        top = [p for p, _ in sorted(ex.paths.items(), key=lambda kv: (-kv[1], kv[0])) if p not in written][:5]
        if top:
            items.append("referenced: " + ", ".join(top))
        ids = [i for i, _ in sorted(ex.identifiers.items(), key=lambda kv: (-kv[1], kv[0]))][:8]
        if ids:
            items.append("identifiers: " + ", ".join(ids))
        return items

    def _summary_lines(self, ex: Extraction) -> list[str]:
        lines = [
            f"This segment: {ex.n_messages} messages ({ex.n_user} user, {ex.n_assistant} assistant), "
            f"{ex.n_calls} tool calls, {ex.n_failed} failed."
        ]
        m = _TOTALS.search(ex.prior_summary)
        # Running totals only when they can be right: from scratch, or continuing our own line.
        if m or not ex.prior_summary:
            tm, tc, tf = (int(g) for g in m.groups()) if m else (0, 0, 0)
            lines.append(
                f"Totals so far: {tm + ex.n_messages} messages, {tc + ex.n_calls} tool calls, {tf + ex.n_failed} failed."
            )
        if ex.steps:
            s = ex.steps[-1]
            detail = s.error or s.output_first_line
            lines.append(f"Last outcome: {s.label} -> {s.outcome}" + (f" ({detail})" if detail else "") + ".")
        if ex.last_assistant_note:
            lines.append(f"Last assistant note: {ex.last_assistant_note}")
        weight = Counter(ex.paths)
        for p, _ in ex.written:
            weight[p] += 2  # a written file matters more than one merely read
        paths = [p for p, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
        if paths:
            lines.append("Key paths: " + ", ".join(paths) + ".")
        if ex.prior_summary and not m:
            lines.append("Earlier: " + ex.prior_summary.split("\n", 1)[0])
        return lines

    # -- rendering ------------------------------------------------------------------------------

    def _render(self, ex: Extraction, request: SummaryRequest) -> str:
        merge = request.previous_anchors is not None
        sections = self._sections(ex, request.anchor_types, merge)
        summary = self._summary_lines(ex)
        return _fit(lambda cap: self._format(sections, summary, cap), sections, summary, request, self.max_item_chars)

    def _format(self, sections: Sequence[_Section], summary: Sequence[str], cap: int) -> str:
        parts = ["## Anchors\n"]
        for s in sections:
            shown = s.visible(cap if s.bullets else max(cap, 2 * cap))
            if not shown:
                body = self.na_text
            elif s.bullets:
                body = "\n".join("- " + x for x in shown)
            else:
                body = "\n".join(shown)
            parts.append(f"### {ANCHOR_HEADERS[s.type]}\n{body}\n")
        parts.append("## Summary\n" + "\n".join(_clip(x, max(cap, 60) * 2) for x in summary))
        return "\n".join(parts)


def _fit(
    render: Callable[[int], str],
    sections: list[_Section],
    summary: list[str],
    request: SummaryRequest,
    cap: int,
) -> str:
    """Shrink until ``render(cap)`` fits ``request.max_output_tokens * 4`` bytes (docstring)."""
    budget = max(request.max_output_tokens, 0) * 4
    text = render(cap)
    while _utf8_len(text) > budget:
        shrinkable = [s for s in sections if s.bullets and min(s.keep, len(s.items)) > 1]
        if shrinkable:
            # The biggest section pays first; ties go to the later section (less central).
            big = max(
                enumerate(shrinkable),
                key=lambda iv: (sum(_utf8_len(x) for x in iv[1].visible(cap)), iv[0]),
            )[1]
            big.keep = min(big.keep, len(big.items)) - 1
        elif cap > 40:
            cap = max(40, cap // 2)
        elif len(summary) > 1:
            summary.pop()
        else:
            return _cut_bytes(text, budget)
        text = render(cap)
    return text


@dataclass(frozen=True, kw_only=True)
class OfflineFreeTextSummarizer(OfflineSummarizer):
    """The same extraction written as prose under ``## Summary`` only (no anchors), so every
    anchor parses as ``N/A``; same parameters and budget as :class:`OfflineSummarizer`.

    Incrementally, the task line of the previous summary is kept (when the head no longer has
    the task) and the rest of it is appended as ``Earlier: ...`` (its own ``Earlier`` part
    dropped, so the text never nests)."""

    name = "offline_free_text"

    def _render(self, ex: Extraction, request: SummaryRequest) -> str:
        prev = ex.prior_summary
        prev_task = ""
        earlier: list[str] = []
        for ln in prev.split("\n"):
            t = go_trim(ln)
            if t.startswith("Task: ") and not prev_task:
                prev_task = t[len("Task: ") :]
            elif t and not t.startswith("Earlier: ") and not t.startswith("This segment: "):
                earlier.append(t)
        if not prev_task and ex.prior_anchors.get("user_intent"):
            prev_task = _intent_lines(ex.prior_anchors["user_intent"])[0]
        task = ex.task or prev_task
        groups = _collapse_steps(ex.steps)
        sections = [
            _Section("user_intent", [task] if task else [], 1, None, bullets=False),
            _Section("refinement", [ex.refinement] if ex.refinement else [], 1, None, bullets=False),
            _Section("constraint", ex.constraints, self.max_items, _more("constraints")),
            _Section(
                "execution_progress",
                [g[0] for g in groups] if groups else ex.chat_progress,
                self.max_progress_lines,
                _steps_overflow([g[1] for g in groups]) if groups else None,
            ),
            _Section("key_decision", ex.decisions, self.max_items, _more("decisions")),
            _Section(
                "tried_solution",
                _dedupe(f"{s.label} failed: {s.error}".rstrip(": ") for s in ex.steps if s.outcome == "failed"),
                self.max_items,
                _more("failures"),
            ),
            _Section("artifact", self._artifacts(ex), self.max_items, _more("artifacts")),
            _Section("next_step", ex.next_steps, self.max_items, _more("steps")),
            _Section("earlier", [" ".join(earlier)] if earlier else [], 1, None, bullets=False),
        ]
        summary = self._summary_lines(ex)
        summary = [s for s in summary if not s.startswith("Earlier: ")]
        return _fit(lambda cap: self._prose(sections, summary, cap), sections, summary, request, self.max_item_chars)

    @staticmethod
    def _prose(sections: Sequence[_Section], summary: Sequence[str], cap: int) -> str:
        labels = {
            "user_intent": "Task",
            "refinement": "Latest user request",
            "constraint": "Constraints",
            "execution_progress": "Progress",
            "key_decision": "Decisions",
            "tried_solution": "Failed attempts",
            "artifact": "Files",
            "next_step": "Next steps",
            "earlier": "Earlier",
        }
        paras = []
        for s in sections:
            shown = s.visible(cap if s.bullets else 2 * cap)
            if s.type == "earlier":
                shown = [_clip(x, 4 * cap) for x in s.items]
            if shown:
                paras.append(f"{labels[s.type]}: " + "; ".join(x.rstrip(".") for x in shown) + ".")
        paras.insert(min(2, len(paras)), " ".join(_clip(x, 2 * max(cap, 60)) for x in summary))
        return "## Summary\n" + "\n".join(p for p in paras if p)
