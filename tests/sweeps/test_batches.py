"""Sweeps through the Message Batches API (issue 33), against a fake Anthropic server on 127.0.0.1
(tests/fake_anthropic.py) and the real ``anthropic`` SDK: the same summaries as direct calls at
half the price, a sweep killed while its batch is in flight resumes by the recorded batch id
without sending a paid request again, failed batch requests fall back, and bad settings are
one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from h9eval.cli import main  # noqa: E402
from h9eval.core.budget import SPEND_FILE, call_bound_usd  # noqa: E402
from h9eval.core.errors import ConfigError, SummarizerError  # noqa: E402
from h9eval.summarizers.anthropic import DEFAULT_PRICES_USD_PER_MTOK, price_for  # noqa: E402
from h9eval.summarizers.batches import BATCH_DIR_NAME, BatchClient, BatchStore  # noqa: E402
from h9eval.sweeps.sweep import sweep  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, serve  # noqa: E402

KEY = "sk-ant-h9eval-batches-test-key"
MODEL = "claude-haiku-4-5"
# synthetic:small:2 at 24,000 tokens asks for 2 summaries; two policy entries of equal parameters
# send the same requests (one session id per task), which one batch request answers for both
TASK = "synthetic:small:2"
PROGRESSIVE = {"kind": "progressive", "params": {"context_window_tokens": 24000}}


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with serve() as f:
        yield f


def spec(url: str, *, batched: bool = True, **summ: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "name": "batched",
        "tasks": {"specs": [TASK]},
        "policies": [{**PROGRESSIVE, "name": "a"}, {**PROGRESSIVE, "name": "b"}],
        "summarizer": {"name": "anthropic", "params": {"base_url": url, "model": MODEL, "max_retries": 0}, **summ},
    }
    if batched:
        s["summarizer"].update(batch=True, batch_poll_interval_s=0.01)
    return s


def sent_ids(fake: FakeAnthropic) -> list[str]:
    return [cid for c in fake.creates for cid in c]


def test_batched_sweep_gives_the_direct_summaries_at_half_price(tmp_path: Path, fake: FakeAnthropic) -> None:
    b = sweep(spec(fake.url), out_dir=tmp_path / "batched", workers=0, progress=False)
    assert b.ok == 2 and not fake.messages  # no direct call
    ids = sent_ids(fake)
    assert len(fake.creates) == 2 and len(ids) == len(set(ids)) == 2  # a round per summary, no request sent twice
    d = sweep(spec(fake.url, batched=False), out_dir=tmp_path / "direct", workers=0, progress=False)
    assert d.ok == 2 and len(fake.messages) == len(ids)  # the same requests, one by one

    rb, rd = (r.load().runs.sort_values("run_id").reset_index(drop=True) for r in (b, d))
    same = ["run_id", "summarizer_calls", "summarizer_cache_hits", "fallbacks", "n_compactions", "final_tokens_sent"]
    assert rb[same].equals(rd[same])
    assert list(rb["summarizer_calls"]) == [2, 2] and list(rb["summarizer_cache_hits"]) == [0, 2]  # b's were a's
    assert rb["summarizer_cost_usd"].sum() > 0
    assert rb["summarizer_cost_usd"].to_numpy() == pytest.approx(0.5 * rd["summarizer_cost_usd"].to_numpy())
    cb, cd = (r.load().calls for r in (b, d))
    assert (cb["summarizer_batched_calls"] == cb["summarizer_calls"]).all() and cb[
        "summarizer_batched_calls"
    ].sum() == 4
    assert cd["summarizer_batched_calls"].sum() == 0
    assert cb["summarizer_bill_usd"].sum() == pytest.approx(0.5 * cd["summarizer_bill_usd"].sum())
    # the compaction records hold the same summaries
    cmp_b, cmp_d = (r.load().compactions.sort_values(["run_id", "record_index"]) for r in (b, d))
    assert (
        list(cmp_b["summary_text"]) == list(cmp_d["summary_text"])
        and cmp_b["summary_text"].str.contains("Ongoing").any()
    )

    # every batch's record: collected, who paid each request; one result per request
    store = BatchStore(b.out_dir / BATCH_DIR_NAME)
    recs = store.records()
    assert recs and all(r["state"] == "collected" for r in recs)
    owners = {cid: rid for r in recs for cid, rid in r["requests"].items()}
    assert sorted(owners) == sorted(ids) and all(store.result(cid)["result"]["type"] == "succeeded" for cid in ids)

    # a rerun reuses every cell and sends nothing
    n = len(fake.creates)
    again = sweep(spec(fake.url), out_dir=tmp_path / "batched", workers=0, progress=False)
    assert again.reused == 2 and len(fake.creates) == n


def _interrupt_after_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    def wait(self: BatchClient, batch_id: str) -> None:
        raise KeyboardInterrupt  # as if the sweep were stopped while polling

    monkeypatch.setattr(BatchClient, "wait", wait)


def test_interrupted_while_polling_resumes_by_the_recorded_batch_id(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        _interrupt_after_submit(m)
        with pytest.raises(KeyboardInterrupt):
            sweep(spec(fake.url), out_dir=tmp_path / "s", workers=0, progress=False)
    assert len(fake.creates) == 1
    [rec] = BatchStore(tmp_path / "s" / BATCH_DIR_NAME).in_flight()
    assert rec["batch_id"] == "msgbatch_fake0000" and sorted(rec["requests"]) == sorted(fake.creates[0])
    r = sweep(spec(fake.url), out_dir=tmp_path / "s", workers=0, progress=False)
    assert r.ok == 2 and r.ran == 2
    ids = sent_ids(fake)
    assert len(ids) == len(set(ids))  # the first batch's requests were not sent again
    assert fake.batches["msgbatch_fake0000"]["polls"] >= 1  # its results were fetched by its id
    assert not BatchStore(tmp_path / "s" / BATCH_DIR_NAME).in_flight()


def test_killed_sweep_process_resumes_without_repeating_paid_requests(tmp_path: Path, fake: FakeAnthropic) -> None:
    """SIGKILL of a real ``h9eval sweep --batch`` while its batch is in flight."""
    toml = tmp_path / "spec.toml"
    policies = "".join(
        f'[[policies]]\nkind = "progressive"\nname = "{n}"\nparams = {{context_window_tokens = 24000}}\n' for n in "ab"
    )
    toml.write_text(
        f'name = "batched"\n[tasks]\nspecs = ["{TASK}"]\n{policies}'
        f'[summarizer]\nname = "anthropic"\nparams = {{base_url = "{fake.url}", model = "{MODEL}", max_retries = 0}}\n'
    )
    fake.hold = True  # the batch stays in progress until released
    out = tmp_path / "out"
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "NO_PROXY": "127.0.0.1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "h9eval",
            "sweep",
            str(toml),
            "--out",
            str(out),
            "--workers",
            "0",
            "--batch",
            "--batch-poll-interval-s",
            "0.05",
            "--no-progress",
        ],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while fake.retrieves < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert fake.retrieves >= 2, (
            proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else "no poll"
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(fake.creates) == 1
    [rec] = BatchStore(out / BATCH_DIR_NAME).in_flight()
    fake.hold = False
    r = sweep(toml, out_dir=out, workers=0, progress=False, batch=True, batch_poll_interval_s=0.01)
    assert r.ok == 2
    ids = sent_ids(fake)
    assert len(ids) == len(set(ids)) and set(fake.creates[0]) == set(rec["requests"])
    assert not fake.messages and fake.keys == {KEY}


def test_a_failed_batch_request_takes_the_fallback_and_says_why(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first round's request fails in the batch
    orig = FakeAnthropic.results_lines

    def results_lines(self: FakeAnthropic, batch_id: str) -> bytes:
        if batch_id == "msgbatch_fake0000":
            self.errored.update(r["custom_id"] for r in self.batches[batch_id]["requests"])
        return orig(self, batch_id)

    monkeypatch.setattr(FakeAnthropic, "results_lines", results_lines)
    r = sweep(spec(fake.url), out_dir=tmp_path / "s", workers=0, progress=False)
    assert r.ok == 2
    calls = r.load().calls
    causes = calls.loc[calls["fallback"], "fallback_cause"]
    assert len(causes) >= 2 and causes.str.contains("errored: invalid_request_error").all()
    ids = sent_ids(fake)
    assert len(ids) == len(set(ids))  # a failed request is not sent again either


def test_bad_result_lines_fall_back_naming_the_line(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A results line that is not JSON (cut inside, newline kept) and one lacking its ``result``:
    the rest of the batch is read, and each request they answer falls back with the line named."""
    orig = FakeAnthropic.results_lines

    def results_lines(self: FakeAnthropic, batch_id: str) -> bytes:
        lines = orig(self, batch_id).splitlines()
        first = json.loads(lines[0])
        lines[0] = (
            lines[0][: len(lines[0]) // 2]
            if batch_id == "msgbatch_fake0000"
            else json.dumps({"custom_id": first["custom_id"]}).encode()
        )
        return b"\n".join(lines) + b"\n"

    monkeypatch.setattr(FakeAnthropic, "results_lines", results_lines)
    r = sweep(spec(fake.url), out_dir=tmp_path / "s", workers=0, progress=False)
    assert r.ok == 2
    calls = r.load().calls
    causes = set(calls.loc[calls["fallback"], "fallback_cause"])
    assert any("malformed_result: results line 1: not JSON" in c for c in causes), causes
    assert any("malformed_result: results line 1: no result object" in c for c in causes), causes


def test_an_unreadable_line_is_named_in_the_missing_requests_cause() -> None:
    from h9eval.summarizers.batches import _result_lines

    got = list(_result_lines([b"garbage\n", b'{"custom_id": "x", "result": {"type": "expired"}}\n']))
    assert got == [(None, {}, "not JSON (Expecting value)"), ("x", {"type": "expired"}, "")]


@pytest.mark.parametrize("how", ["connection-dropped", "ends-mid-line"])
def test_a_cut_off_results_download_stops_in_one_line_and_resumes(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    orig = FakeAnthropic.results_lines
    if how == "connection-dropped":
        fake.cut_results = 40
    else:
        cut = [True]

        def results_lines(self: FakeAnthropic, batch_id: str) -> bytes:
            body = orig(self, batch_id)
            if cut[0]:
                cut[0] = False
                return body[: len(body) // 2]  # the body is all there is: it ends inside a line
            return body

        monkeypatch.setattr(FakeAnthropic, "results_lines", results_lines)
    p = tmp_path / "spec.toml"
    policies = "".join(
        f'[[policies]]\nkind = "progressive"\nname = "{n}"\nparams = {{context_window_tokens = 24000}}\n' for n in "ab"
    )
    p.write_text(
        f'name = "x"\n[tasks]\nspecs = ["{TASK}"]\n{policies}[summarizer]\nname = "anthropic"\n'
        f'params = {{base_url = "{fake.url}", model = "{MODEL}", max_retries = 0}}\n'
    )
    argv = ["sweep", str(p), "--out", str(tmp_path / "o"), "--batch", "--batch-poll-interval-s", "0.01"]
    argv += ["--no-progress", "--workers", "0"]
    assert main(argv) == 1
    err = [e for e in capsys.readouterr().err.strip().splitlines() if not e.startswith("h9eval: batch ")]
    assert len(err) == 1 and "the results download was cut off after line" in err[0], err
    assert "run it again to fetch the rest" in err[0] and "Traceback" not in err[0]
    assert main(argv) == 0
    ids = sent_ids(fake)
    assert len(ids) == len(set(ids))  # the cut batch's request was not sent again
    from h9eval.results.store import load_results

    calls = load_results(tmp_path / "o").calls
    assert not calls["fallback"].any()  # every request was answered once the download was whole


@pytest.mark.parametrize(
    ("summ", "message"),
    [
        ({"batch": "yes"}, "summarizer.batch: must be true or false"),
        (
            {"batch": True, "batch_poll_interval_s": 0},
            "summarizer.batch_poll_interval_s must be a number of seconds in (0, 3600]",
        ),
        ({"batch": True, "batch_poll_interval_s": "1m"}, "summarizer.batch_poll_interval_s must be a number"),
        ({"batch_poll_interval_s": 5}, "summarizer.batch_poll_interval_s: goes with batch = true"),
        (
            {"batch": True, "batch_deadline_s": 0},
            "summarizer.batch_deadline_s must be a number of seconds in (0, 604800], got 0",
        ),
        ({"batch": True, "batch_deadline_s": "1d"}, "summarizer.batch_deadline_s must be a number"),
        ({"batch_deadline_s": 5}, "summarizer.batch_deadline_s: goes with batch = true"),
    ],
)
def test_bad_batch_settings_are_refused_naming_the_key(summ: dict[str, Any], message: str) -> None:
    s = spec("http://127.0.0.1:9", batched=False, **summ)
    with pytest.raises(ConfigError) as e:
        sweep(s, out_dir="/nonexistent/never", progress=False)
    assert message in str(e.value)


def test_batching_an_offline_summarizer_is_refused(tmp_path: Path) -> None:
    s = {
        "name": "x",
        "tasks": {"specs": [TASK]},
        "policies": [{"kind": "progressive"}],
        "summarizer": {"name": "offline", "batch": True},
    }
    with pytest.raises(ConfigError, match="summarizer.batch: needs an Anthropic summarizer"):
        sweep(s, out_dir=tmp_path / "o", progress=False)
    with pytest.raises(ConfigError, match="needs an Anthropic summarizer"):
        sweep({**s, "summarizer": "offline"}, out_dir=tmp_path / "o", progress=False, batch=True)


def test_cli_batch_flags_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "x"\n[tasks]\nspecs = ["{TASK}"]\n[[policies]]\nkind = "progressive"\n')
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--batch-poll-interval-s", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "goes with batching (--batch" in err[0]
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--batch-deadline-s", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batch_deadline_s (--batch-deadline-s) goes with batching (--batch" in err[0]
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--batch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs an Anthropic summarizer" in err[0]


def test_a_refused_batch_stops_the_sweep_in_one_line_and_it_resumes(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "spec.toml"
    policies = "".join(
        f'[[policies]]\nkind = "progressive"\nname = "{n}"\nparams = {{context_window_tokens = 24000}}\n' for n in "ab"
    )
    p.write_text(
        f'name = "x"\n[tasks]\nspecs = ["{TASK}"]\n{policies}[summarizer]\nname = "anthropic"\n'
        f'params = {{base_url = "{fake.url}/nowhere", model = "{MODEL}", max_retries = 0}}\n'
    )
    argv = [
        "sweep",
        str(p),
        "--out",
        str(tmp_path / "o"),
        "--batch",
        "--batch-poll-interval-s",
        "0.01",
        "--no-progress",
        "--workers",
        "0",
    ]
    assert main(argv) == 1  # the fake has no /nowhere/v1/messages/batches: HTTP 404
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HTTP 404 not_found_error" in err[0] and "run it again to resume" in err[0]
    from h9eval.results.store import read_manifest

    assert read_manifest(tmp_path / "o")["status"]["state"] == "interrupted"
    p.write_text(p.read_text().replace("/nowhere", ""))
    assert main(argv) == 0 and len(fake.creates) == 2


def test_closed_loop_episode_cells_batch_their_summaries(tmp_path: Path, fake: FakeAnthropic) -> None:
    s = {
        "name": "episodes",
        "tasks": {"worlds": [{"kind": "mini_repo", "seeds": [0]}]},
        "policies": [{"kind": "progressive"}],
        "window": 3000,
        "summarizer": {
            "name": "anthropic",
            "params": {"base_url": fake.url, "model": MODEL, "max_retries": 0},
            "batch": True,
            "batch_poll_interval_s": 0.01,
        },
    }
    r = sweep(s, out_dir=tmp_path / "e", workers=0, progress=False)
    runs = r.load().runs
    assert r.ok == 2 and runs["summarizer_calls"].sum() >= 2 and (runs["fallbacks"] == 0).all()
    assert fake.creates and not fake.messages  # every summary came through a batch
    direct = {**s, "summarizer": {"name": "anthropic", "params": s["summarizer"]["params"]}}
    d = sweep(direct, out_dir=tmp_path / "d", workers=0, progress=False)
    cb, cd = r.load().calls, d.load().calls
    assert cb["summarizer_batched_calls"].sum() == cb["summarizer_calls"].sum() >= 2
    assert cd["summarizer_batched_calls"].sum() == 0 and fake.messages
    for col in ("summarizer_cost_usd", "summarizer_bill_usd"):  # the closed loop bills them at half price too
        assert cb[col].sum() == pytest.approx(0.5 * cd[col].sum()) and cb[col].sum() > 0


def test_repeats_do_not_share_batch_replies(tmp_path: Path, fake: FakeAnthropic) -> None:
    from h9eval.core.cassette import request_hash
    from h9eval.summarizers.batches import custom_id

    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    assert custom_id(body) == request_hash(body) and len(custom_id(body)) == 64
    assert custom_id(body, scope="r1") != custom_id(body) and custom_id(body, scope="r1") != custom_id(body, scope="r2")
    s = {**spec(fake.url), "policies": [PROGRESSIVE], "repeats": 2}
    r = sweep(s, out_dir=tmp_path / "r", workers=0, progress=False)
    runs = r.load().runs
    assert r.ok == 2 and list(runs["summarizer_cache_hits"]) == [0, 0]  # each repeat paid for its own replies
    ids = sent_ids(fake)
    assert len(ids) == len(set(ids)) == 4


def test_the_spending_cap_holds_each_batch_at_the_batch_price(tmp_path: Path, fake: FakeAnthropic) -> None:
    """A batch is held at its bound (each request's, at half the list price) before it is sent: a
    cap below the first batch's bound sends nothing and leaves the sweep resumable; a cap above it
    records what the batches cost, which is the batched bill of the runs."""
    out = tmp_path / "capped"
    first = sweep(spec(fake.url), out_dir=out, workers=0, progress=False, max_cost_usd=0.0001)
    assert first.stopped and "a batch of 1 request(s)" in first.stopped and not fake.creates
    ledger = json.loads((out / SPEND_FILE).read_text())
    assert ledger["spent_usd"] == 0 and ledger["reserved_usd"] == 0
    # the refused bound is the batch price of the request's bound, not its list price
    store = BatchStore(out / BATCH_DIR_NAME)
    body = store.request(sorted(p.stem for p in (store.root / "requests").glob("*.json"))[0])
    size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
    price = price_for(MODEL, DEFAULT_PRICES_USD_PER_MTOK)
    assert price is not None
    assert f"up to ${0.5 * call_bound_usd(size, int(body['max_tokens']), price):.4f}" in first.stopped

    done = sweep(spec(fake.url), out_dir=out, workers=0, progress=False, max_cost_usd=100.0)
    assert done.ok == 2 and not done.stopped and len(fake.creates) == 2
    ledger = json.loads((out / SPEND_FILE).read_text())
    assert ledger["reserved_usd"] == 0 and ledger["calls"] == 2
    runs = done.load().runs
    paid = runs.loc[runs["summarizer_cache_hits"] == 0, "summarizer_cost_usd"]  # b's summaries were a's
    assert len(paid) == 1 and paid.sum() > 0 and ledger["spent_usd"] == pytest.approx(paid.sum())


@pytest.mark.parametrize("where", ["create", "retrieve"])
def test_batch_calls_are_cut_by_the_request_timeout(tmp_path: Path, fake: FakeAnthropic, where: str) -> None:
    """Batch create and retrieve wait ``request_timeout_s`` per attempt, not without end (the SDK's
    ``timeout=None``): a hung Batches endpoint stops the sweep in a fraction of the fake's 3 s hang."""
    fake.hang = {where}
    s = {**spec(fake.url), "request_timeout_s": 0.3}
    t0 = time.monotonic()
    with pytest.raises(SummarizerError, match=r"timed out after 0\.3 s per attempt \(0 retries\)"):
        sweep(s, out_dir=tmp_path / "s", workers=0, progress=False)
    assert time.monotonic() - t0 < 2.5
    assert (fake.retrieves == 1) if where == "retrieve" else not fake.batches


def test_a_batch_past_its_deadline_is_canceled_and_its_requests_fall_back(tmp_path: Path, fake: FakeAnthropic) -> None:
    """On a clock of its own: a batch that never ends is polled until ``deadline_s`` after its
    submission and no longer; no sleep is longer than what is left of the deadline."""
    from h9eval.summarizers.anthropic import AnthropicSummarizer
    from h9eval.summarizers.batches import BatchSettings

    fake.hold = True  # never ends
    now = [1000.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    api = AnthropicSummarizer(base_url=fake.url, model=MODEL, max_retries=0).api
    store = BatchStore(tmp_path / "batches")
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    store.put_request("c" * 64, body)
    client = BatchClient(
        api, store, BatchSettings(poll_interval_s=3600, deadline_s=25), sleep=sleep, clock=lambda: now[0]
    )
    [batch_id] = client.submit({"c" * 64: "run-a"})
    now[0] += 5  # five seconds pass between the submission and the first poll
    assert client.collect(store.get_record(batch_id) or {}) == 0
    assert sleeps == [20.0] and fake.retrieves == 2  # polled, slept what was left, polled once more
    assert fake.cancels == [batch_id]
    rec = store.get_record(batch_id) or {}
    assert rec["state"] == "abandoned" and not store.in_flight()  # a rerun does not poll it again
    stored = store.result("c" * 64) or {}
    assert stored["result"]["error"]["error"] == {
        "type": "batch_deadline",
        "message": "batch not ended after 25 s (batch_deadline_s)",
    }


def test_a_batched_sweep_whose_batches_never_end_falls_back_by_the_deadline(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.hold = True  # every batch stays in progress for ever
    out: dict[str, Any] = {}

    def go() -> None:
        out["r"] = sweep(spec(fake.url, batch_deadline_s=0.3), out_dir=tmp_path / "s", workers=0, progress=False)

    t0 = time.monotonic()
    _bounded(go, 60)
    r = out["r"]
    assert r.ok == 2 and time.monotonic() - t0 < 30
    calls = r.load().calls
    causes = calls.loc[calls["fallback"], "fallback_cause"]
    assert len(causes) >= 2 and causes.str.contains("batch_deadline: batch not ended after 0.3 s").all(), set(causes)
    assert len(fake.cancels) == len(fake.creates) >= 1


def _bounded(fn: Callable[[], None], seconds: float) -> None:
    """``fn()`` in a daemon thread, failing the test when it has not returned after ``seconds``
    (a batch polled for ever must fail the test, not hang it)."""
    err: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as e:  # handed to the test's thread
            err.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still polling after {seconds:g} s"
    if err:
        raise err[0]
