"""``odradek perf framing``: the cost of the broker's socket layer alone, in one process.

Invariant: it measures exactly the production path from ``dataReceived`` to ``writeSequence``
(``socket_server.KafkaConnection`` over ``protocol/connection.py``) with a request handler that
answers every frame with a fixed response, so the figures are the framework's floor under every
API: no socket, no decoding, no log. Each case runs ``--rounds`` times; the best round is
reported (the machine's other load only ever adds time).
"""
from __future__ import annotations

import argparse
import struct
import time

from twisted.internet.testing import StringTransport

from .socket_server import KafkaServerFactory

CASES = (  # (name, frame size, bytes per dataReceived call, frames)
    ("1 MiB produce-sized frames, 64 KiB reads", 1 << 20, 65536, 300),
    ("100 B frames, pipelined in 64 KiB reads", 100, 65536, 200_000),
    ("200 B frames, one per read", 200, 204, 100_000),
)


class _FixedResponse:
    """A request handler answering every frame with the same 4 bytes (``RequestHandler.handle``'s
    signature: the frame, then the connection's listener, peer, principal and throttle)."""

    def handle(self, frame: bytes, *connection: object) -> bytes:
        return b"\x00\x00\x00\x01"


def _round(frame_size: int, chunk: int, count: int) -> float:
    factory = KafkaServerFactory(_FixedResponse(), "PLAINTEXT", 100 << 20)  # type: ignore[arg-type]
    conn = factory.buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    stream = (struct.pack(">i", frame_size) + b"x" * frame_size) * count
    chunks = [stream[i:i + chunk] for i in range(0, len(stream), chunk)]
    start = time.perf_counter()
    for data in chunks:
        conn.dataReceived(data)
    elapsed = time.perf_counter() - start
    if len(transport.value()) != 8 * count:
        raise RuntimeError("not every frame was answered")
    return elapsed / count


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek perf framing", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="run this fraction of each case's frames")
    args = ap.parse_args(argv)
    for name, size, chunk, count in CASES:
        frames = max(1, int(count * args.scale))
        best = min(_round(size, chunk, frames) for _ in range(args.rounds))
        print(f"{name}: {best * 1e6:.1f} us per frame ({1 / best:,.0f} frames/s)")
    return 0
