"""Seeded synthetic long-horizon agent sessions with known ground truth (issue 3 §2).

``generate(preset="long", seed=7)`` returns a :class:`~h9eval.tasks.model.Task`: a system
prompt, the user's task statement (a realistic software task in a fictional repository), then
``n_turns`` turns. A *turn* is one assistant message (one model call) with its tool call(s),
each followed by its tool result (``Message(role="tool", tool_call_id=...)``); the last turn
is the agent's final summary without tool calls. User messages in between state facts and
refine the goal.

Ground truth planted along the way:

* **facts** (constraint, identifier, number, path, preference), stated by the user or found in
  a tool output, some later superseded by a new value (``superseded_at``/``superseded_by``);
* **intent changes** (user messages in the middle of the session);
* **anchors**: failed approaches with their error (``tried_solution``), decisions with a
  rationale (``key_decision``), plans (``next_step``, ``until_index`` when done), progress
  milestones (``execution_progress``), constraints and touched files (``artifact``).

Every fact's answer and every anchor/intent-change key term occurs verbatim in the message at
its ``message_index``.

Tool-output sizes follow harness9's two offload thresholds: a share of outputs is above
10,000 bytes and comes from tools the tool-time offload hook handles (not ``read_file``,
``write_file``, ``edit_file``), a share is between 4,000 and 10,000 bytes (offloaded only at
compaction time), a small share are large ``read_file`` outputs (hook-exempt, so they too wait
for compaction) and the rest are small, lognormal. Large sizes are Pareto-distributed.

Determinism: one ``random.Random(seed)`` drives everything (a second one for bulk text is
seeded from the first); no global randomness, clock or ``hash()`` of strings. The same preset,
seed and overrides give a byte-identical task (checked by a golden hash in the tests).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.messages import Message, ToolCall
from h9eval.tasks.synthetic import content as C
from h9eval.tasks.model import AnchorTruth, Fact, Intent, IntentChange, Task, TaskSource
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "GENERATOR_VERSION",
    "HOOK_OFFLOAD_THRESHOLD_BYTES",
    "COMPACTION_OFFLOAD_THRESHOLD_BYTES",
    "HOOK_EXEMPT_TOOLS",
    "SyntheticSpec",
    "PRESETS",
    "generate",
    "generate_from_spec",
    "generate_many",
]

GENERATOR_VERSION = "1"
"""Bumped whenever the output for a given preset and seed changes."""

HOOK_OFFLOAD_THRESHOLD_BYTES = 10_000
"""harness9's ``OffloadHook`` default: outputs of more bytes are offloaded at tool time."""
COMPACTION_OFFLOAD_THRESHOLD_BYTES = 4_000
"""harness9's ``CompactionOffloader`` threshold: larger tool results are offloaded in compaction."""
HOOK_EXEMPT_TOOLS = ("read_file", "write_file", "edit_file")
"""Tools whose output the offload hook never touches (reference §7.1)."""

# Size-class bands, kept clear of the thresholds so that a class never straddles one.
_SMALL_MAX_BYTES = 3_700
_MEDIUM_MIN_BYTES, _MEDIUM_MAX_BYTES = 4_400, 9_700
_LARGE_MIN_BYTES = 10_500

N_TURNS_MIN, N_TURNS_MAX = 10, 5_000
N_FACTS_MAX = 120
N_INTENT_CHANGES_MAX = 50


# ---------------------------------------------------------------------------------------------
# the spec
# ---------------------------------------------------------------------------------------------
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
        _int("small_output_median_bytes", self.small_output_median_bytes, 20, _SMALL_MAX_BYTES)
        _num("small_output_sigma", self.small_output_sigma, 0.0, 3.0)
        _num("large_output_pareto_alpha", self.large_output_pareto_alpha, 0.5, 10.0)
        _int("max_output_bytes", self.max_output_bytes, 12_000, 10_000_000)
        n = self.n_turns
        _int("n_facts", self.n_facts, 0, min(N_FACTS_MAX, n), hint=f"at most min({N_FACTS_MAX}, n_turns)")
        _int("n_intent_changes", self.n_intent_changes, 0, min(N_INTENT_CHANGES_MAX, n),
             hint=f"at most min({N_INTENT_CHANGES_MAX}, n_turns)")
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
        "long": SyntheticSpec(
            n_turns=1_000, n_facts=40, n_intent_changes=3, n_failed_attempts=12, n_decisions=12,
            n_milestones=15, n_plans=12,
        ),  # fmt: skip
        "marathon": SyntheticSpec(
            n_turns=5_000, n_facts=120, n_intent_changes=6, n_failed_attempts=40, n_decisions=40,
            n_milestones=50, n_plans=40,
        ),  # fmt: skip
    }
)
"""Named specs: ``small`` (40 turns), ``long`` (1,000 turns), ``marathon`` (5,000 turns)."""


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------
def generate(preset: str = "small", seed: int = 0, **overrides: Any) -> Task:
    """Generate one session from a named preset; ``overrides`` replace :class:`SyntheticSpec`
    fields (e.g. ``n_turns=200``). Same arguments → byte-identical task.

    Raises :class:`ConfigError` for an unknown preset or field (with a did-you-mean), an
    invalid value, or a seed that is not a non-negative integer.
    """
    if preset not in PRESETS:
        raise ConfigError(did_you_mean(str(preset), PRESETS, what="preset"))
    spec = _apply_overrides(PRESETS[preset], overrides)
    return _Builder(spec, _check_seed(seed), preset, dict(overrides)).build()


def generate_from_spec(spec: SyntheticSpec, seed: int = 0) -> Task:
    """Generate one session from an explicit spec (recorded as preset ``custom``)."""
    if not isinstance(spec, SyntheticSpec):
        raise ConfigError(f"spec must be a SyntheticSpec; got {type(spec).__name__}")
    return _Builder(spec, _check_seed(seed), "custom", _diff(spec)).build()


def generate_many(preset: str, seeds: Iterable[int], **overrides: Any) -> list[Task]:
    """``[generate(preset, s, **overrides) for s in seeds]``, validating the spec once."""
    if preset not in PRESETS:
        raise ConfigError(did_you_mean(str(preset), PRESETS, what="preset"))
    spec = _apply_overrides(PRESETS[preset], overrides)
    return [_Builder(spec, _check_seed(s), preset, dict(overrides)).build() for s in seeds]


def _apply_overrides(base: SyntheticSpec, overrides: Mapping[str, Any]) -> SyntheticSpec:
    names = [f.name for f in dataclasses.fields(SyntheticSpec)]
    for k in overrides:
        if k not in names:
            raise ConfigError(did_you_mean(k, names, what="SyntheticSpec field"))
    return dataclasses.replace(base, **overrides) if overrides else base


def _diff(spec: SyntheticSpec) -> dict[str, Any]:
    """Fields that differ from the defaults (what a custom spec 'overrides')."""
    default = SyntheticSpec()
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if getattr(spec, f.name) != getattr(default, f.name)}


def _check_seed(seed: Any) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer; got {seed!r}")
    return seed


# ---------------------------------------------------------------------------------------------
# fact slots: one question each; values can change later (supersession)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Slot:
    """A kind of planted fact. Templates use ``{e}`` (entity), ``{v}`` (answer), ``{old}``."""

    value: str  # which value maker draws the answer (see _slot_value)
    kind: str
    entities: str  # which world list supplies ``{e}`` ("" = none: the slot can be used once)
    question: str
    user: str
    found: str
    change_user: str
    change_found: str


_SLOTS: tuple[_Slot, ...] = (
    _Slot("port", "number", "services", "Which port does the {e} service listen on in the test environment?",
          "FYI: in the test environment the {e} service listens on port {v}.",
          "# {e}: listens on port {v} in the test environment (docker-compose.test.yml)",
          "Heads-up: the {e} service moved from port {old} to port {v}; use the new port from now on.",
          "WARN ops-notice: {e} port changed {old} -> {v} (effective immediately)"),
    _Slot("timeout", "number", "operations", "What timeout (in seconds) applies to {e}?",
          "The timeout for {e} must be {v} seconds, that's what the SLO doc says.",
          "# SLO: {e} timeout = {v}s (docs/slo.md)",
          "Update: the timeout for {e} is now {v} seconds, not {old}.",
          "# SLO (revised): {e} timeout = {v}s, previously {old}s"),
    _Slot("budget", "number", "services", "What is the monthly cloud budget in USD for the {e} service?",
          "Keep the {e} service under a monthly budget of ${v}; don't add anything that scales cost.",
          "budget.yaml: {e}: monthly_usd: {v}",
          "Finance approved more: the {e} budget is now ${v} per month (was ${old}).",
          "budget.yaml: {e}: monthly_usd: {v}  # raised from {old}"),
    _Slot("rate", "number", "services", "What rate limit (requests per minute) applies to calls to {e}?",
          "Calls to {e} are rate-limited to {v} requests per minute, so batch accordingly.",
          "X-RateLimit-Limit: {v} (per minute, upstream {e})",
          "The {e} rate limit was changed to {v} requests per minute (it used to be {old}).",
          "X-RateLimit-Limit: {v} (per minute, upstream {e}; was {old})"),
    _Slot("batch", "number", "nouns", "What is the maximum batch size for {e} records?",
          "Never send more than {v} {e} records in one batch.",
          "# limits: max {e} batch = {v} records (upstream rejects larger payloads)",
          "New limit from upstream: at most {v} {e} records per batch (down from {old}).",
          "# limits (updated): max {e} batch = {v} records, was {old}"),
    _Slot("ticket", "identifier", "topics", "What is the ticket id for {e}?",
          "Please reference {v} for {e} in commit messages.",
          "# Tracked in {v}: {e}",
          "{e} moved to a new ticket: {v} (the old {old} was closed as a duplicate).",
          "# Tracking moved: {e} is now {v} (was {old})"),
    _Slot("flag", "identifier", "features", "What is the name of the feature flag that guards {e}?",
          "Gate {e} behind the feature flag {v}.",
          "flags.yaml: {v}: false  # guards {e}",
          "Rename the flag for {e}: use {v} instead of {old}.",
          "flags.yaml: {v}: false  # guards {e} (renamed from {old})"),
    _Slot("function", "identifier", "features", "Which function implements {e}?",
          "The logic for {e} lives in {v}; start there.",
          "# {e} is implemented by {v}() (see the module docstring)",
          "Heads-up: {old} was renamed to {v} on main; it still implements {e}.",
          "# NOTE: {old} renamed to {v} ({e})"),
    _Slot("envvar", "identifier", "upstreams", "Which environment variable holds the URL of {e}?",
          "The URL of {e} comes from the environment variable {v}.",
          "{v}=http://localhost:8080  # URL of {e}",
          "Ops renamed the variable for {e}: it is {v} now, {old} is gone.",
          "{v}=http://localhost:8080  # URL of {e} ({old} is deprecated)"),
    _Slot("staging", "path", "services", "Where is the staging deployment config for {e}?",
          "The staging config for {e} is at {v}.",
          "# staging config for {e}: {v}",
          "We moved the configs: staging for {e} is now at {v}, not {old}.",
          "# staging config for {e} moved: {old} -> {v}"),
    _Slot("fixtures", "path", "nouns", "Where are the test fixtures for {e} data?",
          "Use the fixtures in {v} for {e} data, they mirror production.",
          "# fixtures for {e} data: {v}",
          "The {e} fixtures were regenerated into {v}; don't use {old} anymore.",
          "# fixtures for {e} data regenerated: {v} (was {old})"),
    _Slot("runbook", "path", "services", "Where is the runbook for the {e} service?",
          "The runbook for {e} is {v}, in case something pages.",
          "# runbook for {e}: {v}",
          "The {e} runbook moved to {v} (was {old}).",
          "# runbook for {e} moved to {v} (was {old})"),
    _Slot("dir", "constraint", "", "Which directory must never be modified?",
          "Constraint: never modify files under {v}; it is synced from upstream.",
          "CONTRIBUTING.md: Never modify files under {v}; it is synced from upstream.",
          "Correction: the protected directory is {v}, not {old}; {old} may be edited now.",
          "CONTRIBUTING.md (updated): never modify files under {v} ({old} is no longer protected)."),
    _Slot("langver", "constraint", "", "Which language version must the code stay on?",
          "Use {v} only; that's what production runs.",
          "ci.yml: runtime: {v}  # production runtime, do not change",
          "Production was upgraded: target {v} now instead of {old}.",
          "ci.yml: runtime: {v}  # upgraded from {old}"),
    _Slot("noimport", "constraint", "", "Which module must new code not import from?",
          "Don't import anything from {v} in new code; it is being deleted.",
          "# DO NOT import {v} in new code (scheduled for removal)",
          "Change: {old} is fine again, but nothing may import {v} anymore.",
          "# DO NOT import {v} in new code ({old} restriction lifted)"),
    _Slot("linelen", "constraint", "", "What is the maximum allowed line length in characters?",
          "Keep lines at most {v} characters; the linter in CI enforces it.",
          "lint config: max-line-length = {v}",
          "We relaxed the linter: lines may now be up to {v} characters (was {old}).",
          "lint config: max-line-length = {v}  # was {old}"),
    _Slot("branch", "constraint", "", "Which branch must never be pushed to directly?",
          "Never push directly to {v}; everything goes through a PR.",
          "branch protection: {v} (direct pushes rejected)",
          "The protected release branch is now {v} ({old} was retired).",
          "branch protection: {v} (direct pushes rejected; {old} retired)"),
    _Slot("license", "constraint", "", "Which license header must new files carry?",
          "Every new file needs the SPDX license header {v}.",
          "# SPDX-License-Identifier: {v}  (required on new files, see CONTRIBUTING.md)",
          "Legal says new files must use {v} now instead of {old}.",
          "# SPDX-License-Identifier: {v}  (required on new files; replaces {old})"),
    _Slot("testcmd", "preference", "", "Which test command does the user prefer?",
          "Please run tests with `{v}`; that output is easiest for me to read.",
          "Makefile: test: {v}  # preferred invocation",
          "Switch to `{v}` instead of `{old}` for running tests, please.",
          "Makefile: test: {v}  # preferred invocation (was {old})"),
    _Slot("formatter", "preference", "", "Which code formatter should be used?",
          "Format everything with {v} before committing.",
          "pre-commit: formatter = {v}",
          "We switched formatters: use {v}, not {old}.",
          "pre-commit: formatter = {v}  # replaced {old}"),
    _Slot("commit", "preference", "", "Which commit message style does the user want?",
          "Write commit messages in the {v} style.",
          "CONTRIBUTING.md: commit messages follow {v}.",
          "New convention: commit messages use {v} from now on instead of {old}.",
          "CONTRIBUTING.md (updated): commit messages follow {v} (no longer {old})."),
    _Slot("reviewer", "preference", "", "Who should review the pull request?",
          "Request a review from {v} when the PR is ready.",
          "CODEOWNERS: * {v}",
          "{old} is on leave; ask {v} for the review instead.",
          "CODEOWNERS: * {v}  # replaces {old}"),
    _Slot("reportlang", "preference", "", "In which language should progress reports be written?",
          "Please write your progress reports in {v}.",
          "team-notes.md: status reports are written in {v}.",
          "From now on please report progress in {v} instead of {old}.",
          "team-notes.md (updated): status reports are written in {v}, not {old}."),
)  # fmt: skip

_KIND_WEIGHTS = (("constraint", 0.2), ("identifier", 0.25), ("number", 0.25), ("path", 0.15), ("preference", 0.15))
_FEATURES = (
    "batched settlement", "the retry budget", "partial refunds", "webhook signing", "async export",
    "cursor pagination", "idempotency keys", "the new tax rules", "soft deletes", "dry-run mode",
    "per-tenant quotas", "request hedging", "currency rounding", "bulk import", "audit trails",
    "tenant isolation",
)  # fmt: skip
_LANG_NAMES = {"中文": ("Chinese", "Mandarin"), "日本語": ("Japanese",), "English": ("英語", "英文")}


def _slot_value(rng: random.Random, w: C.World, slot: _Slot, e: str) -> tuple[str, tuple[str, ...]]:
    """Draw an answer (and accepted variant spellings) for ``slot`` with entity ``e``."""
    k = slot.value
    if k == "port":
        v = str(rng.randint(20000, 39999))
        return v, (f"port {v}", f":{v}")
    if k == "timeout":
        v = str(rng.randint(7, 240))
        return v, (f"{v}s", f"{v} seconds")
    if k == "budget":
        n = rng.randint(12, 98) * 100 + rng.choice((0, 20, 40, 50, 60, 80))
        return str(n), (f"${n:,}", f"{n:,}", f"USD {n}")
    if k == "rate":
        v = str(rng.randint(12, 240) * 10)
        return v, (f"{v} rpm", f"{v}/min")
    if k == "batch":
        v = str(rng.randint(3, 99) * 50)
        return v, (f"{v} records",)
    if k == "ticket":
        v = f"{w.ticket_prefix}-{rng.randint(1000, 9999)}"
        return v, (v.lower(), v.replace("-", " "))
    if k == "flag":
        v = f"enable_{rng.choice(C.NOUNS)}_{rng.choice(('v2', 'batching', 'signing', 'rollout', 'fastpath'))}"
        return v, (v.upper(),)
    if k == "function":
        v = f"{rng.choice(C.VERBS)}_{rng.choice(C.NOUNS)}_{rng.choice(('window', 'plan', 'totals', 'limits', 'state'))}"
        if w.lang == "go":
            v = C.snake_to_camel(v)
        return v, (v + "()",)
    if k == "envvar":
        v = f"{w.pkg.upper()}_{e.split()[1].upper().replace('-', '_')}_{rng.choice(('URL', 'ENDPOINT', 'BASE_URL'))}"
        return v, ("$" + v,)
    if k == "staging":
        v = f"deploy/staging/{e}-{rng.choice(('values', 'config', 'overrides'))}.yaml"
        return v, ("./" + v,)
    if k == "fixtures":
        d = "tests/fixtures" if w.lang == "python" else "internal/testdata"
        v = f"{d}/{e}_{rng.randint(1, 99):02d}.json"
        return v, ("./" + v,)
    if k == "runbook":
        v = f"docs/runbooks/{e}-{rng.choice(('oncall', 'ops', 'incidents'))}.md"
        return v, ("./" + v,)
    if k == "dir":
        v = rng.choice(("vendor/", "third_party/", "gen/proto/", "migrations/applied/", "static/dist/"))
        return v, (v.rstrip("/"),)
    if k == "langver":
        if w.lang == "python":
            v = f"Python {rng.choice(('3.9', '3.10', '3.11', '3.12'))}"
            return v, (v.split()[1], "py" + v.split()[1].replace(".", ""))
        v = f"Go {rng.choice(('1.21', '1.22', '1.23'))}"
        return v, (v.split()[1], "go" + v.split()[1])
    if k == "noimport":
        v = rng.choice((f"{w.pkg}.legacy", f"{w.pkg}.compat.v1", f"{w.pkg}._internal.old_{rng.choice(C.NOUNS)}"))
        if w.lang == "go":
            v = v.replace(".", "/").replace(f"{w.pkg}/", "internal/")
        return v, ()
    if k == "linelen":
        v = rng.choice(("88", "99", "100", "110", "120"))
        return v, (f"{v} characters", f"{v} chars")
    if k == "branch":
        v = f"release/{rng.randint(1, 6)}.{rng.randint(0, 12)}"
        return v, ()
    if k == "license":
        v = rng.choice(("Apache-2.0", "MIT", "BSD-3-Clause", "MPL-2.0"))
        return v, (v.replace("-", " "),)
    if k == "testcmd":
        if w.lang == "python":
            v = rng.choice(("pytest -x -q", "pytest -x --ff", "pytest -q -n auto", "pytest --lf -x"))
        else:
            v = rng.choice(("go test -count=1 ./...", "go test -race ./...", "go test -short ./..."))
        return v, ()
    if k == "formatter":
        v = rng.choice(("ruff format", "black", "yapf") if w.lang == "python" else ("gofumpt", "gofmt", "goimports"))
        return v, ()
    if k == "commit":
        v = rng.choice(("Conventional Commits", "gitmoji", "Jira-prefixed subjects"))
        return v, (v.lower(),)
    if k == "reviewer":
        v = "@" + rng.choice(C.PEOPLE)
        return v, (v[1:],)
    if k == "reportlang":
        v = rng.choice(tuple(_LANG_NAMES))
        return v, _LANG_NAMES[v]
    raise AssertionError(f"no value maker for {k!r}")  # pragma: no cover


def _entities(w: C.World, which: str) -> tuple[str, ...]:
    return {
        "": ("",),
        "services": tuple(w.services),
        "operations": C.OPERATIONS,
        "nouns": C.NOUNS,
        "topics": C.TOPICS,
        "features": _FEATURES,
        "upstreams": tuple(f"the {s} upstream" for s in w.services),
    }[which]


# ---------------------------------------------------------------------------------------------
# narrative vocabularies
# ---------------------------------------------------------------------------------------------
_PY_APPROACHES = (
    ("wrapping {fn} in functools.lru_cache", "lru_cache", "TypeError", "unhashable type: 'dict'"),
    ("pinning {dep} to an older release", "{dep}", "ImportError", "cannot import name '{cls}' from '{dep}'"),
    ("making {fn} a coroutine", "coroutine", "RuntimeError", "This event loop is already running"),
    ("switching the {noun} fixture to scope='session'", "scope='session'", "ScopeMismatch",
     "You tried to access the function scoped fixture monkeypatch with a session scoped request object"),
    ("replacing the settings dict in {mod} with a frozen dataclass", "frozen dataclass", "FrozenInstanceError", "cannot assign to field '{noun}'"),
    ("monkeypatching time.sleep in the test", "time.sleep", "AssertionError", "assert {x} == {y}"),
    ("casting the {noun} amounts to Decimal", "Decimal", "InvalidOperation", "[<class 'decimal.ConversionSyntax'>]"),
    ("caching the {noun} client at module level", "module level", "RuntimeError", "Event loop is closed"),
    ("clamping the delay inside {fn} with max() instead of min()", "max()", "AssertionError", "assert {x} <= {y}"),
)  # fmt: skip
_GO_APPROACHES = (
    ("switching {fn} to a sync.Map", "sync.Map", "panic", "interface conversion: interface {{}} is nil, not *{pkg}.{cls}"),
    ("adding a context.WithTimeout around {fn}", "context.WithTimeout", "timeout", "{op}: context deadline exceeded"),
    ("buffering the results channel in {fn}", "results channel", "fatal error", "all goroutines are asleep - deadlock!"),
    ("reusing one http.Client across {fn} calls", "http.Client", "race detected", "WARNING: DATA RACE in {fn}"),
    ("pinning {dep} to an older version", "{dep}", "build failed", "undefined: {cls}"),
    ("replacing the mutex in {cls} with an atomic.Int64", "atomic.Int64", "assertion failed", "expected {y}, got {x}"),
    ("caching the {noun} lookups in a package-level map", "package-level map", "fatal error", "concurrent map writes"),
)  # fmt: skip
_DECISIONS = (
    ("keep the fix inside {mod} rather than changing its callers", "because {n} call sites in other services depend on the current signature", "inside {mod}"),
    ("use {dep} instead of a hand-written helper", "because it is already a dependency and handles the edge cases", "{dep}"),
    ("store the cap in {const} instead of hard-coding it", "so ops can tune it per environment", "{const}"),
    ("write the regression test {newtest} before touching the implementation", "so the failure is pinned down first", "{newtest}"),
    ("return a typed {cls}Error instead of a bare exception", "so callers can tell timeouts from bad input", "{cls}Error"),
    ("keep {fn} as a deprecated alias for one release", "because downstream jobs still call it", "deprecated alias"),
    ("process {noun} records in chunks of {n}", "to keep memory bounded on large tenants", "chunks of {n}"),
    ("make the {noun} cache copy-on-write instead of locking it", "because reads outnumber writes a hundred to one", "copy-on-write"),
    ("measure deadlines with a monotonic clock", "because wall-clock jumps on CI explain the flakiness", "monotonic clock"),
)  # fmt: skip
_STEPS = (
    ("add {newtest} to {testfile}", "{newtest}"),
    ("update CHANGELOG.md under {ver}", "CHANGELOG.md"),
    ("remove the debug logging from {src}", "debug logging"),
    ("bump the version to {ver}", "{ver}"),
    ('open a draft PR titled "{title}"', "{title}"),
    ("double-check {const} in {cfg}", "{const}"),
    ("re-run the full suite with `{testcmd}`", "full suite"),
    ("document the new behaviour in {doc}", "{doc}"),
)  # fmt: skip
_INTENT_CHANGES = (
    ("also cover the async client in {newsrc}", "{newsrc}"),
    ("add a regression test named {newtest}", "{newtest}"),
    ("keep backwards compatibility with the v{n} config format", "v{n} config format"),
    ("leave {src} alone, the platform team is rewriting it", "{src}"),
    ("expose the cap as the environment variable {env}", "{env}"),
    ("target the {branch} branch instead of main", "{branch}"),
    ("emit a structured warning named {event} whenever the cap is hit", "{event}"),
)  # fmt: skip


@dataclass
class _Turn:
    """What the plan puts into one turn before rendering."""

    tools: list[str] = field(default_factory=list)
    user: list[str] = field(default_factory=list)  # sentences of a user message before the turn
    say: list[str] = field(default_factory=list)  # sentences of the assistant text before the leads
    extra: list[str] = field(default_factory=list)  # lines planted in the first tool result
    failure: C.Failure | None = None  # the run_tests call of a failed attempt
    edit_desc: str | None = None


class _Fields(dict):  # type: ignore[type-arg]
    """Lazy template fields: ``factories[name]()`` runs on first lookup, then is cached."""

    def __init__(self, factories: Mapping[str, Any]) -> None:
        super().__init__()
        self._factories = factories

    def __missing__(self, key: str) -> Any:
        v = self[key] = self._factories[key]()
        return v


@dataclass
class _Pending:
    """A ground-truth item whose message index is known only after assembly."""

    turn: int
    where: str  # "user", "assistant" or "result" (first tool result of the turn)
    make: Any  # callable(index) -> the record (or a mutable dict for facts)


# ---------------------------------------------------------------------------------------------
# the builder
# ---------------------------------------------------------------------------------------------
class _Builder:
    def __init__(self, spec: SyntheticSpec, seed: int, preset: str, overrides: dict[str, Any]) -> None:
        self.spec = spec
        self.seed = seed
        self.preset = preset
        self.overrides = overrides
        self.rng = random.Random(seed)
        # Bulk text has its own stream so that reshaping a template does not move the narrative.
        self.crng = random.Random(self.rng.getrandbits(64))
        self.w = C.make_world(self.crng, pool_blocks=min(400, 40 + spec.n_turns // 10))
        self.T = spec.n_turns
        self.turns = [_Turn() for _ in range(self.T)]
        self.pending: list[_Pending] = []
        self.facts: list[dict[str, Any]] = []
        self.used: dict[str, None] = {}  # answers, questions and generated names already in use

    # -- helpers --------------------------------------------------------------------------
    def _fresh(self, make: Any, tries: int = 50) -> str:
        """A generated name not used before in this session (keeps probes unambiguous); when the
        vocabulary runs out, a counter is put before the extension (``client_2.py``)."""
        for _ in range(tries):
            v = make()
            if v not in self.used:
                self.used[v] = None
                return v
        base = make()
        head, dot, ext = base.rpartition(".") if "." in base.rsplit("/", 1)[-1] else (base, "", "")
        k = 2
        while (v := f"{head}_{k}{dot}{ext}") in self.used:
            k += 1
        self.used[v] = None
        return v

    def _fmt(self) -> _Fields:
        """Template fields drawn from the world; each is drawn on first use (``format_map``), so
        unique names are only reserved when a template actually uses them."""
        r, w = self.rng, self.w
        is_py = w.lang == "python"
        return _Fields({
            "fn": lambda: r.choice(w.functions), "mod": lambda: r.choice(w.src_files), "src": lambda: r.choice(w.src_files),
            "noun": lambda: r.choice(C.NOUNS), "dep": lambda: r.choice(w.deps)[0], "cls": lambda: r.choice(w.classes),
            "const": lambda: r.choice(w.consts), "n": lambda: r.randint(3, 64), "x": lambda: r.randint(31, 999),
            "y": lambda: r.randint(1, 30), "pkg": lambda: w.pkg, "op": lambda: r.choice(C.OPERATIONS),
            "testfile": lambda: r.choice(w.test_files), "cfg": lambda: r.choice(w.config_files),
            "doc": lambda: r.choice(w.doc_files), "testcmd": lambda: w.test_cmd,
            "ver": lambda: self._fresh(lambda: f"0.{r.randint(2, 40)}.{r.randint(0, 9)}"),
            "newtest": lambda: self._fresh(lambda: (
                f"test_{r.choice(w.py_functions)}_{r.choice(('regression', 'cap', 'empty_input', 'unicode', 'overflow'))}" if is_py
                else f"Test{r.choice(w.go_functions)}{r.choice(('Regression', 'Cap', 'EmptyInput', 'Overflow'))}")),
            "newsrc": lambda: self._fresh(lambda: (
                f"src/{w.pkg}/{r.choice(('aio', 'v2', 'streaming', 'compat'))}/{r.choice(C.MODULES)}.py" if is_py
                else f"internal/{r.choice(('async', 'v2', 'stream'))}{r.choice(C.MODULES)}/client.go")),
            "env": lambda: self._fresh(lambda: f"{w.pkg.upper()}_{r.choice(C.NOUNS).upper()}_{r.choice(('CAP', 'MAX', 'LIMIT'))}"),
            "branch": lambda: self._fresh(lambda: f"hotfix/{r.randint(1, 9)}.{r.randint(0, 20)}"),
            "event": lambda: self._fresh(lambda: f"{r.choice(C.NOUNS)}_{r.choice(('cap_hit', 'limit_reached', 'budget_exhausted'))}"),
            "title": lambda: self._fresh(lambda: f"{w.ticket_prefix}-{r.randint(1000, 9999)}: {r.choice(('clamp', 'fix', 'harden'))} {r.choice(C.NOUNS)} {r.choice(('handling', 'limits', 'retries'))}"),
        })  # fmt: skip

    def _turn_in(self, lo: int, hi: int) -> int:
        """A turn in [lo, hi] clipped to the usable range 1..T-2 (the last turn is the summary)."""
        lo = max(1, min(lo, self.T - 2))
        hi = max(lo, min(hi, self.T - 2))
        return self.rng.randint(lo, hi)

    def _at(self, turn: int, where: str, make: Any) -> None:
        self.pending.append(_Pending(turn, where, make))

    # -- planning -------------------------------------------------------------------------
    def _plan_statement(self) -> None:
        r, w = self.rng, self.w
        f = self._fmt()
        if w.lang == "python":
            test = r.choice(w.tests)
            tfile = test.split("::")[0]
            et, em = r.choice(C.PY_ERRORS)
        else:
            test = r.choice(w.tests)
            tfile = r.choice(w.test_files)
            et, em = r.choice(C.GO_ERRORS)
        em = em.format(x=f["x"], y=f["y"], noun=f["noun"], fn=f["fn"], kw="timeout", op=f["op"],
                       hex=f"{r.getrandbits(32):08x}", hex2=f"{r.getrandbits(32):08x}")  # fmt: skip
        self.target = C.Failure(test=test, file=tfile, err_type=et, err_msg=em)
        mod, fn, repo = f["mod"], f["fn"], f"{w.org}/{w.repo}"
        ticket = self._fresh(lambda: f"{w.ticket_prefix}-{r.randint(1000, 9999)}")
        sha = f"{r.getrandbits(28):07x}"
        kind = r.randrange(3)
        if kind == 0:
            self.statement = (
                f"In {repo}, the test {test} has been failing since commit {sha} with `{et}: {em}`. "
                f"Please find the root cause (probably in {mod}, around {fn}) and fix it. Don't skip or xfail "
                f"the test, and keep the public API of {mod} unchanged. Ticket: {ticket}."
            )
            self.goal = f"fix the failing test {test} in {repo}"
            self.key_terms = (repo, test, mod)
        elif kind == 1:
            self.statement = (
                f"In {repo}, add a configurable cap to {fn} in {mod}: the computed delay must never exceed "
                f"{f['const']}. Add tests to {tfile} (the new test {test} currently fails with `{et}: {em}`) "
                f"and make sure `{w.test_cmd}` passes. Ticket: {ticket}."
            )
            self.goal = f"add a configurable cap to {fn} in {mod}"
            self.key_terms = (repo, fn, mod)
        else:
            self.statement = (
                f"The CI job for {repo} is flaky: {test} fails in roughly one of five runs with `{et}: {em}`. "
                f"Make it deterministic without adding sleeps or retries to the test itself; the race is most "
                f"likely in {mod}. Ticket: {ticket}."
            )
            self.goal = f"make the flaky test {test} in {repo} deterministic"
            self.key_terms = (repo, test, mod)
        # Before this turn the target test still fails; from it on it passes (the fix landed).
        self.fix_turn = max(2, round(self.T * 0.75))

    def _plan_tools(self) -> None:
        r, s = self.rng, self.spec
        names = ("read_file", "bash", "grep", "run_tests", "edit_file", "list_dir", "write_file", "git_diff")
        weights = (0.25, 0.17, 0.12, 0.15, 0.15, 0.06, 0.03, 0.07)
        for t in range(self.T - 1):
            k = 1
            if r.random() < s.multi_call_share:
                k = r.choice((2, 2, 3))
            self.turns[t].tools = r.choices(names, weights, k=k)

    def _plan_facts(self) -> None:
        r, s, w = self.rng, self.spec, self.w
        kinds = [k for k, _ in _KIND_WEIGHTS]
        kw = [p for _, p in _KIND_WEIGHTS]
        by_kind = {k: [sl for sl in _SLOTS if sl.kind == k] for k in kinds}
        n_sup = round(s.n_facts * s.superseded_share)
        sup = r.sample(range(s.n_facts), n_sup) if s.n_facts else []
        last_intro = max(1, int((self.T - 2) * 0.85))
        for i in range(s.n_facts):
            kind = r.choices(kinds, kw)[0]
            for _ in range(50):
                slot = r.choice(by_kind[kind])
                e = r.choice(_entities(w, slot.entities))
                q = slot.question.format(e=e)
                if q not in self.used:
                    break
                kind = r.choices(kinds, kw)[0]  # this slot may be used up: maybe another kind
            else:  # nearly full: take the first free (slot, entity) in a fixed order
                slot, e, q = next(
                    (sl, e, sl.question.format(e=e)) for sl in _SLOTS for e in _entities(w, sl.entities)
                    if sl.question.format(e=e) not in self.used
                )  # fmt: skip
            self.used[q] = None
            ans, variants = self._value(slot, e)
            superseded = i in sup and self.T - 2 >= 2
            t1 = self._turn_in(1, min(last_intro, self.T - 3) if superseded else last_intro)
            f1 = self._plant(slot, e, q, ans, variants, t1, None)
            if superseded:
                new, nvar = self._value(slot, e)
                t2 = self._turn_in(t1 + 1, self.T - 2)
                f2 = self._plant(slot, e, q, new, nvar, t2, ans)
                f1["superseded_by"] = f2

    def _value(self, slot: _Slot, e: str) -> tuple[str, tuple[str, ...]]:
        for _ in range(200):
            v, variants = _slot_value(self.rng, self.w, slot, e)
            if v not in self.used:
                self.used[v] = None
                return v, tuple(x for x in dict.fromkeys(variants) if x != v)
        raise AssertionError("values exhausted")  # pragma: no cover

    def _plant(self, slot: _Slot, e: str, q: str, ans: str, variants: tuple[str, ...], turn: int, old: str | None) -> dict[str, Any]:
        by_user = self.rng.random() < self.spec.user_fact_share
        tpl = (slot.user if old is None else slot.change_user) if by_user else (slot.found if old is None else slot.change_found)
        text = tpl.format(e=e, v=ans, old=old)
        fact: dict[str, Any] = dict(kind=slot.kind, question=q, answer=ans, variants=variants, text=text, index=None)
        if by_user:
            self.turns[turn].user.append(text)
        else:
            self.turns[turn].extra.append(text)
        self.facts.append(fact)
        self._at(turn, "user" if by_user else "result", lambda i, fact=fact: fact.__setitem__("index", i))
        return fact

    def _plan_intent(self) -> None:
        r, s = self.rng, self.spec
        n = s.n_intent_changes
        self.intent_changes: list[dict[str, Any]] = []
        statement = self.goal
        picks = [_INTENT_CHANGES[j % len(_INTENT_CHANGES)] for j in r.sample(range(len(_INTENT_CHANGES)), min(n, len(_INTENT_CHANGES)))]
        while len(picks) < n:
            picks.append(r.choice(_INTENT_CHANGES))
        for j, (tpl, key) in enumerate(picks):
            lo = int(self.T * (0.15 + 0.7 * j / n))
            hi = int(self.T * (0.15 + 0.7 * (j + 1) / n)) - 1
            t = self._turn_in(lo, hi)
            f = self._fmt()
            clause, term = tpl.format_map(f), key.format_map(f)
            statement = f"{statement}; also {clause}"
            msg = f"Change of plan: {clause}. To restate the goal: {statement}."
            self.turns[t].user.append(msg)
            self.turns[t].say.append(f"Understood, I'll {clause} as well.")
            rec = dict(statement=statement, key_terms=(term,))
            self.intent_changes.append(rec)
            self._at(t, "user", lambda i, rec=rec: rec.__setitem__("index", i))

    def _plan_failures(self) -> None:
        r, s, w = self.rng, self.spec, self.w
        approaches = _PY_APPROACHES if w.lang == "python" else _GO_APPROACHES
        n = s.n_failed_attempts
        if not n:
            return
        try_turns = sorted(r.sample(range(1, self.T - 2), n))
        order = r.sample(range(len(approaches)), min(n, len(approaches)))
        while len(order) < n:
            order.append(r.randrange(len(approaches)))
        for t, j in zip(try_turns, order):
            tpl, key, et, em = approaches[j]
            f = self._fmt()
            approach, term = tpl.format_map(f), key.format_map(f)
            msg = em.format_map(f)
            tr = self.turns[t]
            tr.tools = ["edit_file", "run_tests"]
            tr.say.append(f"Let me try {approach}.")
            tr.edit_desc = approach
            test = self.target
            tr.failure = C.Failure(test=test.test, file=test.file, err_type=et, err_msg=msg)
            self.turns[t + 1].say.append(f"That didn't work: {approach} fails with `{et}: {msg}`. Reverting it and trying something else.")
            text = f"Tried {approach}; it failed with {et}: {msg}"
            self._at(t + 1, "assistant", lambda i, text=text, term=term, et=et: AnchorTruth(
                kind="tried_solution", message_index=i, text=text, key_terms=(term, et)))  # fmt: skip

    def _plan_decisions(self) -> None:
        r = self.rng
        for j in range(self.spec.n_decisions):
            tpl, why, key = _DECISIONS[r.randrange(len(_DECISIONS))]
            f = self._fmt()
            choice, rationale, term = tpl.format_map(f), why.format_map(f), key.format_map(f)
            t = self._turn_in(1, self.T - 2)
            self.turns[t].say.append(f"Decision: {choice}, {rationale}.")
            text = f"{choice}, {rationale}"
            self._at(t, "assistant", lambda i, text=text, term=term: AnchorTruth(
                kind="key_decision", message_index=i, text=text, key_terms=(term,)))  # fmt: skip

    def _plan_milestones(self) -> None:
        r, w = self.rng, self.w
        n = self.spec.n_milestones
        turns = sorted(self._turn_in(1, self.T - 2) for _ in range(n))
        total = r.randint(30, 240)
        passed = r.randint(1, total // 3)
        for t in turns:
            passed = min(total, passed + r.randint(1, max(1, total // max(1, n))))
            f = self._fmt()
            kind = r.randrange(3)
            if kind == 0:
                text, term = f"{passed}/{total} tests in {f['testfile']} pass now", f"{passed}/{total}"
            elif kind == 1:
                pct = r.randint(55, 97)
                text, term = f"coverage of {f['mod']} is up to {pct}%", f"{pct}%"
            else:
                script = self._fresh(lambda: f"scripts/repro_{r.choice(C.NOUNS)}_{r.randint(2, 99)}.{'py' if w.lang == 'python' else 'go'}")
                text, term = f"the reproduction script {script} now exits 0", script
            self.turns[t].say.append(f"Progress: {text}.")
            self._at(t, "assistant", lambda i, text=text, term=term: AnchorTruth(
                kind="execution_progress", message_index=i, text=text, key_terms=(term,)))  # fmt: skip

    def _plan_plans(self) -> None:
        r = self.rng
        n = self.spec.n_plans
        gap = max(2, self.T // max(1, 3 * n))
        for _ in range(n):
            tp = self._turn_in(1, self.T - 3)
            k = r.choice((2, 3))
            f = self._fmt()
            steps = [(tpl.format_map(f), key.format_map(f)) for tpl, key in r.sample(_STEPS, k)]
            self.turns[tp].say.append("Next steps: " + "; ".join(f"{j + 1}) {s}" for j, (s, _) in enumerate(steps)) + ".")
            t = tp
            for s, term in steps:
                t += r.randint(1, gap)
                done = t if t <= self.T - 2 else None  # past the end: the step stays open
                if done is not None:
                    self.turns[done].say.append(f"Done with the step: {s}.")
                rec = dict(text=s, term=term, done=done, index=None, until=None)
                self._at(tp, "assistant", lambda i, rec=rec: rec.__setitem__("index", i))
                if done is not None:
                    self._at(done, "assistant", lambda i, rec=rec: rec.__setitem__("until", i))
                self.plan_steps.append(rec)

    # -- sizes ----------------------------------------------------------------------------
    def _assign_sizes(self) -> dict[tuple[int, int], tuple[str, int]]:
        """Size class and target bytes of every tool result, as exact (rounded) counts."""
        r, s = self.rng, self.spec
        results = [(t, k, tool) for t, tr in enumerate(self.turns) for k, tool in enumerate(tr.tools)]
        n = len(results)
        # A planted fact must stay readable: never in an output the hook replaces by a preview.
        hosts_fact = {(t, 0) for t, tr in enumerate(self.turns) if tr.extra}
        taken: dict[int, str] = {}

        def pick(cls: str, share: float, ok: Any) -> None:
            pool = [i for i, (t, k, tool) in enumerate(results) if i not in taken and ok(t, k, tool)]
            for i in r.sample(pool, min(len(pool), round(share * n))):
                taken[i] = cls

        pick(C.LARGE, s.large_output_share, lambda t, k, tool: tool not in HOOK_EXEMPT_TOOLS and (t, k) not in hosts_fact)
        pick("large_read", s.large_read_share, lambda t, k, tool: tool == "read_file" and (t, k) not in hosts_fact)
        pick(C.MEDIUM, s.medium_output_share, lambda t, k, tool: C.MEDIUM in C.ACTIONS[tool])
        out: dict[tuple[int, int], tuple[str, int]] = {}
        log_lo, log_hi = math.log(_MEDIUM_MIN_BYTES), math.log(_MEDIUM_MAX_BYTES)
        mu = math.log(s.small_output_median_bytes)
        for i, (t, k, tool) in enumerate(results):
            cls = taken.get(i, C.SMALL)
            if cls in (C.LARGE, "large_read"):
                size = min(s.max_output_bytes, int(_LARGE_MIN_BYTES * r.paretovariate(s.large_output_pareto_alpha)))
            elif cls == C.MEDIUM:
                size = int(math.exp(r.uniform(log_lo, log_hi)))
            else:
                size = min(_SMALL_MAX_BYTES, max(40, int(r.lognormvariate(mu, s.small_output_sigma))))
            out[(t, k)] = (cls, size)
        return out

    # -- assembly -------------------------------------------------------------------------
    def build(self) -> Task:
        w, s = self.w, self.spec
        self.plan_steps: list[dict[str, Any]] = []
        self._plan_statement()
        self._plan_tools()
        self._plan_facts()
        self._plan_intent()
        self._plan_failures()
        self._plan_decisions()
        self._plan_milestones()
        self._plan_plans()
        sizes = self._assign_sizes()

        msgs: list[Message] = [
            Message("system", C.SYSTEM_PROMPT.format(org=w.org, repo=w.repo, root=w.root, test_cmd=w.test_cmd,
                                                     lang_name="Python" if w.lang == "python" else "Go")),  # fmt: skip
            Message("user", self.statement),
        ]
        where: dict[tuple[int, str], int] = {}
        artifacts: list[AnchorTruth] = []
        touched: dict[str, None] = {}
        sizes_out: list[tuple[str, int]] = []  # (tool, content bytes) per tool result
        crng = self.crng
        for t, tr in enumerate(self.turns):
            if tr.user:
                where[(t, "user")] = len(msgs)
                msgs.append(Message("user", " ".join(tr.user)))
            if t == self.T - 1:
                where[(t, "assistant")] = len(msgs)
                msgs.append(Message("assistant", self._final_text(touched, tr.say)))
                break
            rendered: list[C.Rendered] = []
            for k, tool in enumerate(tr.tools):
                cls, size = sizes[(t, k)]
                failure = None
                passing = False
                if tool == "run_tests":
                    if tr.failure is not None:
                        failure = tr.failure
                    else:
                        failure, passing = self.target, t >= self.fix_turn
                edit_path = None
                if tool == "edit_file" and tr.edit_desc is not None:
                    edit_path = self.target_src
                cjk = cls == C.SMALL and tool == "read_file" and crng.random() < s.cjk_share
                rendered.append(C.render(
                    crng, w, tool, cls, size, cjk=cjk, extra=tr.extra if k == 0 else (), failure=failure,
                    passing=passing, edit_path=edit_path, edit_desc=tr.edit_desc if tool == "edit_file" else None,
                ))  # fmt: skip
            text = " ".join([*tr.say, *(x.lead for x in rendered)])
            calls = tuple(
                ToolCall(f"toolu_{t:05d}_{k}", tool, json.dumps(x.args, separators=(",", ":"), ensure_ascii=False))
                for k, (tool, x) in enumerate(zip(tr.tools, rendered))
            )
            where[(t, "assistant")] = ai = len(msgs)
            msgs.append(Message("assistant", text, calls))
            for k, (call, x) in enumerate(zip(calls, rendered)):
                if k == 0:
                    where[(t, "result")] = len(msgs)
                msgs.append(Message("tool", x.output, (), call.id, x.is_error))
                sizes_out.append((call.name, len(x.output.encode("utf-8"))))
                if x.path is not None and x.path not in touched:
                    touched[x.path] = None
                    verb = "created" if call.name == "write_file" else "modified"
                    artifacts.append(AnchorTruth(kind="artifact", message_index=ai, text=f"{verb} {x.path}", key_terms=(x.path,)))

        # Resolve the planned ground truth to message indices.
        anchors: list[AnchorTruth] = list(artifacts)
        for p in self.pending:
            out = p.make(where[(p.turn, p.where)])
            if isinstance(out, AnchorTruth):
                anchors.append(out)
        for rec in self.plan_steps:
            anchors.append(AnchorTruth(kind="next_step", message_index=rec["index"], text=rec["text"], key_terms=(rec["term"],), until_index=rec["until"]))
        facts = self._facts_and_constraints(anchors)
        anchors.sort(key=lambda a: (a.message_index, a.kind, a.text))
        changes = tuple(
            IntentChange(message_index=c["index"], statement=c["statement"], key_terms=c["key_terms"])
            for c in sorted(self.intent_changes, key=lambda c: c["index"])
        )
        intent = Intent(statement=self.statement, key_terms=self.key_terms, changes=changes)
        return Task(
            task_id=self._task_id(),
            source=TaskSource(kind="synthetic", preset=self.preset, seed=self.seed),
            messages=tuple(msgs),
            tools=tuple(json.loads(json.dumps(C.TOOL_SCHEMAS))),  # a private copy: the dicts are mutable
            intent=intent,
            anchors=tuple(anchors),
            facts=facts,
            metadata=self._metadata(msgs, sizes_out, facts, anchors, changes),
        )

    @property
    def target_src(self) -> str:
        """The source file failed attempts edit (the module named in the statement)."""
        return self.key_terms[2]

    def _final_text(self, touched: Mapping[str, None], say: list[str]) -> str:
        files = ", ".join(touched) if touched else "no files"
        return " ".join([*say, f"Summary: the task is finished ({self.goal}). Files touched: {files}. Verified with `{self.w.test_cmd}`; the suite passes."])

    def _facts_and_constraints(self, anchors: list[AnchorTruth]) -> tuple[Fact, ...]:
        order = sorted(range(len(self.facts)), key=lambda j: (self.facts[j]["index"], j))
        ids = {id(self.facts[j]): f"F{n + 1:03d}" for n, j in enumerate(order)}
        out = []
        for j in order:
            f = self.facts[j]
            nxt = f.get("superseded_by")
            fact = Fact(
                fact_id=ids[id(f)], question=f["question"], answer=f["answer"], kind=f["kind"],
                message_index=f["index"], variants=tuple(f["variants"]),
                superseded_at=nxt["index"] if nxt else None, superseded_by=ids[id(nxt)] if nxt else None,
            )  # fmt: skip
            out.append(fact)
            if f["kind"] == "constraint":
                anchors.append(AnchorTruth(kind="constraint", message_index=f["index"], text=f["text"],
                                           key_terms=(f["answer"],), until_index=fact.superseded_at))  # fmt: skip
        return tuple(out)

    def _task_id(self) -> str:
        tid = f"synthetic-{self.preset}-{self.seed}"
        if self.overrides:
            h = hashlib.sha256(json.dumps(self.overrides, sort_keys=True).encode()).hexdigest()[:8]
            tid += f"-{h}"
        return tid

    def _metadata(self, msgs: list[Message], sizes_out: list[tuple[str, int]], facts: tuple[Fact, ...],
                  anchors: list[AnchorTruth], changes: tuple[IntentChange, ...]) -> dict[str, Any]:  # fmt: skip
        hook = sum(1 for tool, b in sizes_out if b > HOOK_OFFLOAD_THRESHOLD_BYTES and tool not in HOOK_EXEMPT_TOOLS)
        kinds: dict[str, int] = {}
        for a in anchors:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        return {
            "generator": "h9eval.tasks.synthetic",
            "generator_version": GENERATOR_VERSION,
            "preset": self.preset,
            "seed": self.seed,
            "overrides": dict(self.overrides),
            "spec": dataclasses.asdict(self.spec),
            "language": self.w.lang,
            "repo": f"{self.w.org}/{self.w.repo}",
            "n_turns": self.T,
            "n_messages": len(msgs),
            "n_tool_results": len(sizes_out),
            "total_bytes": sum(m.nbytes for m in msgs),
            "estimated_tokens": estimate_tokens(msgs),
            "tool_output_bytes": sum(b for _, b in sizes_out),
            "max_tool_output_bytes": max((b for _, b in sizes_out), default=0),
            "n_outputs_over_10000_bytes": sum(1 for _, b in sizes_out if b > HOOK_OFFLOAD_THRESHOLD_BYTES),
            "n_outputs_hook_offloadable": hook,
            "n_outputs_4000_to_10000_bytes": sum(
                1 for _, b in sizes_out if COMPACTION_OFFLOAD_THRESHOLD_BYTES < b <= HOOK_OFFLOAD_THRESHOLD_BYTES
            ),
            "n_facts": len(facts),
            "n_superseded_facts": sum(1 for f in facts if f.superseded_by),
            "n_intent_changes": len(changes),
            "n_anchors_by_kind": dict(sorted(kinds.items())),
        }
