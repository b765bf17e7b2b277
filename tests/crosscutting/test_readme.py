"""Every shell command and Python block of README.md, notebooks/README.md and docs/*.md runs.

The blocks are found generically: each fenced ```sh block is run with bash (``set -e``) and each
```python block with this interpreter, in document order, in one scratch folder per README,
against the shipped data (``H9EVAL_SHARED``). A block preceded by
``<!-- readme-test: skip (reason) -->`` is not run; the reason is required, and such blocks are
few (the two top-level make commands, a long-running server, the user's own data). The network
is faked: ``ANTHROPIC_API_KEY`` is a fake key and ``ANTHROPIC_BASE_URL`` points the SDK at a
local HTTP server on 127.0.0.1 that answers like the Messages API; a block that names the
Anthropic summarizer must have reached it (it exercises what it claims)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from h9eval.core.paths import shared_dir

ROOT = Path(__file__).resolve().parents[2]
READMES = ("README.md", "notebooks/README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>[^)]+)\)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
MAX_SKIPS = 12
"""Skips are the exception: the whole of both READMEs may mark at most this many blocks."""

REPLY = (
    "## Anchors\n\n### User Intent\nFix the failing test\n\n### Execution Progress\n- Read the code\n\n"
    "### Key Decisions\n- Keep the API\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- Run tests\n\n"
    "## Summary\nWork in progress."
)


@dataclass(frozen=True)
class Block:
    readme: str
    line: int
    lang: str
    code: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.readme}:{self.line}:{self.lang}"


def blocks(readme: str) -> list[Block]:
    """The fenced blocks of ``readme`` with their language and skip marker (the marker must be on
    the last non-blank line before the fence)."""
    lines = (ROOT / readme).read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group("lang")
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        sk = SKIP.search(prev)
        out.append(
            Block(readme, start + 1, lang, "\n".join(lines[start + 1 : j]) + "\n", sk.group("why") if sk else None)
        )
        i = j + 1
    return out


RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
ALL = [b for r in READMES for b in blocks(r) if b.lang in RUNNABLE]


class _Fake(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        n = int(self.headers.get("content-length") or 0)
        self.rfile.read(n)
        type(self).hits.append(self.path)
        body = json.dumps(
            {
                "id": "msg_readme",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [{"type": "text", "text": REPLY}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1000, "output_tokens": 200},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def fake_api() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One scratch folder per README, with the repository's folders the commands name linked in
    and ``.venv`` pointing at this interpreter's environment."""
    out = {}
    for r in READMES:
        d = tmp_path_factory.mktemp(Path(r).parent.name or "root")
        for name in ("notebooks", "examples", "benchmarks", "Makefile", "pyproject.toml"):
            if (ROOT / name).exists():
                (d / name).symlink_to(ROOT / name)
        (d / ".venv").symlink_to(Path(sys.prefix))
        out[r] = d
    return out


def _env(api: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("H9EVAL_DEBUG",)}
    shared = os.environ.get("H9EVAL_SHARED") or str(shared_dir())
    env.update(
        {
            "H9EVAL_SHARED": shared,
            "ANTHROPIC_API_KEY": "sk-ant-FAKE-readme-0123456789",
            "ANTHROPIC_BASE_URL": api,
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "MPLBACKEND": "Agg",
        }
    )
    return env


def test_the_readmes_have_runnable_blocks_and_few_skips() -> None:
    assert sum(b.lang in ("sh", "bash") for b in ALL) >= 4 and any(b.lang == "python" for b in ALL)
    skipped = [b for b in ALL if b.skip]
    assert len(skipped) <= MAX_SKIPS, [b.id for b in skipped]
    assert all(b.skip and b.skip.strip() for b in skipped)


def test_the_extraction_finds_blocks_and_markers(tmp_path: Path) -> None:
    """The extraction itself can fail: a crafted README with a skipped and a runnable block."""
    text = (
        "x\n<!-- readme-test: skip (slow) -->\n```sh\nmake demo\n```\n\n```python\nprint(1)\n```\n```toml\na = 1\n```\n"
    )
    (tmp_path / "R.md").write_text(text)
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        got = blocks("R.md")
    finally:
        ROOT = old
    assert [(b.lang, b.skip, b.code) for b in got] == [
        ("sh", "slow", "make demo\n"),
        ("python", None, "print(1)\n"),
        ("toml", None, "a = 1\n"),
    ]


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_readme_block_runs(block: Block, scratch: dict[str, Path], fake_api: str) -> None:
    if block.skip:
        pytest.skip(f"marked in the README: {block.skip}")
    cwd = scratch[block.readme]
    env = _env(fake_api)
    before = len(_Fake.hits)
    if RUNNABLE[block.lang] == "sh":
        cmd = ["bash", "-euo", "pipefail", "-c", block.code]
    else:
        cmd = [sys.executable, "-c", block.code]
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (
        f"{block.id} failed ({r.returncode}):\n{block.code}\n--- stdout\n{r.stdout[-3000:]}\n--- "
        f"stderr\n{r.stderr[-3000:]}"
    )
    if re.search(r"^h9eval compare \S+ \S+ \S+", block.code, flags=re.M):
        # an example comparison must reach a verdict, not only run: the example has enough tasks
        verdicts = re.findall(r"-> (better|worse|equivalent within \S+|inconclusive)", r.stdout)
        assert verdicts and set(verdicts) != {"inconclusive"}, r.stdout
        assert "a verdict at this level needs" not in r.stdout.split("\n", 2)[1], r.stdout
    if re.search(r"--summarizer anthropic|make_summarizer\(\"anthropic\"", block.code):
        assert len(_Fake.hits) > before, f"{block.id} names the Anthropic summarizer but asked for no summary"
        assert "summarizer_calls" in r.stdout and not re.search(r"summarizer_calls: 0\b", r.stdout), r.stdout
        assert not re.search(r"summarizer_cost_usd: 0\.0\b", r.stdout), r.stdout


def test_every_registered_policy_is_in_the_readme_policies_table() -> None:
    from h9eval.compaction.policies import registry

    try:
        import h9eval.integrations.inspect  # noqa: F401 - registers its two policies (the optional inspect extra)
    except ImportError:
        pass
    text = (ROOT / "docs" / "policies.md").read_text(encoding="utf-8")
    table = text.split("# Policies", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    listed = {k for ln in rows for k in re.findall(r"`([a-z_0-9]+)`", ln.split("|")[1])}
    assert set(registry()) - listed == set(), "policies missing from docs/policies.md's table"


def test_the_notebooks_readme_counts_and_names_every_notebook() -> None:
    names = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    words = {5: "Five", 6: "Six", 7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten", 11: "Eleven", 12: "Twelve"}
    text = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    assert text.split("\n\n", 2)[1].startswith(f"{words[len(names)]} short notebooks"), (
        "the count in notebooks/README.md is stale"
    )
    assert all(f"**`{n}.ipynb`" in text for n in names)
    top = (ROOT / "docs" / "notebooks.md").read_text(encoding="utf-8")
    assert f"holds {words[len(names)].lower()} thin notebooks" in top and all(f"| `{n}` |" in top for n in names)


def test_every_notebook_declares_the_projects_kernel() -> None:
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        spec = json.loads(nb.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        assert (spec["name"], spec["display_name"]) == ("h9eval", "Python (h9eval)"), nb.name
