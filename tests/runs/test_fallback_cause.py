"""The cause behind harness9's fallback (issue 21): ``fallback_error`` keeps harness9's string
(``LLM summary failed in TierSoft``, checked by conformance), ``fallback_cause`` says why the
summary failed, so a bad key, an outage and a timeout can be told apart in the calls table and
the run summary. The real ``anthropic`` SDK over a fake transport, never the network."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")
anthropic_sdk = pytest.importorskip("anthropic")

from h9eval.compaction.policies import make_policy  # noqa: E402
from h9eval.results.schema import CALL_COLUMNS, CALLS_SCHEMA_VERSION, READABLE_VERSIONS  # noqa: E402
from h9eval.results.store import load_results  # noqa: E402
from h9eval.runs.replay import replay  # noqa: E402
from h9eval.summarizers.registry import make_summarizer  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

KEY = "sk-ant-FAKE-cause-0123456789"
FALLBACK = re.compile(r"^LLM summary failed in Tier(Warn|Soft|Full)$")


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anthropic_sdk._base_client.SyncAPIClient, "_calculate_retry_timeout", lambda *a, **k: 0.0)


def unauthorized(r: Any) -> Any:
    return httpx2.Response(
        401, json={"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
    )


def refused(r: Any) -> Any:
    raise httpx2.ConnectError("[Errno 111] Connection refused", request=r)


def timeout(r: Any) -> Any:
    raise httpx2.ReadTimeout("read timed out", request=r)


def run_with(handler: Any, out: Path | None = None) -> Any:
    summ = make_summarizer(
        "anthropic",
        api_key=KEY,
        base_url="http://fake.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
        breaker_failures=0,  # every summary reaches the endpoint: the breaker has its own tests
    )
    return replay(
        generate("small", seed=0),
        make_policy("progressive", context_window_tokens=16_000),
        summarizer=summ,
        out_dir=out,
    )


@pytest.mark.parametrize(
    ("handler", "cause"),
    [
        (unauthorized, r"HTTP 401 authentication_error: invalid x-api-key"),
        (refused, r"connection error"),
        (timeout, r"timed out"),
    ],
    ids=["401", "refused", "timeout"],
)
def test_the_cause_is_recorded_beside_harness9s_fallback_error(handler: Any, cause: str, tmp_path: Path) -> None:
    res = run_with(handler, tmp_path / "run")
    c = res.calls
    fb = c[c["fallback"]]
    assert len(fb) >= 3, "the window must be small enough that several summaries fail"
    assert all(FALLBACK.match(e) for e in fb["fallback_error"]), "harness9's string is kept as is"
    assert all(re.search(cause, x) for x in fb["fallback_cause"]), fb["fallback_cause"].unique()
    assert (c.loc[~c["fallback"], "fallback_cause"] == "").all()
    assert KEY not in "".join(c["fallback_cause"])
    causes = res.summary()["fallback_causes"]
    assert sum(causes.values()) == len(fb) and all(re.search(cause, k) for k in causes)
    # the column is written and read back
    import pandas as pd

    assert list(pd.read_parquet(tmp_path / "run" / "calls.parquet")["fallback_cause"]) == list(c["fallback_cause"])


def test_the_three_causes_differ() -> None:
    seen = [set(run_with(h).calls.query("fallback")["fallback_cause"]) for h in (unauthorized, refused, timeout)]
    assert all(len(s) == 1 for s in seen)
    assert len(set.union(*seen)) == 3


def test_no_fallback_no_cause() -> None:
    res = replay(generate("small", seed=0), make_policy("progressive", context_window_tokens=16_000))
    assert int(res.calls["summarizer_calls"].sum()) > 0
    assert (res.calls["fallback_cause"] == "").all() and res.summary()["fallback_causes"] == {}


def test_the_column_is_appended_and_version_1_tables_still_read() -> None:
    at = CALL_COLUMNS.index("fallback_cause")
    assert CALL_COLUMNS[at : at + 2] == ("fallback_cause", "offload_write_failures")
    # appended without a bump (the calls table's rule): older files lack it and still load
    assert CALLS_SCHEMA_VERSION in READABLE_VERSIONS["calls"]
    r = load_results(Path(__file__).resolve().parents[1] / "data" / "results-v1")
    assert len(r.calls) == 80 and ("fallback_cause" not in r.calls.columns or r.calls["fallback_cause"].isna().all())
    assert "offload_write_failures" not in r.calls.columns or r.calls["offload_write_failures"].isna().all()
