"""Inspect eval logs, both ways, and the message conversion they share with the compaction strategy.

Kept apart from :mod:`h9eval.integrations.inspect` so that ``inspect_ai`` is imported only when a
function here is called (the ``h9eval export --format inspect`` command imports this module at
start-up, with or without the optional extra installed).

* :func:`run_to_eval_log`: one replay as an eval log of one sample.
* :func:`sweep_to_eval_logs`: a sweep's results folder as one eval log per configuration, one
  sample per task (and repeat, as Inspect's epochs). One log per configuration, not one log for the
  sweep: an Inspect eval log is one task evaluated with one model, and ``inspect view`` lists logs
  side by side by model; a configuration (policy entry, grid point, summarizer, history mode) is what
  stands in the model's place here, so each gets its log and the viewer compares them as it compares
  models. A sweep stores tables, not views: each cell is replayed again as the sweep ran it (its
  :class:`~h9eval.runs.spec.RunSpec` from its manifest entry, run by :func:`~h9eval.runs.execute.execute`),
  checked against the sweep's own ``calls`` table, and its views written as the model events; the
  scores are the sweep's tables' per-run numbers (:func:`h9eval.analysis.metrics.run_metrics`: retention,
  tokens saved, ...).
* :func:`tasks_from_eval_log`: an eval log's samples as recorded tasks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.analysis.metrics import run_metrics
from h9eval.compaction.policies import registry
from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.paths import check_export_target, new_export_tmp, replace_export_dir, safe_name
from h9eval.results.store import load_results
from h9eval.runs.replay import ReplayResult
from h9eval.runs.execute import execute, load_task
from h9eval.runs.spec import ProbeSpec
from h9eval.sweeps.cells import Cell, entry_policy_kind
from h9eval.sweeps.worker import cell_env
from h9eval.tasks.model import Task
from h9eval.tasks.recorded.chat import openai_task_from_messages

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessage

__all__ = [
    "INSPECT_LOG_FORMAT",
    "INSPECT_LOG_FORMATS",
    "MAX_LOG_ENTRY_BYTES",
    "MAX_LOG_ENTRY_RATIO",
    "MAX_LOG_TOTAL_BYTES",
    "SweepExport",
    "from_inspect",
    "run_to_eval_log",
    "sweep_to_eval_logs",
    "tasks_from_eval_log",
    "to_inspect",
]

INSPECT_LOG_FORMAT = "inspect_log"
"""The format of tasks read from Inspect eval logs (:func:`tasks_from_eval_log`)."""

INSPECT_LOG_FORMATS = ("eval", "json")
"""The file formats Inspect writes and ``inspect view`` reads: ``eval`` (a zip, Inspect's
default) and ``json`` (one JSON document)."""


def _require_inspect() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise ConfigError("the Inspect export needs the optional extra: pip install 'h9eval[inspect]'") from None


# -- messages, both ways -----------------------------------------------------------------------
RAW_ARGUMENTS_KEY = "__h9eval_raw_arguments__"
"""Inspect's tool-call arguments are a dict: arguments that are not a JSON object travel as
``{RAW_ARGUMENTS_KEY: text}`` and come back as the text."""


def _arguments(args: Mapping[str, Any] | str | None) -> str:
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    if set(args) == {RAW_ARGUMENTS_KEY}:
        return str(args[RAW_ARGUMENTS_KEY])
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def from_inspect(messages: Sequence[ChatMessage]) -> list[Message]:
    """Inspect chat messages as h9eval messages (text content; a tool call's arguments as JSON
    text; a tool message's error as ``is_error``). Reasoning blocks are not text the model is
    sent again, so only ``.text`` is kept, as the recorded-session loaders do."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool

    out: list[Message] = []
    for m in messages:
        if isinstance(m, ChatMessageAssistant):
            calls = tuple(ToolCall(tc.id, tc.function, _arguments(tc.arguments)) for tc in (m.tool_calls or []))
            out.append(Message("assistant", m.text, calls))
        elif isinstance(m, ChatMessageTool):
            out.append(Message("tool", m.text, (), m.tool_call_id or "", m.error is not None))
        elif isinstance(m, ChatMessageSystem):
            out.append(Message("system", m.text))
        else:
            out.append(Message("user", m.text))
    return out


def _to_one(m: Message, functions: Mapping[str, str]) -> ChatMessage:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall as InspectToolCall
    from inspect_ai.tool import ToolCallError

    if m.role == "assistant":
        calls = []
        for tc in m.tool_calls:
            try:
                args = json.loads(tc.arguments) if tc.arguments else {}
            except ValueError:
                args = None
            if not isinstance(args, dict):
                args = {RAW_ARGUMENTS_KEY: tc.arguments}
            calls.append(InspectToolCall(id=tc.id, function=tc.name, arguments=args))
        return ChatMessageAssistant(content=m.content, tool_calls=calls or None, source="generate")
    if m.role == "tool":
        error = ToolCallError("unknown", m.content[:200]) if m.is_error else None
        return ChatMessageTool(
            content=m.content, tool_call_id=m.tool_call_id, function=functions.get(m.tool_call_id), error=error
        )
    if m.role == "system":
        return ChatMessageSystem(content=m.content)
    return ChatMessageUser(content=m.content)


def to_inspect(
    view: Sequence[Message], originals: Sequence[ChatMessage] = (), converted: Sequence[Message] = ()
) -> list[ChatMessage]:
    """h9eval messages as Inspect chat messages. A message the policy kept unchanged (the same
    object as in ``converted``, which :func:`from_inspect` made from ``originals``) is the original
    Inspect message, with its id and metadata; a new one (a summary, an offload placeholder) is a
    new message (a new id: Inspect sees it as new input)."""
    by_obj = {id(h): o for h, o in zip(converted, originals)}
    functions = {tc.id: tc.name for m in (*converted, *view) for tc in m.tool_calls}
    return [by_obj.get(id(m)) or _to_one(m, functions) for m in view]


class _Converter:
    """Converts the views of one run, each message object once (a kept message is the same object
    in every later view, so a run of ``n`` calls converts ``O(n)`` messages, not ``O(n^2)``). With
    ``stable_ids``, a message's id is made from its content and its rank among equal messages met
    before, in place of Inspect's random one: the same export is the same file, and a message kept
    across calls keeps its id, so Inspect's log stores it once."""

    def __init__(self, *, stable_ids: bool) -> None:
        self.stable_ids = stable_ids
        self._done: dict[int, tuple[Message, ChatMessage]] = {}  # the message kept alive with its id
        self._seen: dict[str, int] = {}

    def __call__(self, view: Sequence[Message]) -> list[ChatMessage]:
        new = [m for m in view if id(m) not in self._done]
        if new:
            functions = {tc.id: tc.name for m in view for tc in m.tool_calls}
            for m in new:
                im = _to_one(m, functions)
                if self.stable_ids:
                    key = json.dumps(
                        [
                            m.role,
                            m.content,
                            m.tool_call_id,
                            [[tc.id, tc.name, tc.arguments] for tc in m.tool_calls],
                            m.is_error,
                        ]
                    )
                    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
                    self._seen[digest] = self._seen.get(digest, 0) + 1
                    im.id = f"{digest}-{self._seen[digest]}"
                self._done[id(m)] = (m, im)
        return [self._done[id(m)][1] for m in view]


# -- eval logs, both ways -------------------------------------------------------------------------
def _openai_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    out = []
    for h in from_inspect(messages):
        d: dict[str, Any] = {"role": h.role, "content": h.content}
        if h.tool_calls:
            d["tool_calls"] = [
                {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                for tc in h.tool_calls
            ]
        if h.role == "tool":
            d["tool_call_id"] = h.tool_call_id
            d["is_error"] = h.is_error
        out.append(d)
    return out


MAX_LOG_ENTRY_BYTES = 512 * 2**20
"""The largest entry of a ``.eval`` log (its declared uncompressed size), and the largest ``.json``
log, :func:`tasks_from_eval_log` reads: a log is read whole into memory, so a size it cannot hold
is refused before anything is read."""
MAX_LOG_TOTAL_BYTES = 2 * 2**30
"""The largest sum of a ``.eval`` log's declared entry sizes :func:`tasks_from_eval_log` reads."""
MAX_LOG_ENTRY_RATIO = 200
"""The largest uncompressed-to-compressed ratio of an entry over 1 MiB: JSON compresses about
10x; far more is a zip bomb (a 2 MB log whose entry inflates to 2 GiB), refused before it is read."""
_RATIO_FLOOR_BYTES = 2**20  # below this an entry is harmless whatever its ratio (a header of repeated keys)
_READ_CHUNK = 2**20
# zipfile inflates deflate output at most ``n`` bytes per read(n); other methods (zstandard, Inspect's
# default) inflate a whole compressed chunk at once, so those are read 4 KiB of input at a time.
_SMALL_CHUNK = 4096
_INSPECT_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", 93: "zstandard"}
"""The compression methods Inspect writes ``.eval`` entries with (93: zstandard, its default);
others (bzip2, lzma) are refused: Inspect never writes them and their reads are not bounded."""


def _supported_log_versions() -> tuple[int, ...]:
    """The log format versions the installed Inspect reads: 1 up to the version it writes (its
    JSON reader refuses a higher one; its ``.eval`` reader does not check, so this loader does)."""
    from inspect_ai.log import EvalLog

    return tuple(range(1, int(EvalLog.model_fields["version"].default) + 1))


def _check_version(data: Any, shown: str, where: str | None) -> None:
    versions = _supported_log_versions()
    if not isinstance(data, dict):
        raise FormatError("expected a JSON object (an Inspect eval log's header)", path=shown, where=where)
    if "version" not in data:
        return  # Inspect reads a log without one as its current version
    v = data["version"]
    if isinstance(v, bool) or v not in versions:
        raise FormatError(
            f"Inspect log format version {v!r} is not supported; expected one of "
            f"{', '.join(map(str, versions))} (the versions the installed inspect_ai reads)",
            path=shown,
            where=where,
        )


def _loads(data: bytes, shown: str, where: str | None) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise FormatError("JSON nested too deeply; expected an Inspect eval log", path=shown, where=where) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise FormatError(f"not JSON ({e}); expected an Inspect eval log", path=shown, where=where) from None


def _read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, shown: str) -> bytes:
    """An entry's bytes, read in bounded steps and never past its declared size (checked against the
    limits before): a header that lies about the size cannot make the read inflate more."""
    step = _READ_CHUNK if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) else _SMALL_CHUNK
    out = bytearray()
    try:
        with zf.open(info) as f:
            while chunk := f.read(step):
                out += chunk
                if len(out) > info.file_size:  # zipfile stops at the declared size; kept should it ever not
                    raise FormatError(
                        f"entry inflates past its declared {info.file_size} bytes", path=shown, where=info.filename
                    )
    except FormatError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, ValueError) as e:
        # a CRC mismatch (what a lying size gives), a cut-off entry, an encrypted one
        raise FormatError(
            f"damaged entry ({type(e).__name__}: {e}); expected an Inspect .eval log", path=shown, where=info.filename
        ) from None
    return bytes(out)


def _check_entries(infos: Sequence[zipfile.ZipInfo], shown: str) -> None:
    """Every entry's declared size, ratio and method against the stated limits, before any is read."""
    total = 0
    for info in infos:
        if info.compress_type not in _INSPECT_METHODS:
            raise FormatError(
                f"entry compressed with method {info.compress_type}; expected "
                f"{', '.join(_INSPECT_METHODS.values())} (what Inspect writes)",
                path=shown,
                where=info.filename,
            )
        if info.file_size > MAX_LOG_ENTRY_BYTES:
            raise FormatError(
                f"entry declares {info.file_size} bytes uncompressed; the limit is {MAX_LOG_ENTRY_BYTES} "
                "(MAX_LOG_ENTRY_BYTES)",
                path=shown,
                where=info.filename,
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > _RATIO_FLOOR_BYTES and ratio > MAX_LOG_ENTRY_RATIO:
            raise FormatError(
                f"entry inflates {ratio:.0f}x ({info.compress_size} bytes to {info.file_size}); the limit is "
                f"{MAX_LOG_ENTRY_RATIO}x (MAX_LOG_ENTRY_RATIO): not an Inspect log's JSON",
                path=shown,
                where=info.filename,
            )
        total += info.file_size
    if total > MAX_LOG_TOTAL_BYTES:
        raise FormatError(
            f"entries declare {total} bytes uncompressed in all; the limit is {MAX_LOG_TOTAL_BYTES} "
            "(MAX_LOG_TOTAL_BYTES)",
            path=shown,
        )


def _eval_zip_bytes(p: Path, shown: str) -> bytes:
    """A ``.eval`` log checked (a zip, its entries within the limits, a header of a version Inspect
    reads) and copied, entry by entry through bounded reads, into an uncompressed zip in memory: the
    zip Inspect's reader is given has sizes that are true, so it cannot inflate past them."""
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, EOFError, ValueError) as e:
        raise FormatError(
            f"not an Inspect .eval log (a zip archive): {e} (a cut-off download or another kind of file?)", path=shown
        ) from None
    with zf:
        infos = zf.infolist()
        _check_entries(infos, shown)
        last = {i.filename: i for i in infos}  # a re-logged entry: Inspect reads the last of a name
        head = next((n for n in ("header.json", "_journal/start.json") if n in last), None)
        if head is None:
            raise FormatError("no header.json or _journal/start.json entry; expected an Inspect .eval log", path=shown)
        _check_version(_loads(_read_entry(zf, last[head], shown), shown, head), shown, head)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
            for name, info in last.items():
                if not info.is_dir():
                    out.writestr(name, _read_entry(zf, info, shown))
    return buf.getvalue()


def _first_invalid(e: Any) -> str:
    """The first field a pydantic ``ValidationError`` names, not its whole dump (one per union branch)."""
    errs = e.errors(include_url=False)
    if not errs:
        return str(e).splitlines()[0][:200]
    first = errs[0]
    loc = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
    got = type(first.get("input")).__name__
    return f"{e.title} field {loc}: {str(first.get('msg', ''))[:200]} (got {got})"


def _read_log(path: str | os.PathLike[str]) -> Any:
    """An Inspect eval log, every problem a :class:`FormatError` naming the file (see
    :func:`tasks_from_eval_log`)."""
    from inspect_ai.log import read_eval_log
    from pydantic import ValidationError

    shown = str(path)
    p = Path(path)
    if not p.exists():
        raise FormatError("no such file; expected an Inspect eval log (.eval or .json)", path=shown)
    if p.is_dir():
        raise FormatError("is a directory; expected an Inspect eval log file (.eval or .json)", path=shown)
    try:
        with open(p, "rb") as fh:
            magic = fh.read(4)
        size = p.stat().st_size
    except OSError as e:
        raise FormatError(f"cannot read file: {e.strerror or e}", path=shown) from None
    if p.suffix == ".eval" or magic.startswith(b"PK"):
        data, fmt = _eval_zip_bytes(p, shown), "eval"
    else:
        if size > MAX_LOG_ENTRY_BYTES:
            raise FormatError(
                f"{size} bytes; the limit of a JSON log is {MAX_LOG_ENTRY_BYTES} (MAX_LOG_ENTRY_BYTES)", path=shown
            )
        data, fmt = p.read_bytes(), "json"
        _check_version(_loads(data, shown, None), shown, None)
    try:
        # long texts are stored as attachments (``attachment://<hash>``): read them as the texts
        return read_eval_log(io.BytesIO(data), format=fmt, resolve_attachments=True)  # type: ignore[arg-type]
    except ValidationError as e:
        raise FormatError(f"not a valid Inspect eval log: {_first_invalid(e)}", path=shown) from None
    except RecursionError:
        raise FormatError("JSON nested too deeply; expected an Inspect eval log", path=shown) from None
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        said = (str(e).splitlines() or [""])[0][:200]
        raise FormatError(f"not a readable Inspect eval log ({type(e).__name__}: {said})", path=shown) from None


def tasks_from_eval_log(path: str | os.PathLike[str]) -> list[Task]:
    """The samples of an Inspect eval log as recorded tasks (format ``inspect_log``): each
    sample's final messages, its tools' schemas, the task statement from its first user message
    and the facts the recorded loaders derive (edited files, failed commands), with the log's
    task, model and sample id in the metadata. Replay them like any recorded session.

    ``path``: a ``.eval`` log (a zip) or a ``.json`` one. A file that is not one (not a zip, cut
    off, an entry or field Inspect would not write, a log format version the installed Inspect does
    not read) raises :class:`FormatError` naming the file and what was expected. Before any
    entry of a ``.eval`` log is read, every entry's declared size is checked against
    :data:`MAX_LOG_ENTRY_BYTES` (and :data:`MAX_LOG_TOTAL_BYTES` in all) and its compression ratio
    against :data:`MAX_LOG_ENTRY_RATIO`; entries are then read in bounded steps, never past the
    size they declare."""
    _require_inspect()
    log = _read_log(path)
    shown = str(path)
    out = []
    for s in log.samples or []:
        dicts = _openai_dicts(s.messages)
        meta = {
            "agent": "inspect",
            "model": log.eval.model,
            "inspect_task": log.eval.task,
            "sample_id": s.id,
            "epoch": s.epoch,
        }
        out.append(
            openai_task_from_messages(
                dicts,
                tools=[],
                shown=f"{shown}#{s.id}",
                session=f"{log.eval.task}-{s.id}-e{s.epoch}",
                fmt=INSPECT_LOG_FORMAT,
                n_bytes=len(json.dumps(dicts)),
                metadata=meta,
                where="messages",
                source_kind="recorded",
            )
        )
    return out


def _events(
    views: Sequence[Sequence[Message]],
    calls: Sequence[Mapping[Any, Any]],
    *,
    start: dt.datetime | None = None,
    key: str = "",
) -> list[Any]:
    """The model event of each call (its view as the input), each compaction as a compaction event
    before it, in one span (Inspect's viewer shows the events of spans). With ``start``, event ids
    and times are made from ``key``, the call index and the call's time (``call_at_s``), not from
    the clock: the same input gives the same log."""
    from inspect_ai.event import CompactionEvent, ModelEvent, SpanBeginEvent, SpanEndEvent
    from inspect_ai.model import GenerateConfig, ModelOutput

    span = f"{key or 'replay'}-span"
    at = 0.0

    def fixed(uuid: str) -> dict[str, Any]:
        if start is None:
            return {"span_id": span}
        return {"uuid": uuid, "span_id": span, "timestamp": start + dt.timedelta(seconds=at), "working_start": at}

    convert = _Converter(stable_ids=start is not None)
    events: list[Any] = [SpanBeginEvent(id=span, name="h9eval replay", type="agent", **fixed(f"{key}-b"))]
    for view, call in zip(views, calls):
        i = int(call["call_index"])
        when = float(call.get("call_at_s", math.nan))
        at = float(i) if math.isnan(when) else when
        inputs = convert(view)
        if bool(call["compacted"]):
            meta = {
                "tier": call["tier_name"],
                "call_index": i,
                "messages_before": int(call["msgs_before"]),
                "messages_after": int(call["msgs_after"]),
            }
            events.append(
                CompactionEvent(
                    type="summary" if call["summarizer_calls"] else "edit",
                    source="h9eval",
                    tokens_before=int(call["history_tokens"]),
                    tokens_after=int(call["view_tokens"]),
                    metadata=meta,
                    **fixed(f"{key}-c{i}"),
                )
            )
        text = f"(call {i}: {int(call['tokens_sent'])} tokens sent, tier {call['tier_name']})"
        output = ModelOutput.from_content("replay", text)
        if start is not None:
            output.choices[0].message.id = f"{key}-o{i}"
        events.append(
            ModelEvent(
                model="replay",
                input=inputs,
                tools=[],
                tool_choice="auto",
                config=GenerateConfig(),
                output=output,
                **fixed(f"{key}-m{i}"),
            )
        )
    events.append(SpanEndEvent(id=span, **fixed(f"{key}-e")))
    return events


def _score_values(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a row as scores: numeric, not boolean, known (a NaN, a number the run did
    not measure, such as retention without probes, is left out rather than written as a value)."""
    out = {}
    for k, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or k == "context_window_tokens":
            continue
        if not math.isnan(float(v)):
            out[k] = float(v)
    return out


def run_to_eval_log(result: ReplayResult, task: Task, path: str | os.PathLike[str]) -> Path:
    """One replay (with its views kept: ``ReplayConfig(keep_views=True)``) as an Inspect eval log
    of one sample: the transcript as its messages, the view sent at each call as a model event,
    each compaction as a compaction event before it, and the run's headline numbers as scores."""
    _require_inspect()
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.scorer import Score

    if result.views is None:
        raise ConfigError("run_to_eval_log needs the views: replay with ReplayConfig(keep_views=True)")
    events = _events(result.views, result.calls.to_dict("records"))
    scores = {k: Score(value=v) for k, v in _score_values(result.summary()).items()}
    first_user = next((m.content for m in task.messages if m.role == "user"), "")
    sample = EvalSample(
        id=result.run_id,
        epoch=1,
        input=first_user[:2000],
        target="",
        messages=to_inspect(list(task.messages)),
        events=events,
        scores=scores,
        metadata={
            "task_id": task.task_id,
            "policy": result.policy_kind,
            "params": result.params,
            "history_mode": result.config.history_mode,
            "context_window_tokens": result.context_window_tokens,
        },
    )
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created=dt.datetime.now(dt.timezone.utc).isoformat(),
            task=f"h9eval/{task.task_id}",
            dataset=EvalDataset(name=task.task_id),
            model=f"h9eval/{result.policy_kind}",
            config=EvalConfig(),
            metadata={"h9eval_run_id": result.run_id, "params_hash": result.params_hash},
        ),
        samples=[sample],
    )
    write_eval_log(log, str(path))
    return Path(path)


_HEADLINE_SCORES = ("retention", "tokens_saved")
"""The scores a log lists first (Inspect's viewer shows the first as the log's score)."""


# -- a sweep as eval logs --------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepExport:
    """What :func:`sweep_to_eval_logs` wrote."""

    out_dir: Path
    logs: tuple[Path, ...]
    """One eval log per configuration, in the order of their labels."""
    n_samples: int
    """Samples written, over all logs (one per task, repeat and configuration)."""
    skipped: tuple[str, ...]
    """``run_id: reason`` for each cell not exported (a failed cell, a closed-loop episode)."""


def sweep_to_eval_logs(
    sweep_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    log_format: str = "eval",
    overwrite: bool = False,
) -> SweepExport:
    """Write a sweep's results folder as Inspect eval logs in ``out_dir`` (see the module docstring).

    One log per configuration (the label of :func:`h9eval.analysis.metrics.config_labels`, and the
    history mode), its model ``h9eval/<label>``, its task the sweep; one sample per replay cell: id
    the task id, epoch the repeat + 1, the transcript as its messages, the view sent at each call as
    a model event, each compaction as a compaction event before it, and the run's numbers of
    :func:`~h9eval.analysis.metrics.run_metrics` as its scores (those the sweep did not measure are
    left out); each score's mean over the samples is the log's result. Every cell is replayed as the
    sweep ran it: a model summarizer or scorer answers from the sweep's cache (and a miss would ask
    the model), and a replay whose calls differ from the sweep's ``calls`` table (the task or the
    code changed since) is refused with a :class:`FormatError` naming the cell. Failed cells and
    closed-loop episodes (no replay, no views) are skipped and listed in the result.

    ``log_format``: ``eval`` (Inspect's default) or ``json``. The files are the same for the same
    sweep (ids and times come from the sweep, not the clock; a ``.eval`` zip's entries carry their
    write time). ``out_dir`` is refused if it exists, unless ``overwrite`` and an earlier Inspect export
    wrote it (then replaced whole, :func:`~h9eval.core.paths.check_export_target`); the sweep folder, a
    folder inside it or one that holds it is always refused.
    """
    if log_format not in INSPECT_LOG_FORMATS:
        raise ConfigError(f"log_format must be one of {', '.join(INSPECT_LOG_FORMATS)}, got {log_format!r}")
    _require_inspect()
    from inspect_ai.log import write_eval_log

    out = check_export_target(out_dir, kind="inspect", sources=(sweep_dir,), overwrite=overwrite)
    res = load_results(sweep_dir)
    if res.manifest.get("kind") != "sweep":
        raise FormatError(
            f"manifest kind {res.manifest.get('kind')!r}; expected 'sweep'", path=str(Path(sweep_dir) / "manifest.json")
        )
    entries = {c["run_id"]: c for c in res.manifest["cells"]}
    missing = sorted({entry_policy_kind(c) for c in entries.values()} - set(registry()))
    if missing:  # checked before any replay, with the way to register them
        raise ConfigError(
            f"{sweep_dir}: the sweep ran policies not registered here ({', '.join(missing)}): register "
            "them first (Inspect's: h9eval.integrations.inspect.register_inspect_policies(); "
            "your own: h9eval --import FILE)"
        )
    metrics = run_metrics(res.calls, res.probes, res.runs)
    skipped = [f"{r.run_id}: {r.status}" for r in res.runs.itertuples() if r.status != "ok"]
    skipped += [
        f"{rid}: a closed-loop episode (no replay)"
        for rid in metrics["run_id"]
        if entries[rid].get("cell_kind", "replay") != "replay"
    ]
    metrics = metrics[[entries[rid].get("cell_kind", "replay") == "replay" for rid in metrics["run_id"]]]
    start = dt.datetime.fromisoformat(str(res.manifest.get("created") or "1970-01-01T00:00:00+00:00"))
    tmp = new_export_tmp(out)
    logs, n_samples = [], 0
    try:
        groups = metrics.groupby(["label", "history_mode"], sort=True)
        for n, ((label, mode), rows) in enumerate(groups):
            samples = [
                _sweep_sample(res, entries[rid], row, start)
                for rid, row in zip(rows["run_id"], rows.to_dict("records"))
            ]
            samples.sort(key=lambda s: (str(s.id), s.epoch))
            name = f"{n:02d}_{safe_name(f'{label}_{mode}'.replace(' ', ''), allow_empty=False)}.{log_format}"
            log = _config_log(res, entries[rows["run_id"].iloc[0]], str(label), str(mode), samples, start)
            write_eval_log(log, str(tmp / name))
            logs.append(out / name)
            n_samples += len(samples)
        replace_export_dir(tmp, out, kind="inspect")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return SweepExport(out_dir=out, logs=tuple(logs), n_samples=n_samples, skipped=tuple(skipped))


def _sweep_sample(res: Any, entry: Mapping[str, Any], row: Mapping[str, Any], start: dt.datetime) -> EvalSample:
    """One replay cell as a sample: replayed again with its views, checked against the sweep."""
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    cell = Cell.from_dict(entry)
    with tempfile.TemporaryDirectory(prefix="h9eval-inspect-") as work:
        # its views, not its probes or ledger (the sweep's tables hold those)
        again_spec = cell.spec.replace(probes=ProbeSpec(), ledger=False)
        result = execute(again_spec, cell_env(cell, offload_root=work, keep_views=True))
    stored = res.calls[res.calls["run_id"] == cell.run_id].sort_values("call_index")
    again = [int(v) for v in result.calls["tokens_sent"]]
    if again != [int(v) for v in stored["tokens_sent"]]:
        first = next(
            (i for i, (a, b) in enumerate(zip(again, stored["tokens_sent"])) if a != int(b)),
            min(len(again), len(stored)),
        )
        raise FormatError(
            f"cell {cell.run_id}: replayed again, its calls differ from the sweep's calls table from "
            f"call {first} on ({len(again)} calls now, {len(stored)} stored): the task or the code "
            "changed since the sweep ran; run the sweep again",
            path=str(res.path),
        )
    assert result.views is not None  # keep_views=True
    calls = stored.to_dict("records")
    task = load_task(cell.spec.task, max_steps=cell.spec.max_steps)
    transcript = _Converter(stable_ids=True)(list(task.messages))
    first_user = next((m.content for m in task.messages if m.role == "user"), "")
    return EvalSample(
        id=cell.task_id,
        epoch=cell.spec.repeat + 1,
        input=first_user[:2000],
        target="",
        messages=transcript,
        events=_events(result.views, calls, start=start, key=cell.run_id),
        scores={k: Score(value=v) for k, v in _score_values(row).items()},
        metadata={
            "run_id": cell.run_id,
            "task_id": cell.task_id,
            "never_compacted": bool(row["never_compacted"]),
            "context_window_tokens": result.context_window_tokens,
        },
    )


def _config_log(
    res: Any, entry: Mapping[str, Any], label: str, mode: str, samples: Sequence[EvalSample], start: dt.datetime
) -> Any:
    """The eval log of one configuration: its samples, and each score's mean over them as the result."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalScore, EvalSpec

    sweep_name = str(res.manifest.get("name", ""))
    # the first score is the one ``inspect view`` lists beside each log: h9eval's two headline numbers first
    names = sorted(
        {k for s in samples for k in (s.scores or {})},
        key=lambda k: (_HEADLINE_SCORES.index(k) if k in _HEADLINE_SCORES else len(_HEADLINE_SCORES), k),
    )
    scores = []
    for k in names:
        values = [float(s.scores[k].value) for s in samples if s.scores and k in s.scores]  # type: ignore[arg-type]
        scores.append(
            EvalScore(
                name=k,
                scorer="h9eval",
                scored_samples=len(values),
                unscored_samples=len(samples) - len(values),
                metrics={"mean": EvalMetric(name="mean", value=sum(values) / len(values))},
            )
        )
    ident = hashlib.sha256(json.dumps([sweep_name, label, mode]).encode()).hexdigest()[:22]
    cell = Cell.from_dict(entry)
    config = {
        "policy_name": cell.policy_name,
        "policy_kind": cell.policy_kind,
        "params": cell.params,
        "params_hash": cell.params_hash,
        "history_mode": mode,
        "summarizer": cell.summarizer,
        "window": cell.spec.window_tokens,
    }
    return EvalLog(
        status="success",
        eval=EvalSpec(
            created=start.isoformat(),
            eval_id=ident,
            run_id=safe_name(sweep_name),
            task_id=ident,
            task=f"h9eval/{sweep_name}",
            model=f"h9eval/{label}",
            dataset=EvalDataset(name=sweep_name, samples=len(samples), sample_ids=sorted({str(s.id) for s in samples})),
            config=EvalConfig(epochs=max(s.epoch for s in samples)),
            metadata={"h9eval_sweep": sweep_name, "configuration": label, **config},
        ),
        results=EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=scores),
        samples=list(samples),
    )
