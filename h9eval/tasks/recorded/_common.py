"""Shared parts of the recorded-session loaders: reading, error wrapping, transcript building,
task statements, derived facts and the final :class:`~h9eval.tasks.model.Task`.

Derived facts (``Fact.kind == "derived"``) are read off the transcript, never invented:

* ``edited_file_NN``: a file the agent wrote, found in editor tool calls (Claude Code
  ``Edit``/``Write``/``MultiEdit``/``NotebookEdit``, ``str_replace_editor``/``file_editor``
  ``create``/``str_replace``/``insert``/``undo_edit``, SWE-agent ``create``/``edit``/``insert``
  on the open file, ``apply_patch``) and in shell commands (``sed -i``, ``cat``/``echo``/
  ``printf`` redirections, ``tee``, heredoc patches ``+++ b/<path>``, Python
  ``open(<path>, "w")`` / ``Path(<path>).write_text``). One fact per distinct path, at the
  assistant message that first edited it; the question asks for the n-th distinct file edited.
  Scratch files (:func:`is_scratch_path`: reproduction and check scripts at the top of the
  working directory, files outside it) are not counted: they are most of what agents write and
  say nothing about the task. A bare file name is a variant only when it is not a name every
  project has (``README.md``, ``utils.py``; see :data:`GENERIC_FILE_STEMS`).
* ``failed_command_NN``: a tool result with ``is_error`` or a non-zero return code; the answer
  is the error line (last ``...Error``/``...Exception`` line, else the first line mentioning an
  error). The error class alone (``TypeError``) and ``exit code N`` are never variants, and a
  failure whose only description is one of them gets no fact: any other failure would "answer"
  it. Failures with the same answer text give one fact (the first). At most
  :data:`MAX_FAILURE_FACTS`; the totals are in metadata.
* ``outcome_*``: the recorded end of the run (exit status, files of the submitted patch, a
  non-patch submission such as a CTF flag, OpenHands' finish status).
"""

from __future__ import annotations

import functools

import json
import os
import re
import shlex
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.tasks.keyterms import DEFAULT_MAX_TERMS, extract_key_terms, filter_key_terms
from h9eval.tasks.text import TranscriptText, normalize
from h9eval.tasks.model import Fact, Intent, IntentChange, Task, TaskSource

MAX_FAILURE_FACTS = 20
"""Cap on ``failed_command_NN`` facts per task (facts, first ones in transcript order)."""

MAX_INTENT_TERMS = 2 * DEFAULT_MAX_TERMS
"""Cap on key terms of an intent refinement (the task's own terms plus the refinements')."""

MAX_ANSWER_CHARS = 200
"""Cap on a derived fact's answer length (characters)."""


# -- reading ---------------------------------------------------------------------------------
# The text format detection read, handed to the loader that reads the same file next (once:
# taken by the first read of that file, unchanged since), so a session is read and decoded once.
_HANDOFF: tuple[tuple[str, int, int, int], str] | None = None
_HANDOFF_LOCK = threading.Lock()


def _file_key(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns)


def read_text(path: Path, *, shown: str | None = None, hand_off: bool = False) -> str:
    """The file as UTF-8 text; unreadable or non-UTF-8 files raise :class:`FormatError`.
    ``hand_off``: keep the text for the next read of the same, unchanged file."""
    global _HANDOFF
    shown = shown if shown is not None else str(path)
    key = _file_key(path)
    with _HANDOFF_LOCK:
        if _HANDOFF is not None and key is not None and _HANDOFF[0] == key:
            text = _HANDOFF[1]
            _HANDOFF = None
            return text
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise FormatError("is a directory; expected a file", path=shown) from None
    except OSError as e:
        raise FormatError(f"cannot read file: {e.strerror or e}", path=shown) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise FormatError(f"not valid UTF-8 text (byte {e.start})", path=shown, where=f"line {line}") from None
    if hand_off and key is not None:
        with _HANDOFF_LOCK:
            _HANDOFF = (key, text)
    return text


def first_nonblank_line(text: str) -> tuple[int, str]:
    """``(1-based line number, line)`` of the first line that is not blank, ``(0, "")`` when
    none is (without splitting the whole text)."""
    start, n = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        if line.strip():
            return n, line
        start, n = end + 1, n + 1
    return 0, ""


class _NotJSONConstant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJSONConstant(name)


def parse_json(text: str, *, path: str, expected: str, where: str | None = None) -> Any:
    """``json.loads`` with a :class:`FormatError` naming the line and what was expected.
    ``NaN`` and ``Infinity`` are refused: they are not JSON, and the session store (like
    harness9's Go encoder) rejects them, so a session holding one could not be replayed."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except _NotJSONConstant as e:
        raise FormatError(
            f"not valid JSON ({e} is not a JSON value); expected {expected}", path=path, where=where
        ) from None
    except json.JSONDecodeError as e:
        loc = where or f"line {e.lineno} column {e.colno}"
        raise FormatError(f"not valid JSON ({e.msg}); expected {expected}", path=path, where=loc) from None
    except RecursionError:
        raise FormatError(f"JSON nested too deeply; expected {expected}", path=path, where=where) from None


def iter_jsonl(text: str, *, path: str, expected: str) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line (1-based line numbers)."""
    # JSON Lines are separated by "\n" only: str.splitlines would also cut a line at a raw
    # U+2028 or form feed, which JSON allows inside a string.
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        yield n, parse_json(line, path=path, expected=expected, where=f"line {n}")


class Cursor:
    """Where a loader is (file and line/record/event), so a late error can still name it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.where: str | None = None


@contextmanager
def guarded(fmt: str, cursor: Cursor, expected: str) -> Iterator[None]:
    """Turn any stray ``KeyError``/``TypeError``/... into a :class:`FormatError` at ``cursor``.

    Loaders check the shapes they rely on explicitly; this is the safety net for the ones they
    do not (a hard rule: no raw Python exception may escape a loader).
    """
    try:
        yield
    except FormatError:
        raise
    except KeyError as e:
        raise FormatError(
            f"missing field {e.args[0]!r} in {fmt} data; expected {expected}", path=cursor.path, where=cursor.where
        ) from None
    except RecursionError:
        raise FormatError(f"{fmt} data nested too deeply", path=cursor.path, where=cursor.where) from None
    except (TypeError, ValueError, AttributeError, IndexError) as e:
        raise FormatError(
            f"malformed {fmt} data ({type(e).__name__}: {e}); expected {expected}", path=cursor.path, where=cursor.where
        ) from None


def expect(cond: bool, message: str, cursor: Cursor) -> None:
    if not cond:
        raise FormatError(message, path=cursor.path, where=cursor.where)


def file_size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


# -- content helpers -------------------------------------------------------------------------
def json_text(value: Any) -> str:
    """Tool-call arguments as JSON text: strings are kept byte-for-byte (they already are the
    recorded JSON text); parsed values are serialised compactly, as an API request would."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def blocks_text(content: Any, counts: Counter[str], *, what: str, cursor: Cursor) -> str:
    """Text of a string or of a list of content blocks (OpenAI parts / Anthropic blocks).

    Text blocks are joined with a blank line; an image becomes ``[image]`` (the model saw an
    image, the byte estimate cannot); thinking blocks are dropped and counted in ``counts``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    expect(
        isinstance(content, list), f"{what} must be a string or a list of blocks, got {type(content).__name__}", cursor
    )
    parts: list[str] = []
    for b in content:
        if isinstance(b, str):
            parts.append(b)
            continue
        expect(isinstance(b, Mapping), f"{what} block must be an object, got {type(b).__name__}", cursor)
        t = b.get("type", "text")
        if t in ("text", "input_text", "output_text"):
            txt = b.get("text", "")
            expect(isinstance(txt, str), f"{what} text block must have a string 'text'", cursor)
            parts.append(txt)
        elif t in ("image", "image_url", "input_image"):
            counts["images"] += 1
            parts.append("[image]")
        elif t in ("thinking", "redacted_thinking", "reasoning"):
            counts["thinking_blocks"] += 1
        else:
            counts[f"block:{t}"] += 1
    return "\n\n".join(p for p in parts if p)


def openai_tool_calls(raw: Any, cursor: Cursor) -> tuple[ToolCall, ...]:
    """An OpenAI-style ``tool_calls`` list as tool calls (callers pass ``[]`` for a missing one).

    Each entry is ``{id, type, function: {name, arguments}}`` or flat ``{id, name, arguments}``;
    arguments are kept as recorded JSON text (see :func:`json_text`).
    """
    expect(isinstance(raw, list), "'tool_calls' must be a list", cursor)
    out = []
    for k, tc in enumerate(raw):
        expect(isinstance(tc, dict), f"tool_calls[{k}] must be an object", cursor)
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
        tid, name = tc.get("id"), fn.get("name")
        expect(isinstance(tid, str) and tid != "", f"tool_calls[{k}] needs a non-empty string 'id'", cursor)
        expect(isinstance(name, str), f"tool_calls[{k}] needs a string function name", cursor)
        out.append(ToolCall(tid, name, json_text(fn.get("arguments"))))
    return tuple(out)


# -- task statements -------------------------------------------------------------------------
_TAGGED = re.compile(r"<(pr_description|issue_description|issue|task)>\s*(.*?)\s*</\1>", re.DOTALL)
_SWE_ISSUE = re.compile(r"ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|\Z)", re.DOTALL)
_PR_PREFIX = re.compile(r"^Consider the following (?:PR|issue) description:\s*", re.IGNORECASE)


def extract_statement(text: str) -> str:
    """The task itself inside an agent's prompt template.

    ``<pr_description>`` (mini-swe-agent), ``<issue_description>`` (OpenHands),
    ``ISSUE: ... INSTRUCTIONS:`` (SWE-agent), else text before a trailing ``INSTRUCTIONS:``
    block, else the whole text (stripped).
    """
    m = _TAGGED.search(text)
    if m:
        return _PR_PREFIX.sub("", m.group(2)).strip()
    m = _SWE_ISSUE.search(text)
    if m:
        return m.group(1).strip()
    head, sep, _ = text.partition("\nINSTRUCTIONS:")
    return (head if sep and head.strip() else text).strip()


# -- transcript ------------------------------------------------------------------------------
@dataclass
class Outcome:
    """The recorded end of a run (all optional)."""

    exit_status: str | None = None
    submission: str | None = None
    message_index: int | None = None
    finish_message: str | None = None


@dataclass
class Transcript:
    """Messages being built, plus side tables the derived facts need (kept out of ``meta``)."""

    messages: list[Message] = field(default_factory=list)
    returncodes: dict[int, int] = field(default_factory=dict)
    user_prompts: list[tuple[int, str]] = field(default_factory=list)
    cwd: str | None = None  # working directory, to give edited paths a relative variant

    def add(self, msg: Message, *, returncode: int | None = None) -> int:
        self.messages.append(msg)
        i = len(self.messages) - 1
        if returncode is not None:
            self.returncodes[i] = returncode
        return i

    def add_prompt(self, msg: Message) -> int:
        """A real user prompt (task or refinement), not harness text or a tool result."""
        i = self.add(msg)
        self.user_prompts.append((i, msg.content))
        return i


def tool_pair_stats(messages: Sequence[Message]) -> dict[str, int]:
    """Counts of calls, results, calls never answered and results answering no earlier call."""
    seen_calls: set[str] = set()
    answered: set[str] = set()
    n_calls = n_results = orphans = 0
    for m in messages:
        if m.is_tool_result:
            n_results += 1
            if m.tool_call_id in seen_calls:
                answered.add(m.tool_call_id)
            else:
                orphans += 1
        for tc in m.tool_calls:
            n_calls += 1
            seen_calls.add(tc.id)
    unmatched = sum(1 for m in messages for tc in m.tool_calls if tc.id not in answered)
    return {
        "n_tool_calls": n_calls,
        "n_tool_results": n_results,
        "unmatched_tool_calls": unmatched,
        "orphan_tool_results": orphans,
    }


# -- derived facts: edited files -------------------------------------------------------------
_EDITOR_TOOLS = frozenset(
    {"str_replace_editor", "file_editor", "str_replace_based_edit_tool", "text_editor", "edit_tool"}
)
_EDITOR_WRITE_CMDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append"})
_WRITE_TOOLS = frozenset(
    {"Edit", "Write", "MultiEdit", "NotebookEdit", "write_file", "edit_file", "create_file", "replace_in_file"}
)


@dataclass(kw_only=True)
class AgentPass:
    """What one pass over a SWE-style agent's messages builds (mini-SWE-agent, SWE-agent): both
    record a tool-calling variant and a text variant whose actions are synthesized as calls."""

    cur: Cursor
    synthesize: bool
    tr: Transcript = field(default_factory=Transcript)
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    #: text variant: the id of the synthesized action awaiting its output
    pending: str | None = None
    n_synth: int = 0


def on_user_message(st: AgentPass, content: str, *, returncode: Callable[[str], int | None] | None = None) -> None:
    """A user message: the output of the synthesized action before it (``returncode`` reads its
    return code from the text, where the format states one), else the task prompt (the first one)
    or a later user message."""
    if st.pending is not None:
        st.tr.add(Message("tool", content, (), st.pending), returncode=returncode(content) if returncode else None)
        st.pending = None
    elif not st.tr.user_prompts:
        st.tr.add_prompt(Message("user", content))
    else:
        st.tr.add(Message("user", content))


def on_system_message(st: AgentPass, i: int, m: Any, content: str) -> None:
    st.pending = None
    st.tr.add(Message("system", content))


def on_other_message(st: AgentPass, i: int, m: Any, content: str) -> None:
    """A role the format does not know: skipped and counted."""
    st.pending = None
    st.skipped[f"role:{m['role']}"] += 1


_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w-]*)\1")
_PATCH_FILE = re.compile(r"^(?:\+\+\+ b/(\S+)|\*\*\* (?:Update|Add) File: (.+?)\s*$)", re.MULTILINE)
_PY_WRITE = re.compile(
    r"open\(\s*(['\"])([^'\"\n]+)\1\s*,\s*(['\"])[wa]b?\+?\3|Path\(\s*(['\"])([^'\"\n]+)\4\s*\)\.write_(?:text|bytes)"
)
_SWE_OPEN = re.compile(r"^open\s+\"?([^\s\"]+)\"?")
_SWE_CREATE = re.compile(r"^create\s+\"?([^\s\"]+)\"?")
_SWE_EDIT = re.compile(r"^(?:edit|insert)\b")
_SHELL_SEP = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "|&"})


@dataclass
class _EditState:
    open_file: str | None = None  # SWE-agent's editor acts on the file opened last


def _strip_heredocs(cmd: str) -> tuple[str, list[str]]:
    """The command without heredoc bodies, and the bodies."""
    lines = cmd.split("\n")
    out: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        markers = [m.group(2) for m in _HEREDOC.finditer(line)]
        i += 1
        for marker in markers:
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != marker:
                body.append(lines[i])
                i += 1
            i += 1  # the terminator line
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _simple_commands(cmd: str) -> list[list[str]]:
    """Shell words per simple command; ``[]`` when the text does not lex (unbalanced quotes)."""
    lex = shlex.shlex(cmd.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:
        return []
    cmds: list[list[str]] = [[]]
    for t in tokens:
        if t in _SHELL_SEP:
            cmds.append([])
        else:
            cmds[-1].append(t)
    return [c for c in cmds if c]


def _real_target(p: str) -> bool:
    return bool(p) and not p.startswith(("/dev/", "&", "-")) and p not in (">", ">>", "<")


def shell_edited_paths(cmd: str, state: _EditState | None = None) -> list[str]:
    """Files a shell command writes, as far as common idioms tell (see module docstring)."""
    state = state or _EditState()
    found: list[str] = []
    first = cmd.strip().split("\n", 1)[0].strip()
    # SWE-agent's editor commands are shell functions acting on the open file.
    if m := _SWE_OPEN.match(first):
        state.open_file = m.group(1)
    elif m := _SWE_CREATE.match(first):
        state.open_file = m.group(1)
        found.append(m.group(1))
    elif _SWE_EDIT.match(first) and state.open_file:
        found.append(state.open_file)
    for m in _PY_WRITE.finditer(cmd):
        found.append(m.group(2) or m.group(5))
    for m in _PATCH_FILE.finditer(cmd):
        found.append(m.group(1) or m.group(2))
    head, _bodies = _strip_heredocs(cmd)
    # Only sed -i, a redirection or tee below can name a file: most commands (ls, grep,
    # pytest...) have none of them, and lexing them with shlex was most of a session's load.
    if (
        "sed" not in head
        and "tee" not in head
        and not (">" in head and ("cat" in head or "echo" in head or "printf" in head))
    ):
        return found
    for words in _simple_commands(head):
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            words = words[1:]
        if words and words[0] in ("sudo", "command", "exec"):
            words = words[1:]
        if not words:
            continue
        prog = os.path.basename(words[0])
        if prog == "sed" and any(
            w == "--in-place" or (w.startswith("-i") or (w.startswith("-") and not w.startswith("--") and "i" in w[1:]))
            for w in words[1:]
        ):
            found.extend(_sed_files(words[1:]))
        elif prog in ("cat", "echo", "printf"):
            for a, b in zip(words, words[1:]):
                if a in (">", ">>") and _real_target(b):
                    found.append(b)
        elif prog == "tee":
            found.extend(w for w in words[1:] if _real_target(w) and not w.startswith("-"))
    return found


def _sed_files(args: list[str]) -> list[str]:
    files: list[str] = []
    script_given = False
    skip = False
    for w in args:
        if skip:
            skip = False
            continue
        if w in ("-e", "--expression", "-f", "--file"):
            script_given = True
            skip = True
            continue
        if w.startswith("-"):
            continue
        if w in (">", ">>", "<"):
            break
        if not script_given:
            script_given = True  # the first operand is the script
            continue
        files.append(w)
    return files


def _args(tc: ToolCall) -> dict[str, Any]:
    try:
        v = json.loads(tc.arguments) if tc.arguments else {}
    except (ValueError, RecursionError):
        return {}
    return v if isinstance(v, dict) else {}


def call_edited_paths(tc: ToolCall, state: _EditState) -> list[str]:
    """Files one tool call writes."""
    args = _args(tc)
    name = tc.name
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    if name in _WRITE_TOOLS:
        return [path] if path else []
    if name in _EDITOR_TOOLS:
        if args.get("command") in _EDITOR_WRITE_CMDS and path:
            return [path]
        return []
    if name == "apply_patch":
        text = args.get("input") or args.get("patch") or ""
        return [m.group(1) or m.group(2) for m in _PATCH_FILE.finditer(text)] if isinstance(text, str) else []
    # SWE-agent function-calling tools.
    if name == "open" and path:
        state.open_file = path
        return []
    if name == "create" and path:
        state.open_file = path
        return [path]
    if name in ("edit", "insert") and state.open_file and "command" not in args:
        return [state.open_file]
    cmd = args.get("command") if isinstance(args.get("command"), str) else args.get("cmd")
    if isinstance(cmd, str):
        return shell_edited_paths(cmd, state)
    return []


def call_label(tc: ToolCall, limit: int = 80) -> str:
    """A short human label of a call: its shell command, else ``name(path)`` or ``name``."""
    args = _args(tc)
    cmd = args.get("command") if isinstance(args.get("command"), str) else None
    if cmd and tc.name not in _EDITOR_TOOLS:
        label = " ".join(cmd.split())
    else:
        path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
        sub = f" {cmd}" if cmd else ""
        label = f"{tc.name}{sub} {path}" if path else f"{tc.name}{sub}"
    return label if len(label) <= limit else label[: limit - 1] + "…"


# -- derived facts: failures -----------------------------------------------------------------
_RC_TAG = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_CODE = re.compile(r"^Exit code (-?\d+)")
_ERR_LINE = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception))\b")
_ERR_WORD = re.compile(r"error|fail|not found|no such file|denied|cannot|unable", re.IGNORECASE)
_TAGS = re.compile(r"</?(?:returncode|output|output_head|output_tail|elided_chars|warning)>")


def returncode_from_text(text: str) -> int | None:
    """``<returncode>N</returncode>`` (mini-swe-agent) or ``Exit code N`` (Claude Code Bash)."""
    m = _RC_TAG.search(text[:200]) or _EXIT_CODE.search(text)
    return int(m.group(1)) if m else None


def error_summary(text: str, returncode: int | None) -> tuple[str, tuple[str, ...]]:
    """(answer, variants) describing why a command failed."""
    text = _RC_TAG.sub("", text)
    text = _TAGS.sub("", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    variants: list[str] = []
    answer = ""
    for ln in reversed(lines):
        m = _ERR_LINE.search(ln)
        if m:
            answer = ln
            variants.append(m.group(1))
            break
    if not answer:
        answer = next((ln for ln in lines if _ERR_WORD.search(ln)), "")
    if returncode not in (None, 0):
        variants.append(f"exit code {returncode}")
        if not answer:
            answer = f"exit code {returncode}"
    if not answer:
        answer = lines[0] if lines else "error (no output)"
    if len(answer) > MAX_ANSWER_CHARS:
        answer = answer[: MAX_ANSWER_CHARS - 1] + "…"
    return answer, tuple(dict.fromkeys(v for v in variants if v != answer))


# -- derived facts ---------------------------------------------------------------------------
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)


def patch_files(patch: str) -> list[str]:
    """Files a unified git diff touches, in order, deduplicated."""
    return list(dict.fromkeys(m.group(2) for m in _DIFF_FILE.finditer(patch)))


_GENERIC_ERROR = re.compile(
    r"(?:[A-Z][A-Za-z0-9_]*(?:Error|Exception)|exit code -?\d+|error \(no output\)"
    r"|(?:<tool_use_error>)?Sibling tool call errored(?:</tool_use_error>)?)",
    re.IGNORECASE,
)


def is_generic_error(text: str) -> bool:
    """An error description that fits any failure: a bare error class (``TypeError``),
    ``exit code N``, the placeholder for a failure without output, or Claude Code's note that
    a parallel call failed (it names no error of its own)."""
    return bool(_GENERIC_ERROR.fullmatch(text.strip()))


SCRATCH_EXTENSIONS = frozenset(
    {".py", ".sh", ".js", ".ts", ".pl", ".rb", ".sql", ".txt", ".diff", ".patch", ".go", ".exs"}
)
"""Extensions of the throwaway scripts agents write at the top of the working directory."""

PROJECT_TOP_FILES = frozenset(
    {"setup.py", "conftest.py", "manage.py", "noxfile.py", "fabfile.py", "tasks.py", "mix.exs", "main.go"}
)
"""Top-level files that are part of a project, not scratch, despite a script extension."""

GENERIC_FILE_STEMS = frozenset(
    {"readme", "utils", "util", "test", "tests", "config", "setup", "index", "app", "main", "models",
     "views", "settings", "runtime", "dev", "prod", "mix", "__init__", "conftest", "package", "types"}
)  # fmt: skip
"""File names (without extension, casefolded) so common that a bare ``utils.py`` in a summary
does not show it is this session's file; such a file is matched by its path only."""


def _generic_file_name(base: str) -> bool:
    return os.path.splitext(base)[0].casefold() in GENERIC_FILE_STEMS


_KNOWN_ROOTS = re.compile(r"^/(?:testbed|repo|workspace|app)/")


def is_scratch_path(path: str, cwd: str | None) -> bool:
    """A file the agent wrote for itself rather than for the task.

    Scratch: an absolute path outside ``cwd`` (a plan file in the home folder, ``/tmp/x.py``
    while working elsewhere), or a file at the top of the working directory (``cwd``, or
    ``/testbed``-like roots when ``cwd`` is unknown) with a script extension
    (:data:`SCRATCH_EXTENSIONS`) that is not a known project file (:data:`PROJECT_TOP_FILES`):
    ``reproduce.py``, ``test_fix.py``, ``final_test2.py``.
    """
    p = os.path.normpath(path) if path.strip() else path
    root = os.path.normpath(cwd) if cwd else None
    if os.path.isabs(p):
        if root is not None and os.path.isabs(root):
            if not (p + "/").startswith(root.rstrip("/") + "/"):
                return True
            rel = os.path.relpath(p, root)
        elif m := _KNOWN_ROOTS.match(p):
            rel = p[m.end() :]
        else:
            return False
    else:
        rel = p
    if "/" in rel:
        return False
    ext = os.path.splitext(rel)[1].casefold()
    return ext in SCRATCH_EXTENSIONS and rel not in PROJECT_TOP_FILES


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def derive_facts(tr: Transcript, outcome: Outcome | None) -> tuple[list[Fact], dict[str, Any]]:
    """Derived facts and the metadata that summarises them (see module docstring)."""
    msgs = tr.messages
    facts: list[Fact] = []
    calls: dict[str, tuple[int, ToolCall]] = {}
    state = _EditState()
    edited: dict[str, int] = {}
    for i, m in enumerate(msgs):
        for tc in m.tool_calls:
            calls.setdefault(tc.id, (i, tc))
            for p in call_edited_paths(tc, state):
                # "./x.py" and "x.py" are one file; absolute paths stay absolute.
                edited.setdefault(os.path.normpath(p) if p.strip() else p, i)
    real = [(p, i) for p, i in sorted(edited.items(), key=lambda kv: (kv[1], kv[0])) if not is_scratch_path(p, tr.cwd)]
    n_scratch = len(edited) - len(real)
    for k, (p, i) in enumerate(real, 1):
        base = os.path.basename(p.rstrip("/"))
        variants = [base] if base and base != p and not _generic_file_name(base) else []
        if tr.cwd and p.startswith(tr.cwd.rstrip("/") + "/"):
            variants.insert(0, p[len(tr.cwd.rstrip("/")) + 1 :])
        facts.append(
            Fact(
                fact_id=f"edited_file_{k:02d}",
                question=f"Which file was the {_ordinal(k)} distinct file the agent edited in this session?",
                answer=p,
                kind="derived",
                message_index=i,
                variants=tuple(dict.fromkeys(variants)),
            )
        )
    n_failed = n_fail_facts = n_generic = n_duplicate = 0
    seen_labels: dict[str, int] = {}
    seen_answers: set[str] = set()
    for i, m in enumerate(msgs):
        if not m.is_tool_result:
            continue
        rc = tr.returncodes.get(i)
        if not (m.is_error or (rc is not None and rc != 0)):
            continue
        n_failed += 1
        call = calls.get(m.tool_call_id)
        label = call_label(call[1]) if call else f"tool call {m.tool_call_id}"
        answer, err_variants = error_summary(m.content, rc)
        # The same command often fails more than once; say which failure is meant.
        seen_labels[label] = seen_labels.get(label, 0) + 1
        if is_generic_error(answer):
            n_generic += 1
            continue
        if answer in seen_answers:
            n_duplicate += 1
            continue
        if n_fail_facts >= MAX_FAILURE_FACTS:
            continue
        seen_answers.add(answer)
        n_fail_facts += 1
        err_variants = tuple(v for v in err_variants if not is_generic_error(v))
        nth = f" the {_ordinal(seen_labels[label])} time it failed" if seen_labels[label] > 1 else ""
        facts.append(
            Fact(
                fact_id=f"failed_command_{n_fail_facts:02d}",
                question=f"What error did `{label}` produce{nth}?",
                answer=answer,
                kind="derived",
                message_index=i,
                variants=err_variants,
            )
        )
    last = max(len(msgs) - 1, 0)
    meta: dict[str, Any] = {
        "edited_files": list(edited),
        "n_scratch_files": n_scratch,
        "n_failed_commands": n_failed,
        "n_generic_failures": n_generic,
        "n_duplicate_failures": n_duplicate,
    }
    if outcome is not None:
        at = outcome.message_index if outcome.message_index is not None else last
        if outcome.exit_status:
            facts.append(
                Fact(
                    fact_id="outcome_exit_status",
                    question="How did the run end (its exit status)?",
                    answer=outcome.exit_status,
                    kind="derived",
                    message_index=at,
                )
            )
            meta["exit_status"] = outcome.exit_status
        sub = (outcome.submission or "").strip()
        if sub:
            files = patch_files(sub)
            meta["submission_bytes"] = len(sub.encode("utf-8", "surrogatepass"))
            if files:
                meta["submission_files"] = files
                facts.append(
                    Fact(
                        fact_id="outcome_patch_files",
                        question="Which files does the final submitted patch change?",
                        answer=", ".join(files),
                        kind="derived",
                        message_index=at,
                        variants=tuple(files)
                        + tuple(
                            os.path.basename(f)
                            for f in files
                            if os.path.basename(f) != f and not _generic_file_name(os.path.basename(f))
                        ),
                    )
                )
            elif len(sub) <= MAX_ANSWER_CHARS:
                facts.append(
                    Fact(
                        fact_id="outcome_submission",
                        question="What did the agent submit at the end?",
                        answer=sub,
                        kind="derived",
                        message_index=at,
                    )
                )
    return facts, meta


# -- the task --------------------------------------------------------------------------------
def _specific_terms(tr: Transcript, prompt_at: int) -> Callable[[tuple[str, ...]], tuple[str, ...]]:
    """Key-term filter of this transcript (:func:`h9eval.tasks.keyterms.filter_key_terms`):
    documents are the messages other than the first prompt, matched as the probes match
    (exact, word-bounded), counted by :meth:`~h9eval.tasks.text.TranscriptText.message_count`
    (only as far as the filter's limit)."""
    msgs = [m for j, m in enumerate(tr.messages) if j != prompt_at]
    whole = TranscriptText(msgs)

    @functools.cache  # a term of many prompts is counted once (a chat log repeats its terms)
    def doc_freq(term: str, stop_above: float) -> int:
        return whole.message_count(normalize(term), stop_above)

    return lambda terms: filter_key_terms(terms, len(msgs), doc_freq=doc_freq)


def build_intent(tr: Transcript) -> Intent:
    """Statement = the first real user prompt (template-stripped); later prompts refine it.

    A refinement keeps the original task in force: each later prompt is an appending
    :class:`IntentChange` (the statement in force is the previous one plus the new prompt), and
    its key terms are the previous terms followed by the new prompt's terms (at most
    :data:`MAX_INTENT_TERMS` in all). Generic terms and terms most messages repeat are dropped
    (:func:`h9eval.tasks.keyterms.filter_key_terms`).
    """
    if not tr.user_prompts:
        return Intent(statement="", key_terms=())
    first_at, first = tr.user_prompts[0]
    statement = extract_statement(first)
    keep = _specific_terms(tr, first_at)
    terms = keep(extract_key_terms(statement))
    changes: list[IntentChange] = []
    cur_terms = terms
    for i, text in tr.user_prompts[1:]:
        text = text.strip()
        if not text:
            continue
        # Once MAX_INTENT_TERMS terms are held a prompt's terms would all be cut off: a chat log's
        # later prompts are not searched for terms at all.
        if len(cur_terms) < MAX_INTENT_TERMS:
            cur_terms = tuple(dict.fromkeys(cur_terms + keep(extract_key_terms(text))))[:MAX_INTENT_TERMS]
        changes.append(IntentChange(message_index=i, statement=text, key_terms=cur_terms, appends=True))
    return Intent(statement=statement, key_terms=terms, changes=tuple(changes))


def finish_task(
    *,
    fmt: str,
    session: str,
    path_shown: str,
    path: Path,
    tr: Transcript,
    tools: Sequence[Mapping[str, Any]] = (),
    outcome: Outcome | None = None,
    metadata: Mapping[str, Any] | None = None,
    skipped: Counter[str] | None = None,
    source_kind: str = "recorded",
    n_bytes: int | None = None,
) -> Task:
    """Assemble the :class:`Task`: ids, source, intent, derived facts and common metadata.

    ``source_kind``/``n_bytes``: a dataset row is not a file (its kind is ``dataset`` and its size
    the bytes of its JSON); recorded files leave both at their defaults.
    """
    facts, fact_meta = derive_facts(tr, outcome)
    msgs = tuple(tr.messages)
    meta: dict[str, Any] = {
        "format": fmt,
        "session": session,
        "bytes": file_size(path) if n_bytes is None else n_bytes,
        "n_messages": len(msgs),
        "messages_by_role": dict(sorted(Counter(m.role for m in msgs).items())),
        **tool_pair_stats(msgs),
        "skipped_records": dict(sorted((skipped or Counter()).items())),
        **fact_meta,
    }
    # The key terms are already filtered: probes must not re-extract generic ones when the
    # filter left none (see h9eval.probes.probe.FINAL_KEY_TERMS).
    meta["key_terms_final"] = True
    meta.update(metadata or {})
    return Task(
        task_id=f"{fmt}:{session}",
        source=TaskSource(kind=source_kind, path=path_shown, format=fmt, session=session),
        messages=msgs,
        tools=tuple(dict(t) for t in tools),
        intent=build_intent(tr),
        facts=tuple(facts),
        metadata=meta,
    )


def openai_tool_schema(t: Any) -> dict[str, Any] | None:
    """``{"type": "function", "function": {...}}`` or a flat tool → name/description/input_schema."""
    if not isinstance(t, Mapping):
        return None
    fn = t.get("function") if isinstance(t.get("function"), Mapping) else t
    name = fn.get("name")
    if not isinstance(name, str):
        return None
    schema = fn.get("input_schema", fn.get("parameters"))
    out: dict[str, Any] = {"name": name, "description": str(fn.get("description") or "")}
    if schema is not None:
        out["input_schema"] = schema
    return out


def stem(path: Path) -> str:
    """File name without ``.traj.json``/``.traj``/``.jsonl``/``.json``."""
    name = path.name
    for suf in (".traj.json", ".traj", ".jsonl", ".json"):
        if name.endswith(suf) and len(name) > len(suf):
            return name[: -len(suf)]
    return path.stem or name
