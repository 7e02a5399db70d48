"""ClientQuotas: one kind of client quota (producer_byte_rate, consumer_byte_rate,
request_percentage or controller_mutation_rate) as Kafka 2.8's ClientQuotaManager with its
DefaultQuotaCallback keeps it.

Invariants:
- ``configs`` holds exactly this kind's values of the quota entities in ZooKeeper, keyed by
  ``QuotaKey`` (sanitized user / client id, ``<default>``, None where the entity has no such part);
- a request of (user, client id) is measured against the most specific entity that sets this kind
  (Kafka's order): <user, client>, <user, default client>, user, <default user, client>,
  <default user, default client>, default user, client, default client; none: not measured;
- the sensor a request records into is named by Kafka's quota metric tags for that entity
  (user and/or client id; the entity's parts that are defaults take the request's own names), so
  all connections that map to one entity share one sampled rate, and a default quota gives every
  user (or client) a rate of its own;
- ``record`` adds to the sensor and returns Kafka's throttle time (``SampledRate.throttle_ms``): 0
  within the quota. A config change only re-resolves; sensors keep what they recorded.
Sans-IO: times are passed in (seconds).
"""
from __future__ import annotations

from odradek.zk.config_entities import DEFAULT_ENTITY as D
from odradek.zk.config_entities import QuotaKey

from .sampled_rate import SampledRate

Tags = tuple[str, str]   # Kafka's quota metric tags: (user, client-id); "" = not part of the entity
IDLE_SENSOR_S = 3600.0   # Kafka expires a client's quota sensors after an hour without requests


def resolution_order(user: str, client: str) -> tuple[tuple[QuotaKey, Tags], ...]:
    """The eight entities a (user, client id) request may fall under, most specific first, each
    with the metric tags of its sensor."""
    return (((user, client), (user, client)), ((user, D), (user, client)), ((user, None), (user, "")),
            ((D, client), (user, client)), ((D, D), (user, client)), ((D, None), (user, "")),
            ((None, client), ("", client)), ((None, D), ("", client)))


class ClientQuotas:
    def __init__(self, name: str, samples: int, window_s: float):
        self.name = name
        self.samples = samples
        self.window_s = window_s
        self.configs: dict[QuotaKey, float] = {}
        self.sensors: dict[Tags, SampledRate] = {}
        self._resolved: dict[tuple[str, str], tuple[Tags, float] | None] = {}
        self._last_used: dict[Tags, float] = {}

    @property
    def active(self) -> bool:
        return bool(self.configs)

    def set(self, key: QuotaKey, value: float | None) -> None:
        """Set (or with None remove) one entity's quota of this kind."""
        if value is None:
            self.configs.pop(key, None)
        else:
            self.configs[key] = value
        self._resolved.clear()

    def resolve(self, user: str, client: str) -> tuple[Tags, float] | None:
        """(sensor tags, quota) for a request of (sanitized user, client id), or None: unlimited."""
        try:
            return self._resolved[(user, client)]
        except KeyError:
            pass
        found = None
        for key, tags in resolution_order(user, client):
            value = self.configs.get(key)
            if value is not None:
                found = (tags, value)
                break
        self._resolved[(user, client)] = found
        return found

    def sensor(self, user: str, client: str, now: float) -> SampledRate | None:
        resolved = self.resolve(user, client)
        if resolved is None:
            return None
        tags, limit = resolved
        sensor = self.sensors.get(tags)
        if sensor is None:
            self._expire(now)
            sensor = self.sensors[tags] = SampledRate(limit, self.samples, self.window_s)
        sensor.limit = limit
        self._last_used[tags] = now
        return sensor

    def record(self, user: str, client: str, amount: float, now: float) -> int:
        """Record ``amount`` for the request's entity; the throttle time in ms (0: within quota)."""
        sensor = self.sensor(user, client, now)
        if sensor is None:
            return 0
        sensor.record(amount, now)
        return sensor.throttle_ms(now)

    def unrecord(self, user: str, client: str, amount: float, now: float) -> None:
        sensor = self.sensor(user, client, now)
        if sensor is not None:
            sensor.unrecord(amount, now)

    def throttle_ms(self, user: str, client: str, now: float) -> int:
        """The throttle time the entity is already due, recording nothing (KIP-599's strict check)."""
        sensor = self.sensor(user, client, now)
        return 0 if sensor is None else sensor.throttle_ms(now)

    def _expire(self, now: float) -> None:
        for tags in [t for t, used in self._last_used.items() if now - used > IDLE_SENSOR_S]:
            self.sensors.pop(tags, None)
            del self._last_used[tags]
