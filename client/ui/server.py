"""``odradek ui``: the Twisted Web shell serving the page and the live snapshot.

Invariant: the reactor never blocks — every read runs in ``Collector.collect`` on the thread
pool, one cycle at a time, and the page is served the last finished snapshot; a failed cycle
is shown on the page and the next one starts anyway, so the server outlives any broker or
ZooKeeper outage. It binds 127.0.0.1 unless told otherwise and serves only GETs.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from twisted.internet import defer, task, threads
from twisted.internet import reactor as _reactor
from twisted.web import resource, server, static

from odradek.client.tools import ArgParser, ToolError, properties_file, resolve_bootstrap, run_tool

from .snapshot import RawReads, build

STATIC = Path(__file__).resolve().parent / "static"
reactor: Any = _reactor  # the global reactor, as its IReactor* interfaces


class SnapshotResource(resource.Resource):
    """``GET /api/snapshot``: the last snapshot as JSON, with its age."""
    isLeaf = True

    def __init__(self, service: "UiService") -> None:
        super().__init__()
        self.service = service

    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"application/json; charset=utf-8")
        request.setHeader(b"cache-control", b"no-store")
        body = {**self.service.snapshot, "age": round(time.time() - self.service.snapshot["taken_at"], 3),
                "cycle": self.service.cycles}
        return json.dumps(body, separators=(",", ":")).encode()


class UiService:
    """Runs the collection loop and holds the last snapshot."""

    def __init__(self, collector: Any, interval: float = 1.0) -> None:
        self.collector = collector
        self.interval = interval
        self.cycles = 0
        self.running = False
        self.snapshot: dict[str, Any] = build(RawReads(taken_at=time.time(),
                                                       zookeeper_connect=collector.zookeeper_connect,
                                                       errors={"ui": "first collection in progress"}))

    def site(self) -> server.Site:
        root = static.File(str(STATIC))
        api = resource.Resource()
        api.putChild(b"snapshot", SnapshotResource(self))
        root.putChild(b"api", api)
        return server.Site(root)

    async def run(self) -> None:
        self.running = True
        while self.running:
            try:
                raw = await threads.deferToThread(self.collector.collect)
                self.snapshot = build(raw)
            except Exception as exc:  # noqa: BLE001 - shown on the page; the loop goes on
                self.snapshot = {**self.snapshot, "errors": [{"source": "ui", "message": repr(exc)}]}
            self.cycles += 1
            await task.deferLater(reactor, self.interval, lambda: None)

    def stop(self) -> None:
        self.running = False


def bootstrap_from_zookeeper(connect: str) -> str:
    """The registered brokers' first endpoints, for when no bootstrap server is given."""
    from odradek.zk.admin import AdminOperationError, AdminZkClient, open_zk
    try:
        zk = open_zk(connect, timeout=10.0)
    except AdminOperationError as exc:
        raise ToolError(str(exc)) from None
    try:
        brokers = AdminZkClient(zk).live_brokers()
    finally:
        zk.stop()
        zk.close()
    if not brokers:
        raise ToolError(f"no broker is registered in ZooKeeper at {connect}; give --bootstrap-server")
    return ",".join(f"{b.endpoints[0].host}:{b.endpoints[0].port}" for b in brokers if b.endpoints)


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        ap = ArgParser(prog="odradek ui", description="a live, read-only web view of the cluster")
        ap.add_argument("--zookeeper", required=True, help="HOST:PORT[,HOST:PORT...][/chroot]")
        ap.add_argument("--bootstrap-server", dest="bootstrap_server",
                        help="default: $ODRADEK_BOOTSTRAP_SERVERS, ./data/cluster.json, else the brokers "
                             "registered in ZooKeeper")
        ap.add_argument("--port", type=int, default=8080)
        ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
        ap.add_argument("--command-config", dest="command_config",
                        help="client properties file (security.protocol, ssl.*, sasl.*)")
        ap.add_argument("--interval", type=float, default=1.0, help="seconds between two reads (default 1)")
        args = ap.parse_args(argv)
        try:
            bootstrap = resolve_bootstrap(args.bootstrap_server)
        except ToolError:
            bootstrap = bootstrap_from_zookeeper(args.zookeeper)
        config = {**properties_file(args.command_config), "bootstrap.servers": bootstrap}
        from .collector import Collector
        service = UiService(Collector(args.zookeeper, config), args.interval)
        try:
            port = reactor.listenTCP(args.port, service.site(), interface=args.host)
        except Exception as exc:  # CannotListenError
            raise ToolError(f"cannot listen on {args.host}:{args.port}: {exc}") from None
        bound: Any = port.getHost()
        print(f"odradek ui: http://{bound.host}:{bound.port}/ (ZooKeeper {args.zookeeper}, "
              f"bootstrap servers {bootstrap}; read-only)", flush=True)
        defer.Deferred.fromCoroutine(service.run())
        reactor.addSystemEventTrigger("before", "shutdown", service.stop)
        reactor.addSystemEventTrigger("after", "shutdown", service.collector.close)
        reactor.run()
        return 0

    return run_tool(body)
