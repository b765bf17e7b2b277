"""Headless Chromium for the page tests: where it is (``None``: not installed, the tests skip) and
one way to start it (no network, a throw-away profile, a bounded wait)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or "")
        if p and Path(p).exists()
    ),
    None,
)


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Chromium headless with ``args`` and its own ``profile`` folder, at most 120 s."""
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
