"""A tiny in-test Kafka broker speaking the real framing, for client unit tests.

Invariant: one thread per connection; requests are decoded with odradek.protocol
and answered in order; state (topics, in-memory logs) is shared under one lock.
Behaviour hooks let a test script ApiVersions negotiation and inject errors:
``api_versions_max`` (answer higher versions with error 35 in v0 format),
``drop_api_versions_above`` (close the socket instead), ``produce_errors``
(a list of error codes returned, one per Produce partition answer, before
succeeding). Not a broker: no replication, no ZooKeeper, loopback only.
"""
from __future__ import annotations

import socket
import threading
import time

from odradek.protocol import record_batch
from odradek.protocol.apis import API_BY_KEY
from odradek.protocol.connection import FrameReader, frame_parts
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import decode_request_header, encode_response

class FakeBroker:
    def __init__(self, node_id: int = 0, *, api_versions_max: int = 3, drop_api_versions_above: int | None = None,
                 advertise: dict[int, tuple[int, int]] | None = None) -> None:
        self.node_id = node_id
        self.api_versions_max = api_versions_max
        self.drop_api_versions_above = drop_api_versions_above
        self.advertise = advertise or {k: (m.MIN_VERSION, m.MAX_VERSION) for k, m in API_BY_KEY.items()}
        self.lock = threading.Lock()
        self.logs: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.topics: dict[str, int] = {}
        self.auto_create_partitions = 1
        self.produce_errors: list[int] = []
        self.requests: list[tuple[int, int]] = []  # (api_key, version) received
        self.api_versions_seen: list[int] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str, partitions: int) -> None:
        with self.lock:
            self.topics[name] = partitions
            for p in range(partitions):
                self.logs.setdefault((name, p), [])
                self.next_offset.setdefault((name, p), 0)

    def stop(self) -> None:
        self._stopped = True
        self._sock.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    # -- networking -------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _frames(self, conn: socket.socket):
        """The request frames arriving on ``conn``, through the one framer (sans-IO)."""
        reader = FrameReader(1 << 30)
        while chunk := conn.recv(65536):
            yield from reader.feed(chunk)

    def _serve(self, conn: socket.socket) -> None:
        try:
            for frame in self._frames(conn):
                header, offset = decode_request_header(frame)
                self.requests.append((header.api_key, header.api_version))
                api = API_BY_KEY[header.api_key]
                if header.api_key == 18:
                    self.api_versions_seen.append(header.api_version)
                    if self.drop_api_versions_above is not None and header.api_version > self.drop_api_versions_above:
                        conn.close()
                        return
                    if header.api_version > self.api_versions_max:
                        body = {"error_code": ErrorCode.UNSUPPORTED_VERSION,
                                "api_keys": [{"api_key": 18, "min_version": 0, "max_version": self.api_versions_max}]}
                        out = encode_response(api, 0, header.correlation_id, body)
                        conn.sendall(b"".join(frame_parts(out)))
                        continue
                req = api.Request.decode(memoryview(frame)[offset:], header.api_version)
                handler = getattr(self, f"_h_{api.NAME}")
                body = handler(req, header.api_version)
                if body is None:  # acks=0
                    continue
                out = encode_response(api, header.api_version, header.correlation_id, body)
                conn.sendall(b"".join(frame_parts(out)))
        except OSError:
            return
        finally:
            conn.close()

    # -- handlers ------------------------------------------------------------------------

    def _h_ApiVersions(self, req, version):
        return {"error_code": 0, "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                                              for k, (lo, hi) in sorted(self.advertise.items())]}

    def _h_Metadata(self, req, version):
        with self.lock:
            if req.topics is None:
                names = list(self.topics)
            else:
                names = [t.name for t in req.topics]
                if getattr(req, "allow_auto_topic_creation", True):
                    for n in names:
                        if n not in self.topics:
                            self.topics[n] = self.auto_create_partitions
                            for p in range(self.auto_create_partitions):
                                self.logs.setdefault((n, p), [])
                                self.next_offset.setdefault((n, p), 0)
            topics = []
            for n in names:
                if n not in self.topics:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": n, "partitions": []})
                    continue
                topics.append({"error_code": 0, "name": n, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": self.node_id, "leader_epoch": 0,
                     "replica_nodes": [self.node_id], "isr_nodes": [self.node_id], "offline_replicas": []}
                    for p in range(self.topics[n])]})
        return {"brokers": [{"node_id": self.node_id, "host": "127.0.0.1", "port": self.port, "rack": None}],
                "cluster_id": "fake-cluster", "controller_id": self.node_id, "topics": topics}

    def _h_Produce(self, req, version):
        responses = []
        with self.lock:
            for t in req.topic_data:
                parts = []
                for p in t.partition_data:
                    key = (t.name, p.index)
                    if self.produce_errors:
                        parts.append({"index": p.index, "error_code": self.produce_errors.pop(0), "base_offset": -1})
                        continue
                    if key not in self.logs:
                        parts.append({"index": p.index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      "base_offset": -1})
                        continue
                    buf = bytearray(p.records)
                    base = self.next_offset[key]
                    nxt = base
                    for pos, h in record_batch.iter_headers(buf):
                        record_batch.set_base_offset(buf, pos, nxt)
                        self.logs[key].append((nxt, bytes(buf[pos:pos + h.size])))
                        nxt += h.last_offset_delta + 1
                    self.next_offset[key] = nxt
                    parts.append({"index": p.index, "error_code": 0, "base_offset": base,
                                  "log_append_time_ms": -1, "log_start_offset": 0})
                responses.append({"name": t.name, "partition_responses": parts})
        if req.acks == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _fetch_once(self, req):
        responses = []
        total = 0
        for t in req.topics:
            parts = []
            for p in t.partitions:
                key = (t.topic, p.partition)
                if key not in self.logs:
                    parts.append({"partition": p.partition, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  "high_watermark": -1, "record_set": None})
                    continue
                leo = self.next_offset[key]
                if p.fetch_offset > leo:
                    parts.append({"partition": p.partition, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE,
                                  "high_watermark": leo, "record_set": None})
                    continue
                out = bytearray()
                for base, data in self.logs[key]:
                    h = record_batch.parse_header(data)
                    if base + h.last_offset_delta < p.fetch_offset:
                        continue
                    if out and len(out) + len(data) > p.partition_max_bytes:
                        break
                    out += data
                total += len(out)
                parts.append({"partition": p.partition, "error_code": 0, "high_watermark": leo,
                              "last_stable_offset": leo, "log_start_offset": 0, "aborted_transactions": None,
                              "record_set": bytes(out)})
            responses.append({"topic": t.topic, "partition_responses": parts})
        return total, responses

    def _h_Fetch(self, req, version):
        deadline = time.monotonic() + req.max_wait_ms / 1000.0
        while True:
            with self.lock:
                total, responses = self._fetch_once(req)
            errors = any(p["error_code"] for t in responses for p in t["partition_responses"])
            if errors or total >= max(req.min_bytes, 1) or time.monotonic() >= deadline:
                return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
            time.sleep(0.005)

    def _h_ListOffsets(self, req, version):
        topics = []
        with self.lock:
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    key = (t.name, p.partition_index)
                    if key not in self.logs:
                        parts.append({"partition_index": p.partition_index,
                                      "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
                        continue
                    offset = 0 if p.timestamp == -2 else self.next_offset[key]
                    parts.append({"partition_index": p.partition_index, "error_code": 0, "timestamp": -1,
                                  "offset": offset, "old_style_offsets": [offset]})
                topics.append({"name": t.name, "partitions": parts})
        return {"topics": topics}

    def _h_CreateTopics(self, req, version):
        out = []
        for t in req.topics:
            if t.name in self.topics:
                out.append({"name": t.name, "error_code": ErrorCode.TOPIC_ALREADY_EXISTS,
                            "error_message": "exists"})
            else:
                self.create_topic(t.name, t.num_partitions if t.num_partitions > 0 else 1)
                out.append({"name": t.name, "error_code": 0, "error_message": None})
        return {"topics": out}

    def _h_DeleteTopics(self, req, version):
        out = []
        with self.lock:
            for n in req.topic_names:
                if n in self.topics:
                    del self.topics[n]
                    out.append({"name": n, "error_code": 0})
                else:
                    out.append({"name": n, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
        return {"responses": out}
