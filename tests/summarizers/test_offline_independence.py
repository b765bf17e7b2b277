"""The offline summarizers do not fit the measurement.

They import nothing from the probes, the key-term extractor or the synthetic generator (checked
on the modules' source with ``ast``, directly and through every h9eval module they import), no
string of theirs contains a label the synthetic generator plants, no regular expression of
theirs reacts to such a label, and replacing the labels in a synthetic transcript by neutral
text of the same shape changes nothing in their replies but the labels themselves.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

import h9eval.summarizers.offline as offline_mod
import h9eval.summarizers.offline_free_text as free_text_mod
import h9eval.summarizers.offline_recent as recent_mod
from h9eval.compaction.anchors import anchor_types_for
from h9eval.core.messages import Message
from h9eval.summarizers import OfflineFreeTextSummarizer, OfflineRecentSummarizer, OfflineSummarizer, SummaryRequest
from h9eval.tasks.synthetic import generate

ROOT = Path(__file__).resolve().parents[2]
SUMMARIZER_MODULES = (offline_mod, recent_mod, free_text_mod)
FORBIDDEN = ("h9eval.probes", "h9eval.tasks")  # the probes; the key-term extractor and generator live in tasks
GENERATOR_FILES = tuple(sorted((ROOT / "h9eval/tasks/synthetic").glob("*.py")))

# Labels the synthetic generator writes into user messages, assistant messages and tool outputs.
# Each must still occur in the generator's source (test below), so the list cannot go stale
# silently. Generic phrases the generator also uses ("Let me try", "because", "instead of") are
# not labels: a summarizer may key on generic English.
GENERATOR_LABELS = (
    "Decision:",
    "Progress:",
    "Next steps:",
    "Done with the step:",
    "Change of plan:",
    "To restate the goal:",
    "That didn't work:",
    "Reverting it and trying something else",
    "Summary: the task is finished",
    "Files touched:",
    "Constraint:",
    "Correction:",
    "FYI:",
    "Heads-up:",
    "Update:",
    "New convention:",
    "New limit from upstream:",
    "Quick check:",
    "Known issue:",
    "Deprecated:",
)


def neutral(label: str) -> str:
    """A text of the same shape (length, case pattern, punctuation) that no cue can match."""
    return "".join("Q" if c.isupper() else "q" if c.isalpha() else c for c in label)


def imported_modules(source: str, module: str) -> set[str]:
    """Absolute names of every module ``source`` (the module ``module``) imports; for
    ``from X import y`` both ``X`` and ``X.y`` (``y`` may be a module)."""
    pkg = module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def module_file(name: str) -> Path | None:
    rel = Path(*name.split("."))
    for cand in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN))


def test_import_checker_can_fail() -> None:
    src = "from h9eval.tasks import keyterms\nimport h9eval.probes.recall as r\nfrom ..probes import probe\n"
    names = imported_modules(src, "h9eval.summarizers.x")
    assert forbidden(names) == [
        "h9eval.probes",
        "h9eval.probes.probe",
        "h9eval.probes.recall",
        "h9eval.tasks",
        "h9eval.tasks.keyterms",
    ]


@pytest.mark.parametrize("mod", SUMMARIZER_MODULES, ids=lambda m: m.__name__)
def test_summarizer_imports_no_probe_keyterm_or_generator_code(mod: object) -> None:
    name = mod.__name__  # type: ignore[attr-defined]
    direct = imported_modules(Path(mod.__file__).read_text(encoding="utf-8"), name)  # type: ignore[attr-defined]
    assert forbidden(direct) == []
    # Transitively, through every h9eval module reached by import statements (a package's
    # __init__ is plumbing that runs on import; the heuristics live in the modules named).
    seen: set[str] = set()
    todo = [n for n in direct if n.startswith("h9eval.")]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        f = module_file(n)
        if f is None or f.name == "__init__.py":
            continue
        todo += [x for x in imported_modules(f.read_text(encoding="utf-8"), n) if x.startswith("h9eval.")]
    assert forbidden(seen) == [], f"{name} reaches {forbidden(seen)}"
    assert "h9eval.compaction.summary" in seen  # the walk did run


def test_labels_are_the_generators() -> None:
    src = "\n".join(f.read_text(encoding="utf-8") for f in GENERATOR_FILES)
    missing = [lab for lab in GENERATOR_LABELS if lab not in src]
    assert missing == [], "labels no longer planted by the generator; update GENERATOR_LABELS"


def _strings(source: str) -> list[str]:
    """Every string constant of ``source`` except docstrings (which may name the labels)."""
    tree = ast.parse(source)
    docs: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docs.add(id(first.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


@pytest.mark.parametrize("mod", SUMMARIZER_MODULES, ids=lambda m: m.__name__)
def test_no_generator_label_in_summarizer_strings(mod: object) -> None:
    strings = _strings(Path(mod.__file__).read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    assert len(strings) > 10
    hits = [(lab, s) for lab in GENERATOR_LABELS for s in strings if lab.lower() in s.lower()]
    assert hits == []


def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for mod in SUMMARIZER_MODULES:
        for k, v in vars(mod).items():
            if isinstance(v, re.Pattern) and (k, v) not in out:
                out.append((k, v))
    return out


@pytest.mark.parametrize("label", GENERATOR_LABELS)
def test_no_heuristic_reacts_to_a_label(label: str) -> None:
    pats = _patterns()
    assert {"_REASONING_CUE", "_INTENTION_CUE", "_MODAL_CUE", "_FAIL_TEXT"} <= {k for k, _ in pats}
    for ctx in ("{}", "{} the rest of it.", "Done. {} the rest of it.", "- {}\n1. one\n2. two"):
        a, b = ctx.format(label), ctx.format(neutral(label))
        for k, p in pats:
            assert bool(p.search(a)) == bool(p.search(b)), f"{k} reacts to {label!r}"
            assert [m.span() for m in p.finditer(a)] == [m.span() for m in p.finditer(b)], f"{k} splits {label!r}"


def _relabel(msgs: tuple[Message, ...]) -> tuple[Message, ...]:
    out = []
    for m in msgs:
        c = m.content
        for lab in GENERATOR_LABELS:
            c = c.replace(lab, neutral(lab))
        out.append(dataclasses.replace(m, content=c))
    return tuple(out)


def _request(head: tuple[Message, ...], **kw: object) -> SummaryRequest:
    fields: dict[str, object] = dict(
        system_prompt="s",
        user_prompt="u",
        template="first",
        previous_compaction=None,
        conversation="",
        head=head,
        anchor_types=anchor_types_for(("constraint", "artifact")),
    )
    return SummaryRequest(**{**fields, **kw})  # type: ignore[arg-type]


SUMMARIZERS = (OfflineSummarizer(), OfflineRecentSummarizer(), OfflineFreeTextSummarizer())


def _replies(summ: object, msgs: tuple[Message, ...], cut: int) -> list[str]:
    """A first summary of ``msgs[:cut]`` and an incremental one of the rest (as progressive)."""
    first = summ.summarize(_request(msgs[:cut])).text or ""  # type: ignore[attr-defined]
    from h9eval.compaction.anchors import parse_anchors_and_summary

    anchors, summary = parse_anchors_and_summary(first, anchor_types_for(("constraint", "artifact")))
    prev = tuple((a.type, a.content) for a in anchors)
    second = summ.summarize(  # type: ignore[attr-defined]
        _request(msgs[cut:], template="incremental", previous_anchors=prev, previous_summary=summary)
    ).text
    return [first, second or ""]


@pytest.mark.parametrize("seed", [0, 3])
def test_labels_change_nothing_but_themselves(seed: int) -> None:
    task = generate("small", seed=seed)
    msgs = task.messages
    planted = sum(
        m.content.count(lab) for m in msgs for lab in ("Decision:", "Next steps:", "Progress:", "Change of plan:")
    )
    assert planted >= 5  # the transcript really carries the labels
    neutral_msgs = _relabel(msgs)
    cut = len(msgs) // 2
    for summ in SUMMARIZERS:
        want = _replies(summ, msgs, cut)
        for lab in GENERATOR_LABELS:
            want = [w.replace(lab, neutral(lab)) for w in want]
        assert _replies(summ, neutral_msgs, cut) == want, summ.name


def test_relabel_check_catches_a_summarizer_keyed_on_a_label(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check above can fail: a decision rule keyed on the generator's "Decision:" label
    # (what the first version of this summarizer did) is caught.
    monkeypatch.setattr(offline_mod, "_REASONING_CUE", re.compile(r"^Decision:"))
    msgs = generate("small", seed=0).messages
    cut = len(msgs) // 2
    want = [w.replace("Decision:", neutral("Decision:")) for w in _replies(OfflineSummarizer(), msgs, cut)]
    got = _replies(OfflineSummarizer(), _relabel(msgs), cut)
    assert got != want
