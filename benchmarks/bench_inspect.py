"""`h9eval tasks inspect` on a 10^5-message session (issue 28: under 60 s here), as a user runs it.

Writes a chat-messages JSONL of ``--messages`` messages (default 100,000; about 100 MB: a system
message, one task prompt, then assistant tool calls and tool results whose text repeats a seeded
vocabulary; ``--user-every N``: a user message every N messages instead, a chat log) and times
one fresh ``h9eval tasks inspect FILE`` process: wall time, CPU time (user + system of the child)
and its peak resident memory, with the 1-minute load average before and after, since on a shared
machine the wall time also counts waiting for a core.

    python benchmarks/bench_inspect.py [--messages 100000] [--user-every 0] [--repeat 1] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORDS = (
    "config parser module request handler timeout retry window token summary anchor offload tail "
    "assert failure traceback import function return value error warning test suite fixture path"
).split()


def write_session(path: Path, n_messages: int, *, seed: int = 0, user_every: int = 0) -> int:
    """A deterministic chat-messages JSONL of ``n_messages`` lines, shaped as an agent's session: a
    system message, one task prompt, then assistant tool calls and their tool results (``user_every``
    > 0: a user message every that many messages instead, as a chat log); returns its size in bytes."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"role": "system", "content": "You are a coding agent working in a repository."}) + "\n")
        f.write(json.dumps({"role": "user", "content": "Fix the failing retry test in src/module_1/file_1.py."}) + "\n")
        for i in range(2, n_messages):
            words = " ".join(rng.choice(_WORDS) for _ in range(190))
            content = f"step {i}: {words} src/module_{i % 97}/file_{i % 13}.py line {i % 1000}"
            if user_every and i % user_every == 0:
                msg: dict[str, object] = {"role": "user", "content": content}
            elif i % 2 == 0:
                call = {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": json.dumps({"command": f"grep -n retry src/module_{i % 97}/file_{i % 13}.py"}),
                    },
                }
                msg = {"role": "assistant", "content": content[:200], "tool_calls": [call]}
            else:
                msg = {"role": "tool", "tool_call_id": f"c{i - 1}", "content": content}
            f.write(json.dumps(msg) + "\n")
    return path.stat().st_size


def time_inspect(path: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak resident MB) of one fresh ``h9eval tasks inspect`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "h9eval", "tasks", "inspect", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ru_maxrss (KiB on Linux) is the largest child so far: each repeat reports the largest yet
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), after.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="write the session here and keep it")
    ap.add_argument("--user-every", type=int, default=0, help="a user message every N messages (a chat log)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="h9eval-bench-inspect-") as d:
        path = a.keep or Path(d) / "session.jsonl"
        size = write_session(path, a.messages, user_every=a.user_every)
        for _ in range(a.repeat):
            load = os.getloadavg()[0]
            wall, cpu, rss_mb = time_inspect(path)
            shape = f"chat log, a user message every {a.user_every}" if a.user_every else "agent session"
            print(
                f"tasks inspect, {a.messages:,} messages ({shape}; {size / 1e6:.0f} MB): {wall:.1f} s wall, "
                f"{cpu:.1f} s CPU, peak {rss_mb:,.0f} MB (target: under 60 s); load {load:.2f} before, "
                f"{os.getloadavg()[0]:.2f} after"
            )


if __name__ == "__main__":
    main()
