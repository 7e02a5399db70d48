"""QuotaManagers: this broker's client quotas (Kafka's QuotaFactory: produce, fetch, request and
controller-mutation managers) and what they do to one request.

Invariants:
- the configs are those of ``/config/users/...`` and ``/config/clients/...`` as
  ``broker/config_changes.py`` last read them; ``active`` is False while no produce, fetch or
  request quota is set anywhere, and then the request path does nothing more than read it;
- a request's entity is its principal's name (``User:alice`` -> ``alice``, sanitized as Kafka's
  Sanitizer) and its header's client id;
- after a request is handled: Produce records the request's size in bytes (acks=0 too),
  a consumer's Fetch the record bytes of its response (a follower's fetch is not measured,
  nor are the controller's requests to brokers); a consumer's fetch asks for at most its quota
  times the sampled span (``fetch_max_bytes``), and a throttled one answers no records and
  takes back what it recorded, as Kafka's; every measured request records the
  seconds the broker spent handling it, as a percentage of one thread (request_percentage:
  odradek handles requests on one reactor thread, so this is the reactor time spent decoding,
  handling and encoding it; waits such as a long-poll fetch or acks=all are not counted);
- controller mutations (KIP-599): CreateTopics, CreatePartitions and DeleteTopics record the
  partitions each topic creates, adds or deletes (``MutationQuota``, not for validate_only);
  from CreateTopics v6, CreatePartitions v3 and DeleteTopics v5 (strict) a topic arriving while
  its entity is over controller_mutation_rate is refused THROTTLING_QUOTA_EXCEEDED (89) and
  changes nothing, older versions (permissive) are always served and throttled afterwards;
- the throttle time is the longest of the request's (bandwidth, request or mutation quota) and
  goes into the response's throttle_time_ms; the connection then reads nothing more from the
  client for that time (KIP-219), and for request versions older than KIP-219 (whose clients
  do not hold back by themselves) it also holds the response back for that time, as Kafka does.
"""
from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any, Mapping

from odradek.zk.config_entities import QuotaKey, sanitize

from .client_quotas import ClientQuotas
from .sampled_rate import SampledRate

log = logging.getLogger(__name__)

PRODUCE_KEY, FETCH_KEY = 0, 1
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE = "request_percentage", "controller_mutation_rate"
# Controller-to-broker requests (Kafka exempts ClusterAction): LeaderAndIsr, StopReplica,
# UpdateMetadata, ControlledShutdown, WriteTxnMarkers.
EXEMPT_APIS = frozenset({4, 5, 6, 7, 27})
# CreateTopics, CreatePartitions, DeleteTopics: the first version refused THROTTLING_QUOTA_EXCEEDED
STRICT_MUTATIONS_FROM = {19: 6, 37: 3, 20: 5}
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
# The first version of each API whose client holds back by itself on throttle_time_ms (KIP-219,
# Kafka's AbstractResponse.shouldClientThrottle); APIs not listed: every version.
CLIENT_THROTTLES_FROM = {0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2,
                         16: 2, 18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 23: 1, 24: 1, 25: 1, 26: 1, 28: 1,
                         29: 1, 30: 1, 31: 1, 32: 2, 33: 1, 34: 1, 35: 1, 36: 1, 37: 1, 42: 2}


@lru_cache(maxsize=4096)
def user_of(principal: str) -> str:
    """The sanitized user name of a ``User:<name>`` principal (the quota entity's user)."""
    return sanitize(principal.partition(":")[2] or principal)


class QuotaManagers:
    def __init__(self, config: Any, clock: Any):
        """``config``: a KafkaConfig (or any mapping of its quota.window.* names)."""
        samples, window_s = int(config["quota.window.num"]), float(config["quota.window.size.seconds"])
        self.produce = ClientQuotas(PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotas(CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotas(REQUEST_PERCENTAGE, samples, window_s)
        self.mutation = ClientQuotas(CONTROLLER_MUTATION_RATE, int(config["controller.quota.window.num"]),
                                     float(config["controller.quota.window.size.seconds"]))
        self.kinds = (self.produce, self.fetch, self.request, self.mutation)
        self.clock = clock
        self.active = False

    # ---------------------------------------------------------------- configs
    def update(self, key: QuotaKey, values: Mapping[str, str]) -> None:
        """One entity's stored configs (SCRAM and unknown names ignored) replace its quotas."""
        for quotas in self.kinds:
            raw = values.get(quotas.name)
            try:
                quotas.set(key, None if raw is None else float(raw))
            except ValueError:
                log.error("ignoring the %s of quota entity %s: %r is not a number", quotas.name, key, raw)
                quotas.set(key, None)
        self.active = any(q.active for q in self.kinds)

    def replace_all(self, configs: Mapping[QuotaKey, Mapping[str, str]]) -> None:
        stale = {k for q in self.kinds for k in q.configs} - set(configs)
        for key in stale:
            self.update(key, {})
        for key, values in configs.items():
            self.update(key, values)

    # ---------------------------------------------------------------- one request
    def fetch_max_bytes(self, client_id: str | None, principal: str) -> int | None:
        """The most a consumer's fetch may return under its consumer_byte_rate (Kafka's
        getMaxValueInQuotaWindow: the quota times the sampled span), None: no quota."""
        if not self.fetch.active:
            return None
        resolved = self.fetch.resolve(user_of(principal), client_id or "")
        if resolved is None:
            return None
        return int(min(resolved[1] * (self.fetch.samples - 1) * self.fetch.window_s, 2 ** 31 - 1))

    def after_request(self, api_key: int, version: int, client_id: str | None, principal: str, req: Any,
                      body: Any, request_bytes: int, handler_s: float) -> tuple[int, bool]:
        """Record the handled request (module invariants); (throttle ms, hold the response back).
        Sets the body's throttle_time_ms when it is throttled."""
        if api_key in EXEMPT_APIS or (api_key == FETCH_KEY and req.replica_id >= 0):
            return 0, False
        user, client = user_of(principal), client_id or ""
        now = self.clock.seconds()
        throttle = self.request.record(user, client, handler_s * 100.0, now) if self.request.active else 0
        if api_key == PRODUCE_KEY and self.produce.active:
            throttle = max(throttle, self.produce.record(user, client, request_bytes, now))
        elif api_key == FETCH_KEY and self.fetch.active and body is not None:
            fetched = fetched_bytes(body)
            fetch_throttle = self.fetch.record(user, client, fetched, now)
            if fetch_throttle > 0 or throttle > 0:   # Kafka: a throttled fetch answers no records
                self.fetch.unrecord(user, client, fetched, now)
                for t in body.get("responses", ()):
                    for p in t["partition_responses"]:
                        p["record_set"] = b""
            throttle = max(throttle, fetch_throttle)
        if api_key in STRICT_MUTATIONS_FROM and body is not None:   # the handler's MutationQuota
            throttle = max(throttle, int(body.get("throttle_time_ms") or 0))
        if throttle <= 0:
            return 0, False
        if isinstance(body, dict):   # an answer encoded ahead (ApiVersions') keeps its 0: the mute still holds
            body["throttle_time_ms"] = max(int(body.get("throttle_time_ms") or 0), throttle)
        return throttle, version < CLIENT_THROTTLES_FROM.get(api_key, 0)


    def mutation_quota(self, api_key: int, version: int, client_id: str | None, principal: str) -> MutationQuota:
        """The controller mutation quota of one CreateTopics / CreatePartitions / DeleteTopics request."""
        now = self.clock.seconds()
        sensor = self.mutation.sensor(user_of(principal), client_id or "", now) if self.mutation.active else None
        return MutationQuota(sensor, version >= STRICT_MUTATIONS_FROM[api_key], self.clock)


class MutationQuota:
    """Kafka's Strict- / PermissiveControllerMutationQuota for one request; ``throttle_ms`` goes
    into its response."""

    def __init__(self, sensor: SampledRate | None, strict: bool, clock: Any):
        self.sensor, self.strict, self.clock = sensor, strict, clock
        self.throttle_ms = 0

    def admit(self, partitions: int) -> bool:
        """Record ``partitions`` mutations; False (nothing recorded) when strict and already over."""
        sensor = self.sensor
        if sensor is None:
            return True
        now = self.clock.seconds()
        if self.strict:
            due = sensor.throttle_ms(now)
            if due > 0:
                self.throttle_ms = max(self.throttle_ms, due)
                return False
        sensor.record(partitions, now)
        if not self.strict:
            self.throttle_ms = max(self.throttle_ms, sensor.throttle_ms(now))
        return True


NO_MUTATION_QUOTA = MutationQuota(None, False, None)


def mutation_quota(quotas: QuotaManagers | None, rc: Any) -> MutationQuota:
    """The request's MutationQuota (one that admits everything while no quota is set)."""
    if quotas is None or not quotas.mutation.active:
        return NO_MUTATION_QUOTA
    return quotas.mutation_quota(rc.api_key, rc.api_version, rc.client_id, rc.principal)


def fetched_bytes(body: dict) -> int:
    """The record bytes a Fetch response carries."""
    return sum(len(p["record_set"] or b"") for t in body.get("responses", ()) for p in t["partition_responses"])
