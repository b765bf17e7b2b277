"""Fact slots of the synthetic generator: one question each, with user/tool-output templates for
stating the fact and for changing its value later (supersession), and the value makers."""

from __future__ import annotations

import random
from dataclasses import dataclass

from h9eval.tasks.synthetic import content as C


@dataclass(frozen=True)
class Slot:
    """A kind of planted fact. Templates use ``{e}`` (entity), ``{v}`` (answer), ``{old}``."""

    value: str  # which value maker draws the answer (see slot_value)
    kind: str
    entities: str  # which world list supplies ``{e}`` ("" = none: the slot can be used once)
    question: str
    user: str
    found: str
    change_user: str
    change_found: str


SLOTS: tuple[Slot, ...] = (
    Slot("port", "number", "services", "Which port does the {e} service listen on in the test environment?",
          "FYI: in the test environment the {e} service listens on port {v}.",
          "# {e}: listens on port {v} in the test environment (docker-compose.test.yml)",
          "Heads-up: the {e} service moved from port {old} to port {v}; use the new port from now on.",
          "WARN ops-notice: {e} port changed {old} -> {v} (effective immediately)"),
    Slot("timeout", "number", "operations", "What timeout (in seconds) applies to {e}?",
          "The timeout for {e} must be {v} seconds, that's what the SLO doc says.",
          "# SLO: {e} timeout = {v}s (docs/slo.md)",
          "Update: the timeout for {e} is now {v} seconds, not {old}.",
          "# SLO (revised): {e} timeout = {v}s, previously {old}s"),
    Slot("budget", "number", "services", "What is the monthly cloud budget in USD for the {e} service?",
          "Keep the {e} service under a monthly budget of ${v}; don't add anything that scales cost.",
          "budget.yaml: {e}: monthly_usd: {v}",
          "Finance approved more: the {e} budget is now ${v} per month (was ${old}).",
          "budget.yaml: {e}: monthly_usd: {v}  # raised from {old}"),
    Slot("rate", "number", "services", "What rate limit (requests per minute) applies to calls to {e}?",
          "Calls to {e} are rate-limited to {v} requests per minute, so batch accordingly.",
          "X-RateLimit-Limit: {v} (per minute, upstream {e})",
          "The {e} rate limit was changed to {v} requests per minute (it used to be {old}).",
          "X-RateLimit-Limit: {v} (per minute, upstream {e}; was {old})"),
    Slot("batch", "number", "nouns", "What is the maximum batch size for {e} records?",
          "Never send more than {v} {e} records in one batch.",
          "# limits: max {e} batch = {v} records (upstream rejects larger payloads)",
          "New limit from upstream: at most {v} {e} records per batch (down from {old}).",
          "# limits (updated): max {e} batch = {v} records, was {old}"),
    Slot("ticket", "identifier", "topics", "What is the ticket id for {e}?",
          "Please reference {v} for {e} in commit messages.",
          "# Tracked in {v}: {e}",
          "{e} moved to a new ticket: {v} (the old {old} was closed as a duplicate).",
          "# Tracking moved: {e} is now {v} (was {old})"),
    Slot("flag", "identifier", "features", "What is the name of the feature flag that guards {e}?",
          "Gate {e} behind the feature flag {v}.",
          "flags.yaml: {v}: false  # guards {e}",
          "Rename the flag for {e}: use {v} instead of {old}.",
          "flags.yaml: {v}: false  # guards {e} (renamed from {old})"),
    Slot("function", "identifier", "features", "Which function implements {e}?",
          "The logic for {e} lives in {v}; start there.",
          "# {e} is implemented by {v}() (see the module docstring)",
          "Heads-up: {old} was renamed to {v} on main; it still implements {e}.",
          "# NOTE: {old} renamed to {v} ({e})"),
    Slot("envvar", "identifier", "upstreams", "Which environment variable holds the URL of {e}?",
          "The URL of {e} comes from the environment variable {v}.",
          "{v}=http://localhost:8080  # URL of {e}",
          "Ops renamed the variable for {e}: it is {v} now, {old} is gone.",
          "{v}=http://localhost:8080  # URL of {e} ({old} is deprecated)"),
    Slot("staging", "path", "services", "Where is the staging deployment config for {e}?",
          "The staging config for {e} is at {v}.",
          "# staging config for {e}: {v}",
          "We moved the configs: staging for {e} is now at {v}, not {old}.",
          "# staging config for {e} moved: {old} -> {v}"),
    Slot("fixtures", "path", "nouns", "Where are the test fixtures for {e} data?",
          "Use the fixtures in {v} for {e} data, they mirror production.",
          "# fixtures for {e} data: {v}",
          "The {e} fixtures were regenerated into {v}; don't use {old} anymore.",
          "# fixtures for {e} data regenerated: {v} (was {old})"),
    Slot("runbook", "path", "services", "Where is the runbook for the {e} service?",
          "The runbook for {e} is {v}, in case something pages.",
          "# runbook for {e}: {v}",
          "The {e} runbook moved to {v} (was {old}).",
          "# runbook for {e} moved to {v} (was {old})"),
    Slot("dir", "constraint", "", "Which directory must never be modified?",
          "Constraint: never modify files under {v}; it is synced from upstream.",
          "CONTRIBUTING.md: Never modify files under {v}; it is synced from upstream.",
          "Correction: the protected directory is {v}, not {old}; {old} may be edited now.",
          "CONTRIBUTING.md (updated): never modify files under {v} ({old} is no longer protected)."),
    Slot("langver", "constraint", "", "Which language version must the code stay on?",
          "Use {v} only; that's what production runs.",
          "ci.yml: runtime: {v}  # production runtime, do not change",
          "Production was upgraded: target {v} now instead of {old}.",
          "ci.yml: runtime: {v}  # upgraded from {old}"),
    Slot("noimport", "constraint", "", "Which module must new code not import from?",
          "Don't import anything from {v} in new code; it is being deleted.",
          "# DO NOT import {v} in new code (scheduled for removal)",
          "Change: {old} is fine again, but nothing may import {v} anymore.",
          "# DO NOT import {v} in new code ({old} restriction lifted)"),
    Slot("linelen", "constraint", "", "What is the maximum allowed line length in characters?",
          "Keep lines at most {v} characters; the linter in CI enforces it.",
          "lint config: max-line-length = {v}",
          "We relaxed the linter: lines may now be up to {v} characters (was {old}).",
          "lint config: max-line-length = {v}  # was {old}"),
    Slot("branch", "constraint", "", "Which branch must never be pushed to directly?",
          "Never push directly to {v}; everything goes through a PR.",
          "branch protection: {v} (direct pushes rejected)",
          "The protected release branch is now {v} ({old} was retired).",
          "branch protection: {v} (direct pushes rejected; {old} retired)"),
    Slot("license", "constraint", "", "Which license header must new files carry?",
          "Every new file needs the SPDX license header {v}.",
          "# SPDX-License-Identifier: {v}  (required on new files, see CONTRIBUTING.md)",
          "Legal says new files must use {v} now instead of {old}.",
          "# SPDX-License-Identifier: {v}  (required on new files; replaces {old})"),
    Slot("testcmd", "preference", "", "Which test command does the user prefer?",
          "Please run tests with `{v}`; that output is easiest for me to read.",
          "Makefile: test: {v}  # preferred invocation",
          "Switch to `{v}` instead of `{old}` for running tests, please.",
          "Makefile: test: {v}  # preferred invocation (was {old})"),
    Slot("formatter", "preference", "", "Which code formatter should be used?",
          "Format everything with {v} before committing.",
          "pre-commit: formatter = {v}",
          "We switched formatters: use {v}, not {old}.",
          "pre-commit: formatter = {v}  # replaced {old}"),
    Slot("commit", "preference", "", "Which commit message style does the user want?",
          "Write commit messages in the {v} style.",
          "CONTRIBUTING.md: commit messages follow {v}.",
          "New convention: commit messages use {v} from now on instead of {old}.",
          "CONTRIBUTING.md (updated): commit messages follow {v} (no longer {old})."),
    Slot("reviewer", "preference", "", "Who should review the pull request?",
          "Request a review from {v} when the PR is ready.",
          "CODEOWNERS: * {v}",
          "{old} is on leave; ask {v} for the review instead.",
          "CODEOWNERS: * {v}  # replaces {old}"),
    Slot("reportlang", "preference", "", "In which language should progress reports be written?",
          "Please write your progress reports in {v}.",
          "team-notes.md: status reports are written in {v}.",
          "From now on please report progress in {v} instead of {old}.",
          "team-notes.md (updated): status reports are written in {v}, not {old}."),
)  # fmt: skip

KIND_WEIGHTS = (("constraint", 0.2), ("identifier", 0.25), ("number", 0.25), ("path", 0.15), ("preference", 0.15))
_FEATURES = (
    "batched settlement", "the retry budget", "partial refunds", "webhook signing", "async export",
    "cursor pagination", "idempotency keys", "the new tax rules", "soft deletes", "dry-run mode",
    "per-tenant quotas", "request hedging", "currency rounding", "bulk import", "audit trails",
    "tenant isolation",
)  # fmt: skip
_LANG_NAMES = {"中文": ("Chinese", "Mandarin"), "日本語": ("Japanese",), "English": ("英語", "英文")}


def slot_value(rng: random.Random, w: C.World, slot: Slot, e: str) -> tuple[str, tuple[str, ...]]:
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


def slot_entities(w: C.World, which: str) -> tuple[str, ...]:
    return {
        "": ("",),
        "services": tuple(w.services),
        "operations": C.OPERATIONS,
        "nouns": C.NOUNS,
        "topics": C.TOPICS,
        "features": _FEATURES,
        "upstreams": tuple(f"the {s} upstream" for s in w.services),
    }[which]
