"""Metadata answers built once per metadata-cache version and reused (issue 17).

Invariant: what this module hands out equals what MetadataResponse's schema encodes for the
dicts ``metadata.topic_metadata`` builds from the cache at the moment of the request. A topic's
entry (its dict and, once asked, its encoded bytes) is kept per (listener, request version) and
used only while the cache's ``brokers_version`` and the topic's ``topic_stamp`` are those it was
built at (both move at every UpdateMetadata that changes them), so an answer never lags the
cache; the answer's head (throttle 0, the brokers on the listener, cluster id, controller id) is
kept per (brokers version, controller, cluster id, listener, version). A body is assembled as
head + topic count + topic elements + tail; only what depends on the request (which topics, the
principal's topic_authorized_operations, the cluster's operations, errors) is computed per
request. Entries are dicts the caller must not change (it copies one to add operations).
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Callable

from odradek.protocol.apis import metadata as API
from odradek.protocol.header import EncodedBody
from odradek.protocol.primitives import encode_uvarint

from ..metadata_cache import MetadataCache
from .authz import NO_OPERATIONS

_I32 = struct.Struct(">i")
_TopicEntry = tuple[int, dict, list]        # (topic stamp, topic dict, [its encoded element or none yet])


def _flexible(version: int) -> bool:
    return version >= 9


def _tail_length(version: int) -> int:
    """Bytes after the topics array: cluster_authorized_operations (v8-10), then the tag section."""
    return (4 if 8 <= version <= 10 else 0) + (1 if _flexible(version) else 0)


def _array_count(n: int, version: int) -> bytes:
    return encode_uvarint(n + 1) if _flexible(version) else _I32.pack(n)


_BLANK = {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1, "topics": []}


@lru_cache(maxsize=None)
def _blank(version: int) -> bytes:
    return API.Response.encode(_BLANK, version)


def encode_topic(topic: dict, version: int) -> bytes:
    """One topic element of a MetadataResponse at ``version``, as the schema encodes it."""
    blank = _blank(version)
    one = API.Response.encode({**_BLANK, "topics": [topic]}, version)
    tail = _tail_length(version)
    return one[len(blank) - tail:len(one) - tail]


class MetadataAnswers:
    """The encoded pieces of this broker's Metadata answers, per listener and request version."""

    def __init__(self, cache: MetadataCache):
        self.cache = cache
        self._topics: dict[tuple[str, int], dict[str, _TopicEntry]] = {}
        self._brokers_version = -1
        self._topics_version = 0
        self._heads: dict[tuple, bytes] = {}

    def _entries(self, listener: str, version: int) -> dict[str, _TopicEntry]:
        if self._brokers_version != self.cache.brokers_version:
            self._topics.clear()
            self._heads.clear()
            self._brokers_version = self.cache.brokers_version
        if self._topics_version != self.cache.topics_version:   # deleted topics' pieces go
            for kept in self._topics.values():
                for name in [n for n in kept if not self.cache.contains_topic(n)]:
                    del kept[name]
            self._topics_version = self.cache.topics_version
        key = (listener, version)
        entries = self._topics.get(key)
        if entries is None:
            entries = self._topics[key] = {}
        return entries

    def topic(self, name: str, listener: str, version: int,
              build: Callable[[MetadataCache, str, str, int], dict]) -> dict:
        """The (shared, read-only) dict of a topic the cache knows, built by ``build`` once per stamp."""
        entries = self._entries(listener, version)
        stamp = self.cache.topic_stamp(name)
        entry = entries.get(name)
        if entry is None or entry[0] != stamp:
            entry = entries[name] = (stamp, build(self.cache, name, listener, version), [])
        return entry[1]

    def _encoded(self, topic: dict, listener: str, version: int) -> bytes:
        entry = self._entries(listener, version).get(topic["name"])
        if entry is None or entry[1] is not topic:   # an error answer: encoded for this request only
            return encode_topic(topic, version)
        if not entry[2]:
            entry[2].append(encode_topic(topic, version))
        return entry[2][0]

    def head(self, listener: str, version: int, brokers: Callable[[], list[dict]]) -> bytes:
        """throttle_time_ms (0), brokers, cluster_id and controller_id, encoded."""
        self._entries(listener, version)
        cache = self.cache
        controller = cache.controller_id if cache.controller_id is not None else -1
        key = (controller, cache.cluster_id, listener, version)
        head = self._heads.get(key)
        if head is None:
            fields = {**_BLANK, "brokers": brokers(), "cluster_id": cache.cluster_id, "controller_id": controller}
            whole = API.Response.encode(fields, version)
            head = self._heads[key] = whole[:len(whole) - _tail_length(version) - len(_array_count(0, version))]
        return head

    def body(self, listener: str, version: int, brokers: Callable[[], list[dict]], topics: list[dict],
             cluster_operations: int = NO_OPERATIONS) -> EncodedBody:
        """The whole response body: ``topics`` are entries of ``topic`` (reused as bytes) or dicts
        of this request (error answers, or copies carrying topic_authorized_operations)."""
        parts = [self.head(listener, version, brokers), _array_count(len(topics), version)]
        for t in topics:
            encoded = self._encoded(t, listener, version) if "topic_authorized_operations" not in t \
                else self._with_operations(t, listener, version)
            parts.append(encoded)
        if 8 <= version <= 10:
            parts.append(_I32.pack(cluster_operations))
        if _flexible(version):
            parts.append(b"\x00")
        return EncodedBody(b"".join(parts))

    def _with_operations(self, topic: dict, listener: str, version: int) -> bytes:
        """A topic's element with its topic_authorized_operations (v8+: the last field, before
        the tag section): the shared element's bytes with those four replaced."""
        ops = topic["topic_authorized_operations"]
        entry = self._entries(listener, version).get(topic["name"])
        shared: Any = entry[1] if entry is not None else None
        if version < 8 or shared is None or any(shared[k] is not topic[k] for k in shared):
            return encode_topic(topic, version)
        element = self._encoded(shared, listener, version)
        end = len(element) - (1 if _flexible(version) else 0)
        return element[:end - 4] + _I32.pack(ops) + element[end:]
