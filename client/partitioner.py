"""The Java client's default partitioner: murmur2 for keys, KIP-480 sticky for null keys.

Invariant: a keyed record lands on the partition the Java producer (2.4+) picks,
``(murmur2(key) & 0x7fffffff) % num_partitions``, so odradek producers and Java
producers agree on key placement. murmur2 returns Java's signed 32-bit int.
"""
from __future__ import annotations

import random
import struct
from typing import Sequence

_M32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit signed result, as Java computes it."""
    length = len(data)
    h = (_SEED ^ length) & _M32
    words = length >> 2
    m = _M
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * m) & _M32
        k ^= k >> _R
        k = (k * m) & _M32
        h = ((h * m) & _M32) ^ k
    tail = length & 3
    base = length & ~3
    if tail:
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * m) & _M32
    h ^= h >> 13
    h = (h * m) & _M32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clears the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Java's DefaultPartitioner picks for a non-null ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """DefaultPartitioner of Java 2.4-3.2: murmur2 for keys, a sticky partition per topic otherwise.

    A null-keyed record goes to the topic's sticky partition, drawn at random
    among the available partitions (among all of them when none is available).
    The producer calls ``on_new_batch`` when it has to start a new batch for the
    sticky partition; the next null-keyed record then moves to a different
    partition (the same one only if it is the sole available choice).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self.current: dict[str, int] = {}       # topic -> its sticky partition (read in place by the producer)
        self._leaving: dict[str, int] = {}  # topic -> partition to move away from
        self._rng = rng or random.Random()

    def partition(self, topic: str, key: bytes | None, all_partitions: Sequence[int],
                  available_partitions: Sequence[int]) -> int:
        """The partition (an id from ``all_partitions``) for a record of ``topic`` with ``key``."""
        if key is not None:
            return partition_for_key(key, len(all_partitions))
        current = self.current.get(topic)
        if current is not None:
            return current
        new = self._draw(self._leaving.pop(topic, None), all_partitions, available_partitions)
        self.current[topic] = new
        return new

    def on_new_batch(self, topic: str, previous_partition: int) -> None:
        """A new batch starts on ``previous_partition``: leave it if it is still the sticky one."""
        if self.current.get(topic) == previous_partition:
            del self.current[topic]
            self._leaving[topic] = previous_partition

    def _draw(self, old: int | None, all_partitions: Sequence[int],
              available_partitions: Sequence[int]) -> int:
        rng = self._rng
        if not available_partitions:
            return all_partitions[rng.randrange(len(all_partitions))]
        if len(available_partitions) == 1:
            return available_partitions[0]
        new = old
        while new is None or new == old:
            new = available_partitions[rng.randrange(len(available_partitions))]
        return new
