"""The task model: a transcript plus the ground truth the probes score against.

Positions are *message indices* into ``Task.messages`` (0-based). A "call" in the replay is an
assistant message; its index is where that model call's output sits in the transcript.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.paths import atomic_write
from h9eval.core.messages import Message, messages_from_json, messages_to_json
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "TASK_SCHEMA_VERSION",
    "TASK_SCHEMA_VERSIONS_READ",
    "TASK_JSONL_FORMAT",
    "is_task_jsonl_record",
    "FACT_KINDS",
    "TaskSource",
    "INTENT_APPEND_SEPARATOR",
    "IntentChange",
    "Intent",
    "AnchorTruth",
    "Fact",
    "Task",
    "tasks_to_jsonl",
    "tasks_from_jsonl",
    "tasks_to_dataframe",
    "tasks_from_dataframe",
    "tasks_to_dataset",
    "tasks_from_dataset",
]

TASK_SCHEMA_VERSION = 2
"""The newest task format: version 2 added ``appends`` to an intent change (:class:`IntentChange`).
A task without an appending change is still written as version 1 (:meth:`Task.schema_version`),
which it is byte for byte, so a synthetic task's file is unchanged and older readers read it."""
TASK_SCHEMA_VERSIONS_READ = (1, 2)
TASK_JSONL_FORMAT = "h9eval_task_jsonl"
"""The format name of h9eval's own task files (:func:`tasks_to_jsonl`, ``h9eval tasks generate``):
one :meth:`Task.to_dict` per line. Not a recorded-session format: it carries the ground truth."""
FACT_KINDS = ("constraint", "identifier", "number", "path", "preference", "derived")
ANCHOR_KINDS = ("execution_progress", "key_decision", "tried_solution", "next_step", "constraint", "artifact")


@dataclass(frozen=True, kw_only=True)
class TaskSource:
    """Where a task came from: ``kind`` is ``synthetic``, ``recorded`` or ``harness9_db``."""

    kind: str
    preset: str | None = None
    seed: int | None = None
    path: str | None = None
    format: str | None = None
    session: str | None = None

    def spec(self) -> str:
        """The task spec that loads this task again (:func:`h9eval.tasks.load_tasks_from_spec`): its one
        file when it came from a file, ``DB#session``, ``synthetic:P:S``, ``world:K:S``."""
        if self.kind == "synthetic":
            return f"synthetic:{self.preset}:{self.seed}"
        if self.kind == "world":
            return f"world:{self.preset}:{self.seed}"
        if self.kind == "harness9_db" and self.path and self.session:
            return f"{Path(self.path).resolve()}#{self.session}"
        if self.kind == "dataset":
            return f"dataset:{self.path}"
        if self.path and Path(self.path).is_file():
            return str(Path(self.path).resolve())
        return str(self.path or "")


INTENT_APPEND_SEPARATOR = "\n\n"
"""Between the statement in force and the text an appending :class:`IntentChange` adds."""


@dataclass(frozen=True, kw_only=True)
class IntentChange:
    """The user refines or changes the goal at ``message_index``.

    ``appends=False`` (a new goal): ``statement`` is the whole statement in force from here on.
    ``appends=True`` (a refinement that keeps the task in force, as a recorded session's later
    prompts do): ``statement`` is only the text this change adds, and the statement in force is
    the previous one, :data:`INTENT_APPEND_SEPARATOR`, then this text. Storing each refinement's
    whole statement made a chat log of n user turns hold O(n^2) text. Read the statement in force
    from :meth:`Intent.at` or :meth:`Intent.statement_of`, never from an appending change.
    """

    message_index: int
    statement: str
    key_terms: tuple[str, ...] = ()
    appends: bool = False


@dataclass(frozen=True, kw_only=True)
class Intent:
    """The task statement, its key terms, and later refinements (in transcript order)."""

    statement: str
    key_terms: tuple[str, ...] = ()
    changes: tuple[IntentChange, ...] = ()

    def at(self, message_index: int) -> IntentChange:
        """The intent in force once messages up to ``message_index`` (inclusive) have been seen:
        the latest change at or before it (the original statement when there is none), with its
        whole statement in force (``appends`` is ``False``)."""
        k = -1
        for j, ch in enumerate(self.changes):
            if ch.message_index <= message_index:
                k = j
        if k < 0:
            return IntentChange(message_index=0, statement=self.statement, key_terms=self.key_terms)
        ch = self.changes[k]
        return replace(ch, statement=self.statement_of(k), appends=False) if ch.appends else ch

    def statement_of(self, k: int) -> str:
        """The whole statement in force after ``changes[k]`` (``k = -1``: the original statement).

        The one place an appending change is resolved: from the latest change at or before ``k``
        that states a whole goal (or the original statement), each appended text in order."""
        parts = []
        while k >= 0 and self.changes[k].appends:
            parts.append(self.changes[k].statement)
            k -= 1
        parts.append(self.statement if k < 0 else self.changes[k].statement)
        return INTENT_APPEND_SEPARATOR.join(reversed(parts))


@dataclass(frozen=True, kw_only=True)
class AnchorTruth:
    """A ground-truth anchor item (progress milestone, decision, tried solution, next step...).

    ``kind`` is an anchor type (``execution_progress``, ``key_decision``, ``tried_solution``,
    ``next_step``, ``constraint``, ``artifact``); ``key_terms`` are what a recall probe looks for;
    ``until_index`` (exclusive) marks when the item stops being current (e.g. a next step done).
    """

    kind: str
    message_index: int
    text: str
    key_terms: tuple[str, ...] = ()
    until_index: int | None = None


@dataclass(frozen=True, kw_only=True)
class Fact:
    """A planted (synthetic) or derived (recorded) fact with a known answer."""

    fact_id: str
    question: str
    answer: str
    kind: str
    message_index: int
    variants: tuple[str, ...] = ()
    superseded_at: int | None = None
    superseded_by: str | None = None

    def live_at(self, message_index: int) -> bool:
        """Introduced at or before ``message_index`` and not yet superseded."""
        if self.message_index > message_index:
            return False
        return self.superseded_at is None or self.superseded_at > message_index


# A str can hold a lone surrogate (a JSON "\udcff" escape in a recorded session) that UTF-8
# cannot encode: the session store, offload files and parquet writers then fail with
# UnicodeEncodeError mid-replay. Go's encoding/json decodes such an escape to U+FFFD, so harness9
# never sees one; a Task does the same to its messages.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _fix(s: str) -> str:
    return s if s.isascii() else _LONE_SURROGATE.sub("\ufffd", s)


def _has_lone_surrogate(m: Message) -> bool:
    texts = (m.content, m.tool_call_id, *(x for tc in m.tool_calls for x in (tc.id, tc.name, tc.arguments)))
    return any(not t.isascii() and _LONE_SURROGATE.search(t) for t in texts)


def _without_lone_surrogates(m: Message) -> Message:
    if not _has_lone_surrogate(m):
        return m
    calls = tuple(type(tc)(_fix(tc.id), _fix(tc.name), _fix(tc.arguments)) for tc in m.tool_calls)
    return replace(m, content=_fix(m.content), tool_call_id=_fix(m.tool_call_id), tool_calls=calls)


@dataclass(frozen=True, kw_only=True)
class Task:
    """One session to replay: transcript, tool schemas, ground truth and metadata."""

    task_id: str
    version: str = "1"
    source: TaskSource
    messages: tuple[Message, ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    intent: Intent
    anchors: tuple[AnchorTruth, ...] = ()
    facts: tuple[Fact, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if any(_has_lone_surrogate(m) for m in self.messages):
            object.__setattr__(self, "messages", tuple(_without_lone_surrogates(m) for m in self.messages))

    # -- convenience -----------------------------------------------------------------------
    @property
    def n_calls(self) -> int:
        return sum(1 for m in self.messages if m.role == "assistant")

    @property
    def estimated_tokens(self) -> int:
        return estimate_tokens(self.messages)

    def content_hash(self) -> str:
        """sha256 of the canonical JSON form; equal tasks have equal hashes."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def transcript_hash(self) -> str:
        """sha256 of the messages alone (canonical JSON): the same session loaded from two files,
        a fixture and a dataset row, or under two ids has one transcript hash, so a sweep can run it
        once (:func:`~h9eval.sweeps.cells.expand_cells`)."""
        text = json.dumps(messages_to_json(self.messages), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    # -- (de)serialisation -----------------------------------------------------------------
    def schema_version(self) -> int:
        """The oldest task format that holds this task: 2 when an intent change appends, else 1."""
        return TASK_SCHEMA_VERSION if any(c.appends for c in self.intent.changes) else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version(),
            "task_id": self.task_id,
            "version": self.version,
            "source": asdict(self.source),
            "messages": messages_to_json(self.messages),
            "message_meta": [dict(m.meta) if m.meta else None for m in self.messages]
            if any(m.meta for m in self.messages)
            else None,
            "tools": [dict(t) for t in self.tools],
            "intent": {
                "statement": self.intent.statement,
                "key_terms": list(self.intent.key_terms),
                "changes": [
                    {
                        "message_index": c.message_index,
                        "statement": c.statement,
                        "key_terms": list(c.key_terms),
                        **({"appends": True} if c.appends else {}),
                    }
                    for c in self.intent.changes
                ],
            },
            "anchors": [_tuple_to_list(asdict(a)) for a in self.anchors],
            "facts": [_tuple_to_list(asdict(f)) for f in self.facts],
            "metadata": _jsonable(dict(self.metadata)),
        }

    @classmethod
    def from_dict(cls, d: Any, *, path: str | None = None, where: str = "task") -> Task:
        if not isinstance(d, Mapping):
            raise FormatError(f"expected a task object, got {type(d).__name__}", path=path, where=where)
        ver = d.get("schema_version", TASK_SCHEMA_VERSION)
        if ver not in TASK_SCHEMA_VERSIONS_READ:
            raise FormatError(
                f"task schema_version {ver!r} is not supported "
                f"(this h9eval reads {', '.join(map(str, TASK_SCHEMA_VERSIONS_READ))})",
                path=path,
                where=where,
            )
        try:
            msgs = messages_from_json(d["messages"], where=f"{where}.messages", path=path)
            meta_list = d.get("message_meta")
            if meta_list:
                msgs = [replace(m, meta=mm) if mm else m for m, mm in zip(msgs, meta_list)]
            it = d["intent"]
            intent = Intent(
                statement=str(it["statement"]),
                key_terms=tuple(it.get("key_terms", ())),
                changes=tuple(
                    IntentChange(
                        message_index=int(c["message_index"]),
                        statement=str(c["statement"]),
                        key_terms=tuple(c.get("key_terms", ())),
                        appends=_appends(c, ver, path=path, where=f"{where}.intent.changes[{k}].appends"),
                    )
                    for k, c in enumerate(it.get("changes", ()))
                ),
            )
            return cls(
                task_id=str(d["task_id"]),
                version=str(d.get("version", "1")),
                source=TaskSource(**d["source"]),
                messages=tuple(msgs),
                tools=tuple(d.get("tools", ()) or ()),
                intent=intent,
                anchors=tuple(
                    AnchorTruth(**{**a, "key_terms": tuple(a.get("key_terms", ()))}) for a in d.get("anchors", ())
                ),
                facts=tuple(Fact(**{**f, "variants": tuple(f.get("variants", ()))}) for f in d.get("facts", ())),
                metadata=dict(d.get("metadata", {}) or {}),
            )
        except FormatError:
            raise
        except KeyError as e:
            raise FormatError(f"missing field {e.args[0]!r}", path=path, where=where) from None
        except (TypeError, ValueError) as e:
            raise FormatError(f"malformed task: {e}", path=path, where=where) from None


def _appends(change: Mapping[str, Any], version: int, *, path: str | None, where: str) -> bool:
    """An intent change's ``appends`` (absent: ``False``); a version-1 task has none."""
    v = change.get("appends", False)
    if not isinstance(v, bool):
        raise FormatError(f"expected true or false, got {type(v).__name__}", path=path, where=where)
    if v and version == 1:
        raise FormatError(
            "an appending intent change needs task schema_version 2; this task says 1", path=path, where=where
        )
    return v


def _tuple_to_list(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=str))


# -- collections ------------------------------------------------------------------------------
def tasks_to_jsonl(tasks: Iterable[Task], path: str | Path) -> Path:
    """Write one task per line (UTF-8, sorted keys, so equal tasks give equal bytes)."""
    path = Path(path)
    # Refuse a bad destination up front, as one FormatError, never an OSError traceback; the
    # existing file (if any) is only ever replaced whole, by the rename below.
    if path.is_dir():
        raise FormatError("is a folder; expected a file path for the task JSONL", path=str(path))
    blocker = next((a for a in path.parents if a.exists() and not a.is_dir()), None)
    if blocker is not None:
        raise FormatError(f"{blocker} is not a folder; cannot create the task JSONL under it", path=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FormatError(f"cannot create the folder for the task JSONL ({e.strerror or e})", path=str(path)) from None
    try:
        with atomic_write(path) as f:
            for t in tasks:
                f.write((json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
    except OSError as e:
        raise FormatError(f"cannot write the task JSONL ({e.strerror or e})", path=str(path)) from None
    return path


def is_task_jsonl_record(d: Any) -> bool:
    """``d`` (a parsed JSONL line) is a task as :func:`tasks_to_jsonl` writes it."""
    return isinstance(d, dict) and "task_id" in d and "intent" in d and "messages" in d


def tasks_from_jsonl(path: str | Path) -> list[Task]:
    path = Path(path)
    out = []
    try:
        fh = open(path, encoding="utf-8")
    except OSError as e:
        raise FormatError(f"cannot read task file: {e.strerror}", path=str(path)) from None
    with fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise FormatError(
                    f"line is not JSON ({e.msg}); expected one task object per line", path=str(path), where=f"line {i}"
                ) from None
            except RecursionError:
                raise FormatError(
                    "JSON nested too deeply; expected one task object per line", path=str(path), where=f"line {i}"
                ) from None
            out.append(Task.from_dict(d, path=str(path), where=f"line {i}"))
    return out


_COLUMNS = (
    "task_id",
    "version",
    "source",
    "messages",
    "message_meta",
    "tools",
    "intent",
    "anchors",
    "facts",
    "metadata",
)


def _rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    rows = []
    for t in tasks:
        d = t.to_dict()
        rows.append(
            {
                "schema_version": d["schema_version"],
                "task_id": d["task_id"],
                "version": d["version"],
                "n_messages": len(t.messages),
                "estimated_tokens": t.estimated_tokens,
                **{k: json.dumps(d[k], sort_keys=True, ensure_ascii=False) for k in _COLUMNS[2:]},
            }
        )
    return rows


def _from_rows(rows: Iterable[Mapping[str, Any]], *, origin: str) -> list[Task]:
    out = []
    for i, r in enumerate(rows):
        try:
            d = {k: json.loads(r[k]) for k in _COLUMNS[2:]}
        except KeyError as e:
            raise FormatError(f"missing column {e.args[0]!r}", path=origin, where=f"row {i}") from None
        except (TypeError, json.JSONDecodeError) as e:
            raise FormatError(f"column is not JSON text: {e}", path=origin, where=f"row {i}") from None
        d.update(
            task_id=r["task_id"], version=r["version"], schema_version=r.get("schema_version", TASK_SCHEMA_VERSION)
        )
        out.append(Task.from_dict(d, path=origin, where=f"row {i}"))
    return out


def tasks_to_dataframe(tasks: Iterable[Task]) -> Any:
    """One row per task; nested parts as JSON text columns (lossless, parquet-friendly)."""
    import pandas as pd

    return pd.DataFrame(_rows(tasks))


def tasks_from_dataframe(df: Any) -> list[Task]:
    return _from_rows(df.to_dict("records"), origin="DataFrame")


def tasks_to_dataset(tasks: Iterable[Task]) -> Any:
    """A Hugging Face ``datasets.Dataset`` built in memory (no hub access)."""
    import datasets

    rows = _rows(tasks)
    return datasets.Dataset.from_list(rows)


def tasks_from_dataset(ds: Any) -> list[Task]:
    return _from_rows(ds, origin="Dataset")
