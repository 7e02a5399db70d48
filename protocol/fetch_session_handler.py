"""Incremental fetch sessions (KIP-227), the fetcher's side: Kafka's ``FetchSessionHandler``.

Sans-IO. ``build(wanted)`` gives a Fetch request's session fields, topics and forgotten
topics for the partitions wanted now; ``handle_response`` is told how the answer went.

Invariant: the handler's ``sent`` is exactly the leader's view of the session. The first fetch,
and every fetch after the session is dropped, is a full one (epoch 0, every partition); after
it, a fetch names only partitions new or changed since the last fetch the leader accepted and
lists the ones no longer wanted as forgotten. The session is dropped (next fetch full) on a
top-level error, on an answer naming a partition not in the session, or on ``reset()`` (a lost
connection: the request may or may not have reached the leader).
"""
from __future__ import annotations

from typing import Any, Iterable

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0       # a full fetch: opens a session
FINAL_EPOCH = -1        # sessionless: closes the session named
INT32_MAX = 0x7FFFFFFF

TopicPartition = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1 after INITIAL, wrapping from INT32_MAX to 1."""
    return 1 if epoch in (INT32_MAX, INITIAL_EPOCH, FINAL_EPOCH) else epoch + 1


class FetchSessionHandler:
    """One fetcher's session with one leader."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, dict[str, Any]] = {}     # the leader's view: tp -> partition fields
        self._next: dict[TopicPartition, dict[str, Any]] = {}    # the view once the request in flight is accepted
        self._full = True                              # the request in flight is a full fetch

    def build(self, wanted: dict[TopicPartition, dict[str, Any]]) -> dict[str, Any]:
        """Session fields, ``topics`` and ``forgotten_topics_data`` of a Fetch request for
        ``wanted`` (tp -> its partition fields, "partition" included)."""
        self._next = dict(wanted)
        self._full = self.session_id == INVALID_SESSION_ID
        if self._full:
            named: Iterable[TopicPartition] = wanted
            forgotten: list[TopicPartition] = []
        else:
            named = [tp for tp, fields in wanted.items() if self.sent.get(tp) != fields]
            forgotten = [tp for tp in self.sent if tp not in wanted]
        return {"session_id": self.session_id, "session_epoch": self.epoch,
                "topics": _by_topic((tp, wanted[tp]) for tp in named),
                "forgotten_topics_data": _by_topic((tp, tp[1]) for tp in forgotten)}

    def handle_response(self, error_code: int, session_id: int, answered: Iterable[TopicPartition]) -> bool:
        """True if the answer can be used; False: the session is dropped and the answer's
        partitions are to be ignored (the next fetch is a full one)."""
        if error_code:
            self.reset()
            return False
        if self._full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else INITIAL_EPOCH
            self.sent = self._next
            return True
        if session_id != self.session_id or any(tp not in self._next for tp in answered):
            self.reset()
            return False
        self.epoch = next_epoch(self.epoch)
        self.sent = self._next
        return True

    def reset(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent = {}


def _by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> list[dict[str, Any]]:
    """[{"topic": t, "partitions": [each item's value, in order]}] per topic, in first-seen order."""
    topics: dict[str, list[Any]] = {}
    for tp, fields in items:
        topics.setdefault(tp[0], []).append(fields)
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]
