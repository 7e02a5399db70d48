"""A loopback TCP proxy layer the test controls: cut, block and delay links between processes.

Invariant: every proxy listens on 127.0.0.1 only and forwards to one 127.0.0.1 target; all of
them run on one asyncio loop in one daemon thread owned by a ``ProxyLayer``. A proxy forwards
bytes unchanged and in order; with a delay of D ms each chunk is written D ms after it was read
(latency, not a bandwidth cap). A blocked proxy (``block()``, or ``block(source)`` for the
connections a given source process opened) closes the matching open connections at once and
refuses new ones until unblocked: what a network partition looks like to both ends (a reset,
then connection failures). The source of a connection is the process owning the connecting
socket, found in /proc (Linux, no root needed), so one proxy in front of a broker can cut just
the links one other broker opened to it.
"""
from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Callable

HOST = "127.0.0.1"
CHUNK = 65536


def socket_owner(peer_port: int, local_port: int, candidates: dict[str, int]) -> str | None:
    """The key in ``candidates`` (name -> pid) whose process owns the loopback TCP socket
    ``127.0.0.1:peer_port -> 127.0.0.1:local_port``, or None."""
    inode = None
    want = f":{peer_port:04X}", f":{local_port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[1].endswith(want[0]) and fields[2].endswith(want[1]):
                inode = fields[9]
                break
        if inode:
            break
    if not inode or inode == "0":
        return None
    target = f"socket:[{inode}]"
    for name, pid in candidates.items():
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return name
                except OSError:
                    continue
        except OSError:
            continue
    return None


class Proxy:
    """One listening port forwarding to ``target_port``; state changed through its ``ProxyLayer``."""

    def __init__(self, layer: "ProxyLayer", name: str, target_port: int):
        self.layer, self.name, self.target_port = layer, name, target_port
        self.port = 0
        self.delay = 0.0                      # seconds added to every chunk, both directions
        self.blocked_all = False
        self.blocked_sources: set[str] = set()
        self._server: asyncio.AbstractServer | None = None
        self._conns: dict[asyncio.StreamWriter, tuple[int, asyncio.StreamWriter]] = {}  # peer port
        self._serving: set[asyncio.Task] = set()   # one task per accepted connection, until it ends

    def _refused(self, source: str | None) -> bool:
        return self.blocked_all or (source is not None and source in self.blocked_sources)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        try:
            await self._forward(reader, writer)
        finally:
            self._serving.discard(task)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked_all:
            _abort(writer)
            return
        peer_port = writer.get_extra_info("peername")[1]
        source = self._source(peer_port) if self.blocked_sources else None
        if self._refused(source):
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(HOST, self.target_port)
        except OSError:
            _abort(writer)
            return
        self._conns[writer] = (peer_port, up_writer)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._conns.pop(writer, None)
            _abort(writer)
            _abort(up_writer)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def write() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        writing = asyncio.ensure_future(write())
        try:
            while True:
                data = await reader.read(CHUNK)
                queue.put_nowait((loop.time() + self.delay, data))
                if not data or writing.done():
                    break
            await writing
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writing.cancel()
            await asyncio.wait([writing])   # its cancellation runs before the pump ends
            _abort(writer)

    def _source(self, peer_port: int) -> str | None:
        """Which source process opened the connection from ``peer_port`` (looked up only when
        some source is blocked: the common path costs nothing)."""
        return socket_owner(peer_port, self.port, self.layer.sources())

    def _cut_matching(self) -> None:
        for client, (peer_port, upstream) in list(self._conns.items()):
            if self.blocked_all or self._refused(self._source(peer_port)):
                _abort(client)
                _abort(upstream)

    async def _close(self) -> None:
        """Stop listening, cut every connection and wait until their tasks have ended (a task
        still pending when the loop stops is destroyed pending, which asyncio reports at exit)."""
        if self._server is not None:
            self._server.close()
        self.blocked_all = True
        self._cut_matching()
        if self._serving:
            _, left = await asyncio.wait(list(self._serving), timeout=10)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=10)


def _abort(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if not transport.is_closing():
        transport.abort()


class ProxyLayer:
    """Proxies on one event loop thread. ``sources()`` names the processes (name -> pid) whose
    connections a proxy can tell apart (default: none)."""

    def __init__(self, sources: Callable[[], dict[str, int]] | None = None):
        self.sources: Callable[[], dict[str, int]] = sources or dict
        self.proxies: dict[str, Proxy] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="odradek-proxies", daemon=True)
        self._thread.start()

    def _call(self, fn: Callable[[], object]) -> None:
        async def run() -> None:
            fn()
        asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    def add(self, name: str, target_port: int) -> Proxy:
        """A new proxy ``name`` listening on a free port (``.port``) forwarding to ``target_port``."""
        proxy = Proxy(self, name, target_port)
        asyncio.run_coroutine_threadsafe(proxy._start(), self._loop).result(30)
        self.proxies[name] = proxy
        return proxy

    def block(self, proxy: Proxy, source: str | None = None) -> None:
        """Cut and refuse every connection through ``proxy`` (or only those ``source`` opens)."""
        def apply() -> None:
            if source is None:
                proxy.blocked_all = True
            else:
                proxy.blocked_sources.add(source)
            proxy._cut_matching()
        self._call(apply)

    def unblock(self, proxy: Proxy, source: str | None = None) -> None:
        def apply() -> None:
            if source is None:
                proxy.blocked_all = False
                proxy.blocked_sources.clear()
            else:
                proxy.blocked_sources.discard(source)
        self._call(apply)

    def set_delay(self, proxy: Proxy, ms: float) -> None:
        def apply() -> None:
            proxy.delay = ms / 1000.0
        self._call(apply)

    def close(self) -> None:
        """Close every proxy and its connections, then stop the loop thread."""
        async def close_all() -> None:
            for proxy in self.proxies.values():
                await proxy._close()
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()
