"""The metrics endpoint: ``http://<metrics.host>:<metrics.port>/metrics`` in Prometheus text format.

Invariant: served by twisted.web on the broker's reactor (no thread: the scrape reads reactor-owned
state, see ``broker/metrics_collector.py``), from the broker's own ``CollectorRegistry`` rendered by
prometheus_client (``choose_encoder``: Prometheus text, or OpenMetrics when the scraper asks for
it). Before rendering, the high watermarks of partitions some coordinated group committed on and
that another broker leads are asked of their leaders (ListOffsets, latest, read_uncommitted) with
a short timeout; a leader that does not answer in time only leaves its partitions without a lag
sample, the scrape is still answered. Any other path is 404. ``stop()`` closes the port and the
clients to the other brokers.
"""
from __future__ import annotations

import logging
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry
from twisted.internet import defer
from twisted.internet.error import CannotListenError
from twisted.web import resource, server

from odradek.protocol.apis import list_offsets

from .metrics_collector import BrokerCollector, TopicPartition, committed_partitions
from .network.broker_client import BrokerClient

log = logging.getLogger(__name__)

LATEST = -1
LIST_OFFSETS_VERSION = 2          # the first with isolation_level
REMOTE_TIMEOUT_MS = 2000          # a scrape never waits longer than this for another broker


class _Root(resource.Resource):
    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return b"odradek broker metrics: /metrics\n"


class _QuietSite(server.Site):
    def log(self, request: Any) -> None:   # no access-log line per scrape
        pass


class _Metrics(resource.Resource):
    isLeaf = True

    def __init__(self, endpoint: "MetricsEndpoint"):
        super().__init__()
        self.endpoint = endpoint

    def render_GET(self, request: Any) -> Any:
        accept = (request.getHeader(b"accept") or b"").decode("latin-1")
        d = defer.Deferred.fromCoroutine(self.endpoint.refresh_remote())
        finished = [False]
        request.notifyFinish().addBoth(lambda _: finished.__setitem__(0, True))

        def write(_: Any) -> None:
            if finished[0]:
                return
            encoder, content_type = choose_encoder(accept)
            try:
                body = encoder(self.endpoint.registry)
            except Exception:
                log.exception("rendering the metrics failed")
                request.setResponseCode(500)
                body = b"rendering the metrics failed\n"
                content_type = "text/plain; charset=utf-8"
            request.setHeader(b"content-type", content_type.encode())
            request.write(body)
            request.finish()
        d.addErrback(lambda f: log.warning("refreshing remote high watermarks failed: %s", f.getErrorMessage()))
        d.addCallback(write)
        return server.NOT_DONE_YET


class MetricsEndpoint:
    """One broker's /metrics: its registry, its HTTP port, its clients to the other leaders."""

    def __init__(self, broker: Any, reactor: Any, host: str, port: int):
        self.broker = broker
        self.reactor = reactor
        self.host, self.port = host, port
        self.latest: dict[TopicPartition, int] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, self.latest))
        self._clients: dict[tuple[str, int], BrokerClient] = {}
        self._listening: Any = None

    def start(self) -> int:
        """Listen; the port bound (the one asked for, or the OS's pick for 0)."""
        root = _Root()
        root.putChild(b"metrics", _Metrics(self))
        site = _QuietSite(root)
        site.noisy = False
        self._listening = self.reactor.listenTCP(self.port, site, interface=self.host)
        return self._listening.getHost().port

    async def stop(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self._listening is not None:
            await defer.maybeDeferred(self._listening.stopListening)
            self._listening = None

    # ------------------------------------------------------------ remote high watermarks

    async def refresh_remote(self) -> None:
        b = self.broker
        if b.group_service is None or b.replica_manager is None or b.metadata_cache is None:
            return
        rm, cache = b.replica_manager, b.metadata_cache
        wanted: dict[int, list[TopicPartition]] = {}
        for tp in committed_partitions(b.group_service.coordinator.manager.groups):
            p = rm.partitions.get(tp)
            if p is not None and p.is_leader:
                continue
            state = cache.partition_state(*tp)
            if state is None or state.leader < 0:
                self.latest.pop(tp, None)
                continue
            wanted.setdefault(state.leader, []).append(tp)
        asked = {tp for tps in wanted.values() for tp in tps}
        for tp in [tp for tp in self.latest if tp not in asked]:
            del self.latest[tp]
        asks = [self._ask(leader, tps) for leader, tps in wanted.items()]
        await defer.DeferredList(asks, consumeErrors=True)

    def _ask(self, leader: int, tps: list[TopicPartition]) -> defer.Deferred:
        b = self.broker
        endpoint = b.metadata_cache.endpoint(leader, b.config.inter_broker_listener_name)
        if endpoint is None:
            return defer.succeed(None)
        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = BrokerClient(
                self.reactor, endpoint[0], endpoint[1], f"broker-{b.broker_id}-metrics",
                request_timeout_ms=REMOTE_TIMEOUT_MS, security=b.inter_broker_security)
        topics: dict[str, list[dict]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append({"partition_index": partition, "timestamp": LATEST})
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        def answered(resp: Any) -> None:
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code == 0:
                        self.latest[(t.name, p.partition_index)] = p.offset
                    else:
                        self.latest.pop((t.name, p.partition_index), None)

        def failed(f: Any) -> None:
            for tp in tps:
                self.latest.pop(tp, None)
        return client.send(list_offsets, LIST_OFFSETS_VERSION, body).addCallbacks(answered, failed)


def start_metrics(broker: Any) -> MetricsEndpoint | None:
    """Turn metrics on for ``broker`` when ``metrics.port`` is set: counters handed to the replica
    manager, the listeners and the ZooKeeper session, then the endpoint listening. Called on the
    reactor once every part exists and before any request is handled; None when metrics are off."""
    from . import apis
    from .metrics import BrokerMetrics

    cfg = broker.config
    port = cfg["metrics.port"]
    if port is None:
        return None
    metrics = broker.metrics = BrokerMetrics({key: m.API.NAME for key, m in apis.HANDLERS.items()})
    broker.replica_manager.topic_stats = metrics.topic_stats
    for factory in broker.factories.values():
        factory.request_stats = metrics.request_stats
    broker.zk.kazoo.add_listener(metrics.zk_stats.on_state)
    host = cfg["metrics.host"]
    if host is None:
        host = cfg.listeners[0].host if cfg.listeners else ""
    endpoint = MetricsEndpoint(broker, broker.reactor, host or "", port)
    try:
        bound = endpoint.start()
    except CannotListenError as e:   # as for a listener: one line, and the broker does not start
        from .server import StartupError
        raise StartupError(f"Cannot bind the metrics endpoint {host or '0.0.0.0'}:{port}: {e.socketError}") from None
    log.info("metrics at http://%s:%d/metrics", host or "0.0.0.0", bound)
    endpoint.port = bound
    return endpoint
