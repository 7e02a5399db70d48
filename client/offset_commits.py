"""The offset half of the consumer's group coordinator: OffsetCommit (sync and async) and
OffsetFetch on top of group membership (``AbstractCoordinator``), the base of
``ConsumerCoordinator`` (``client/coordinator.py``).

Invariant: a commit carries the current generation when the consumer subscribed (none for
manual assignment) and is refused locally while the group rebalances; a commit error that
means the member was fenced resets the generation before ``CommitFailedError`` is raised;
OffsetFetch asks with ``require_stable`` and retries UNSTABLE_OFFSET_COMMIT and coordinator
errors until the deadline; async commits complete their callbacks on the consumer's thread.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

from odradek.protocol.apis import offset_commit as _offset_commit
from odradek.protocol.apis import offset_fetch as _offset_fetch
from odradek.protocol.errors import ErrorCode, KafkaError

from .group_membership import (COORDINATOR_ERRORS, NO_GENERATION, RESET_ERRORS, AbstractCoordinator, Generation,
                               MemberState)
from .structs import CommitFailedError, KafkaTimeoutError, OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)


def offsets_body(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[dict[str, Any]]:
    """OffsetCommit ``topics`` for {tp: OffsetAndMetadata}."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, om in offsets.items():
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "commit_timestamp": -1,
            "committed_metadata": om.metadata or ""})
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


class OffsetCommits(AbstractCoordinator):
    """OffsetCommit and OffsetFetch for a group member."""

    # -- offsets ---------------------------------------------------------------------------

    def _commit_body(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], generation: Generation) -> dict:
        return {"group_id": self.group_id, "generation_id": generation.generation_id,
                "member_id": generation.member_id, "group_instance_id": self.group_instance_id,
                "retention_time_ms": -1, "topics": offsets_body(offsets)}

    def _commit_generation(self, subscribed: bool) -> Generation:
        if not subscribed:
            return NO_GENERATION
        with self._lock:
            if self.generation.generation_id < 0:
                raise CommitFailedError(ErrorCode.UNKNOWN_MEMBER_ID, "not a member of the group (yet)")
            if self.state == MemberState.REBALANCING:
                raise CommitFailedError(ErrorCode.REBALANCE_IN_PROGRESS,
                                        "the group is rebalancing; commit after the next poll()")
            return self.generation

    def _commit_errors(self, resp: Any) -> dict[TopicPartition, ErrorCode]:
        return {TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
                for t in resp.topics for p in t.partitions if p.error_code != ErrorCode.NONE}

    def _raise_commit_error(self, code: ErrorCode, tp: TopicPartition) -> None:
        if code in RESET_ERRORS or code == ErrorCode.FENCED_INSTANCE_ID:
            self.reset_generation(code)
            raise CommitFailedError(code, "commit cannot be completed: the group rebalanced and assigned the "
                                          "partitions to another member (consider max.poll.interval.ms)")
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin()
            raise CommitFailedError(code, "commit failed: the group is rebalancing")
        raise KafkaError(code, f"OffsetCommit {tp.topic}-{tp.partition}")

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], subscribed: bool,
                    timeout: float) -> None:
        """Commit ``offsets``, retrying coordinator errors until ``timeout``."""
        if not offsets:
            return
        deadline = time.monotonic() + timeout
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while True:
            generation = self._commit_generation(subscribed)
            try:
                resp = self._request(_offset_commit, self._commit_body(offsets, generation), deadline)
                errors = self._commit_errors(resp)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                errors = {tp: exc.code for tp in offsets}
            retry = False
            for tp, code in errors.items():
                if code in COORDINATOR_ERRORS:
                    self.mark_coordinator_dead(code.name)
                    retry = True
                elif code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNSTABLE_OFFSET_COMMIT):
                    retry = True
                else:
                    self._raise_commit_error(code, tp)
            if not retry:
                return
            if time.monotonic() + backoff >= deadline:
                raise KafkaTimeoutError(f"offset commit for group {self.group_id!r} timed out")
            time.sleep(backoff)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], subscribed: bool,
                     callback: Callable[[dict, Exception | None], None] | None) -> None:
        """Send an OffsetCommit; ``callback(offsets, error)`` runs on a later poll/commit/close."""
        offsets = dict(offsets)

        def done(error: Exception | None) -> None:
            if callback is not None:
                try:
                    callback(offsets, error)
                except Exception:  # a user callback must not break the consumer
                    log.exception("commit callback raised")
            elif error is not None:
                log.warning("group %s: async commit failed: %s", self.group_id, error)

        if not offsets:
            done(None)
            return
        try:
            generation = self._commit_generation(subscribed)
            if not self.ensure_coordinator(time.monotonic() + self.config["request.timeout.ms"] / 1000.0):
                raise KafkaTimeoutError(f"coordinator of group {self.group_id!r} not available")
            conn = self._conn
            assert conn is not None
            version = conn.version_for(_offset_commit, _offset_commit.MAX_VERSION)
        except KafkaError as exc:
            done(exc)
            return

        def on_response(resp: Any, err: KafkaError | None) -> None:
            if err is not None:
                self.mark_coordinator_dead(err)
                done(err)
                return
            for tp, code in self._commit_errors(resp).items():
                if code in COORDINATOR_ERRORS:
                    self.mark_coordinator_dead(code.name)
                    done(KafkaError(code, "async commit"))
                    return
                try:
                    self._raise_commit_error(code, tp)
                except KafkaError as exc:
                    done(exc)
                    return
            done(None)

        try:
            conn.send(_offset_commit, self._commit_body(offsets, generation), version=version, callback=on_response)
        except KafkaError as exc:
            self.mark_coordinator_dead(exc)
            done(exc)

    def flush_async(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for in-flight async commits to complete."""
        deadline = time.monotonic() + timeout
        while self._conn is not None and self._conn.in_flight and time.monotonic() < deadline:
            self._wait(deadline - time.monotonic())

    def fetch_committed(self, partitions: list[TopicPartition], timeout: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (None where nothing is committed), retrying coordinator errors."""
        if not partitions:
            return {}
        deadline = time.monotonic() + timeout
        backoff = self.config["retry.backoff.ms"] / 1000.0
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        # require_stable (OffsetFetch v7+), as Kafka's consumer always asks: offsets a transaction
        # committed whose markers are not written yet answer UNSTABLE_OFFSET_COMMIT, and we retry
        body = {"group_id": self.group_id, "require_stable": True,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        while True:
            try:
                resp = self._request(_offset_fetch, body, deadline)
                code = ErrorCode(resp.error_code or 0)
                if code == ErrorCode.NONE:
                    out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in partitions}
                    retry = False
                    for t in resp.topics:
                        for p in t.partitions:
                            tp = TopicPartition(t.name, p.partition_index)
                            pcode = ErrorCode(p.error_code)
                            if pcode in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                                if p.committed_offset >= 0:
                                    out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                                p.committed_leader_epoch)
                            elif pcode.retriable:
                                retry = True
                            else:
                                raise KafkaError(pcode, f"OffsetFetch {tp.topic}-{tp.partition}")
                    if not retry:
                        return out
                elif code in COORDINATOR_ERRORS:
                    self.mark_coordinator_dead(code.name)
                elif not code.retriable:
                    raise KafkaError(code, f"OffsetFetch for group {self.group_id!r}")
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, KafkaTimeoutError):
                    raise
            if time.monotonic() + backoff >= deadline:
                raise KafkaTimeoutError(f"OffsetFetch for group {self.group_id!r} timed out")
            time.sleep(backoff)

