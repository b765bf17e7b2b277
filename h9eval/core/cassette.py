"""Cassettes: provider replies recorded once and replayed offline, keyed by the request sent.

JSONL, one ``{"request_hash", "response"}`` per line, sorted keys (reruns are byte-equal). The
hash is the SHA-256 of the canonical JSON request body (sorted keys, no spaces), so any change in
what is sent (messages, tools, model, parameters) is a miss, and a caller that replays decides
what a miss means (the live agent and the provider-side compaction policies: an error).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError

__all__ = ["Cassette", "request_hash"]


def request_hash(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    ).hexdigest()


class Cassette:
    """Recorded responses by request hash, stored as JSONL (sorted keys, so reruns are byte-equal)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._responses: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            if self.path.is_dir():
                raise FormatError("is a folder; expected a cassette JSONL file", path=str(self.path))
            for i, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise FormatError(
                        f"line is not JSON ({e.msg}); expected one {{request_hash, response}} object per line",
                        path=str(self.path),
                        where=f"line {i}",
                    ) from None
                if (
                    not isinstance(rec, dict)
                    or not isinstance(rec.get("request_hash"), str)
                    or not isinstance(rec.get("response"), dict)
                ):
                    raise FormatError(
                        "expected an object with a string 'request_hash' and an object 'response'",
                        path=str(self.path),
                        where=f"line {i}",
                    )
                self._responses[rec["request_hash"]] = rec["response"]

    def __len__(self) -> int:
        return len(self._responses)

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        """Every ``(request hash, response)`` recorded, in file order."""
        return list(self._responses.items())

    def get(self, key: str) -> dict[str, Any] | None:
        return self._responses.get(key)

    def put(self, key: str, response: Mapping[str, Any]) -> None:
        self._responses[key] = dict(response)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(
                json.dumps({"request_hash": key, "response": dict(response)}, sort_keys=True, ensure_ascii=False) + "\n"
            )
