"""``h9eval policies``: every registered policy, its source and its parameters.

Everything is derived from the registry and the dataclass fields (their docstrings are the help),
so a new policy shows up with its real defaults without being listed anywhere else.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import textwrap
from typing import Any

from h9eval.cli import add_command
from h9eval.compaction.base import field_docs
from h9eval.compaction.policies import registry

__all__ = ["describe_policies", "format_policies_table", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "policies")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(describe_policies(), indent=2, default=str))
    else:
        print(format_policies_table())
    return 0


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None  # required parameter (none of the built-ins has one)


def _type_name(t: Any) -> str:
    # ``from __future__ import annotations`` makes field types strings already
    return t if isinstance(t, str) else getattr(t, "__name__", repr(t))


def _first_paragraph(doc: str) -> str:
    # a docstring's first line is often a sentence wrapped over two lines: keep the paragraph
    para = doc.split("\n\n", 1)[0]
    return " ".join(line.strip() for line in para.splitlines())


def _first_sentence(doc: str) -> str:
    text = _first_paragraph(doc)
    m = re.search(r"(?<=[.!?])\s", text)
    return _plain(text[: m.start()] if m else text)


def _plain(text: str) -> str:
    # reST markup (``literal``, :mod:`name`) reads as noise in a terminal; keep one backtick
    return re.sub(r"``([^`]+)``", r"`\1`", re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", text))


def describe_policies() -> list[dict[str, Any]]:
    """One dict per registered policy, sorted by kind: ``kind``, ``source``, ``summary`` (first
    paragraph of the class docstring, on one line), ``claims_budget`` and ``parameters`` (a list of dicts with
    ``name``, ``type`` and ``default``, in field order; ``required`` when there is no default)."""
    out: list[dict[str, Any]] = []
    for kind, cls in registry().items():
        doc = (cls.__doc__ or "").strip()
        helps = field_docs(cls)
        params = [
            {
                "name": f.name,
                "type": _type_name(f.type),
                "default": _default(f),
                "required": f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                "help": _first_sentence(helps.get(f.name, "")),
            }
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.init
        ]
        out.append(
            {
                "kind": kind,
                "source": cls.source,
                "summary": _plain(_first_paragraph(doc)),
                "claims_budget": cls.claims_budget,
                "parameters": params,
            }
        )
    return out


def _show(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return f"{v:_}"
    if isinstance(v, tuple):
        return json.dumps(list(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return repr(v)


def format_policies_table(width: int = 100) -> str:
    """The policies as text: a header line per policy (kind and source), its summary, then one
    line per parameter (``name: type = default``)."""
    blocks: list[str] = []
    for d in describe_policies():
        lines = [f"{d['kind']}  ({d['source']})"]
        lines += textwrap.wrap(d["summary"], width=width, initial_indent="    ", subsequent_indent="    ")
        if d["claims_budget"]:
            lines.append("    guarantees the view stays within its token budget")
        if not d["parameters"]:
            lines.append("    (no parameters)")
        name_w = max((len(p["name"]) for p in d["parameters"]), default=0)
        for p in d["parameters"]:
            default = "required" if p["required"] else _show(p["default"])
            line = f"    {p['name']:<{name_w}}  {p['type']} = {default}"
            if p.get("help"):
                line += f"  # {p['help']}"
            lines.append(line)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
