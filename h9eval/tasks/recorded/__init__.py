"""Loaders for real recorded agent sessions → :class:`h9eval.tasks.model.Task`.

Public API::

    detect_format(path) -> str                       # by content, not by name
    load_task(path, format=None, **options) -> Task  # one session (a file, or an OpenHands folder)
    load_tasks(path, *, format=None, errors=None, **options) -> list[Task]  # a file or a folder tree
    inspect_task(path, format=None) -> dict          # sizes and counts, for a quick look
    summarize_task(task) -> dict                     # the same summary for any Task
    load_recorded = load_tasks

Formats (:data:`FORMATS`): ``claude_code`` (session/subagent JSONL), ``mini_swe_agent``
(``.traj.json``, tool-calling and text), ``swe_agent`` (``.traj``), ``openhands`` (V1
conversation folder), ``openai_chat`` and ``anthropic_messages`` (generic transcripts). Each
format's module docstring documents its mapping; ``_common`` documents the derived facts.

A format is one file: a module of this package declaring ``RECORDED_FORMATS``, a tuple of
:class:`~h9eval.tasks.recorded._format.RecordedFormat` values (its name, how its files are recognised,
its loader and options). This package finds every such module; detection runs the declared tests in
their ``detect_order`` (:data:`REGISTRY` is in that order).

Every bad input (unreadable, truncated or malformed file, a JSONL line that is not JSON, a
folder of the wrong shape, an unknown format) raises :class:`h9eval.core.errors.FormatError`
naming the file, the line/record/event and what was expected.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections import Counter
from pathlib import Path
from typing import Any

from h9eval.core.errors import ConfigError, FormatError, did_you_mean
from h9eval.core.progress import QUIET_DELAY_S, make_progress
from h9eval.tasks.model import TASK_JSONL_FORMAT, Task, tasks_from_jsonl
from h9eval.tasks.recorded._format import RecordedFormat
from h9eval.tasks.recorded._common import first_nonblank_line, read_text, tool_pair_stats
from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens

__all__ = [
    "FORMATS",
    "REGISTRY",
    "RecordedFormat",
    "detect_format",
    "load_task",
    "load_tasks",
    "load_recorded",
    "inspect_task",
    "summarize_task",
]


def _declared() -> dict[str, RecordedFormat]:
    """Every format the package's modules declare (``RECORDED_FORMATS``), in detection order; a name
    declared twice is a programming error."""
    found: list[RecordedFormat] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            found.extend(getattr(importlib.import_module(f"{__name__}.{info.name}"), "RECORDED_FORMATS", ()))
    twice = sorted(n for n, k in Counter(f.name for f in found).items() if k > 1)
    if twice:
        raise RuntimeError(f"recorded format {twice[0]!r} is declared by two modules")
    return {f.name: f for f in sorted(found, key=lambda f: (f.detect_order, f.name))}


REGISTRY: dict[str, RecordedFormat] = _declared()
"""Every session format by name, in detection order (h9eval's own task files included)."""
FORMATS: tuple[str, ...] = tuple(n for n, f in REGISTRY.items() if f.recorded)
"""Recorded-session format names accepted by ``format=`` and returned by :func:`detect_format`."""

_SESSION_SUFFIXES = tuple(dict.fromkeys(x for f in REGISTRY.values() for x in f.suffixes))


def _expected_any() -> str:
    listed = sorted((f for f in REGISTRY.values() if f.recorded), key=lambda f: (f.listed_order, f.name))
    shown = [f.described for f in listed]
    return ", ".join(shown[:-1]) + " or " + shown[-1]


_EXPECTED_ANY = _expected_any()


def detect_format(path: str | Path) -> str:
    """The format of a session file or folder, decided by its content: the first format, in
    :data:`REGISTRY` order, whose declared test accepts it.

    Args:
        path: a session file or folder.

    Returns:
        A format name (one of :data:`FORMATS`, or h9eval's task-file format).

    Raises:
        FormatError: no such path, or no format accepts it (naming the file and what was expected).
    """
    shown = str(path)
    p = Path(path)
    if not p.exists():
        raise FormatError("no such file or folder", path=shown)
    if p.is_dir():
        for f in REGISTRY.values():
            if f.matches_dir is not None and f.matches_dir(p):
                return f.name
        folders = " or ".join(f.described for f in REGISTRY.values() if f.matches_dir is not None)
        raise FormatError(
            f"folder is not {folders} (expected event_service/events/event-NNNNN-*.json); "
            "use load_tasks() to load every session under a folder",
            path=shown,
        )
    _refuse_zip(p, shown)  # before the text read: a zip is not UTF-8, and an Inspect log says what it is
    text = read_text(p, shown=shown, hand_off=True)  # the loader reads it next
    try:
        obj: Any = json.loads(text)
    except json.JSONDecodeError as e:
        return _detect_jsonl(text, shown, e)
    except RecursionError:
        raise FormatError("JSON nested too deeply", path=shown) from None
    if _is_inspect_json_log(obj):
        raise FormatError(f"an Inspect eval log (JSON), not a session file; {_INSPECT_ADVICE}", path=shown)
    for f in REGISTRY.values():
        if f.matches_json is not None and f.matches_json(obj):
            return f.name
        said = f.near_miss_json(obj) if f.near_miss_json is not None else None
        if said:
            raise FormatError(said, path=shown)
    raise FormatError(f"unknown format; expected {_EXPECTED_ANY}", path=shown)


_INSPECT_ADVICE = (
    "eval logs are read through the Python API: "
    "h9eval.integrations.inspect_logs.tasks_from_eval_log(PATH) gives their samples as tasks"
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first local header, or the end record of an empty one


def _refuse_zip(p: Path, shown: str) -> None:
    """A zip archive (an Inspect ``.eval`` log is one) refused by name: read as text it would be
    reported as "not valid UTF-8", which says nothing about what the file is or how to load it."""
    try:
        with open(p, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return  # read_text names the file and the reason
    if head not in _ZIP_MAGIC:
        return
    import zipfile

    try:
        with zipfile.ZipFile(p) as z:  # the central directory only: no entry is inflated
            names = set(z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        names = set()
    if p.suffix == ".eval" or {"header.json", "_journal/start.json"} & names:
        raise FormatError(
            f"an Inspect eval log (.eval, a zip archive), not a session file; {_INSPECT_ADVICE}", path=shown
        )
    raise FormatError(f"a zip archive, not a session file; expected {_EXPECTED_ANY} (unpack it first)", path=shown)


def _is_inspect_json_log(obj: Any) -> bool:
    """The shape Inspect writes a ``.json`` eval log in: ``version``, and ``eval`` naming the task and model."""
    ev = obj.get("eval") if isinstance(obj, dict) else None
    return isinstance(ev, dict) and "version" in obj and "task" in ev and "model" in ev


def _detect_jsonl(text: str, shown: str, whole: json.JSONDecodeError) -> str:
    first_n, first_line = first_nonblank_line(text)
    if not first_line:
        raise FormatError(f"file is empty; expected {_EXPECTED_ANY}", path=shown)
    try:
        first = json.loads(first_line)
    except (json.JSONDecodeError, RecursionError):
        # Neither one JSON value nor JSON lines: report where the whole-file parse broke.
        raise FormatError(
            f"not valid JSON ({whole.msg}); expected {_EXPECTED_ANY}",
            path=shown,
            where=f"line {whole.lineno} column {whole.colno}",
        ) from None
    for f in REGISTRY.values():
        if f.matches_jsonl is not None and f.matches_jsonl(first, Path(shown)):
            return f.name
    raise FormatError(f"unknown JSONL format; expected {_EXPECTED_ANY}", path=shown, where=f"line {first_n}")


def _format(fmt: str) -> RecordedFormat:
    f = REGISTRY.get(fmt)
    if f is None:
        raise ConfigError(did_you_mean(fmt, list(REGISTRY), what="recorded format"))
    return f


def load_task(path: str | Path, format: str | None = None, **options: Any) -> Task:
    """Load one session: a file, or an OpenHands conversation folder.

    Args:
        path: the session.
        format: one of :data:`FORMATS` (or h9eval's task-file format); default: :func:`detect_format`.
        options: the format's loader options: ``keep_compact_summary`` (claude_code, default True),
            ``synthesize_tool_calls`` (mini_swe_agent/swe_agent text formats, default True).

    Returns:
        The task.

    Raises:
        ConfigError: an unknown format or an option its loader does not accept.
        FormatError: a bad file.
    """
    f = _format(format) if format is not None else REGISTRY[detect_format(path)]
    unknown = sorted(set(options) - f.options)
    if unknown:
        raise ConfigError(
            f"option {unknown[0]!r} is not accepted by the {f.name} loader; accepted: "
            f"{', '.join(sorted(f.options)) or 'none'}"
        )
    return f.load(path, **options)


def load_tasks(
    path: str | Path,
    *,
    format: str | None = None,
    errors: list[FormatError] | None = None,
    **options: Any,
) -> list[Task]:
    """Every session in a file or under a folder (recursively, in sorted path order).

    A folder that is an OpenHands conversation is one task and is not descended into; other
    folders are walked for ``*.jsonl``/``*.json``/``*.traj`` files (other files, names
    starting with ``.`` and files a format declares not to be sessions, Claude Code's own compaction
    calls ``agent-acompact-*``, are ignored). A file of a format that holds several sessions (a chat
    JSONL with one ``{"messages": [...]}`` per line, an h9eval task file) gives one task each.

    Args:
        path: a session file or a folder.
        format: as for :func:`load_task`, applied to every session found.
        errors: if a list is given, a session that fails to load is recorded there and skipped;
            otherwise the first :class:`FormatError` is raised.
        options: as for :func:`load_task`.

    Returns:
        The tasks, in path order.
    """
    if format is not None:
        _format(format)
    p = Path(path)
    if not p.exists():
        raise FormatError("no such file or folder", path=str(path))
    out: list[Task] = []
    items = _discover(p) if p.is_dir() else [p]
    # a folder of many large sessions takes a while: say so, after a quiet moment
    bar = make_progress(
        total=len(items), desc=f"loading {path}", unit="file", delay_s=QUIET_DELAY_S, enabled=len(items) > 1
    )
    for item in items:
        bar.update(1)
        # Show paths the way the caller spelled the root, so TaskSource.path stays recognisable.
        shown = item if item == p else Path(path) / item.relative_to(p)
        try:
            f = REGISTRY[format or detect_format(shown)]
            if f.load_all is not None:
                out.extend(f.load_all(shown))
            else:
                out.append(load_task(shown, f.name, **options))
        except FormatError as e:
            if errors is None:
                bar.close()
                raise
            errors.append(e)
    bar.close()
    return out


load_recorded = load_tasks


def _discover(root: Path) -> list[Path]:
    if any(f.matches_dir is not None and f.matches_dir(root) for f in REGISTRY.values()):
        return [root]
    found: list[Path] = []
    try:
        entries = sorted(root.iterdir(), key=lambda q: q.name)
    except OSError as e:
        raise FormatError(f"cannot list folder: {e.strerror or e}", path=str(root)) from None
    for q in entries:
        if q.name.startswith("."):
            continue
        if q.is_dir():
            found.extend(_discover(q))
        elif (
            q.is_file()
            and q.name.endswith(_SESSION_SUFFIXES)
            and not any(f.skip_file is not None and f.skip_file(q) for f in REGISTRY.values())
        ):
            found.append(q)
    return found


def inspect_task(path: str | Path, format: str | None = None) -> dict[str, Any]:
    """Load one session and summarise it with :func:`summarize_task`. An h9eval task file
    (:data:`~h9eval.tasks.model.TASK_JSONL_FORMAT`) is reported as that format, with each
    task's own id and source kind (``n_tasks`` and ``tasks`` when it holds several)."""
    fmt = format if format is not None else detect_format(path)
    if fmt != TASK_JSONL_FORMAT:
        return summarize_task(load_task(path, fmt))
    infos = [
        {**summarize_task(t), "format": TASK_JSONL_FORMAT, "source_kind": t.source.kind} for t in tasks_from_jsonl(path)
    ]
    if len(infos) == 1:
        return infos[0]
    return {"format": TASK_JSONL_FORMAT, "n_tasks": len(infos), "tasks": infos}


def summarize_task(t: Task) -> dict[str, Any]:
    """A summary of any task: format, sizes, counts by role, tool pairing, compactions.

    Counts are computed from the messages themselves (so tasks from other sources work too);
    loader metadata fills in the rest when present. Keys: ``task_id``, ``format``,
    ``variant``, ``agent``, ``model``, ``bytes``, ``n_messages``, ``messages_by_role``,
    ``n_tool_calls``, ``n_tool_results``, ``unmatched_tool_calls``, ``orphan_tool_results``,
    ``estimated_tokens`` (harness9 bytes/4), ``tool_schema_tokens``,
    ``largest_tool_result_bytes`` (harness9 bytes: content + tool_call_id),
    ``largest_tool_result_index``, ``n_compactions`` (recorded compactions/condensations),
    ``n_facts``, ``key_terms``, ``task_statement`` (first 200 characters),
    ``skipped_records``, ``duplicate_tool_call_ids`` (ids carried by more than one tool call,
    at most 10, and ``n_duplicate_tool_call_ids`` how many there are: valid in some
    transcripts, and each such output gets its own offload file).
    """
    md = t.metadata
    call_ids = Counter(tc.id for m in t.messages for tc in m.tool_calls)
    dup_ids = sorted(i for i, n in call_ids.items() if n > 1)
    largest, largest_at = 0, None  # the first largest tool result
    for i, m in enumerate(t.messages):
        if m.is_tool_result and (largest_at is None or m.nbytes > largest):
            largest, largest_at = m.nbytes, i
    comp = md.get("compactions") or md.get("condensations") or []
    by_role = Counter(m.role for m in t.messages)
    return {
        "task_id": t.task_id,
        "format": md.get("format") or t.source.format or t.source.kind,
        "variant": md.get("variant"),
        "agent": md.get("agent"),
        "model": md.get("model"),
        "bytes": md.get("bytes"),
        "n_messages": len(t.messages),
        "messages_by_role": dict(sorted(by_role.items())),
        **tool_pair_stats(t.messages),
        "estimated_tokens": estimate_tokens(t.messages),
        "tool_schema_tokens": estimate_tool_tokens(t.tools),
        "largest_tool_result_bytes": largest,
        "largest_tool_result_index": largest_at,
        "n_compactions": len(comp) if isinstance(comp, list) else 0,
        "n_facts": len(t.facts),
        "key_terms": list(t.intent.key_terms),
        "task_statement": t.intent.statement[:200],
        "skipped_records": dict(md.get("skipped_records", {}) or {}),
        "n_duplicate_tool_call_ids": len(dup_ids),
        "duplicate_tool_call_ids": dup_ids[:10],
    }
