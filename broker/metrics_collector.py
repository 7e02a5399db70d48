"""The scrape: every figure of ``broker/metrics.py:NAMES`` read from the broker's own state.

Invariant: ``BrokerCollector.collect`` runs on the reactor thread (the metrics endpoint calls it
there) and only reads: the replica manager's partitions, the logs, the controller's context, the
group coordinator's groups and the counters of ``broker/metrics.py``. It changes nothing and
never waits; a part not started yet (or gone at shutdown) contributes nothing. Controller
gauges are non-zero on the active controller only, as in Kafka. Consumer-group lag is the
partition's high watermark (what a read_uncommitted consumer can reach, as kafka-lag-exporter
reads it) minus the committed offset, never below 0, for the groups this broker coordinates;
high watermarks of partitions led elsewhere come from ``latest`` (refreshed by the endpoint just
before the scrape), and a partition whose high watermark is unknown has no lag sample.
"""
from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .group.assignment_protocol import decode_assignment
from .metrics import NAMES, PHASES, TOPIC_COUNTERS, Timer

TopicPartition = tuple[str, int]
_BTM = "kafka_server_brokertopicmetrics_"
_GMM = "kafka_coordinator_group_groupmetadatamanager_"


def _family(name: str, labels: list[str] | None = None) -> Any:
    """The prometheus_client family of ``name``'s kind (counter, gauge or summary)."""
    meta = NAMES[name]
    doc = f"{meta.help} Kafka: {meta.mbean}"
    if meta.kind == "counter":
        return CounterMetricFamily(name, doc, labels=labels)
    if meta.kind == "summary":
        return SummaryMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


def _gauge(name: str, value: float) -> Metric:
    fam = _family(name)
    fam.add_sample(name, {}, value)
    return fam


def _counter(name: str, value: float) -> Metric:
    fam = _family(name)
    fam.add_sample(name + "_total", {}, value)
    return fam


def _add_timer(fam: Metric, name: str, labels: dict[str, str], timer: Timer) -> None:
    for q, v in timer.quantiles():
        fam.add_sample(name, {**labels, "quantile": str(q)}, v)
    fam.add_sample(name + "_count", labels, timer.count)
    fam.add_sample(name + "_sum", labels, timer.sum)


class BrokerCollector(Collector):
    """Reads ``server`` (a KafkaServer: its parts may still be None) at each scrape."""

    def __init__(self, server: Any, latest: dict[TopicPartition, int] | None = None):
        self.server = server
        self.latest = latest if latest is not None else {}   # high watermarks read from other leaders

    def collect(self) -> Iterator[Metric]:
        s = self.server
        yield from self._topic_counters(s.metrics.topic_stats.topics)
        yield from self._requests(s.metrics.request_stats)
        yield _counter("kafka_server_sessionexpirelistener_zookeeperexpires", s.metrics.zk_stats.expires)
        yield _counter("kafka_server_sessionexpirelistener_zookeeperdisconnects", s.metrics.zk_stats.disconnects)
        if s.replica_manager is not None:
            yield from self._replica_manager(s.replica_manager)
            yield from self._logs(s.replica_manager)
        if s.ctx is not None:
            sessions = s.ctx.fetch_sessions
            yield _gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions", len(sessions.sessions))
            yield _gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                         sessions.partitions_cached)
            yield _counter("kafka_server_fetchsessioncache_incrementalfetchsessionevictions", sessions.evictions)
        yield from self._controller(s.controller)
        if s.group_service is not None:
            yield from self._groups(s.group_service.coordinator.manager.groups, s.replica_manager)

    # ------------------------------------------------------------ hot-path counters

    @staticmethod
    def _topic_counters(topics: dict[str, list[int]]) -> Iterator[Metric]:
        for i, short in enumerate(TOPIC_COUNTERS):
            name = _BTM + short
            fam = _family(name, ["topic"])
            fam.add_sample(name + "_total", {}, sum(c[i] for c in topics.values()))   # all topics
            for topic, c in sorted(topics.items()):
                fam.add_metric([topic], c[i])
            yield fam

    @staticmethod
    def _requests(stats: Any) -> Iterator[Metric]:
        name = "kafka_network_requestmetrics_requests"
        fam = _family(name, ["request", "version"])
        for (request, version), n in sorted(stats.counts.items()):
            fam.add_metric([request, str(version)], n)
        yield fam
        for i, phase in enumerate(PHASES):
            name = "kafka_network_requestmetrics_" + phase
            fam = _family(name)
            for request, timer in sorted(stats.timers.items()):
                _add_timer(fam, name, {"request": request}, timer.phase(i))
            yield fam

    # ------------------------------------------------------------ replica manager and logs

    @staticmethod
    def _replica_manager(rm: Any) -> Iterator[Metric]:
        leaders = [p for p in rm.partitions.values() if p.is_leader]
        yield _gauge("kafka_server_replicamanager_partitioncount", len(rm.partitions))
        yield _gauge("kafka_server_replicamanager_leadercount", len(leaders))
        yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                     sum(1 for p in leaders if len(p.isr) < len(p.replicas)))
        yield _gauge("kafka_server_replicamanager_underminisrpartitioncount",
                     sum(1 for p in leaders if len(p.isr) < rm.min_insync_replicas(p.topic)))
        yield _gauge("kafka_server_replicamanager_offlinereplicacount", len(rm.offline_partitions))
        yield _counter("kafka_server_replicamanager_isrshrinks", rm.isr_changes[1])
        yield _counter("kafka_server_replicamanager_isrexpands", rm.isr_changes[0])

    @staticmethod
    def _logs(rm: Any) -> Iterator[Metric]:
        names = ("kafka_log_log_size", "kafka_log_log_logendoffset", "kafka_log_log_logstartoffset",
                 "kafka_log_log_numlogsegments")
        fams = [_family(n, ["topic", "partition"]) for n in names]
        for tp, p in sorted(rm.partitions.items()):
            log_ = p.log
            if log_ is None:
                continue
            labels = [tp[0], str(tp[1])]
            for fam, value in zip(fams, (log_.size, log_.log_end_offset, log_.log_start_offset,
                                         len(log_.segments))):
                fam.add_metric(labels, value)
        yield from fams

    # ------------------------------------------------------------ controller

    @staticmethod
    def _controller(controller: Any) -> Iterator[Metric]:
        from .controller.states import PartitionState

        active = controller is not None and controller.is_active
        ctx = controller.ctx if active else None
        offline = global_partitions = topics = imbalance = 0
        if ctx is not None:
            parts = ctx.all_partitions()
            global_partitions, topics = len(parts), len(ctx.all_topics)
            offline = sum(1 for tp in parts if ctx.partition_state(tp) is PartitionState.OFFLINE
                          and not ctx.is_topic_queued_for_deletion(tp[0]))
            imbalance = sum(1 for tp, st in ctx.leadership.items()
                            if ctx.replicas(tp) and st.leader != ctx.replicas(tp)[0]
                            and not ctx.is_topic_queued_for_deletion(tp[0]))
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount", 1 if active else 0)
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount", offline)
        yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", global_partitions)
        yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", topics)
        yield _gauge("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", imbalance)
        stats = controller.stats if controller is not None else None
        yield _counter("kafka_controller_controllerstats_uncleanleaderelections",
                       stats.unclean_elections if stats is not None else 0)
        name = "kafka_controller_controllerstats_leaderelectionrateandtimems"
        fam = _family(name)
        if stats is not None:
            _add_timer(fam, name, {}, stats.election_time)
        yield fam

    # ------------------------------------------------------------ groups and lag

    def _groups(self, groups: dict[str, Any], rm: Any) -> Iterator[Metric]:
        by_state: dict[str, int] = {}
        for g in groups.values():
            by_state[g.state.value] = by_state.get(g.state.value, 0) + 1
        yield _gauge(_GMM + "numgroups", len(groups))
        for state in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"):
            yield _gauge(_GMM + "numgroups" + state.lower(), by_state.get(state, 0))
        yield _gauge(_GMM + "numoffsets", sum(len(g.offsets) for g in groups.values()))
        members = _family("kafka_consumergroup_members", ["consumergroup"])
        for gid, g in sorted(groups.items()):
            members.add_metric([gid], len(g.members))
        yield members
        yield from self._lag(groups, rm)

    def high_watermark(self, tp: TopicPartition, rm: Any) -> int | None:
        p = rm.partitions.get(tp) if rm is not None else None
        if p is not None and p.is_leader:
            return p.high_watermark
        return self.latest.get(tp)

    def _lag(self, groups: dict[str, Any], rm: Any) -> Iterator[Metric]:
        gp = ["group", "topic", "partition", "member_host", "consumer_id", "client_id"]
        offset, lag = _family("kafka_consumergroup_group_offset", gp), _family("kafka_consumergroup_group_lag", gp)
        max_lag = _family("kafka_consumergroup_group_max_lag", ["group"])
        sum_lag = _family("kafka_consumergroup_group_sum_lag", ["group"])
        topic_sum = _family("kafka_consumergroup_group_topic_sum_lag", ["group", "topic"])
        latest = _family("kafka_partition_latest_offset", ["topic", "partition"])
        seen: set[TopicPartition] = set()
        for gid, g in sorted(groups.items()):
            lags: dict[TopicPartition, int] = {}
            owners = _owners(g)
            for tp, committed in sorted(g.offsets.items()):
                labels = [gid, tp[0], str(tp[1]), *owners.get(tp, _NO_OWNER)]
                offset.add_metric(labels, committed.offset)
                hw = self.high_watermark(tp, rm)
                if hw is None:
                    continue
                lags[tp] = max(hw - committed.offset, 0)
                lag.add_metric(labels, lags[tp])
                if tp not in seen:
                    seen.add(tp)
                    latest.add_metric([tp[0], str(tp[1])], hw)
            if lags:
                max_lag.add_metric([gid], max(lags.values()))
                sum_lag.add_metric([gid], sum(lags.values()))
                per_topic: dict[str, int] = {}
                for (topic, _), n in lags.items():
                    per_topic[topic] = per_topic.get(topic, 0) + n
                for topic, n in sorted(per_topic.items()):
                    topic_sum.add_metric([gid, topic], n)
        yield from (offset, lag, max_lag, sum_lag, topic_sum, latest)


_NO_OWNER = ("", "", "")


def _owners(group: Any) -> dict[TopicPartition, tuple[str, str, str]]:
    """Partition -> (member_host, consumer_id, client_id) of the consumer-group member it is
    assigned to (kafka-lag-exporter's labels; empty for a partition nobody holds)."""
    out: dict[TopicPartition, tuple[str, str, str]] = {}
    if group.protocol_type != "consumer":
        return out
    for m in group.members.values():
        try:
            assigned = decode_assignment(m.assignment).partitions if m.assignment else {}
        except ValueError:
            continue
        for topic, partitions in assigned.items():
            for p in partitions:
                out[(topic, p)] = (m.client_host, m.member_id, m.client_id)
    return out


def committed_partitions(groups: dict[str, Any]) -> set[TopicPartition]:
    """The partitions some coordinated group committed an offset on (their HW is needed)."""
    return {tp for g in groups.values() for tp in g.offsets}
