"""Broker and topic configuration, by Kafka 2.8's names, types and defaults.

Invariant: every key is declared once, in ``BROKER_CONFIG`` or ``TOPIC_CONFIG``
(name -> type, default, validator, doc), and every value goes through ``_parse``
(``config_types``, with the properties syntax); a bad value raises ``ConfigError`` whose
message is one line naming the key and the problem. Unknown broker keys are kept (Kafka only warns).
Derived settings (``log.retention.ms`` over minutes over hours, ``log.roll.ms``
over hours, ``log.dirs`` over ``log.dir``) are resolved here and nowhere else.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Mapping, NamedTuple

from .types import (  # re-exported: config users import these from here
    BOOLEAN, DOUBLE, INT, LIST, LONG, LONG_MAX, PASSWORD, REQUIRED, SHORT, STRING, ConfigError, ConfigKey,
    _parse, _table, at_least, between, list_of, message_format_version, non_empty, one_of,
    parse_properties, replica_selector,
)

from .security_keys import SECURITY_KEYS

log = logging.getLogger(__name__)

# ---------------------------------------------------------------- broker keys

_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TS_TYPES, _POLICIES = ("CreateTime", "LogAppendTime"), ("delete", "compact")
# the names Kafka 2.8 knows its ACL authorizer by (the second is its deprecated alias)
AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")

BROKER_CONFIG: dict[str, ConfigKey] = _table([
    # --- general / ZooKeeper
    ("broker.id", INT, -1, None, "The broker id; -1 lets ZooKeeper generate one."),
    ("broker.id.generation.enable", BOOLEAN, True, None, "Generate a broker id when broker.id is -1."),
    ("reserved.broker.max.id", INT, 1000, at_least(0), "Max configurable broker id."),
    ("broker.rack", STRING, None, None, "Rack of the broker."),
    ("zookeeper.connect", STRING, REQUIRED, non_empty, "ZooKeeper connection string host:port,...[/chroot]."),
    ("zookeeper.session.timeout.ms", INT, 18000, at_least(1), "ZooKeeper session timeout."),
    ("zookeeper.connection.timeout.ms", INT, None, None, "Defaults to zookeeper.session.timeout.ms."),
    ("zookeeper.max.in.flight.requests", INT, 10, at_least(1),
     "Unacknowledged ZooKeeper requests (informational here: kazoo pipelines without a limit)."),
    ("num.network.threads", INT, 3, at_least(1), "Network threads (informational here)."),
    ("num.io.threads", INT, 8, at_least(1), "I/O threads (informational here)."),
    ("background.threads", INT, 10, at_least(1), "Background threads (informational here)."),
    ("queued.max.requests", INT, 500, at_least(1),
     "Queued requests before blocking the network (informational here: each connection reads no more "
     "while 64 of its requests wait)."),
    # --- sockets and listeners
    ("listeners", STRING, "PLAINTEXT://:9092", None, "Comma-separated NAME://host:port listeners."),
    ("advertised.listeners", STRING, None, None, "Listeners published in ZooKeeper; defaults to listeners."),
    ("listener.security.protocol.map", STRING, _DEFAULT_PROTOCOL_MAP, None, "Listener name -> security protocol."),
    ("inter.broker.listener.name", STRING, None, None, "Listener used between brokers."),
    ("security.inter.broker.protocol", STRING, "PLAINTEXT",
     one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "Protocol used between brokers."),
    # odradek's default is -1 (Kafka's: 102400): the kernel's autotuned buffers served and took 1 KiB
    # records faster, on less CPU, than fixed 100 KiB ones (docs/benchmarks.md, "Socket buffer sizes")
    ("socket.send.buffer.bytes", INT, -1, None, "SO_SNDBUF of accepted connections; -1: the OS's (autotuned)."),
    ("socket.receive.buffer.bytes", INT, -1, None, "SO_RCVBUF of accepted connections; -1: the OS's (autotuned)."),
    ("socket.request.max.bytes", INT, 104857600, at_least(1), "Max bytes of one request."),
    ("connections.max.idle.ms", LONG, 600000, None, "Idle connections are closed after this."),
    ("max.connections.per.ip", INT, 2**31 - 1, at_least(0), "Connections allowed from one address."),
    ("max.connections.per.ip.overrides", STRING, "", None,
     "Per-address limits overriding max.connections.per.ip: host:count, comma-separated."),
    ("max.connections", INT, 2**31 - 1, at_least(0),
     "Connections the broker accepts across its listeners (listener.name.<l>.max.connections per listener)."),
    ("request.timeout.ms", INT, 30000, at_least(0), "Broker-side client request timeout."),
    ("metrics.port", INT, None, between(0, 65535),   # odradek's: Kafka has JMX (and the JMX exporter)
     "Port of the Prometheus endpoint http://<metrics.host>:<port>/metrics; unset: off; 0: any free port."),
    ("metrics.host", STRING, None, None, "Interface of the metrics endpoint; defaults to the first listener's host."),
    *SECURITY_KEYS,
    # --- authorization
    ("authorizer.class.name", STRING, "", one_of("", *AUTHORIZERS),
     "kafka.security.authorizer.AclAuthorizer turns on ACLs (the only authorizer built here)."),
    ("super.users", STRING, "", None, "Principals allowed everything: User:a;User:b."),
    ("allow.everyone.if.no.acl.found", BOOLEAN, False, None, "Allow access to resources that have no ACL."),
    ("zookeeper.set.acl", BOOLEAN, False, None, "Create znodes with secure ACLs (needs ZooKeeper SASL)."),
    # --- log
    ("log.dir", STRING, "/tmp/kafka-logs", None, "Log directory, used when log.dirs is unset."),
    ("log.dirs", STRING, None, None, "Comma-separated log directories."),
    ("num.partitions", INT, 1, at_least(1), "Default partition count of auto-created topics."),
    ("log.segment.bytes", INT, 1073741824, at_least(14), "Max size of one segment file."),
    ("log.roll.ms", LONG, None, None, "Roll a segment after this many ms (over log.roll.hours)."),
    ("log.roll.hours", INT, 168, at_least(1), "Roll a segment after this many hours."),
    ("log.roll.jitter.ms", LONG, None, None, "Max jitter subtracted from the roll time."),
    ("log.roll.jitter.hours", INT, 0, at_least(0), "Max jitter subtracted from the roll time."),
    ("log.retention.ms", LONG, None, None, "Retention in ms; -1 keeps forever (over minutes, hours)."),
    ("log.retention.minutes", INT, None, None, "Retention in minutes (over hours)."),
    ("log.retention.hours", INT, 168, None, "Retention in hours."),
    ("log.retention.bytes", LONG, -1, None, "Max partition size before deleting old segments."),
    ("log.retention.check.interval.ms", LONG, 300000, at_least(1), "How often retention runs."),
    ("log.cleanup.policy", LIST, ["delete"], list_of(*_POLICIES), "delete and/or compact."),
    ("log.cleaner.enable", BOOLEAN, True, None, "Run the log cleaner for compacted topics."),
    ("log.cleaner.threads", INT, 1, at_least(0), "Log cleaner threads."),
    ("log.cleaner.backoff.ms", LONG, 15000, at_least(0), "Sleep when there is nothing to clean."),
    ("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, "Memory for cleaner dedupe."),
    ("log.cleaner.delete.retention.ms", LONG, 86400000, at_least(0), "How long tombstones are kept."),
    ("log.cleaner.min.compaction.lag.ms", LONG, 0, at_least(0), "Min age before compaction."),
    ("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), "Max age before compaction."),
    ("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, between(0, 1), "Min dirty ratio to clean."),
    ("log.index.interval.bytes", INT, 4096, at_least(0), "Bytes between offset index entries."),
    ("log.index.size.max.bytes", INT, 10485760, at_least(4), "Max size of an offset index."),
    ("log.preallocate", BOOLEAN, False, None, "Preallocate segment files (informational here: never done)."),
    ("log.flush.interval.messages", LONG, LONG_MAX, at_least(1), "Messages between fsyncs."),
    ("log.flush.interval.ms", LONG, None, None, "Ms between fsyncs (default: scheduler interval)."),
    ("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, "Flusher check interval."),
    ("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(0), "Recovery point checkpoint interval."),
    ("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, at_least(0), "Log start checkpoint interval."),
    ("log.segment.delete.delay.ms", LONG, 60000, at_least(0), "Delay before deleting a .deleted file."),
    ("log.message.format.version", STRING, "2.8-IV1", message_format_version, "Message format version."),
    ("log.message.timestamp.type", STRING, "CreateTime", one_of(*_TS_TYPES), "CreateTime or LogAppendTime."),
    ("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, at_least(0), "Max CreateTime skew."),
    ("log.message.downconversion.enable", BOOLEAN, True, None, "Down-convert for old consumers."),
    ("num.recovery.threads.per.data.dir", INT, 1, at_least(1),
     "Threads for log recovery (informational here: logs load one after another)."),
    ("message.max.bytes", INT, 1048588, at_least(0), "Max record batch size."),
    ("compression.type", STRING, "producer", one_of(*_COMPRESSION, case_insensitive=True), "Final topic compression."),
    ("auto.create.topics.enable", BOOLEAN, True, None, "Create topics on metadata requests."),
    ("delete.topic.enable", BOOLEAN, True, None, "Allow topic deletion."),
    ("default.replication.factor", INT, 1, at_least(1), "Replication factor of auto-created topics."),
    ("min.insync.replicas", INT, 1, at_least(1), "Min ISR size for acks=all."),
    ("fetch.max.bytes", INT, 57671680, at_least(1024), "Max bytes returned by a fetch."),
    # --- replication
    ("replica.lag.time.max.ms", LONG, 30000, None, "Followers not caught up for this long leave the ISR."),
    ("replica.socket.timeout.ms", INT, 30000, None, "Follower socket timeout."),
    ("replica.socket.receive.buffer.bytes", INT, 65536, None,
     "SO_RCVBUF of a follower's connections to its leaders; -1: the OS's (autotuned)."),
    ("replica.fetch.max.bytes", INT, 1048576, at_least(0), "Bytes per partition in a follower fetch."),
    ("replica.fetch.wait.max.ms", INT, 500, None, "Max wait of a follower fetch."),
    ("replica.fetch.min.bytes", INT, 1, None, "Min bytes of a follower fetch."),
    ("replica.fetch.response.max.bytes", INT, 10485760, at_least(0), "Max bytes of a follower fetch response."),
    ("max.incremental.fetch.session.cache.slots", INT, 1000, at_least(0),
     "Incremental fetch sessions (KIP-227) a broker keeps; 0 turns them off."),
    ("replica.fetch.backoff.ms", INT, 1000, at_least(0), "Backoff after a fetch error."),
    ("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None, "HW checkpoint interval."),
    ("replica.selector.class", STRING, None, replica_selector,
     "Which replica consumers fetch from (KIP-392); odradek has the leader only (LeaderSelector)."),
    ("num.replica.fetchers", INT, 1, None, "Fetcher threads per source broker."),
    ("unclean.leader.election.enable", BOOLEAN, False, None, "Allow out-of-ISR leaders."),
    ("auto.leader.rebalance.enable", BOOLEAN, True, None, "Move leadership back to preferred replicas."),
    ("leader.imbalance.check.interval.seconds", LONG, 300, at_least(1), "Rebalance check interval."),
    ("leader.imbalance.per.broker.percentage", INT, 10, None, "Allowed leader imbalance per broker."),
    ("inter.broker.protocol.version", STRING, "2.8-IV1", None, "Inter-broker protocol version."),
    # --- client quotas (broker/quotas/): the samples and the seconds per sample of their sampled rates
    *[(p + k, INT, 11 if k.endswith("num") else 1, at_least(1), "Client quota rate samples / sample seconds.")
      for p in ("", "controller.") for k in ("quota.window.num", "quota.window.size.seconds")],
    # --- controller
    ("controlled.shutdown.enable", BOOLEAN, True, None, "Move leadership away before shutdown."),
    ("controlled.shutdown.max.retries", INT, 3, None, "Controlled shutdown attempts."),
    ("controlled.shutdown.retry.backoff.ms", LONG, 5000, None, "Backoff between attempts."),
    ("controller.socket.timeout.ms", INT, 30000, None, "Controller-to-broker socket timeout."),
    # --- group coordinator
    ("group.initial.rebalance.delay.ms", INT, 3000, None, "Delay of the first rebalance of a new group."),
    ("group.min.session.timeout.ms", INT, 6000, None, "Min consumer session timeout."),
    ("group.max.session.timeout.ms", INT, 1800000, None, "Max consumer session timeout."),
    ("group.max.size", INT, 2**31 - 1, at_least(1), "Max consumers in one group."),
    ("offsets.topic.num.partitions", INT, 50, at_least(1), "Partitions of __consumer_offsets."),
    ("offsets.topic.replication.factor", SHORT, 3, at_least(1), "Replication of __consumer_offsets."),
    ("offsets.topic.segment.bytes", INT, 104857600, at_least(1), "Segment size of __consumer_offsets."),
    ("offsets.topic.compression.codec", INT, 0, None, "Codec of __consumer_offsets."),
    ("offsets.load.buffer.size", INT, 5242880, at_least(1), "Read size when loading offsets."),
    ("offsets.retention.minutes", INT, 10080, at_least(1), "Retention of committed offsets."),
    ("offsets.retention.check.interval.ms", LONG, 600000, at_least(1), "Expired offsets check interval."),
    ("offsets.commit.timeout.ms", INT, 5000, at_least(1), "Offset commit replication wait."),
    ("offsets.commit.required.acks", SHORT, -1, None, "acks for offset commits."),
    ("offset.metadata.max.bytes", INT, 4096, None, "Max size of commit metadata."),
    # --- transactions
    ("transactional.id.expiration.ms", INT, 604800000, at_least(1), "Transactional id expiry."),
    ("transaction.max.timeout.ms", INT, 900000, at_least(1), "Max transaction timeout."),
    ("transaction.state.log.num.partitions", INT, 50, at_least(1), "Partitions of __transaction_state."),
    ("transaction.state.log.replication.factor", SHORT, 3, at_least(1), "Replication of __transaction_state."),
    ("transaction.state.log.min.isr", INT, 2, at_least(1), "min.insync.replicas of __transaction_state."),
    ("transaction.state.log.segment.bytes", INT, 104857600, at_least(1), "Segment size of __transaction_state."),
    ("transaction.state.log.load.buffer.size", INT, 5242880, at_least(1),
     "Read size when loading __transaction_state."),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, at_least(1),
     "How often timed-out transactions are aborted."),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, at_least(1),
     "How often expired transactional ids are removed."),
])


class ListenerEndpoint(NamedTuple):
    listener_name: str
    host: str
    port: int


_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(-?\d+)$")


def parse_listeners(name: str, value: str | None) -> list[ListenerEndpoint]:
    """``NAME://host:port,...`` -> endpoints (an empty host binds every interface)."""
    out: list[ListenerEndpoint] = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER.match(item)
        if not m:
            raise ConfigError(f"Invalid value {item!r} for configuration {name}: "
                              f"expected NAME://host:port")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {item!r} for configuration {name}: port out of range")
        out.append(ListenerEndpoint(m.group(1).upper(), m.group(2).strip("[]"), port))
    names = [e.listener_name for e in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: "
                          f"listener name {sorted(dup)[0]} is used more than once")
    return out


class _TypedValues:
    """Typed values by Kafka name; ``cfg.log_segment_bytes`` reads ``cfg["log.segment.bytes"]``."""

    _values: dict[str, Any]

    def __getattr__(self, attr: str) -> Any:
        values = self.__dict__.get("_values")
        name = attr.replace("_", ".")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(attr)

    def values(self) -> dict[str, Any]:
        """Every known key with its typed (possibly default) value."""
        return dict(self._values)


_LISTENER_PREFIXED = re.compile(r"listener\.name\.[a-z0-9_]+\.(max\.connections|ssl\.[a-z.]+|sasl\.[a-z.]+"
                                r"|(gssapi|plain|scram-sha-256|scram-sha-512|oauthbearer)\.sasl\.[a-z.]+)")


class KafkaConfig(_TypedValues):
    """The broker's configuration: ``cfg["log.segment.bytes"]``, ``cfg.log_segment_bytes``
    and derived properties (``broker_id``, ``listeners``, ``retention_ms``...)."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        self.originals: dict[str, Any] = dict(props or {})
        values: dict[str, Any] = {}
        for name, key in BROKER_CONFIG.items():
            if name in self.originals:
                values[name] = _parse(key, self.originals[name])
            elif key.default is REQUIRED:
                raise ConfigError(f"Missing required configuration {name} which has no default value")
            else:
                values[name] = key.default
        self._values = values
        self.unknown = sorted(k for k in self.originals if k not in BROKER_CONFIG
                              and not _LISTENER_PREFIXED.fullmatch(k))
        for k in self.unknown:
            log.warning("The configuration '%s' was supplied but isn't a known config.", k)
        self._derive_and_check()

    @classmethod
    def from_properties_file(cls, path: str, overrides: Mapping[str, Any] | None = None) -> "KafkaConfig":
        try:
            with open(path, encoding="latin-1") as f:
                props: dict[str, Any] = parse_properties(f.read())
        except OSError as e:
            raise ConfigError(f"Cannot read properties file {path}: {e.strerror}") from None
        props.update(overrides or {})
        return cls(props)

    # -- access
    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return self.originals[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values or name in self.originals

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default


    def __repr__(self) -> str:
        return f"KafkaConfig(broker.id={self.broker_id}, zookeeper.connect={self.zookeeper_connect!r})"

    def _per_ip_overrides(self, text: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            host, _, count = item.rpartition(":")
            try:
                limit = int(count)
            except ValueError:
                limit = -1
            if not host or limit < 0:
                raise ConfigError(f"Invalid value {text!r} for configuration max.connections.per.ip.overrides: "
                                  f"{item!r} is not host:count with a count of at least 0")
            out[host.strip("[]")] = limit
        return out

    def _listener_max_connections(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.listeners:
            name = f"listener.name.{e.listener_name.lower()}.max.connections"
            if name in self.originals:
                try:
                    limit = int(str(self.originals[name]).strip())
                except ValueError:
                    limit = -1
                if limit < 0:
                    raise ConfigError(f"Invalid value {self.originals[name]!r} for configuration {name}: "
                                      f"must be an integer of at least 0")
                out[e.listener_name] = limit
        return out

    # -- derived settings
    def _derive_and_check(self) -> None:
        v = self._values
        if v["broker.id.generation.enable"]:
            if not -1 <= v["broker.id"] <= v["reserved.broker.max.id"]:
                raise ConfigError(f"Invalid value {v['broker.id']} for configuration broker.id: must be "
                                  f"between -1 and reserved.broker.max.id ({v['reserved.broker.max.id']})")
        elif v["broker.id"] < 0:
            raise ConfigError("Missing required configuration broker.id: it must be >= 0 when "
                              "broker.id.generation.enable is false")
        self.listeners = parse_listeners("listeners", v["listeners"])
        if not self.listeners:
            raise ConfigError("Invalid value '' for configuration listeners: at least one listener is required")
        adv = v["advertised.listeners"]
        self.advertised_listeners = parse_listeners("advertised.listeners", adv) if adv else list(self.listeners)
        for e in self.advertised_listeners:
            if e.host == "0.0.0.0":
                raise ConfigError(f"Invalid value for configuration advertised.listeners: "
                                  f"{e.listener_name} cannot advertise the meta-address 0.0.0.0")
        self.security_protocol_map = self._protocol_map(v["listener.security.protocol.map"])
        for e in self.listeners + self.advertised_listeners:
            if e.listener_name not in self.security_protocol_map:
                raise ConfigError(f"Invalid value for configuration listener.security.protocol.map: "
                                  f"no security protocol for listener {e.listener_name}")
        if v["inter.broker.listener.name"] and "security.inter.broker.protocol" in self.originals:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set")
        ibl = (v["inter.broker.listener.name"] or v["security.inter.broker.protocol"]).upper()
        if ibl not in {e.listener_name for e in self.advertised_listeners}:
            raise ConfigError(f"Invalid value {ibl!r} for configuration inter.broker.listener.name: "
                              f"it must be one of the advertised listeners")
        self.inter_broker_listener_name = ibl
        self._check_sasl_mechanisms()
        self.max_connections_per_ip_overrides = self._per_ip_overrides(v["max.connections.per.ip.overrides"])
        self.listener_max_connections = self._listener_max_connections()
        dirs = v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"]
        self.log_dirs = [d.strip() for d in dirs.split(",") if d.strip()]
        if not self.log_dirs:
            raise ConfigError("Invalid value '' for configuration log.dirs: at least one directory is required")
        if v["replica.fetch.wait.max.ms"] > v["replica.socket.timeout.ms"]:
            raise ConfigError("Invalid value for configuration replica.fetch.wait.max.ms: "
                              "must not exceed replica.socket.timeout.ms")
        if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
            raise ConfigError("Invalid value for configuration replica.fetch.wait.max.ms: "
                              "must not exceed replica.lag.time.max.ms")
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise ConfigError("Invalid value for configuration group.min.session.timeout.ms: "
                              "must not exceed group.max.session.timeout.ms")
        if self.roll_ms < 1:
            raise ConfigError(f"Invalid value {self.roll_ms} for configuration log.roll.ms: must be at least 1")

    def listener_value(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """``name`` for one listener: ``listener.name.<l>.[<mechanism>.]<name>`` when given (Kafka's
        per-listener override), else the broker-wide value."""
        prefix = f"listener.name.{listener.lower()}."
        for key in ([f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []) + [prefix + name]:
            if key in self.originals:
                return _parse(BROKER_CONFIG[name]._replace(name=key), self.originals[key])
        return self._values[name]

    def security_protocol(self, listener: str) -> str:
        return self.security_protocol_map[listener.upper()]

    def _check_sasl_mechanisms(self) -> None:
        """SASL listeners serve PLAIN and SCRAM; Kafka's default GSSAPI (Kerberos) is not built."""
        supported = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        for e in self.listeners:
            if not self.security_protocol(e.listener_name).startswith("SASL_"):
                continue
            mechanisms = self.listener_value(e.listener_name, "sasl.enabled.mechanisms")
            bad = [m for m in mechanisms if m not in supported]
            if bad or not mechanisms:
                key = "sasl.enabled.mechanisms"
                raise ConfigError(f"Invalid value {','.join(mechanisms)!r} for configuration {key} "
                                  f"(listener {e.listener_name}): odradek serves {', '.join(supported)}"
                                  + (" (GSSAPI, Kafka's default, is not supported)" if "GSSAPI" in bad else ""))
        if self.security_protocol(self.inter_broker_listener_name).startswith("SASL_"):
            mechanism = self._values["sasl.mechanism.inter.broker.protocol"]
            enabled = self.listener_value(self.inter_broker_listener_name, "sasl.enabled.mechanisms")
            if mechanism not in enabled:
                raise ConfigError(f"Invalid value {mechanism!r} for configuration "
                                  f"sasl.mechanism.inter.broker.protocol: it must be one of the inter-broker "
                                  f"listener's sasl.enabled.mechanisms ({', '.join(enabled)})")

    @staticmethod
    def _protocol_map(value: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in value.split(","):
            if not item.strip():
                continue
            name, sep, proto = item.partition(":")
            proto = proto.strip().upper()
            if not sep or proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise ConfigError(f"Invalid value {item.strip()!r} for configuration "
                                  f"listener.security.protocol.map: expected NAME:PROTOCOL")
            out[name.strip().upper()] = proto
        return out

    @property
    def broker_id(self) -> int:
        return self._values["broker.id"]

    @property
    def zookeeper_connect(self) -> str:
        return self._values["zookeeper.connect"]

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        v = self._values["zookeeper.connection.timeout.ms"]
        return self._values["zookeeper.session.timeout.ms"] if v is None else v

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours (Kafka's precedence); -1 = forever."""
        v = self._values
        if v["log.retention.ms"] is not None:
            ms = v["log.retention.ms"]
        elif v["log.retention.minutes"] is not None:
            ms = v["log.retention.minutes"] * 60_000
        else:
            ms = v["log.retention.hours"] * 3_600_000
        return -1 if ms < 0 else ms

    @property
    def retention_bytes(self) -> int:
        return self._values["log.retention.bytes"]

    @property
    def roll_ms(self) -> int:
        v = self._values
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self._values
        return v["log.roll.jitter.ms"] if v["log.roll.jitter.ms"] is not None \
            else v["log.roll.jitter.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        v = self._values
        return v["log.flush.interval.ms"] if v["log.flush.interval.ms"] is not None \
            else v["log.flush.scheduler.interval.ms"]

    @property
    def offsets_retention_ms(self) -> int:
        return self._values["offsets.retention.minutes"] * 60_000

    def endpoint(self, listener_name: str, advertised: bool = True) -> ListenerEndpoint:
        for e in (self.advertised_listeners if advertised else self.listeners):
            if e.listener_name == listener_name.upper():
                return e
        raise KeyError(listener_name)


# ---------------------------------------------------------------- topic keys

TOPIC_CONFIG: dict[str, ConfigKey] = _table([
    ("segment.bytes", INT, 1073741824, at_least(14), "Segment file size."),
    ("segment.ms", LONG, 604800000, at_least(1), "Roll a segment after this long."),
    ("segment.jitter.ms", LONG, 0, at_least(0), "Max random jitter subtracted from segment.ms."),
    ("segment.index.bytes", INT, 10485760, at_least(4), "Max size of an offset index."),
    ("flush.messages", LONG, LONG_MAX, at_least(0), "Messages between fsyncs."),
    ("flush.ms", LONG, LONG_MAX, at_least(0), "Ms between fsyncs."),
    ("retention.bytes", LONG, -1, None, "Max partition size before deleting old segments."),
    ("retention.ms", LONG, 604800000, at_least(-1), "Age before deleting a segment; -1 = forever."),
    ("max.message.bytes", INT, 1048588, at_least(0), "Max record batch size."),
    ("index.interval.bytes", INT, 4096, at_least(0), "Bytes between offset index entries."),
    ("delete.retention.ms", LONG, 86400000, at_least(0), "How long tombstones are kept."),
    ("min.compaction.lag.ms", LONG, 0, at_least(0), "Min age before compaction."),
    ("max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), "Max age before compaction."),
    ("file.delete.delay.ms", LONG, 60000, at_least(0), "Delay before deleting a .deleted file."),
    ("min.cleanable.dirty.ratio", DOUBLE, 0.5, between(0, 1), "Min dirty ratio to clean."),
    ("cleanup.policy", LIST, ["delete"], list_of(*_POLICIES), "delete and/or compact."),
    ("unclean.leader.election.enable", BOOLEAN, False, None, "Allow out-of-ISR leaders."),
    ("min.insync.replicas", INT, 1, at_least(1), "Min ISR size for acks=all."),
    ("compression.type", STRING, "producer", one_of(*_COMPRESSION, case_insensitive=True),
     "Final compression of topic data."),
    ("preallocate", BOOLEAN, False, None, "Preallocate segment files (informational here: never done)."),
    ("message.format.version", STRING, "2.8-IV1", message_format_version, "Message format version."),
    ("message.timestamp.type", STRING, "CreateTime", one_of(*_TS_TYPES), "CreateTime or LogAppendTime."),
    ("message.timestamp.difference.max.ms", LONG, LONG_MAX, at_least(0), "Max CreateTime skew."),
    ("message.downconversion.enable", BOOLEAN, True, None, "Down-convert for old consumers."),
    ("leader.replication.throttled.replicas", LIST, [], None, "Throttled leader replicas."),
    ("follower.replication.throttled.replicas", LIST, [], None, "Throttled follower replicas."),
])

TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(TOPIC_CONFIG)

# topic config -> the broker key (or derived KafkaConfig property) giving its default
BROKER_SYNONYM: dict[str, str | Callable[[KafkaConfig], Any]] = {
    "segment.ms": lambda c: c.roll_ms, "segment.jitter.ms": lambda c: c.roll_jitter_ms,
    "flush.ms": lambda c: c.flush_ms, "retention.ms": lambda c: c.retention_ms,
    "segment.index.bytes": "log.index.size.max.bytes", "flush.messages": "log.flush.interval.messages",
    "max.message.bytes": "message.max.bytes", "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas", "compression.type": "compression.type",
    **{n: "log." + n for n in ("segment.bytes", "retention.bytes", "cleanup.policy", "preallocate",
                               "message.format.version", "message.timestamp.type",
                               "message.timestamp.difference.max.ms", "message.downconversion.enable")},
}


class LogConfig(_TypedValues):
    """Topic-level configuration: ``lc["segment.bytes"]`` or ``lc.segment_bytes``.

    ``overrides`` holds the topic's explicit settings (as stored in /config/topics/<t>).
    """

    def __init__(self, props: Mapping[str, Any] | None = None,
                 defaults: Mapping[str, Any] | None = None) -> None:
        overrides = dict(props or {})
        self.validate_overrides(overrides)
        values = {n: k.default for n, k in TOPIC_CONFIG.items()}
        values.update(defaults or {})
        for name, raw in overrides.items():
            values[name] = _parse(TOPIC_CONFIG[name], raw)
        self._values = values
        self.overrides = overrides

    @classmethod
    def from_broker(cls, config: KafkaConfig, overrides: Mapping[str, Any] | None = None) -> "LogConfig":
        defaults = {}
        for name, syn in BROKER_SYNONYM.items():
            defaults[name] = syn(config) if callable(syn) else config[syn]
        return cls(overrides, defaults)

    @staticmethod
    def validate_overrides(overrides: Mapping[str, Any]) -> None:
        """Raise ConfigError for an unknown topic config or a bad value."""
        for name, raw in overrides.items():
            key = TOPIC_CONFIG.get(name)
            if key is None:
                raise ConfigError(f"Unknown topic config name: {name}")
            _parse(key, raw)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "LogConfig":
        """A copy with more overrides applied on top of this config's values."""
        merged = dict(self.overrides)
        merged.update(overrides)
        base = {n: v for n, v in self._values.items() if n not in merged}
        return LogConfig(merged, base)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogConfig) and self._values == other._values

    def __repr__(self) -> str:
        return f"LogConfig({self.overrides!r})"

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get before the next append rolls it: ``segment.ms``, or
        for a compacted log ``max.compaction.lag.ms`` if less (KIP-354: its records must become
        cleanable in time)."""
        v = self._values
        if self.compact and v["max.compaction.lag.ms"] > 0:
            return int(min(v["segment.ms"], v["max.compaction.lag.ms"]))
        return int(v["segment.ms"])

    @property
    def log_append_time(self) -> bool:
        return self._values["message.timestamp.type"] == "LogAppendTime"
