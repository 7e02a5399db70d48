"""Leader election algorithms of the classic controller (Kafka 2.8 Election.scala).

Invariant: pure functions of (assignment, isr, live replicas, ...); the
assignment order decides ties (the first replica is the preferred leader).
``NO_LEADER`` (-1) is what the state znode holds when nobody can lead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

NO_LEADER = -1
LEADER_DURING_DELETE = -2   # what UpdateMetadata announces for topics being deleted


@dataclass(frozen=True)
class ElectionResult:
    leader: int | None          # None: no eligible leader
    isr: list[int]
    unclean: bool = False


def initial_leader_and_isr(assignment: Sequence[int], live: Collection[int]) -> ElectionResult:
    """New partition: leader = first live replica, isr = all live replicas (assignment order)."""
    live_replicas = [r for r in assignment if r in live]
    return ElectionResult(live_replicas[0] if live_replicas else None, live_replicas)


def offline_partition_leader_election(assignment: Sequence[int], isr: Sequence[int],
                                      live: Collection[int], unclean_enabled: bool
                                      ) -> ElectionResult:
    """First live in-ISR replica; else (unclean only) the first live replica with isr [leader]."""
    for r in assignment:
        if r in live and r in isr:
            return ElectionResult(r, [b for b in isr if b in live])
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return ElectionResult(r, [r], unclean=True)
    return ElectionResult(None, list(isr))


def preferred_replica_partition_leader_election(assignment: Sequence[int], isr: Sequence[int],
                                                live: Collection[int]) -> ElectionResult:
    """Only ``assignment[0]``, and only if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return ElectionResult(assignment[0], list(isr))
    return ElectionResult(None, list(isr))


def controlled_shutdown_partition_leader_election(assignment: Sequence[int], isr: Sequence[int],
                                                  live: Collection[int],
                                                  shutting_down: Collection[int]
                                                  ) -> ElectionResult:
    """First live in-ISR replica not shutting down; the new ISR drops shutting-down brokers."""
    new_isr = [r for r in isr if r not in shutting_down]
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return ElectionResult(r, new_isr)
    return ElectionResult(None, list(isr))


def reassign_partition_leader_election(target: Sequence[int], isr: Sequence[int],
                                       live: Collection[int]) -> ElectionResult:
    """First target replica that is live and in the ISR."""
    for r in target:
        if r in live and r in isr:
            return ElectionResult(r, list(isr))
    return ElectionResult(None, list(isr))


def remove_replica_from_isr(leader: int, isr: Sequence[int], replica: int) -> tuple[int, list[int]]:
    """(new leader, new isr) once ``replica`` goes offline; the last ISR member is kept."""
    new_isr = list(isr) if len(isr) == 1 else [r for r in isr if r != replica]
    new_leader = NO_LEADER if leader == replica else leader
    return new_leader, new_isr
