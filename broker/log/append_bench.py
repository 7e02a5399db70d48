"""``odradek perf log-append``: broker CPU per ``Log.append_as_leader``, in one process.

Invariant: it times exactly the leader's append (validation, producer state, offset stamping,
the segment write) of the same batch, appended ``--appends`` times to a fresh log in a temporary
directory, for three batch shapes; CPU time (``time.process_time``), best of ``--rounds``, so
other load on the machine changes the figures little. It imports only through ``odradek.`` so
it can be run as a file against another checkout (``PYTHONPATH=<tree> python
broker/log/append_bench.py``) for before/after comparisons.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import Log
from odradek.protocol.records import BatchBuilder


def _batches(now_ms: int) -> list[tuple[str, bytes, int]]:
    """(name, batch, appends per round)."""
    rng = random.Random(1)
    one = BatchBuilder()
    one.append(now_ms, None, b"x" * 100)
    uniform = BatchBuilder()
    for i in range(9300):
        uniform.append(now_ms + i // 2000, None, b"x" * 100)
    varied = BatchBuilder()
    for _ in range(4000):
        varied.append(now_ms + rng.randint(0, 200), b"key-%d" % rng.randint(0, 10**6), b"x" * rng.randint(20, 400))
    return [("1 record of 100 B", one.build(), 20000),
            ("9,300 records of 100 B", uniform.build(), 300),
            ("4,000 records, random keys, 20-400 B values", varied.build(), 300)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek perf log-append", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case's appends per round")
    args = parser.parse_args(argv)
    for name, raw, appends in _batches(int(time.time() * 1000)):
        n = max(1, int(appends * args.scale))
        best = float("inf")
        for _ in range(args.rounds):
            tmp = tempfile.mkdtemp(prefix="odradek-append-bench-")
            try:
                log = Log(os.path.join(tmp, "bench-0"), LogConfig({"segment.bytes": str(1 << 30)}),
                          had_clean_shutdown=True)
                start = time.process_time()
                for _ in range(n):
                    log.append_as_leader(raw, 0)
                best = min(best, (time.process_time() - start) / n)
                log.close()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        print(f"{name:45s} {len(raw):>9,d} B  {best * 1e6:8.1f} µs CPU per append")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
