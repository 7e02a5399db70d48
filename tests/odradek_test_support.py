"""Helpers shared by conftest and test files of different test folders.

Invariant: a uniquely named module (tests/ is on sys.path for every conftest), so no
folder's ``import conftest`` can pick up another folder's conftest by accident.
"""
from __future__ import annotations

import pytest


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, that no outgoing connection can take (zk.ensemble.free_ports)."""
    from odradek.zk.ensemble import free_ports
    return free_ports(1, host)[0]


def _failed(request: pytest.FixtureRequest) -> bool:
    """True if the test owning ``request`` failed in setup or call (needs the report hook in tests/conftest.py)."""
    node = request.node
    return any(getattr(node, f"rep_{when}", None) is not None and getattr(node, f"rep_{when}").failed
               for when in ("setup", "call"))


def synced(client):
    """``client`` (a KazooClient) after ``sync("/")``: a session sees its own writes in order, but
    another session's (a broker's, a CLI's, another KazooClient's) only once the ZooKeeper server it
    reads from has applied them; after the sync it has applied every write completed before the call."""
    client.sync("/")
    return client
