"""``make lab``: JupyterLab on 127.0.0.1 with the project's kernel, as root and as another user."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_JUPYTER = ROOT / ".venv" / "bin" / "jupyter"

pytestmark = pytest.mark.skipif(
    not VENV_JUPYTER.exists() or shutil.which("make") is None, reason="needs the project venv (make venv) and make"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_lab(cmd_prefix: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, int]:
    port = _free_port()
    p = subprocess.Popen(
        [*cmd_prefix, "make", "-s", "-C", str(ROOT), "lab", f"LAB_PORT={port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    seen: list[str] = []
    assert p.stdout is not None
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(rf"(http://127\.0\.0\.1:{port}/lab\?token=\w+)", line)
        if m:
            return p, m.group(1), port
    os.killpg(p.pid, signal.SIGTERM)
    raise AssertionError("no JupyterLab URL printed:\n" + "".join(seen[-30:]))


def _stop(p: subprocess.Popen[str]) -> None:
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)


def _check_server(url: str, port: int) -> None:
    token = url.rsplit("token=", 1)[1]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    deadline = time.monotonic() + 30
    while True:  # the URL is logged a moment before the socket listens
        try:
            with opener.open(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}", timeout=20) as r:
                specs = json.load(r)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert specs["default"] == "h9eval", specs["default"]
    assert specs["kernelspecs"]["h9eval"]["spec"]["display_name"] == "Python (h9eval)"
    argv0 = specs["kernelspecs"]["h9eval"]["spec"]["argv"][0]
    assert Path(argv0).is_relative_to(ROOT / ".venv"), argv0
    # the file browser's root is the project, so results/ is reachable; it opens on notebooks/
    with opener.open(f"http://127.0.0.1:{port}/api/contents/?token={token}", timeout=20) as r:
        names = {c["name"] for c in json.load(r)["content"]}
    assert {"notebooks", "results", "examples"} <= names, names
    with opener.open(f"http://127.0.0.1:{port}/lab?token={token}", timeout=20) as r:
        assert '"preferredPath": "notebooks"' in r.read().decode()


def test_make_lab_serves_on_loopback_with_the_project_kernel() -> None:
    p, url, port = _start_lab([], dict(os.environ))
    try:
        _check_server(url, port)
    finally:
        _stop(p)


def test_allow_root_only_for_root() -> None:
    """Jupyter refuses root without --allow-root; a normal user must not get the flag."""
    as_root = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), "lab", "LAB_UID=0"], capture_output=True, text=True, check=True
    ).stdout
    as_user = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), "lab", "LAB_UID=1000"], capture_output=True, text=True, check=True
    ).stdout
    assert "--allow-root" in as_root and "--ip=127.0.0.1" in as_root
    assert "--allow-root" not in as_user and "--ip=127.0.0.1" in as_user
