"""Broken Inspect eval logs given to :func:`tasks_from_eval_log` (reliability issue, item 8): each is
one :class:`FormatError` naming the file and what was expected, never a raw ``BadZipFile``, pydantic
dump or ``RecursionError``; an unknown log format version is refused; a zip entry's declared size and
ratio are checked before it is read, and a size that lies cannot make the read inflate past it."""

from __future__ import annotations

import json
import struct
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from h9eval import ReplayConfig, replay  # noqa: E402
from h9eval.compaction.policies import make_policy  # noqa: E402
from h9eval.core.errors import FormatError  # noqa: E402
from h9eval.integrations import inspect_logs  # noqa: E402
from h9eval.integrations.inspect_logs import run_to_eval_log, tasks_from_eval_log  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

SAMPLE = "samples/bomb_epoch_1.json"


@pytest.fixture(scope="module")
def good_eval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    t = generate("small", seed=0)
    r = replay(t, make_policy("progressive", context_window_tokens=9000), config=ReplayConfig(keep_views=True))
    return run_to_eval_log(r, t, tmp_path_factory.mktemp("logs") / "run.eval")


@pytest.fixture(scope="module")
def good_json(good_eval: Path) -> Path:
    from inspect_ai.log import read_eval_log, write_eval_log

    out = good_eval.with_suffix(".json")
    write_eval_log(read_eval_log(str(good_eval)), str(out))
    return out


def one_line_error(path: Path, *patterns: str) -> str:
    with pytest.raises(FormatError) as e:
        tasks_from_eval_log(path)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 600, msg
    assert msg.startswith(str(path)), msg
    for p in patterns:
        assert p in msg, msg
    return msg


def rewrite(src: Path, dst: Path, replace: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> Path:
    """``src``'s entries with those in ``replace`` swapped or added."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", method) as zout:
        for info in zin.infolist():
            if info.filename not in replace:
                zout.writestr(info.filename, zin.read(info))
        for name, data in replace.items():
            zout.writestr(name, data)
    return dst


def test_a_good_log_still_loads_both_ways(good_eval: Path, good_json: Path) -> None:
    [a] = tasks_from_eval_log(good_eval)
    [b] = tasks_from_eval_log(good_json)
    assert [m.content for m in a.messages] == [m.content for m in b.messages] and a.messages


def test_not_a_zip_and_a_cut_off_download(good_eval: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.eval"
    junk.write_bytes(b"this is no zip at all\n" * 50)
    one_line_error(junk, "not an Inspect .eval log (a zip archive)")
    cut = tmp_path / "cut.eval"
    cut.write_bytes(good_eval.read_bytes()[: good_eval.stat().st_size // 2])  # the end record (EOCD) is gone
    one_line_error(cut, "not an Inspect .eval log (a zip archive)")


def test_a_zip_without_a_header(tmp_path: Path) -> None:
    p = tmp_path / "other.eval"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hello")
    one_line_error(p, "no header.json or _journal/start.json entry; expected an Inspect .eval log")


def test_a_json_log_failing_validation_names_the_first_field(good_json: Path, tmp_path: Path) -> None:
    d = json.loads(good_json.read_text(encoding="utf-8"))
    d["eval"]["model"] = 5
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d), encoding="utf-8")
    msg = one_line_error(p, "not a valid Inspect eval log: EvalLog field eval.model", "(got int)")
    assert "validation error" not in msg  # not pydantic's dump


def test_a_sample_failing_validation_in_an_eval_log(good_eval: Path, tmp_path: Path) -> None:
    p = rewrite(good_eval, tmp_path / "bad.eval", {SAMPLE: json.dumps({"id": 1, "epoch": "one"}).encode()})
    one_line_error(p, "not a valid Inspect eval log: EvalSample field")


def test_deep_nesting_is_one_line(good_eval: Path, good_json: Path, tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    p = tmp_path / "deep.json"
    p.write_bytes(good_json.read_bytes().replace(b'"samples":', b'"deep": ' + deep + b', "samples":', 1))
    one_line_error(p, "nested too deeply")
    q = rewrite(good_eval, tmp_path / "deep.eval", {SAMPLE: b'{"id": 1, "epoch": 1, "metadata": {"x": ' + deep + b"}}"})
    one_line_error(q, "nested too deeply")


@pytest.mark.parametrize("version", [99, 0, "2", None])
def test_unknown_versions_are_refused(good_eval: Path, good_json: Path, tmp_path: Path, version: object) -> None:
    with zipfile.ZipFile(good_eval) as z:
        header = json.loads(z.read("header.json"))
    header["version"] = version
    p = rewrite(good_eval, tmp_path / "v.eval", {"header.json": json.dumps(header).encode()})
    one_line_error(p, f"header.json: Inspect log format version {version!r} is not supported; expected one of 1, 2")
    d = json.loads(good_json.read_text(encoding="utf-8"))
    d["version"] = version
    q = tmp_path / "v.json"
    q.write_text(json.dumps(d), encoding="utf-8")
    one_line_error(q, f"Inspect log format version {version!r} is not supported")


def test_a_zip_bomb_is_refused_by_its_ratio_before_it_is_read(good_eval: Path, tmp_path: Path) -> None:
    p = rewrite(good_eval, tmp_path / "bomb.eval", {SAMPLE: b" " * (64 * 2**20)})
    assert p.stat().st_size < 2 * 2**20
    t0 = time.monotonic()
    tracemalloc.start()
    try:
        one_line_error(p, f"{SAMPLE}: entry inflates", "the limit is 200x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20 and time.monotonic() - t0 < 5


def test_an_entry_over_the_size_limit_is_refused_naming_it(
    good_eval: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inspect_logs, "MAX_LOG_ENTRY_BYTES", 400_000)  # above the real sample
    p = rewrite(good_eval, tmp_path / "big.eval", {SAMPLE: json.dumps({"x": list(range(100_000))}).encode()})
    one_line_error(p, f"{SAMPLE}: entry declares", "the limit is 400000 (MAX_LOG_ENTRY_BYTES)")


def test_a_size_that_lies_cannot_inflate_past_it(good_eval: Path, tmp_path: Path) -> None:
    """The entry inflates to 64 MiB but says 100 bytes (with the CRC of those 100, the worst case):
    the read stops at 100 bytes, so the log is refused without the 64 MiB ever being in memory."""
    real = b" " * (64 * 2**20)
    p = rewrite(good_eval, tmp_path / "liar.eval", {SAMPLE: real})
    with zipfile.ZipFile(p) as z:
        info = z.getinfo(SAMPLE)
    data = bytearray(p.read_bytes())
    said, crc = 100, zlib.crc32(real[:100])
    lh = info.header_offset
    assert data[lh : lh + 4] == b"PK\x03\x04"
    struct.pack_into("<II", data, lh + 18, info.compress_size, said)
    struct.pack_into("<I", data, lh + 14, crc)
    at = 0
    while (at := data.find(b"PK\x01\x02", at + 1)) >= 0:
        n = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46 : at + 46 + n]) == SAMPLE.encode():
            struct.pack_into("<I", data, at + 16, crc)
            struct.pack_into("<II", data, at + 20, info.compress_size, said)
    p.write_bytes(bytes(data))
    with zipfile.ZipFile(p) as z:
        assert z.getinfo(SAMPLE).file_size == said  # the lie is what the central directory says
    tracemalloc.start()
    try:
        one_line_error(p, "not a readable Inspect eval log")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def test_missing_file_and_folder(tmp_path: Path) -> None:
    one_line_error(tmp_path / "gone.eval", "no such file")
    one_line_error(tmp_path, "is a directory")
