"""TxnMarkerChannel: sends WriteTxnMarkers (key 27) for the transaction coordinator to the
leader of every partition in a transaction (this broker included), over the network.

Invariant: every (job, partition) is in exactly one place until it is settled: waiting
for a leader, queued for a broker, or in the one in-flight request to that broker.
Leaders come from the MetadataCache only; a partition whose topic is gone from it is
dropped from the transaction (``marker_partition_dropped``). NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
KAFKA_STORAGE_ERROR and network failures are retried after ``retry_backoff_ms`` with a
fresh leader lookup. Markers follow leadership: a leader that refuses connections fails
its request at once (never queued inside the client until the request timeout), and a
request in flight to a broker the metadata cache no longer lists is failed and re-routed
when the cache changes; INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED abandon the
job (a newer coordinator or producer took over). A job the coordinator no longer wants
(``is_job_live`` False) is silently dropped. Reactor thread only.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

from twisted.internet import defer

from odradek.broker.network.broker_client import BrokerClient, BrokerClientError
from odradek.protocol.apis import write_txn_markers as API
from odradek.protocol.errors import ErrorCode

from . import MarkerJob, TopicPartition

log = logging.getLogger(__name__)

E = ErrorCode
RETRIABLE = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                       E.COORDINATOR_LOAD_IN_PROGRESS})
ABANDON = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
NOT_SUPPORTED = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
Item = tuple[MarkerJob, TopicPartition]


class TxnMarkerChannel:
    """One BrokerClient and one queue per destination broker; at most one request in flight each."""

    def __init__(self, reactor: Any, broker_id: int, metadata_cache: Any, listener: str,
                 coordinator: Any = None, client_factory: Callable[..., Any] = BrokerClient,
                 retry_backoff_ms: int = 100, request_timeout_ms: int = 30000,
                 version: int = API.MAX_VERSION):
        self.reactor = reactor
        self.broker_id = broker_id
        self.cache = metadata_cache
        self.listener = listener
        self.coordinator = coordinator
        self.client_factory = client_factory
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self.version = version
        self._unassigned: list[Item] = []                 # waiting for a leader
        self._queues: dict[int, deque[Item]] = {}
        self._inflight: set[int] = set()
        self._clients: dict[int, tuple[tuple[str, int], Any]] = {}
        self._closed = False
        self._retry_call: Any = None
        metadata_cache.add_listener(self._on_metadata)

    # ------------------------------------------------------------ public
    def send(self, job: MarkerJob) -> None:
        """Queue the markers of ``job`` (the coordinator's ``send_markers``)."""
        if self._closed:
            return
        self._unassigned.extend((job, tp) for tp in sorted(job.pending))
        self._drain()

    def pending_count(self) -> int:
        return (len(self._unassigned) + sum(len(q) for q in self._queues.values())
                + len(self._inflight))

    def shutdown(self) -> None:
        self._closed = True
        self.cache.remove_listener(self._on_metadata)
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        self._unassigned.clear()
        self._queues.clear()
        for _, client in self._clients.values():
            client.close()
        self._clients.clear()

    # ------------------------------------------------------------ internals
    def _live(self, job: MarkerJob) -> bool:
        if job.cancelled:
            return False
        coord = self.coordinator
        return coord is None or coord.is_job_live(job)

    def _on_metadata(self) -> None:
        if self._closed:
            return
        for broker in [b for b in self._clients if self.cache.endpoint(b, self.listener) is None]:
            _, client = self._clients.pop(broker)
            client.close()   # fails its in-flight request: _on_failure re-routes the markers
        if self._unassigned:
            self._drain()

    def _drain(self) -> None:
        items, self._unassigned = self._unassigned, []   # callbacks below may queue more
        waiting: list[Item] = []
        for job, tp in items:
            if not self._live(job) or tp not in job.pending:
                continue
            if not self.cache.contains_topic(tp[0]):
                log.info("topic %s of %s's transaction is gone: dropping it", tp[0], job.transactional_id)
                self.coordinator.marker_partition_dropped(job, tp)
                continue
            state = self.cache.partition_state(*tp)
            leader = -1 if state is None else state.leader
            if leader < 0 or self.cache.endpoint(leader, self.listener) is None:
                waiting.append((job, tp))
                continue
            self._queues.setdefault(leader, deque()).append((job, tp))
        self._unassigned.extend(waiting)
        for broker in list(self._queues):
            self._pump(broker)

    def _client(self, broker: int) -> Any:
        endpoint = self.cache.endpoint(broker, self.listener)
        current = self._clients.get(broker)
        if current is not None and current[0] == endpoint:
            return current[1]
        if current is not None:
            current[1].close()
        client = self.client_factory(self.reactor, endpoint[0], endpoint[1],
                                     f"broker-{self.broker_id}-txn-marker-sender",
                                     request_timeout_ms=self.request_timeout_ms, fail_when_unreachable=True)
        self._clients[broker] = (endpoint, client)
        return client

    def _pump(self, broker: int) -> None:
        queue = self._queues.get(broker)
        if broker in self._inflight or not queue or self._closed:
            return
        items = [it for it in queue if self._live(it[0]) and it[1] in it[0].pending]
        queue.clear()
        if not items:
            return
        if self.cache.endpoint(broker, self.listener) is None:   # the broker went away
            self._retry(items)
            return
        by_job: dict[int, tuple[MarkerJob, dict[str, list[int]]]] = {}
        for job, (topic, p) in items:
            by_job.setdefault(id(job), (job, {}))[1].setdefault(topic, []).append(p)
        body = {"markers": [{
            "producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
            "transaction_result": job.commit, "coordinator_epoch": job.coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        } for job, topics in by_job.values()]}
        self._inflight.add(broker)
        d = defer.maybeDeferred(self._client(broker).send, API, self.version, body)
        d.addCallbacks(lambda resp: self._on_response(broker, items, resp),
                       lambda f: self._on_failure(broker, items, f))
        d.addErrback(lambda f: log.error("txn marker response handling failed: %s", f.getTraceback()))

    def _on_failure(self, broker: int, items: list[Item], failure: Any) -> None:
        self._inflight.discard(broker)
        if self._closed:
            return
        if not failure.check(BrokerClientError):
            log.error("sending txn markers to broker %d failed: %s", broker, failure.getTraceback())
        else:
            log.info("sending txn markers to broker %d failed (%s); retrying", broker,
                     failure.getErrorMessage())
        self._retry(items)
        self._pump(broker)

    def _on_response(self, broker: int, items: list[Item], resp: Any) -> None:
        self._inflight.discard(broker)
        if self._closed:
            return
        errors: dict[tuple[int, str, int], int] = {}
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    errors[(marker.producer_id, t.name, p.partition_index)] = p.error_code
        retry: list[Item] = []
        for job, tp in items:
            if not self._live(job) or tp not in job.pending:
                continue
            code = ErrorCode(errors.get((job.producer_id, tp[0], tp[1]), E.UNKNOWN_SERVER_ERROR))
            if code == E.NONE or code in NOT_SUPPORTED:
                self.coordinator.marker_written(job, tp)
            elif code in ABANDON:
                log.info("txn marker of %s for %s-%d failed permanently (%s): giving the transaction up",
                         job.transactional_id, tp[0], tp[1], code.name)
                self.coordinator.abandon_markers(job)
            else:
                if code not in RETRIABLE:
                    log.error("unexpected error %s writing the txn marker of %s for %s-%d; retrying",
                              code.name, job.transactional_id, tp[0], tp[1])
                retry.append((job, tp))
        if retry:
            self._retry(retry)
        self._pump(broker)

    def _retry(self, items: list[Item]) -> None:
        self._unassigned.extend(items)
        if self._retry_call is None or not self._retry_call.active():
            self._retry_call = self.reactor.callLater(self.retry_backoff_s, self._drain)
