"""Drift probes: what a compacted view still knows about a task, against its ground truth.

``probes_for(task, i)`` builds the questions; ``probe_view(task, view, i, scorers=...)`` scores
a view (one row per probe, method and scope, see :data:`PROBE_COLUMNS`); ``drift_table`` and
``summarize_drift`` turn rows into tables; ``checkpoints`` picks the replay calls to probe;
``placebo_results``/``placebo_table`` score every probe against unrelated tasks' histories
(chance passes) and ``with_placebo`` fills those rates into probe rows.

Scorers (by name, :func:`make_scorer`): ``recall`` (offline, default), ``semantic`` (the
``semantic`` extra), ``llm`` (Anthropic or any injected text client). Importing this package
imports none of torch, sentence-transformers or the Anthropic SDK.
"""

from h9eval.probes.drift import (
    DRIFT_COLUMNS,
    SUMMARY_COLUMNS,
    Checkpoint,
    anchor_overwrites,
    checkpoints,
    count_anchor_overwrites,
    drift_table,
    probe_checkpoints,
    probe_view,
    summarize_drift,
)
from h9eval.results.schema import PROBE_COLUMNS, PROBE_SCHEMA_VERSION
from h9eval.probes.llm import (
    AUDIT_COLUMNS,
    AnthropicTextClient,
    JudgeAgreement,
    LLMScorer,
    PromptCache,
    TextClient,
    TextReply,
    judge_agreement,
    judge_agreement_table,
)
from h9eval.probes.placebo import (
    DEFAULT_PLACEBO_PARTNERS,
    PLACEBO_COLUMNS,
    PLACEBO_MAX_PASS_RATE,
    PlaceboResult,
    placebo_by_kind,
    placebo_partners,
    placebo_results,
    placebo_table,
    with_placebo,
)
from h9eval.probes.probe import (
    PASS_THRESHOLD,
    PROBE_KINDS,
    Probe,
    next_action_probe,
    normalize_arguments,
    probes_for,
)
from h9eval.probes.recall import RecallScorer
from h9eval.probes.scorers import (
    ProbeInput,
    Scorer,
    make_scorer,
    register_scorer,
    scorer_registry,
)
from h9eval.probes.semantic import SemanticScorer, semantic_available
from h9eval.tasks.text import TextIndex, normalize, render_messages

__all__ = [
    "AUDIT_COLUMNS",
    "AnthropicTextClient",
    "Checkpoint",
    "DEFAULT_PLACEBO_PARTNERS",
    "DRIFT_COLUMNS",
    "JudgeAgreement",
    "LLMScorer",
    "PASS_THRESHOLD",
    "PLACEBO_COLUMNS",
    "PLACEBO_MAX_PASS_RATE",
    "PlaceboResult",
    "PROBE_COLUMNS",
    "PROBE_KINDS",
    "PROBE_SCHEMA_VERSION",
    "Probe",
    "ProbeInput",
    "PromptCache",
    "RecallScorer",
    "SUMMARY_COLUMNS",
    "Scorer",
    "SemanticScorer",
    "TextClient",
    "TextIndex",
    "TextReply",
    "anchor_overwrites",
    "checkpoints",
    "count_anchor_overwrites",
    "drift_table",
    "judge_agreement",
    "judge_agreement_table",
    "make_scorer",
    "next_action_probe",
    "normalize",
    "normalize_arguments",
    "placebo_by_kind",
    "placebo_partners",
    "placebo_results",
    "placebo_table",
    "probe_checkpoints",
    "probe_view",
    "probes_for",
    "register_scorer",
    "render_messages",
    "scorer_registry",
    "semantic_available",
    "summarize_drift",
    "with_placebo",
]
