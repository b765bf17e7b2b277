"""Vocabularies, a per-session "world" and tool-output renderers for the synthetic generator.

Private helper of :mod:`h9eval.tasks.synthetic`. Everything takes an explicit
``random.Random``; nothing touches global randomness, the clock or ``hash()`` of a string, so
the same rng state always yields the same bytes.

Speed: bulk text comes from per-session *pools* of pre-rendered blocks (a function, a test
line, a diff hunk, a log record). An output of N bytes is a templated header, pool blocks up to
the byte budget and a templated footer; one rng call per block (a few hundred bytes) is what
keeps a 5,000-turn session at a few seconds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# --------------------------------------------------------------------------------------------
# vocabularies
# --------------------------------------------------------------------------------------------
ORGS = ("acme", "globex", "initech", "umbrella", "hooli", "soylent", "tyrell", "vandelay", "wonka", "cyberdyne")
PRODUCTS = (
    "payments", "ledger", "billing", "inventory", "notifier", "scheduler",
    "catalog", "shipping", "ingest", "reports", "identity", "search",
)  # fmt: skip
REPO_SUFFIXES = ("-api", "-service", "-worker", "-core", "-gateway")
MODULES = (
    "retry", "client", "config", "models", "serializers", "handlers", "cache", "queue",
    "storage", "validators", "metrics", "session", "router", "tasks", "backoff", "parser",
    "schema", "events", "limits", "webhooks", "export", "pagination",
)  # fmt: skip
VERBS = (
    "compute", "parse", "load", "build", "resolve", "validate", "normalize", "fetch", "flush",
    "apply", "render", "encode", "decode", "merge", "schedule", "dispatch", "refresh",
    "register", "reconcile", "settle",
)  # fmt: skip
NOUNS = (
    "backoff", "invoice", "settings", "token", "batch", "payload", "schema", "window", "cursor",
    "entry", "webhook", "budget", "session", "manifest", "checksum", "snapshot", "quota",
    "receipt", "offset", "lease",
)  # fmt: skip
ENVS = ("staging", "prod-eu", "prod-us", "sandbox", "perf")
PEOPLE = ("mchen", "apatel", "jkowalski", "ysato", "lgarcia", "oadeyemi", "kmueller", "rnakamura", "dsilva")
SERVICES = (
    "ledger", "billing-worker", "fraud-check", "notifier", "rate-limiter", "auth-proxy", "search-indexer",
    "export-worker", "webhook-relay", "pricing", "tax-engine", "audit-log", "session-store", "inventory-sync",
)  # fmt: skip
OPERATIONS = (
    "ledger API calls", "webhook delivery", "the tax-engine lookup", "invoice rendering",
    "S3 uploads", "the fraud-check RPC", "database migrations", "the nightly export",
    "OAuth token refresh", "search reindexing", "the pricing API", "queue draining",
)  # fmt: skip
TOPICS = (
    "the retry bug", "the flaky CI job", "the follow-up cleanup", "the config migration",
    "the pagination regression", "the timeout incident", "the memory leak", "the API deprecation",
    "the rate-limit rollout", "the schema change", "the docs update", "the security review",
    "the billing outage", "the dependency upgrade", "the audit findings", "the load test",
)  # fmt: skip
PY_DEPS = (
    ("requests", "2.32.3"), ("httpx", "0.27.0"), ("pydantic", "2.7.1"), ("sqlalchemy", "2.0.30"),
    ("tenacity", "8.3.0"), ("structlog", "24.1.0"), ("urllib3", "2.2.1"), ("attrs", "23.2.0"),
    ("orjson", "3.10.3"), ("redis", "5.0.4"), ("celery", "5.4.0"), ("boto3", "1.34.113"),
    ("pytest", "8.2.1"), ("freezegun", "1.5.1"), ("respx", "0.21.1"), ("alembic", "1.13.1"),
)  # fmt: skip
GO_DEPS = (
    ("github.com/stretchr/testify", "v1.9.0"), ("go.uber.org/zap", "v1.27.0"),
    ("github.com/jackc/pgx/v5", "v5.6.0"), ("golang.org/x/sync", "v0.7.0"),
    ("github.com/prometheus/client_golang", "v1.19.1"), ("google.golang.org/grpc", "v1.64.0"),
    ("github.com/spf13/cobra", "v1.8.0"), ("github.com/redis/go-redis/v9", "v9.5.1"),
    ("github.com/google/uuid", "v1.6.0"), ("golang.org/x/time", "v0.5.0"),
)  # fmt: skip
PY_ERRORS = (
    ("AssertionError", "assert {x} == {y}"),
    ("KeyError", "'{noun}_id'"),
    ("TypeError", "{fn}() got an unexpected keyword argument '{kw}'"),
    ("ValueError", "invalid literal for int() with base 10: '{x}s'"),
    ("AttributeError", "'NoneType' object has no attribute '{noun}'"),
    ("TimeoutError", "{op} did not complete within {y}s"),
    ("RuntimeError", "Event loop is closed"),
    ("ZeroDivisionError", "float division by zero"),
)  # fmt: skip
GO_ERRORS = (
    ("assertion failed", "expected {y}, got {x}"),
    ("panic", "runtime error: index out of range [{y}] with length {y}"),
    ("timeout", "{op}: context deadline exceeded"),
    ("panic", "runtime error: invalid memory address or nil pointer dereference"),
    ("checksum mismatch", "want {hex}, have {hex2}"),
)  # fmt: skip
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
LOG_MSGS = (
    "attempt {n} failed; sleeping {f}s before retry",
    "loaded {n} entries from cache in {f}ms",
    "flushing batch of {n} records to {svc}",
    "request to {svc} returned 503; backing off",
    "cursor advanced to offset {n}",
    "lease renewed for worker-{n} (ttl={f}s)",
    "config reloaded from {path}",
    "skipping duplicate {noun} id={hex}",
    "connection pool exhausted (size={n}); waiting",
    "settled {n} {noun} entries in {f}ms",
)  # fmt: skip
CJK_LINES = (
    "{fn} 负责计算每次重试之间的等待时间，退避时间按指数增长，但不能超过上限 {n} 秒。",
    "注意：{path} 中的默认值只用于本地开发，生产环境的配置以 deploy/ 目录为准。",
    "如果 {test} 失败，请先检查 {mod} 模块的缓存是否被正确清理。",
    "该服务依赖 {dep}，升级之前需要和平台组确认兼容性。",
    "日志中出现超时错误时，通常说明上游接口响应过慢，而不是本服务的问题。",
    "每个批次最多处理 {n} 条记录，超出部分会在下一轮调度中继续处理。",
    "{fn} はリトライ間隔を計算します。上限は {n} 秒で、それを超えることはありません。",
    "{path} を変更する場合は、必ず {test} を実行して結果を確認してください。",
    "この関数はスレッドセーフではありません。並行呼び出しには {cls} のロックを使用してください。",
    "本番環境では {env} のエンドポイントを使用します。ステージングとは設定が異なります。",
    "{fn} 함수는 재시도 간격을 계산합니다. 최대값은 {n}초입니다.",
    "배포 전에 {test} 테스트가 통과하는지 확인하세요.",
)  # fmt: skip
CJK_TITLES = ("## 重试策略", "## 配置说明", "## 设计メモ", "## 運用手順", "## 已知问题", "## 변경 사항")
EN_DOC_LINES = (
    "{fn} computes the delay between attempts; it grows exponentially up to a cap of {n} seconds.",
    "Configuration is read from {path} and can be overridden with environment variables.",
    "Run `{testcmd}` before opening a pull request; CI runs the same command.",
    "The {mod} module owns all I/O with {svc}; other modules must go through it.",
    "Known issue: {test} is timing-sensitive on slow CI runners (see {ticket}).",
    "Batches are capped at {n} items; larger inputs are split by the scheduler.",
    "Deprecated: the `{kw}` argument of {fn} will be removed in the next minor release.",
)  # fmt: skip


def snake_to_camel(s: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in s.split("_"))


# --------------------------------------------------------------------------------------------
# pools
# --------------------------------------------------------------------------------------------
class Pool:
    """Pre-rendered text blocks (no trailing newline) with their UTF-8 byte sizes."""

    __slots__ = ("items", "sizes", "max_line_bytes")

    def __init__(self, items: Sequence[str]) -> None:
        self.items = list(items)
        self.sizes = [len(s.encode("utf-8")) for s in self.items]
        self.max_line_bytes = max(len(ln.encode("utf-8")) for s in self.items for ln in s.split("\n"))


def fill(rng: random.Random, pool: Pool, budget: int, out: list[str]) -> int:
    """Append random pool blocks to ``out`` while they fit in ``budget`` bytes (each joined with
    a newline), then as many lines of one more block as fit; returns the bytes used.

    The result is within ``pool.max_line_bytes + 1`` of the budget, which is what lets the
    caller aim an output at a byte-size band.
    """
    used = 0
    items, sizes, n = pool.items, pool.sizes, len(pool.items)
    rand = rng.random
    while True:
        i = int(rand() * n)
        s = sizes[i] + 1
        if used + s <= budget:
            out.append(items[i])
            used += s
            continue
        for line in items[i].split("\n"):
            b = len(line.encode("utf-8")) + 1
            if used + b > budget:
                break
            out.append(line)
            used += b
        return used


# --------------------------------------------------------------------------------------------
# the world: one fictional repository per session
# --------------------------------------------------------------------------------------------
@dataclass
class World:
    """Names shared by every message of one session, so that paths, functions and tests recur."""

    lang: str  # "python" or "go": the repository's main language
    org: str
    repo: str
    pkg: str
    modpath: str  # Go module path (also set for Python repos: the sidecar tool's module)
    root: str
    src_files: list[str]
    test_files: list[str]
    alt_files: list[str]  # files in the other language (a Go sidecar / Python scripts)
    config_files: list[str]
    doc_files: list[str]
    cjk_doc_files: list[str]
    dirs: list[str]
    functions: list[str]
    go_functions: list[str]
    py_functions: list[str]
    classes: list[str]
    consts: list[str]
    tests: list[str]  # test ids (pytest node ids or Go test names)
    deps: list[tuple[str, str]]
    services: list[str]
    ticket_prefix: str
    test_cmd: str
    pools: dict[str, Pool] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)  # files created by write_file


def _ident_names(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    seen: dict[str, None] = {}
    while len(out) < n:
        name = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
        if name not in seen:
            seen[name] = None
            out.append(name)
    return out


def make_world(rng: random.Random, *, pool_blocks: int) -> World:
    """Draw one repository: names, files, functions and tests; then render the block pools
    (``pool_blocks`` blocks per pool; more blocks = less repetition in very long sessions)."""
    lang = "python" if rng.random() < 0.6 else "go"
    org = rng.choice(ORGS)
    pkg = rng.choice(PRODUCTS)
    repo = pkg + rng.choice(REPO_SUFFIXES)
    modpath = f"github.com/{org}/{repo}"
    mods = rng.sample(MODULES, rng.randint(9, 14))
    snake = _ident_names(rng, 24)
    py_functions = snake
    go_functions = [snake_to_camel(s) for s in snake]
    classes = [
        snake_to_camel(n) + k
        for n, k in zip(
            rng.sample(NOUNS, 8), ("Policy", "Client", "Store", "Parser", "Config", "Handler", "Cache", "Queue")
        )
    ]
    consts = [
        f"{rng.choice(('MAX', 'DEFAULT', 'MIN'))}_{n.upper()}_{rng.choice(('LIMIT', 'SECONDS', 'SIZE', 'COUNT'))}"
        for n in rng.sample(NOUNS, 6)
    ]
    if lang == "python":
        src_files = [f"src/{pkg}/{m}.py" for m in mods]
        test_files = [f"tests/test_{m}.py" for m in mods[: max(4, len(mods) // 2)]]
        tests = [
            f"{tf}::test_{rng.choice(py_functions)}_{rng.choice(('caps', 'handles_empty', 'retries', 'roundtrip', 'rejects_negative', 'is_idempotent'))}"
            for tf in test_files
            for _ in range(3)
        ]
        alt_files = [f"tools/loadgen/{m}.go" for m in rng.sample(MODULES, 3)]
        functions = py_functions
        deps = rng.sample(PY_DEPS, 8)
        config_files = ["pyproject.toml", "setup.cfg", f"deploy/{rng.choice(ENVS)}/{pkg}.yaml", ".env.example"]
        dirs = [f"src/{pkg}", "tests", "tools/loadgen", "deploy", "docs", "scripts"]
        test_cmd = "pytest -q"
    else:
        src_files = [f"internal/{m}/{m}.go" for m in mods]
        test_files = [f"internal/{m}/{m}_test.go" for m in mods[: max(4, len(mods) // 2)]]
        tests = [
            f"Test{rng.choice(go_functions)}{rng.choice(('Caps', 'HandlesEmpty', 'Retries', 'RoundTrip', 'RejectsNegative', 'Idempotent'))}"
            for _ in test_files
            for _ in range(3)
        ]
        alt_files = [f"scripts/{m}.py" for m in rng.sample(MODULES, 3)]
        functions = go_functions
        deps = rng.sample(GO_DEPS, 6)
        config_files = ["go.mod", "Makefile", f"deploy/{rng.choice(ENVS)}/{pkg}.yaml", ".env.example"]
        dirs = [f"internal/{m}" for m in mods[:4]] + [f"cmd/{repo}", "deploy", "docs", "scripts"]
        test_cmd = "go test ./..."
    w = World(
        lang=lang, org=org, repo=repo, pkg=pkg, modpath=modpath, root=f"/workspace/{repo}",
        src_files=src_files, test_files=test_files, alt_files=alt_files, config_files=config_files,
        doc_files=["README.md", "docs/architecture.md", "CONTRIBUTING.md", f"docs/{pkg}-runbook.md"],
        cjk_doc_files=["docs/设计说明.md", "docs/運用手順.md", "docs/zh/retry.md"],
        dirs=dirs, functions=functions, go_functions=go_functions, py_functions=py_functions,
        classes=classes, consts=consts, tests=tests, deps=deps, services=rng.sample(SERVICES, 8),
        ticket_prefix=org[:4].upper(), test_cmd=test_cmd,
    )  # fmt: skip
    _build_pools(rng, w, pool_blocks)
    return w


# --------------------------------------------------------------------------------------------
# block generators (run once per pool entry)
# --------------------------------------------------------------------------------------------
_PY_BODY = (
    "    if {a} is None:\n        raise ValueError(\"{a} must not be None\")",
    "    {v} = {fn2}({a}, {kw}={kw})",
    "    for i in range({kw}):\n        logger.debug(\"%s attempt %d\", {a}, i)",
    "    if {kw} > {c}:\n        {kw} = {c}",
    "    {v} = min({v} * 2, {c}) if {v} else {n}",
    "    with self._lock:\n        self._{noun}[{a}.id] = {v}",
    "    try:\n        {v} = await self._client.get(f\"/v1/{noun}/{{{a}.id}}\")\n    except httpx.TimeoutException:\n        raise {cls}Error(\"timeout fetching {noun}\") from None",
    "    # 注意: {c} 不能超过上限, 否则 {fn2} 会重复结算",
    "    {v} = [x for x in {a}.items if x.{noun}_id is not None]",
    "    metrics.increment(\"{pkg}.{noun}.processed\", len({a}))",
    "    if not {v}:\n        return {n}",
    "    assert isinstance({a}, {cls}), type({a})",
)  # fmt: skip
_GO_BODY = (
    "\tif {a} == nil {{\n\t\treturn {z}, errors.New(\"{a} must not be nil\")\n\t}}",
    "\t{v}, err := {fn2}(ctx, {a})\n\tif err != nil {{\n\t\treturn {z}, fmt.Errorf(\"{noun}: %w\", err)\n\t}}",
    "\tfor i := 0; i < {kw}; i++ {{\n\t\tlog.Debug(\"attempt\", zap.Int(\"i\", i))\n\t}}",
    "\tif {kw} > {c} {{\n\t\t{kw} = {c}\n\t}}",
    "\ts.mu.Lock()\n\tdefer s.mu.Unlock()",
    "\tctx, cancel := context.WithTimeout(ctx, {n}*time.Millisecond)\n\tdefer cancel()",
    "\t// 注意: {c} 不能超过上限",
    "\tmetrics.{cls}Processed.Add(float64(len({a})))",
    "\tselect {{\n\tcase <-ctx.Done():\n\t\treturn {z}, ctx.Err()\n\tcase s.sem <- struct{{}}{{}}:\n\t}}",
)  # fmt: skip


def _py_block(rng: random.Random, w: World) -> str:
    fn = rng.choice(w.py_functions)
    cls = rng.choice(w.classes)
    a = rng.choice(("policy", "payload", "entry", "batch", "settings", "request", "cursor", "record"))
    kw = rng.choice(("attempt", "limit", "timeout", "retries", "max_items", "page_size"))
    noun = rng.choice(NOUNS)
    v = rng.choice(("delay", "result", "items", "value", "resp"))
    fmt = dict(
        a=a,
        kw=kw,
        v=v,
        noun=noun,
        cls=cls,
        pkg=w.pkg,
        n=rng.randint(1, 500),
        c=rng.choice(w.consts),
        fn2=rng.choice(w.py_functions),
    )
    if rng.random() < 0.2:
        lines = [
            f"class {cls}{rng.choice(('Error', 'Result', 'Options'))}({rng.choice(('Exception', 'NamedTuple', 'object'))}):",
            f'    """{rng.choice(("Raised when", "Holds", "Options for"))} {noun} {rng.choice(("processing fails", "results", "requests"))}."""',
            "",
        ]
        for f_ in rng.sample(NOUNS, 3):
            lines.append(f"    {f_}: {rng.choice(('int', 'str', 'float | None', 'list[str]'))}")
        return "\n".join(lines) + "\n"
    ret = rng.choice(("float", "int", "bool", "dict[str, Any]", "list[str]", cls))
    lines = [
        f"{'async ' if rng.random() < 0.2 else ''}def {fn}({a}: {cls}, *, {kw}: int = {rng.choice(('0', '3', '30', '100'))}) -> {ret}:",
        f'    """{rng.choice(("Return", "Compute", "Validate", "Load"))} the {noun} for ``{a}``; ``{kw}`` is capped at ``{fmt["c"]}``."""',
    ]
    for _ in range(rng.randint(3, 7)):
        lines.append(rng.choice(_PY_BODY).format(**fmt))
    lines.append(f"    return {v}")
    return "\n".join(lines) + "\n"


def _go_block(rng: random.Random, w: World) -> str:
    fn = rng.choice(w.go_functions)
    cls = rng.choice(w.classes)
    a = rng.choice(("policy", "payload", "entry", "batch", "req", "cur"))
    kw = rng.choice(("attempt", "limit", "retries", "maxItems", "pageSize"))
    fmt = dict(a=a, kw=kw, v=rng.choice(("delay", "res", "items", "val")), noun=rng.choice(NOUNS), cls=cls,
               n=rng.randint(50, 5000), c=snake_to_camel(rng.choice(w.consts).lower()), fn2=rng.choice(w.go_functions),
               z=rng.choice(("0", "nil", "\"\"", "false")))  # fmt: skip
    lines = [
        f"// {fn} {rng.choice(('returns', 'computes', 'validates', 'loads'))} the {fmt['noun']} for {a}.",
        f"func (s *{cls}) {fn}(ctx context.Context, {a} *{rng.choice(w.classes)}, {kw} int) ({rng.choice(('int', 'time.Duration', 'bool', 'string', '[]byte'))}, error) {{",
    ]
    for _ in range(rng.randint(2, 6)):
        lines.append(rng.choice(_GO_BODY).format(**fmt))
    lines.append(f"\treturn {fmt['v']}, nil\n}}\n")
    return "\n".join(lines)


def _log_line(rng: random.Random, w: World) -> str:
    msg = rng.choice(LOG_MSGS).format(
        n=rng.randint(1, 9999), f=round(rng.uniform(0.1, 900.0), 1), svc=rng.choice(w.services),
        path=rng.choice(w.config_files), noun=rng.choice(NOUNS), hex=f"{rng.getrandbits(32):08x}",
    )  # fmt: skip
    mod = rng.choice(w.src_files).rsplit("/", 1)[-1]
    lvl = rng.choice(("INFO", "INFO", "DEBUG", "WARNING", "ERROR"))
    return f"{lvl:<8} {w.pkg}.{mod.split('.')[0]}:{mod}:{rng.randint(12, 480)} {msg}"


def _test_line(rng: random.Random, w: World) -> str:
    if w.lang == "python":
        tid = (
            rng.choice(w.tests).split("::")[0]
            + f"::test_{rng.choice(w.py_functions)}_{rng.choice(('ok', 'empty', 'large', 'unicode', 'negative', 'none'))}"
        )
        if rng.random() < 0.3:
            tid += f"[{rng.choice(('case', 'param', 'sample'))}{rng.randint(0, 40)}]"
        return f"{tid} {rng.choice(('PASSED', 'PASSED', 'PASSED', 'PASSED', 'SKIPPED'))} [{rng.randint(1, 99):>3}%]"
    name = f"Test{rng.choice(w.go_functions)}"
    sub = f"/{rng.choice(('empty', 'large_batch', 'unicode', 'negative', 'nil_input', 'timeout'))}"
    return f"=== RUN   {name}{sub}\n--- PASS: {name}{sub} ({rng.randint(0, 250) / 100:.2f}s)"


def _build_line(rng: random.Random, w: World) -> str:
    dep, ver = rng.choice(w.deps)
    if w.lang == "python":
        return rng.choice((
            f"Collecting {dep}=={ver}\n  Downloading {dep}-{ver}-py3-none-any.whl ({rng.randint(12, 900)} kB)",
            f"Requirement already satisfied: {dep}>={ver.split('.')[0]} in ./.venv/lib/python3.11/site-packages (from {w.repo}==0.{rng.randint(1, 20)}.0) ({ver})",
            f"#{rng.randint(3, 19)} [builder {rng.randint(1, 7)}/7] RUN pip install --no-cache-dir -r requirements.txt",
            f"#{rng.randint(3, 19)} {rng.randint(1, 60)}.{rng.randint(10, 99)} Building wheel for {dep} (pyproject.toml): finished with status 'done'",
            f"  warning: {rng.choice(w.src_files)}:{rng.randint(5, 400)}: DeprecationWarning: datetime.utcnow() is deprecated",
        ))  # fmt: skip
    return rng.choice((
        f"go: downloading {dep} {ver}",
        f"{w.modpath}/{rng.choice(w.src_files).rsplit('/', 1)[0]}",
        f"#{rng.randint(3, 19)} [builder {rng.randint(1, 6)}/6] RUN go build -trimpath -o /out/{w.repo} ./cmd/{w.repo}",
        f"# {w.modpath}/{rng.choice(w.src_files).rsplit('/', 1)[0]}\nvet: {rng.choice(w.src_files)}:{rng.randint(5, 400)}:{rng.randint(2, 40)}: result of fmt.Errorf call not used",
    ))  # fmt: skip


def _diff_hunk(rng: random.Random, w: World, code: Pool) -> str:
    block = code.items[int(rng.random() * len(code.items))].rstrip("\n").split("\n")
    start = rng.randint(10, 600)
    k = rng.randrange(len(block))
    old = block[k]
    new = (
        old.replace("30", str(rng.randint(31, 90)))
        if "30" in old
        else old + ("  # clamp" if w.lang == "python" and not old.startswith("\t") else "")
    )
    if new == old:
        new = old.rstrip() + " // clamp"
    body = [" " + ln for ln in block[:k]] + ["-" + old, "+" + new] + [" " + ln for ln in block[k + 1 :]]
    return f"@@ -{start},{len(block)} +{start},{len(block)} @@\n" + "\n".join(body)


def _jsonl_line(rng: random.Random, w: World) -> str:
    rec = {
        "ts": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z",
        "level": rng.choice(("info", "info", "warn", "error", "debug")),
        "service": rng.choice(w.services),
        "msg": rng.choice(LOG_MSGS).format(n=rng.randint(1, 9999), f=round(rng.uniform(0.1, 900.0), 1), svc=rng.choice(w.services),
                                           path=rng.choice(w.config_files), noun=rng.choice(NOUNS), hex=f"{rng.getrandbits(32):08x}"),
        "request_id": f"{rng.getrandbits(64):016x}",
        "latency_ms": rng.randint(1, 30000),
    }  # fmt: skip
    if rng.random() < 0.3:
        rec["attrs"] = {
            "attempt": rng.randint(1, 9),
            "region": rng.choice(("eu-west-1", "us-east-1", "ap-northeast-1")),
        }
    return json.dumps(rec, separators=(",", ":"))


def _ls_line(rng: random.Random, w: World) -> str:
    name = rng.choice(w.src_files + w.test_files + w.config_files + w.doc_files).rsplit("/", 1)[-1]
    perm = rng.choice(("-rw-r--r--", "-rw-r--r--", "-rwxr-xr-x", "drwxr-xr-x"))
    return f"{perm}  1 dev  dev  {rng.randint(64, 48000):>6} {rng.choice(MONTHS)} {rng.randint(1, 28):>2} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {name}"


def _find_line(rng: random.Random, w: World) -> str:
    base = rng.choice(w.dirs)
    ext = ".py" if w.lang == "python" else ".go"
    return f"./{base}/{rng.choice(MODULES)}_{rng.choice(NOUNS)}{rng.choice((ext, ext, '.json', '.md', '_test' + ext if w.lang == 'go' else ext))}"


def _grep_line(rng: random.Random, w: World, code: Pool) -> str:
    block = code.items[int(rng.random() * len(code.items))].split("\n")
    ln = block[rng.randrange(len(block))].strip() or "pass"
    return f"{rng.choice(w.src_files)}:{rng.randint(3, 900)}:{ln}"


def _gitlog_line(rng: random.Random, w: World) -> str:
    mod = rng.choice(w.src_files).rsplit("/", 1)[-1].split(".")[0]
    subj = rng.choice((
        "clamp {noun} to configured cap", "handle empty {noun} list", "add tracing around {noun} flush",
        "bump {dep} to {ver}", "retry {noun} fetch on 503", "drop deprecated {noun} alias", "fix flaky {noun} test",
    )).format(noun=rng.choice(NOUNS), dep=rng.choice(w.deps)[0], ver=rng.choice(w.deps)[1])  # fmt: skip
    return f"{rng.getrandbits(28):07x} {rng.choice(('fix', 'feat', 'chore', 'refactor', 'test'))}({mod}): {subj} (#{rng.randint(100, 2400)})"


def _trace_block(rng: random.Random, w: World, code: Pool) -> str:
    if w.lang == "python":
        lines = ["Traceback (most recent call last):"]
        for _ in range(rng.randint(3, 7)):
            f = rng.choice(w.src_files)
            block = code.items[int(rng.random() * len(code.items))].split("\n")
            lines.append(f'  File "{w.root}/{f}", line {rng.randint(5, 700)}, in {rng.choice(w.py_functions)}')
            lines.append("    " + (block[rng.randrange(len(block))].strip() or "return result"))
        et, msg = rng.choice(PY_ERRORS)
        lines.append(
            f"{et}: "
            + msg.format(
                x=rng.randint(31, 999),
                y=rng.randint(1, 30),
                noun=rng.choice(NOUNS),
                fn=rng.choice(w.py_functions),
                kw="timeout",
                op=rng.choice(OPERATIONS),
            )
        )
        return "\n".join(lines)
    lines = [f"goroutine {rng.randint(1, 400)} [{rng.choice(('running', 'chan receive', 'select', 'IO wait'))}]:"]
    for _ in range(rng.randint(3, 7)):
        f = rng.choice(w.src_files)
        lines.append(
            f"{w.modpath}/{f.rsplit('/', 1)[0]}.(*{rng.choice(w.classes)}).{rng.choice(w.go_functions)}(0xc000{rng.getrandbits(24):06x}, {{0x{rng.getrandbits(24):x}, 0x{rng.getrandbits(8):x}}})"
        )
        lines.append(f"\t{w.root}/{f}:{rng.randint(5, 700)} +0x{rng.getrandbits(12):x}")
    return "\n".join(lines)


def _cjk_para(rng: random.Random, w: World) -> str:
    n = rng.randint(2, 4)
    return "\n".join(rng.choice(CJK_LINES).format(**_doc_fmt(rng, w)) for _ in range(n))


def _en_para(rng: random.Random, w: World) -> str:
    return "\n".join(rng.choice(EN_DOC_LINES).format(**_doc_fmt(rng, w)) for _ in range(rng.randint(1, 3)))


def _doc_fmt(rng: random.Random, w: World) -> dict[str, object]:
    return dict(
        fn=rng.choice(w.functions), n=rng.randint(5, 600), path=rng.choice(w.config_files), test=rng.choice(w.tests),
        mod=rng.choice(w.src_files), dep=rng.choice(w.deps)[0], cls=rng.choice(w.classes), env=rng.choice(ENVS),
        testcmd=w.test_cmd, svc=rng.choice(w.services), ticket=f"{w.ticket_prefix}-{rng.randint(100, 999)}",
        kw=rng.choice(("timeout", "retries", "strict", "page_size")),
    )  # fmt: skip


def _build_pools(rng: random.Random, w: World, n: int) -> None:
    py = Pool([_py_block(rng, w) for _ in range(n)])
    go = Pool([_go_block(rng, w) for _ in range(n)])
    code = py if w.lang == "python" else go
    w.pools = {
        "py": py,
        "go": go,
        "code": code,
        "alt": go if w.lang == "python" else py,
        "log": Pool([_log_line(rng, w) for _ in range(n)]),
        "test": Pool([_test_line(rng, w) for _ in range(n)]),
        "build": Pool([_build_line(rng, w) for _ in range(n)]),
        "diff": Pool([_diff_hunk(rng, w, code) for _ in range(n)]),
        "jsonl": Pool([_jsonl_line(rng, w) for _ in range(n)]),
        "ls": Pool([_ls_line(rng, w) for _ in range(n)]),
        "find": Pool([_find_line(rng, w) for _ in range(n)]),
        "grep": Pool([_grep_line(rng, w, code) for _ in range(n)]),
        "gitlog": Pool([_gitlog_line(rng, w) for _ in range(n)]),
        "trace": Pool([_trace_block(rng, w, code) for _ in range(max(8, n // 4))]),
        "cjk": Pool([_cjk_para(rng, w) for _ in range(max(8, n // 4))]),
        "en": Pool([_en_para(rng, w) for _ in range(max(8, n // 4))]),
    }


# --------------------------------------------------------------------------------------------
# actions: (tool, what it does) -> arguments, a one-line lead for the assistant and the output
# --------------------------------------------------------------------------------------------
SMALL, MEDIUM, LARGE = "small", "medium", "large"

# Which actions each tool can take per size class. read_file/write_file/edit_file are exempt
# from harness9's tool-time offload hook, so they never get the "large" (hook) class; large
# reads have their own class, "large_read", offloaded only at compaction time.
ACTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "read_file": {SMALL: ("read_code", "read_code", "read_code", "read_alt", "read_config", "read_doc"),
                  MEDIUM: ("read_code", "read_code", "read_alt", "read_doc"), "large_read": ("read_code",)},
    "bash": {SMALL: ("misc", "gitlog", "build", "curl", "repro"), MEDIUM: ("build", "gitlog", "curl", "repro", "find"),
             LARGE: ("build", "curl", "find", "repro")},
    "grep": {SMALL: ("grep",), MEDIUM: ("grep",), LARGE: ("grep",)},
    "run_tests": {SMALL: ("tests",), MEDIUM: ("tests",), LARGE: ("tests",)},
    "list_dir": {SMALL: ("ls",), MEDIUM: ("ls", "tree"), LARGE: ("tree",)},
    "git_diff": {SMALL: ("diff",), MEDIUM: ("diff",), LARGE: ("diff",)},
    "edit_file": {SMALL: ("edit",)},
    "write_file": {SMALL: ("write",)},
}  # fmt: skip

TOOL_SCHEMAS: tuple[dict[str, object], ...] = (
    {"name": "bash", "description": "Run a shell command in the repository root and return its combined stdout/stderr.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "timeout_s": {"type": "integer"}}, "required": ["command"]}},
    {"name": "read_file", "description": "Read a UTF-8 text file; offset/limit select a line range.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, "required": ["path"]}},
    {"name": "edit_file", "description": "Replace an exact string in a file (must match once).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}, "required": ["path", "old_string", "new_string"]}},
    {"name": "write_file", "description": "Create or overwrite a file with the given content.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}},
    {"name": "grep", "description": "Search files with a regular expression (ripgrep syntax).",
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"}}, "required": ["pattern"]}},
    {"name": "run_tests", "description": "Run the project's test suite or a subset of it.",
     "input_schema": {"type": "object", "properties": {"target": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}}},
    {"name": "list_dir", "description": "List a directory; recursive=true walks subdirectories.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "recursive": {"type": "boolean"}}, "required": ["path"]}},
    {"name": "git_diff", "description": "Show the working-tree diff, optionally for one path.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "staged": {"type": "boolean"}}}},
)  # fmt: skip


@dataclass
class Rendered:
    """One rendered tool call: its JSON arguments, the assistant's lead sentence and the output."""

    args: dict[str, object]
    lead: str
    output: str
    path: str | None = None  # the file an edit/write touched (an artifact)
    is_error: bool = False


@dataclass
class Failure:
    """A test failure to show in a run_tests output (footer, so it is never cut)."""

    test: str  # pytest node id or Go test name
    file: str  # the test file (its directory is the Go package)
    err_type: str
    err_msg: str


def _fit(
    rng: random.Random, pool: Pool, header: list[str], footer: list[str], extra: Sequence[str], target: int
) -> str:
    """header + pool blocks + footer, about ``target`` bytes; ``extra`` lines are placed at
    random block boundaries (after the header)."""
    fixed = sum(len(s.encode("utf-8")) + 1 for s in header) + sum(len(s.encode("utf-8")) + 1 for s in footer)
    fixed += sum(len(s.encode("utf-8")) + 1 for s in extra)
    body: list[str] = []
    fill(rng, pool, target - fixed, body)
    if not body and not extra:  # a tiny target still gets one line, never an empty output
        body.append(pool.items[int(rng.random() * len(pool.items))].split("\n", 1)[0])
    for line in extra:
        body.insert(rng.randint(0, len(body)), line)
    return "\n".join(header + body + footer)


@dataclass(frozen=True)
class _Call:
    """One call to render, once its action is drawn (the arguments of :func:`render`)."""

    action: str
    cls: str
    target: int
    cjk: bool
    extra: Sequence[str]
    failure: Failure | None
    passing: bool
    edit_path: str | None
    edit_desc: str | None


def render(
    rng: random.Random,
    w: World,
    tool: str,
    cls: str,
    target: int,
    *,
    cjk: bool = False,
    extra: Sequence[str] = (),
    failure: Failure | None = None,
    passing: bool = False,
    edit_path: str | None = None,
    edit_desc: str | None = None,
) -> Rendered:
    """Render one call of ``tool`` whose output should be about ``target`` bytes (size class
    ``cls``). ``extra`` lines (planted facts) are embedded in the output; ``failure`` makes a
    run_tests output fail with that error; ``edit_path`` fixes the file an edit touches."""
    action = rng.choice(ACTIONS[tool][cls])
    renderer = _RENDERERS.get(action)
    if renderer is None:  # pragma: no cover - ACTIONS and _RENDERERS disagree
        raise AssertionError(f"unhandled action {action!r}")
    return renderer(rng, w, _Call(action, cls, target, cjk, extra, failure, passing, edit_path, edit_desc))


def _render_read_code(rng: random.Random, w: World, c: _Call) -> Rendered:
    path = rng.choice(w.src_files if c.action == "read_code" else w.alt_files)
    is_go = path.endswith(".go")
    pool = w.pools["go"] if is_go else w.pools["py"]
    if is_go:
        pkgname = path.rsplit("/", 2)[-2] if "/" in path else "main"
        header = [
            f"package {pkgname}",
            "",
            "import (",
            '\t"context"',
            '\t"errors"',
            '\t"fmt"',
            '\t"time"',
            "",
            '\t"go.uber.org/zap"',
            ")",
            "",
        ]
    else:
        header = [f'"""{path.rsplit("/", 1)[-1][:-3].capitalize()} helpers for {w.pkg}."""', "", "from __future__ import annotations", "",
                  "import logging", "from typing import Any", "", "import httpx", "", "logger = logging.getLogger(__name__)", ""]  # fmt: skip
    args: dict[str, object] = {"path": path}
    if c.cls != SMALL and rng.random() < 0.3:
        args.update(offset=1, limit=2000)
    lead = rng.choice(("Let me read {p} to see how {f} is implemented.", "Opening {p}.", "I need the current contents of {p}.",
                       "Checking {p} for where {c} is used.")).format(p=path, f=rng.choice(w.functions), c=rng.choice(w.consts))  # fmt: skip
    return Rendered(args, lead, _fit(rng, pool, header, [], c.extra, c.target))


def _render_read_config(rng: random.Random, w: World, c: _Call) -> Rendered:
    path = rng.choice(w.config_files)
    lines = _config_lines(rng, w, path)
    body = lines + list(c.extra)
    return Rendered({"path": path}, f"Reading {path} for the relevant settings.", "\n".join(body))


def _render_read_doc(rng: random.Random, w: World, c: _Call) -> Rendered:
    if c.cjk:
        path = rng.choice(w.cjk_doc_files)
        header = [rng.choice(CJK_TITLES), ""]
        pool = w.pools["cjk"]
    else:
        path = rng.choice(w.doc_files)
        header = [f"# {w.repo}: {path.rsplit('/', 1)[-1][:-3]}", ""]
        pool = w.pools["en"]
    return Rendered({"path": path}, f"Reading {path} for background.", _fit(rng, pool, header, [], c.extra, c.target))


def _render_tests_call(rng: random.Random, w: World, c: _Call) -> Rendered:
    return _render_tests(rng, w, c.cls, c.target, c.extra, c.failure, c.passing)


def _render_build(rng: random.Random, w: World, c: _Call) -> Rendered:
    if w.lang == "python":
        cmd = rng.choice(("pip install -e '.[test]'", "docker build -t {r}:dev .", "python -m build")).format(r=w.repo)
    else:
        cmd = rng.choice(("go build -v ./...", "docker build -t {r}:dev .", "go vet ./...")).format(r=w.repo)
    footer = [
        rng.choice(
            (
                "Successfully installed " + " ".join(f"{d}-{v}" for d, v in w.deps[:3]),
                f"#19 naming to docker.io/library/{w.repo}:dev done",
                "ok",
            )
        )
    ]
    return Rendered(
        {"command": cmd},
        f"Rebuilding with `{cmd}`.",
        _fit(rng, w.pools["build"], [f"$ {cmd}"], footer, c.extra, c.target),
    )


def _render_gitlog(rng: random.Random, w: World, c: _Call) -> Rendered:
    cmd = rng.choice(
        ("git log --oneline -n 200", "git log --oneline -- {f}", "git log --oneline --since=2.weeks")
    ).format(f=rng.choice(w.src_files))
    return Rendered(
        {"command": cmd}, "Looking at recent history.", _fit(rng, w.pools["gitlog"], [], [], c.extra, c.target)
    )


def _render_curl(rng: random.Random, w: World, c: _Call) -> Rendered:
    svc = rng.choice(w.services)
    cmd = rng.choice(
        (
            f"curl -s http://localhost:8080/debug/events?service={svc}",
            f"kubectl logs deploy/{svc} --since=1h -n {w.pkg}",
            f"jq -c '.[]' logs/{svc}.json",
        )
    )
    return Rendered(
        {"command": cmd}, f"Pulling recent {svc} logs.", _fit(rng, w.pools["jsonl"], [], [], c.extra, c.target)
    )


def _render_repro(rng: random.Random, w: World, c: _Call) -> Rendered:
    p = w.pools
    script = f"scripts/repro_{rng.choice(NOUNS)}.{'py' if w.lang == 'python' else 'go'}"
    cmd = f"python {script}" if w.lang == "python" else f"go run ./{script}"
    text = _fit(rng, p["log"], [f"$ {cmd}"], [rng.choice(p["trace"].items), "exit status 1"], c.extra, c.target)
    return Rendered(
        {"command": cmd, "timeout_s": 120}, f"Running the reproduction script {script}.", text, is_error=True
    )


def _render_find(rng: random.Random, w: World, c: _Call) -> Rendered:
    cmd = rng.choice(("find . -name '*.{e}' -not -path './.venv/*'", "find . -type f -newer {f}")).format(
        e="py" if w.lang == "python" else "go", f=rng.choice(w.config_files)
    )
    return Rendered({"command": cmd}, "Listing candidate files.", _fit(rng, w.pools["find"], [], [], c.extra, c.target))


def _render_misc(rng: random.Random, w: World, c: _Call) -> Rendered:
    cmd, out = rng.choice((
        ("git status --short", "\n".join(f" M {f}" for f in rng.sample(w.src_files, 3)) + "\n?? " + rng.choice(w.test_files)),
        ("python --version" if w.lang == "python" else "go version", "Python 3.11.9" if w.lang == "python" else "go version go1.22.4 linux/amd64"),
        (f"wc -l {' '.join(w.src_files[:3])}", "\n".join(f"  {rng.randint(40, 900)} {f}" for f in w.src_files[:3])),
        ("git branch --show-current", f"fix/{w.ticket_prefix.lower()}-{rng.randint(100, 999)}-{rng.choice(NOUNS)}"),
    ))  # fmt: skip
    return Rendered({"command": cmd}, f"Quick check: `{cmd}`.", "\n".join([out, *c.extra]))


def _render_grep(rng: random.Random, w: World, c: _Call) -> Rendered:
    sym = rng.choice(w.functions + w.consts)
    return Rendered(
        {"pattern": sym, "path": "."},
        f"Searching for usages of {sym}.",
        _fit(rng, w.pools["grep"], [], [], c.extra, c.target),
    )


def _render_ls(rng: random.Random, w: World, c: _Call) -> Rendered:
    d = rng.choice(w.dirs)
    return Rendered(
        {"path": d},
        f"Listing {d} to get oriented.",
        _fit(rng, w.pools["ls"], [f"total {rng.randint(8, 400)}"], [], c.extra, c.target),
    )


def _render_tree(rng: random.Random, w: World, c: _Call) -> Rendered:
    d = rng.choice(w.dirs)
    return Rendered(
        {"path": d, "recursive": True},
        f"Walking {d} recursively.",
        _fit(rng, w.pools["find"], [d], [], c.extra, c.target),
    )


def _render_diff(rng: random.Random, w: World, c: _Call) -> Rendered:
    path = rng.choice(w.src_files)
    header = [
        f"diff --git a/{path} b/{path}",
        f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
    ]
    return Rendered(
        {"path": path},
        f"Reviewing my changes to {path} so far.",
        _fit(rng, w.pools["diff"], header, [], c.extra, c.target),
    )


def _render_edit(rng: random.Random, w: World, c: _Call) -> Rendered:
    path = c.edit_path or rng.choice(w.src_files + w.test_files)
    code = w.pools["go" if path.endswith(".go") else "py"]
    block = code.items[int(rng.random() * len(code.items))].split("\n")
    old = block[rng.randrange(len(block))] or block[0]
    new = _edit_line(rng, old, path.endswith(".go"))
    desc = c.edit_desc or rng.choice(
        (
            "tightening the bounds check",
            "clamping the value to the cap",
            "handling the empty case",
            "renaming for clarity",
        )
    )
    out = f"Edited {path}: replaced 1 occurrence ({1 + old.count(chr(10))} line -> {1 + new.count(chr(10))} line)."
    if c.extra:
        out += "\n" + "\n".join(c.extra)
    return Rendered({"path": path, "old_string": old, "new_string": new}, f"Editing {path}: {desc}.", out, path=path)


def _render_write(rng: random.Random, w: World, c: _Call) -> Rendered:
    path = c.edit_path or _new_file(rng, w)
    code = w.pools["go" if path.endswith(".go") else "py"]
    content = "\n".join(code.items[int(rng.random() * len(code.items))] for _ in range(rng.randint(1, 3)))
    out = f"Wrote {len(content.encode('utf-8'))} bytes to {path}."
    if c.extra:
        out += "\n" + "\n".join(c.extra)
    return Rendered({"path": path, "content": content}, f"Creating {path}.", out, path=path)


_RENDERERS: dict[str, Callable[[random.Random, World, _Call], Rendered]] = {
    "read_code": _render_read_code,
    "read_alt": _render_read_code,
    "read_config": _render_read_config,
    "read_doc": _render_read_doc,
    "tests": _render_tests_call,
    "build": _render_build,
    "gitlog": _render_gitlog,
    "curl": _render_curl,
    "repro": _render_repro,
    "find": _render_find,
    "misc": _render_misc,
    "grep": _render_grep,
    "ls": _render_ls,
    "tree": _render_tree,
    "diff": _render_diff,
    "edit": _render_edit,
    "write": _render_write,
}
"""The renderer of each action (content kind) that :data:`ACTIONS` can draw."""


def _edit_line(rng: random.Random, old: str, go: bool) -> str:
    """A plausible one-line change to ``old``."""
    for a_, b_ in (
        ("30", str(rng.choice((45, 60, 90)))),
        ("min(", "max("),
        ("> ", ">= "),
        ("is None", "is None or not {x}"),
    ):
        if a_ in old and rng.random() < 0.7:
            return old.replace(a_, b_, 1).replace("{x}", old.strip().split(" ")[1] if " " in old.strip() else "x")
    c = "//" if go else "#"
    return old + rng.choice(
        (
            f"  {c} clamp to cap",
            f"  {c} TODO: remove after migration",
            f"  {c} see ticket",
            f"  {c} keep in sync with config",
        )
    )


def _new_file(rng: random.Random, w: World) -> str:
    noun = rng.choice(NOUNS)
    if w.lang == "python":
        path = rng.choice(
            (f"src/{w.pkg}/{noun}_compat.py", f"tests/test_{noun}_regression.py", f"src/{w.pkg}/_{noun}.py")
        )
    else:
        path = rng.choice(
            (f"internal/{noun}/{noun}.go", f"internal/{noun}/{noun}_test.go", f"internal/compat/{noun}.go")
        )
    if path not in w.written:
        w.written.append(path)
    return path


def _config_lines(rng: random.Random, w: World, path: str) -> list[str]:
    if path.endswith(".yaml"):
        return [f"service: {w.pkg}", "replicas: " + str(rng.randint(2, 12)), "resources:", f"  cpu: {rng.randint(1, 8) * 250}m",
                f"  memory: {rng.randint(1, 16) * 256}Mi", "env:", f"  LOG_LEVEL: {rng.choice(('info', 'debug'))}",
                f"  {w.pkg.upper()}_UPSTREAM: http://{rng.choice(w.services)}:8080"]  # fmt: skip
    if path == "pyproject.toml":
        return ["[project]", f'name = "{w.repo}"', f'version = "0.{rng.randint(1, 30)}.{rng.randint(0, 9)}"', 'requires-python = ">=3.10"',
                "dependencies = [" + ", ".join(f'"{d}>={v}"' for d, v in w.deps[:5]) + "]", "", "[tool.pytest.ini_options]",
                'addopts = "-ra --strict-markers"', 'testpaths = ["tests"]']  # fmt: skip
    if path == "go.mod":
        return [f"module {w.modpath}", "", "go 1.22", "", "require ("] + [f"\t{d} {v}" for d, v in w.deps] + [")"]
    if path == "Makefile":
        return [".PHONY: test lint", "test:", "\tgo test -race -count=1 ./...", "lint:", "\tgolangci-lint run ./..."]
    return [
        f"{w.pkg.upper()}_{k}={v}"
        for k, v in (
            ("DB_URL", "postgres://localhost:5432/" + w.pkg),
            ("LOG_LEVEL", "info"),
            ("WORKERS", str(rng.randint(2, 16))),
        )
    ]


def _render_tests(
    rng: random.Random, w: World, cls: str, target: int, extra: Sequence[str], failure: Failure | None, passing: bool
) -> Rendered:
    if w.lang == "python":
        tf = failure.file if failure else rng.choice(w.test_files)
        target_arg = tf if cls == SMALL else "tests/"
        args: dict[str, object] = {"target": target_arg, "args": ["-x", "-q"] if cls == SMALL else ["-v"]}
        header = ["============================= test session starts ==============================",
                  "platform linux -- Python 3.11.9, pytest-8.2.1, pluggy-1.5.0", f"rootdir: {w.root}", "configfile: pyproject.toml",
                  "plugins: anyio-4.4.0, cov-5.0.0, timeout-2.3.1", f"collected {rng.randint(40, 900)} items", ""]  # fmt: skip
        n_pass = rng.randint(20, 600)
        if failure is not None and not passing:
            name = failure.test.split("::")[-1]
            footer = ["", "=================================== FAILURES ===================================",
                      f"{'_' * 20} {name} {'_' * 20}", "", f"    def {name}():",
                      f">       assert {rng.choice(w.py_functions)}(policy, attempt={rng.randint(2, 20)}) == {rng.randint(5, 60)}",
                      f"E       {failure.err_type}: {failure.err_msg}", "", f"{failure.file}:{rng.randint(10, 300)}: {failure.err_type}",
                      "=========================== short test summary info ============================",
                      f"FAILED {failure.test} - {failure.err_type}: {failure.err_msg}",
                      f"========================= 1 failed, {n_pass} passed in {rng.randint(1, 90)}.{rng.randint(10, 99)}s ========================="]  # fmt: skip
        else:
            footer = [
                "",
                f"============================== {n_pass} passed in {rng.randint(1, 90)}.{rng.randint(10, 99)}s ==============================",
            ]
        out = _fit(rng, w.pools["test"], header, footer, extra, target)
        lead = f"Running {target_arg} to check the current state."
        return Rendered(args, lead, out)
    pkgdir = (failure.file if failure else rng.choice(w.test_files)).rsplit("/", 1)[0]
    run = failure.test if failure else rng.choice(w.tests)
    args = {
        "target": f"./{pkgdir}/..." if cls != SMALL else f"./{pkgdir}",
        "args": ["-run", run, "-count=1"] if cls == SMALL else ["-v", "-count=1"],
    }
    if failure is not None and not passing:
        footer = [f"=== RUN   {failure.test}", f"    {pkgdir.rsplit('/', 1)[-1]}_test.go:{rng.randint(10, 300)}: {failure.err_type}: {failure.err_msg}",
                  f"--- FAIL: {failure.test} ({rng.randint(0, 300) / 100:.2f}s)", "FAIL", f"FAIL\t{w.modpath}/{pkgdir}\t{rng.randint(100, 9000) / 1000:.3f}s", "FAIL"]  # fmt: skip
    else:
        footer = ["PASS", f"ok  \t{w.modpath}/{pkgdir}\t{rng.randint(100, 9000) / 1000:.3f}s"]
    out = _fit(rng, w.pools["test"], [], footer, extra, target)
    return Rendered(args, f"Running the tests in ./{pkgdir}.", out)


SYSTEM_PROMPT = """You are an autonomous software engineering agent working in a sandboxed checkout of {org}/{repo} at {root}.

You can call these tools: bash, read_file, edit_file, write_file, grep, run_tests, list_dir, git_diff.
Work in small, verifiable steps:
- Before changing code, read the relevant files and reproduce the problem.
- Prefer minimal, targeted edits; do not reformat unrelated code.
- Run the relevant tests after every change and report failures verbatim.
- Never push, tag or publish anything; the user reviews and merges.
- If an approach fails, say so explicitly, explain why, and try something different.
- Keep the user informed with short progress notes and an explicit plan of next steps.
- Large tool outputs may be saved to files under .harness9/tool_results/; read them with read_file and offset/limit.

The main language of this repository is {lang_name}. The test command is `{test_cmd}`.
When you are done, summarise what you changed, which files you touched and how you verified it."""
