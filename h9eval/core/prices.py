"""The one table of models: context windows, list prices and prompt-caching rules, dated.

Every price and window in h9eval comes from :data:`MODELS` (the summarizers' cost, the tuner's
windows and cost bounds, the billing model of :mod:`h9eval.core.billing`); a spec or a file
overrides entries with :func:`models_with` / :func:`load_models`. A model with no entry, or an
entry without prices, is *unpriced*: :func:`price_of` returns ``None`` and every caller reports
it as unpriced, never as $0.

Prices are list prices in USD per million tokens as the vendors published them on
:data:`PRICES_AS_OF`; they change, so pass your own for numbers that matter.

Caching rules per provider (see ``docs/billing.md``):

* ``anthropic``: explicit breakpoints; a cache read costs ``cache_read_frac`` (0.1) of the input
  price, a write ``cache_write_5m_frac`` (1.25) or ``cache_write_1h_frac`` (2.0) by lifetime; a
  prefix shorter than ``min_cacheable_tokens`` is never cached.
* ``openai`` (and ``google``'s implicit caching): automatic prefix caching of prompts of at
  least ``min_cacheable_tokens``; cached tokens cost ``cache_read_frac`` of the input price and
  a write costs nothing extra (``cache_write_*_frac`` 1.0: billed as ordinary input).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h9eval.core.errors import ConfigError, did_you_mean

__all__ = [
    "MODELS",
    "PRICES_AS_OF",
    "PROVIDERS",
    "ModelInfo",
    "BATCH_PRICE_FRAC",
    "base_model_id",
    "batch_price_frac",
    "load_models",
    "model_entry",
    "model_info",
    "models_with",
    "price_of",
]

PRICES_AS_OF = "2026-02-15"
"""The day the prices and windows of :data:`MODELS` were copied from the vendors' pages."""

BATCH_PRICE_FRAC = 0.5
"""A call sent through a provider's batch API (Anthropic's Message Batches, OpenAI's and Google's
batch modes) is billed this fraction of the list price, input and output alike (all three: 50 %)."""

PROVIDERS = ("anthropic", "openai", "google", "other")
"""Caching rule families: explicit breakpoints (anthropic) or automatic prefixes (openai, google)."""


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """One model: window, prices (USD per million tokens; ``None`` = unknown) and caching rules."""

    provider: str = "other"
    """``anthropic`` (explicit breakpoints), ``openai``/``google`` (automatic prefix caching) or ``other``
    (no cache)."""
    context_window_tokens: int | None = None
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    cache_read_frac: float = 1.0
    """A cached input token's price as a fraction of an input token's (Anthropic 0.1)."""
    cache_write_5m_frac: float = 1.0
    """A 5-minute cache write's price as a fraction of an input token's (Anthropic 1.25)."""
    cache_write_1h_frac: float = 1.0
    """A 1-hour cache write's price as a fraction of an input token's (Anthropic 2.0)."""
    min_cacheable_tokens: int = 1024
    """The shortest prefix the provider caches (tokens)."""
    batch_price_frac: float = BATCH_PRICE_FRAC
    """A batched call's price as a fraction of the list price (:data:`BATCH_PRICE_FRAC`)."""

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ConfigError(f"provider must be one of {', '.join(PROVIDERS)}, got {self.provider!r}")
        w = self.context_window_tokens
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w <= 0):
            raise ConfigError(f"context_window_tokens must be a positive integer, got {self.context_window_tokens!r}")
        for name in ("input_usd_per_mtok", "output_usd_per_mtok"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int | float) and v >= 0):
                raise ConfigError(f"{name} must be a number >= 0 or absent, got {v!r}")
        for name in ("cache_read_frac", "cache_write_5m_frac", "cache_write_1h_frac", "batch_price_frac"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and v >= 0):
                raise ConfigError(f"{name} must be a number >= 0, got {v!r}")
        if not isinstance(self.min_cacheable_tokens, int) or self.min_cacheable_tokens < 0:
            raise ConfigError(f"min_cacheable_tokens must be an integer >= 0, got {self.min_cacheable_tokens!r}")

    @property
    def priced(self) -> bool:
        """Whether both the input and the output price are known."""
        return self.input_usd_per_mtok is not None and self.output_usd_per_mtok is not None


def _anthropic(window: int, pin: float, pout: float, min_cacheable: int) -> ModelInfo:
    return ModelInfo(
        provider="anthropic",
        context_window_tokens=window,
        input_usd_per_mtok=pin,
        output_usd_per_mtok=pout,
        cache_read_frac=0.1,
        cache_write_5m_frac=1.25,
        cache_write_1h_frac=2.0,
        min_cacheable_tokens=min_cacheable,
    )


def _automatic(provider: str, window: int, pin: float, pout: float, read_frac: float, min_cacheable: int) -> ModelInfo:
    return ModelInfo(
        provider=provider,
        context_window_tokens=window,
        input_usd_per_mtok=pin,
        output_usd_per_mtok=pout,
        cache_read_frac=read_frac,
        min_cacheable_tokens=min_cacheable,
    )


MODELS: dict[str, ModelInfo] = {
    # Anthropic: minimum cacheable prefix 1024 tokens (Opus 4/4.1, Sonnet), 2048 (Haiku 3/3.5),
    # 4096 (Opus 4.5, Haiku 4.5). Opus 4.6 and Sonnet 4.6 are assumed to follow Opus 4.5 and
    # Sonnet 4.5 (not published separately when this table was written).
    "claude-opus-4-6": _anthropic(200_000, 5.0, 25.0, 4096),
    "claude-opus-4-5": _anthropic(200_000, 5.0, 25.0, 4096),
    "claude-opus-4-1": _anthropic(200_000, 15.0, 75.0, 1024),
    "claude-opus-4": _anthropic(200_000, 15.0, 75.0, 1024),
    "claude-sonnet-4-6": _anthropic(200_000, 3.0, 15.0, 1024),
    "claude-sonnet-4-5": _anthropic(200_000, 3.0, 15.0, 1024),
    "claude-sonnet-4": _anthropic(200_000, 3.0, 15.0, 1024),
    "claude-3-7-sonnet": _anthropic(200_000, 3.0, 15.0, 1024),
    "claude-haiku-4-5": _anthropic(200_000, 1.0, 5.0, 4096),
    "claude-3-5-haiku": _anthropic(200_000, 0.8, 4.0, 2048),
    "claude-3-haiku": _anthropic(200_000, 0.25, 1.25, 2048),
    # OpenAI: automatic prefix caching from 1024 tokens; cached input at 50 % (gpt-4o family),
    # 25 % (gpt-4.1 family), 10 % (gpt-5 family) of the input price.
    "gpt-4o": _automatic("openai", 128_000, 2.5, 10.0, 0.5, 1024),
    "gpt-4o-mini": _automatic("openai", 128_000, 0.15, 0.6, 0.5, 1024),
    "gpt-4.1": _automatic("openai", 1_047_576, 2.0, 8.0, 0.25, 1024),
    "gpt-5": _automatic("openai", 400_000, 1.25, 10.0, 0.1, 1024),
    # Google: implicit caching (prompts up to 200k tokens priced), cached input at 25 %.
    "gemini-2.5-pro": _automatic("google", 1_048_576, 1.25, 10.0, 0.25, 2048),
    # a window without published prices: unpriced
    "kimi-k3": ModelInfo(context_window_tokens=1_048_576),
}
"""Built-in models (see the module docstring); :func:`models_with` extends or overrides it."""


_DATED = re.compile(r"-(\d{8}|latest)$")


def base_model_id(model: str) -> str:
    """``model`` without a date or ``-latest`` suffix (``claude-haiku-4-5-20251001`` -> ``claude-haiku-4-5``)."""
    return _DATED.sub("", model)


def model_entry(model: str, models: Mapping[str, ModelInfo] | None = None) -> ModelInfo | None:
    """``model``'s entry, or ``None`` when unknown.

    An exact entry wins; else the entry the id extends by a date or ``-latest`` suffix
    (``claude-haiku-4-5-20251001`` -> ``claude-haiku-4-5``). Plain prefixes do not match:
    ``claude-opus-4-7`` is not priced as ``claude-opus-4``."""
    table = MODELS if models is None else models
    if model in table:
        return table[model]
    return table.get(base_model_id(model))


def price_of(model: str, models: Mapping[str, ModelInfo] | None = None) -> ModelInfo | None:
    """``model``'s entry when it is priced (input and output known), else ``None`` (unpriced)."""
    entry = model_entry(model, models)
    return entry if entry is not None and entry.priced else None


def batch_price_frac(model: str, models: Mapping[str, ModelInfo] | None = None) -> float:
    """The fraction of the list price a batched call of ``model`` costs: its entry's
    ``batch_price_frac``, else :data:`BATCH_PRICE_FRAC` (a model priced elsewhere, e.g. by a
    summarizer's own ``prices``, still goes through the provider's batch API)."""
    entry = model_entry(model, models)
    return entry.batch_price_frac if entry is not None else BATCH_PRICE_FRAC


def model_info(name: str, models: Mapping[str, ModelInfo] | None = None) -> ModelInfo:
    """``name``'s entry; an unknown name gets a did-you-mean :class:`ConfigError`."""
    table = MODELS if models is None else models
    entry = model_entry(name, table)
    if entry is None:
        raise ConfigError(did_you_mean(name, list(table), what="model"))
    return entry


_FIELDS = {f.name for f in dataclasses.fields(ModelInfo)}


def models_with(
    overrides: Mapping[str, Any] | None, *, base: Mapping[str, ModelInfo] | None = None, where: str = "models"
) -> dict[str, ModelInfo]:
    """``base`` (default :data:`MODELS`) with ``overrides`` applied: model name -> a table of
    :class:`ModelInfo` fields (or a bare integer: a window). A known model keeps the fields the
    override does not name; a new one starts from :class:`ModelInfo`'s defaults. Errors name
    ``where.<model>.<field>``."""
    out = dict(MODELS if base is None else base)
    for name, value in (overrides or {}).items():
        entry = {"context_window_tokens": value} if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}.{name}: expected a table of model fields or a window, got {value!r}")
        unknown = sorted(set(entry) - _FIELDS)
        if unknown:
            raise ConfigError(f"{where}.{name}: " + did_you_mean(unknown[0], _FIELDS, what="model field"))
        known = out.get(str(name))
        try:
            out[str(name)] = dataclasses.replace(known, **entry) if known is not None else ModelInfo(**entry)
        except ConfigError as e:
            raise ConfigError(f"{where}.{name}.{e}") from None
    return out


def load_models(
    path: str | os.PathLike[str] | None = None, *, base: Mapping[str, ModelInfo] | None = None
) -> dict[str, ModelInfo]:
    """:data:`MODELS` (or ``base``) updated from a TOML or JSON file (``.json`` -> JSON, else TOML)
    mapping model names to tables of :class:`ModelInfo` fields (``[models."my-model"]`` or
    top-level ``["my-model"]``); a bare integer is a window."""
    if path is None:
        return dict(MODELS if base is None else base)
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{p}: cannot read models file ({e.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: models file is not UTF-8 text; expected TOML or JSON") from None
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except ValueError as e:
        raise ConfigError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'TOML'} ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("models"), dict):
        data = data["models"]
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a table of models")
    return models_with(data, base=base, where=f"{p}: models")
