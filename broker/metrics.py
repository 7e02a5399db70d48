"""Broker metrics: Kafka's JMX MBeans under the names the Prometheus JMX exporter gives them.

Invariant: every exported metric name is declared once, in ``NAMES`` (name -> type, Kafka MBean,
help); nothing else in odradek spells one. The hot path only adds to plain counters held here
(``TopicStats``: one dict lookup and an add; ``RequestStats.record``: once per socket write, for
the requests it answered, on the reactor thread); everything else is read from the broker's own
state when Prometheus scrapes (``broker/metrics_collector.py``), so a broker nobody scrapes pays
nothing for gauges.
Each ``KafkaServer`` has its own ``CollectorRegistry`` (never prometheus_client's global one), so
brokers in one process, and tests, never see each other's figures. Timers (request phases,
leader elections) keep the last ``RESERVOIR`` samples, like Yammer's default reservoir, and are
exported as Prometheus summaries with Kafka's percentiles, plus ``_count`` and ``_sum``.
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Any, NamedTuple

from odradek.protocol.errors import ErrorCode


class MetricName(NamedTuple):
    kind: str         # "counter" | "gauge" | "summary"
    mbean: str        # the Kafka 2.8 MBean it renders
    help: str


_BTM = "kafka.server:type=BrokerTopicMetrics,name="
_RM = "kafka.server:type=ReplicaManager,name="
_FSC = "kafka.server:type=FetchSessionCache,name="
_KC = "kafka.controller:type=KafkaController,name="
_RQ = "kafka.network:type=RequestMetrics,name="
_LOG = "kafka.log:type=Log,name="
_GMM = "kafka.coordinator.group:type=GroupMetadataManager,name="

# The one table of names. Counters are named without "_total" (prometheus_client adds it).
NAMES: dict[str, MetricName] = {
    "kafka_server_brokertopicmetrics_messagesin": MetricName(
        "counter", _BTM + "MessagesInPerSec[,topic=T]", "Records appended as leader (all topics, and per topic)."),
    "kafka_server_brokertopicmetrics_bytesin": MetricName(
        "counter", _BTM + "BytesInPerSec[,topic=T]", "Record batch bytes appended as leader from clients."),
    "kafka_server_brokertopicmetrics_bytesout": MetricName(
        "counter", _BTM + "BytesOutPerSec[,topic=T]", "Record bytes sent to consumers in fetch responses."),
    "kafka_server_brokertopicmetrics_replicationbytesout": MetricName(
        "counter", _BTM + "ReplicationBytesOutPerSec[,topic=T]", "Record bytes sent to followers."),
    "kafka_server_brokertopicmetrics_failedproducerequests": MetricName(
        "counter", _BTM + "FailedProduceRequestsPerSec[,topic=T]",
        "Partition appends that failed (not counting not-leader, unknown-partition, too-large, corrupt, storage errors)."),
    "kafka_server_brokertopicmetrics_failedfetchrequests": MetricName(
        "counter", _BTM + "FailedFetchRequestsPerSec[,topic=T]",
        "Partition reads that failed (not counting not-leader, unknown-partition, epoch, out-of-range, storage errors)."),
    "kafka_server_brokertopicmetrics_totalproducerequests": MetricName(
        "counter", _BTM + "TotalProduceRequestsPerSec[,topic=T]", "Partition appends asked of this broker."),
    "kafka_server_brokertopicmetrics_totalfetchrequests": MetricName(
        "counter", _BTM + "TotalFetchRequestsPerSec[,topic=T]", "Partition reads (a parked fetch counts again when it completes)."),
    "kafka_server_replicamanager_underreplicatedpartitions": MetricName(
        "gauge", _RM + "UnderReplicatedPartitions", "Partitions led here whose ISR is smaller than their replicas."),
    "kafka_server_replicamanager_underminisrpartitioncount": MetricName(
        "gauge", _RM + "UnderMinIsrPartitionCount", "Partitions led here whose ISR is below min.insync.replicas."),
    "kafka_server_replicamanager_partitioncount": MetricName(
        "gauge", _RM + "PartitionCount", "Partitions hosted on this broker."),
    "kafka_server_replicamanager_leadercount": MetricName(
        "gauge", _RM + "LeaderCount", "Partitions led by this broker."),
    "kafka_server_replicamanager_offlinereplicacount": MetricName(
        "gauge", _RM + "OfflineReplicaCount", "Replicas on a failed log dir."),
    "kafka_server_replicamanager_isrshrinks": MetricName(
        "counter", _RM + "IsrShrinksPerSec", "ISR shrinks written by this broker as leader."),
    "kafka_server_replicamanager_isrexpands": MetricName(
        "counter", _RM + "IsrExpandsPerSec", "ISR expansions written by this broker as leader."),
    "kafka_server_fetchsessioncache_numincrementalfetchsessions": MetricName(
        "gauge", _FSC + "NumIncrementalFetchSessions", "Incremental fetch sessions (KIP-227) this broker keeps."),
    "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached": MetricName(
        "gauge", _FSC + "NumIncrementalFetchPartitionsCached", "Partitions held by those sessions."),
    "kafka_server_fetchsessioncache_incrementalfetchsessionevictions": MetricName(
        "counter", _FSC + "IncrementalFetchSessionEvictionsPerSec", "Sessions evicted to make room for new ones."),
    "kafka_controller_kafkacontroller_activecontrollercount": MetricName(
        "gauge", _KC + "ActiveControllerCount", "1 on the active controller, else 0 (sums to 1 over the cluster)."),
    "kafka_controller_kafkacontroller_offlinepartitionscount": MetricName(
        "gauge", _KC + "OfflinePartitionsCount", "Partitions without a live leader (active controller only)."),
    "kafka_controller_kafkacontroller_globalpartitioncount": MetricName(
        "gauge", _KC + "GlobalPartitionCount", "Partitions in the cluster (active controller only)."),
    "kafka_controller_kafkacontroller_globaltopiccount": MetricName(
        "gauge", _KC + "GlobalTopicCount", "Topics in the cluster (active controller only)."),
    "kafka_controller_kafkacontroller_preferredreplicaimbalancecount": MetricName(
        "gauge", _KC + "PreferredReplicaImbalanceCount", "Partitions not led by their preferred replica (active controller only)."),
    "kafka_controller_controllerstats_uncleanleaderelections": MetricName(
        "counter", "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
        "Leaders elected from outside the ISR by this broker as controller."),
    "kafka_controller_controllerstats_leaderelectionrateandtimems": MetricName(
        "summary", "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
        "Milliseconds of each leader election round run by this broker as controller."),
    "kafka_network_requestmetrics_requests": MetricName(
        "counter", _RQ + "RequestsPerSec,request=R,version=V", "Requests answered (FetchConsumer and FetchFollower apart)."),
    "kafka_network_requestmetrics_totaltimems": MetricName(
        "summary", _RQ + "TotalTimeMs,request=R", "Milliseconds from a request's last byte in to its response handed to the socket."),
    "kafka_network_requestmetrics_requestqueuetimems": MetricName(
        "summary", _RQ + "RequestQueueTimeMs,request=R", "Milliseconds waiting behind earlier requests of the same connection."),
    "kafka_network_requestmetrics_localtimems": MetricName(
        "summary", _RQ + "LocalTimeMs,request=R", "Milliseconds in the handler on the reactor thread."),
    "kafka_network_requestmetrics_remotetimems": MetricName(
        "summary", _RQ + "RemoteTimeMs,request=R", "Milliseconds parked (purgatory: acks=all, long-poll fetch; coordinator and ZooKeeper waits)."),
    "kafka_network_requestmetrics_responsesendtimems": MetricName(
        "summary", _RQ + "ResponseSendTimeMs,request=R", "Milliseconds to frame the response and hand it to the transport."),
    "kafka_log_log_size": MetricName("gauge", _LOG + "Size,topic=T,partition=P", "Bytes of the partition's log segments."),
    "kafka_log_log_logendoffset": MetricName("gauge", _LOG + "LogEndOffset,topic=T,partition=P", "Log end offset."),
    "kafka_log_log_logstartoffset": MetricName("gauge", _LOG + "LogStartOffset,topic=T,partition=P", "Log start offset."),
    "kafka_log_log_numlogsegments": MetricName("gauge", _LOG + "NumLogSegments,topic=T,partition=P", "Segments of the log."),
    "kafka_server_sessionexpirelistener_zookeeperexpires": MetricName(
        "counter", "kafka.server:type=SessionExpireListener,name=ZooKeeperExpiresPerSec", "ZooKeeper sessions expired."),
    "kafka_server_sessionexpirelistener_zookeeperdisconnects": MetricName(
        "counter", "kafka.server:type=SessionExpireListener,name=ZooKeeperDisconnectsPerSec", "ZooKeeper connections lost."),
    "kafka_coordinator_group_groupmetadatamanager_numgroups": MetricName(
        "gauge", _GMM + "NumGroups", "Groups this broker coordinates."),
    "kafka_coordinator_group_groupmetadatamanager_numgroupsstable": MetricName(
        "gauge", _GMM + "NumGroupsStable", "Groups in state Stable."),
    "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance": MetricName(
        "gauge", _GMM + "NumGroupsPreparingRebalance", "Groups in state PreparingRebalance."),
    "kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance": MetricName(
        "gauge", _GMM + "NumGroupsCompletingRebalance", "Groups in state CompletingRebalance."),
    "kafka_coordinator_group_groupmetadatamanager_numgroupsempty": MetricName(
        "gauge", _GMM + "NumGroupsEmpty", "Groups in state Empty."),
    "kafka_coordinator_group_groupmetadatamanager_numgroupsdead": MetricName(
        "gauge", _GMM + "NumGroupsDead", "Groups in state Dead."),
    "kafka_coordinator_group_groupmetadatamanager_numoffsets": MetricName(
        "gauge", _GMM + "NumOffsets", "Committed offsets held by this coordinator."),
    "kafka_consumergroup_members": MetricName(
        "gauge", "(kafka_exporter) consumergroup members", "Members of each group this broker coordinates."),
    "kafka_consumergroup_group_offset": MetricName(
        "gauge", "(kafka-lag-exporter)", "Last committed offset of a group on a partition."),
    "kafka_consumergroup_group_lag": MetricName(
        "gauge", "(kafka-lag-exporter)", "Partition high watermark minus the group's committed offset."),
    "kafka_consumergroup_group_max_lag": MetricName("gauge", "(kafka-lag-exporter)", "Largest lag of a group."),
    "kafka_consumergroup_group_sum_lag": MetricName("gauge", "(kafka-lag-exporter)", "Sum of a group's lags."),
    "kafka_consumergroup_group_topic_sum_lag": MetricName(
        "gauge", "(kafka-lag-exporter)", "Sum of a group's lags on one topic."),
    "kafka_partition_latest_offset": MetricName(
        "gauge", "(kafka-lag-exporter)", "High watermark of a partition some group committed on."),
}

# request-phase timers, in Kafka's order; the RequestStats phase index of each
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems", "totaltimems")
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)   # Yammer's percentiles, as the exporter renders them
RESERVOIR = 1028                                    # Yammer's default reservoir size

# TopicStats counter slots
MESSAGES_IN, BYTES_IN, BYTES_OUT, REPLICATION_BYTES_OUT, FAILED_PRODUCE, FAILED_FETCH, TOTAL_PRODUCE, TOTAL_FETCH = range(8)
TOPIC_COUNTERS = ("messagesin", "bytesin", "bytesout", "replicationbytesout", "failedproducerequests",
                  "failedfetchrequests", "totalproducerequests", "totalfetchrequests")


class TopicStats:
    """Kafka's BrokerTopicStats: per-topic counters; the all-topics figure is their sum at scrape."""

    __slots__ = ("topics",)

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}

    def topic(self, name: str) -> list[int]:
        """The counters of ``name`` (index them with MESSAGES_IN ... TOTAL_FETCH)."""
        c = self.topics.get(name)
        if c is None:
            c = self.topics[name] = [0] * len(TOPIC_COUNTERS)
        return c


class Timer:
    """A Yammer-style timer: count, sum and the last RESERVOIR samples (milliseconds)."""

    __slots__ = ("count", "sum", "samples")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.samples: deque[float] = deque(maxlen=RESERVOIR)

    def update(self, ms: float) -> None:
        self.count += 1
        self.sum += ms
        self.samples.append(ms)

    def quantiles(self) -> list[tuple[float, float]]:
        """(quantile, value) over the reservoir (nearest rank); none while empty."""
        ordered = sorted(self.samples)
        n = len(ordered)
        if not n:
            return []
        return [(q, ordered[min(n - 1, int(q * n))]) for q in QUANTILES]


class RequestTimer:
    """One API's five phase timers at once: each request's five instants (perf_counter seconds:
    arrived, started, parked, ready, sent) go into one reservoir; phases are worked out at scrape."""

    __slots__ = ("count", "sums", "samples")

    def __init__(self) -> None:
        self.count = 0
        self.sums = [0.0] * (len(PHASES) - 1)      # seconds, per phase but the total, over every request
        self.samples: deque[tuple[float, float, float, float, float]] = deque(maxlen=RESERVOIR)

    def phase(self, i: int) -> Timer:
        """Phase ``i`` of PHASES as a Timer in milliseconds (for the scrape); the total is the
        sum of the four phases it is made of."""
        t = Timer()
        t.count, t.sum = self.count, (self.sums[i] if i < len(self.sums) else sum(self.sums)) * 1000.0
        a, b = ((1, 0), (2, 1), (3, 2), (4, 3), (4, 0))[i]      # PHASES: queue, local, remote, send, total
        t.samples.extend((s[a] - s[b]) * 1000.0 for s in self.samples)
        return t


class RequestKind:
    """A request name and version as Kafka's RequestMetrics counts them, with the name's timer.
    Fetch's kind is only a header's: ``split`` holds the FetchFollower and FetchConsumer kinds a
    Fetch frame is counted as."""

    __slots__ = ("name", "version", "timer", "answered", "split")

    def __init__(self, name: str, version: int, timer: RequestTimer | None,
                 split: tuple[RequestKind, RequestKind] | None = None) -> None:
        self.name = name
        self.version = version
        self.timer = timer
        self.answered = 0
        self.split = split


class RequestStats:
    """Kafka's RequestMetrics: requests answered per (name, version) and a RequestTimer per name.
    Request names: the API's name, with Fetch split into FetchConsumer and FetchFollower."""

    __slots__ = ("names", "timers", "_kinds")

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names                                  # api key -> API name
        self.timers: dict[str, RequestTimer] = {}
        self._kinds: dict[bytes, RequestKind] = {}          # header's first 4 bytes -> its kind

    @property
    def counts(self) -> dict[tuple[str, int], int]:
        """Requests answered per (name, version)."""
        kinds = [k for kind in self._kinds.values() for k in (kind.split or (kind,))]
        return {(k.name, k.version): k.answered for k in kinds if k.answered}

    def kind_of(self, frame: bytes | memoryview) -> RequestKind | None:
        """The kind of a request frame, from its header (no decoding beyond it)."""
        if len(frame) < 10:
            return None
        head: Any = frame[:4]
        try:
            kind = self._kinds.get(head)
        except ValueError:   # a lent Produce frame is a writable view: not hashable
            head = bytes(head)
            kind = self._kinds.get(head)
        if kind is None:
            key, version = struct.unpack_from(">hh", frame)
            name = self.names.get(key)
            if name is None:
                return None     # (garbage is never cached: the cache holds known APIs' versions only)
            if name == "Fetch":
                kind = RequestKind(name, version, None, (self._kind("FetchFollower", version),
                                                         self._kind("FetchConsumer", version)))
            else:
                kind = self._kind(name, version)
            self._kinds[head] = kind
        split = kind.split
        if split is not None:   # Fetch v0-11: header v1 (client id), then the replica id
            at = 10 + max(struct.unpack_from(">h", frame, 8)[0], 0)
            return split[0] if len(frame) >= at + 4 and frame[at] < 0x80 else split[1]
        return kind

    def _kind(self, name: str, version: int) -> RequestKind:
        timer = self.timers.get(name)
        if timer is None:
            timer = self.timers[name] = RequestTimer()
        return RequestKind(name, version, timer)

    def record(self, answered: list[tuple[tuple, float]], sent: float) -> None:
        """Requests whose responses went to the transport at ``sent``: each (timing, ready), timing
        being the connection's (kind or None, arrived, started[, parked]); a request's local time
        ends when its handler returned (or parked: the rest is remote time). One call per write,
        not per request (it is on every request's path)."""
        for timing, ready in answered:
            kind = timing[0]
            if kind is None:
                continue
            kind.answered += 1
            t = kind.timer
            t.count += 1
            arrived, started = timing[1], timing[2]
            sums = t.sums
            sums[0] += started - arrived
            if len(timing) > 3:
                parked = timing[3]
                sums[1] += parked - started
                sums[2] += ready - parked
            else:
                parked = ready
                sums[1] += ready - started
            sums[3] += sent - ready
            t.samples.append((arrived, started, parked, ready, sent))


class ZkStats:
    """Kafka's SessionExpireListener meters, counted from kazoo's state changes (any thread)."""

    __slots__ = ("expires", "disconnects")

    def __init__(self) -> None:
        self.expires = 0
        self.disconnects = 0

    def on_state(self, state: str) -> None:
        if state == "LOST":
            self.expires += 1
        elif state == "SUSPENDED":
            self.disconnects += 1


class ControllerStats:
    """Kafka's ControllerStats: unclean elections and the time of each election round."""

    __slots__ = ("unclean_elections", "election_time")

    def __init__(self) -> None:
        self.unclean_elections = 0
        self.election_time = Timer()


class BrokerMetrics:
    """What one broker counts: None when ``metrics.port`` is unset (then nothing is counted)."""

    __slots__ = ("topic_stats", "request_stats", "zk_stats")

    def __init__(self, api_names: dict[int, str]) -> None:
        self.topic_stats = TopicStats()
        self.request_stats = RequestStats(api_names)
        self.zk_stats = ZkStats()


# Errors Kafka's ReplicaManager does not count as failed produce/fetch requests (the client's
# retry or the log's refusal, not the broker's failure)
NOT_FAILURES = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_OUT_OF_RANGE))


def count_request(stats: TopicStats | None, topic: str, slot: int) -> list[int] | None:
    """Count one partition's produce or fetch; its topic's counters (None when metrics are off)."""
    if stats is None:
        return None
    c = stats.topics.get(topic) or stats.topic(topic)
    c[slot] += 1
    return c


def count_append(counts: list[int] | None, records: int, size: int) -> None:
    if counts is not None:
        counts[MESSAGES_IN] += records
        counts[BYTES_IN] += size


def count_failure(counts: list[int] | None, slot: int, code: int) -> None:
    if counts is not None and int(code) not in NOT_FAILURES:
        counts[slot] += 1


def count_bytes_out(stats: TopicStats, results: list, from_follower: bool) -> None:
    """The record bytes of a fetch response: BytesOut for consumers, ReplicationBytesOut for followers."""
    slot = REPLICATION_BYTES_OUT if from_follower else BYTES_OUT
    for fp, r in results:
        n = len(r["records"])
        if n:
            (stats.topics.get(fp.topic) or stats.topic(fp.topic))[slot] += n
