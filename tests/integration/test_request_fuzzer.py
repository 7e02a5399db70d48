"""Mutated requests of every API the broker serves get a well-formed answer or a clean close.

Invariant: one 1-broker cluster (real ZooKeeper, real broker process) for the module; Hypothesis
draws a valid request (odradek's codec, several versions of every advertised API) and a
``random.Random`` that drives ``odradek.testing.request_fuzzer.mutate``; each mutant goes over a
real socket and must end as an answer that decodes with its correlation id, no answer where none
is owed, a close, or a legitimate wait — with no traceback in the broker's log. Afterwards the
broker process is alive, answers on a fresh connection, and odradek's Consumer reads the valid
records produced before and after the fuzzing, and its metrics endpoint (on) still parses. The bounded example count keeps this near a minute;
the long run is ``python -m odradek.testing.request_fuzzer`` (docs/testing.md).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from test_broker_e2e import wait_brokers

from odradek.testing import create_topic, scrape
from odradek.testing.request_fuzzer import Fuzzer, base_requests, mutate, produce_values, read_values

pytestmark = pytest.mark.integration

TOPIC = "fuzzed"
EXAMPLES = 20000
BEFORE = [b"before-%d" % i for i in range(20)]
AFTER = [b"after-%d" % i for i in range(20)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("fuzz"), zookeepers=1, brokers=1, metrics=True,
                           overrides={"socket.request.max.bytes": 1_000_000})
    cluster.start()
    try:
        wait_brokers(cluster.broker_address(1), 1)
        create_topic(cluster.bootstrap_servers, TOPIC)
        yield cluster
    finally:
        cluster.stop()


def test_mutated_requests_get_an_answer_or_a_clean_close_and_the_log_stays_readable(cluster):
    address = cluster.broker_address(1)
    broker = cluster.brokers[1]
    produce_values(cluster.bootstrap_servers, TOPIC, BEFORE)
    fuzzer = Fuzzer(address, timeout=3.0, broker_log=broker.log_path)
    bases = base_requests(fuzzer.served_apis(), TOPIC)
    assert len({b.api.API_KEY for b in bases}) >= 30   # every API odradek serves but ControlledShutdown

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(data=st.data())
    def one_mutant(data: st.DataObject) -> None:
        base = data.draw(st.sampled_from(bases), label="request")
        mutant = mutate(base, data.draw(st.randoms(use_true_random=False), label="mutation"))
        assume(mutant is not None)
        assert fuzzer.send(mutant) != "failure", fuzzer.stats.failures[-1]

    try:
        one_mutant()
    finally:
        fuzzer.close()
    stats = fuzzer.stats
    print(stats.summary())
    assert stats.outcomes["answer"] > stats.frames // 10 and stats.outcomes["close"] > stats.frames // 10
    assert broker.proc is not None and broker.proc.poll() is None
    assert fuzzer.healthy() is None
    produce_values(cluster.bootstrap_servers, TOPIC, AFTER)
    values = read_values(cluster.bootstrap_servers, TOPIC)
    assert [v for v in values if v in set(BEFORE + AFTER)] == BEFORE + AFTER
    assert "Traceback" not in broker.log_path.read_text(errors="replace")
    # every mutant went through the request metrics too: the scrape still parses and counts them
    scraped = scrape(cluster.metrics_urls[1])
    assert sum(v for _, v in scraped.samples("kafka_network_requestmetrics_requests_total")) > stats.frames // 10
