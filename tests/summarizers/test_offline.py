"""Offline summarizers, the registry and the response cache (no network)."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from h9eval.compaction.anchors import (
    ANCHOR_TYPES,
    COMPACTION_MARKER,
    NA,
    anchor_types_for,
    format_anchors,
    merge_anchors,
    parse_anchors_and_summary,
)
from h9eval.core.errors import ConfigError, SummarizerError
from h9eval.core.messages import Message, ToolCall, assistant, system, tool_result, user
from h9eval.summarizers import (
    CachedSummarizer,
    OfflineFreeTextSummarizer,
    OfflineSummarizer,
    ResponseCache,
    ScriptedSummarizer,
    SummaryReply,
    SummaryRequest,
    make_summarizer,
    summarizer_names,
)
from h9eval.summarizers.cache import cache_key

RECORDED = Path("/work/shared/data/recorded/mini-swe-agent/deepseek_chat_test_1-100/django__django-15695.traj.json")
ALL_TYPES = anchor_types_for(("constraint", "artifact"))


def call(name: str, args: dict[str, object], cid: str) -> ToolCall:
    return ToolCall(cid, name, json.dumps(args))


def req(head: list[Message], **kw: object) -> SummaryRequest:
    fields: dict[str, object] = dict(
        system_prompt="You are a context compaction engine.",
        user_prompt="Conversation:\n" + "\n".join(m.content for m in head),
        template="first",
        previous_compaction=None,
        conversation="\n".join(m.content for m in head),
        head=tuple(head),
    )
    fields.update(kw)
    return SummaryRequest(**fields)  # type: ignore[arg-type]


def anchors_of(text: str, types: tuple[str, ...] = ANCHOR_TYPES) -> tuple[dict[str, str], str]:
    anchors, summary = parse_anchors_and_summary(text, types)
    return {a.type: a.content for a in anchors}, summary


# A crafted coding session: task, a failing test run, a decision, an edit, a plan, a refinement.
HEAD = [
    system("You are a coding agent."),
    user("Fix the crash in parse_config() when the YAML file is empty. You must not change the public API."),
    assistant(
        "I'll start by running the tests.",
        [call("bash", {"command": "cd /repo && pytest tests/test_config.py"}, "c1")],
    ),
    tool_result(
        "c1",
        '<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File "cfg.py", line 3\n'
        "TypeError: 'NoneType' object is not subscriptable\n</output>",
    ),
    assistant(
        "The issue is that yaml.safe_load returns None for an empty file. "
        "I'll use an empty dict instead of None because callers index the result.",
        [
            call(
                "str_replace_editor",
                {"command": "str_replace", "path": "src/cfg.py", "old_str": "a", "new_str": "b"},
                "c2",
            )
        ],
    ),
    tool_result("c2", "The file src/cfg.py has been edited."),
    assistant("", [call("bash", {"command": "sed -i 's/x/y/' src/util.py && echo done > log.txt"}, "c3")]),
    tool_result("c3", "<returncode>0</returncode>\n<output>\n</output>"),
    assistant("", [call("read_file", {"path": "docs/config.md"}, "c4")]),
    tool_result("c4", "no such tool", is_error=True),
    user("Also add a regression test, please. Never touch the CI files."),
    assistant("Next steps:\n1. Add a test for the empty file\n2. Run the full suite"),
]


def test_offline_first_compaction_has_every_anchor() -> None:
    reply = OfflineSummarizer().summarize(req(HEAD))
    assert reply.text is not None and reply.text.startswith("## Anchors\n\n### User Intent\n")
    a, summary = anchors_of(reply.text)
    # One line, one sentence per request: the task's first sentence and the latest request's.
    assert a["user_intent"] == (
        "Fix the crash in parse_config() when the YAML file is empty; latest request: Also add a regression test, "
        "please."
    )
    prog = a["execution_progress"]
    assert "- bash: pytest tests/test_config.py -> failed" in prog  # the `cd DIR &&` is dropped
    assert "- str_replace_editor: str_replace src/cfg.py -> ok" in prog
    assert "read_file: docs/config.md -> failed" in prog
    assert "I'll use an empty dict instead of None" in a["key_decision"]
    assert "The issue is that yaml.safe_load returns None" in a["key_decision"]
    tried = a["tried_solution"]
    assert "TypeError: 'NoneType' object is not subscriptable" in tried
    assert "no such tool" in tried
    assert a["next_step"] == "- Add a test for the empty file\n- Run the full suite"
    assert "4 tool calls, 2 failed" in summary
    assert "Last outcome: read_file: docs/config.md -> failed (no such tool)." in summary


def test_offline_extra_anchors_constraints_and_artifacts() -> None:
    reply = OfflineSummarizer().summarize(req(HEAD, anchor_types=ALL_TYPES))
    assert reply.text is not None
    a, _ = anchors_of(reply.text, ALL_TYPES)
    assert "You must not change the public API." in a["constraint"]
    assert "Never touch the CI files." in a["constraint"]
    art = a["artifact"]
    assert "src/cfg.py (modified)" in art
    assert "src/util.py (modified)" in art
    assert "log.txt (created)" in art
    # Only the requested sections, in the requested order.
    headers = [ln for ln in reply.text.split("\n") if ln.startswith("### ")]
    assert headers == [
        "### User Intent",
        "### Execution Progress",
        "### Key Decisions",
        "### Tried Solutions",
        "### Next Steps",
        "### Constraints",
        "### Artifacts",
    ]
    plain = OfflineSummarizer().summarize(req(HEAD)).text
    assert plain is not None and "### Constraints" not in plain and "### Artifacts" not in plain


def test_offline_is_deterministic_and_reports_usage() -> None:
    r = req(HEAD)
    a, b = OfflineSummarizer().summarize(r), OfflineSummarizer().summarize(r)
    assert a.text == b.text
    assert a.input_tokens == (len(r.system_prompt.encode()) + len(r.user_prompt.encode())) // 4
    assert a.output_tokens == len(a.text.encode()) // 4  # type: ignore[union-attr]
    assert a.latency_s >= 0 and a.cost_usd == 0.0 and not a.cache_hit


def test_offline_summarizer_id_encodes_params() -> None:
    assert OfflineSummarizer().summarizer_id != OfflineSummarizer(max_items=3).summarizer_id
    assert OfflineSummarizer().summarizer_id.startswith("offline/")
    assert OfflineFreeTextSummarizer().summarizer_id.startswith("offline_free_text/")
    with pytest.raises(ConfigError, match="max_items"):
        OfflineSummarizer(max_items=0)


def test_incremental_emits_exact_na_so_merge_keeps_old_values() -> None:
    # The head has no user message and no decision: intent and decisions must be exactly N/A.
    head = [
        assistant("", [call("bash", {"command": "make test"}, "t1")]),
        tool_result("t1", "<returncode>0</returncode>\n<output>\nall passed\n</output>"),
    ]
    prev = (
        ("user_intent", "Build a web server"),
        ("execution_progress", "- Set up project"),
        ("key_decision", "- Using net/http"),
        ("tried_solution", "- Tried gin: too heavy"),
        ("next_step", "- Add tests"),
    )
    r = req(head, template="incremental", previous_anchors=prev, previous_summary="Project uses Go.")
    text = OfflineSummarizer().summarize(r).text
    assert text is not None
    new, summary = anchors_of(text)
    assert new["user_intent"] == NA and new["key_decision"] == NA and new["tried_solution"] == NA
    # New progress is written in full: prior bullets first, then the new call.
    assert new["execution_progress"] == "- Set up project\n- bash: make test -> ok"
    from h9eval.compaction.anchors import Anchor

    merged = {
        a.type: a.content for a in merge_anchors([Anchor(t, c) for t, c in prev], parse_anchors_and_summary(text)[0])
    }
    assert merged["user_intent"] == "Build a web server"
    assert merged["key_decision"] == "- Using net/http"
    assert "make test -> ok" in merged["execution_progress"]
    assert "Earlier: Project uses Go." in summary


def test_incremental_refinement_keeps_prior_task() -> None:
    prev = (("user_intent", "Build a web server"),)
    head = [user("Please switch the port to 8080 instead.")]
    text = OfflineSummarizer().summarize(req(head, previous_anchors=prev)).text
    a, _ = anchors_of(text or "")
    assert a["user_intent"] == "Build a web server; latest request: Please switch the port to 8080 instead."
    # A third compaction: the prior task is recovered from the one-line intent, not nested.
    prev2 = (("user_intent", a["user_intent"]),)
    text2 = OfflineSummarizer().summarize(req([user("Use port 9090 after all.")], previous_anchors=prev2)).text
    assert anchors_of(text2 or "")[0]["user_intent"] == "Build a web server; latest request: Use port 9090 after all."


def test_compaction_message_in_head_supplies_prior_content() -> None:
    old = (
        f"{COMPACTION_MARKER}\n## Anchors\n\n"
        + format_anchors(
            parse_anchors_and_summary("### User Intent\nPort the parser to Rust\n### Key Decisions\n- Use nom")[0]
        )
        + "\n\n## Summary\nThis segment: 10 messages (1 user, 4 assistant), 4 tool calls, 0 failed.\n"
        "Totals so far: 10 messages, 4 tool calls, 0 failed."
    )
    head = [
        user(old),
        assistant(
            "Going with serde for the config because it is already a dependency.",
            [call("bash", {"command": "cargo build"}, "b1")],
        ),
        tool_result("b1", "error: could not compile `parser`", is_error=False),
    ]
    text = OfflineSummarizer().summarize(req(head)).text
    a, summary = anchors_of(text or "")
    # No previous_anchors: no merge follows, so prior values are written back, not N/A.
    assert a["user_intent"] == "Port the parser to Rust"
    assert a["key_decision"].startswith("- Use nom\n- Going with serde")
    assert "cargo build -> failed: error: could not compile `parser`" in a["tried_solution"]
    assert "Totals so far: 13 messages, 5 tool calls, 1 failed." in summary


def test_explicit_exit_status_zero_wins_over_error_text() -> None:
    head = [
        user("Investigate the exception handling in the module please, carefully."),
        assistant("", [call("bash", {"command": "grep -n except mod.py"}, "g1")]),
        tool_result("g1", "<returncode>0</returncode>\n<output>\n12:    except ValueError:\nError: nothing\n</output>"),
        assistant("", [call("bash", {"command": "ls missing"}, "g2")]),
        tool_result(
            "g2", "ls: cannot access 'missing': No such file or directory\n[Command finished with exit code 2]"
        ),
    ]
    a, _ = anchors_of(OfflineSummarizer().summarize(req(head)).text or "")
    assert "grep -n except mod.py -> ok" in a["execution_progress"]
    assert "ls missing -> failed: ls: cannot access 'missing': No such file or directory" in a["tried_solution"]


def test_chat_only_head_and_empty_head() -> None:
    head = [
        user("What is a monad, in one paragraph, with an example in Haskell?"),
        assistant("A monad is a pattern. Here is one."),
    ]
    a, _ = anchors_of(OfflineSummarizer().summarize(req(head)).text or "")
    assert a["execution_progress"] == "- A monad is a pattern. Here is one."
    empty = OfflineSummarizer().summarize(req([])).text
    a, summary = anchors_of(empty or "")
    assert all(v == NA for v in a.values())
    assert "0 messages" in summary


@pytest.mark.parametrize("max_tokens", [60, 150, 400, 2048])
def test_budget_is_respected(max_tokens: int) -> None:
    head: list[Message] = [user("Refactor the storage layer so that every backend shares one retry policy.")]
    for i in range(120):
        head.append(
            assistant(
                f"Because step {i} matters, I'll use approach {i} instead of {i - 1}.",
                [call("bash", {"command": f"python step_{i}.py"}, f"s{i}")],
            )
        )
        head.append(tool_result(f"s{i}", f"<returncode>{i % 3}</returncode>\n<output>\nValueError: bad {i}\n</output>"))
    for cls in (OfflineSummarizer, OfflineFreeTextSummarizer):
        text = cls().summarize(req(head, max_output_tokens=max_tokens, anchor_types=ALL_TYPES)).text
        assert text is not None
        assert len(text.encode("utf-8")) <= max_tokens * 4
        if max_tokens >= 400:
            a, summary = anchors_of(text, ALL_TYPES)
            if cls is OfflineSummarizer:
                assert a["execution_progress"].startswith("- earlier: ")
                assert "python step_119.py" in a["execution_progress"]  # newest survive
                assert summary
            else:
                assert all(v == NA for v in a.values()) and summary.startswith("Task: Refactor the storage layer")


def test_free_text_is_summary_only_prose() -> None:
    text = OfflineFreeTextSummarizer().summarize(req(HEAD)).text
    assert text is not None and text.startswith("## Summary\n")
    a, summary = anchors_of(text)
    assert all(v == NA for v in a.values())
    lines = summary.split("\n")
    assert lines[0] == "Task: Fix the crash in parse_config() when the YAML file is empty."
    # A chronological digest: one line per event, in the order of the head.
    assert lines[2:] == [
        "Assistant: I'll start by running the tests.",
        "Ran bash: pytest tests/test_config.py -> failed: TypeError: 'NoneType' object is not subscriptable",
        "Assistant: The issue is that yaml.safe_load returns None for an empty file.",
        "Ran str_replace_editor: str_replace src/cfg.py -> ok",
        "Ran bash: sed -i 's/x/y/' src/util.py && echo done > log.txt -> ok",
        "Ran read_file: docs/config.md -> failed: no such tool",
        "User: Also add a regression test, please.",
        "Assistant: Next steps: 1. Add a test for the empty file",
    ]
    # Incremental: the previous task is kept, its rest is folded into "Earlier", never nested.
    head2 = [
        assistant("", [call("bash", {"command": "pytest"}, "p1")]),
        tool_result("p1", "<returncode>0</returncode>"),
    ]
    r2 = req(head2, previous_summary=summary)
    s2 = OfflineFreeTextSummarizer().summarize(r2).text or ""
    s3 = OfflineFreeTextSummarizer().summarize(req(head2, previous_summary=anchors_of(s2)[1])).text or ""
    d3 = anchors_of(s3)[1].split("\n")
    assert d3[0] == "Task: Fix the crash in parse_config() when the YAML file is empty."
    # The earlier digests' events come first, each once, then the new ones.
    assert s3.count("Assistant: I'll start by running the tests.") == 1
    assert d3[-2:] == ["Ran bash: pytest -> ok", "Ran bash: pytest -> ok"]
    assert sum(ln.startswith("This segment: ") for ln in d3) == 1


def _load_openai_messages(path: Path) -> list[Message]:
    """mini-swe-agent trajectory (OpenAI chat format) -> h9eval Messages."""
    data = json.loads(path.read_text())
    out = []
    for m in data["messages"]:
        if m["role"] not in ("system", "user", "assistant", "tool"):
            continue  # the final "exit" record is not a chat message
        calls = tuple(
            ToolCall(tc["id"], tc["function"]["name"], tc["function"]["arguments"] or "")
            for tc in m.get("tool_calls") or ()
        )
        out.append(Message(m["role"], m.get("content") or "", calls, m.get("tool_call_id") or ""))
    return out


@pytest.mark.skipif(not RECORDED.exists(), reason="recorded session not available")
def test_recorded_mini_swe_agent_session() -> None:
    msgs = _load_openai_messages(RECORDED)
    assert len(msgs) > 100
    reply = OfflineSummarizer().summarize(req(msgs[:120], anchor_types=ALL_TYPES))
    text = reply.text or ""
    assert len(text.encode()) <= 2048 * 4
    a, summary = anchors_of(text, ALL_TYPES)
    assert "RenameIndex" in a["user_intent"]
    assert not a["user_intent"].startswith("<pr_description>")
    assert "Consider the following" not in a["user_intent"]
    assert a["execution_progress"] != NA and "bash:" in a["execution_progress"]
    # The run hit ModuleNotFoundError (missing asgiref) early on: a tried solution with its error.
    assert "ModuleNotFoundError" in a["tried_solution"] or "Error" in a["tried_solution"]
    assert a["key_decision"] != NA
    assert "django/db/migrations/operations/models.py" in a["artifact"] + summary
    assert "tool calls" in summary
    # Incremental second compaction over the rest: intent unchanged -> exactly N/A.
    prev = tuple((x.type, x.content) for x in parse_anchors_and_summary(text, ALL_TYPES)[0])
    r2 = req(
        msgs[120:], previous_anchors=prev, previous_summary=summary, anchor_types=ALL_TYPES, template="incremental"
    )
    a2, summary2 = anchors_of(OfflineSummarizer().summarize(r2).text or "", ALL_TYPES)
    assert a2["user_intent"] == NA
    assert a2["execution_progress"] != NA
    assert "Totals so far:" in summary2
    free = OfflineFreeTextSummarizer().summarize(req(msgs)).text or ""
    assert "RenameIndex" in free and len(free.encode()) <= 2048 * 4


# ---------------------------------------------------------------------------------------------
# Registry


def test_registry_names_and_did_you_mean() -> None:
    assert summarizer_names() == ["anthropic", "anthropic_free_text", "offline", "offline_free_text", "offline_recent"]
    assert isinstance(make_summarizer("offline"), OfflineSummarizer)
    assert isinstance(make_summarizer("offline_free_text", max_items=2), OfflineFreeTextSummarizer)
    with pytest.raises(ConfigError, match=r"unknown summarizer 'ofline'; did you mean 'offline' or 'offline_recent'\?"):
        make_summarizer("ofline")
    with pytest.raises(ConfigError, match=r"did you mean 'max_items'"):
        make_summarizer("offline", max_itemz=3)
    with pytest.raises(ConfigError, match=r"did you mean 'max_retries'"):
        make_summarizer("anthropic", max_retry=3, api_key="k")


def test_registry_anthropic_needs_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_summarizer("anthropic")
    s = make_summarizer("anthropic_free_text", api_key="sk-ant-xyz", model="claude-haiku-4-5")
    assert s.summarizer_id.startswith("anthropic_free_text{") and "sk-ant-xyz" not in s.summarizer_id


def test_importing_h9eval_does_not_import_anthropic() -> None:
    code = (
        "import sys, h9eval, h9eval.summarizers as s\n"
        "from h9eval.summarizers import make_summarizer\n"
        "make_summarizer('offline')\n"
        "assert 'anthropic' not in sys.modules, 'anthropic imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------
# Cache


class CountingSummarizer:
    """Counts calls; replies with the user prompt's length."""

    summarizer_id = "counting"
    model = "count-1"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        self.calls += 1
        return SummaryReply(
            text=f"## Summary\n{len(request.user_prompt)}",
            input_tokens=7,
            output_tokens=3,
            cost_usd=0.25,
            model=self.model,
            extra={"k": 1},
        )


def test_cache_hit_skips_inner_and_miss_on_other_prompt(tmp_path: Path) -> None:
    inner = CountingSummarizer()
    cached = CachedSummarizer(inner, tmp_path / "c" / "cache.sqlite")
    r = req(HEAD)
    first = cached.summarize(r)
    second = cached.summarize(r)
    assert inner.calls == 1 and (cached.hits, cached.misses) == (1, 1)
    assert not first.cache_hit and second.cache_hit
    assert (second.text, second.input_tokens, second.output_tokens, second.cost_usd, second.model) == (
        first.text,
        7,
        3,
        0.25,
        "count-1",
    )
    assert second.extra["k"] == 1 and "cache_lookup_s" in second.extra
    cached.summarize(req(HEAD[:3]))
    assert inner.calls == 2 and cached.misses == 2
    cached.summarize(req(HEAD, max_output_tokens=100))  # a parameter is part of the key
    assert inner.calls == 3
    # Persistent: a new cache object on the same file hits.
    again = CachedSummarizer(CountingSummarizer(), tmp_path / "c" / "cache.sqlite")
    assert again.summarize(r).cache_hit and again.inner.calls == 0  # type: ignore[attr-defined]


def test_cache_stores_nil_and_not_failures(tmp_path: Path) -> None:
    cached = CachedSummarizer(ScriptedSummarizer([None]), tmp_path / "c.sqlite")
    assert cached.summarize(req(HEAD)).text is None
    hit = cached.summarize(req(HEAD))
    assert hit.cache_hit and hit.text is None
    failing = CachedSummarizer(ScriptedSummarizer([], fail_on_calls=[1]), tmp_path / "c.sqlite")
    with pytest.raises(SummarizerError):
        failing.summarize(req(HEAD[:2]))
    assert len(failing.cache) == 1


def test_offline_cache_key_depends_on_structured_head(tmp_path: Path) -> None:
    # Same prompt text, different is_error: the offline reply differs, so the key must too.
    a = [
        user("run it please, the whole thing, now"),
        assistant("", [call("bash", {"command": "x"}, "1")]),
        tool_result("1", "out"),
    ]
    b = a[:2] + [tool_result("1", "out", is_error=True)]
    s = OfflineSummarizer()
    assert cache_key(s, req(a)) != cache_key(s, req(b))
    assert cache_key(s, req(a)) == cache_key(OfflineSummarizer(), req(a))
    assert cache_key(s, req(a)) != cache_key(OfflineSummarizer(max_items=2), req(a))


def test_cache_file_mode_and_no_api_key(tmp_path: Path) -> None:
    pytest.importorskip("httpx2")
    import httpx2

    from h9eval.summarizers.anthropic import AnthropicSummarizer

    key = "sk-ant-SECRET-cache-test-123"
    body = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "## Summary\nok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    client = httpx2.Client(transport=httpx2.MockTransport(lambda r: httpx2.Response(200, json=body)))
    path = tmp_path / "cache.sqlite"
    cached = CachedSummarizer(
        AnthropicSummarizer(api_key=key, model="claude-haiku-4-5", http_client=client, base_url="http://fake"), path
    )
    assert cached.summarize(req(HEAD)).text == "## Summary\nok"
    assert cached.summarize(req(HEAD)).cache_hit
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    files = sorted(tmp_path.iterdir())
    assert any(p.name.endswith("-wal") for p in files)  # WAL mode, and its files are private too
    for p in files:
        assert stat.S_IMODE(os.stat(p).st_mode) & 0o077 == 0, p
        assert key.encode() not in p.read_bytes()
    cached.cache.close()
    assert key.encode() not in path.read_bytes()


def _writer(path: str, n: int) -> int:
    cache = ResponseCache(path)
    for i in range(n):
        cache.put(f"k{i % 5}", SummaryReply(text=f"t{i}", input_tokens=i), summarizer_id="mp")
        cache.get(f"k{(i + 1) % 5}")
    return len(cache)


def test_cache_two_processes_same_keys(tmp_path: Path) -> None:
    path = str(tmp_path / "mp.sqlite")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        sizes = pool.starmap(_writer, [(path, 300), (path, 300)])
    assert all(1 <= s <= 5 for s in sizes)
    cache = ResponseCache(path)
    assert len(cache) == 5
    hit = cache.get("k0")
    assert hit is not None and hit.cache_hit and hit.text is not None and int(hit.text[1:]) % 5 == 0


def test_make_summarizer_with_cache(tmp_path: Path) -> None:
    s = make_summarizer("offline", cache=tmp_path / "x.sqlite")
    assert isinstance(s, CachedSummarizer)
    r = req(HEAD)
    assert not s.summarize(r).cache_hit and s.summarize(r).cache_hit
    assert s.summarizer_id == OfflineSummarizer().summarizer_id


def test_cache_refuses_unknown_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    ResponseCache(path).close()
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET v = '99' WHERE k = 'schema_version'")
    with pytest.raises(ConfigError, match="reads version 1"):
        ResponseCache(path)
