"""The blocking reads behind one snapshot: ZooKeeper (kazoo, reads only), the brokers (odradek's
AdminClient and ListOffsets) and each broker's metrics endpoint.

Invariant: read-only — no znode is written and no request that changes a broker is sent;
``collect`` never raises: each source's failure (ZooKeeper down, a broker not answering, a
metrics endpoint refusing) is caught, named in ``RawReads.errors`` and the rest is still read.
Broker metadata stands in for ZooKeeper's view while ZooKeeper cannot be read.
"""
from __future__ import annotations

import time
import urllib.request
from typing import Any, Callable

from odradek.client.admin import AdminClient
from odradek.client.cluster import ClusterMetadata, NodePool
from odradek.client.config import ClientConfig
from odradek.client.list_offsets import list_offsets
from odradek.client.structs import TopicPartition
from odradek.protocol.errors import KafkaError
from odradek.zk.admin import AdminZkClient, open_zk
from odradek.zk.ensemble import four_letter_word
from odradek.zk.topics import INTERNAL_TOPICS

from .metrics import RateSeries, broker_totals
from .snapshot import GroupRead, PartitionRead, RawReads

# Short client timeouts: a broker that does not answer must not hold the page for long.
CLIENT_DEFAULTS = {"request.timeout.ms": 2000, "socket.connection.setup.timeout.ms": 2000,
                   "retry.backoff.ms": 100, "reconnect.backoff.ms": 200}
ZOOKEEPER_READ_TIMEOUT = 3.0  # seconds one znode read may wait (kazoo's own: until reconnected)
ENDPOINT_TTL = 30.0   # seconds a broker's metrics endpoint (from DescribeConfigs) is trusted


def ensemble_members(connect: str) -> list[tuple[str, int]]:
    """``h1:2181,h2:2182/chroot`` -> [(h1, 2181), (h2, 2182)]."""
    hosts = connect.split("/", 1)[0]
    out = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host or item.strip(), int(port) if port.isdigit() else 2181))
    return out


def server_mode(reply: str) -> str | None:
    """The ``Mode:`` of a ``srvr`` reply; 'unknown' for a node that answers but says none
    (four-letter words not whitelisted), None for no answer."""
    for line in reply.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return "unknown" if reply else None


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Collector:
    """One per ``odradek ui``: keeps its ZooKeeper session, clients and the throughput series."""

    def __init__(self, zookeeper_connect: str, client_config: dict[str, Any],
                 scrape: Callable[[str], str] | None = None) -> None:
        self.zookeeper_connect = zookeeper_connect
        self.config = {**CLIENT_DEFAULTS, **client_config, "client.id": "odradek-ui"}
        self.admin = AdminClient(self.config)
        self._cluster = ClusterMetadata(ClientConfig("consumer", self.config))
        self._pool = NodePool(self._cluster)
        self._zk: Any = None
        self._known: dict[int, str] = {}
        self._groups: list[str] = []
        self._endpoints: dict[int, tuple[float, str | None, str | None]] = {}
        self._series: dict[int, RateSeries] = {}
        self._scrape = scrape or http_get

    # ------------------------------------------------------------------ one cycle
    def collect(self) -> RawReads:
        raw = RawReads(taken_at=time.time(), zookeeper_connect=self.zookeeper_connect)
        steps: list[tuple[str, Callable[[RawReads], None]]] = [
            ("zookeeper ensemble", self._ensemble), ("zookeeper", self._from_zookeeper),
            ("broker metadata", self._from_metadata), ("log dirs", self._log_dirs),
            ("offsets", self._offsets), ("consumer groups", self._consumer_groups),
            ("reassignments", self._reassignments), ("metrics", self._metrics)]
        for name, step in steps:
            try:
                step(raw)
            except Exception as exc:  # noqa: BLE001 - a failed source is shown, never fatal
                raw.errors[name] = _error(exc)
        raw.known_brokers = dict(self._known)
        return raw

    def _ensemble(self, raw: RawReads) -> None:
        raw.ensemble = [(f"{h}:{p}", server_mode(four_letter_word(h, p, "srvr", timeout=1.0)))
                        for h, p in ensemble_members(self.zookeeper_connect)]

    def _from_zookeeper(self, raw: RawReads) -> None:
        if self._zk is None:
            self._zk = open_zk(self.zookeeper_connect, timeout=3.0)
        if not self._zk.connected:
            raise ConnectionError(f"not connected to ZooKeeper at {self.zookeeper_connect} (reconnecting)")
        zk = AdminZkClient(self._zk, read_timeout=ZOOKEEPER_READ_TIMEOUT)  # ZooKeeper lost mid-cycle
        brokers = zk.live_brokers()
        controller = zk.controller_id()
        topics: dict[str, dict[int, PartitionRead]] = {}
        deleting = set()
        for listing in zk.list_topics():
            try:
                desc = zk.describe_topic(listing.name)
            except KafkaError:  # deleted between the listing and the read
                continue
            topics[listing.name] = {p.partition: PartitionRead(list(p.replicas), p.leader, list(p.isr))
                                    for p in desc.partitions}
            if listing.marked_for_deletion:
                deleting.add(listing.name)
        raw.brokers = {b.id: f"{b.endpoints[0].host}:{b.endpoints[0].port}" if b.endpoints else "?"
                       for b in brokers}
        raw.racks = {b.id: b.rack for b in brokers}
        raw.controller, raw.topics, raw.deleting = controller, topics, deleting
        raw.internal = set(topics) & set(INTERNAL_TOPICS)
        self._known.update(raw.brokers)

    def _from_metadata(self, raw: RawReads) -> None:
        """The brokers' metadata: the fallback for what ZooKeeper could not tell."""
        if raw.topics is not None:
            return
        cluster = self.admin.describe_cluster()
        raw.brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}
        raw.racks = {b["node_id"]: b["rack"] for b in cluster["brokers"]}
        raw.controller = cluster["controller_id"] if cluster["controller_id"] >= 0 else None
        raw.topics = {}
        for t in self.admin.describe_topics():
            raw.topics[t["topic"]] = {p["partition"]: PartitionRead(p["replicas"], p["leader"] if p["leader"] >= 0
                                                                    else None, p["isr"]) for p in t["partitions"]}
            if t["is_internal"]:
                raw.internal.add(t["topic"])
        self._known.update(raw.brokers)

    def _log_dirs(self, raw: RawReads) -> None:
        """DescribeLogDirs of each registered broker; one that does not answer is unreachable."""
        for b in sorted(raw.brokers or {}):
            try:
                dirs = self.admin.describe_log_dirs([b])[b]
            except Exception as exc:  # noqa: BLE001
                raw.unreachable[b] = _error(exc)
                continue
            raw.sizes[b] = {(p["topic"], p["partition"]): p["size"]
                            for d in dirs if d["error"] is None for p in d["partitions"] if not p["is_future"]}

    def _offsets(self, raw: RawReads) -> None:
        """Log start and end offsets (ListOffsets) of every partition whose leader answers,
        asked leader by leader so that one broker's trouble costs only its partitions."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic, parts in (raw.topics or {}).items():
            for p, part in parts.items():
                if part.leader is not None and part.leader in (raw.brokers or {}) \
                        and part.leader not in raw.unreachable:
                    by_leader.setdefault(part.leader, []).append(TopicPartition(topic, p))
        failed = []
        timeout, backoff = self.config["request.timeout.ms"] / 1000.0, 0.1
        for leader, tps in sorted(by_leader.items()):
            try:
                start = list_offsets(self._cluster, self._pool, {tp: -2 for tp in tps}, 0, timeout, backoff)
                end = list_offsets(self._cluster, self._pool, {tp: -1 for tp in tps}, 0, timeout, backoff)
            except Exception as exc:  # noqa: BLE001
                failed.append(f"broker {leader}: {_error(exc)}")
                continue
            for tp in tps:
                if tp in start and tp in end:
                    raw.offsets[(tp.topic, tp.partition)] = (start[tp][0], end[tp][0])
        if failed:
            raw.errors["offsets"] = "; ".join(failed)

    def _consumer_groups(self, raw: RawReads) -> None:
        try:
            self._groups = [g for g, _ in self.admin.list_consumer_groups()]
        except Exception as exc:  # noqa: BLE001 - the groups seen last time are still described
            raw.errors["consumer groups"] = f"listing: {_error(exc)}"
        groups, failed = [], []
        for gid in self._groups:
            try:
                [desc] = self.admin.describe_consumer_groups([gid])
                committed = self.admin.list_consumer_group_offsets(gid)
            except Exception as exc:  # noqa: BLE001
                failed.append(f"{gid}: {_error(exc)}")
                continue
            if desc.state == "Dead":
                continue
            groups.append(GroupRead(gid, desc.state, desc.protocol, desc.coordinator,
                                    [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                                      "assignment": [(tp.topic, tp.partition) for tp in m.assignment]}
                                     for m in desc.members],
                                    {(tp.topic, tp.partition): o.offset for tp, o in committed.items()}))
        raw.groups = groups
        if failed:
            raw.errors["consumer groups"] = "; ".join(failed)

    def _reassignments(self, raw: RawReads) -> None:
        raw.reassignments = {(tp.topic, tp.partition): r
                             for tp, r in self.admin.list_partition_reassignments().items()}

    def _metrics(self, raw: RawReads) -> None:
        """Each broker's throughput from its Prometheus endpoint (``metrics.host``:``metrics.port``
        from DescribeConfigs; none when ``metrics.port`` is unset)."""
        now = time.monotonic()
        for b, address in sorted((raw.brokers or {}).items()):
            if b in raw.unreachable:
                raw.throughput[b] = {"endpoint": None, "error": "broker unreachable", "series": {}}
                continue
            cached = self._endpoints.get(b)
            if cached is None or now - cached[0] > ENDPOINT_TTL:
                cached = (now, *self._endpoint(b, address.rpartition(":")[0]))
                self._endpoints[b] = cached
            _, url, why = cached
            series = self._series.setdefault(b, RateSeries())
            if url is None:
                raw.throughput[b] = {"endpoint": None, "error": why, "series": {}}
                continue
            try:
                series.feed(time.monotonic(), broker_totals(self._scrape(url)))
                error = None
            except Exception as exc:  # noqa: BLE001
                error = _error(exc)
            raw.throughput[b] = {"endpoint": url, "error": error, "series": series.as_json()}

    def _endpoint(self, broker: int, host: str) -> tuple[str | None, str | None]:
        try:
            entries = self.admin.describe_configs([("broker", str(broker))])[("broker", str(broker))]
        except Exception as exc:  # noqa: BLE001
            return None, f"DescribeConfigs: {_error(exc)}"
        if isinstance(entries, Exception):
            return None, f"DescribeConfigs: {entries}"
        values = {e.name: e.value for e in entries}
        port = values.get("metrics.port")
        if not port:
            return None, "metrics.port is not set on this broker"
        if str(port) == "0":
            return None, "metrics.port is 0 (any free port): its bound port is not published"
        mhost = values.get("metrics.host")
        if not mhost or mhost in ("0.0.0.0", "::"):   # bound on every address: reach it as the broker
            mhost = host
        return f"http://{mhost}:{port}/metrics", None

    def close(self) -> None:
        self.admin.close()
        self._pool.close()
        self._cluster.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None


def http_get(url: str, timeout: float = 2.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - http:// of a broker
        return resp.read().decode("utf-8", "replace")
