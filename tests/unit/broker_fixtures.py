"""Helpers for the broker's unit tests: a real LogManager in a tmp dir, an in-memory
MetadataCache, a ReplicaManager on a ``task.Clock``, and a ``call`` that runs one
API handler through the real codec (request encoded/decoded, response encoded/decoded).
"""
from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from twisted.internet import defer, task
from twisted.python.failure import Failure

from odradek.broker.apis.context import BrokerContext, RequestContext
from odradek.broker.apis.controller_common import ControllerView
from odradek.broker.completion import Completion
from odradek.broker.config.kafka_config import KafkaConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.metadata_cache import BrokerMetadata, MetadataCache, PartitionMetadata
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.protocol.header import decode_response, encode_response
from odradek.protocol.records import BatchBuilder


def make_config(tmp_path, broker_id: int = 1, **overrides: Any) -> KafkaConfig:
    props = {"broker.id": broker_id, "zookeeper.connect": "127.0.0.1:1",
             "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": str(tmp_path / f"logs-{broker_id}")}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return KafkaConfig(props)


def sync_thread(fn, *args, **kwargs) -> defer.Deferred:
    """run_in_thread stand-in: runs inline (tests have no blocking work)."""
    return defer.maybeDeferred(fn, *args, **kwargs)


class Broker:
    """A broker's sans-IO parts wired together for handler tests."""

    def __init__(self, tmp_path, broker_id: int = 1, **overrides: Any):
        self.clock = task.Clock()
        self.config = make_config(tmp_path, broker_id, **overrides)
        self.log_manager = LogManager(self.config.log_dirs, self.config, time.time)
        self.cache = MetadataCache(broker_id, "test-cluster-id-00000a")
        self.rm = ReplicaManager(broker_id, self.config, self.log_manager, self.cache, self.clock)
        self.rm.startup()
        self.ctx = BrokerContext(config=self.config, broker_id=broker_id, metadata_cache=self.cache,
                                 replica_manager=self.rm, log_manager=self.log_manager, scheduler=self.clock,
                                 run_in_thread=sync_thread)
        self.broker_id = broker_id
        # what ZooKeeper says: /controller, /controller_epoch (the broker epoch is ctx.broker_epoch)
        self.zk_controller, self.zk_controller_epoch = 1, 1
        self.ctx.controller_view = ControllerView(
            lambda: (self.zk_controller, self.zk_controller_epoch, self.ctx.broker_epoch))

    def close(self) -> None:
        self.rm.shutdown()
        self.log_manager.shutdown()

    def set_metadata(self, topics: dict[str, dict[int, tuple[int, list[int], list[int]]]],
                     brokers: tuple[int, ...] = (1,), controller_id: int = 1, epoch: int = 1,
                     leader_epoch: int = 0) -> None:
        """Fill the cache: topics -> {partition: (leader, replicas, isr)}."""
        states = [PartitionMetadata(t, p, epoch, leader, leader_epoch, isr, 0, replicas)
                  for t, parts in topics.items() for p, (leader, replicas, isr) in parts.items()]
        self.cache.update(controller_id, epoch, [BrokerMetadata(b, {"PLAINTEXT": ("127.0.0.1", 9090 + b)})
                                                 for b in brokers], states)

    def lead(self, topic: str, partitions: int = 1, replicas: list[int] | None = None,
             isr: list[int] | None = None, leader_epoch: int = 0, leader: int | None = None) -> None:
        """Make this broker the leader (metadata + LeaderAndIsr) of topic's partitions."""
        replicas = replicas or [self.broker_id]
        isr = isr or list(replicas)
        leader = self.broker_id if leader is None else leader
        self.set_metadata({topic: {p: (leader, replicas, isr) for p in range(partitions)}},
                          brokers=tuple(sorted(set(replicas) | {self.broker_id})), leader_epoch=leader_epoch)
        states = [PartitionMetadata(topic, p, 1, leader, leader_epoch, isr, 0, replicas) for p in range(partitions)]
        top, errors = self.rm.become_leader_or_follower(1, states)
        assert int(top) == 0 and all(int(c) == 0 for c in errors.values()), errors


def call(broker: Broker, handler: ModuleType, version: int, body: dict, listener: str = "PLAINTEXT",
         principal: str = "User:ANONYMOUS"):
    """Run ``handler`` on ``body`` through the codec; returns the decoded response (or None)."""
    api = handler.API
    req = api.Request.decode(api.Request.encode(body, version), version)
    rc = RequestContext(api.API_KEY, version, 7, "test", listener, "127.0.0.1:1", principal)
    result = handler.handle(broker.ctx, rc, req)
    if isinstance(result, (defer.Deferred, Completion)):
        box: list = []
        answered(result).addBoth(box.append)
        assert box, "handler did not complete (advance the clock?)"
        result = box[0]
        if hasattr(result, "raiseException"):
            result.raiseException()
    return decode(api, version, result)


def answered(result) -> defer.Deferred:
    """A handler's result as a Deferred: a Completion's value (a body, or the Failure standing in
    for one) fires it, as a coroutine handler's Deferred does."""
    if not isinstance(result, Completion):
        return result if isinstance(result, defer.Deferred) else defer.succeed(result)
    d: defer.Deferred = defer.Deferred()
    result.add_callback(lambda v: d.errback(v) if isinstance(v, Failure) else d.callback(v))
    return d


def call_deferred(broker: Broker, handler: ModuleType, version: int, body: dict) -> defer.Deferred:
    """Like ``call`` but returns the Deferred (for parked requests); fires the decoded response."""
    api = handler.API
    req = api.Request.decode(api.Request.encode(body, version), version)
    rc = RequestContext(api.API_KEY, version, 7, "test", "PLAINTEXT", "127.0.0.1:1")
    try:
        result = handler.handle(broker.ctx, rc, req)
    except Exception:
        return defer.fail()
    return answered(result).addCallback(lambda r: decode(api, version, r))


def decode(api: ModuleType, version: int, body: dict | None):
    if body is None:
        return None
    _, resp = decode_response(api, version, encode_response(api, version, 7, body))
    return resp


def batch(n: int = 3, value: bytes = b"v", producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, timestamp: int | None = None) -> bytes:
    b = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i in range(n):
        b.append(ts + i, b"k%d" % i, value + b"%d" % i)
    return b.build()


def produce_body(topic: str, records: bytes | None, partition: int = 0, acks: int = 1,
                 timeout_ms: int = 1000) -> dict:
    return {"acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def fetch_body(topic: str, offset: int = 0, partition: int = 0, max_wait_ms: int = 0, min_bytes: int = 1,
               max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, replica_id: int = -1,
               current_leader_epoch: int = -1) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}]}]}
