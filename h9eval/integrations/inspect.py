"""Inspect interoperability (the optional extra ``h9eval[inspect]``; nothing else in h9eval imports it:
the ``export`` command imports only :mod:`h9eval.integrations.inspect_logs`, which imports Inspect
when called).

Three uses, each a few lines for a user of ``inspect-ai``:

* :class:`H9Compaction`: any registered h9eval policy (harness9's ``progressive`` with its options
  first) as an Inspect ``CompactionStrategy``: ``react(..., compaction=H9Compaction("progressive",
  window_tokens=128_000))``. Messages are converted both ways (tool calls and results, system
  messages, offload placeholders); a policy that summarises asks Inspect's own model (the agent's
  model, or ``summarizer_model``) unless an h9eval summarizer is given; every compaction record is
  logged in the sample's transcript as an info event ``{"h9eval_compaction": record}``.
* :func:`register_inspect_policies`: Inspect's ``CompactionTrim``, ``CompactionEdit`` and
  ``CompactionSummary`` as the h9eval policies ``inspect_trim``, ``inspect_edit`` and
  ``inspect_summary``, which call Inspect's own implementation (the summary's model is
  :class:`SummarizerModel`, answering with h9eval's summarizer), so a sweep compares them with
  harness9's tiers under the same probes and ledger.
* :func:`run_to_eval_log` writes an h9eval run, :func:`sweep_to_eval_logs` a sweep (one log per
  configuration, one sample per task), as Inspect eval logs that ``inspect view`` opens (the view
  sent at each call as model events, the compactions as compaction events, the run's numbers as
  scores); :func:`tasks_from_eval_log` reads Inspect eval logs back as recorded tasks (all in
  :mod:`h9eval.integrations.inspect_logs`).

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
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.from_thread
import anyio.to_thread
from inspect_ai.log import transcript
from inspect_ai.model import (
    ChatMessage,
    ChatMessageSystem,
    ChatMessageUser,
    CompactionEdit,
    CompactionStrategy,
    CompactionSummary,
    CompactionTrim,
    GenerateConfig,
    Model,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    get_model,
    modelapi,
)
from inspect_ai.tool import ToolInfo

from h9eval.compaction._peer import ContinuedRun, PeerDecision, request_peer_summary
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
from h9eval.compaction.prompts import serialize_conversation
from h9eval.compaction.records import Tier
from h9eval.compaction.step import run_window
from h9eval.compaction.summary import SummaryCall, SummaryReply, SummaryRequest
from h9eval.core.errors import ConfigError, SummarizerError
from h9eval.core.messages import Message
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens
from h9eval.runs.run import policy_ref
from h9eval.runs.spec import RunSpec, SummarizerRef, TaskRef
from h9eval.integrations.inspect_logs import (
    INSPECT_LOG_FORMAT,
    SweepExport,
    from_inspect,
    run_to_eval_log,
    sweep_to_eval_logs,
    tasks_from_eval_log,
    to_inspect,
)
from h9eval.summarizers.registry import build_summarizer

__all__ = [
    "INSPECT_LOG_FORMAT",
    "INSPECT_POLICIES",
    "SCRIPTED_MODEL",
    "SUMMARIZER_MODEL",
    "H9Compaction",
    "InspectEdit",
    "InspectModelSummarizer",
    "InspectSummary",
    "InspectTrim",
    "ScriptedModel",
    "SummarizerModel",
    "SweepExport",
    "from_inspect",
    "register_inspect_policies",
    "run_to_eval_log",
    "sweep_to_eval_logs",
    "tasks_from_eval_log",
    "to_inspect",
]


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
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=request.system_prompt),
            ChatMessageUser(content=request.user_prompt),
        ]
        try:
            out = anyio.from_thread.run(
                self.model.generate, messages, [], None, GenerateConfig(max_tokens=self.max_tokens)
            )
        except Exception as e:  # noqa: BLE001 - any provider error is harness9's fallback path
            raise SummarizerError(f"inspect model {self.model}: {type(e).__name__}: {e}") from None
        usage = out.usage
        return SummaryReply(
            text=out.completion or None,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
        )


INSPECT_MODEL_SUMMARIZER = "inspect_model"
"""The summarizer name in an :class:`H9Compaction` run spec when Inspect's own model writes the summaries."""


class H9Compaction(CompactionStrategy):
    """An h9eval policy as an Inspect compaction strategy (see the module docstring).

    ``policy``: a registered name (``"progressive"``) or a Policy object; ``params``: its
    parameters (with a name). ``window_tokens``: the window the policy's tiers are fractions of
    (default: the policy's own); ``threshold``: when Inspect calls the strategy (default: the
    policy's first tier of that window, so the policy decides from there on). ``summarizer``: an
    h9eval summarizer name (``"offline"``) instead of asking ``summarizer_model`` (default: the
    model Inspect compacts for).
    """

    def __init__(
        self,
        policy: str | Policy = "progressive",
        *,
        params: Mapping[str, Any] | None = None,
        window_tokens: int | None = None,
        threshold: int | float | None = None,
        summarizer: str | None = None,
        summarizer_model: str | Model | None = None,
        offload_root: str | None = None,
    ) -> None:
        # the run's references, as every entry point builds them (h9eval.runs.spec): the one window rule
        # with the one "explicit" convention, so params={"context_window_tokens": 50_000} with
        # window_tokens=128_000 is refused here as it is by run_task, a sweep and the tuner
        self.policy_ref, obj = policy_ref(policy, params)
        self.window_tokens = window_tokens
        self.summarizer_name = summarizer
        self._spec = self.run_spec(TaskRef(source="inspect", task_id="inspect"))
        if obj is None:
            pol = self._spec.policy_at_window()
        else:  # a policy object the registry may not rebuild: the same rule applied to the object itself
            pol = run_window(obj, self._spec.policy_window_tokens, explicit=self.policy_ref.sets_window).policy
        self.policy = pol
        window = pol.window_tokens() or window_tokens
        # Inspect calls a strategy only above its threshold and requires the result to be below
        # it: harness9's soft tier (the first that removes messages) is where that can hold.
        first = getattr(pol, "soft_frac", None)
        if threshold is None:
            threshold = int(window * first) if window and first else 0.9
        self._threshold_tokens = (
            int(threshold)
            if isinstance(threshold, int) or threshold > 1
            else (int(threshold * window) if window else None)
        )
        super().__init__(type="summary" if pol.uses_summarizer else "edit", threshold=threshold, memory=False)
        self.summarizer = summarizer
        self.summarizer_model = summarizer_model
        self.offload_root = offload_root
        self._runs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def run_spec(self, task: TaskRef, *, history_mode: str = "write_back") -> RunSpec:
        """The :class:`~h9eval.runs.spec.RunSpec` of this strategy on one task: what ``h9eval run --task``
        builds from the same policy, parameters, window and summarizer (Inspect replaces the sample's
        messages with the compacted ones, so the history mode is ``write_back``).

        Args:
            task: the task's reference.
            history_mode: the history mode to describe (default ``write_back``, as Inspect runs it).

        Returns:
            The spec; its :meth:`~h9eval.runs.spec.RunSpec.identity` is the run id h9eval gives the run.
        """
        return RunSpec(
            task=task,
            policy=self.policy_ref,
            window=self.window_tokens,
            history_mode=history_mode,
            # no h9eval summarizer: the Inspect model answers, which no registered name describes
            summarizer=SummarizerRef(name=self.summarizer_name or INSPECT_MODEL_SUMMARIZER),
        )

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

    async def compact(
        self, model: Model, messages: list[ChatMessage], tools: list[ToolInfo]
    ) -> tuple[list[ChatMessage], ChatMessageUser | None]:
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
            transcript().info(
                {"h9eval_compaction": comp.record.to_json(), "policy": self.policy.kind, "forced": forced},
                source="h9eval",
            )


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

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        outputs: Any = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        self._call = outputs if callable(outputs) else None
        self._iter = iter(outputs) if outputs is not None and not callable(outputs) else None

    async def count_text_tokens(self, text: str) -> int:
        return len(text.encode("utf-8")) // 4

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any, config: GenerateConfig
    ) -> ModelOutput:
        if self._call is not None:
            out = self._call(input, tools)
        elif self._iter is not None:
            out = next(self._iter, None) or ModelOutput.from_content(self.model_name, "done")
        else:
            out = ModelOutput.from_content(self.model_name, "done")
        tokens = await self.count_tokens(input)
        out.usage = ModelUsage(input_tokens=tokens, output_tokens=8, total_tokens=tokens + 8)
        return out


SUMMARIZER_MODEL = "h9eval-summarizer"
"""The Inspect model provider :class:`SummarizerModel` registers: ``get_model("h9eval-summarizer/<name>",
summarize=fn, memoize=False)``."""


@modelapi(name=SUMMARIZER_MODEL)
class SummarizerModel(ModelAPI):
    """An Inspect model whose every reply is a summary from an h9eval summarizer: what Inspect's
    ``CompactionSummary`` is given as its ``model`` in :class:`InspectSummary`. ``summarize``:
    ``(head, prompt) -> text or None``, called with the messages before the last (the conversation
    Inspect asks to be summarised, as h9eval messages) and the last message's text (Inspect's
    summary prompt); ``None`` (the summary failed) raises :class:`SummarizerError`. Token counts
    are h9eval's estimate (UTF-8 bytes / 4)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        summarize: Any = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        if not callable(summarize):
            raise ConfigError(f"{SUMMARIZER_MODEL}/{model_name}: needs summarize=, a callable (head, prompt) -> text")
        self._summarize = summarize

    def should_retry(self, ex: BaseException) -> bool:
        return False  # a summarizer that failed has already retried as it is configured to

    async def count_text_tokens(self, text: str) -> int:
        return len(text.encode("utf-8")) // 4

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any, config: GenerateConfig
    ) -> ModelOutput:
        if not input:
            raise SummarizerError(f"{SUMMARIZER_MODEL}/{self.model_name}: nothing to summarise")
        text = self._summarize(from_inspect(input[:-1]), input[-1].text)
        if text is None:
            raise SummarizerError(f"{SUMMARIZER_MODEL}/{self.model_name}: the h9eval summarizer gave no summary")
        out = ModelOutput.from_content(self.model_name, text)
        tokens = await self.count_tokens(input)
        out.usage = ModelUsage(
            input_tokens=tokens,
            output_tokens=len(text.encode("utf-8")) // 4,
            total_tokens=tokens + len(text.encode("utf-8")) // 4,
        )
        return out


# -- Inspect's strategies as h9eval policies ------------------------------------------------------
def _run_async(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, also where an event loop is already running
    (a notebook): in a thread of its own."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _InspectStrategyRun(ContinuedRun):
    """Calls an Inspect strategy when the history passes the policy's threshold, as Inspect's
    compaction handler does; a message the strategy returns unchanged stays the same h9eval
    message (so the replay sees the prefix kept). The strategy gets the history it is given
    (the whole history in view mode, see :class:`InspectSummary`): no view is carried forward."""

    carries_view = False

    def __init__(self, policy: Any, env: CompactionEnv, strategy: CompactionStrategy) -> None:
        super().__init__(policy, env)
        self.strategy = strategy
        self.model = get_model(f"{SCRIPTED_MODEL}/count-only", memoize=False)
        self.extra: dict[str, Any] = {}
        """The current compaction's record detail (the summarizer's calls, see ``request_summary``)."""
        self.summary_text = ""

    def _decide(self, history: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        tb = base_tokens if base_tokens is not None else estimate_tokens(history)
        if not force and tb < self.policy.threshold_frac * self.policy.context_window_tokens:
            return PeerDecision(history, history, tokens_after=tb)
        converted = to_inspect(history)
        for i, m in enumerate(converted):
            m.id = f"h9-{i}"  # the strategy's output is mapped back to the history by these ids
        by_id = {f"h9-{i}": h for i, h in enumerate(history)}
        self.extra = {}
        try:
            out, _ = _run_async(self.strategy.compact(self.model, converted, []))
        except SummarizerError as e:  # the peers' rule: a failed summary leaves the history as it is
            return PeerDecision(history, history, error=f"summary failed: {e}", extra=self.extra, tokens_after=tb)
        view = []
        for m, h in zip(out, from_inspect(out)):
            orig = by_id.get(m.id or "")
            view.append(
                orig
                if orig is not None
                and (orig.role, orig.content, orig.tool_call_id, orig.tool_calls)
                == (h.role, h.content, h.tool_call_id, h.tool_calls)
                else h
            )
        fields: dict[str, Any] = {}
        if view == list(history):
            tier = Tier.NONE
        elif self.strategy.type == "summary":  # a summary message replaced messages (_peer's tier mapping)
            tier = Tier.FULL
            kept = len({id(m) for m in view} & {id(h) for h in history})
            fields = {"summarized": len(history) - kept, "preserved_tail": 0, "summary_text": self.summary_text}
        else:
            tier = Tier.SOFT if len(view) < len(history) else Tier.WARN
        return PeerDecision(history, view, tier, extra=self.extra, fields=fields)


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
        strategy = CompactionEdit(
            threshold=self.threshold_frac,
            memory=False,
            keep_tool_uses=self.keep_tool_uses,
            keep_tool_inputs=self.keep_tool_inputs,
        )
        return _InspectStrategyRun(self, env or CompactionEnv(), strategy)


class _InspectSummaryRun(_InspectStrategyRun):
    """Inspect's ``CompactionSummary`` with a :class:`SummarizerModel` that asks this run's
    summarizer, logging each call as every summarising peer does (``request_peer_summary``)."""

    policy: InspectSummary
    calls: list[SummaryCall]

    def __init__(self, policy: InspectSummary, env: CompactionEnv) -> None:
        self.calls = []
        name = getattr(env.summarizer, "summarizer_id", "none")
        model = get_model(f"{SUMMARIZER_MODEL}/{name}", memoize=False, summarize=self._summarize)
        strategy = CompactionSummary(
            threshold=policy.threshold_frac, memory=False, model=model, instructions=policy.instructions
        )
        super().__init__(policy, env, strategy)

    def _summarize(self, head: list[Message], prompt: str) -> str | None:
        # Inspect sends the conversation as chat turns followed by its prompt; an h9eval summarizer
        # takes one system and one user prompt: the prompt, then the conversation as text
        user_prompt = f"{prompt.strip()}\n\nConversation:\n{serialize_conversation(head)}"
        text = request_peer_summary(
            self.env, self.calls, self.extra, head, user_prompt, previous=None, timeout_s=self.policy.summary_timeout_s
        )
        self.summary_text = text or ""
        return text


@dataclass(frozen=True, kw_only=True)
class InspectSummary(WindowedPolicy):
    """Inspect's ``CompactionSummary``, called as it is, its model answering with h9eval's
    summarizer (the sweep's or run's: ``offline`` by default, an extractor, no model): above
    ``threshold_frac`` of the window, the system and input messages and one summary message
    replace the conversation.

    Differs from running it inside Inspect as :class:`InspectTrim` does (h9eval's token estimate,
    no memory warning, the whole history in view mode, so in view mode a compaction summarises
    the whole transcript again at every call above the threshold, where Inspect's handler goes on
    from its summary: write-back mode is Inspect's behaviour), and in the summary: the summarizer
    gets Inspect's prompt followed by the conversation as text in one user prompt, under harness9's
    system prompt, not the conversation as chat turns; an offline summarizer answers from the
    messages, not from the prompt (the ``offline`` extractor writes harness9's anchors whatever
    Inspect asked for; Inspect then keeps what follows its ``<summary>`` tag, or all of it). A
    failed summary leaves the history as it is (``record.error``), where Inspect raises."""

    kind: ClassVar[str] = "inspect_summary"
    source: ClassVar[str] = "Inspect (inspect-ai) CompactionSummary, its own implementation, with h9eval's summarizer"
    uses_summarizer: ClassVar[bool] = True
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Tokens of the window ``threshold_frac`` is a share of; default 200,000."""
    threshold_frac: float = 0.9
    """Summarise when the history passes this share of the window (Inspect's default 0.9)."""
    instructions: str | None = None
    """Extra instructions Inspect inserts into its summary prompt (Inspect's default: none)."""
    summary_timeout_s: float = 60.0
    """Seconds a summary may take (h9eval's summarizer timeout, as the other summarising peers)."""

    def __post_init__(self) -> None:
        _check_fracs(self, threshold_frac=self.threshold_frac)
        if not self.summary_timeout_s > 0:
            raise ConfigError(f"InspectSummary.summary_timeout_s must be > 0, got {self.summary_timeout_s!r}")

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        return _InspectSummaryRun(self, env or CompactionEnv())


INSPECT_POLICIES: tuple[type[Policy], ...] = (InspectTrim, InspectEdit, InspectSummary)


def register_inspect_policies() -> tuple[str, ...]:
    """Register Inspect's strategies as the h9eval policies ``inspect_trim``, ``inspect_edit`` and
    ``inspect_summary`` (once; a second call does nothing) and return their kinds. Explicit, not done on import, so
    importing this module never changes which policies a sweep or a test sees."""
    for cls in INSPECT_POLICIES:
        if cls.kind not in POLICIES:
            register(cls)
    return tuple(cls.kind for cls in INSPECT_POLICIES)
