"""The shape of a synthetic session: :class:`SyntheticSpec` (validated at construction), the
named :data:`PRESETS`, and the checks of overrides and seeds the entry points share."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from h9eval.core.errors import ConfigError, did_you_mean

__all__ = ["SyntheticSpec", "PRESETS", "N_TURNS_MIN", "N_TURNS_MAX", "N_FACTS_MAX", "N_INTENT_CHANGES_MAX"]

# Size-class bands, kept clear of the thresholds so that a class never straddles one.
SMALL_MAX_BYTES = 3_700
MEDIUM_MIN_BYTES, MEDIUM_MAX_BYTES = 4_400, 9_700
LARGE_MIN_BYTES = 10_500

N_TURNS_MIN, N_TURNS_MAX = 10, 5_000
N_FACTS_MAX = 120
N_INTENT_CHANGES_MAX = 50


@dataclass(frozen=True, kw_only=True)
class SyntheticSpec:
    """Shape of one synthetic session; validated at construction (:class:`ConfigError`).

    Sizes (all of a tool result's ``content``, in UTF-8 bytes):

    * ``large_output_share``: share of tool results above 10,000 bytes from hook-handled tools
      (bash, grep, run_tests, list_dir, git_diff), i.e. offloaded by harness9 at tool time;
      default 0.05.
    * ``medium_output_share``: share between 4,000 and 10,000 bytes (offloaded at compaction
      time); default 0.15.
    * ``large_read_share``: share of ``read_file`` results above 10,000 bytes (hook-exempt, so
      offloaded only at compaction time); default 0.01.
    * the rest is small: lognormal with median ``small_output_median_bytes`` (default 600) and
      log-standard-deviation ``small_output_sigma`` (default 1.0), clamped to 3,700 bytes.
    * large sizes are 10,500 × Pareto(``large_output_pareto_alpha``, default 1.5) bytes, capped
      at ``max_output_bytes`` (default 120,000).

    Shares are realised as exact counts (rounded) over the session's tool results, so every
    seed of a preset has the same offload pressure.

    Narrative: ``n_facts`` planted facts (default 6, at most 120), of which
    ``superseded_share`` (default 0.25, rounded) later get a new value; ``user_fact_share``
    (default 0.5) of facts and new values are stated by the user, the rest appear in tool
    output. ``n_intent_changes`` user refinements of the goal, ``n_failed_attempts`` approaches
    that fail (two turns each: the attempt and the reflection), ``n_decisions``,
    ``n_milestones`` and ``n_plans`` (2-3 steps each). Limits: ``n_intent_changes`` at most
    min(50, n_turns), ``n_failed_attempts`` at most n_turns - 3, the other counts at most
    n_turns, and all events together (new values counted, failed attempts twice, plans three
    times) at most 3 × n_turns. ``n_turns`` is 10..5,000.

    Calls: ``multi_call_share`` (default 0.15) of turns make 2-3 parallel tool calls;
    ``cjk_share`` (default 0.3) of small documentation reads are Chinese/Japanese/Korean.
    """

    n_turns: int = 40
    large_output_share: float = 0.05
    medium_output_share: float = 0.15
    large_read_share: float = 0.01
    small_output_median_bytes: int = 600
    small_output_sigma: float = 1.0
    large_output_pareto_alpha: float = 1.5
    max_output_bytes: int = 120_000
    multi_call_share: float = 0.15
    cjk_share: float = 0.3
    n_facts: int = 6
    superseded_share: float = 0.25
    user_fact_share: float = 0.5
    n_intent_changes: int = 1
    n_failed_attempts: int = 2
    n_decisions: int = 2
    n_milestones: int = 3
    n_plans: int = 2

    def __post_init__(self) -> None:
        _int("n_turns", self.n_turns, N_TURNS_MIN, N_TURNS_MAX)
        for name in ("large_output_share", "medium_output_share", "large_read_share", "multi_call_share",
                     "cjk_share", "superseded_share", "user_fact_share"):  # fmt: skip
            _share(name, getattr(self, name))
        total = self.large_output_share + self.medium_output_share + self.large_read_share
        if total > 0.9:
            raise ConfigError(
                f"large_output_share + medium_output_share + large_read_share must be <= 0.9 "
                f"(most outputs must stay small); got {total:g}"
            )
        _int("small_output_median_bytes", self.small_output_median_bytes, 20, SMALL_MAX_BYTES)
        _num("small_output_sigma", self.small_output_sigma, 0.0, 3.0)
        _num("large_output_pareto_alpha", self.large_output_pareto_alpha, 0.5, 10.0)
        _int("max_output_bytes", self.max_output_bytes, 12_000, 10_000_000)
        n = self.n_turns
        _int("n_facts", self.n_facts, 0, min(N_FACTS_MAX, n), hint=f"at most min({N_FACTS_MAX}, n_turns)")
        _int(
            "n_intent_changes",
            self.n_intent_changes,
            0,
            min(N_INTENT_CHANGES_MAX, n),
            hint=f"at most min({N_INTENT_CHANGES_MAX}, n_turns)",
        )
        # Each failed attempt needs its own turn in 1..n_turns-3 (the reflection follows it).
        _int("n_failed_attempts", self.n_failed_attempts, 0, n - 3, hint="at most n_turns - 3")
        for name in ("n_decisions", "n_milestones", "n_plans"):
            _int(name, getattr(self, name), 0, n, hint="at most n_turns")
        events = (
            self.n_facts + round(self.n_facts * self.superseded_share) + self.n_intent_changes
            + 2 * self.n_failed_attempts + self.n_decisions + self.n_milestones + 3 * self.n_plans
        )  # fmt: skip
        # Events may share a turn, but beyond ~3 per turn the session stops reading like one.
        if events > 3 * n:
            raise ConfigError(
                f"narrative events (facts + new values + intent changes + 2*failed attempts + decisions "
                f"+ milestones + 3*plans = {events}) must be <= 3 * n_turns ({3 * n})"
            )


def _int(name: str, v: Any, lo: int, hi: int, *, hint: str = "") -> None:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ConfigError(f"{name} must be an integer; got {v!r} ({type(v).__name__})")
    if not lo <= v <= hi:
        extra = f" ({hint})" if hint else ""
        raise ConfigError(f"{name} must be between {lo} and {hi} inclusive{extra}; got {v}")


def _num(name: str, v: Any, lo: float, hi: float) -> None:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise ConfigError(f"{name} must be a finite number; got {v!r}")
    if not lo <= v <= hi:
        raise ConfigError(f"{name} must be between {lo:g} and {hi:g} inclusive; got {v!r}")


def _share(name: str, v: Any) -> None:
    _num(name, v, 0.0, 1.0)


PRESETS: Mapping[str, SyntheticSpec] = MappingProxyType(
    {
        "small": SyntheticSpec(n_turns=40),
        "medium": SyntheticSpec(
            n_turns=200,
            n_facts=20,
            n_intent_changes=2,
            n_failed_attempts=5,
            n_decisions=6,
            n_milestones=6,
            n_plans=5,
        ),  # fmt: skip
        "long": SyntheticSpec(
            n_turns=1_000,
            n_facts=40,
            n_intent_changes=3,
            n_failed_attempts=12,
            n_decisions=12,
            n_milestones=15,
            n_plans=12,
        ),  # fmt: skip
        "marathon": SyntheticSpec(
            n_turns=5_000,
            n_facts=120,
            n_intent_changes=6,
            n_failed_attempts=40,
            n_decisions=40,
            n_milestones=50,
            n_plans=40,
        ),  # fmt: skip
    }
)
"""Named specs: ``small`` (40 turns), ``medium`` (200 turns: many compactions at a window below
its peak, with planted facts throughout, in seconds), ``long`` (1,000 turns), ``marathon``
(5,000 turns)."""


def apply_overrides(base: SyntheticSpec, overrides: Mapping[str, Any]) -> SyntheticSpec:
    names = [f.name for f in dataclasses.fields(SyntheticSpec)]
    for k in overrides:
        if k not in names:
            raise ConfigError(did_you_mean(k, names, what="SyntheticSpec field"))
    return dataclasses.replace(base, **overrides) if overrides else base


def spec_overrides(spec: SyntheticSpec) -> dict[str, Any]:
    """Fields that differ from the defaults (what a custom spec 'overrides')."""
    default = SyntheticSpec()
    return {
        f.name: getattr(spec, f.name)
        for f in dataclasses.fields(spec)
        if getattr(spec, f.name) != getattr(default, f.name)
    }


def check_seed(seed: Any) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer; got {seed!r}")
    return seed
