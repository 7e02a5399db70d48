"""Entity configs in ZooKeeper (``/config/<type>/<name>``) as Kafka 2.8's AdminZkClient keeps them.

Invariant: every change writes the entity's whole config to ``/config/<type>/<name>`` and
THEN creates ``/config/changes/config_change_<seq>`` naming ``<type>/<name>``, so brokers
re-read it; topics go through ``AdminZkClient.change_topic_config`` (existence and topic
config checks), other entities through the same znode writer. User and client-id names are
stored URL-encoded as Kafka's ``Sanitizer`` does (``*`` -> ``%2A``, space -> ``%20``), the
defaults as ``<default>``. SCRAM values are Kafka's ``salt=...,stored_key=...,server_key=...,
iterations=...`` strings: never a password. Blocking (kazoo); call off the reactor thread.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional
from urllib.parse import quote, unquote_plus

from kazoo.exceptions import NoNodeError

from odradek.protocol.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential, ScramError
from odradek.zk.admin import AdminZkClient
from odradek.zk.znodes import (ConfigEntityChangeNotificationSequenceZNode, ConfigEntityChangeNotificationZNode,
                               ConfigEntityTypeZNode, ConfigEntityZNode)

TOPICS, BROKERS, USERS, CLIENTS = "topics", "brokers", "users", "clients"
ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS)
DEFAULT_ENTITY = "<default>"   # Kafka's ConfigEntityName.Default
SCRAM_MECHANISMS = tuple(MECHANISMS)   # SCRAM-SHA-256, SCRAM-SHA-512
# A quota entity as stored: (sanitized user or <default>, sanitized client id or <default>), None
# where the entity has no such part: ("alice", None) is /config/users/alice, (None, "<default>")
# /config/clients/<default>, ("alice", "app") /config/users/alice/clients/app.
QuotaKey = tuple[Optional[str], Optional[str]]

# Kafka 2.8's DynamicConfig.User / DynamicConfig.Client quota names and their types.
QUOTA_CONFIGS: dict[str, type] = {"producer_byte_rate": int, "consumer_byte_rate": int,
                                  "request_percentage": float, "controller_mutation_rate": float}
# Broker configs Kafka lets --zookeeper change while the broker runs (replication throttles).
BROKER_CONFIGS_UPDATABLE_WHILE_RUNNING = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second"})


class InvalidConfig(ValueError):
    """A config Kafka would refuse (unknown name, bad value, bad SCRAM spec): one line."""


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java URL-encoding, with ``*`` and space percent-encoded."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote_plus(name)


def quota_znode(key: QuotaKey) -> tuple[str, str]:
    """(entity type, name under /config/<type>) of a quota entity (Kafka's ZkAdminManager paths)."""
    user, client = key
    if user is not None:
        return USERS, user if client is None else f"{user}/clients/{client}"
    if client is None:
        raise ValueError("a quota entity has a user, a client id or both")
    return CLIENTS, client


def quota_values(config: Mapping[str, str]) -> dict[str, str]:
    """The quota configs among an entity's configs (a user's also holds SCRAM credentials)."""
    return {k: v for k, v in config.items() if k in QUOTA_CONFIGS}


def validate_quota_configs(entity_type: str, config: Mapping[str, str], allow_scram: bool) -> None:
    """Kafka's ``DynamicConfig.User/Client.validate``: known names, numeric values."""
    allowed = set(QUOTA_CONFIGS) | (set(SCRAM_MECHANISMS) if allow_scram else set())
    unknown = sorted(k for k in config if k not in allowed)
    if unknown:
        raise InvalidConfig(f"Unknown Dynamic Configuration: {', '.join(unknown)} (valid for {entity_type}: "
                            f"{', '.join(sorted(allowed))})")
    for key, kind in QUOTA_CONFIGS.items():
        if key in config:
            try:
                value = kind(config[key])
            except ValueError:
                raise InvalidConfig(f"Invalid value {config[key]} for configuration {key}: "
                                    f"Not a number of type {'LONG' if kind is int else 'DOUBLE'}") from None
            if value < 0 or (key == "request_percentage" and value < 0.01):
                raise InvalidConfig(f"Invalid value {config[key]} for configuration {key}")


_SCRAM_SPEC = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def parse_scram_spec(mechanism: str, spec: str, default_iterations: int = 4096) -> tuple[int, str]:
    """``iterations=8192,password=...`` (iterations optional) -> (iterations, password), as
    kafka-configs.sh reads a SCRAM ``--add-config`` value; the message never shows the password."""
    match = _SCRAM_SPEC.fullmatch(spec)
    if match is None:
        raise InvalidConfig(f"Invalid credential property {mechanism}=[...]: expected "
                            "[iterations=<n>,]password=<password>")
    raw, password = match.group(1), match.group(2)
    try:
        iterations = int(raw) if raw not in (None, "", "-1") else default_iterations
    except ValueError:
        raise InvalidConfig(f"Invalid credential property {mechanism}: iterations {raw!r}") from None
    return iterations, password


def scram_config_value(mechanism: str, iterations: int, password: str) -> str:
    """The ``/config/users/<u>`` value of a new credential (Kafka's ScramCredentialUtils string)."""
    if iterations < MIN_ITERATIONS:
        raise InvalidConfig(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                            f"required for {mechanism}")
    if iterations > MAX_ITERATIONS:
        raise InvalidConfig(f"Iterations {iterations} is more than the maximum {MAX_ITERATIONS} a broker accepts "
                            f"for {mechanism}")
    return ScramCredential.create(mechanism, password, iterations).to_config()


def describe_value(name: str, value: str) -> str:
    """What a describe shows for one config: a SCRAM credential as ``iterations=<n>`` only."""
    if name in SCRAM_MECHANISMS:
        try:
            return f"iterations={ScramCredential.from_config(value).iterations}"
        except ScramError:
            return "<malformed credential>"
    return value


class EntityConfigs:
    """Read and change ``/config/<type>/<name>`` through an ``AdminZkClient``'s session."""

    def __init__(self, admin: AdminZkClient):
        self.admin = admin
        self.zk = admin.zk

    def fetch(self, entity_type: str, name: str) -> dict[str, str]:
        """The entity's config overrides (``name`` already sanitized); {} if none."""
        try:
            data, _ = self.zk.get(ConfigEntityZNode.path(entity_type, name))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(data)

    def names(self, entity_type: str) -> list[str]:
        """Every entity of the type with a config znode (sanitized names), sorted."""
        try:
            return sorted(self.zk.get_children(ConfigEntityTypeZNode.path(entity_type)))
        except NoNodeError:
            return []

    def change(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace the entity's config, then announce it under /config/changes."""
        if entity_type == TOPICS:
            self.admin.change_topic_config(name, config)
            return
        self.admin._set_or_create_entity_config(entity_type, name, {k: str(v) for k, v in config.items()})
        self.zk.ensure_path(ConfigEntityChangeNotificationZNode.path)
        self.zk.create(ConfigEntityChangeNotificationSequenceZNode.path,
                       ConfigEntityChangeNotificationSequenceZNode.encode(f"{entity_type}/{name}"), sequence=True)

    # ---------------------------------------------------------------- client quotas
    def quota_config(self, key: QuotaKey) -> dict[str, str]:
        """Every config of one quota entity's znode (SCRAM credentials too, for a user)."""
        return self.fetch(*quota_znode(key))

    def all_quota_configs(self) -> dict[QuotaKey, dict[str, str]]:
        """The quota configs of every user, <user, client> and client entity that has some."""
        out: dict[QuotaKey, dict[str, str]] = {}
        for user in self.names(USERS):
            out[(user, None)] = quota_values(self.fetch(USERS, user))
            for client in self.names(f"{USERS}/{user}/{CLIENTS}"):
                out[(user, client)] = quota_values(self.fetch(USERS, f"{user}/{CLIENTS}/{client}"))
        for client in self.names(CLIENTS):
            out[(None, client)] = quota_values(self.fetch(CLIENTS, client))
        return {k: v for k, v in out.items() if v}

    # ---------------------------------------------------------------- users' SCRAM credentials
    def scram_credentials(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism (``user`` not sanitized); malformed ones raise ScramError."""
        config = self.fetch(USERS, sanitize(user))
        return {m: ScramCredential.from_config(config[m]) for m in SCRAM_MECHANISMS if m in config}

    def users_with_scram(self) -> list[str]:
        """Every user (desanitized) with at least one SCRAM credential, sorted."""
        users = []
        for name in self.names(USERS):
            if name != DEFAULT_ENTITY and any(m in self.fetch(USERS, name) for m in SCRAM_MECHANISMS):
                users.append(desanitize(name))
        return sorted(users)
