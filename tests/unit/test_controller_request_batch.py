"""ControllerRequestBatch bodies: Kafka 2.8 field names, every version encodes and decodes."""
from odradek.broker.controller.context import ControllerContext
from odradek.broker.controller.request_batch import (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA,
                                                     ControllerRequestBatch)
from odradek.protocol.apis import leader_and_isr, stop_replica, update_metadata
from odradek.zk.znodes import BrokerInfo, Endpoint, LeaderIsrAndControllerEpoch as S


def ctx():
    c = ControllerContext(epoch=7, epoch_zk_version=6)
    for b in (1, 2):
        c.live_brokers[b] = BrokerInfo(b, [Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b),
                                           Endpoint("INTERNAL", "10.0.0.1", 9100 + b)], rack="r", epoch=50 + b)
    c.set_assignment(("t", 0), [1, 2, 3])
    c.set_assignment(("u", 1), [2, 1])
    c.leadership[("t", 0)] = S(1, 4, [1, 2], 6, 9)
    c.leadership[("u", 1)] = S(2, 0, [2, 1], 7, 0)
    c.all_topics = {"t", "u"}
    return c


def build(versions=None):
    c = ctx()
    b = ControllerRequestBatch(c, controller_id=2, inter_broker_listener="INTERNAL", versions=versions)
    b.new_batch()
    b.add_leader_and_isr([1, 2], ("t", 0), c.leadership[("t", 0)], c.replicas(("t", 0)), is_new=False)
    b.add_leader_and_isr([1], ("u", 1), c.leadership[("u", 1)], c.replicas(("u", 1)), is_new=True)
    b.add_stop_replica([2], ("t", 0), delete=True)
    b.add_stop_replica([2], ("u", 1), delete=False)
    b.add_stop_replica([3], ("t", 0), delete=True)     # dead broker: dropped
    return b.build(), b


def test_order_targets_and_fields():
    reqs, batch = build()
    assert batch.is_empty()
    assert [(r.broker_id, r.api) for r in reqs] == [
        (1, LEADER_AND_ISR), (2, LEADER_AND_ISR), (1, UPDATE_METADATA), (2, UPDATE_METADATA), (2, STOP_REPLICA)]
    lai = leader_and_isr.Request.decode(leader_and_isr.Request.encode(reqs[0].body, 5), 5)
    assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (2, 7, 51)
    ps = {(t.topic_name, p.partition_index): p for t in lai.topic_states for p in t.partition_states}
    assert ps[("t", 0)].zk_version == 9 and ps[("t", 0)].leader_epoch == 4 and ps[("u", 1)].is_new
    assert {(x.broker_id, x.host_name, x.port) for x in lai.live_leaders} == {(1, "10.0.0.1", 9101),
                                                                               (2, "10.0.0.1", 9102)}
    um = update_metadata.Request.decode(update_metadata.Request.encode(reqs[2].body, 7), 7)
    t0 = [p for t in um.topic_states for p in t.partition_states if t.topic_name == "t"][0]
    assert t0.offline_replicas == [3] and t0.replicas == [1, 2, 3]
    b1 = [b for b in um.live_brokers if b.id == 1][0]
    assert {(e.listener, e.port, e.security_protocol) for e in b1.endpoints} == {
        ("PLAINTEXT", 9001, 0), ("INTERNAL", 9101, 0)} and b1.rack == "r"
    assert reqs[4].deleted_partitions == [("t", 0)]


def test_every_version_encodes():
    for api, mod in ((LEADER_AND_ISR, leader_and_isr), (UPDATE_METADATA, update_metadata),
                     (STOP_REPLICA, stop_replica)):
        for v in range(mod.MIN_VERSION, mod.MAX_VERSION + 1):
            reqs, _ = build({api: v})
            for r in reqs:
                if r.api == api:
                    assert r.version == v
                    mod.Request.decode(mod.Request.encode(r.body, v), v)


def test_stop_replica_before_v3_splits_by_delete_flag():
    reqs, _ = build({STOP_REPLICA: 2})
    stops = [r for r in reqs if r.api == STOP_REPLICA]
    assert [(r.body["delete_partitions"], r.deleted_partitions) for r in stops] == [
        (False, []), (True, [("t", 0)])]
