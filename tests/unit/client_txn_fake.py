"""A fake transaction coordinator (and transactional log) on top of the in-test group fake broker.

Invariant: speaks the real wire protocol and follows Kafka 2.8's rules closely
enough for client tests: InitProducerId allocates a producer id per
transactional.id and bumps its epoch on every later call (aborting an open
transaction), requests carrying an older epoch get PRODUCER_FENCED (Produce:
INVALID_PRODUCER_EPOCH), EndTxn appends a real control batch (A's
``build_control_batch``) to every partition of the transaction and, on commit,
applies the TxnOffsetCommit offsets to the group. read_committed Fetch stops at
the last stable offset and lists the aborted transactions it covers.
``inject[api_name]`` is a list of error codes answered (one per request) before
the real handling; ``txn_log`` records what arrived, in order. Not a broker.
"""
from __future__ import annotations

import time

from client_group_fake import GroupFakeBroker

from odradek.protocol import record_batch
from odradek.protocol.control_records import build_control_batch
from odradek.protocol.errors import ErrorCode


class TxnState:
    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.epoch = 0
        self.partitions: set[tuple[str, int]] = set()
        self.groups: set[str] = set()
        self.pending_offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.timeout_ms = 0


class TxnFakeBroker(GroupFakeBroker):
    def __init__(self, node_id: int = 0, **kw) -> None:
        super().__init__(node_id, **kw)
        self.txns: dict[str, TxnState] = {}
        self.next_pid = 1000
        self.txn_log: list[tuple] = []
        self.produce_violations: list[str] = []
        # per partition: first offset of each open transaction {pid: first_offset}; aborted [(pid, first, last)]
        self.open_txn: dict[tuple[str, int], dict[int, int]] = {}
        self.aborted: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self.committed_offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.idempotent_pids: set[int] = set()

    # -- plumbing -------------------------------------------------------------------------------

    def _txn_injected(self, name: str) -> int | None:
        errs = self.inject.get(name)
        if errs:
            return errs.pop(0)
        return None

    def _check_epoch(self, tid: str, pid: int, epoch: int) -> int:
        st = self.txns.get(tid)
        if st is None or st.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < st.epoch:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE

    def _append(self, key: tuple[str, int], data: bytes) -> int:
        buf = bytearray(data)
        base = self.next_offset[key]
        record_batch.set_base_offset(buf, 0, base)
        h = record_batch.parse_header(buf)
        self.logs[key].append((base, bytes(buf)))
        self.next_offset[key] = base + h.last_offset_delta + 1
        return base

    def _end(self, st: TxnState, commit: bool) -> None:
        """Write the markers and settle the offsets of ``st``'s open transaction."""
        for key in sorted(st.partitions):
            marker = build_control_batch(st.producer_id, st.epoch, commit, 0, int(time.time() * 1000))
            offset = self._append(key, marker)
            first = self.open_txn.get(key, {}).pop(st.producer_id, None)
            if not commit and first is not None:
                self.aborted.setdefault(key, []).append((st.producer_id, first, offset))
        for group, offsets in st.pending_offsets.items():
            if commit:
                self.committed_offsets.setdefault(group, {}).update(offsets)
        st.partitions.clear()
        st.groups.clear()
        st.pending_offsets.clear()

    # -- handlers -----------------------------------------------------------------------------------

    def _h_FindCoordinator(self, req, version):
        self.txn_log.append(("FindCoordinator", getattr(req, "key_type", 0), req.key))
        if getattr(req, "key_type", 0) == 1:
            code = self._txn_injected("FindCoordinator")
            if code is not None:
                return {"error_code": code, "error_message": None, "node_id": -1, "host": "", "port": -1}
            return {"error_code": 0, "error_message": None, "node_id": self.node_id, "host": "127.0.0.1",
                    "port": self.port}
        return super()._h_FindCoordinator(req, version)

    def _h_InitProducerId(self, req, version):
        with self.lock:
            self.txn_log.append(("InitProducerId", req.transactional_id, getattr(req, "producer_id", -1),
                                 getattr(req, "producer_epoch", -1)))
            code = self._txn_injected("InitProducerId")
            if code is not None:
                return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
            if req.transactional_id is None:
                self.next_pid += 1
                self.idempotent_pids.add(self.next_pid)
                return {"error_code": 0, "producer_id": self.next_pid, "producer_epoch": 0}
            st = self.txns.get(req.transactional_id)
            if st is None:
                self.next_pid += 1
                st = self.txns[req.transactional_id] = TxnState(self.next_pid)
            else:
                if st.partitions:  # a new producer takes over: abort what the old one left open
                    self._end(st, commit=False)
                st.epoch += 1
            st.timeout_ms = req.transaction_timeout_ms
            return {"error_code": 0, "producer_id": st.producer_id, "producer_epoch": st.epoch}

    def _h_AddPartitionsToTxn(self, req, version):
        with self.lock:
            parts = [(t.name, p) for t in req.topics for p in t.partitions]
            self.txn_log.append(("AddPartitionsToTxn", tuple(sorted(parts))))
            code = self._txn_injected("AddPartitionsToTxn")
            if code is None:
                code = self._check_epoch(req.transactional_id, req.producer_id, req.producer_epoch)
            if code == ErrorCode.NONE:
                self.txns[req.transactional_id].partitions.update(parts)
            by_topic: dict[str, list] = {}
            for t, p in parts:
                by_topic.setdefault(t, []).append({"partition_index": p, "error_code": code})
            return {"results": [{"name": t, "results": ps} for t, ps in by_topic.items()]}

    def _h_AddOffsetsToTxn(self, req, version):
        with self.lock:
            self.txn_log.append(("AddOffsetsToTxn", req.group_id))
            code = self._txn_injected("AddOffsetsToTxn")
            if code is None:
                code = self._check_epoch(req.transactional_id, req.producer_id, req.producer_epoch)
            if code == ErrorCode.NONE:
                st = self.txns[req.transactional_id]
                st.groups.add(req.group_id)
                st.partitions.add(("__consumer_offsets", 0))
                self.logs.setdefault(("__consumer_offsets", 0), [])
                self.next_offset.setdefault(("__consumer_offsets", 0), 0)
            return {"error_code": code}

    def _h_TxnOffsetCommit(self, req, version):
        with self.lock:
            offsets = {(t.name, p.partition_index): p.committed_offset for t in req.topics for p in t.partitions}
            self.txn_log.append(("TxnOffsetCommit", version, req.group_id, getattr(req, "generation_id", -1),
                                 getattr(req, "member_id", ""), tuple(sorted(offsets.items()))))
            code = self._txn_injected("TxnOffsetCommit")
            st = self.txns.get(req.transactional_id)
            if code is None:
                code = ErrorCode.NONE
                if st is None or req.producer_epoch < st.epoch:
                    code = ErrorCode.PRODUCER_FENCED
                elif req.group_id not in st.groups:
                    code = ErrorCode.INVALID_TXN_STATE
                else:
                    g = self.state.groups.get(req.group_id)
                    gen = getattr(req, "generation_id", -1)
                    if gen >= 0 and g is not None and gen != g.generation:
                        code = ErrorCode.ILLEGAL_GENERATION
            if code == ErrorCode.NONE:
                st.pending_offsets.setdefault(req.group_id, {}).update(offsets)
            return {"topics": [{"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
                for t in req.topics]}

    def _h_EndTxn(self, req, version):
        with self.lock:
            self.txn_log.append(("EndTxn", req.committed))
            code = self._txn_injected("EndTxn")
            if code is None:
                code = self._check_epoch(req.transactional_id, req.producer_id, req.producer_epoch)
            if code == ErrorCode.NONE:
                self._end(self.txns[req.transactional_id], commit=req.committed)
            return {"error_code": code}

    def _h_Produce(self, req, version):
        with self.lock:
            code = self._txn_injected("Produce")
            batches = []
            for t in req.topic_data:
                for p in t.partition_data:
                    for _pos, h in record_batch.iter_headers(p.records):
                        batches.append(((t.name, p.index), h))
            self.txn_log.append(("Produce", req.transactional_id,
                                 tuple((key, h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional)
                                       for key, h in batches)))
            fenced = False
            if req.transactional_id is not None:
                st = self.txns.get(req.transactional_id)
                for key, h in batches:
                    if st is None or h.producer_epoch < st.epoch:
                        fenced = True
                    elif key not in st.partitions:
                        self.produce_violations.append(f"{key} produced before AddPartitionsToTxn")
            if code is not None or fenced:
                code = ErrorCode.INVALID_PRODUCER_EPOCH if fenced else code
                return {"responses": [{"name": t.name, "partition_responses": [
                    {"index": p.index, "error_code": code, "base_offset": -1} for p in t.partition_data]}
                    for t in req.topic_data], "throttle_time_ms": 0}
            for key, h in batches:
                if h.is_transactional and key in self.next_offset:
                    self.open_txn.setdefault(key, {}).setdefault(h.producer_id, self.next_offset[key])
        return super()._h_Produce(req, version)

    def _fetch_once(self, req):
        if getattr(req, "isolation_level", 0) != 1:
            return super()._fetch_once(req)
        total, responses = 0, []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                key = (t.topic, p.partition)
                if key not in self.logs:
                    parts.append({"partition": p.partition, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  "high_watermark": -1, "record_set": None})
                    continue
                leo = self.next_offset[key]
                lso = min(self.open_txn.get(key, {}).values(), default=leo)
                out = bytearray()
                for base, data in self.logs[key]:
                    h = record_batch.parse_header(data)
                    if base + h.last_offset_delta < p.fetch_offset:
                        continue
                    if base + h.last_offset_delta >= lso:
                        break
                    out += data
                aborted = [{"producer_id": pid, "first_offset": first}
                           for pid, first, last in self.aborted.get(key, [])
                           if last >= p.fetch_offset and first < lso]
                total += len(out)
                parts.append({"partition": p.partition, "error_code": 0, "high_watermark": leo,
                              "last_stable_offset": lso, "log_start_offset": 0,
                              "aborted_transactions": aborted or None, "record_set": bytes(out)})
            responses.append({"topic": t.topic, "partition_responses": parts})
        return total, responses

    def _h_ListOffsets(self, req, version):
        body = super()._h_ListOffsets(req, version)
        if getattr(req, "isolation_level", 0) == 1:
            with self.lock:
                for t in body["topics"]:
                    for p in t["partitions"]:
                        key = (t["name"], p["partition_index"])
                        if p.get("error_code") == 0 and p["offset"] > 0 and key in self.open_txn:
                            lso = min(self.open_txn[key].values(), default=p["offset"])
                            p["offset"] = p["old_style_offsets"][0] = min(p["offset"], lso)
        return body

    # -- helpers for tests ---------------------------------------------------------------------------

    def kinds(self) -> list[str]:
        return [entry[0] for entry in self.txn_log]
