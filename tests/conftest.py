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


# Every registry h9eval builds (policies, summarizers, metrics, ...), so that a test which registers an
# entry without removing it cannot change what later tests see: test modules walk "every registered
# policy", and which of them ran first must not decide their result.
from h9eval.core import registry as _registry  # noqa: E402

_ALL_REGISTRIES: list[_registry.Registry[object]] = []
_real_registry_init = _registry.Registry.__init__


def _tracked_init(self: _registry.Registry[object], what: str) -> None:
    _real_registry_init(self, what)
    _ALL_REGISTRIES.append(self)


_registry.Registry.__init__ = _tracked_init  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _registries_as_they_were() -> object:
    before = [(r, dict(r._entries)) for r in _ALL_REGISTRIES]
    yield
    for r, entries in before:
        if r._entries != entries:
            r._entries.clear()
            r._entries.update(entries)
