"""The one wrapper around the official ``anthropic`` SDK, used by every h9eval part that calls the
API (the summarizer, the llm probe client, the count_tokens counter, the live closed-loop agent).

It owns: where the key comes from (an explicit ``api_key`` or ``ANTHROPIC_API_KEY``; missing
either way is a :class:`~h9eval.core.errors.ConfigError` at construction), the client (built
lazily; ``http_client`` is how tests inject a fake transport), the SDK's exceptions mapped to
one h9eval error class with a message that names the HTTP status and the API's error type, the
usage read off a response, and redaction (:func:`redact`, the one redactor): no message this
module produces contains the key in any encoding (case variants, base64, percent-encoded, hex,
escaped), and the SDK exception (which holds the request headers) is never chained; and the
SDK's own logging (``ANTHROPIC_LOG``), which prints response headers unredacted, is refused. The
SDK is imported when an :class:`AnthropicAPI` is constructed, never when h9eval is imported.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from h9eval.core.budget import Budget, call_bound_usd
from h9eval.core.errors import ConfigError, H9Error
from h9eval.core.messages import Message

__all__ = [
    "API_KEY_ENV",
    "environment_fingerprint",
    "AnthropicAPI",
    "BASE_URL_ENV",
    "COMPACTED_PLACEHOLDER",
    "CallLimits",
    "CircuitBreaker",
    "DEFAULT_BREAKER_FAILURES",
    "DEFAULT_MAX_RETRY_AFTER_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "MAX_RETRIES_LIMIT",
    "MAX_RETRY_AFTER_LIMIT_S",
    "REQUEST_TIMEOUT_LIMIT_S",
    "Reply",
    "RetryAfterTooLong",
    "SDK_LOG_ENV",
    "Usage",
    "anthropic_messages",
    "count_of",
    "redact",
    "redact_obj",
    "resolve_api_key",
    "resolve_base_url",
    "retry_after_s",
    "usage_of",
]

API_KEY_ENV = "ANTHROPIC_API_KEY"
SDK_LOG_ENV = "ANTHROPIC_LOG"
"""The SDK's own logging switch: ``debug`` logs every response's headers to stderr (a proxy may
echo the key in one), ``info`` every request's URL; :class:`AnthropicAPI` refuses both."""
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
"""The endpoint the SDK calls when no ``base_url`` is given (it reads this variable itself); h9eval
reads it too, at construction, so the endpoint a reply came from is part of the summarizer's id."""
COMPACTED_PLACEHOLDER = "(earlier context was compacted)"
"""The user turn a request starts with when compaction left none (the API needs a user turn first)."""
#: characters of an API error message kept in an h9eval error (after redaction)
ERROR_MESSAGE_CHARS = 300
_REDACTED = "[redacted]"


MAX_RETRIES_LIMIT = 10
"""The most retries :class:`CallLimits` accepts (the SDK backs off exponentially: more is a hang)."""
_URL = re.compile(r"https?://[^\s/?#]+(/[^\s?#]*)?")
REQUEST_TIMEOUT_LIMIT_S = 3600.0
"""The longest per-attempt timeout :class:`CallLimits` accepts, in seconds."""
DEFAULT_REQUEST_TIMEOUT_S = 60.0
"""Seconds per HTTP attempt when nothing sets one (harness9's summary timeout): also what a call
without a request of its own to take the timeout from (a batch create or retrieve) waits."""
DEFAULT_MAX_RETRY_AFTER_S = 60.0
"""The longest ``retry-after`` a client waits before a retry, in seconds. The SDK sleeps for any
``retry-after`` a server sends (an hour, a day): above this the call ends at once instead, and
the caller takes its fallback (:class:`RetryAfterTooLong`)."""
MAX_RETRY_AFTER_LIMIT_S = 3600.0
"""The largest ``max_retry_after_s`` :class:`CallLimits` accepts, in seconds."""
DEFAULT_BREAKER_FAILURES = 3
"""Consecutive failed calls (timeouts, 5xx, connection errors; each after its retries) after which a
client stops calling for the rest of its life (:class:`CircuitBreaker`): a hung endpoint then costs
three timed-out calls, not one per summary of a whole sweep."""
BREAKER_FAILURES_LIMIT = 1000


@dataclass(frozen=True, kw_only=True)
class CallLimits:
    """How every model request is made: where it goes (``base_url``) and to which model, how
    long it may take, how often it is retried, and after how many failures a client stops: what
    every model-calling command (``--base-url``, ``--summarizer-model``, ``--scorer-model``,
    ``--agent-model``, ``--request-timeout-s``, ``--max-retries``, ``--breaker-failures``) and
    sweep spec (the top-level keys of the same names) hands down to the SDK client of each part
    that calls a model (the Anthropic summarizers, the llm scorer's client, the live agent).

    Precedence, for each value: the command line, then the spec (a sweep), then the
    environment (``ANTHROPIC_BASE_URL``, read by :func:`resolve_base_url`), then the part's
    default. A value also given in a part's own parameters (``summarizer.params.model``) must
    agree, or :meth:`apply` refuses it.

    ``request_timeout_s``: seconds per HTTP attempt, in (0, 3600]; ``None`` (default) = each
    part's own default (a summary request's ``timeout_s``, harness9's 60 s). ``max_retries``:
    SDK retries after the first attempt (408/409/429/5xx and connection errors), 0-10;
    ``None`` = the part's default (2). The worst wall time of one call is about
    ``request_timeout_s * (max_retries + 1)`` plus the SDK's backoff. ``breaker_failures``:
    consecutive failed calls (timeouts, 5xx, connection errors, each after its retries) after
    which a client stops calling for the rest of the run (:class:`CircuitBreaker`), 0-1000, 0 =
    never; ``None`` = :data:`DEFAULT_BREAKER_FAILURES` (3). ``max_retry_after_s``: the longest
    ``retry-after`` (or ``retry-after-ms``) a retry waits for, in [0, 3600]; a server asking for
    longer ends the call at once (``rate limited: retry-after 3600 s exceeds
    max_retry_after_s=60``), counted by the breaker as a failed call; ``None`` =
    :data:`DEFAULT_MAX_RETRY_AFTER_S` (60). With it the worst wall time of one call is about
    ``request_timeout_s * (max_retries + 1) + max_retry_after_s * max_retries``.
    """

    request_timeout_s: float | None = None
    max_retries: int | None = None
    breaker_failures: int | None = None
    max_retry_after_s: float | None = None
    base_url: str | None = None
    """Where every model request goes (an Anthropic-compatible endpoint: a local vLLM, Ollama or
    llama.cpp server); ``None`` = ``$ANTHROPIC_BASE_URL`` when set, else the Anthropic API."""
    summarizer_model: str | None = None
    """The Anthropic summarizers' model (``None``: theirs, ``claude-sonnet-4-6``)."""
    scorer_model: str | None = None
    """The llm scorer's answerer and judge model (``None``: its default, ``claude-haiku-4-5``)."""
    agent_model: str | None = None
    """The live closed-loop agent's model (``None``: its default, ``claude-sonnet-4-6``)."""

    def __post_init__(self) -> None:
        t = self.request_timeout_s
        if t is not None and (
            isinstance(t, bool)
            or not isinstance(t, int | float)
            or not math.isfinite(t)
            or not 0 < t <= REQUEST_TIMEOUT_LIMIT_S
        ):
            raise ConfigError(
                f"request_timeout_s must be a number of seconds in (0, {REQUEST_TIMEOUT_LIMIT_S:g}], got {t!r}"
            )
        r = self.max_retries
        if r is not None and (isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= MAX_RETRIES_LIMIT):
            raise ConfigError(f"max_retries must be an integer in [0, {MAX_RETRIES_LIMIT}], got {r!r}")
        b = self.breaker_failures
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= BREAKER_FAILURES_LIMIT):
            raise ConfigError(
                f"breaker_failures must be an integer in [0, {BREAKER_FAILURES_LIMIT}] (0 = never), got {b!r}"
            )
        a = self.max_retry_after_s
        if a is not None and (
            isinstance(a, bool)
            or not isinstance(a, int | float)
            or not math.isfinite(a)
            or not 0 <= a <= MAX_RETRY_AFTER_LIMIT_S
        ):
            raise ConfigError(
                f"max_retry_after_s must be a number of seconds in [0, {MAX_RETRY_AFTER_LIMIT_S:g}], got {a!r}"
            )
        if self.base_url is not None and not (isinstance(self.base_url, str) and _URL.fullmatch(self.base_url)):
            raise ConfigError(f"base_url must be an http(s) URL such as http://localhost:8000, got {self.base_url!r}")
        for name in ("summarizer_model", "scorer_model", "agent_model"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, str) and v.strip()):
                raise ConfigError(f"{name} must be a non-empty model id, got {v!r}")

    def endpoint(self) -> dict[str, str]:
        """The endpoint and models that are set (what changes a reply, unlike the limits)."""
        names = ("base_url", "summarizer_model", "scorer_model", "agent_model")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}

    def client_params(self, part: str | None = None) -> dict[str, Any]:
        """The parameters the model-calling parts take (``timeout_s``, ``max_retries``,
        ``breaker_failures``, ``max_retry_after_s``, ``base_url``, and ``model`` of ``part``: ``summarizer``,
        ``scorer`` or ``agent``), set ones only."""
        out: dict[str, Any] = {}
        if self.base_url is not None:
            out["base_url"] = self.base_url
        model = getattr(self, f"{part}_model") if part is not None else None
        if model is not None:
            out["model"] = model
        if self.request_timeout_s is not None:
            out["timeout_s"] = float(self.request_timeout_s)
        if self.max_retries is not None:
            out["max_retries"] = self.max_retries
        if self.breaker_failures is not None:
            out["breaker_failures"] = self.breaker_failures
        if self.max_retry_after_s is not None:
            out["max_retry_after_s"] = float(self.max_retry_after_s)
        return out

    def apply(self, params: dict[str, Any], *, who: str, part: str | None = None) -> dict[str, Any]:
        """``params`` (a model-calling part's) with these limits added (and the model of ``part``);
        one also given in ``params`` with another value is a :class:`ConfigError` naming both
        (``who`` the part)."""
        out = dict(params)
        for k, v in self.client_params(part).items():
            if k in out and out[k] != v:
                field = {"model": f"{part}_model", "timeout_s": "request_timeout_s"}.get(k, k)
                raise ConfigError(
                    f"{who}: {k}={out[k]!r} conflicts with the command's or spec's {field} {v!r}; give one"
                )
            out[k] = v
        return out


def environment_fingerprint() -> str:
    """A digest of what a client built now reads from the environment (``$ANTHROPIC_BASE_URL`` and
    ``$ANTHROPIC_API_KEY``; the key only hashed, never kept): a client cached under an older
    fingerprint would call another endpoint with another key."""
    seen = json.dumps([os.environ.get(BASE_URL_ENV, ""), os.environ.get(API_KEY_ENV, "")])
    return hashlib.sha256(seen.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def resolve_api_key(api_key: str | None, *, who: str) -> str:
    """``api_key``, else ``$ANTHROPIC_API_KEY``; ``who`` names the part in the error when neither
    is set (``"the anthropic summarizer"``)."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
    if not key:
        raise ConfigError(f"{who} needs an API key: set {API_KEY_ENV} or pass api_key")
    return key


def refuse_sdk_logging(*, who: str) -> None:
    """A :class:`ConfigError` when ``$ANTHROPIC_LOG`` turns the SDK's logging on (``debug`` or
    ``info``, any case): the SDK then prints HTTP traffic to stderr, response headers included,
    which h9eval's redaction never sees. Refused rather than quietly turned down (setting the
    ``anthropic`` and ``httpx2`` loggers to WARNING), so a user who asked for the log learns why
    there is none; the SDK reads the variable when it is imported, so this runs before that."""
    level = os.environ.get(SDK_LOG_ENV, "").strip().lower()
    if level in ("debug", "info"):
        raise ConfigError(
            f"the {who}: {SDK_LOG_ENV}={level} makes the anthropic SDK print HTTP requests and response "
            f"headers to stderr, which can carry the API key; unset {SDK_LOG_ENV}"
        )


def resolve_base_url(base_url: str | None) -> str | None:
    """``base_url``, else ``$ANTHROPIC_BASE_URL`` when set and not empty, else ``None`` (the SDK's
    default endpoint): the precedence every model-calling part follows (an explicit value, from
    the command line or a spec, over the environment)."""
    if base_url:
        return base_url
    return os.environ.get(BASE_URL_ENV) or None


def _char_forms(ch: str) -> list[str]:
    """Regex alternatives for one character of a key, as the encodings a reply or a proxy may echo
    it in spell it: itself (case-insensitive at match time), percent-encoded (``quote``, and ``+``
    for a space as ``quote_plus`` writes it), hex of its UTF-8 bytes, ``\\uXXXX`` and ``\\xXX``
    escapes, and a backslash-escaped punctuation character (JSON's ``\\"``, ``\\/``, ``\\\\``)."""
    raw = ch.encode("utf-8", "surrogatepass")
    forms = {re.escape(ch), re.escape("".join(f"%{b:02x}" for b in raw)), raw.hex()}
    forms.add(re.escape("".join(f"\\x{b:02x}" for b in raw)))
    if ord(ch) < 0x10000:
        forms.add(re.escape(f"\\u{ord(ch):04x}"))
    if ch == " ":
        forms.add(re.escape("+"))
    if not ch.isalnum():
        forms.add(re.escape("\\" + ch))
    # longest first: a regex alternation takes the first alternative that matches
    return sorted(forms, key=lambda f: (-len(f), f))


@functools.lru_cache(maxsize=16)
def _secret_pattern(secret: str) -> re.Pattern[str]:
    """One pattern for every encoding of ``secret`` h9eval redacts. Per character (so any mix of
    them is caught, too): plain, any case, percent-encoded, hex, ``\\u``/``\\x`` and JSON escapes. As a
    whole: base64 (standard and URL-safe, with and without padding, and those percent-encoded,
    as ``+``, ``/`` and ``=`` are in a URL). Cached: every string of every response is redacted."""
    raw = secret.encode("utf-8", "surrogatepass")
    whole: set[str] = set()
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        b = enc(raw).decode("ascii")
        for form in (b, b.rstrip("=")):
            whole.update({form, quote(form, safe=""), quote_plus(form, safe="")})
    # longest first, so a form that contains another is replaced whole
    alternatives = [re.escape(f) for f in sorted(whole, key=lambda f: (-len(f), f)) if len(f) >= 8]
    alternatives.append("".join(f"(?:{'|'.join(_char_forms(ch))})" for ch in secret))
    return re.compile("|".join(alternatives), flags=re.IGNORECASE)


_SECRET_NAME = re.compile(
    r"(?i)(api[_-]?key|secret|passw(or)?d|(^|[_-])token$|^auth(orization)?$|credential|private[_-]?key|access[_-]?key|bearer)"
)
"""Parameter names whose values are secrets (``api_key``, ``auth_token``; not ``max_tokens``)."""


def is_secret_name(name: str) -> bool:
    """Whether a parameter called ``name`` holds a secret."""
    return bool(_SECRET_NAME.search(name))


def redact_secret_params(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, scalars) with the value of every key that
    :func:`is_secret_name` flags replaced by ``[redacted]``, at any depth (a copy)."""
    if isinstance(obj, dict):
        return {
            k: (
                _REDACTED
                if isinstance(k, str) and is_secret_name(k) and v not in (None, "")
                else redact_secret_params(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [redact_secret_params(v) for v in obj]
    return obj


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` in any encoding a reply, a proxy or an SDK
    may echo it in replaced by ``[redacted]``: plain or in any case, base64 (standard and
    URL-safe), percent-encoded (``quote``, ``quote_plus``, or every byte), hex of its UTF-8 bytes
    (either case), JSON/``\\u``/``\\x`` escaped, or a mix of these character by character. The
    one redaction of h9eval: every writer and error message goes through it, and it runs before
    any cut (a cut key no longer matches). Secrets shorter than 8 characters are not searched
    for: they would redact ordinary words."""
    if not secret or len(secret) < 8 or not text:
        return text
    return _secret_pattern(secret).sub(_REDACTED, text)


def redact_obj(obj: Any, secret: str | None) -> Any:
    """``obj`` (JSON-like) with every string in it, keys included, :func:`redact`-ed (a copy):
    for a whole response stored as it came (a cassette, a batch result). Walking the object, not
    redacting its JSON text, keeps the JSON valid whatever an escaped form of the key overlaps."""
    if isinstance(obj, str):
        return redact(obj, secret)
    if isinstance(obj, Mapping):
        return {redact_obj(k, secret): redact_obj(v, secret) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v, secret) for v in obj]
    return obj


@dataclass(frozen=True)
class Usage:
    """Token usage of one response; ``missing`` when the response carried no usage block."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    missing: bool = False


def count_of(obj: Any, name: str, *, where: str = "usage") -> int:
    """The token count ``obj.<name>`` of a response (0 when absent or null). Anything but a
    non-negative integer (a string, a float, a bool) is a :class:`ValueError` that names the
    field and the value's type, never the value: a reply can echo the key anywhere."""
    v = getattr(obj, name, None)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        what = "a negative integer" if isinstance(v, int) and not isinstance(v, bool) else f"a {type(v).__name__}"
        raise ValueError(f"{where}.{name} is not a non-negative integer (got {what})")
    return v


def usage_of(resp: Any) -> Usage:
    """The :class:`Usage` of an SDK response (zeros, ``missing=True`` when it has none); a count
    that is not a non-negative integer is a :class:`ValueError` naming the field, not the value
    (:meth:`AnthropicAPI.reply` maps it to the caller's error)."""
    usage = getattr(resp, "usage", None)
    if usage is None:
        return Usage(missing=True)
    return Usage(
        input_tokens=count_of(usage, "input_tokens"),
        output_tokens=count_of(usage, "output_tokens"),
        cache_creation_input_tokens=count_of(usage, "cache_creation_input_tokens"),
        cache_read_input_tokens=count_of(usage, "cache_read_input_tokens"),
    )


@dataclass(frozen=True)
class Reply:
    """What h9eval stores of one Messages response, every string redacted
    (:meth:`AnthropicAPI.reply`): ``text`` the text blocks joined (``None`` without one)."""

    text: str | None
    model: str | None
    stop_reason: str | None
    usage: Usage


def _error_type(body: object) -> str:
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("type"), str):
            return str(err["type"])
    return "error"


def _error_message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            return str(err["message"])
    return str(getattr(e, "message", "") or "")


@dataclass
class CircuitBreaker:
    """Consecutive failures of one client, and whether it has stopped calling.

    ``failures``: the threshold (0 = never trip). A timeout, a 5xx or a connection error (each
    after the SDK's retries) adds one; any other outcome (a reply, a 4xx: the endpoint answers)
    resets the count. Once ``failures`` are reached the breaker is open for the rest of the
    client's life (a run, or a sweep's worker process): every later call is refused without a
    request and counted in ``skipped``."""

    failures: int = DEFAULT_BREAKER_FAILURES
    consecutive: int = 0
    open: bool = False
    skipped: int = 0

    def failed(self) -> None:
        self.consecutive += 1
        if self.failures and self.consecutive >= self.failures:
            self.open = True

    def answered(self) -> None:
        self.consecutive = 0


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The seconds a response asks the client to wait before a retry, read as the SDK reads them
    (``retry-after-ms`` first, then ``retry-after`` as seconds, then as an HTTP date), or ``None``
    when it names none (the SDK then backs off on its own, at most 8 s)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    date = email.utils.parsedate_tz(raw)
    return None if date is None else float(email.utils.mktime_tz(date) - time.time())


def _sdk_retries(status: int, headers: Mapping[str, str]) -> bool:
    """Whether the SDK retries a response of ``status`` (its rule: ``x-should-retry`` first, then
    408, 409, 429 and 5xx), so whether it would sleep for the response's ``retry-after``."""
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return status in (408, 409, 429) or status >= 500


class RetryAfterTooLong(Exception):  # noqa: N818 - named for what the server asked
    """A retryable response asked for a longer wait than ``max_retry_after_s``. Raised inside the
    SDK's retry loop (by the client's middleware), where the SDK lets any exception that is not
    its own pass without a retry or a sleep; :meth:`AnthropicAPI.call` maps it to the caller's
    error, naming the wait and the cap."""

    def __init__(self, status: int, wait_s: float, cap_s: float) -> None:
        what = "rate limited" if status == 429 else f"HTTP {status}"
        super().__init__(f"{what}: retry-after {wait_s:g} s exceeds max_retry_after_s={cap_s:g}; not retried")
        self.status, self.wait_s, self.cap_s = status, wait_s, cap_s


class AnthropicAPI:
    """A lazily built ``anthropic.Anthropic`` client plus the error mapping.

    ``who`` prefixes every error message (``"anthropic summarizer (claude-sonnet-4-6)"``);
    ``error`` is the h9eval exception class raised for a failed call. ``breaker_failures``: see
    :class:`CircuitBreaker` (default :data:`DEFAULT_BREAKER_FAILURES`); a call refused by the open
    breaker raises ``breaker_error`` (default ``error``) and sends nothing. ``base_url``: ``None``
    = ``$ANTHROPIC_BASE_URL`` when set (read here, so :attr:`base_url` says where calls go), else
    the SDK's default. Picklable (for worker processes): the client and the SDK module are
    rebuilt after unpickling. ``budget``: a spending cap (:class:`~h9eval.core.budget.Budget`)
    that every paid call reserves its most cost from first, at ``price`` (input, output USD per
    million tokens; required with a budget); a call past the cap raises
    :class:`~h9eval.core.errors.BudgetExceeded` and is not made. ``$ANTHROPIC_LOG`` set to
    ``debug`` or ``info`` is a :class:`ConfigError` at construction (:func:`refuse_sdk_logging`:
    the SDK's log would print response headers, unredacted). ``max_retry_after_s``: the longest
    ``retry-after`` a retry waits for (default :data:`DEFAULT_MAX_RETRY_AFTER_S`); a retryable
    response asking for longer ends the call (:class:`RetryAfterTooLong`, a failed call for the
    breaker: the endpoint has said it will not serve within the wait).
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        who: str,
        error: Callable[[str], H9Error],
        max_retries: int = 2,
        base_url: str | None = None,
        http_client: Any = None,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        breaker_error: Callable[[str], H9Error] | None = None,
        budget: Budget | None = None,
        price: tuple[float, float] | None = None,
        max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S,
    ) -> None:
        CallLimits(max_retry_after_s=max_retry_after_s)  # the one check of its range
        if budget is not None and price is None:
            raise ConfigError(
                f"the {who}: max_cost_usd caps dollars, and this model has no price; price it "
                "(summarizer.params.prices, or the part's prices) or drop the cap"
            )
        self.budget, self.price = budget, price
        self._api_key = resolve_api_key(api_key, who=f"the {who}")
        refuse_sdk_logging(who=who)  # before the import: the SDK sets its loggers up when imported
        import anthropic  # lazy: importing h9eval must not import the SDK

        self.sdk: Any = anthropic
        self.who = who
        self._error_cls = error
        self._breaker_error = breaker_error or error
        self.breaker = CircuitBreaker(failures=breaker_failures)
        self.max_retries = max_retries
        self.max_retry_after_s = float(max_retry_after_s)
        self.base_url = resolve_base_url(base_url)
        self._http_client = http_client
        self._client: Any = None

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicAPI(who={self.who!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_client=None, sdk=None, _http_client=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        import anthropic

        self.sdk = anthropic

    @property
    def client(self) -> Any:
        if self._client is None:
            kwargs: dict[str, Any] = {
                "api_key": self._api_key,
                "max_retries": self.max_retries,
                # the SDK sleeps for any retry-after; this ends the call on one above the cap
                "middleware": [self._cap_retry_after],
            }
            if self.base_url is not None:
                kwargs["base_url"] = self.base_url
            if self._http_client is not None:
                kwargs["http_client"] = self._http_client
            self._client = self.sdk.Anthropic(**kwargs)
        return self._client

    def _cap_retry_after(self, request: Any, call_next: Callable[[Any], Any]) -> Any:
        """SDK middleware (run once per HTTP attempt, inside the SDK's retry loop): a response the
        SDK would retry after a ``retry-after`` longer than :attr:`max_retry_after_s` raises
        :class:`RetryAfterTooLong` instead of letting the SDK sleep for it. The last attempt
        (no retry left, so no sleep) is left to the SDK's own error."""
        response = call_next(request)
        status = int(response.status_code)
        if status < 400 or getattr(request, "retries_taken", 0) >= self.max_retries:
            return response
        headers = response.headers
        wait = retry_after_s(headers)
        if wait is not None and wait > self.max_retry_after_s and _sdk_retries(status, headers):
            response.http_response.close()  # the connection goes back to the pool
            raise RetryAfterTooLong(status, wait, self.max_retry_after_s)
        return response

    def redact(self, text: str) -> str:
        """``text`` with this client's key (and its variants) removed."""
        return redact(text, self._api_key)

    def redact_obj(self, obj: Any) -> Any:
        """``obj`` (JSON-like) with every string in it, keys included, :meth:`redact`-ed (a copy):
        for a whole response stored as it came (a cassette)."""
        return redact_obj(obj, self._api_key)

    def _field(self, resp: Any, name: str) -> str | None:
        v = getattr(resp, name, None)
        return None if v is None else self.redact(str(v))

    def reply(self, resp: Any) -> Reply:
        """The one reading of a ``messages.create`` response: the text blocks, ``model``,
        ``stop_reason`` (each redacted: a reply can echo the key in any field) and the usage.
        A response without a content list, or with a token count that is not a non-negative
        integer, is :meth:`error` (naming the field, never its value)."""
        content = getattr(resp, "content", None)
        if not isinstance(content, list):
            raise self.error(f"malformed response: no content list (got {type(resp).__name__})")
        try:
            usage = usage_of(resp)
        except ValueError as e:
            raise self.error(f"malformed response: {e}") from None
        blocks = [getattr(b, "text", None) for b in content if getattr(b, "type", None) == "text"]
        texts = [t for t in blocks if isinstance(t, str)]
        return Reply(
            text=self.redact("".join(texts)) if texts else None,
            model=self._field(resp, "model"),
            stop_reason=self._field(resp, "stop_reason"),
            usage=usage,
        )

    def error(self, detail: str) -> H9Error:
        """The h9eval error for ``detail``: redacted first, then cut, so no key prefix survives."""
        return self._error_cls(self.redact(f"{self.who}: {detail}"))

    def call(self, method: Callable[..., Any], /, *, timeout: float | None, **kwargs: Any) -> Any:
        """``method(**kwargs, timeout=timeout)`` (an SDK method of :attr:`client`) with every SDK
        failure mapped to :meth:`error`; a paid call (one with ``max_tokens``) under a
        :attr:`budget` reserves its bound first and settles its cost after."""
        if self.budget is None or self.price is None or "max_tokens" not in kwargs:
            return self._call(method, timeout=timeout, **kwargs)
        price = self.price
        sent = {k: kwargs.get(k) for k in ("system", "messages", "tools", "context_management")}
        bound = call_bound_usd(len(json.dumps(sent, default=str).encode("utf-8")), int(kwargs["max_tokens"]), price)
        self.budget.reserve(bound, who=self.who)
        actual = 0.0
        try:
            resp = self._call(method, timeout=timeout, **kwargs)
            try:
                u = usage_of(resp)
                tin = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
                actual = (tin * price[0] + u.output_tokens * price[1]) / 1e6
            except ValueError:
                actual = bound  # unreadable usage: count the bound, never less
            return resp
        finally:
            self.budget.settle(bound, actual)

    def _call(self, method: Callable[..., Any], /, *, timeout: float | None, **kwargs: Any) -> Any:
        sdk = self.sdk
        breaker = self.breaker
        if breaker.open:
            breaker.skipped += 1
            raise self._breaker_error(
                self.redact(
                    f"{self.who}: circuit breaker open after {breaker.failures} consecutive failed calls; not called"
                )
            )
        try:
            resp = method(timeout=timeout, **kwargs)
        except RetryAfterTooLong as e:
            breaker.failed()
            raise self.error(str(e)) from None
        except sdk.APITimeoutError:
            breaker.failed()
            raise self.error(f"timed out after {timeout:g} s per attempt ({self.max_retries} retries)") from None
        except sdk.APIStatusError as e:
            if e.status_code >= 500:
                breaker.failed()
            else:
                breaker.answered()
            msg = self.redact(_error_message(e))[:ERROR_MESSAGE_CHARS]
            raise self.error(f"HTTP {e.status_code} {_error_type(e.body)}: {msg}") from None
        except sdk.APIConnectionError as e:
            breaker.failed()
            raise self.error(f"connection error: {e.message}") from None
        except (sdk.AnthropicError, ValueError) as e:
            # ValueError covers a body that is not JSON (json.JSONDecodeError) and pydantic errors.
            breaker.answered()
            raise self.error(f"malformed response: {type(e).__name__}: {e}") from None
        breaker.answered()
        return resp

    def create(self, *, timeout: float | None, **kwargs: Any) -> Any:
        """``messages.create`` through :meth:`call`."""
        return self.call(self.client.messages.create, timeout=timeout, **kwargs)

    def count_tokens(self, **kwargs: Any) -> Any:
        """``messages.count_tokens`` through :meth:`call`."""
        return self.call(self.client.messages.count_tokens, timeout=None, **kwargs)


# -- h9eval messages as a Messages API request ------------------------------------------------------
def _blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.is_tool_result:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": m.tool_call_id,
            "content": m.content or "(empty)",
        }
        if m.is_error:
            block["is_error"] = True
        return "user", [block]
    if m.is_assistant:
        out: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        for tc in m.tool_calls:
            try:
                args = json.loads(tc.arguments) if tc.arguments else {}
            except json.JSONDecodeError:
                args = {}
            out.append(
                {"type": "tool_use", "id": tc.id, "name": tc.name, "input": args if isinstance(args, dict) else {}}
            )
        return "assistant", out or [{"type": "text", "text": "(empty)"}]
    return "user", [{"type": "text", "text": m.content or "(empty)"}]


def anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` of a Messages API request for h9eval messages: system messages joined
    into the system prompt; an assistant message's tool calls as ``tool_use`` blocks, tool results
    as ``tool_result`` blocks in a user message, consecutive messages of one role merged, and a
    user turn first (the API needs one; compaction can leave an assistant message there)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    msgs: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role, blocks = _blocks(m)
        if msgs and msgs[-1]["role"] == role:
            msgs[-1]["content"].extend(blocks)
        else:
            msgs.append({"role": role, "content": blocks})
    if not msgs or msgs[0]["role"] != "user":
        msgs.insert(0, {"role": "user", "content": [{"type": "text", "text": COMPACTED_PLACEHOLDER}]})
    return system, msgs
