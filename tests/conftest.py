"""Test-wide guards: offline Hugging Face settings and no network except loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_UPDATE_DOWNLOAD_COUNTS"] = "0"
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.setdefault("MPLBACKEND", "Agg")


def _is_loopback(address: object) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like never leave the machine
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name other than localhost would need DNS: refuse


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may not open network connections (to {address!r})")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may not open network connections (to {address!r})")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def shared() -> Path:
    from h9eval.core.paths import shared_dir

    d = shared_dir()
    if not d.exists():
        pytest.fail(f"shared data folder {d} not found (set H9EVAL_SHARED)")
    return d
