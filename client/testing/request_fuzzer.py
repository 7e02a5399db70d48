"""A request fuzzer: mutants of valid requests of every API a broker serves, sent over a real
socket, each answer judged.

Invariant: every frame sent ends in exactly one outcome, and only these count as correct:
``answer`` (one response that decodes as the API and version its header names, with its
correlation id), ``no-answer`` (an acks=0 Produce: none is owed), ``close`` (the broker closed that
connection without answering), or ``parked`` (a request that may legitimately wait, e.g. a Fetch
whose max_wait_ms a mutation made huge). Anything else — an undecodable or mismatched answer, an
answer missing, a hang, a traceback in the broker's log, a broker that stops answering a fresh
connection, valid records that cannot be read back — is a ``Failure``, recorded with the frame
that caused it. The requests and mutations are ``odradek.testing.request_mutations``'s; the
pytest test (tests/integration/test_request_fuzzer.py) and the standalone runner share both:

    python -m odradek.testing.request_fuzzer --bootstrap-server HOST:PORT --frames N [--seed S]
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

from odradek.protocol import apis as protocol_apis
from odradek.protocol.connection import FrameReader
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.header import decode_request_header, decode_response, encode_request

from .request_mutations import PRODUCE_KEY, BaseRequest, Mutant, base_requests, mutate

__all__ = ["Fuzzer", "FuzzStats", "Failure", "base_requests", "mutate", "produce_values", "read_values", "main"]

API_VERSIONS_KEY = 18
# APIs whose answer may legitimately wait (purgatories, rebalances, znode writes) for as long as
# a field of the request says
PARKING_APIS = frozenset({0, 1, 11, 14, 19, 20, 22, 24, 25, 26, 37})
SENTINEL_CID = 0x7FFF0000                   # correlation ids of the sentinel ApiVersions requests
OUTCOMES = ("answer", "no-answer", "close", "parked")


# ---------------------------------------------------------------- sending and checking

@dataclass
class Failure:
    what: str
    frame: str


@dataclass
class FuzzStats:
    frames: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    failures: list[Failure] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.outcomes.items())
        return f"frames {self.frames}: {counts}; failures {len(self.failures)}"


def _expected_answer(data: bytes) -> tuple[ModuleType, int, int] | None:
    """(api, version to decode the answer as, correlation id) for a frame the broker should
    answer, judged by its header; None if the header does not parse or names no known API."""
    try:
        header, _ = decode_request_header(data)
    except KafkaError:
        return None
    api = protocol_apis.API_BY_KEY.get(header.api_key)
    if api is None:
        return None
    return api, header.api_version, header.correlation_id


def _decode_request(data: bytes) -> tuple[ModuleType, Any] | None:
    try:
        header, offset = decode_request_header(data)
        api = protocol_apis.API_BY_KEY[header.api_key]
        return api, api.Request.decode(memoryview(data)[offset:], header.api_version)
    except (KafkaError, KeyError):
        return None


class Fuzzer:
    """Sends mutants to one broker on one connection at a time and judges each answer."""

    def __init__(self, address: str, timeout: float = 3.0, broker_log: str | os.PathLike[str] | None = None):
        host, port = address.rsplit(":", 1)
        self.address = (host, int(port))
        self.timeout = timeout
        self.broker_log = None if broker_log is None else Path(broker_log)
        self._log_offset = self.broker_log.stat().st_size if self.broker_log is not None else 0
        self.stats = FuzzStats()
        self._sock: socket.socket | None = None
        self._reader = FrameReader(1 << 30)
        self._sentinel = SENTINEL_CID

    # ------------------------------------------------------------ connection
    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.create_connection(self.address, timeout=self.timeout)
            self._reader = FrameReader(1 << 30)
        return self._sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        self._drop()

    def served_apis(self) -> dict[int, tuple[int, int]]:
        """The broker's ApiVersions table (key -> (min, max)), on a fresh connection."""
        with socket.create_connection(self.address, timeout=10.0) as sock:
            sock.sendall(_frame(encode_request(protocol_apis.api_versions, 0, 1, "fuzz", {})))
            answer = _read_one(sock, 10.0)
        if answer is None:
            raise ConnectionError("the broker did not answer ApiVersions")
        _, body = decode_response(protocol_apis.api_versions, 0, answer)
        return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def healthy(self) -> str | None:
        """None if a fresh connection gets ApiVersions and Metadata answered, else what failed."""
        try:
            with socket.create_connection(self.address, timeout=10.0) as sock:
                checks: list[tuple[ModuleType, int, dict[str, Any]]] = [
                    (protocol_apis.api_versions, 0, {}), (protocol_apis.metadata, 1, {"topics": []})]
                for api, version, body in checks:
                    sock.sendall(_frame(encode_request(api, version, 5, "fuzz-check", body)))
                    answer = _read_one(sock, 10.0)
                    if answer is None or decode_response(api, version, answer)[0] != 5:
                        return f"no {api.NAME} answer on a fresh connection"
        except (OSError, KafkaError) as e:
            return f"a fresh connection failed: {e}"
        return None

    def new_tracebacks(self) -> int:
        """Tracebacks the broker logged since the last look (0 without a broker log)."""
        if self.broker_log is None or self.broker_log.stat().st_size == self._log_offset:
            return 0
        with open(self.broker_log, "rb") as f:
            f.seek(self._log_offset)
            text = f.read()
        self._log_offset += len(text)
        return text.count(b"Traceback (most recent call last)")

    # ------------------------------------------------------------ one frame
    def send(self, mutant: Mutant) -> str:
        """Send one mutant followed by a sentinel ApiVersions; its outcome (one of OUTCOMES or
        "failure", which is recorded). With a broker log, a traceback logged meanwhile is a failure."""
        outcome = self._send(mutant)
        if outcome != "failure" and self.new_tracebacks():
            return self._fail(mutant, f"a traceback in the broker log (outcome {outcome})")
        return outcome

    def _send(self, mutant: Mutant) -> str:
        self.stats.frames += 1
        self._sentinel = SENTINEL_CID + self.stats.frames % 0xFFFF
        sentinel = _frame(encode_request(protocol_apis.api_versions, 0, self._sentinel, "fuzz", {}))
        try:
            sock = self._connect()
            sock.sendall(mutant.wire() + sentinel)
        except OSError:      # closed under us before the write: count it as the close it is
            self._drop()
            return self._count("close")
        answers, ending = self._collect()
        if ending == "timeout":
            self._drop()
            decoded = _decode_request(mutant.data)
            if decoded is not None and decoded[0].API_KEY in PARKING_APIS:
                return self._count("parked")
            return self._fail(mutant, f"no answer and no close within {self.timeout} s")
        if ending == "closed":
            self._drop()
        if len(answers) > 1:
            return self._fail(mutant, f"{len(answers)} answers to one request")
        if answers:
            problem = _check_answer(mutant.data, answers[0])
            return self._fail(mutant, problem) if problem else self._count("answer")
        if ending == "closed":
            return self._count("close")
        decoded = _decode_request(mutant.data)
        if decoded is not None and decoded[0].API_KEY == PRODUCE_KEY and decoded[1].acks == 0:
            return self._count("no-answer")
        return self._fail(mutant, "the broker sent no answer and kept the connection")

    def _collect(self) -> tuple[list[bytes], str]:
        """Frames before the sentinel's answer, and how that ended: "sentinel", "closed", "timeout"."""
        assert self._sock is not None
        answers: list[bytes] = []
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return answers, "timeout"
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                return answers, "timeout"
            except OSError:
                return answers, "closed"
            if not chunk:
                return answers, "closed"
            for f in self._reader.feed(chunk):
                if len(f) >= 4 and struct.unpack_from(">i", f)[0] == self._sentinel:
                    return answers, "sentinel"
                answers.append(bytes(f))   # (a reader that does not lend gives bytes)

    def _count(self, outcome: str) -> str:
        self.stats.outcomes[outcome] += 1
        return outcome

    def _fail(self, mutant: Mutant, what: str) -> str:
        self.stats.failures.append(Failure(what, mutant.describe()))
        return "failure"

    # ------------------------------------------------------------ a run
    def run(self, bases: Sequence[BaseRequest], frames: int, rng: random.Random, check_every: int = 1000,
            progress: Callable[[FuzzStats], None] | None = None) -> FuzzStats:
        """Send ``frames`` mutants of ``bases``; check the broker on a fresh connection every
        ``check_every`` frames and at the end (a failure there stops the run)."""
        sent = 0
        while sent < frames:
            mutant = mutate(rng.choice(bases), rng)
            if mutant is None:
                continue
            self.send(mutant)
            sent += 1
            if sent % check_every == 0 or sent == frames:
                if progress is not None:
                    progress(self.stats)
                problem = self.healthy()
                if problem is not None:
                    self.stats.failures.append(Failure(problem, f"after frame {sent}"))
                    break
        self._drop()
        return self.stats


def _check_answer(data: bytes, answer: bytes) -> str | None:
    expected = _expected_answer(data)
    if expected is None:
        return "an answer to a frame whose header does not parse"
    api, version, cid = expected
    if api.API_KEY == API_VERSIONS_KEY and len(answer) >= 6 \
            and struct.unpack_from(">h", answer, 4)[0] == ErrorCode.UNSUPPORTED_VERSION:
        version = 0   # an unsupported ApiVersions version is answered in the v0 layout
    try:
        got, _ = decode_response(api, version, answer)
    except (KafkaError, ValueError) as e:
        return f"undecodable {api.NAME} v{version} answer: {e}"
    return None if got == cid else f"correlation id {got}, expected {cid}"


def _frame(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _read_one(sock: socket.socket, timeout: float) -> bytes | None:
    reader = FrameReader(1 << 30)
    sock.settimeout(timeout)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        if frames := reader.feed(chunk):
            return bytes(frames[0])


# ---------------------------------------------------------------- the log stays readable

def produce_values(bootstrap: str, topic: str, values: Iterable[bytes]) -> None:
    """Produce ``values`` to partition 0 of ``topic`` with acks=all (odradek's Producer)."""
    from odradek.client.producer import Producer
    producer = Producer(bootstrap_servers=bootstrap, acks="all")
    try:
        for v in values:
            producer.send(topic, value=v, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()


def read_values(bootstrap: str, topic: str, timeout: float = 30.0) -> list[bytes]:
    """Every value in partition 0 of ``topic``, from the beginning to the current end (odradek's
    Consumer); raises TimeoutError if the end is not reached in ``timeout`` seconds."""
    from odradek.client.consumer import Consumer
    from odradek.client.structs import TopicPartition
    tp = TopicPartition(topic, 0)
    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(values)} records of {topic}-0 up to offset "
                                   f"{consumer.position(tp)}, not {end}, in {timeout} s")
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records if isinstance(r.value, bytes)]
        return values
    finally:
        consumer.close(autocommit=False)


# ---------------------------------------------------------------- the standalone runner

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.testing.request_fuzzer",
                                     description="Send mutated requests of every API a broker serves.")
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT of the broker to fuzz")
    parser.add_argument("--frames", type=int, default=10000, help="mutated frames to send")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    parser.add_argument("--topic", default="fuzz", help="the topic the requests name (created if missing)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for each answer")
    parser.add_argument("--broker-log", default=None, help="the broker's log file: a traceback in it is a failure")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    from odradek.testing.topics import create_topic
    try:
        create_topic(args.bootstrap_server, args.topic)
    except Exception as e:  # it exists already (or the broker says why not: the run shows it)
        print(f"create topic {args.topic}: {e}", file=sys.stderr)
    before = [b"fuzz-before-%d" % i for i in range(10)]
    after = [b"fuzz-after-%d" % i for i in range(10)]
    produce_values(args.bootstrap_server, args.topic, before)
    fuzzer = Fuzzer(args.bootstrap_server, args.timeout, args.broker_log)
    bases = base_requests(fuzzer.served_apis(), args.topic)
    print(f"seed {seed}: {len(bases)} valid requests of {len({b.api.API_KEY for b in bases})} APIs, "
          f"{args.frames} mutated frames", flush=True)
    started = time.monotonic()
    stats = fuzzer.run(bases, args.frames, random.Random(seed), check_every=max(1, min(5000, args.frames // 10)),
                       progress=lambda s: print(f"  {s.summary()} ({time.monotonic() - started:.0f} s)", flush=True))
    try:
        produce_values(args.bootstrap_server, args.topic, after)
        values = set(read_values(args.bootstrap_server, args.topic))
        missing = [v for v in before + after if v not in values]
        if missing:
            stats.failures.append(Failure(f"{len(missing)} valid records not read back", repr(missing[:3])))
    except Exception as e:
        stats.failures.append(Failure(f"the log is not readable: {e}", args.topic))
    print(f"{stats.summary()} in {time.monotonic() - started:.0f} s")
    for f in stats.failures[:50]:
        print(f"FAILURE {f.what}\n  {f.frame}")
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
