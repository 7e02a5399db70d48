"""What group members share, the consumer's coordinator and Kafka Connect's workers alike:
the generation, the member states, the error classes and finding the coordinator.

Invariant: ``find_coordinator`` asks a random known broker and retries retriable errors
(refreshing metadata) until its deadline, so a member always talks to the broker the
group's ``__consumer_offsets`` partition leader is, or fails with a timeout naming the
group; a ``Generation`` is immutable and ``NO_GENERATION`` is what a member without one
commits with.
"""
from __future__ import annotations

import enum
import random
import time
from typing import NamedTuple

from odradek.protocol.apis import find_coordinator as _find_coordinator
from odradek.protocol.errors import ErrorCode, KafkaError

from .cluster import ClusterMetadata, NodePool
from .structs import KafkaTimeoutError

COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})
RESET_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})
class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"



def find_coordinator(cluster: ClusterMetadata, pool: NodePool, group_id: str,
                     timeout: float) -> tuple[int, str, int]:
    """(node_id, host, port) of ``group_id``'s coordinator; retries retriable errors until ``timeout``."""
    deadline = time.monotonic() + timeout
    backoff = cluster.config["retry.backoff.ms"] / 1000.0
    last: KafkaError | None = None
    while True:
        try:
            if not cluster.brokers:
                cluster.refresh([])
            node = random.choice(sorted(cluster.brokers))
            conn = pool.get(node)
            version = conn.version_for(_find_coordinator, _find_coordinator.MAX_VERSION)
            resp = conn.request(_find_coordinator, {"key": group_id, "key_type": 0}, version=version)
            if resp.error_code == ErrorCode.NONE:
                return resp.node_id, resp.host, resp.port
            err = KafkaError(resp.error_code, f"FindCoordinator for group {group_id!r}"
                             + (f": {resp.error_message}" if getattr(resp, "error_message", None) else ""))
            if not err.retriable:
                raise err
            last = err
        except KafkaError as exc:
            if not exc.retriable:
                raise
            last = exc
            cluster.request_update()
        if time.monotonic() + backoff >= deadline:
            raise KafkaTimeoutError(f"coordinator of group {group_id!r} not found ({last})")
        time.sleep(backoff)
