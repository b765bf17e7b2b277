"""Inspect interoperability (the optional extra ``h9eval[inspect]``; nothing else in h9eval imports it).

Three uses, each a few lines for a user of ``inspect-ai``:

* :class:`H9Compaction`: any registered h9eval policy (harness9's ``progressive`` with its options
  first) as an Inspect ``CompactionStrategy``: ``react(..., compaction=H9Compaction("progressive",
  window_tokens=128_000))``. Messages are converted both ways (tool calls and results, system
  messages, offload placeholders); a policy that summarises asks Inspect's own model (the agent's
  model, or ``summarizer_model``) unless an h9eval summarizer is given; every compaction record is
  logged in the sample's transcript as an info event ``{"h9eval_compaction": record}``.
* :func:`register_inspect_policies`: Inspect's ``CompactionTrim`` and ``CompactionEdit`` as the
  h9eval policies ``inspect_trim`` and ``inspect_edit``, which call Inspect's own implementation,
  so a sweep compares them with harness9's tiers under the same probes and ledger.
* :func:`run_to_eval_log` writes an h9eval run as an Inspect eval log that ``inspect view`` opens
  (one sample: the view sent at each call as model events, the compactions as compaction events,
  the run's numbers as scores);
  :func:`tasks_from_eval_log` reads Inspect eval logs back as recorded tasks.

How an h9eval policy runs inside Inspect: Inspect's compaction handler calls the strategy only
when its threshold is reached and then keeps the compacted input, appending new messages to it;
so the policy sees its own previous view plus what is new, which is harness9's *write-back* mode.
Inspect also requires the compacted input to be below the threshold. The threshold therefore
defaults to harness9's soft tier (70 % of the window: the first tier that removes messages, so
the warn tier's offloading alone is not reached from Inspect), and a view the policy leaves at or
above it is truncated by harness9's forced truncation (``CompactForce``), logged as ``forced``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.from_thread
import anyio.to_thread
from inspect_ai.event import CompactionEvent, ModelEvent
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, read_eval_log, transcript, write_eval_log
from inspect_ai.scorer import Score
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    CompactionEdit,
    CompactionStrategy,
    CompactionTrim,
    GenerateConfig,
    Model,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    get_model,
    modelapi,
)
from inspect_ai.tool import ToolCall as InspectToolCall
from inspect_ai.tool import ToolCallError, ToolInfo

from h9eval.compaction._peer import peer_record
from h9eval.compaction.base import (
    POLICIES,
    Compaction,
    CompactionEnv,
    Policy,
    PolicyRun,
    WindowedPolicy,
    policy_params,
    register,
)
from h9eval.compaction.records import Tier
from h9eval.compaction.policies import make_policy
from h9eval.compaction.step import run_window
from h9eval.compaction.summary import SummaryReply, SummaryRequest
from h9eval.core.errors import ConfigError, SummarizerError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens
from h9eval.runs.replay import ReplayResult
from h9eval.summarizers.registry import build_summarizer
from h9eval.tasks.model import Task
from h9eval.tasks.recorded.chat import openai_task_from_messages

__all__ = [
    "INSPECT_LOG_FORMAT",
    "SCRIPTED_MODEL",
    "H9Compaction",
    "INSPECT_POLICIES",
    "InspectEdit",
    "InspectTrim",
    "register_inspect_policies",
    "run_to_eval_log",
    "tasks_from_eval_log",
    "InspectModelSummarizer",
    "from_inspect",
    "to_inspect",
]


INSPECT_LOG_FORMAT = "inspect_log"
"""The format of tasks read from Inspect eval logs (:func:`tasks_from_eval_log`)."""


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
        return ChatMessageTool(content=m.content, tool_call_id=m.tool_call_id,
                               function=functions.get(m.tool_call_id), error=error)
    if m.role == "system":
        return ChatMessageSystem(content=m.content)
    return ChatMessageUser(content=m.content)


def to_inspect(view: Sequence[Message], originals: Sequence[ChatMessage] = (),
               converted: Sequence[Message] = ()) -> list[ChatMessage]:
    """h9eval messages as Inspect chat messages. A message the policy kept unchanged (the same
    object as in ``converted``, which :func:`from_inspect` made from ``originals``) is the original
    Inspect message, with its id and metadata; a new one (a summary, an offload placeholder) is a
    new message (a new id: Inspect sees it as new input)."""
    by_obj = {id(h): o for h, o in zip(converted, originals)}
    functions = {tc.id: tc.name for m in (*converted, *view) for tc in m.tool_calls}
    return [by_obj.get(id(m)) or _to_one(m, functions) for m in view]


# -- an h9eval policy as an Inspect compaction strategy -----------------------------------------
class InspectModelSummarizer:
    """An h9eval summarizer that asks an Inspect model (the request's system and user prompt, as
    harness9 sends them). Called from the worker thread the strategy runs the policy in; the
    model's ``generate`` runs on Inspect's event loop."""

    def __init__(self, model: Model, *, max_tokens: int = 4096) -> None:
        self.model = model
        self.max_tokens = max_tokens

    @property
    def summarizer_id(self) -> str:
        return f"inspect/{self.model}"

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        messages: list[ChatMessage] = [ChatMessageSystem(content=request.system_prompt),
                                       ChatMessageUser(content=request.user_prompt)]
        try:
            out = anyio.from_thread.run(self.model.generate, messages, [], None, GenerateConfig(max_tokens=self.max_tokens))
        except Exception as e:  # noqa: BLE001 - any provider error is harness9's fallback path
            raise SummarizerError(f"inspect model {self.model}: {type(e).__name__}: {e}") from None
        usage = out.usage
        return SummaryReply(text=out.completion or None,
                            input_tokens=usage.input_tokens if usage else 0,
                            output_tokens=usage.output_tokens if usage else 0)


class H9Compaction(CompactionStrategy):
    """An h9eval policy as an Inspect compaction strategy (see the module docstring).

    ``policy``: a registered name (``"progressive"``) or a Policy object; ``params``: its
    parameters (with a name). ``window_tokens``: the window the policy's tiers are fractions of
    (default: the policy's own); ``threshold``: when Inspect calls the strategy (default: the
    policy's first tier of that window, so the policy decides from there on). ``summarizer``: an
    h9eval summarizer name (``"offline"``) instead of asking ``summarizer_model`` (default: the
    model Inspect compacts for).
    """

    def __init__(self, policy: str | Policy = "progressive", *, params: Mapping[str, Any] | None = None,
                 window_tokens: int | None = None, threshold: int | float | None = None,
                 summarizer: str | None = None, summarizer_model: str | Model | None = None,
                 offload_root: str | None = None) -> None:
        pol = make_policy(policy, **dict(params or {})) if isinstance(policy, str) else policy
        if window_tokens is not None:  # the policy at that window (compaction.step.run_window's rule)
            pol = run_window(pol, window_tokens, explicit=False).policy
        self.policy = pol
        window = pol.window_tokens() or window_tokens
        # Inspect calls a strategy only above its threshold and requires the result to be below
        # it: harness9's soft tier (the first that removes messages) is where that can hold.
        first = getattr(pol, "soft_frac", None)
        if threshold is None:
            threshold = int(window * first) if window and first else 0.9
        self._threshold_tokens = int(threshold) if isinstance(threshold, int) or threshold > 1 else (
            int(threshold * window) if window else None)
        super().__init__(type="summary" if pol.uses_summarizer else "edit", threshold=threshold, memory=False)
        self.summarizer = summarizer
        self.summarizer_model = summarizer_model
        self.offload_root = offload_root
        self._runs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _repr_params_(self) -> dict[str, Any]:
        return {**super()._repr_params_(), "policy": self.policy.kind, "params": policy_params(self.policy)}

    def _run(self, key: str, model: Model) -> Any:
        with self._lock:
            if key not in self._runs:
                if self.summarizer is not None:
                    summ: Any = build_summarizer(self.summarizer)
                else:
                    summ = InspectModelSummarizer(get_model(self.summarizer_model) if self.summarizer_model else model)
                root = self.offload_root or str(Path.cwd() / ".h9eval-inspect")
                env = CompactionEnv(summarizer=summ, offload_root=root, session_id=key)
                self._runs[key] = self.policy.start(env)
            return self._runs[key]

    async def compact(self, model: Model, messages: list[ChatMessage],
                      tools: list[ToolInfo]) -> tuple[list[ChatMessage], ChatMessageUser | None]:
        history = from_inspect(messages)
        # one policy state (anchors, last summary, offloads) per sample: its first message's id
        key = next((m.id for m in messages if m.id), "session") or "session"
        run = self._run(key, model)
        comp: Compaction = await anyio.to_thread.run_sync(run.compact, history)
        self._log(comp, forced=False)
        if self._threshold_tokens is not None and estimate_tokens(comp.view) >= self._threshold_tokens:
            # still above Inspect's threshold (which Inspect refuses): harness9's own answer to a
            # view over its budget, the forced truncation (CompactForce), as the replay retries it
            comp = await anyio.to_thread.run_sync(lambda: run.compact(list(comp.view), force=True))
            self._log(comp, forced=True)
        return to_inspect(comp.view, messages, history), None

    def _log(self, comp: Compaction, *, forced: bool) -> None:
        if comp.record is not None:
            transcript().info({"h9eval_compaction": comp.record.to_json(), "policy": self.policy.kind,
                               "forced": forced}, source="h9eval")


# -- an offline scripted model for Inspect (tests, examples) -----------------------------------
SCRIPTED_MODEL = "h9eval-scripted"
"""The Inspect model provider :class:`ScriptedModel` registers: ``get_model("h9eval-scripted/any",
outputs=...)``."""


@modelapi(name=SCRIPTED_MODEL)
class ScriptedModel(ModelAPI):
    """Inspect's mock model with two differences that keep a run offline: it counts tokens as
    h9eval does (UTF-8 bytes / 4, no tokenizer download) and it reports that count as the input
    usage. ``outputs``: the replies in order (an iterable of ``ModelOutput``), or a callable
    ``(messages, tools) -> ModelOutput``."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, outputs: Any = None, **model_args: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        self._call = outputs if callable(outputs) else None
        self._iter = iter(outputs) if outputs is not None and not callable(outputs) else None

    async def count_text_tokens(self, text: str) -> int:
        return len(text.encode("utf-8")) // 4

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any,
                       config: GenerateConfig) -> ModelOutput:
        if self._call is not None:
            out = self._call(input, tools)
        elif self._iter is not None:
            out = next(self._iter, None) or ModelOutput.from_content(self.model_name, "done")
        else:
            out = ModelOutput.from_content(self.model_name, "done")
        tokens = await self.count_tokens(input)
        out.usage = ModelUsage(input_tokens=tokens, output_tokens=8, total_tokens=tokens + 8)
        return out


# -- eval logs, both ways -------------------------------------------------------------------------
def _openai_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    out = []
    for h in from_inspect(messages):
        d: dict[str, Any] = {"role": h.role, "content": h.content}
        if h.tool_calls:
            d["tool_calls"] = [{"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                               for tc in h.tool_calls]
        if h.role == "tool":
            d["tool_call_id"] = h.tool_call_id
            d["is_error"] = h.is_error
        out.append(d)
    return out


def tasks_from_eval_log(path: str | Path) -> list[Task]:
    """The samples of an Inspect eval log as recorded tasks (format ``inspect_log``): each
    sample's final messages, its tools' schemas, the task statement from its first user message
    and the facts the recorded loaders derive (edited files, failed commands), with the log's
    task, model and sample id in the metadata. Replay them like any recorded session."""
    log = read_eval_log(str(path))
    shown = str(path)
    out = []
    for s in log.samples or []:
        dicts = _openai_dicts(s.messages)
        meta = {"agent": "inspect", "model": log.eval.model, "inspect_task": log.eval.task,
                "sample_id": s.id, "epoch": s.epoch}
        out.append(openai_task_from_messages(
            dicts, tools=[], shown=f"{shown}#{s.id}", session=f"{log.eval.task}-{s.id}-e{s.epoch}",
            fmt=INSPECT_LOG_FORMAT, n_bytes=len(json.dumps(dicts)), metadata=meta, where="messages",
            source_kind="recorded"))
    return out


def _events(view: Sequence[Message], call: Mapping[str, Any]) -> list[Any]:
    inputs = to_inspect(view)
    events: list[Any] = []
    if bool(call["compacted"]):
        events.append(CompactionEvent(type="summary" if call["summarizer_calls"] else "edit", source="h9eval",
                                      tokens_before=int(call["history_tokens"]), tokens_after=int(call["view_tokens"]),
                                      metadata={"tier": call["tier_name"], "call_index": int(call["call_index"]),
                                                "messages_before": int(call["msgs_before"]),
                                                "messages_after": int(call["msgs_after"])}))
    events.append(ModelEvent(model="replay", input=inputs, tools=[], tool_choice="auto", config=GenerateConfig(),
                             output=ModelOutput.from_content("replay", f"(call {int(call['call_index'])}: "
                                                             f"{int(call['tokens_sent'])} tokens sent, tier "
                                                             f"{call['tier_name']})")))
    return events


def run_to_eval_log(result: ReplayResult, task: Task, path: str | Path) -> Path:
    """One replay (with its views kept: ``ReplayConfig(keep_views=True)``) as an Inspect eval log
    of one sample: the transcript as its messages, the view sent at each call as a model event,
    each compaction as a compaction event before it, and the run's headline numbers as scores."""
    if result.views is None:
        raise ConfigError("run_to_eval_log needs the views: replay with ReplayConfig(keep_views=True)")
    events: list[Any] = []
    for call, view in zip(result.calls.to_dict("records"), result.views):
        events.extend(_events(view, call))
    summary = result.summary()
    scores = {k: Score(value=float(v)) for k, v in summary.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "context_window_tokens"}
    first_user = next((m.content for m in task.messages if m.role == "user"), "")
    sample = EvalSample(id=result.run_id, epoch=1, input=first_user[:2000], target="",
                        messages=to_inspect(list(task.messages)), events=events, scores=scores,
                        metadata={"task_id": task.task_id, "policy": result.policy_kind, "params": result.params,
                                  "history_mode": result.config.history_mode,
                                  "context_window_tokens": result.context_window_tokens})
    log = EvalLog(
        status="success",
        eval=EvalSpec(created=_now(), task=f"h9eval/{task.task_id}", dataset=EvalDataset(name=task.task_id),
                      model=f"h9eval/{result.policy_kind}", config=EvalConfig(),
                      metadata={"h9eval_run_id": result.run_id, "params_hash": result.params_hash}),
        samples=[sample],
    )
    write_eval_log(log, str(path))
    return Path(path)


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat()


# -- Inspect's strategies as h9eval policies ------------------------------------------------------
def _run_async(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, also where an event loop is already running
    (a notebook): in a thread of its own."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _InspectStrategyRun(PolicyRun):
    """Calls an Inspect strategy when the history passes the policy's threshold, as Inspect's
    compaction handler does; a message the strategy returns unchanged stays the same h9eval
    message (so the replay sees the prefix kept)."""

    def __init__(self, policy: Any, env: CompactionEnv, strategy: CompactionStrategy) -> None:
        self.policy = policy
        self.env = env
        self.strategy = strategy
        self.model = get_model(f"{SCRIPTED_MODEL}/count-only", memoize=False)

    def _compact(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        if not force and tb < self.policy.threshold_frac * self.policy.context_window_tokens:
            return Compaction(tuple(history), peer_record(self.env, history, history, Tier.NONE, tokens_before=tb,
                                                          start_ns=start_ns))
        converted = to_inspect(history)
        for i, m in enumerate(converted):
            m.id = f"h9-{i}"  # the strategy's output is mapped back to the history by these ids
        by_id = {f"h9-{i}": h for i, h in enumerate(history)}
        out, _ = _run_async(self.strategy.compact(self.model, converted, []))
        view = []
        for m, h in zip(out, from_inspect(out)):
            orig = by_id.get(m.id or "")
            view.append(orig if orig is not None and (orig.role, orig.content, orig.tool_call_id, orig.tool_calls)
                        == (h.role, h.content, h.tool_call_id, h.tool_calls) else h)
        tier = Tier.NONE if view == list(history) else (Tier.SOFT if len(view) < len(history) else Tier.WARN)
        return Compaction(tuple(view), peer_record(self.env, history, view, tier, tokens_before=tb, start_ns=start_ns))

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._compact(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._compact(history, None, force=True)


def _check_fracs(obj: Any, **fracs: float) -> None:
    for name, v in fracs.items():
        if not 0 < v <= 1:
            raise ConfigError(f"{type(obj).__name__}.{name} must be in (0, 1], got {v!r}")
    if obj.context_window_tokens <= 0:
        raise ConfigError(f"{type(obj).__name__}.context_window_tokens must be > 0, got {obj.context_window_tokens!r}")


@dataclass(frozen=True, kw_only=True)
class InspectTrim(WindowedPolicy):
    """Inspect's ``CompactionTrim``, called as it is (``inspect_ai.model.CompactionTrim``): above
    ``threshold_frac`` of the window, keep the system and input messages and the last ``preserve``
    share of the rest, tool pairs kept whole.

    Differs from running it inside Inspect: the threshold is judged on h9eval's token estimate
    (bytes / 4) of the whole history at each call, not on the provider's last reported usage; the
    memory-tool warning is off (no agent here to save to memory); and in h9eval's view mode the
    strategy sees the whole history at every call, where Inspect's handler feeds it its own
    previous output (h9eval's write-back mode is Inspect's behaviour)."""

    kind: ClassVar[str] = "inspect_trim"
    source: ClassVar[str] = "Inspect (inspect-ai) CompactionTrim, its own implementation"
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Tokens of the window ``threshold_frac`` is a share of; default 200,000."""
    threshold_frac: float = 0.9
    """Trim when the history passes this share of the window (Inspect's default 0.9)."""
    preserve: float = 0.8
    """Share of the conversation messages kept (Inspect's default 0.8)."""

    def __post_init__(self) -> None:
        _check_fracs(self, threshold_frac=self.threshold_frac, preserve=self.preserve)

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        strategy = CompactionTrim(threshold=self.threshold_frac, memory=False, preserve=self.preserve)
        return _InspectStrategyRun(self, env or CompactionEnv(), strategy)


@dataclass(frozen=True, kw_only=True)
class InspectEdit(WindowedPolicy):
    """Inspect's ``CompactionEdit``, called as it is: above ``threshold_frac`` of the window, clear
    the results (and inputs unless ``keep_tool_inputs``) of all but the last ``keep_tool_uses`` tool
    uses, and the thinking of all but the last turn.

    Differs from running it inside Inspect as :class:`InspectTrim` does (h9eval's token estimate,
    no memory warning, the whole history in view mode)."""

    kind: ClassVar[str] = "inspect_edit"
    source: ClassVar[str] = "Inspect (inspect-ai) CompactionEdit, its own implementation"
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Tokens of the window ``threshold_frac`` is a share of; default 200,000."""
    threshold_frac: float = 0.9
    """Edit when the history passes this share of the window (Inspect's default 0.9)."""
    keep_tool_uses: int = 3
    """Recent tool uses whose results are kept (Inspect's default 3)."""
    keep_tool_inputs: bool = True
    """Keep the arguments of the cleared tool calls (Inspect's default)."""

    def __post_init__(self) -> None:
        _check_fracs(self, threshold_frac=self.threshold_frac)
        if self.keep_tool_uses < 0:
            raise ConfigError(f"InspectEdit.keep_tool_uses must be >= 0, got {self.keep_tool_uses!r}")

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        strategy = CompactionEdit(threshold=self.threshold_frac, memory=False, keep_tool_uses=self.keep_tool_uses,
                                  keep_tool_inputs=self.keep_tool_inputs)
        return _InspectStrategyRun(self, env or CompactionEnv(), strategy)


INSPECT_POLICIES: tuple[type[Policy], ...] = (InspectTrim, InspectEdit)


def register_inspect_policies() -> tuple[str, ...]:
    """Register Inspect's strategies as the h9eval policies ``inspect_trim`` and ``inspect_edit``
    (once; a second call does nothing) and return their kinds. Explicit, not done on import, so
    importing this module never changes which policies a sweep or a test sees."""
    for cls in INSPECT_POLICIES:
        if cls.kind not in POLICIES:
            register(cls)
    return tuple(cls.kind for cls in INSPECT_POLICIES)
