"""Idempotent producer state survives a kill -9 of the broker: it is rebuilt from the log on
recovery, so a batch resent after the restart is answered with its original offset and not
appended again. Real ZooKeeper and a real broker process, raw protocol requests."""
from __future__ import annotations

import signal
import time

import pytest

from odradek.protocol.apis import init_producer_id
from odradek.protocol.records import BatchBuilder, iter_records

from test_broker_e2e import RawClient, create_topic, fetch_all, leader_ready, produce_one, wait_brokers, wait_until

pytestmark = pytest.mark.integration

TOPIC = "idempotent-restart"


def idempotent_batch(pid: int, epoch: int, seq: int, n: int) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    now = int(time.time() * 1000)
    for i in range(seq, seq + n):
        b.append(now, b"k%d" % i, b"idem-%d" % i)
    return b.build()


def plain_batch(n: int) -> bytes:
    b = BatchBuilder()
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(now, b"p%d" % i, b"plain-%d" % i)
    return b.build()


def served(c: RawClient):
    r = fetch_all(c, TOPIC)
    return r if r.error_code == 0 else None


def test_resent_batch_after_kill_9_gets_its_original_offset(cluster_factory):
    cluster = cluster_factory(brokers=1)
    address = cluster.broker_address(1)
    wait_brokers(address, 1)
    c = RawClient(address)
    assert create_topic(c, TOPIC).error_code == 0
    leader_ready(c, TOPIC)
    init = c.request(init_producer_id, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert init.error_code == 0 and init.producer_id >= 0
    pid, epoch = init.producer_id, init.producer_epoch

    first = idempotent_batch(pid, epoch, 0, 3)
    second = idempotent_batch(pid, epoch, 3, 3)
    assert produce_one(c, TOPIC, plain_batch(2)).base_offset == 0
    r1, r2 = produce_one(c, TOPIC, first), produce_one(c, TOPIC, second)
    assert (r1.error_code, r1.base_offset, r2.error_code, r2.base_offset) == (0, 2, 0, 5)
    c.close()

    cluster.kill_broker(1, signal.SIGKILL)
    cluster.start_broker(1)
    c = RawClient(address)
    leader_ready(c, TOPIC)
    wait_until(lambda: served(c), what="the partition to be served again")

    # the producer retries both batches it never saw acknowledged (same id, epoch, sequences)
    again2 = produce_one(c, TOPIC, second)
    again1 = produce_one(c, TOPIC, first)
    assert (again2.error_code, again2.base_offset) == (0, 5)
    assert (again1.error_code, again1.base_offset) == (0, 2)
    nxt = produce_one(c, TOPIC, idempotent_batch(pid, epoch, 6, 1))
    assert (nxt.error_code, nxt.base_offset) == (0, 8)

    values = [r.value for r in iter_records(served(c).record_set)]
    assert values == ([b"plain-0", b"plain-1"] + [b"idem-%d" % i for i in range(7)])
    c.close()
