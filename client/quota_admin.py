"""Client quotas through the admin API (DescribeClientQuotas 48, AlterClientQuotas 49), shaped
as Kafka's Admin.describeClientQuotas / alterClientQuotas (ClientQuotaEntity, ClientQuotaFilter,
ClientQuotaAlteration).

Invariant: an entity is a mapping of entity type (``user``, ``client-id``) to a name, None
meaning that type's default; a filter component matches one name, the default, or any name
(``of_entity``/``of_default_entity``/``of_entity_type``); an alteration's op with value None
removes the key. Both requests go to any broker; the builders here are pure, the calls are
``AdminClient.describe_client_quotas`` / ``alter_client_quotas``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from odradek.protocol.apis.describe_client_quotas import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
from odradek.protocol.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"


@dataclass(frozen=True)
class ClientQuotaEntity:
    """A quota entity: ((type, name or None for the default), ...) in user, client-id order."""
    entries: tuple[tuple[str, Optional[str]], ...]

    @classmethod
    def of(cls, entries: Mapping[str, Optional[str]]) -> "ClientQuotaEntity":
        order = {USER: 0, CLIENT_ID: 1, IP: 2}
        return cls(tuple(sorted(entries.items(), key=lambda kv: (order.get(kv[0], 3), kv[0]))))

    def as_dict(self) -> dict[str, Optional[str]]:
        return dict(self.entries)


@dataclass(frozen=True)
class ClientQuotaFilterComponent:
    entity_type: str
    match_type: int
    match: Optional[str] = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> "ClientQuotaFilterComponent":
        return cls(entity_type, MATCH_EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> "ClientQuotaFilterComponent":
        return cls(entity_type, MATCH_DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> "ClientQuotaFilterComponent":
        return cls(entity_type, MATCH_ANY)


@dataclass(frozen=True)
class ClientQuotaAlteration:
    """Set (a value) or remove (None) quota keys of one entity."""
    entity: ClientQuotaEntity
    ops: tuple[tuple[str, Optional[float]], ...] = field(default_factory=tuple)


def describe_body(components: Iterable[ClientQuotaFilterComponent], strict: bool) -> dict[str, Any]:
    return {"components": [{"entity_type": c.entity_type, "match_type": c.match_type, "match": c.match}
                           for c in components], "strict": strict}


def describe_result(resp: Any) -> dict[ClientQuotaEntity, dict[str, float]]:
    if resp.error_code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "DescribeClientQuotas")
    return {ClientQuotaEntity.of({e.entity_type: e.entity_name for e in entry.entity}):
            {v.key: v.value for v in entry["values"]} for entry in resp.entries or []}


def alter_body(alterations: Iterable[ClientQuotaAlteration], validate_only: bool) -> dict[str, Any]:
    return {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in a.entity.entries],
                         "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                                 for k, v in a.ops]}
                        for a in alterations], "validate_only": validate_only}


def alter_result(resp: Any) -> dict[ClientQuotaEntity, KafkaError | None]:
    return {ClientQuotaEntity.of({e.entity_type: e.entity_name for e in entry.entity}):
            None if entry.error_code == ErrorCode.NONE else
            KafkaError(ErrorCode(entry.error_code), entry.error_message or "AlterClientQuotas")
            for entry in resp.entries}
