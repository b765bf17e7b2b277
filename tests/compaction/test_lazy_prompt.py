"""The summary prompt is built only when a summarizer reads it, and its size is known without
building it (the offline summarizers count tokens from ``user_prompt_nbytes``)."""

from __future__ import annotations

import copy
import pickle
import random

import pytest

from h9eval.compaction.anchors import Anchor
from h9eval.compaction.base import CompactionEnv
from h9eval.compaction.policies import make_policy
from h9eval.compaction.prompts import (
    DEFAULT_PROMPTS,
    ConversationText,
    PromptSet,
    conversation_nbytes,
    conversation_parts,
    render_template,
    serialize_conversation,
)
from h9eval.compaction.summary import ScriptedSummarizer, SummaryReply, SummaryRequest, summary_request
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import estimate_tokens
from h9eval.summarizers.offline import OfflineSummarizer

_TEXTS = (
    "",
    "plain ascii",
    "naïve café",
    "中文内容",
    "emoji 🙂 here",
    "lone \udc80 surrogate",
    "{conversation} literal",
)


def _head(seed: int) -> list[Message]:
    rng = random.Random(seed)
    out: list[Message] = []
    for i in range(rng.randint(0, 12)):
        kind = rng.random()
        text = rng.choice(_TEXTS) * rng.randint(1, 3)
        if kind < 0.3:
            calls = tuple(
                ToolCall(f"id{i}{j}{rng.choice(_TEXTS)}", rng.choice(("bash", "读")), rng.choice(_TEXTS))
                for j in range(rng.randint(0, 2))
            )
            out.append(Message("assistant", text, tool_calls=calls))
        elif kind < 0.6:
            out.append(Message("tool", text, tool_call_id=f"call-{i}{rng.choice(_TEXTS)}"))
        else:
            out.append(Message(rng.choice(("user", "assistant")), text))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_sizes_match_the_built_texts(seed: int) -> None:
    head = _head(seed)
    conv = serialize_conversation(head)
    assert conversation_nbytes(head) == len(conv.encode("utf-8", "surrogatepass"))
    anchors = [Anchor("user_intent", "fix 🙂"), Anchor("next_step", "- test")]
    prompts = (
        DEFAULT_PROMPTS,
        PromptSet(first="A {previous_compaction} {conversation} é", incremental="{conversation}|{previous_compaction}"),
    )
    for prompt_set in prompts:
        for last_summary, last_anchors in (("", None), ("before ✓", anchors), ("plain", None)):
            req = summary_request(
                prompt_set, head, None, last_summary, last_anchors, ("user_intent", "next_step"), 60.0
            )
            nbytes = req.user_prompt_nbytes
            eager = summary_request(
                prompt_set, head, conv, last_summary, last_anchors, ("user_intent", "next_step"), 60.0
            )
            assert req.user_prompt == eager.user_prompt and req == eager
            assert nbytes == len(req.user_prompt.encode("utf-8", "surrogatepass"))
            assert req.conversation == conv


def test_the_old_eager_prompt_is_what_the_lazy_one_builds() -> None:
    head = _head(3)
    conv = serialize_conversation(head)
    first = summary_request(DEFAULT_PROMPTS, head, None, "", None, ("user_intent",), 60.0)
    assert first.template == "first" and first.user_prompt == DEFAULT_PROMPTS.render_first(conv, ("user_intent",))
    inc = summary_request(DEFAULT_PROMPTS, head, None, "old", None, ("user_intent",), 60.0)
    assert inc.template == "incremental" and inc.user_prompt == DEFAULT_PROMPTS.render_incremental("old", conv)


def test_a_request_pickles_and_copies_with_its_lazy_texts() -> None:
    head = _head(5)
    for built in (False, True):
        req = summary_request(DEFAULT_PROMPTS, head, None, "prev", None, ("user_intent",), 60.0)
        if built:
            assert req.user_prompt
        for other in (pickle.loads(pickle.dumps(req)), copy.copy(req), copy.deepcopy(req)):
            assert other.holds_text == built and other == req and other.user_prompt == req.user_prompt


def test_a_request_is_immutable_and_needs_a_prompt() -> None:
    req = SummaryRequest(
        system_prompt="s", user_prompt="u", template="first", previous_compaction=None, conversation="c"
    )
    with pytest.raises(AttributeError):
        req.template = "incremental"  # type: ignore[misc]
    with pytest.raises(TypeError):
        SummaryRequest(system_prompt="s", template="first", previous_compaction=None)
    assert req.user_prompt_nbytes == 1 and req.conversation == "c"


def _long_history(n: int = 40) -> list[Message]:
    msgs = [Message("system", "sys"), Message("user", "Fix the bug; never touch setup.py.")]
    for i in range(n):
        msgs.append(Message("assistant", f"step {i}", tool_calls=(ToolCall(f"c{i}", "bash", '{"command": "ls"}'),)))
        msgs.append(Message("tool", f"output {i} " + "x" * 400, tool_call_id=f"c{i}"))
    return msgs


class _Spy:
    """The offline summarizer, keeping each request it was given."""

    def __init__(self) -> None:
        self.inner = OfflineSummarizer()
        self.requests: list[SummaryRequest] = []
        self.summarizer_id = self.inner.summarizer_id

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        self.requests.append(request)
        return self.inner.summarize(request)


def test_an_offline_summary_never_builds_the_conversation() -> None:
    """The offline summarizer reads the structured head: serialising it (a copy of the whole head)
    and rendering the prompt (another) would be wasted. A policy that builds either eagerly fails
    here; the scripted summarizer's request still builds both when read."""
    history = _long_history()
    window = int(estimate_tokens(history) / 0.93)  # progressive: full tier; single threshold: over 0.90
    for kind in ("progressive", "summary_single_threshold"):
        spy = _Spy()
        run = make_policy(kind, context_window_tokens=window).start(CompactionEnv(summarizer=spy, seed=0))
        res = run.compact(history)
        assert res.record is not None and res.record.summary_text and spy.requests, kind
        assert not any(r.holds_text for r in spy.requests), kind
    scripted = ScriptedSummarizer(["## Summary\nok"])
    run = make_policy("progressive", context_window_tokens=window).start(CompactionEnv(summarizer=scripted, seed=0))
    run.compact(history)
    assert not scripted.calls[0].holds_text
    assert "[tool_result c0]: output 0" in scripted.calls[0].user_prompt and scripted.calls[0].holds_text
    assert run.calls[0].conversation == scripted.calls[0].conversation  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(30))
def test_conversation_text_extends_the_previous_head_exactly(seed: int) -> None:
    """A compactor's successive heads (growing with the same message objects, cut, replaced, a
    first head with no text at all) serialise to exactly what a fresh serialisation gives."""
    rng = random.Random(seed)
    pool = _head(seed) + _head(seed + 100) + [Message("assistant", ""), Message("user", "")]
    conv = ConversationText()
    head: list[Message] = []
    prev: list[Message] = []
    extended = 0
    for _ in range(25):
        step = rng.random()
        if step < 0.6:
            head = head + rng.sample(pool, min(len(pool), rng.randint(0, 3)))
        elif step < 0.8:
            head = head[: rng.randint(0, len(head))]
        else:
            head = [Message(m.role, m.content, m.tool_calls, m.tool_call_id) for m in head]  # equal, not identical
        text = serialize_conversation(head)
        if rng.random() < 0.5:
            assert conv(head) == text
        else:  # the pieces a prompt joins in: the same text, in the prompt as in the conversation
            parts = conv.parts(head)
            assert "".join(parts) == text == "".join(conversation_parts(head))
            for template, prev_text in ((DEFAULT_PROMPTS.first_template(), None), (DEFAULT_PROMPTS.incremental, "p")):
                assert render_template(template, parts, prev_text) == render_template(template, text, prev_text)
        extended += bool(prev) and len(head) > len(prev) and all(a is b for a, b in zip(head, prev))
        prev = head
    assert conv([]) == ""
    if seed == 0:
        assert extended > 0


class _Watch:
    """Whether a request holds its texts when the summarizer it wraps returns."""

    summarizer_id = "watch"

    def __init__(self, inner: ScriptedSummarizer) -> None:
        self.inner, self.seen = inner, list[bool]()

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        try:
            return self.inner.summarize(request)
        finally:
            self.seen.append(request.holds_text)


def test_a_scripted_summarizer_that_reads_prompts_builds_them_in_the_call() -> None:
    """``read_prompts`` (the conformance timing's ``--read-prompts``): the prompts exist when the
    summarizer returns, as a model client's request builds them; failures and nil replies too.
    The call log then forgets them (built again, equal, when read)."""
    history = _long_history()
    window = int(estimate_tokens(history) / 0.93)
    for read in (False, True):
        scripted = ScriptedSummarizer(["## Summary\nok", None], fail_on_calls=[3], read_prompts=read)
        watch = _Watch(scripted)
        run = make_policy("progressive", context_window_tokens=window).start(CompactionEnv(summarizer=watch, seed=0))
        for _ in range(3):
            run.compact(history)
        assert len(scripted.calls) == 3 and watch.seen == [read] * 3
        assert not any(c.holds_text for c in scripted.calls)
        if read:
            assert "[tool_result c0]: output 0" in scripted.calls[0].user_prompt


def test_the_call_log_forgets_built_texts_but_keeps_given_ones() -> None:
    """A request made from a head drops the prompt and conversation a client built once the call
    is over (a long run would keep every prompt otherwise); read again they are equal. Texts
    given at construction are the request's own: kept."""
    history = _long_history()
    window = int(estimate_tokens(history) / 0.93)
    scripted = ScriptedSummarizer(["## Summary\nok"], read_prompts=True)
    run = make_policy("progressive", context_window_tokens=window).start(CompactionEnv(summarizer=scripted, seed=0))
    run.compact(history)
    (req,) = scripted.calls
    assert not req.holds_text
    prompt, conv = req.user_prompt, req.conversation
    assert conv in prompt and req.holds_text
    req.forget_texts()
    assert not req.holds_text and req.user_prompt == prompt and req.conversation == conv
    given = summary_request(DEFAULT_PROMPTS, history[:3], "the text", "", None, ("user_intent",), 60.0)
    assert given.user_prompt.endswith("the text")
    given.forget_texts()
    assert given.conversation == "the text" and given._conversation == "the text"  # noqa: SLF001
    own = SummaryRequest(system_prompt="s", template="free_text", previous_compaction=None, user_prompt="u")
    own.forget_texts()
    assert own.user_prompt == "u" and own.holds_text
