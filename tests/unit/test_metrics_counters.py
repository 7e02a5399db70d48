"""Broker metrics without a reactor or processes: names, request timing through the socket layer
(StringTransport, Clock), topic counters through the replica manager, the scrape's text."""
from __future__ import annotations

import struct

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.testing import StringTransport

from odradek.broker import apis
from odradek.broker.config.kafka_config import ConfigError, KafkaConfig
from odradek.broker.metrics import (BYTES_IN, BYTES_OUT, FAILED_PRODUCE, MESSAGES_IN, NAMES, QUANTILES,
                                    TOTAL_FETCH, TOTAL_PRODUCE, BrokerMetrics, Timer, count_failure)
from odradek.broker.metrics_collector import BrokerCollector
from odradek.broker.network.request_handler import RequestHandler
from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.protocol.apis import fetch, metadata, produce
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import encode_request

from broker_fixtures import Broker, batch, fetch_body, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.lead("t")
    b.metrics = BrokerMetrics({key: m.API.NAME for key, m in apis.HANDLERS.items()})
    b.rm.topic_stats = b.metrics.topic_stats
    yield b
    b.close()


def connect(broker):
    factory = KafkaServerFactory(RequestHandler(broker.ctx), "PLAINTEXT", 1 << 20)
    factory.request_stats = broker.metrics.request_stats
    conn = factory.buildProtocol(None)
    tr = StringTransport()
    conn.makeConnection(tr)
    return conn, tr


def frame(api, version, body, cid=1):
    data = encode_request(api, version, cid, "t", body)
    return struct.pack(">i", len(data)) + data


def registry_of(broker):
    """A registry over the broker's figures, as the metrics endpoint builds it."""
    from prometheus_client import CollectorRegistry

    class View:   # what the collector reads of a KafkaServer
        metrics, replica_manager, controller, group_service, ctx = broker.metrics, broker.rm, None, None, broker.ctx
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(View()))
    return registry


def scrape_text(broker) -> dict:
    """Render the collector as Prometheus text and parse it back, as Prometheus would."""
    from prometheus_client import generate_latest

    text = generate_latest(registry_of(broker)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_every_name_is_a_jmx_exporter_name():
    for name, meta in NAMES.items():
        assert name == name.lower() and not name.endswith("_total"), name
        assert meta.kind in ("counter", "gauge", "summary")
    assert "kafka_server_brokertopicmetrics_messagesin" in NAMES
    assert "kafka_network_requestmetrics_totaltimems" in NAMES


def test_metrics_port_config():
    base = {"zookeeper.connect": "z:2181"}
    assert KafkaConfig(base)["metrics.port"] is None
    assert KafkaConfig({**base, "metrics.port": "9404"})["metrics.port"] == 9404
    with pytest.raises(ConfigError, match="metrics.port"):
        KafkaConfig({**base, "metrics.port": "70000"})


def test_request_names_split_fetch_into_consumer_and_follower(broker):
    stats = broker.metrics.request_stats
    consumer = frame(fetch, 11, fetch_body("t"))[4:]
    follower = frame(fetch, 11, fetch_body("t", replica_id=2))[4:]
    def named(f):
        kind = stats.kind_of(f)
        return kind and (kind.name, kind.version)
    assert named(consumer) == ("FetchConsumer", 11)
    assert named(follower) == ("FetchFollower", 11)
    assert named(consumer) == ("FetchConsumer", 11)       # (the second time from the cache)
    assert named(frame(metadata, 9, {"topics": None})[4:]) == ("Metadata", 9)
    assert named(b"\x00") is None
    lent = memoryview(bytearray(frame(produce, 8, produce_body("t", batch(1)))[4:]))   # a lent Produce frame
    assert named(lent) == ("Produce", 8) and named(lent) == ("Produce", 8)


def test_produce_and_fetch_are_counted_and_timed(broker):
    conn, tr = connect(broker)
    conn.dataReceived(frame(produce, 8, produce_body("t", batch(3))))
    conn.dataReceived(frame(fetch, 11, fetch_body("t"), cid=2))
    c = broker.metrics.topic_stats.topics["t"]
    assert c[MESSAGES_IN] == 3 and c[BYTES_IN] == len(batch(3)) and c[TOTAL_PRODUCE] == 1
    assert c[TOTAL_FETCH] == 1 and c[BYTES_OUT] == len(batch(3))
    stats = broker.metrics.request_stats
    assert stats.counts == {("Produce", 8): 1, ("FetchConsumer", 11): 1}
    s = scrape_text(broker)
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),))] == 3
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 3
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "8")))] == 1
    assert s[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 1
    assert ("kafka_network_requestmetrics_localtimems", (("quantile", "0.99"), ("request", "FetchConsumer"))) in s
    assert s[("kafka_server_replicamanager_leadercount", ())] == 1
    assert s[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "t")))] == 3
    assert s[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0


def test_a_parked_fetch_is_remote_time(broker):
    conn, tr = connect(broker)
    conn.dataReceived(frame(fetch, 11, fetch_body("t", max_wait_ms=500, min_bytes=1)))
    assert tr.value() == b""                 # parked in the fetch purgatory
    broker.clock.advance(0.6)
    assert tr.value()
    timer = broker.metrics.request_stats.timers["FetchConsumer"]
    assert timer.count == 1
    remote, total = timer.phase(2), timer.phase(4)   # PHASES: remote time is the parked time
    assert remote.count == 1 and total.sum >= remote.sum > 0


def test_failures_count_as_kafka_counts_them():
    c = [0] * 8
    count_failure(c, FAILED_PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    count_failure(c, FAILED_PRODUCE, ErrorCode.CORRUPT_MESSAGE)
    assert c[FAILED_PRODUCE] == 0
    count_failure(c, FAILED_PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS)
    count_failure(None, FAILED_PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS)   # metrics off
    assert c[FAILED_PRODUCE] == 1


def test_timer_quantiles_over_the_reservoir():
    t = Timer()
    assert t.quantiles() == []
    for ms in range(1, 101):
        t.update(float(ms))
    q = dict(t.quantiles())
    assert set(q) == set(QUANTILES) and q[0.5] == 51.0 and q[0.99] == 100.0
    assert t.count == 100 and t.sum == 5050.0


def test_openmetrics_rendering_for_scrapers_that_ask_for_it(broker):
    """Prometheus asks for OpenMetrics first: the same registry renders in it too."""
    from prometheus_client.openmetrics.exposition import generate_latest
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om

    conn, tr = connect(broker)
    conn.dataReceived(frame(produce, 8, produce_body("t", batch(2))))
    families = {f.name: f for f in parse_om(generate_latest(registry_of(broker)).decode())}
    messages = families["kafka_server_brokertopicmetrics_messagesin"]
    assert {s.value for s in messages.samples if s.labels.get("topic") == "t"} == {2}


def test_zookeeper_session_events_are_kafkas_expires_and_disconnects():
    from kazoo.client import KazooState

    from odradek.broker.metrics import ZkStats
    z = ZkStats()
    for state in (KazooState.SUSPENDED, KazooState.CONNECTED, KazooState.SUSPENDED, KazooState.LOST,
                  KazooState.CONNECTED):
        z.on_state(state)
    assert (z.disconnects, z.expires) == (2, 1)
