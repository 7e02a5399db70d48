"""The consumer application's tests, on a real 3-broker cluster from odradek's pytest plugin."""
from __future__ import annotations

import threading

import pytest

from consumer_app import rows, run
from odradek.testing import DeliveryLedger, assert_no_loss, wait_until


@pytest.fixture
def app(kafka_bootstrap, kafka_topic, tmp_path):
    """The application running in a thread against ``kafka_topic``; its sqlite file."""
    db, stop = tmp_path / "app.db", threading.Event()
    thread = threading.Thread(target=run, args=(kafka_bootstrap, kafka_topic, "app", db, stop), daemon=True)
    thread.start()
    yield db
    stop.set()
    thread.join(60)


def test_every_record_lands_in_the_database(app, kafka_producer, kafka_topic):
    for i in range(10):
        kafka_producer.send(kafka_topic, f"order-{i}".encode())
    kafka_producer.flush(30)
    wait_until(lambda: len(rows(app)) >= 10, 60, "10 rows")
    assert sorted(r[4] for r in rows(app)) == sorted(f"order-{i}".encode() for i in range(10))


@pytest.mark.kafka_topic(partitions=3)
def test_no_acknowledged_record_is_lost_when_a_broker_dies(app, kafka_cluster, kafka_producer, kafka_topic):
    ledger = DeliveryLedger()

    def produce(start, n):
        for i in range(start, start + n):
            ledger.track(kafka_producer.send(kafka_topic, f"order-{i}".encode()), value=f"order-{i}")
        kafka_producer.flush(120)

    produce(0, 200)
    kafka_cluster.kill(kafka_cluster.leader(kafka_topic, 0))    # mid-run: the app keeps consuming
    produce(200, 200)
    wait_until(lambda: len(rows(app)) >= len(ledger), 120, "every acknowledged record processed")
    assert not ledger.failed
    assert_no_loss(ledger, rows(app), allow_duplicates=True)   # at-least-once: duplicates allowed
