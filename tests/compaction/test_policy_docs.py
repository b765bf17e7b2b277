"""A policy parameter is documented once: as its field docstring, from which ``h9eval policies``
derives its help."""

from __future__ import annotations

import dataclasses

import pytest

from h9eval.cli.policies import describe_policies, format_policies_table
from h9eval.compaction.base import field_docs
from h9eval.compaction.policies import registry

KINDS = sorted(registry())


def _init_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
def test_every_init_field_has_a_field_docstring(kind: str) -> None:
    cls = registry()[kind]
    docs = field_docs(cls)
    missing = [name for name in _init_fields(cls) if not docs.get(name, "").strip()]
    assert missing == [], f"{kind}: fields without a field docstring: {missing}"


@pytest.mark.parametrize("kind", KINDS)
def test_the_class_docstring_does_not_restate_the_parameters(kind: str) -> None:
    """The old style listed every parameter as ``name``: ... in the class docstring."""
    cls = registry()[kind]
    doc = cls.__doc__ or ""
    restated = [name for name in _init_fields(cls) if f"``{name}``:" in doc]
    assert restated == [], f"{kind}: class docstring restates {restated}; the field docstring is the one place"


def test_policies_help_is_the_first_sentence_in_plain_text() -> None:
    by_kind = {d["kind"]: {p["name"]: p["help"] for p in d["parameters"]} for d in describe_policies()}
    assert set(by_kind) == set(KINDS)
    for kind, helps in by_kind.items():
        for name, text in helps.items():
            assert text, f"{kind}.{name} has no help"
            assert "``" not in text and ":mod:" not in text, f"{kind}.{name} help keeps reST markup: {text!r}"
    # the first sentence only: the detail after it stays in the field docstring
    assert by_kind["codex_compact"]["context_window_tokens"] == "Model window in tokens."
    assert "GPT-5" in field_docs(registry()["codex_compact"])["context_window_tokens"]
    assert (
        by_kind["hybrid"]["prompt_file"]
        == "(h9eval style) JSON file of prompt templates (see `h9eval.compaction.prompts`)."
    )
    line = next(ln for ln in format_policies_table().splitlines() if ln.strip().startswith("keep_tool_uses "))
    assert line.endswith("# The most recent tool uses kept intact (the API's `keep`).")
