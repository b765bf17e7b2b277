"""The one renderer: sections -> ``report.html`` (self-contained) and ``report.md``.

The page is a jinja2 template; tables go through pandas' Styler (HTML) and a jinja2 template
(Markdown), never through hand-built strings. The HTML is self-contained: figures embedded as
base64 PNG, inline CSS, no script, no external link; the Markdown links its figures as PNG files
in ``figures/`` next to it.

Layout: the ``answer`` sections first and open, then the ``results`` sections and the
``details`` sections, each in a collapsible ``<details>`` block (see
:data:`h9eval.analysis.report.model.PARTS`). A section with no blocks is left out.

Tables that read: numbers never wrap, text wraps at spaces only (never inside a word, so a
column is never narrower than its header's longest word), and a cell's text longer than
:data:`MAX_CELL_CHARS` is cut with a count of what was left out.
"""

from __future__ import annotations

import base64
import html
import io
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h9eval.analysis.report.model import PARTS, Section
from h9eval.core.paths import atomic_write, prepare_out_dir, write_text_atomic

__all__ = ["MAX_CELL_CHARS", "ReportPaths", "fmt_value", "html_table", "markdown_table", "render", "safe_href"]

MAX_CELL_CHARS = 160
"""The longest text a table cell shows; longer text is cut at a word and ends with ``… (+N chars)``."""

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{border-bottom:2px solid #444;padding-bottom:.2em}h2{margin:.2em 0}
details{border:1px solid #ddd;border-radius:4px;margin:.6em 0;padding:.2em .8em}
details>summary{cursor:pointer;font-weight:600;font-size:1.1em;padding:.3em 0}
details[open]>summary{border-bottom:1px solid #eee;margin-bottom:.4em}
section.answer{border:2px solid #2e7d32;border-radius:6px;padding:.4em 1em;margin:1em 0;background:#fbfffb}
h3.part{margin:1.6em 0 .3em;color:#555;font-size:1em;text-transform:uppercase;letter-spacing:.05em}
table{border-collapse:collapse;font-size:12px;margin:.6em 0;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap;vertical-align:top}
th{background:#f0f0f0;white-space:normal;vertical-align:bottom;overflow-wrap:normal;word-break:normal;min-width:3em}
td.t,th.t{white-space:normal;overflow-wrap:normal;word-break:normal;text-align:left}
td:first-child,th:first-child{text-align:left}
caption{caption-side:top;text-align:left;font-size:12px;color:#555;font-style:italic;padding-bottom:.2em}
figure{margin:1em 0}figure img{max-width:100%;box-sizing:border-box;border:1px solid #eee}
figcaption{font-size:12px;color:#555}
pre{background:#f7f7f7;padding:.6em;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.4em .8em}
.rec{background:#e8f5e9;border-left:4px solid #2e7d32;padding:.4em .8em;font-weight:600}
.caveat{background:#fdecea;border-left:4px solid #c62828;padding:.4em .8em}
ul.caveats{margin:.3em 0;padding-left:1.2em}ul.caveats li{margin:.15em 0}
"""

_PAGE = """<!DOCTYPE html><html><head><meta charset='utf-8'>
<title>{{ title }}</title><style>{{ css|safe }}</style></head><body>
<h1>{{ title }}</h1>
{%- for part, secs in parts %}
{%- if part == 'results' and secs %}<h3 class='part'>Results</h3>{% endif %}
{%- if part == 'details' and secs %}<h3 class='part'>Setup, provenance and checks</h3>{% endif %}
{%- for s in secs %}
{%- if part == 'answer' %}<section class='answer'><h2>{{ s.title }}</h2>
{%- else %}<details><summary>{{ s.title }}</summary>{% endif %}
{%- for b in s.blocks %}
{%- if b.kind == 'text' %}<p>{{ b.text }}</p>
{%- elif b.kind == 'caveats' %}<ul class='caveats'>{% for c in b.lines %}<li>{{ c }}</li>{% endfor %}</ul>
{%- elif b.kind in ('note', 'rec', 'caveat') %}<p class='{{ b.kind }}'>{{ b.text }}</p>
{%- elif b.kind == 'code' %}<pre>{{ b.text }}</pre>
{%- elif b.kind == 'link' %}<p><a href='{{ b.href }}'>{{ b.text }}</a></p>
{%- elif b.kind == 'table' %}{{ b.html|safe }}
{%- elif b.kind == 'figure' %}<figure><img alt='{{ b.caption }}' src='data:image/png;base64,{{ b.b64 }}'>
<figcaption>{{ b.caption }}</figcaption></figure>
{%- endif %}
{%- endfor %}
{%- if part == 'answer' %}</section>{% else %}</details>{% endif %}
{%- endfor %}
{%- endfor %}
</body></html>
"""

_MD_PAGE = """# {{ title }}
{% for s in sections %}
## {{ loop.index }}. {{ s.title }}
{% for b in s.blocks %}
{% if b.kind == 'text' %}{{ b.text }}
{% elif b.kind == 'caveats' %}{% for c in b.lines %}- {{ c }}
{% endfor %}{% elif b.kind in ('note', 'rec', 'caveat') %}> {{ b.text }}
{% elif b.kind == 'link' %}- [{{ b.text }}]({{ b.href }})
{% elif b.kind == 'code' %}```
{{ b.text }}
```
{% elif b.kind == 'table' %}{% if b.caption %}*{{ b.caption }}*

{% endif %}{{ b.md }}
{% elif b.kind == 'figure' %}![{{ b.caption }}](figures/{{ b.file }})

*{{ b.caption }}*
{% endif %}{% endfor %}{% endfor %}"""

_MD_TABLE = """| {{ cols|join(' | ') }} |
|{% for c in cols %}---|{% endfor %}
{% for r in rows %}| {{ r|join(' | ') }} |
{% endfor %}"""


@dataclass(frozen=True)
class ReportPaths:
    """Where a report went: ``html`` (self-contained), ``markdown`` (``report.md``), the PNG
    ``figures`` the Markdown links to, and the folder holding them all (``out_dir``)."""

    out_dir: Path
    html: Path
    markdown: Path
    figures: tuple[Path, ...] = ()


def _env(*, html: bool = False) -> Any:
    import jinja2

    # The HTML page escapes by construction: every value is escaped unless the template marks it
    # |safe, and only two things are (the page's own CSS and tables html_table built, whose every
    # cell, header and caption it escaped itself). Labels, task ids and message text are the
    # user's data, so a `"><img onerror=...>` in one must reach the reader as text.
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=html)


def safe_href(href: str) -> str:
    """``href`` if it is a relative link or an http(s)/file URL, else ``#``: a link the report
    writes never runs script (``javascript:``, ``data:``), whatever a value put into it."""
    scheme = href.split(":", 1)[0].lower() if ":" in href.split("/", 1)[0] else ""
    return href if scheme in ("", "http", "https", "file") else "#"


def fmt_value(v: Any) -> str:
    """A table cell as text: ``–`` for a missing number, integers with thousands separators, 3
    decimals (3 significant digits for very large or small numbers), long text cut at
    :data:`MAX_CELL_CHARS`."""
    if v is None:
        return ""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return f"{int(v):,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:.3f}"
    s = str(v)
    if len(s) > MAX_CELL_CHARS:
        cut = s.rfind(" ", 0, MAX_CELL_CHARS)
        cut = cut if cut > MAX_CELL_CHARS // 2 else MAX_CELL_CHARS
        s = f"{s[:cut]} … (+{len(s) - cut} chars)"
    return s


def _text_columns(df: Any) -> list[bool]:
    return [df[c].dtype.kind not in "biuf" for c in df.columns]


def html_table(df: Any, caption: str = "", *, uid: str = "t") -> str:
    """``df`` as an HTML table through pandas' Styler: no index, cells formatted by
    :func:`fmt_value`, text columns marked ``t`` (they wrap at spaces; numbers never wrap).
    ``uid`` fixes the Styler's id so that the page is byte-identical run to run."""
    import pandas as pd

    df = df.reset_index(drop=True)
    df.columns = [str(c) for c in df.columns]
    text = _text_columns(df)
    # a snake_case header may break after its underscores (a zero-width space), never inside a word
    # The Styler writes what a formatter returns as it is: every cell, header and the caption are
    # escaped here, after formatting (so a cut never splits an entity).
    sty = (
        df.style.hide(axis="index")
        .format(lambda v: html.escape(fmt_value(v)))
        .format_index(lambda c: html.escape(str(c)).replace("_", "_\u200b"), axis=1)
        .set_uuid(uid)
    )
    if caption:
        sty = sty.set_caption(html.escape(caption))
    classes = pd.DataFrame([["t" if t else "" for t in text]] * len(df), index=df.index, columns=df.columns)
    sty = sty.set_td_classes(classes)
    sty = sty.set_table_styles(
        [{"selector": f"th.col_heading.col{i}", "props": "text-align:left"} for i, t in enumerate(text) if t],
        overwrite=False,
    )
    return str(sty.to_html(cell_ids=False, exclude_styles=False, doctype_html=False))


def markdown_table(df: Any) -> str:
    """``df`` as a Markdown table (a jinja2 template over the cells :func:`fmt_value` gives)."""

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    cols = [esc(str(c)) for c in df.columns]
    rows = [[esc(fmt_value(v)) for v in r] for r in df.itertuples(index=False, name=None)]
    return str(_env().from_string(_MD_TABLE).render(cols=cols, rows=rows))


def _png(fig: Any, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def render(title: str, sections: Sequence[Section], out: Path) -> ReportPaths:
    """Write ``out/report.html``, ``out/report.md`` and ``out/figures/*.png`` for ``sections``
    (placed by their ``part``; empty ones left out)."""
    import matplotlib.pyplot as plt

    prepare_out_dir(out, what="report folder")
    figdir = prepare_out_dir(out / "figures", what="report figures folder")
    secs = [s for s in sections if s.blocks]
    by_part = {p: [s for s in secs if s.part == p] for p in PARTS}
    ordered = [s for p in PARTS for s in by_part[p]]
    figures: list[Path] = []
    views = []
    n_table = 0
    for s in ordered:
        blocks = []
        for kind, payload in s.blocks:
            if kind == "table":
                df, cap = payload
                n_table += 1
                blocks.append(
                    {
                        "kind": kind,
                        "html": html_table(df, cap, uid=f"t{n_table}"),
                        "md": markdown_table(df),
                        "caption": cap,
                    }
                )
            elif kind == "figure":
                name, fig, cap = payload
                data = _png(fig)
                plt.close(fig)
                p = figdir / f"{name}.png"
                with atomic_write(p) as f:
                    f.write(data)
                figures.append(p)
                blocks.append(
                    {"kind": kind, "b64": base64.b64encode(data).decode("ascii"), "file": p.name, "caption": cap}
                )
            elif kind == "caveats":
                blocks.append({"kind": kind, "lines": list(payload)})
            elif kind == "link":
                href, text = payload
                blocks.append({"kind": kind, "href": safe_href(str(href)), "text": str(text)})
            else:
                blocks.append({"kind": kind, "text": str(payload)})
        views.append({"title": s.title, "part": s.part, "blocks": blocks})
    parts = [(p, [v for v in views if v["part"] == p]) for p in PARTS]
    h = out / "report.html"
    m = out / "report.md"
    write_text_atomic(h, _env(html=True).from_string(_PAGE).render(title=title, css=_CSS, parts=parts))
    write_text_atomic(m, _env().from_string(_MD_PAGE).render(title=title, sections=views))
    return ReportPaths(out_dir=out, html=h, markdown=m, figures=tuple(figures))
