"""Prometheus metrics of a real 2-broker cluster, scraped over HTTP and parsed by prometheus_client.

What an operator checks on a dashboard: counters move with a produced and consumed load
(MessagesIn by the exact count, BytesIn/BytesOut, requests by API), one active controller,
log sizes and offsets per partition as ListOffsets tells them, group lag as produced minus
committed (also for a partition the coordinator does not lead) naming the member that holds
each partition, and under-replicated
partitions while a broker is down, cleared once it is back (that test runs last: it moves
leaderships). One module-scoped cluster; every wait is on a scraped condition.
"""
from __future__ import annotations

import json
import signal

import pytest

from odradek.client import AdminClient, Consumer, Producer, TopicPartition
from odradek.testing import create_topic, scrape, scrape_all, wait_until

TOPIC = "metrics-load"
LAG_TOPIC = "metrics-lag"
LOG_TOPIC = "metrics-logs"
URP_TOPIC = "metrics-urp"
GROUP = "metrics-group"
RECORDS = 50
BTM = "kafka_server_brokertopicmetrics_"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    c = LocalCluster(tmp_path_factory.mktemp("metrics"), zookeepers=1, brokers=2, metrics=True, overrides={
        "replica.lag.time.max.ms": 3000, "zookeeper.session.timeout.ms": 10000})
    c.start()
    try:
        yield c
    finally:
        c.stop()


def totals(cluster, name: str, **labels: str) -> float:
    return sum(s.total(name, **labels) for s in scrape_all(cluster.metrics_urls).values())


def produce(cluster, topic: str, n: int, partition: int | None = None, acks: int | str = "all") -> None:
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, acks=acks)
    try:
        for i in range(n):
            producer.send(topic, value=b"v%05d" % i, partition=partition if partition is not None else i % 2)
        producer.flush(30)
    finally:
        producer.close()


def test_endpoint_serves_prometheus_text_on_every_broker(cluster):
    for broker_id, url in cluster.metrics_urls.items():
        s = scrape(url)
        assert s.value("kafka_server_replicamanager_partitioncount") is not None, broker_id
        assert s.value(BTM + "messagesin_total") is not None
    # a tool finds each endpoint through DescribeConfigs (metrics.host / metrics.port), as the web view does
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        described = admin.describe_configs([("broker", str(b)) for b in cluster.brokers])
    for b, broker in cluster.brokers.items():
        configs = {c.name: c.value for c in described[("broker", str(b))]}
        assert f"http://{configs['metrics.host']}:{configs['metrics.port']}/metrics" == cluster.metrics_urls[b]


def test_counters_move_with_a_produced_and_consumed_load(cluster):
    create_topic(cluster.bootstrap_servers, TOPIC, partitions=2, replication_factor=2)
    before = {name: totals(cluster, name, topic=TOPIC) for name in
              (BTM + "messagesin_total", BTM + "bytesin_total", BTM + "bytesout_total",
               BTM + "totalproducerequests_total")}
    requests_before = totals(cluster, "kafka_network_requestmetrics_requests_total", request="Produce")
    produce(cluster, TOPIC, RECORDS)
    # leaders count what they appended: exactly the records produced, across the brokers
    wait_until(lambda: totals(cluster, BTM + "messagesin_total", topic=TOPIC) - before[BTM + "messagesin_total"]
               == RECORDS, 30, "MessagesIn to grow by the records produced")
    assert totals(cluster, BTM + "bytesin_total", topic=TOPIC) > before[BTM + "bytesin_total"] + RECORDS * 6
    assert totals(cluster, BTM + "totalproducerequests_total", topic=TOPIC) > before[BTM + "totalproducerequests_total"]
    assert totals(cluster, "kafka_network_requestmetrics_requests_total", request="Produce") > requests_before
    # the all-topics sample sums the topics
    for s in scrape_all(cluster.metrics_urls).values():
        per_topic = sum(v for labels, v in s.samples(BTM + "messagesin_total") if "topic" in labels)
        assert s.value(BTM + "messagesin_total") == per_topic

    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        got: list = []
        wait_until(lambda: got.extend(r for rs in consumer.poll(500).values() for r in rs) or len(got) >= RECORDS,
                   30, "the consumer to read every record")
    finally:
        consumer.close(autocommit=False)
    wait_until(lambda: totals(cluster, BTM + "bytesout_total", topic=TOPIC) > before[BTM + "bytesout_total"]
               + RECORDS * 6, 30, "BytesOut to grow by what the consumer read")
    assert totals(cluster, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") > 0
    assert totals(cluster, "kafka_network_requestmetrics_requests_total", request="FetchFollower") > 0
    assert totals(cluster, BTM + "replicationbytesout_total", topic=TOPIC) > 0
    # each broker leads one partition of the topic and follows the other's: each keeps its
    # follower's incremental fetch session (KIP-227), holding at least that partition
    fsc = "kafka_server_fetchsessioncache_"
    wait_until(lambda: all(x.value(fsc + "numincrementalfetchsessions") >= 1
                           and x.value(fsc + "numincrementalfetchpartitionscached") >= 1
                           for x in scrape_all(cluster.metrics_urls).values()), 30,
               "every broker to hold a follower's fetch session")
    assert totals(cluster, fsc + "incrementalfetchsessionevictions_total") == 0
    # request latency: a summary per API, with Kafka's percentiles, _count and _sum
    s = scrape_all(cluster.metrics_urls)
    assert sum(x.total("kafka_network_requestmetrics_totaltimems_count", request="Produce") for x in s.values()) > 0
    assert any(x.value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99") is not None
               for x in s.values())


def test_exactly_one_active_controller(cluster):
    scrapes = scrape_all(cluster.metrics_urls)
    assert sum(s.value("kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes.values()) == 1
    [active] = [s for s in scrapes.values() if s.value("kafka_controller_kafkacontroller_activecontrollercount")]
    assert active.value("kafka_controller_kafkacontroller_globaltopiccount") >= 1
    assert active.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert sum(s.value("kafka_server_replicamanager_leadercount") for s in scrapes.values()) \
        == active.value("kafka_controller_kafkacontroller_globalpartitioncount")


def test_log_gauges_match_list_offsets(cluster):
    create_topic(cluster.bootstrap_servers, LOG_TOPIC, partitions=2, replication_factor=2)
    produce(cluster, LOG_TOPIC, 20)
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tps = [TopicPartition(LOG_TOPIC, 0), TopicPartition(LOG_TOPIC, 1)]
        ends, starts = consumer.end_offsets(tps), consumer.beginning_offsets(tps)
    finally:
        consumer.close(autocommit=False)

    def every_replica_matches() -> bool:
        for s in scrape_all(cluster.metrics_urls).values():   # RF 2 on 2 brokers: both hold each log
            for tp in tps:
                labels = {"topic": LOG_TOPIC, "partition": str(tp.partition)}
                if (s.value("kafka_log_log_logendoffset", **labels) != ends[tp]
                        or s.value("kafka_log_log_logstartoffset", **labels) != starts[tp]
                        or s.value("kafka_log_log_numlogsegments", **labels) != 1
                        or not s.value("kafka_log_log_size", **labels)):
                    return False
        return True
    wait_until(every_replica_matches, 30, "each replica's log gauges to match ListOffsets")
    assert sum(ends.values()) == 20


def test_group_lag_is_produced_minus_committed(cluster):
    create_topic(cluster.bootstrap_servers, LAG_TOPIC, partitions=2, replication_factor=1)
    produce(cluster, LAG_TOPIC, 30)          # 15 per partition
    committed = {0: 4, 1: 11}
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id=GROUP, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(LAG_TOPIC, p): off for p, off in committed.items()})
    finally:
        consumer.close(autocommit=False)
    expected = {str(p): 15 - off for p, off in committed.items()}

    def lags() -> dict[str, float]:
        out: dict[str, float] = {}
        for s in scrape_all(cluster.metrics_urls).values():
            for labels, v in s.samples("kafka_consumergroup_group_lag"):
                if labels["group"] == GROUP and labels["topic"] == LAG_TOPIC:
                    out[labels["partition"]] = v
        return out
    # one partition of RF 1 on each broker: the coordinator reads the other one's high watermark remotely
    wait_until(lambda: lags() == expected, 30, f"the lag of {GROUP} to be {expected}")
    [coordinator] = [s for s in scrape_all(cluster.metrics_urls).values()
                     if s.value("kafka_consumergroup_group_sum_lag", group=GROUP) is not None]
    assert coordinator.value("kafka_consumergroup_group_sum_lag", group=GROUP) == sum(expected.values())
    assert coordinator.value("kafka_consumergroup_group_max_lag", group=GROUP) == max(expected.values())
    assert coordinator.value("kafka_consumergroup_group_offset", group=GROUP, topic=LAG_TOPIC, partition="1",
                             member_host="", consumer_id="", client_id="") == 11   # nobody holds it now
    assert coordinator.value("kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1


def test_lag_names_the_member_holding_the_partition(cluster):
    create_topic(cluster.bootstrap_servers, LAG_TOPIC + "-live", partitions=2, replication_factor=1)
    produce(cluster, LAG_TOPIC + "-live", 10)
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="metrics-live",
                        client_id="metrics-live-client", enable_auto_commit=False)
    try:
        consumer.subscribe([LAG_TOPIC + "-live"])
        wait_until(lambda: consumer.poll(200) is not None and len(consumer.assignment()) == 2, 60,
                   "the consumer to be assigned both partitions")
        consumer.commit({tp: 2 for tp in consumer.assignment()})

        def members() -> set[tuple[str, str]]:
            return {(labels["client_id"], labels["partition"]) for s in scrape_all(cluster.metrics_urls).values()
                    for labels, v in s.samples("kafka_consumergroup_group_lag")
                    if labels["group"] == "metrics-live" and v == 3 and labels["consumer_id"]}
        wait_until(lambda: members() == {("metrics-live-client", "0"), ("metrics-live-client", "1")}, 30,
                   "the lag samples to name the member holding each partition")
        counts = [s.value("kafka_consumergroup_members", consumergroup="metrics-live")
                  for s in scrape_all(cluster.metrics_urls).values()]
        assert [n for n in counts if n is not None] == [1]    # one member, on its coordinator only
    finally:
        consumer.close(autocommit=False)


def test_under_replicated_partitions_while_a_broker_is_down(cluster):
    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    create_topic(cluster.bootstrap_servers, URP_TOPIC, partitions=2, replication_factor=2)
    wait_until(lambda: totals(cluster, urp) == 0, 30, "every partition fully replicated")
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        [described] = admin.describe_topics([URP_TOPIC])
    # the survivor is the controller, so its ISR shrink (an AlterIsr) is written at once; with the
    # controller down it would wait for the new one, which removes the dead broker itself
    stayer = json.loads(cluster.zk.get("/controller")[0])["brokerid"]
    victim = next(b for b in cluster.brokers if b != stayer)
    [led_by_stayer] = [p["partition"] for p in described["partitions"] if p["leader"] == stayer]
    cluster.kill_broker(victim, signal.SIGKILL)
    # a record the follower will never fetch: the survivor drops it from the ISR after
    # replica.lag.time.max.ms (3 s), well before ZooKeeper expires its session (10 s)
    produce(cluster, URP_TOPIC, 1, partition=led_by_stayer, acks=1)
    survivor = cluster.metrics_urls[stayer]
    wait_until(lambda: scrape(survivor).value("kafka_server_replicamanager_isrshrinks_total") > 0, 30,
               f"broker {stayer} to count an ISR shrink")
    wait_until(lambda: scrape(survivor).value(urp) > 0, 60, f"broker {stayer} to report under-replicated partitions")
    cluster.start_broker(victim)
    wait_until(lambda: totals(cluster, urp) == 0, 90, "no under-replicated partition once broker 2 is back",
               retry_on=(OSError,))
    assert totals(cluster, "kafka_server_replicamanager_isrexpands_total") > 0
