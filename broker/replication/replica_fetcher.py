"""Replica fetchers: followers pull their partitions from the leaders (classic path).

Invariant: a follower partition is in at most one fetcher — the one for its
leader and ``fetcher_id(tp)`` (Kafka's ``AbstractFetcherManager``) — and only while
this broker follows it at the leader epoch the fetcher was given. Each partition
is first TRUNCATING (OffsetForLeaderEpoch v3 with its latest epoch, or to its HW
when it has no epochs; ``truncation_offset`` is Kafka's
``getOffsetTruncationState``), then FETCHING (Fetch v11 with replica_id and
current_leader_epoch, in an incremental fetch session: ``protocol/fetch_session_handler.py``):
data is appended only at the follower's LEO, its HW becomes min(leader HW, LEO); a partition
the leader's answer leaves out had nothing new. Errors delay a partition by replica.fetch.backoff.ms;
FENCED_LEADER_EPOCH removes it until the next LeaderAndIsr, and so does a fetched
batch that fails validation (``broker/log/validator.py``; never appended, logged as an
error naming partition and offset); OFFSET_OUT_OF_RANGE
asks the leader for its LEO / log start (ListOffsets) and truncates
(``out_of_range_action``). A response is applied only if the partition's state
is still the one the request was built from. The decisions are plain functions
and the fetcher runs on any ``callLater``/``seconds`` scheduler with an injected
client (``send(api, version, body) -> Deferred``), so it is testable on a Clock.
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from twisted.internet import defer

from odradek.protocol.apis import fetch as fetch_api
from odradek.protocol.apis import list_offsets as list_offsets_api
from odradek.protocol.apis import offset_for_leader_epoch as epoch_api
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch_session_handler import FetchSessionHandler
from odradek.protocol.record_batch import iter_headers

from .isr_maintenance import examples

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FETCH_VERSION = 11
FENCED = ErrorCode.FENCED_LEADER_EPOCH.name   # gathered apart from the partitions backing off
EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 5
# what the follower's append answers for a batch it cannot trust (validator.validate_replicated)
INVALID_DATA = frozenset({ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                          ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT})
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2


class FetchStatus(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(eq=False)
class PartitionFetchState:
    """One partition in a fetcher (Kafka's ``PartitionFetchState``)."""
    fetch_offset: int
    current_leader_epoch: int
    status: FetchStatus = FetchStatus.TRUNCATING
    delayed_until: float = 0.0  # scheduler seconds
    lag: int | None = None      # leader HW - fetch offset after the last fetch (None: not fetched yet)

    @property
    def in_sync(self) -> bool:
        """Kafka's isReplicaInSync: caught up with the leader's HW at the last fetch."""
        return self.lag is not None and self.lag <= 0

    def ready(self, now: float) -> bool:
        return now >= self.delayed_until


# ------------------------------------------------------------ decisions (sans-IO)

def truncation_offset(leader_epoch: int, leader_end_offset: int, fetch_offset: int, replica_leo: int,
                      follower_end_offset_for: Callable[[int], tuple[int, int]]) -> tuple[int, bool]:
    """(offset to truncate to, truncation completed) from the leader's OffsetForLeaderEpoch
    answer; ``follower_end_offset_for(epoch)`` is the follower's own (epoch, end offset)."""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return fetch_offset, True                       # leader knows nothing: use the HW
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, replica_leo), True  # v0 answer: offset only
    f_epoch, f_end = follower_end_offset_for(leader_epoch)
    if f_end == UNDEFINED_EPOCH_OFFSET:
        # no epoch ≤ the leader's: the leader's offset is all we have
        return min(leader_end_offset, replica_leo), True
    if f_epoch != leader_epoch:
        # the leader answered an epoch we never saw: cut to the end of our largest smaller
        # epoch and ask again
        return min(f_end, replica_leo), False
    return min(f_end, leader_end_offset, replica_leo), True


def out_of_range_action(replica_leo: int, leader_leo: int, leader_log_start: int) -> tuple[str, int]:
    """Kafka's ``fetchOffsetAndTruncate``: ("truncate", leader LEO) when the leader is behind,
    ("restart", leader log start) when its log start passed our LEO, else ("fetch", offset)."""
    if leader_leo < replica_leo:
        return "truncate", leader_leo
    if leader_log_start > replica_leo:
        return "restart", leader_log_start
    return "fetch", max(leader_log_start, replica_leo)


def complete_batches(records: bytes | memoryview) -> bytes | memoryview:
    """``records`` cut after its last complete batch."""
    end = 0
    for pos, h in iter_headers(records):
        end = pos + h.size
    return records if end == len(records) else records[:end]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units)."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """``Utils.abs(31 * topic.hashCode() + partition) % numFetchers``."""
    v = (31 * java_string_hash(tp[0]) + tp[1]) & 0xFFFFFFFF
    v = v - (1 << 32) if v >= 1 << 31 else v
    return (v & 0x7FFFFFFF) % max(num_fetchers, 1)


# ------------------------------------------------------------------- fetcher

class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader, in a loop."""

    def __init__(self, name: str, broker_id: int, source_broker_id: int, config: Any,
                 replica_manager: Any, scheduler: Any, client: Any):
        self.name = name
        self.broker_id = broker_id
        self.source_broker_id = source_broker_id
        self.rm = replica_manager
        self.scheduler = scheduler
        self.client = client
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.max_wait_ms = int(config["replica.fetch.wait.max.ms"])
        self.min_bytes = int(config["replica.fetch.min.bytes"])
        self.max_bytes = int(config["replica.fetch.max.bytes"])
        self.response_max_bytes = int(config["replica.fetch.response.max.bytes"])
        self.backoff_s = int(config["replica.fetch.backoff.ms"]) / 1000.0
        self.running = False
        self._wakeup: defer.Deferred | None = None
        self._done: defer.Deferred | None = None
        self.session = FetchSessionHandler()    # incremental fetches (KIP-227) with this leader

    # ------------------------------------------------------------ control

    def start(self) -> None:
        if not self.running:
            self.running = True
            self._done = defer.Deferred.fromCoroutine(self._run())
            self._done.addErrback(lambda f: log.error("%s crashed: %s", self.name, f.getTraceback()))

    def shutdown(self) -> None:
        self.running = False
        self.partitions.clear()
        self.client.close()
        self.wake()

    def add_partitions(self, initial: dict[TopicPartition, tuple[int, int]]) -> None:
        """tp -> (initial fetch offset = HW, current leader epoch); starts with truncation."""
        for tp, (offset, epoch) in initial.items():
            self.partitions[tp] = PartitionFetchState(offset, epoch)
        self.wake()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)
        self.wake()

    def wake(self) -> None:
        d, self._wakeup = self._wakeup, None
        if d is not None and not d.called:
            d.callback(None)

    async def _sleep(self, seconds: float | None) -> None:
        d = self._wakeup = defer.Deferred()
        timer = self.scheduler.callLater(seconds, self.wake) if seconds is not None else None
        try:
            await d
        finally:
            if timer is not None and timer.active():
                timer.cancel()

    def _delay(self, tps: Iterable[TopicPartition], states: dict | None = None) -> None:
        until = self.scheduler.seconds() + self.backoff_s
        for tp in tps:
            st = self.partitions.get(tp)
            if st is not None and (states is None or states.get(tp) is st):
                st.delayed_until = until

    def _current(self, tp: TopicPartition, st: PartitionFetchState) -> Any:
        """The follower Partition if ``st`` is still this tp's state and we still follow it."""
        if self.partitions.get(tp) is not st:
            return None
        p = self.rm.get_partition(tp)
        if p is None or p.log is None or p.is_leader or p.leader_epoch != st.current_leader_epoch:
            return None
        return p

    # --------------------------------------------------------------- loop

    async def _run(self) -> None:
        while self.running:
            if not self.partitions:
                await self._sleep(None)
                continue
            now = self.scheduler.seconds()
            # only states still followed: one whose partition just became leader (or moved to a
            # newer epoch) sends nothing, and looping on it would never yield to the reactor
            followed = {tp: st for tp, st in self.partitions.items() if self._current(tp, st) is not None}
            truncating = {tp: st for tp, st in followed.items()
                          if st.status is FetchStatus.TRUNCATING and st.ready(now)}
            if truncating:
                await self._truncate(truncating)
                continue
            fetching = {tp: st for tp, st in followed.items()
                        if st.status is FetchStatus.FETCHING and st.ready(now)}
            if fetching:
                await self._fetch(fetching)
                continue
            if not followed:   # until the replica manager adds or removes partitions
                await self._sleep(None)
                continue
            wake_at = min(st.delayed_until for st in followed.values())
            await self._sleep(max(wake_at - now, 0.001))

    # ----------------------------------------------------------- truncation

    async def _truncate(self, states: dict[TopicPartition, PartitionFetchState]) -> None:
        with_epochs: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        for tp, st in states.items():
            p = self._current(tp, st)
            if p is None:
                continue
            latest = p.log.latest_epoch
            if latest >= 0:
                with_epochs[tp] = (st, latest)
            else:  # no epochs: truncate to the HW we started from
                self._truncate_partition(p, st, st.fetch_offset, True)
        if not with_epochs:
            return
        topics: dict[str, list[dict]] = {}
        for (topic, part), (st, latest) in with_epochs.items():
            topics.setdefault(topic, []).append({"partition": part, "current_leader_epoch": st.current_leader_epoch,
                                                 "leader_epoch": latest})
        body = {"replica_id": self.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        try:
            resp = await self.client.send(epoch_api, EPOCH_VERSION, body)
        except Exception as e:
            if not self.running:
                return
            log.info("%s: OffsetForLeaderEpoch to broker %d failed: %s", self.name, self.source_broker_id, e)
            self._delay(with_epochs, {tp: s for tp, (s, _) in with_epochs.items()})
            await self._sleep(self.backoff_s)
            return
        for t in resp.topics:
            for r in t.partitions:
                tp = (t.topic, r.partition)
                if tp not in with_epochs:
                    continue
                st = with_epochs[tp][0]
                p = self._current(tp, st)
                if p is None or st.status is not FetchStatus.TRUNCATING:
                    continue
                code = ErrorCode(r.error_code)
                if code == ErrorCode.NONE:
                    offset, completed = truncation_offset(
                        r.leader_epoch, r.end_offset, st.fetch_offset, p.log_end_offset, p.log.end_offset_for_epoch)
                    self._truncate_partition(p, st, offset, completed)
                elif code == ErrorCode.FENCED_LEADER_EPOCH:
                    self._fenced(tp)
                else:
                    log.info("%s: OffsetForLeaderEpoch for %s-%d: %s", self.name, tp[0], tp[1], code.name)
                    self._delay([tp], {tp: st})

    def _truncate_partition(self, p: Any, st: PartitionFetchState, offset: int, completed: bool) -> None:
        leo = p.log_end_offset
        if offset < leo:
            log.info("%s: truncating %s-%d from LEO %d to %d%s", self.name, p.topic, p.partition, leo, offset,
                     "" if offset >= p.high_watermark else f" (below its HW {p.high_watermark})")
        if not self._truncate_or_stop(p.tp, lambda: p.truncate_to(offset)):
            return
        st.fetch_offset = p.log_end_offset if offset > p.log_end_offset else offset
        if completed:
            st.status = FetchStatus.FETCHING

    def _fenced(self, tp: TopicPartition, fenced: list[str] | None = None) -> None:
        """The leader has a newer epoch: stop fetching ``tp`` until a LeaderAndIsr names it (logged
        here, or gathered in ``fenced`` for one line per response)."""
        if fenced is None:
            log.info("%s: %s-%d fenced by the leader's newer epoch; waiting for LeaderAndIsr", self.name, *tp)
        else:
            fenced.append(f"{tp[0]}-{tp[1]}")
        self.partitions.pop(tp, None)

    # -------------------------------------------------------------- fetching

    def _throttled(self, tp: TopicPartition, st: PartitionFetchState) -> bool:
        return self.rm.follower_quota.enabled and not st.in_sync and self.rm.is_throttled("follower", tp)

    async def _fetch(self, states: dict[TopicPartition, PartitionFetchState]) -> None:
        wanted: dict[TopicPartition, dict] = {}
        requested: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        throttled: list[TopicPartition] = []
        quota = self.rm.follower_quota
        for tp, st in states.items():
            p = self._current(tp, st)
            if p is None:
                continue
            if st.fetch_offset != p.log_end_offset:  # someone truncated or appended: start over
                st.status = FetchStatus.TRUNCATING
                st.fetch_offset = p.high_watermark
                continue
            if self._throttled(tp, st) and quota.is_exceeded(self.scheduler.seconds()):
                throttled.append(tp)   # Kafka's shouldFollowerThrottle: not asked for this round
                continue
            requested[tp] = (st, st.fetch_offset)
            wanted[tp] = {"partition": tp[1], "current_leader_epoch": st.current_leader_epoch,
                          "fetch_offset": st.fetch_offset, "log_start_offset": p.log_start_offset,
                          "partition_max_bytes": self.max_bytes}
        if throttled:
            self._delay(throttled, states)
        if not requested:
            return
        body = {"replica_id": self.broker_id, "max_wait_ms": self.max_wait_ms, "min_bytes": self.min_bytes,
                "max_bytes": self.response_max_bytes, "isolation_level": 0, "rack_id": "",
                **self.session.build(wanted)}
        try:
            resp = await self.client.send(fetch_api, FETCH_VERSION, body)
        except Exception as e:
            self.session.reset()      # the leader may or may not have seen it
            if not self.running:
                return
            log.info("%s: fetch from broker %d failed: %s", self.name, self.source_broker_id, e)
            self._delay(requested, {tp: s for tp, (s, _) in requested.items()})
            await self._sleep(self.backoff_s)
            return
        answered = [(t.topic, r.partition) for t in resp.responses for r in t.partition_responses]
        if not self.session.handle_response(resp.error_code, resp.session_id, answered):
            code = ErrorCode(resp.error_code)
            if code in (ErrorCode.NONE, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
                log.info("%s: fetch session with broker %d dropped (%s); fetching in full", self.name,
                         self.source_broker_id, code.name if code else "an answer outside the session")
            else:
                log.info("%s: fetch error %s", self.name, code.name)
                self._delay(requested, {tp: s for tp, (s, _) in requested.items()})
            return
        backoffs: dict[str, list[str]] = {}
        for t in resp.responses:
            for r in t.partition_responses:
                tp = (t.topic, r.partition)
                if tp in requested:
                    await self._process_partition(tp, requested[tp][0], requested[tp][1], r, backoffs)
        await self._synced(requested)
        for code_name, names in backoffs.items():
            if code_name == FENCED:
                log.info("%s: %d partitions fenced by the leader's newer epoch; waiting for LeaderAndIsr (%s)",
                         self.name, len(names), examples(names))
            else:
                log.info("%s: fetch of %d partitions: %s; backing off (%s)", self.name, len(names), code_name,
                         examples(names))

    async def _synced(self, requested: dict[TopicPartition, tuple[PartitionFetchState, int]]) -> None:
        """With ``flush.messages``, the next fetch (which tells the leader this log end offset)
        waits until the group commits of this one's appends are done (``log_syncs.py``), as
        Kafka's follower flushes in its append, before fetching again."""
        syncs = getattr(self.rm, "log_syncs", None)
        if syncs is None or not syncs.running:
            return
        waits = [d for tp, (st, _) in requested.items()
                 if (p := self._current(tp, st)) is not None and (d := syncs.wait(p.log)) is not None]
        if waits:
            await defer.gatherResults(waits)

    async def _process_partition(self, tp: TopicPartition, st: PartitionFetchState, offset: int, r: Any,
                                 backoffs: dict[str, list[str]]) -> None:
        p = self._current(tp, st)
        if p is None or st.status is not FetchStatus.FETCHING or st.fetch_offset != offset:
            return
        code = ErrorCode(r.error_code)
        if code == ErrorCode.NONE:
            if p.log_end_offset != offset:
                st.status, st.fetch_offset = FetchStatus.TRUNCATING, p.high_watermark
                return
            records = complete_batches(r.record_set or b"")
            throttled = self._throttled(tp, st)
            try:
                st.fetch_offset = p.append_as_follower(records, r.high_watermark, r.log_start_offset)
                st.lag = max(0, r.high_watermark - st.fetch_offset)
                if throttled and records:
                    self.rm.follower_quota.record(len(records), self.scheduler.seconds())
            except KafkaError as e:
                if e.code in INVALID_DATA:
                    log.error("%s: stopped fetching %s-%d: the leader's batch at offset %d failed validation "
                              "(%s); nothing appended, waiting for the next LeaderAndIsr", self.name, tp[0], tp[1],
                              offset, e)
                    self.partitions.pop(tp, None)
                    return
                log.warning("%s: appending to %s-%d at %d failed: %s", self.name, tp[0], tp[1], offset, e)
                self._delay([tp], {tp: st})
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(tp, st)
        elif code == ErrorCode.FENCED_LEADER_EPOCH:
            self._fenced(tp, backoffs.setdefault(FENCED, []))
        else:
            log.debug("%s: fetch of %s-%d: %s; backing off", self.name, tp[0], tp[1], code.name)
            backoffs.setdefault(code.name, []).append(f"{tp[0]}-{tp[1]}")
            self._delay([tp], {tp: st})

    async def _handle_out_of_range(self, tp: TopicPartition, st: PartitionFetchState) -> None:
        try:
            leader_leo = await self._list_offset(tp, st, LATEST_TIMESTAMP)
            leader_start = await self._list_offset(tp, st, EARLIEST_TIMESTAMP)
        except Exception as e:
            log.info("%s: resolving out-of-range %s-%d failed: %s", self.name, tp[0], tp[1], e)
            self._delay([tp], {tp: st})
            return
        p = self._current(tp, st)
        if p is None:
            return
        action, offset = out_of_range_action(p.log_end_offset, leader_leo, leader_start)
        log.info("%s: %s-%d out of range (LEO %d, leader LEO %d, leader start %d): %s to %d", self.name,
                 tp[0], tp[1], p.log_end_offset, leader_leo, leader_start, action, offset)
        if action == "truncate" and not self._truncate_or_stop(tp, lambda: p.truncate_to(offset)):
            return
        if action == "restart" and not self._truncate_or_stop(tp, lambda: p.truncate_fully_and_start_at(offset)):
            return
        st.fetch_offset = p.log_end_offset

    def _truncate_or_stop(self, tp: TopicPartition, truncate: Callable[[], None]) -> bool:
        """Run a truncation of ``tp``; False (and ``tp`` no longer fetched) if it failed with
        KAFKA_STORAGE_ERROR: its log dir went offline."""
        try:
            truncate()
            return True
        except KafkaError as e:
            log.error("%s: truncating %s-%d failed: %s", self.name, tp[0], tp[1], e)
            self.partitions.pop(tp, None)
            return False

    async def _list_offset(self, tp: TopicPartition, st: PartitionFetchState, timestamp: int) -> int:
        body = {"replica_id": self.broker_id, "isolation_level": 0, "topics": [{"name": tp[0], "partitions": [
            {"partition_index": tp[1], "current_leader_epoch": st.current_leader_epoch, "timestamp": timestamp}]}]}
        resp = await self.client.send(list_offsets_api, LIST_OFFSETS_VERSION, body)
        r = resp.topics[0].partitions[0]
        if r.error_code:
            raise KafkaError(ErrorCode(r.error_code))
        return r.offset


# ------------------------------------------------------------------- manager

class ReplicaFetcherManager:
    """Fetchers keyed by (leader id, fetcher id); hooked into the replica manager."""

    def __init__(self, broker_id: int, config: Any, replica_manager: Any, scheduler: Any,
                 client_factory: Callable[[int, str, int, int], Any] | None = None, security: Any = None):
        self.broker_id = broker_id
        self.security = security   # the inter-broker listener's InterBrokerSecurity
        self.config = config
        self.rm = replica_manager
        self.scheduler = scheduler
        self.num_fetchers = max(int(config["num.replica.fetchers"]), 1)
        self.listener = getattr(config, "inter_broker_listener_name", "PLAINTEXT")
        self._client_factory = client_factory or self._default_client
        self.fetchers: dict[tuple[int, int], tuple[tuple[str, int], ReplicaFetcher]] = {}
        # Set when this broker's shutdown begins: a partition it becomes a follower of from then
        # on (its controlled shutdown moving a leadership away) is not fetched, since fetching
        # would only put it back into ISRs it is leaving. Kafka 2.8 fetches it (KIP-841 later
        # keeps such brokers out of ISRs).
        self.leaving = False
        replica_manager.on_become_follower = self.add_followers
        replica_manager.on_stop_following = self.remove_partitions

    def _default_client(self, leader: int, host: str, port: int, fid: int) -> Any:
        from ..network.broker_client import BrokerClient
        return BrokerClient(self.scheduler, host, port, f"broker-{self.broker_id}-fetcher-{fid}",
                            request_timeout_ms=int(self.config["replica.socket.timeout.ms"]),
                            reconnect_backoff_ms=100, reconnect_backoff_max_ms=1000, connect_timeout_s=5.0,
                            security=self.security,
                            receive_buffer_bytes=int(self.config["replica.socket.receive.buffer.bytes"]))

    def endpoint(self, leader: int) -> tuple[str, int] | None:
        ep = self.rm.leader_endpoints.get(leader)
        if ep is None:
            ep = self.rm.metadata_cache.endpoint(leader, self.listener)
        return ep

    def add_followers(self, partitions: list[Any]) -> None:
        """Follow each partition's leader from its HW (after truncation)."""
        tps = [p.tp for p in partitions]
        self.remove_partitions(tps, shutdown_idle=False)
        if self.leaving:
            log.info("not fetching %d partitions: this broker is shutting down (%s)", len(partitions),
                     examples(f"{p.topic}-{p.partition}" for p in partitions))
            self.shutdown_idle()
            return
        by_leader: dict[int, list[str]] = {}
        no_endpoint: dict[int, list[str]] = {}
        for p in partitions:
            ep = self.endpoint(p.leader_id)
            if ep is None or p.leader_id < 0:
                no_endpoint.setdefault(p.leader_id, []).append(f"{p.topic}-{p.partition}")
                continue
            fid = fetcher_id(p.tp, self.num_fetchers)
            key = (p.leader_id, fid)
            entry = self.fetchers.get(key)
            if entry is not None and entry[0] != ep:  # the leader came back on another address
                entry[1].shutdown()
                entry = None
            if entry is None:
                client = self._client_factory(p.leader_id, ep[0], ep[1], fid)
                fetcher = ReplicaFetcher(f"ReplicaFetcher-{fid}-{p.leader_id}", self.broker_id, p.leader_id,
                                         self.config, self.rm, self.scheduler, client)
                entry = self.fetchers[key] = (ep, fetcher)
                fetcher.start()
            entry[1].add_partitions({p.tp: (p.high_watermark, p.leader_epoch)})
            log.debug("fetching %s-%d from broker %d at epoch %d (HW %d, LEO %d)", p.topic, p.partition,
                      p.leader_id, p.leader_epoch, p.high_watermark, p.log_end_offset)
            by_leader.setdefault(p.leader_id, []).append(f"{p.topic}-{p.partition}")
        for leader, names in sorted(by_leader.items()):
            log.info("fetching %d partitions from broker %d (%s)", len(names), leader, examples(names))
        for leader, names in sorted(no_endpoint.items()):
            log.warning("no endpoint for leader %d of %d partitions (%s); not fetching them until the next "
                        "LeaderAndIsr", leader, len(names), examples(names))
        self.shutdown_idle()

    def remove_partitions(self, tps: Iterable[TopicPartition], shutdown_idle: bool = True) -> None:
        tps = list(tps)
        for _, fetcher in self.fetchers.values():
            fetcher.remove_partitions(tps)
        if shutdown_idle:
            self.shutdown_idle()

    def shutdown_idle(self) -> None:
        for key, (_, fetcher) in list(self.fetchers.items()):
            if not fetcher.partitions:
                fetcher.shutdown()
                del self.fetchers[key]

    def fetching(self) -> dict[TopicPartition, int]:
        """tp -> leader id, for every partition being fetched."""
        return {tp: key[0] for key, (_, f) in self.fetchers.items() for tp in f.partitions}

    def shutdown(self) -> None:
        for _, fetcher in self.fetchers.values():
            fetcher.shutdown()
        self.fetchers.clear()
