"""LeaderAndIsr never creates a log with guessed broker defaults when a topic's config cannot
be read from ZooKeeper: the real handler, a config source that fails, a task.Clock reactor."""
from __future__ import annotations

import uuid

import pytest
from kazoo.exceptions import ConnectionLoss

from odradek.broker.apis import leader_and_isr
from odradek.broker.topic_configs import config_read_timeout_s
from odradek.protocol.errors import ErrorCode

from broker_fixtures import Broker, call_deferred


class ConfigSource:
    """What the handler reads /config/topics/<t> through: ``failures`` ConnectionLoss first
    (None: for ever), then ``stored[topic]``; a ValueError stands for an undecodable znode."""

    def __init__(self, stored: dict[str, dict[str, str] | Exception], failures: int | None = 0):
        self.stored, self.failures, self.reads = stored, failures, 0

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        assert entity_type == "topics"
        self.reads += 1
        if self.failures is None or self.failures > 0:
            if self.failures:
                self.failures -= 1
            raise ConnectionLoss()
        value = self.stored.get(name, {})
        if isinstance(value, Exception):
            raise value
        return value


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def lai(topics: dict[str, int], leader_epoch: int = 0) -> dict:
    """LeaderAndIsr v5 making broker 1 the only replica and leader of each topic's partitions."""
    return {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "type": 0, "live_leaders": [],
            "topic_states": [{"topic_name": t, "topic_id": uuid.UUID(int=0), "partition_states": [
                {"partition_index": p, "controller_epoch": 1, "leader": 1, "leader_epoch": leader_epoch,
                 "isr": [1], "zk_version": 0, "replicas": [1], "adding_replicas": [], "removing_replicas": [],
                 "is_new": True} for p in range(n)]} for t, n in topics.items()]}


def answer(broker: Broker, body: dict, step_s: float = 0.1, limit_s: float = 60.0) -> tuple[object, float]:
    """The response and how long (clock time) it took; the clock only moves while it is pending."""
    box: list = []
    call_deferred(broker, leader_and_isr, 5, body).addBoth(box.append)
    waited = 0.0
    while not box:
        assert waited < limit_s, "LeaderAndIsr never answered"
        broker.clock.advance(step_s)
        waited += step_s
    if hasattr(box[0], "raiseException"):
        box[0].raiseException()
    return box[0], waited


def by_topic(resp, names: list[str]) -> dict[str, list[int]]:
    """Partition error codes per topic; v5 answers by topic id, in request order (ids are all zero here)."""
    return {name: [e.error_code for e in t.partition_errors] for name, t in zip(names, resp.topics, strict=True)}


def test_a_transient_failure_is_retried_without_blocking_and_the_real_config_is_used(broker):
    broker.ctx.zk = ConfigSource({"c": {"cleanup.policy": "compact"}}, failures=3)
    box: list = []
    call_deferred(broker, leader_and_isr, 5, lai({"c": 2})).addBoth(box.append)
    assert not box   # waiting for a retry on the reactor's clock, not sleeping in it
    while not box:
        broker.clock.advance(0.1)
    assert box[0].error_code == 0 and by_topic(box[0], ["c"]) == {"c": [0, 0]}
    for p in (0, 1):
        log = broker.log_manager.get_log(("c", p))
        assert log is not None and log.config.compact and not log.config.delete_enabled
        assert broker.rm.get_partition(("c", p)).is_leader
    assert broker.ctx.topic_configs["c"] == {"cleanup.policy": "compact"}


def test_zookeeper_down_fails_the_topics_partitions_and_changes_nothing(broker):
    source = ConfigSource({"c": {"cleanup.policy": "compact"}}, failures=None)
    broker.ctx.zk = source
    broker.ctx.topic_configs["known"] = {"retention.ms": "1000"}   # read earlier: no ZooKeeper needed
    resp, waited = answer(broker, lai({"c": 1, "known": 1}))
    bound = config_read_timeout_s(broker.config)
    assert waited <= bound + 1.0 and source.reads > 3, (waited, source.reads)
    assert by_topic(resp, ["c", "known"]) == {"c": [ErrorCode.UNKNOWN_SERVER_ERROR], "known": [0]}
    assert broker.log_manager.get_log(("c", 0)) is None and broker.rm.get_partition(("c", 0)) is None
    assert "c" not in broker.ctx.topic_configs
    assert broker.log_manager.get_log(("known", 0)).config["retention.ms"] == 1000

    source.failures = 0   # ZooKeeper is back: the controller's next LeaderAndIsr applies it
    resp, _ = answer(broker, lai({"c": 1}))
    assert by_topic(resp, ["c"]) == {"c": [0]}
    assert broker.log_manager.get_log(("c", 0)).config.compact


def test_an_undecodable_or_invalid_config_fails_at_once_and_unknown_names_are_ignored(broker):
    broker.ctx.zk = ConfigSource({"bad-json": ValueError("not JSON"), "bad-value": {"cleanup.policy": "sometimes"},
                                  "newer": {"cleanup.policy": "compact", "some.future.config": "1"}})
    resp, waited = answer(broker, lai({"bad-json": 1, "bad-value": 1, "newer": 1}))
    assert waited <= 0.1   # nothing to wait for: retrying would not help
    assert by_topic(resp, ["bad-json", "bad-value", "newer"]) == {
        "bad-json": [ErrorCode.UNKNOWN_SERVER_ERROR], "bad-value": [ErrorCode.UNKNOWN_SERVER_ERROR], "newer": [0]}
    assert broker.log_manager.get_log(("bad-json", 0)) is None and broker.log_manager.get_log(("bad-value", 0)) is None
    assert broker.log_manager.get_log(("newer", 0)).config.compact
