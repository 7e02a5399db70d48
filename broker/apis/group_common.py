"""What the group API handlers share: the coordinator lookup, and
the client address as Kafka formats it.

Invariant: a handler reaches the group coordinator only through ``coordinator(ctx)``,
which is None until the broker started it (handlers then answer
COORDINATOR_NOT_AVAILABLE, as Kafka does before its coordinator is up). Not a
handler module (it is not listed in the registry).
"""
from __future__ import annotations

from odradek.broker.group import GroupCoordinator

from .context import BrokerContext, RequestContext


def coordinator(ctx: BrokerContext) -> GroupCoordinator | None:
    """The broker's running GroupCoordinator, or None (not started / shut down)."""
    coord = ctx.group_coordinator
    return coord if coord is not None and coord.active else None


def client_host(rc: RequestContext) -> str:
    """Kafka's ``InetAddress.toString`` of the peer without a hostname: ``/127.0.0.1``."""
    peer = rc.peer or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer   # the network layer gives "host:port"
    return "/" + host.strip("[]")


def client_id(rc: RequestContext) -> str:
    return rc.client_id or ""
