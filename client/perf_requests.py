"""``odradek perf requests``: the broker's cost per small request, against the framework floor.

Invariant: the load is many pipelined requests of ONE kind (Produce of one record, or of
``--records`` records of ``--record-size`` bytes in one batch, with ``--acks``; Fetch with nothing
new, Metadata of one topic or of all topics, ApiVersions, OffsetCommit, Heartbeat), each frame
encoded once by odradek's codec and re-sent with only its correlation id changed, from
``--processes`` client processes of ``--connections`` sockets with ``--in-flight`` requests
outstanding on each; every response is read whole, and the first and every ``--check-every``-th
after it decoded and its error code checked (a benchmark of errors is no benchmark). The
broker's CPU is read from /proc/<pid>/stat before and after (the process listening on the port,
or ``--broker-pid``). ``--floor`` runs the same clients, in the same run, against a minimal
Twisted server that answers each frame with a fixed response, so every figure comes with its
ratio to what any Python server on this machine costs per request.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import selectors
import socket
import struct
import subprocess
import sys
import time
from types import ModuleType
from typing import Any

from odradek.protocol import header
from odradek.protocol.apis import api_versions as _api_versions
from odradek.protocol.apis import fetch as _fetch
from odradek.protocol.apis import find_coordinator as _find_coordinator
from odradek.protocol.apis import list_offsets as _list_offsets
from odradek.protocol.apis import metadata as _metadata
from odradek.protocol.apis import offset_commit as _offset_commit
from odradek.protocol.apis import produce as _produce
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import BatchBuilder

from .connection import BrokerConnection
from .consumer import Consumer
from .perf import percentiles

KINDS = ("produce", "fetch", "metadata", "metadata-all", "api-versions", "offset-commit", "heartbeat")
ON_TOPIC = ("produce", "fetch", "metadata", "offset-commit", "heartbeat")   # the kinds that name --topic
GROUP = "odradek-perf-requests"   # the groups OffsetCommit and Heartbeat use are named after it
_SIZE = struct.Struct(">i")
_CID = struct.Struct(">i")
LARGE = 65536   # a request frame this large is sent on its own, not joined with the others


def _connect(bootstrap: str) -> BrokerConnection:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return BrokerConnection(host or "127.0.0.1", int(port), client_id="perf-requests").connect()


def _coordinator(conn: BrokerConnection, group: str) -> BrokerConnection:
    """The connection to ``group``'s coordinator (waiting while __consumer_offsets is being created)."""
    deadline = time.monotonic() + 60
    while True:
        resp = conn.request(_find_coordinator, {"key": group, "key_type": 0})
        if resp.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and time.monotonic() < deadline:
            time.sleep(0.5)
            continue
        if resp.error_code:
            raise SystemExit(f"Error: FindCoordinator for {group}: {ErrorCode(resp.error_code).name}")
        break
    if (resp.host, resp.port) == (conn.host, conn.port):
        return conn
    return BrokerConnection(resp.host, resp.port, node_id=resp.node_id, client_id="perf-requests").connect()


def _member(bootstrap: str, topic: str, group: str) -> Any:
    """A consumer that joined ``group`` through odradek's group core (its heartbeat thread keeps it
    in the group while the load runs); closed by the caller."""
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=30000,
                        enable_auto_commit=False)
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        if time.monotonic() > deadline:
            raise SystemExit(f"Error: no assignment in group {group} within 60 s")
        consumer.poll(timeout_ms=200)
    return consumer


def _metadata_body(topic: str | None) -> dict[str, Any]:
    """A Metadata request for ``topic``, or for all topics (None)."""
    return {"topics": None if topic is None else [{"name": topic}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


def _require_topic(conn: BrokerConnection, topic: str) -> None:
    """Refuse, in one line, a topic the broker does not know: its every answer would be an error."""
    resp = conn.request(_metadata, _metadata_body(topic))
    code = resp.topics[0].error_code
    if code:
        raise SystemExit(f"Error: topic {topic!r}: {ErrorCode(code).name} (the load needs an existing topic "
                         f"whose partition 0 this broker leads: create it, or pass --topic)")


def prepare(kind: str, bootstrap: str, topic: str, keep: list, records: int = 1, record_size: int = 100,
            acks: int = 1) -> tuple[str, ModuleType, int, bytes]:
    """(address, API, version, request frame without its size) for ``kind``; talks to the broker
    to learn what the frame needs (the log end offset, the coordinator, a group member). What must
    live while the load runs (the member) is appended to ``keep``, for the caller to close."""
    conn = _connect(bootstrap)
    address = f"{conn.host}:{conn.port}"
    if kind in ON_TOPIC:
        _require_topic(conn, topic)
    api: ModuleType
    body: dict[str, Any]
    if kind == "api-versions":
        api, body = _api_versions, {"client_software_name": "odradek-perf", "client_software_version": "1"}
    elif kind in ("metadata", "metadata-all"):
        api, body = _metadata, _metadata_body(topic if kind == "metadata" else None)
    elif kind == "produce":
        batch = BatchBuilder()
        for _ in range(records):
            batch.append(int(time.time() * 1000), None, b"x" * record_size)
        api, body = _produce, {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
                               "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch.build()}]}]}
    elif kind == "fetch":
        offsets = conn.request(_list_offsets, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        end = offsets.topics[0].partitions[0].offset
        api, body = _fetch, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                             "topics": [{"topic": topic, "partitions": [
                                 {"partition": 0, "fetch_offset": end, "partition_max_bytes": 1 << 20}]}],
                             "forgotten_topics_data": [], "rack_id": ""}
    elif kind == "offset-commit":   # a group without members, as a consumer with assign() commits
        conn = _coordinator(conn, f"{GROUP}-commits")
        address = f"{conn.host}:{conn.port}"
        api, body = _offset_commit, {"group_id": f"{GROUP}-commits", "generation_id": -1, "member_id": "", "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                            "committed_metadata": ""}]}]}
    elif kind == "heartbeat":   # the heartbeats of a member that joined
        group = f"{GROUP}-heartbeats-{os.getpid()}"
        conn = _coordinator(conn, group)
        address = f"{conn.host}:{conn.port}"
        member = _member(bootstrap, topic, group)
        keep.append(member)
        coordinator = member._group("heartbeat")
        api, body = coordinator.heartbeat_request(coordinator.generation)
    else:
        raise SystemExit(f"Error: unknown request kind {kind!r} ({', '.join(KINDS)})")
    version = conn.version_for(api)
    return address, api, version, header.encode_request(api, version, 0, "perf-requests", body)


def _error_code(api: ModuleType, version: int, frame: bytes) -> int:
    """The first error code of a response (0: none); decoded in full, so a bad answer shows."""
    _, resp = header.decode_response(api, version, frame)
    if api is _produce:
        return int(resp.responses[0].partition_responses[0].error_code)
    if api is _fetch:
        return int(resp.error_code or resp.responses[0].partition_responses[0].error_code)
    if api is _metadata:
        return int(resp.topics[0].error_code)
    if api is _offset_commit:
        return int(resp.topics[0].partitions[0].error_code)
    return int(resp.error_code)


def _client(*args: Any) -> None:
    """One client process; puts (count, latencies us, errors), or the exception that ended it."""
    results = args[-1]
    try:
        results.put(_load(*args[:-1]))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        results.put(e)


def _load(address: str, api: ModuleType, version: int, frame: bytes, connections: int, in_flight: int,
          seconds: float, check_every: int) -> tuple[int, list[int], int, int]:
    """Pipelined requests on ``connections`` sockets until ``seconds`` pass."""
    host, _, port = address.rpartition(":")
    sel = selectors.DefaultSelector()
    template = bytearray(_SIZE.pack(len(frame)) + frame)
    states: list[dict[str, Any]] = []
    for _ in range(connections):
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = {"sock": s, "sent": [], "buf": bytearray(), "cid": 0}
        states.append(state)
        sel.register(s, selectors.EVENT_READ, state)
    latencies: list[int] = []
    count = errors = first_error = 0
    deadline = time.perf_counter() + seconds

    def send(state: dict, n: int) -> None:
        out = bytearray()
        now = time.perf_counter()
        for _ in range(n):
            state["cid"] += 1
            _CID.pack_into(template, 8, state["cid"])
            state["sent"].append(now)
            if len(template) < LARGE:
                out += template
            else:   # a large request goes as it is (the kernel copies it before the next id is set)
                state["sock"].sendall(template)
        if out:
            state["sock"].sendall(out)

    for state in states:
        send(state, in_flight)
    while True:
        now = time.perf_counter()
        if now >= deadline and not any(st["sent"] for st in states):
            break
        for key, _ in sel.select(timeout=1.0):
            state = key.data
            data = state["sock"].recv(1 << 20)
            if not data:
                raise SystemExit(f"Error: {address} closed the connection")
            buf = state["buf"]
            buf += data
            done = 0
            while len(buf) >= 4:
                size = _SIZE.unpack_from(buf)[0]
                if len(buf) < 4 + size:
                    break
                frame_in = bytes(buf[4:4 + size])
                del buf[:4 + size]
                t0 = state["sent"].pop(0)
                latencies.append(int((time.perf_counter() - t0) * 1e6))
                count += 1
                done += 1
                if check_every and (count - 1) % check_every == 0:   # the 1st, the (N+1)th, ...
                    code = _error_code(api, version, frame_in)
                    if code:
                        errors += 1
                        first_error = first_error or code
            if done and time.perf_counter() < deadline:
                send(state, done)
    for st in states:
        st["sock"].close()
    return count, latencies, errors, first_error


def _listening_pid(port: int) -> int | None:
    """The local process with a listening TCP socket on ``port`` (from /proc), if this user can see it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_load(address: str, api: ModuleType, version: int, frame: bytes, args: argparse.Namespace,
             pid: int | None) -> dict[str, float]:
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(address, api, version, frame, args.connections, args.in_flight,
                                               args.seconds, args.check_every, results))
             for _ in range(args.processes)]
    cpu0 = _cpu_seconds(pid) if pid else None
    start = time.perf_counter()
    for p in procs:
        p.start()
    outs = [results.get(timeout=args.seconds + 120) for _ in procs]
    failed = next((o for o in outs if isinstance(o, BaseException)), None)
    if failed is not None:
        raise SystemExit(f"Error: a client process failed: {failed!r}")
    elapsed = time.perf_counter() - start
    cpu = _cpu_seconds(pid) - cpu0 if pid and cpu0 is not None else None
    for p in procs:
        p.join()
    count = sum(o[0] for o in outs)
    latencies = sorted(x for o in outs for x in o[1])
    p50, p99 = percentiles(latencies, (0.5, 0.99)) if latencies else (0, 0)
    return {"requests": count, "rate": count / elapsed, "p50_us": p50, "p99_us": p99, "bytes": len(frame) + 4,
            "errors": sum(o[2] for o in outs), "first_error": next((o[3] for o in outs if o[3]), 0),
            "cpu_us": (cpu / count * 1e6) if cpu is not None and count else -1.0}


def _floor_server() -> tuple[subprocess.Popen, int]:
    """The framework floor: a Twisted server answering every frame with a fixed 10-byte response."""
    code = (
        "import struct, sys\n"
        "from twisted.internet import reactor, protocol\n"
        "from twisted.protocols.basic import Int32StringReceiver\n"
        "class Fixed(Int32StringReceiver):\n"
        "    MAX_LENGTH = 100 << 20\n"
        "    def stringReceived(self, frame):\n"
        "        self.sendString(frame[4:8] + b'\\x00\\x00\\x00\\x00\\x00\\x00')\n"
        "f = protocol.ServerFactory(); f.protocol = Fixed\n"
        "port = reactor.listenTCP(0, f, interface='127.0.0.1')\n"
        "print(port.getHost().port, flush=True)\n"
        "reactor.run()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.isdigit():
        proc.kill()
        raise SystemExit("Error: the floor server did not start")
    return proc, int(line)


def _report(name: str, r: dict[str, float], floor: dict[str, float] | None, out: Any) -> None:
    cpu = f"{r['cpu_us']:.1f} us broker CPU/request" if r["cpu_us"] >= 0 else "broker CPU n/a"
    line = (f"{name}: {r['requests']:,} requests, {r['rate']:,.0f} requests/s, latency p50 {r['p50_us'] / 1000:.2f} ms "
            f"p99 {r['p99_us'] / 1000:.2f} ms, {cpu}, {r['errors']} errors")
    if floor is not None and floor["cpu_us"] > 0 and r["cpu_us"] > 0:
        line += f" ({r['cpu_us'] / floor['cpu_us']:.1f} x the floor's {floor['cpu_us']:.1f} us)"
    if r["bytes"] >= LARGE:
        line += f"; {r['rate'] * r['bytes'] / 1e6:,.0f} MB/s of requests"
        if r["cpu_us"] >= 0:
            line += f", {r['cpu_us'] / r['bytes'] * 1e3:.2f} broker CPU-s per GB"
    print(line, file=out, flush=True)


def main(argv: list[str], out: Any = None) -> int:
    out = out or sys.stdout
    ap = argparse.ArgumentParser(prog="odradek perf requests", description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    ap.add_argument("--request", action="append", choices=KINDS, help="request kind (repeatable; default: all)")
    ap.add_argument("--topic", default="perf-requests", help="an existing topic whose partition 0 this broker leads")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--connections", type=int, default=4, help="per process")
    ap.add_argument("--in-flight", type=int, default=64, help="outstanding requests per connection")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--check-every", type=int, default=64, help="decode every Nth response fully (0: never)")
    ap.add_argument("--records", type=int, default=1, help="records per Produce (one batch)")
    ap.add_argument("--record-size", type=int, default=100, help="bytes of each Produce record's value")
    ap.add_argument("--acks", choices=("1", "-1", "all"), default="1",
                    help="a Produce's acks (-1 and all: answered once the ISR has the record)")
    ap.add_argument("--broker-pid", type=int, help="default: the local process listening on the address")
    ap.add_argument("--floor", action="store_true", help="also measure a fixed-response Twisted server")
    args = ap.parse_args(argv)
    floor = None
    if args.floor:
        proc, port = _floor_server()
        try:
            frame = header.encode_request(_api_versions, 0, 0, "perf-requests", {})
            floor = run_load(f"127.0.0.1:{port}", _api_versions, 0, frame, args, proc.pid)
            floor["errors"] = 0
            _report("floor (fixed response)", floor, None, out)
        finally:
            proc.terminate()
            proc.wait(10)
    for kind in args.request or KINDS:
        keep: list = []
        try:
            address, api, version, frame = prepare(kind, args.bootstrap_server, args.topic, keep, args.records,
                                                   args.record_size, 1 if args.acks == "1" else -1)
            pid = args.broker_pid or _listening_pid(int(address.rpartition(":")[2]))
            result = run_load(address, api, version, frame, args, pid)
        finally:
            for member in keep:
                member.close()
        _report(f"{kind} (v{version})", result, floor, out)
        if result["errors"]:
            print(f"Error: {kind}: {result['errors']} responses carried an error "
                  f"({ErrorCode(int(result['first_error'])).name} first)", file=sys.stderr)
            return 1
    return 0
