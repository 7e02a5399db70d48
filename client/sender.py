"""The producer's background sender thread: drain ready batches, send ProduceRequests, complete futures.

Invariant: the sender thread is the only user of the producer's data
connections (``NodePool``); every drained batch ends in exactly one of
``accumulator.complete`` (acknowledged, or failed for good) or
``accumulator.reenqueue`` (retriable error, within retries and
delivery.timeout.ms). Responses are handled on this thread, in request order
per connection; user callbacks therefore run here too. A transactional
producer's coordinator requests (``TransactionManager``) go out from here too,
at most one at a time, and a partition's batches wait until the transaction
has added it.
"""
from __future__ import annotations

import logging
import random
import select
import socket
import threading
import time
from typing import Any

from odradek.protocol.apis import find_coordinator as _find_coordinator
from odradek.protocol.apis import init_producer_id as _init_pid
from odradek.protocol.apis import produce as _produce
from odradek.protocol.errors import ErrorCode, KafkaError

from .accumulator import ProducerBatch, RecordAccumulator
from .cluster import ClusterMetadata, NodePool
from .config import ClientConfig
from .connection import ConnectionLost
from .structs import KafkaTimeoutError
from .transaction_manager import TransactionManager, TxnRequest, TxnState

log = logging.getLogger(__name__)

# errors after which the partition's leader may have moved
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
})


class Sender(threading.Thread):
    """Runs until ``initiate_close``; then sends what is queued (or aborts on ``force_close``)."""

    def __init__(self, config: ClientConfig, cluster: ClusterMetadata, accumulator: RecordAccumulator,
                 txn: TransactionManager | None = None) -> None:
        super().__init__(name=f"odradek-producer-sender-{config['client.id']}", daemon=True)
        self.config = config
        self.cluster = cluster
        self.acc = accumulator
        self.pool = NodePool(cluster)
        self.acks = config["acks"]
        self.max_in_flight = config["max.in.flight.requests.per.connection"]
        self.max_request_size = config["max.request.size"]
        self.request_timeout_ms = config["request.timeout.ms"]
        self.retries = config["retries"]
        self.delivery_timeout = config["delivery.timeout.ms"] / 1000.0
        self.idempotent = config["enable.idempotence"]
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[Any, int] = {}
        # idempotent: per partition, the batches holding a sequence and not completed, in sequence order
        self._unresolved: dict[Any, list[ProducerBatch]] = {}
        # idempotent: per partition, the highest sequence the broker acknowledged
        self._acked_sequence: dict[Any, int] = {}
        self._running = True
        self._forced = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.sleeping = False
        self._woken = False
        self._last_expiry_check = 0.0
        self.fatal_error: KafkaError | None = None
        self.txn = txn
        self.transactional_id = txn.transactional_id if txn is not None else None
        self._txn_generation = 0  # the TransactionManager's epoch_generation our sequences belong to
        self._txn_in_flight: TxnRequest | None = None

    # -- control from other threads ---------------------------------------------

    def wakeup(self) -> None:
        if not self._woken:
            self._woken = True
            try:
                self._wake_w.send(b"\0")
            except OSError:
                pass

    def initiate_close(self) -> None:
        self.acc.closing = True  # everything queued is sendable now
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        self._forced = True
        self._running = False
        self.wakeup()

    # -- main loop -----------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._running:
                self.run_once()
            # graceful: finish what is queued and in flight (closing mid-transaction aborts it)
            if self.txn is not None and not self._forced:
                self.txn.abort_on_close()
            while not self._forced and (self.acc.has_queued() or self._in_flight() or self._txn_busy()):
                self.run_once()
        except Exception:  # pragma: no cover - a bug; fail everything rather than hang
            log.exception("producer sender thread crashed")
            self._forced = True
        finally:
            err = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer closed before the record was sent")
            self.acc.abort_all(err)
            for node_id in list(self.pool.conns):
                self.pool.drop(node_id, ConnectionLost("producer closed"))
            self._wake_r.close()
            self._wake_w.close()

    def _in_flight(self) -> bool:
        return any(c.in_flight for c in self.pool.conns.values())

    def _txn_busy(self) -> bool:
        txn = self.txn
        return txn is not None and txn.has_pending_requests()

    def run_once(self) -> None:
        now = time.monotonic()
        cluster = self.cluster
        if cluster.needs_refresh():
            cluster.maybe_refresh()
        txn = self.txn
        blocked = None
        txn_delay = 1.0
        if txn is not None:
            txn_delay = self._run_transactional(now)
            blocked = txn.send_blocked
        elif self.idempotent and self.producer_id < 0 and not self._init_producer_id():
            self._poll(self.config["retry.backoff.ms"] / 1000.0)
            return
        seen = self.acc.appends
        nodes, delay, unknown = self.acc.ready(now, cluster.leader_for, blocked)
        delay = min(delay, txn_delay)
        if unknown:
            for topic in unknown:
                cluster.add_topic(topic)
            cluster.request_update()
            delay = min(delay, self.config["retry.backoff.ms"] / 1000.0)
        sendable = []
        for node in nodes:
            try:
                conn = self.pool.get(node)
            except KafkaError:
                delay = min(delay, self.config["reconnect.backoff.ms"] / 1000.0)
                continue
            if len(conn.in_flight) < self.max_in_flight:
                sendable.append(node)
        if sendable:
            hold = self._hold if self.idempotent else None
            for node, batches in self.acc.drain(sendable, cluster.leader_for, self.max_request_size, now,
                                                hold, blocked).items():
                self._send_produce(node, batches)
        if now - self._last_expiry_check > 0.1:
            self._last_expiry_check = now
            self._expire(now)
        if self.acc.appends != seen:
            delay = 0.0
        self._poll(min(delay, 0.2))

    def _poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` for responses or a wakeup; handle what arrived."""
        poller = select.poll()  # rebuilt each time: cheap, and immune to reused fd numbers
        wake_fd = self._wake_r.fileno()
        poller.register(wake_fd, select.POLLIN)
        by_fd = {}
        for conn in self.pool.conns.values():
            fd = conn.fileno()
            if conn.in_flight and fd >= 0:
                by_fd[fd] = conn
                poller.register(fd, select.POLLIN)
        self.sleeping = True
        try:
            events = poller.poll(max(timeout, 0.0) * 1000.0)
        finally:
            self.sleeping = False
        for fd, _mask in events:
            if fd == wake_fd:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                self._woken = False
            elif fd in by_fd:
                by_fd[fd].read_responses()
        # request timeouts
        now = time.monotonic()
        for node_id, conn in list(self.pool.conns.items()):
            if conn.expired(now):
                self.pool.drop(node_id, KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                                   f"no response from node {node_id} within request.timeout.ms"))
                self.cluster.request_update()
            elif not conn.connected:
                self.pool.conns.pop(node_id, None)
                self.cluster.request_update()

    # -- produce requests -----------------------------------------------------------

    def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        topic_data: dict[str, list[dict]] = {}
        by_tp: dict[tuple[str, int], ProducerBatch] = {}
        for batch in batches:
            if self.idempotent and batch.built is None:
                b = batch.builder
                b.producer_id, b.producer_epoch = self.producer_id, self.producer_epoch
                b.is_transactional = self.txn is not None
                seq = self._sequences.get(batch.tp, 0)
                b.base_sequence = seq
                self._sequences[batch.tp] = (seq + b.record_count) & 0x7FFFFFFF
                self._unresolved.setdefault(batch.tp, []).append(batch)
            try:
                data = batch.build()
            except Exception as exc:  # e.g. a compression codec failure
                self._complete(batch, -1, -1, KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)))
                continue
            topic_data.setdefault(batch.tp.topic, []).append({"index": batch.tp.partition, "records": data})
            by_tp[(batch.tp.topic, batch.tp.partition)] = batch
        if not by_tp:
            return
        body = {"transactional_id": self.transactional_id, "acks": self.acks, "timeout_ms": self.request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": parts} for t, parts in topic_data.items()]}
        expect = self.acks != 0
        try:
            conn = self.pool.get(node)
            conn.send(_produce, body, expect_response=expect,
                      callback=lambda resp, err: self._handle_response(node, by_tp, resp, err))
        except KafkaError as exc:
            self._handle_response(node, by_tp, None, exc if isinstance(exc, KafkaError) else None)

    def _handle_response(self, node: int, by_tp: dict, resp: Any, error: KafkaError | None) -> None:
        now = time.monotonic()
        if error is not None:
            self.cluster.request_update()
            for batch in by_tp.values():
                self._fail_or_retry(batch, error, now)
            return
        if resp is None:  # acks=0
            for batch in by_tp.values():
                self._complete(batch, -1, -1, None)
            return
        for topic_resp in resp.responses:
            for p in topic_resp.partition_responses:
                batch = by_tp.pop((topic_resp.name, p.index), None)
                if batch is None:
                    continue
                code = p.error_code
                if code == ErrorCode.NONE or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    self._note_acked(batch)
                    self._complete(batch, p.base_offset, p.log_append_time_ms, None)
                elif code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._written_before(batch):
                    # Sequences are contiguous: the broker acknowledged a later one on this
                    # partition, so it holds this batch (its response was lost, e.g. with a dead
                    # leader, and the retry fell out of the broker's 5-batch window). Committed,
                    # offset unknown: -1, as Kafka answers for a duplicate sequence.
                    log.info("%s: batch at sequence %d was already written (a later sequence was "
                             "acknowledged); completing it with offset -1", batch.tp, batch.builder.base_sequence)
                    self._complete(batch, -1, p.log_append_time_ms, None)
                elif code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._earlier_unresolved(batch) \
                        and now - batch.created < self.delivery_timeout and not self._forced:
                    # an earlier sequence failed (e.g. its leader died) and will be resent first
                    self.acc.reenqueue(batch, now)
                    self.acc.unmute(batch.tp)
                else:
                    msg = getattr(p, "error_message", None)
                    self._fail_or_retry(batch, KafkaError(code, msg), now)
        for batch in by_tp.values():  # partitions the broker did not answer for
            self._fail_or_retry(batch, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no partition response"), now)

    def _fail_or_retry(self, batch: ProducerBatch, error: KafkaError, now: float) -> None:
        if error.code in _METADATA_ERRORS:
            self.cluster.request_update()
        retriable = error.retriable and not self._forced
        if retriable and batch.attempts < self.retries and now - batch.created < self.delivery_timeout:
            log.debug("retrying %s after %s (attempt %d)", batch.tp, error, batch.attempts + 1)
            self.acc.reenqueue(batch, now)
            self.acc.unmute(batch.tp)
            return
        if retriable and now - batch.created >= self.delivery_timeout:
            error = KafkaTimeoutError(f"expiring {batch.record_count} record(s) for {batch.tp.topic}-"
                                      f"{batch.tp.partition}: delivery.timeout.ms elapsed ({error})")
        self._complete(batch, -1, -1, error)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int,
                  error: BaseException | None) -> None:
        pending = self._unresolved.get(batch.tp)
        if pending is not None and batch in pending:
            pending.remove(batch)
        if error is not None and self.txn is not None:
            error = self.txn.handle_failed_batch(batch.tp, error, sent=batch.built is not None)
        self.acc.complete(batch, base_offset, log_append_time, error)

    def _note_acked(self, batch: ProducerBatch) -> None:
        seq = batch.builder.base_sequence
        if self.idempotent and seq >= 0:
            last = seq + batch.record_count - 1
            if last > self._acked_sequence.get(batch.tp, -1):
                self._acked_sequence[batch.tp] = last

    def _written_before(self, batch: ProducerBatch) -> bool:
        """True if the broker acknowledged a sequence beyond this whole batch on its partition."""
        seq = batch.builder.base_sequence
        return (self.idempotent and seq >= 0
                and self._acked_sequence.get(batch.tp, -1) >= seq + batch.record_count - 1)

    def _earlier_unresolved(self, batch: ProducerBatch) -> bool:
        """True if a batch with a lower sequence on the same partition is not resolved yet."""
        pending = self._unresolved.get(batch.tp)
        return pending is not None and len(pending) > 0 and pending[0] is not batch

    def _hold(self, batch: ProducerBatch) -> bool:
        """Idempotence: a retried batch goes out only as the lowest unresolved sequence."""
        return batch.built is not None and self._earlier_unresolved(batch)

    def _expire(self, now: float) -> None:
        for batch in self.acc.expired(now, self.delivery_timeout):
            self._complete(batch, -1, -1, KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
                f"{(now - batch.created) * 1000:.0f} ms has passed since batch creation"))

    def _init_producer_id(self) -> bool:
        """InitProducerId (idempotent producer, no transactional id) on any broker."""
        brokers = list(self.cluster.brokers)
        if not brokers:
            self.cluster.request_update()
            return False
        for node in brokers:
            try:
                conn = self.pool.get(node)
                resp = conn.request(_init_pid, {"transactional_id": None, "transaction_timeout_ms": 2147483647,
                                                "producer_id": -1, "producer_epoch": -1})
            except KafkaError as exc:
                if not exc.retriable:
                    self.fatal_error = exc
                    self.acc.abort_all(exc)
                continue
            if resp.error_code != ErrorCode.NONE:
                if not ErrorCode(resp.error_code).retriable:
                    self.fatal_error = KafkaError(resp.error_code, "InitProducerId failed")
                    self.acc.abort_all(self.fatal_error)
                continue
            self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
            return True
        return False

    # -- transactions ----------------------------------------------------------------

    def _run_transactional(self, now: float) -> float:
        """Fail batches of an aborted/failed transaction, send the next coordinator request;
        returns how long the transaction manager can wait (seconds)."""
        txn = self.txn
        assert txn is not None
        if txn.epoch_generation != self._txn_generation:
            # a new producer id/epoch: sequences start again at 0 (no batch is incomplete now)
            self._txn_generation = txn.epoch_generation
            self.producer_id, self.producer_epoch = txn.producer_id, txn.producer_epoch
            self._sequences.clear()
            self._unresolved.clear()
            self._acked_sequence.clear()
        error = txn.undrained_error()
        if error is not None and self.acc.has_queued():
            if txn.state is TxnState.FATAL_ERROR:
                self.acc.abort_all(error)
            else:
                self.acc.abort_undrained(error)
        if self._txn_in_flight is not None:
            return 1.0  # its response wakes the poll
        req = txn.next_request(now, self.acc.has_incomplete())
        if req is None:
            return txn.next_delay(now)
        node = txn.coordinator(req)
        if node is None:
            self._send_find_coordinator(req)
        else:
            self._send_txn_request(req, node)
        return 0.0 if self._txn_in_flight is None else 1.0

    def _send_find_coordinator(self, req: TxnRequest) -> None:
        txn = self.txn
        assert txn is not None
        brokers = sorted(self.cluster.brokers)
        if not brokers:
            self.cluster.request_update()
            txn.on_network_error(req, ConnectionLost("no broker known yet"))
            return
        connected = [n for n in brokers if n in self.pool.conns and self.pool.conns[n].connected]
        node = random.choice(connected or brokers)
        try:
            conn = self.pool.get(node)
            version = conn.version_for(_find_coordinator, _find_coordinator.MAX_VERSION)
            if version < 1 and req.coordinator_type != 0:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "the broker cannot find transaction coordinators")
            body = {"key": req.coordinator_key, "key_type": req.coordinator_type}
            conn.send(_find_coordinator, body, version=version,
                      callback=lambda resp, err: self._on_find_coordinator(req, node, resp, err))
        except KafkaError as exc:
            self.cluster.request_update()
            txn.on_network_error(req, exc)
            return
        self._txn_in_flight = req

    def _on_find_coordinator(self, req: TxnRequest, node: int, resp: Any, err: KafkaError | None) -> None:
        self._txn_in_flight = None
        txn = self.txn
        assert txn is not None
        if err is not None:  # the connection failed (the poll loop forgets it)
            self.cluster.request_update()
            txn.on_network_error(req, err)
        else:
            if resp.error_code == ErrorCode.NONE and resp.node_id not in self.cluster.brokers:
                self.cluster.request_update()  # a broker we have not seen yet
            txn.on_find_coordinator(req, resp)

    def _send_txn_request(self, req: TxnRequest, node: int) -> None:
        txn = self.txn
        assert txn is not None
        try:
            conn = self.pool.get(node)
            api, body, version = txn.build(req, conn.version_for)
            conn.send(api, body, version=version,
                      callback=lambda resp, err: self._on_txn_response(req, node, resp, err))
        except KafkaError as exc:
            if exc.retriable:
                self.cluster.request_update()
            txn.on_network_error(req, exc)
            return
        self._txn_in_flight = req

    def _on_txn_response(self, req: TxnRequest, node: int, resp: Any, err: KafkaError | None) -> None:
        self._txn_in_flight = None
        txn = self.txn
        assert txn is not None
        if err is not None:
            txn.on_network_error(req, err)
        else:
            txn.on_response(req, resp)
