"""The default offline summarizer: a deterministic, extractive stand-in whose bias is known.

:class:`OfflineSummarizer` (registered as ``offline``) reads the structured head of a
:class:`SummaryRequest` (never the prompt text) and answers harness9's summary prompt
(h9eval.compaction.prompts, spec §3.10) the way that prompt asks, in harness9's anchor format::

    ## Anchors

    ### User Intent
    <one sentence: the task statement's first sentence[; latest request: ...]>

    ### Execution Progress
    - bash: pytest tests/test_config.py -> failed
    ...

    ## Summary
    <counts, last outcome, last assistant note, key paths>

so that the compactor's ``parse_anchors_and_summary`` recovers every section. Every section is
bounded: a fixed number of items of a fixed number of characters, then the byte budget.

**What it does not use.** It is a stand-in for a model, not a model: it must not fit the
measurement. So it imports nothing from the probes (``h9eval.probes``), the key-term extractor
(``h9eval.tasks.keyterms``) or the synthetic generator (``h9eval.tasks.synthetic``,
``h9eval.tasks.synthetic.content``), and none of its heuristics keys on the labels the synthetic
generator plants in its transcripts (a decision, progress, plan or "change of plan" label):
the cues below are generic English and generic tool-output conventions, chosen before looking
at any probe. ``tests/test_offline_independence.py`` checks the imports (AST), the absence of the
generator's labels from these modules' strings, and that replacing those labels in a synthetic
transcript by neutral text of the same shape changes nothing but the labels in the reply.

**Its known bias.** What it keeps is what these rules find: tool calls and their outcomes,
sentences with a reasoning cue, the agent's stated intentions, user sentences with a modal
verb, written files. Facts stated once in a tool output, or in an assistant sentence without
a cue, are lost as soon as they leave the kept items; a model would keep some of them. Offline
results therefore rank compaction mechanisms under one fixed extractor; they say nothing about
a model's summaries. :mod:`h9eval.summarizers.offline_recent` (``offline_recent``) extracts by
recency instead of by cue, so a result that holds under both does not hinge on these rules.

Heuristics (case-insensitive unless noted; every item is whitespace-collapsed and clipped):

* **Intent** (one sentence, ``max_intent_chars``). The task statement is the first
  *substantial* user message (>= 40 characters, else the first non-empty one) that is not a
  tool result, not a ``[Context Compaction]`` message and not an observation (``OBSERVATION:``
  prefix or a ``<returncode>`` tag). Inside ``<pr_description>``/``<issue>``/``<task>`` tags
  only the tag body is used; lines such as ``Consider the following PR description:`` are
  dropped. Its first sentence (joined with the next while shorter than 30 characters) is the
  intent. The latest later user message is a refinement: its first sentence is appended as
  ``; latest request: ...``. When a prior intent exists (``request.previous_anchors`` or a
  ``[Context Compaction]`` message in the head), every user message in the head is a
  refinement, except one whose text repeats the prior task sentence.
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
  ``XxxException`` line (the end of a traceback), else the last line with ``error``,
  ``FAILED``, ``fatal`` or ``not found``, else the last output line.
* **Key decisions.** Assistant sentences with a reasoning or choice cue: ``because``,
  ``instead of``, ``rather than``, ``so that``, ``I'll use``, ``let's use``, ``going with``,
  ``decided to``, ``chose``, ``opt for``, ``prefer``, ``the fix is``, ``root cause``,
  ``the issue is``, ``the best approach``...
* **Next steps.** The latest assistant message that states an intention: its line-start list
  items (``1.``, ``-``, ``- [ ]``) when it has two or more, else its sentences that open
  (after an optional ``Now``/``OK``/``First``/``Then``) with a first-person future cue
  (``let me``, ``let's``, ``I'll``, ``I will``, ``I need to``, ``I should``, ``I'm going to``,
  ``we need to``, ``we should``) or contain ``TODO``.
* **Constraints** (only when requested). User sentences with ``must``, ``never``, ``don't``,
  ``do not``, ``always``, ``only``, ``should not``, ``cannot``, ``avoid``.
* **Artifacts** (only when requested; the prompt asks for files created or modified). Paths
  written by edit/write/create/str_replace/insert/apply_patch tool calls, by ``sed -i``,
  ``> file``/``>> file`` (not ``/dev/null``), ``tee``, ``cp``/``mv`` (destination), ``touch``;
  files written most often last (newest items survive the caps). No identifier mining.
* **Summary.** Counts of the segment, running totals (parsed back from the previous summary's
  ``Totals so far`` line), the last tool outcome, the last assistant note and the three paths
  most used in tool arguments (written files count double).

Incremental merging (harness9 MergeAnchors keeps an old anchor only when the new content is
exactly ``N/A``): when ``request.previous_anchors`` is not ``None`` a section with nothing new
is written as ``na_text``; a section with new items is written in full, prior bullets first,
so the overwrite loses nothing but what the caps drop. Without previous anchors a
``[Context Compaction]`` message in the head supplies the prior content, written back
unchanged when nothing new was found (no merge will happen).

Budget: the reply is at most ``request.max_output_tokens * 4`` UTF-8 bytes (harness9's
bytes/4 estimate). Over budget, the largest bullet section loses its oldest item (counted in
an ``earlier``/``more`` line) until every section has one item, then item texts are clipped
shorter (down to 40 characters), then summary lines are dropped, and as a last resort the
text is cut at the byte budget. Every step is deterministic.
"""

from __future__ import annotations

import functools
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
from h9eval.core.history import as_list, extends
from h9eval.core.messages import Message, ToolCall
from h9eval.compaction.summary import SummaryReply, SummaryRequest

__all__ = [
    "OfflineSummarizer",
    "ParsedHead",
    "ToolStep",
    "parse_head",
    "clear_caches",
    "HEURISTICS_VERSION",
]

# Bumped whenever a heuristic changes the output, so cached replies of the old version miss.
# 2: one-sentence intent, generic cues only, artifacts = written files only.
HEURISTICS_VERSION = 2

_ALL_TYPES = ANCHOR_TYPES + EXTRA_ANCHOR_TYPES

# ---------------------------------------------------------------------------------------------
# Small text helpers


def _collapse(s: str) -> str:
    return " ".join(s.split())


def clip_text(s: str, n: int) -> str:
    """Whitespace-collapsed ``s`` of at most ``n`` characters (``...`` marks a cut)."""
    s = _collapse(s)
    if len(s) <= n:
        return s
    if n <= 3:
        return s[:n]
    return s[: n - 3].rstrip() + "..."


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])|\n+")


def sentence_list(text: str) -> list[str]:
    return list(_sentences_of(text))


# Every summary of a run re-reads the head, which mostly holds what the previous summary read:
# each text, call and result is analysed once per process (pure functions of frozen values;
# bounded, since the keys keep their texts alive).
_SEEN = 8192


def clear_caches() -> None:
    """Forget what earlier summaries analysed (a benchmark timing one run from cold)."""
    for f in (_sentences_of, first_sentence, _intent_text, _written_paths, _step, _reasoning_of, _modal_of):
        f.cache_clear()
    _KEPT_SCANS.clear()


@functools.lru_cache(maxsize=_SEEN)
def _sentences_of(text: str) -> tuple[str, ...]:
    return tuple(t for t in (go_trim(p) for p in _SENT_SPLIT.split(text)) if t)


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


def _task_body(content: str) -> str:
    """The request text of one user message: a task tag's body, boilerplate lines dropped."""
    m = _TASK_TAG.search(content)
    body = m.group(2) if m else content
    lines = [ln for ln in body.split("\n") if ln.strip() and not _BOILERPLATE.match(ln)]
    return "\n".join(lines) or body


@functools.lru_cache(maxsize=_SEEN)
def first_sentence(text: str, max_chars: int, min_chars: int = 30) -> str:
    """The first sentence of ``text`` (followed by the next ones while shorter than
    ``min_chars``, so a one-word opener is not all that is kept), clipped to ``max_chars``."""
    out = ""
    for s in sentence_list(text):
        out = f"{out} {s}".strip()
        if len(out) >= min_chars:
            break
    return clip_text(out, max_chars)


@functools.lru_cache(maxsize=_SEEN)
def _intent_text(content: str, max_chars: int) -> str:
    """The one-sentence request of one user message (harness9's prompt asks for one sentence)."""
    return first_sentence(_task_body(content), max_chars)


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
    return clip_text(_CD_PREFIX.sub("", first), n)


_RC = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit (?:status|code):?\s*(-?\d+)|\bexited with code\s*(-?\d+)", re.I
)
_FAIL_TEXT = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:Error|error|ERROR|fatal):|\bFAILED\b|command not found", re.M
)
_EXC_LINE = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Exit|Interrupt)\b.*|E\s+\w+Error.*)$", re.M)
_ERR_LINE = re.compile(r"error|FAILED|fatal|not found|denied|cannot|No such file", re.I)
_TAG_LINE = re.compile(r"^\s*</?(output|returncode|warning)>.*$|<returncode>-?\d+</returncode>", re.M)


#: literals every match of :data:`_RC` (ASCII text) and :data:`_FAIL_TEXT` contains: a tool result
#: without any is answered by C substring scans, not by the patterns' character-by-character ones
#: (case-insensitive alternations and a ``^\s*`` branch defeat the engine's literal search)
_RC_LITERALS = ("<returncode>", "exit")
_FAIL_LITERALS = (
    "Traceback (most recent call last)",
    "Error:",
    "error:",
    "ERROR:",
    "fatal:",
    "FAILED",
    "command not found",
)


def _exit_status(content: str) -> int | None:
    # re.I folds a few non-ASCII letters onto ASCII ones (dotless i, long s), so only ASCII text may
    # skip the pattern on the lower-cased literals' absence.
    if content.isascii():
        low = content.lower()
        if not any(lit in low for lit in _RC_LITERALS):
            return None
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
    content = result.content
    return any(lit in content for lit in _FAIL_LITERALS) and bool(_FAIL_TEXT.search(content))


def _body_lines(content: str) -> list[str]:
    return [ln.strip() for ln in _TAG_LINE.sub("", content).split("\n") if ln.strip()]


def _error_line(content: str, n: int) -> str:
    """The line that says why a call failed: the last exception line (a traceback ends with
    it), else the last error-looking line, else the last output line, else ``exit N``."""
    body = _TAG_LINE.sub("", content)
    exc = _EXC_LINE.findall(body)
    if exc:
        return clip_text(exc[-1], n)
    lines = _body_lines(content)
    for ln in reversed(lines):
        if _ERR_LINE.search(ln):
            return clip_text(ln, n)
    if lines:
        return clip_text(lines[-1], n)
    rc = _exit_status(content)
    return f"exit {rc}" if rc is not None else ""


# ---------------------------------------------------------------------------------------------
# Written files

_WRITE_TOOL = re.compile(r"write|edit|create|str_replace|insert|apply_patch|patch|replace", re.I)
_EDITOR_WRITE_CMDS = {"create", "str_replace", "insert", "write", "undo_edit", "edit", "overwrite", "append"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update) File:\s*(\S+)|^\+\+\+ b/(\S+)", re.M)
_REDIRECT = re.compile(r"(?<![\d&>])(>>?)\s*([^\s;&|<>()]+)")
_PATH = re.compile(
    r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}|[\w-]+\.(?:py|js|ts|go|rs|java|c|h|cpp|md|txt|json|toml|yaml|yml|cfg|ini|sh|rst))\b"
)


@functools.lru_cache(maxsize=_SEEN)
def _written_paths(tc: ToolCall) -> tuple[tuple[str, str], ...]:
    """``(path, how)`` pairs a call writes; ``how`` is ``created`` or ``modified`` (cached: a
    tuple, so no caller can change what the next one gets)."""
    args = _parse_args(tc)
    out: list[tuple[str, str]] = []
    name = tc.name.lower()
    if isinstance(args, dict):
        cmd = args.get("command")
        path = args.get("path") or args.get("file_path") or args.get("filename") or args.get("file")
        is_shell = (
            isinstance(cmd, str)
            and " " in cmd.strip()
            or name in ("bash", "shell", "execute_bash", "run", "terminal", "exec")
        )
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
    return tuple(out)


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


# ---------------------------------------------------------------------------------------------
# Reading the head (shared by every offline summarizer)


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One executed tool call: ``label`` (``name: short arg``), its outcome, the error line of a
    failure, the first and last output lines and the output's opening text (``excerpt``)."""

    name: str
    label: str
    outcome: str  # "ok", "failed" or "no result"
    error: str = ""
    output_first_line: str = ""
    output_last_line: str = ""
    excerpt: str = ""
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Event:
    """One item of the head in order (``kind`` ``user``, ``assistant`` or ``tool``)."""

    kind: str
    text: str = ""
    step: ToolStep | None = None


@dataclass
class ParsedHead:
    """What every offline summarizer reads from a head; lists are oldest first.

    ``task``/``refinement`` are one sentence each; ``later_user`` are the user-authored
    messages after the task (all of them when a prior intent exists); ``assistant_texts`` the
    non-empty assistant texts; ``events`` the head in order.
    """

    task: str = ""
    refinement: str = ""
    user_texts: list[str] = field(default_factory=list)
    later_user: list[str] = field(default_factory=list)
    assistant_texts: list[str] = field(default_factory=list)
    steps: list[ToolStep] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    written: list[tuple[str, str]] = field(default_factory=list)
    paths: Counter[str] = field(default_factory=Counter)
    prior_anchors: dict[str, str] = field(default_factory=dict)
    prior_summary: str = ""
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


def _prior_of(m: Message | None) -> tuple[dict[str, str], str]:
    """Anchors and summary of a ``[Context Compaction]`` message (none: nothing)."""
    if m is None:
        return {}, ""
    text = m.content.lstrip()[len(COMPACTION_MARKER) :]
    anchors, summary = parse_anchors_and_summary(text, _ALL_TYPES)
    # "## Offloaded References" follows the summary; it is not part of it.
    summary = summary.split("\n## Offloaded References", 1)[0]
    return {a.type: a.content for a in anchors if a.content != NA}, go_trim(summary)


class _Scan:
    """The message-by-message part of :func:`parse_head`, up to some message of a head.

    A view-mode replay summarises the same growing history again and again, and reading it
    whole each time made a session's summaries quadratic. The scan of the previous head is
    kept, and a head that extends it is read only from where it stopped. Steps pair a call
    with its result from anywhere in the head, so a kept scan is used only when every call it
    read still pairs with the same result (``used``); and it stops before a trailing call still
    waiting for its result, the usual end of a soft tier's half of the head. A kept scan is
    never changed: resuming copies it.
    """

    __slots__ = (
        "n",
        "used",
        "n_messages",
        "n_user",
        "n_assistant",
        "events",
        "steps",
        "assistant_texts",
        "written",
        "paths",
        "user_msgs",
        "last_note",
        "last_compaction",
    )

    def __init__(self, n: int) -> None:
        self.n = n
        self.used: dict[str, Message | None] = {}  # tool call id -> the result its step was built from
        self.n_messages = self.n_user = self.n_assistant = 0
        self.events: list[Event] = []
        self.steps: list[ToolStep] = []
        self.assistant_texts: list[str] = []
        self.written: list[tuple[str, str]] = []
        self.paths: Counter[str] = Counter()
        self.user_msgs: list[Message] = []
        self.last_note = ""
        self.last_compaction: Message | None = None

    def copy(self) -> _Scan:
        c = _Scan(self.n)
        c.used, c.paths = dict(self.used), Counter(self.paths)
        c.n_messages, c.n_user, c.n_assistant = self.n_messages, self.n_user, self.n_assistant
        c.events, c.steps, c.assistant_texts = list(self.events), list(self.steps), list(self.assistant_texts)
        c.written, c.user_msgs = list(self.written), list(self.user_msgs)
        c.last_note, c.last_compaction = self.last_note, self.last_compaction
        return c

    def still_pairs(self, results: dict[str, Message]) -> bool:
        return all(results.get(c) is r for c, r in self.used.items())

    def feed(self, messages: Iterable[Message], results: dict[str, Message]) -> None:
        n = self.n
        for m in messages:
            if _is_compaction(m):
                self.last_compaction = m
            if m.role == "system" and not m.is_tool_result:
                continue
            self.n_messages += 1
            if _is_user_text(m):
                self.user_msgs.append(m)
                self.n_user += 1
                self.events.append(Event("user", m.content))
            elif m.is_assistant and not m.is_tool_result:
                self.n_assistant += 1
                if m.content.strip():
                    self.assistant_texts.append(m.content)
                    self.events.append(Event("assistant", m.content))
                    self.last_note = first_sentence(m.content, n, min_chars=40)
                for tc in m.tool_calls:
                    res = self.used[tc.id] = results.get(tc.id)
                    step = _step(tc, res, n)
                    self.steps.append(step)
                    self.events.append(Event("tool", step=step))
                    self.written += _written_paths(tc)
                    for path in step.paths:
                        self.paths[path] += 1


# The last scan per character cap, and the messages it read (a few caps at most are in use).
_KEPT_SCANS: dict[int, tuple[list[Message], _Scan]] = {}


def _settled_end(head: list[Message], results: dict[str, Message], start: int) -> int:
    """Where a scan of ``head`` may stop to be kept: before its last assistant message with
    tool calls when one of them has no result yet (the next head may bring it), else the end."""
    for i in range(len(head) - 1, start - 1, -1):
        m = head[i]
        if m.is_assistant and not m.is_tool_result and m.tool_calls:
            return i if any(tc.id not in results for tc in m.tool_calls) else len(head)
    return len(head)


def _scan_head(head: list[Message], n: int) -> _Scan:
    results = {m.tool_call_id: m for m in head if m.is_tool_result}
    kept = _KEPT_SCANS.get(n)
    if kept is not None and extends(head, kept[0]) and kept[1].still_pairs(results):
        start, scan = len(kept[0]), kept[1].copy()
    else:
        start, scan = 0, _Scan(n)
    stop = _settled_end(head, results, start)
    scan.feed(head[start:stop], results)
    if stop < len(head):
        if stop > 0:
            _KEPT_SCANS[n] = (head[:stop], scan.copy())
        scan.feed(head[stop:], results)
    elif head:
        _KEPT_SCANS[n] = (list(head), scan)
    if len(_KEPT_SCANS) > 8:
        _KEPT_SCANS.clear()
    return scan


_REFINEMENT_SEP = "; latest request: "


def prior_task(prior_anchors: dict[str, str]) -> str:
    """The task sentence of a prior User Intent anchor (its first line, refinement cut off)."""
    return intent_lines(prior_anchors.get("user_intent", ""))[0].split(_REFINEMENT_SEP, 1)[0]


def parse_head(
    head: Sequence[Message],
    *,
    previous_anchors: Iterable[tuple[str, str]] | None = None,
    previous_summary: str = "",
    max_intent_chars: int = 200,
    max_item_chars: int = 200,
) -> ParsedHead:
    """Read ``head`` once for every offline summarizer (rules in the module docstring).

    ``previous_anchors`` (the compactor's last anchors) take precedence over the anchors of a
    ``[Context Compaction]`` message in the head; character caps are per item.
    """
    scan = _scan_head(as_list(head), max_item_chars)
    # copies: the scan may be kept for the next head
    p = ParsedHead(
        assistant_texts=list(scan.assistant_texts),
        steps=list(scan.steps),
        events=list(scan.events),
        written=list(scan.written),
        paths=Counter(scan.paths),
        n_messages=scan.n_messages,
        n_user=scan.n_user,
        n_assistant=scan.n_assistant,
        last_assistant_note=scan.last_note,
    )
    p.prior_anchors, p.prior_summary = _prior_of(scan.last_compaction)
    for typ, content in previous_anchors or ():
        if content != NA and content:
            p.prior_anchors[typ] = content
    if previous_summary:
        p.prior_summary = previous_summary
    prior = prior_task(p.prior_anchors)
    user_msgs = scan.user_msgs
    p.user_texts = [u.content for u in user_msgs]
    later = user_msgs
    if not prior and user_msgs:
        # "Substantial": a one-word "continue" or "ok" before the real task is not the task.
        i = next((k for k, u in enumerate(user_msgs) if len(_collapse(u.content)) >= 40), 0)
        p.task = _intent_text(user_msgs[i].content, max_intent_chars)
        later = user_msgs[i + 1 :]
    later = [u for u in later if not prior or not same_task(_intent_text(u.content, max_intent_chars), prior)]
    p.later_user = [u.content for u in later]
    if later:
        p.refinement = _intent_text(later[-1].content, max_intent_chars)
    p.written = dedupe(p.written)
    return p


@functools.lru_cache(maxsize=_SEEN)
def _step(tc: ToolCall, res: Message | None, n: int) -> ToolStep:
    label = f"{tc.name}: {_short_arg(tc)}".rstrip(": ")
    # Only the first line of a command: heredoc bodies mention paths they never touch.
    paths = tuple(x[2:] if x.startswith("./") else x for x in dedupe(_PATH.findall(tc.arguments.split("\\n", 1)[0])))
    if res is None:
        return ToolStep(tc.name, label, "no result", paths=paths)
    failed = _failed(res)
    lines = _body_lines(res.content)
    return ToolStep(
        tc.name,
        label,
        "failed" if failed else "ok",
        _error_line(res.content, n) if failed else "",
        clip_text(lines[0], n) if lines else "",
        clip_text(lines[-1], n) if lines else "",
        clip_text(" | ".join(lines[:12]), n),
        paths,
    )


def same_task(a: str, b: str) -> bool:
    a, b = a.rstrip("."), b.rstrip(".")
    k = min(len(a), len(b), 60)
    return k > 0 and a[:k] == b[:k]


# ---------------------------------------------------------------------------------------------
# The cue rules of the default summarizer (generic English; see the module docstring)

_REASONING_CUE = re.compile(
    r"\b(because|instead of|rather than|so that|I'?ll use|I will use|I'm going to use|we'll use|let'?s use|"
    r"let us use|going with|go with|decided to|decide to|chose|choose to|opt(?:ed)? for|prefer|"
    r"the (?:best|right|correct|simplest|cleanest) (?:approach|fix|way|solution)|the fix (?:is|should|will)|"
    r"root cause|the (?:issue|problem|bug) is)\b",
    re.I,
)
_INTENTION_CUE = re.compile(
    r"^(?:now,?\s+|ok(?:ay)?,?\s+|first,?\s+|then,?\s+)?(let me|let's|I'll|I will|I need to|I should|"
    r"I'm going to|we need to|we should)\b|\bTODO\b",
    re.I,
)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]\s+|-\s*\[[ xX]?\]\s*|[-*\u2022]\s+)")
_LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]\s+|\d+[.)]\s+)+")
_MODAL_CUE = re.compile(r"\b(must|never|don't|do not|always|only|should not|shouldn't|cannot|can't|avoid)\b", re.I)


def reasoning_sentences(texts: Iterable[str], n: int) -> list[str]:
    """Sentences of ``texts`` with a reasoning or choice cue, deduplicated, oldest first."""
    return dedupe(s for t in texts for s in _reasoning_of(t, n))


@functools.lru_cache(maxsize=_SEEN)
def _reasoning_of(t: str, n: int) -> tuple[str, ...]:
    return tuple(clip_text(_LIST_MARK.sub("", s), n) for s in sentence_list(t) if _REASONING_CUE.search(s))


def intention_items(texts: Sequence[str], n: int) -> list[str]:
    """The stated intentions of the latest text that has some (module docstring)."""
    for text in reversed(texts):
        listed = [_LIST_ITEM.sub("", ln).strip() for ln in text.split("\n") if _LIST_ITEM.match(ln)]
        listed = [x for x in listed if x]
        if len(listed) >= 2:
            return [clip_text(x, n) for x in listed]
        cued = [clip_text(s, n) for s in sentence_list(text) if _INTENTION_CUE.search(s)]
        if cued:
            return dedupe(cued)
    return []


def modal_sentences(texts: Iterable[str], n: int) -> list[str]:
    """User sentences with a modal cue (constraints), deduplicated, oldest first."""
    return dedupe(s for t in texts for s in _modal_of(t, n))


@functools.lru_cache(maxsize=_SEEN)
def _modal_of(t: str, n: int) -> tuple[str, ...]:
    return tuple(
        clip_text(_LIST_MARK.sub("", s), n)
        for s in sentence_list(_TASK_TAG.sub(lambda mt: mt.group(2), t))
        if _MODAL_CUE.search(s) and len(s) >= 12
    )


def dedupe(items: Iterable[object]) -> list:  # type: ignore[type-arg]
    seen: set[object] = set()
    out = []
    for it in items:
        if it not in seen:
            seen.add(it)
            out.append(it)
    return out


def intent_lines(content: str) -> list[str]:
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
class SummarySection:
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
        shown = [clip_text(x, cap) for x in shown]
        dropped = len(self.items) - len(shown)
        if dropped > 0 and self.overflow is not None:
            line = self.overflow(dropped)
            if line:
                shown.insert(0, clip_text(line, max(cap, 60)))
        return shown


def collapse_steps(steps: Sequence[ToolStep]) -> list[tuple[str, list[ToolStep]]]:
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


def omitted_line(what: str) -> Callable[[int], str | None]:
    return lambda k: f"(+{k} earlier {what} omitted)"


_TOTALS = re.compile(r"Totals so far: (\d+) messages, (\d+) tool calls, (\d+) failed")


def fit_sections(
    render: Callable[[int], str],
    sections: list[SummarySection],
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


SummaryItems = tuple[list[str], int, Callable[[int], str | None] | None]


@dataclass(frozen=True, kw_only=True)
class OfflineSummarizer:
    """Deterministic extractive summarizer in harness9's anchor format (module docstring).

    ``max_progress_lines``: Execution Progress bullets kept, oldest grouped into one
    ``earlier`` line; default 12. ``max_items``: bullets kept in every other section; default 6.
    ``max_item_chars``: characters per bullet before the budget shrinks them; default 200.
    ``max_intent_chars``: characters of the task sentence and of the latest request; default
    200 (harness9's prompt asks for one sentence). The byte budget comes from
    ``request.max_output_tokens`` (x4 bytes).
    ``na_text``: what a section with nothing (new) says; default ``N/A``, which harness9's
    merge skips. ``- N/A`` is what harness9's prompt asks a model to write, and what a compliant
    model does: harness9's merge then overwrites known anchors with it (the trap the
    ``na_safe_merge`` option removes).
    """

    max_progress_lines: int = 12
    max_items: int = 6
    max_item_chars: int = 200
    max_intent_chars: int = 200
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
            raise ConfigError(
                f"na_text must be a one-line 'no information' text such as N/A or - N/A, got {self.na_text!r}"
            )

    @property
    def summarizer_id(self) -> str:
        # The class name and every field: two variants never share a cached reply.
        params = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return f"{self.name}/v{HEURISTICS_VERSION}{params}"

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        t0 = time.perf_counter()
        p = parse_head(
            request.head,
            previous_anchors=request.previous_anchors,
            previous_summary=request.previous_summary,
            max_intent_chars=self.max_intent_chars,
            max_item_chars=self.max_item_chars,
        )
        text = self._render(p, request)
        return SummaryReply(
            text=text,
            input_tokens=(_utf8_len(request.system_prompt) + request.user_prompt_nbytes) // 4,
            output_tokens=_utf8_len(text) // 4,
            # No model latency offline: reporting 0 keeps results byte-identical across reruns;
            # the compute time is kept in ``extra`` for anyone profiling the heuristics.
            latency_s=0.0,
            model=self.model,
            extra={"n_tool_calls": p.n_calls, "n_failed": p.n_failed, "compute_s": time.perf_counter() - t0},
        )

    # -- what each section keeps (the extraction strategy) -------------------------------------

    def _new_items(self, p: ParsedHead) -> dict[str, SummaryItems]:
        """Per anchor type: the new items (oldest first), how many to keep, the overflow line."""
        n, c = self.max_items, self.max_item_chars
        groups = collapse_steps(p.steps)
        chat = [first_sentence(t, c, min_chars=40) for t in p.assistant_texts]
        return {
            "execution_progress": (
                [g[0] for g in groups] if groups else chat,
                self.max_progress_lines,
                _steps_overflow([g[1] for g in groups]) if groups else omitted_line("progress items"),
            ),
            "key_decision": (reasoning_sentences(p.assistant_texts, c), n, omitted_line("decisions")),
            "tried_solution": (
                dedupe(f"{s.label} -> failed: {s.error}".rstrip(": ") for s in p.steps if s.outcome == "failed"),
                n,
                omitted_line("failures"),
            ),
            "next_step": (intention_items(p.assistant_texts, c), n, omitted_line("steps")),
            "constraint": (modal_sentences(p.user_texts, c), n, omitted_line("constraints")),
            "artifact": (self._artifacts(p), n + 2, omitted_line("artifacts")),
        }

    def _artifacts(self, p: ParsedHead) -> list[str]:
        # Newest items survive the caps, so the most used written files go last: scratch
        # scripts are written once, the files under repair are touched again and again.
        order = sorted(range(len(p.written)), key=lambda i: (p.paths[p.written[i][0]], i))
        return [f"{p.written[i][0]} ({p.written[i][1]})" for i in order]

    def _summary_lines(self, p: ParsedHead) -> list[str]:
        lines = count_lines(p)
        if p.steps:
            s = p.steps[-1]
            detail = s.error or s.output_first_line
            lines.append(f"Last outcome: {s.label} -> {s.outcome}" + (f" ({detail})" if detail else "") + ".")
        if p.last_assistant_note:
            lines.append(f"Last assistant note: {p.last_assistant_note}")
        weight = Counter(p.paths)
        for path, _ in p.written:
            weight[path] += 2  # a written file matters more than one merely read
        paths = [x for x, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
        if paths:
            lines.append("Key paths: " + ", ".join(paths) + ".")
        return lines + earlier_line(p)

    # -- building sections ----------------------------------------------------------------------

    def _sections(self, p: ParsedHead, types: Sequence[str], merge: bool) -> list[SummarySection]:
        new = self._new_items(p)
        out: list[SummarySection] = []
        for typ in types:
            if typ == "user_intent":
                out.append(self._intent_section(p, merge))
                continue
            if typ not in new:
                continue
            items, keep, overflow = new[typ]
            prior = _bullets(p.prior_anchors.get(typ, ""))
            if not items:
                # Nothing new: N/A lets harness9's merge keep the old value; without a merge
                # the prior content must be written back or it is lost.
                items = [] if merge else prior
            else:
                items = dedupe(prior + list(items))
            out.append(SummarySection(typ, items, keep, _after_prior(len(prior), overflow) if prior else overflow))
        return out

    def _intent_section(self, p: ParsedHead, merge: bool) -> SummarySection:
        prior_line = intent_lines(p.prior_anchors.get("user_intent", ""))[0]
        if not p.task and not p.refinement:
            lines = [] if merge or not prior_line else [prior_line]
        else:
            task = p.task or prior_task(p.prior_anchors)
            line = task.rstrip(".") + _REFINEMENT_SEP + p.refinement if task and p.refinement else task or p.refinement
            lines = [line]
        return SummarySection("user_intent", lines, 1, None, bullets=False)

    # -- rendering ------------------------------------------------------------------------------

    def _render(self, p: ParsedHead, request: SummaryRequest) -> str:
        merge = request.previous_anchors is not None
        sections = self._sections(p, request.anchor_types, merge)
        summary = self._summary_lines(p)
        return fit_sections(
            lambda cap: self._format(sections, summary, cap), sections, summary, request, self.max_item_chars
        )

    def _format(self, sections: Sequence[SummarySection], summary: Sequence[str], cap: int) -> str:
        parts = ["## Anchors\n"]
        for s in sections:
            shown = s.visible(cap if s.bullets else 2 * cap)
            if not shown:
                body = self.na_text
            elif s.bullets:
                body = "\n".join("- " + x for x in shown)
            else:
                body = "\n".join(shown)
            parts.append(f"### {ANCHOR_HEADERS[s.type]}\n{body}\n")
        parts.append("## Summary\n" + "\n".join(clip_text(x, max(cap, 60) * 2) for x in summary))
        return "\n".join(parts)


def _after_prior(n_prior: int, inner: Callable[[int], str | None] | None) -> Callable[[int], str | None]:
    """Overflow line of a section whose first ``n_prior`` items are prior bullets (dropped first)."""

    def describe(dropped: int) -> str | None:
        if dropped <= n_prior or inner is None:
            return f"(+{dropped} earlier items omitted)"
        line = inner(dropped - n_prior)
        return f"{line}; +{n_prior} earlier items" if line else None

    return describe


def count_lines(p: ParsedHead) -> list[str]:
    lines = [
        f"This segment: {p.n_messages} messages ({p.n_user} user, {p.n_assistant} assistant), "
        f"{p.n_calls} tool calls, {p.n_failed} failed."
    ]
    m = _TOTALS.search(p.prior_summary)
    # Running totals only when they can be right: from scratch, or continuing our own line.
    if m or not p.prior_summary:
        tm, tc, tf = (int(g) for g in m.groups()) if m else (0, 0, 0)
        lines.append(
            f"Totals so far: {tm + p.n_messages} messages, {tc + p.n_calls} tool calls, {tf + p.n_failed} failed."
        )
    return lines


def earlier_line(p: ParsedHead) -> list[str]:
    if p.prior_summary and not _TOTALS.search(p.prior_summary):
        return ["Earlier: " + p.prior_summary.split("\n", 1)[0]]
    return []
