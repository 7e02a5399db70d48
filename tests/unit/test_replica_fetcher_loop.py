"""The replica fetcher's loop yields to the reactor when none of its partitions is still followed.

A LeaderAndIsr that makes this broker leader of a partition (or moves it to a newer epoch)
leaves a stale fetch state behind until the replica manager removes it; the loop must sleep
until it is woken instead of spinning on the reactor thread.
"""
from __future__ import annotations

from types import SimpleNamespace

from twisted.internet import task

from odradek.broker.replication.replica_fetcher import FetchStatus, PartitionFetchState, ReplicaFetcher

CONFIG = {"replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
          "replica.fetch.max.bytes": 1 << 20, "replica.fetch.response.max.bytes": 10 << 20,
          "replica.fetch.backoff.ms": 1000}


class LeaderNow:
    """A replica manager whose partition has just become leader here."""

    def __init__(self) -> None:
        self.lookups = 0

    def get_partition(self, tp):
        self.lookups += 1
        if self.lookups > 10_000:
            raise AssertionError("the fetcher loop spins without yielding to the reactor")
        return SimpleNamespace(log=object(), is_leader=True, leader_epoch=1)


def test_loop_sleeps_when_no_partition_is_still_followed():
    rm = LeaderNow()
    clock = task.Clock()
    fetcher = ReplicaFetcher("f", 2, 1, CONFIG, rm, clock, SimpleNamespace(close=lambda: None))
    fetcher.partitions[("t", 0)] = PartitionFetchState(0, 0, FetchStatus.FETCHING)
    fetcher.start()            # returns: the loop is parked, not spinning
    assert rm.lookups < 10
    clock.advance(60)          # and no timer spins it either
    assert rm.lookups < 10
    fetcher.partitions.clear()
    fetcher.wake()             # woken by the replica manager (remove_partitions)
    assert rm.lookups < 10
