"""AdminClient: topics through the controller, consumer groups through their coordinators.

Invariant: CreateTopics, DeleteTopics and CreatePartitions go to the broker Metadata names as
controller; a NOT_CONTROLLER answer (or a lost connection) refreshes metadata
and retries just the affected topics until ``timeout_ms``. Errors follow
kafka-python 2.1+: by default the call raises the first per-topic
``KafkaError`` (after every topic was tried); with ``raise_errors=False`` it
returns ``{topic: KafkaError | None}``. TOPIC_ALREADY_EXISTS is a KafkaError with
``code == ErrorCode.TOPIC_ALREADY_EXISTS``. Group calls find each group's
coordinator (FindCoordinator) and retry there on NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS until the timeout.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Mapping, TypeVar

from odradek.protocol.apis import alter_client_quotas as _alter_client_quotas
from odradek.protocol.apis import create_partitions as _create_partitions
from odradek.protocol.apis import create_topics as _create_topics
from odradek.protocol.apis import delete_groups as _delete_groups
from odradek.protocol.apis import delete_topics as _delete_topics
from odradek.protocol.apis import describe_client_quotas as _describe_client_quotas
from odradek.protocol.apis import describe_configs as _describe_configs
from odradek.protocol.apis import incremental_alter_configs as _incremental_alter_configs
from odradek.protocol.apis import describe_groups as _describe_groups
from odradek.protocol.apis import list_groups as _list_groups
from odradek.protocol.apis import offset_commit as _offset_commit
from odradek.protocol.apis import offset_delete as _offset_delete
from odradek.protocol.apis import offset_fetch as _offset_fetch
from odradek.protocol.errors import ErrorCode, KafkaError

from .assignors import Assignment, Subscription
from .cluster import ClusterMetadata, NodePool
from .config import ClientConfig
from .group_membership import find_coordinator
from .offset_commits import offsets_body
from .partition_admin import PartitionAdmin
from .structs import (
    ConfigEntry,
    GroupDescription,
    KafkaTimeoutError,
    MemberDescription,
    NewPartitions,
    NewTopic,
    OffsetAndMetadata,
    TopicPartition,
)

K = TypeVar("K")  # the key of a per-resource result map

_RETRY_CODES = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})
_COORD_RETRY = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION,
                          ErrorCode.REQUEST_TIMED_OUT})


# where each controller request's response lists its topics' results
_TOPIC_RESULTS = {_create_topics: "topics", _delete_topics: "responses", _create_partitions: "results"}

_RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8}
_SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


class AdminClient(PartitionAdmin):
    """Topic and cluster administration (thread-safe: one call at a time)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **configs: Any) -> None:
        self.config = cfg = ClientConfig("admin", config, **configs)
        if cfg["client.id"] is None:
            cfg._values["client.id"] = "odradek-admin"
        self._cluster = ClusterMetadata(cfg)
        self._pool = NodePool(self._cluster)
        self._lock = threading.Lock()

    # -- controller requests ----------------------------------------------------------

    def _controller_call(self, api, names: list[str], build_body, timeout_ms: int,
                         ) -> dict[str, KafkaError | None]:
        """Send ``build_body(names)`` to the controller, retrying topics that hit NOT_CONTROLLER."""
        results: dict[str, KafkaError | None] = {}
        pending = list(names)
        deadline = time.monotonic() + max(timeout_ms, self.config["request.timeout.ms"]) / 1000.0
        backoff = self.config["retry.backoff.ms"] / 1000.0
        cluster = self._cluster
        refresh = True
        while pending:
            if refresh:
                try:
                    cluster.refresh([])
                except KafkaError:
                    pass
            controller = cluster.controller_id
            retry: list[str] = []
            if controller < 0:
                retry = pending
            else:
                try:
                    conn = self._pool.get(controller)
                    resp = conn.request(api, build_body(pending), version=conn.version_for(api),
                                        timeout=timeout_ms / 1000.0 + self.config["request.timeout.ms"] / 1000.0)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    self._pool.drop(controller, exc)
                    retry = pending
                else:
                    entries = resp[_TOPIC_RESULTS[api]]
                    answered = set()
                    for t in entries:
                        answered.add(t.name)
                        code = t.error_code
                        if code in _RETRY_CODES:
                            retry.append(t.name)
                        elif code == ErrorCode.NONE:
                            results[t.name] = None
                        else:
                            msg = getattr(t, "error_message", None)
                            results[t.name] = KafkaError(code, f"{t.name}: {msg}" if msg else t.name)
                    retry += [n for n in pending if n not in answered and n not in results]
            pending = retry
            refresh = True
            if pending:
                if time.monotonic() + backoff > deadline:
                    for n in pending:
                        results[n] = KafkaTimeoutError(f"{api.NAME} for {n!r}: controller not reachable")
                    break
                time.sleep(backoff)
        return results

    @staticmethod
    def _finish(results: dict[K, KafkaError | None], raise_errors: bool) -> dict[K, KafkaError | None]:
        if raise_errors:
            for err in results.values():
                if err is not None:
                    raise err
        return results

    def create_topics(self, new_topics: Iterable[NewTopic], timeout_ms: int | None = None,
                      validate_only: bool = False, raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Create topics on the controller; see the module doc for the error behaviour."""
        topics = {t.name: t for t in new_topics}
        timeout_ms = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms

        def body(names: list[str]) -> dict:
            return {"topics": [{
                "name": n,
                "num_partitions": topics[n].num_partitions if not topics[n].replica_assignments else -1,
                "replication_factor": topics[n].replication_factor if not topics[n].replica_assignments else -1,
                "assignments": [{"partition_index": p, "broker_ids": list(r)}
                                for p, r in sorted(topics[n].replica_assignments.items())],
                "configs": [{"name": k, "value": None if v is None else str(v)}
                            for k, v in topics[n].topic_configs.items()],
            } for n in names], "timeout_ms": timeout_ms, "validate_only": validate_only}

        with self._lock:
            return self._finish(self._controller_call(_create_topics, list(topics), body, timeout_ms), raise_errors)

    def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Delete topics through the controller."""
        names = list(topics)
        timeout_ms = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms

        def body(pending: list[str]) -> dict:
            return {"topic_names": pending, "topics": [{"name": n} for n in pending], "timeout_ms": timeout_ms}

        with self._lock:
            return self._finish(self._controller_call(_delete_topics, names, body, timeout_ms), raise_errors)

    def create_partitions(self, topic_partitions: Mapping[str, NewPartitions], timeout_ms: int | None = None,
                          validate_only: bool = False, raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Grow topics through the controller (CreatePartitions); errors as ``create_topics``'."""
        timeout_ms = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms

        def assignments(grow: NewPartitions) -> list[dict] | None:
            return None if grow.new_assignments is None else [{"broker_ids": r} for r in grow.new_assignments]

        def body(names: list[str]) -> dict:
            return {"topics": [{"name": n, "count": topic_partitions[n].total_count,
                                "assignments": assignments(topic_partitions[n])} for n in names],
                    "timeout_ms": timeout_ms, "validate_only": validate_only}

        with self._lock:
            return self._finish(self._controller_call(_create_partitions, list(topic_partitions), body, timeout_ms),
                                raise_errors)

    # -- metadata views ---------------------------------------------------------------

    def list_topics(self) -> list[str]:
        with self._lock:
            self._cluster.refresh(all_topics=True, allow_auto_create=False)
            return sorted(t for t, tm in self._cluster.topics.items() if tm.error == ErrorCode.NONE)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """kafka-python's shape: [{topic, error_code, is_internal, partitions: [{partition, leader, replicas, isr, ...}]}],
        and each topic's ``topic_id`` (a ``uuid.UUID``, None where the broker sent none)."""
        with self._lock:
            if topics is None:
                self._cluster.refresh(all_topics=True, allow_auto_create=False)
                names = sorted(self._cluster.topics)
            else:
                names = list(topics)
                self._cluster.refresh(names, allow_auto_create=False)
            out = []
            for name in names:
                tm = self._cluster.topics.get(name)
                if tm is None:
                    out.append({"topic": name, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                "is_internal": False, "partitions": []})
                    continue
                out.append({
                    "topic": name, "error_code": int(tm.error), "is_internal": tm.is_internal, "topic_id": tm.topic_id,
                    "partitions": [{
                        "partition": p.partition, "error_code": int(p.error), "leader": p.leader,
                        "leader_epoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                    } for _, p in sorted(tm.partitions.items())],
                })
            return out

    def describe_cluster(self) -> dict[str, Any]:
        with self._lock:
            self._cluster.refresh([])
            c = self._cluster
            return {
                "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                            for _, b in sorted(c.brokers.items())],
                "controller_id": c.controller_id,
                "cluster_id": c.cluster_id,
            }

    def describe_configs(self, resources: Iterable[tuple[str, str]], include_synonyms: bool = False
                         ) -> dict[tuple[str, str], list[ConfigEntry] | KafkaError]:
        """DescribeConfigs of ("topic", name), ("broker", id or "" for the cluster default) or
        ("broker_logger", id) resources: {resource: its ConfigEntrys, or the KafkaError it got}.
        A broker's own configs are asked of that broker, everything else of any broker."""
        out: dict[tuple[str, str], list[ConfigEntry] | KafkaError] = {}
        for kind, name in resources:
            body = {"resources": [{"resource_type": _RESOURCE_TYPES[kind], "resource_name": name,
                                   "configuration_keys": None}], "include_synonyms": include_synonyms}
            [r] = self._call(_describe_configs, body, self._resource_nodes(kind, name)).results
            if r.error_code != ErrorCode.NONE:
                out[(kind, name)] = KafkaError(ErrorCode(r.error_code), r.error_message or f"{kind} {name!r}")
                continue
            out[(kind, name)] = [ConfigEntry(c.name, c.value, _SOURCE_NAMES.get(c.config_source, "UNKNOWN"),
                                             c.is_sensitive, c.read_only,
                                             tuple((s.name, s.value, _SOURCE_NAMES.get(s.source, "UNKNOWN"))
                                                   for s in c.synonyms)) for c in r.configs]
        return out

    def incremental_alter_configs(self, resource: tuple[str, str], set_configs: Mapping[str, str],
                                  delete_configs: Iterable[str] = (), validate_only: bool = False) -> None:
        """IncrementalAlterConfigs of one ("topic", name) or ("broker", id) resource: SET
        ``set_configs``, DELETE ``delete_configs``; KafkaError with the broker's message if refused."""
        kind, name = resource
        configs = [{"name": k, "config_operation": 0, "value": v} for k, v in set_configs.items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete_configs]
        body = {"resources": [{"resource_type": _RESOURCE_TYPES[kind], "resource_name": name, "configs": configs}],
                "validate_only": validate_only}
        [r] = self._call(_incremental_alter_configs, body, self._resource_nodes(kind, name)).responses
        if r.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(r.error_code), r.error_message or f"{kind} {name!r}")

    def _call(self, api: Any, body: dict[str, Any], nodes: Callable[[], Iterable[int]],
              moved: Callable[[Any], str | None] | None = None, timeout_ms: int | None = None) -> Any:
        """One admin request to the first of ``nodes()`` that answers (``NodePool.call``), within
        request.timeout.ms (or ``timeout_ms``), retried after retry.backoff.ms."""
        with self._lock:
            return self._pool.call(api, body, nodes, (timeout_ms or self.config["request.timeout.ms"]) / 1000.0,
                                   self.config["retry.backoff.ms"] / 1000.0, moved=moved)

    def _resource_nodes(self, kind: str, name: str) -> Callable[[], list[int]]:
        """Where a config resource's request goes: a broker's own configs to that broker, the
        rest (topics, the cluster default) to any broker."""
        if kind != "topic" and name != "":
            return lambda: [int(name)]
        return lambda: sorted(self._cluster.brokers)

    def broker_api_versions(self) -> dict[int, tuple[Any, dict[int, tuple[int, int]]]]:
        """{node id: (broker metadata, {api key: (min, max)})}: what each live broker's ApiVersions
        answer advertised (kafka-broker-api-versions.sh); a broker that cannot be reached is
        left out and its error raised once every other broker was asked."""
        out: dict[int, tuple[Any, dict[int, tuple[int, int]]]] = {}
        failed: KafkaError | None = None
        with self._lock:
            self._cluster.refresh([])
            for node, broker in sorted(self._cluster.brokers.items()):
                try:
                    out[node] = (broker, dict(self._pool.get(node).api_versions))
                except KafkaError as exc:
                    failed = exc
        if failed is not None and not out:
            raise failed
        return out

    # -- consumer groups ----------------------------------------------------------------

    def _group_call(self, group_id: str, api, body: dict, error_of) -> Any:
        """Send ``body`` to ``group_id``'s coordinator; retry while ``error_of(resp)`` is a coordinator error."""
        timeout = self.config["request.timeout.ms"] / 1000.0
        deadline = time.monotonic() + timeout
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while True:
            node = -1
            try:
                node, _host, _port = find_coordinator(self._cluster, self._pool, group_id,
                                                      max(0.001, deadline - time.monotonic()))
                conn = self._pool.get(node)
                resp = conn.request(api, body, version=conn.version_for(api, api.MAX_VERSION))
                code = ErrorCode(error_of(resp))
                if code not in _COORD_RETRY:
                    return node, resp
                last: KafkaError = KafkaError(code, f"{api.NAME} for group {group_id!r}")
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, KafkaTimeoutError):
                    raise
                if node >= 0:
                    self._pool.drop(node, exc)
                last = exc
            if time.monotonic() + backoff >= deadline:
                raise KafkaTimeoutError(f"{api.NAME} for group {group_id!r} did not complete ({last})")
            time.sleep(backoff)

    def list_consumer_groups(self) -> list[tuple[str, str]]:
        """[(group_id, protocol_type)] over every broker (each lists the groups it coordinates)."""
        with self._lock:
            self._cluster.refresh([])
            out: dict[str, str] = {}
            for node in sorted(self._cluster.brokers):
                try:
                    conn = self._pool.get(node)
                    resp = conn.request(_list_groups, {"states_filter": []},
                                        version=conn.version_for(_list_groups, _list_groups.MAX_VERSION))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    self._pool.drop(node, exc)
                    raise KafkaError(exc.code, f"ListGroups on broker {node}: {exc}") from None
                if resp.error_code != ErrorCode.NONE:
                    raise KafkaError(resp.error_code, f"ListGroups on broker {node}")
                for g in resp.groups:
                    out[g.group_id] = g.protocol_type
            return sorted(out.items())

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """State, protocol and members (client id, host, subscription and assignment decoded) per group."""
        out = []
        with self._lock:
            for gid in group_ids:
                node, resp = self._group_call(gid, _describe_groups, {"groups": [gid],
                                                                      "include_authorized_operations": False},
                                              lambda r: r.groups[0].error_code if r.groups else 0)
                g = resp.groups[0]
                if g.error_code != ErrorCode.NONE:
                    raise KafkaError(g.error_code, f"DescribeGroups {gid!r}")
                members = []
                for m in g.members:
                    topics: tuple[str, ...] = ()
                    assignment: tuple[TopicPartition, ...] = ()
                    if g.protocol_type == "consumer":
                        try:
                            topics = tuple(Subscription.decode(m.member_metadata).topics) if m.member_metadata else ()
                            assignment = tuple(Assignment.decode(m.member_assignment).partitions)
                        except ValueError:
                            pass
                    members.append(MemberDescription(m.member_id, getattr(m, "group_instance_id", None),
                                                     m.client_id, m.client_host, topics, assignment))
                out.append(GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                                            tuple(members), node, int(g.error_code)))
        return out

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                                    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group_id`` (all of them, or of ``partitions``; uncommitted ones left out)."""
        if partitions is None:
            topics = None
        else:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        with self._lock:
            _node, resp = self._group_call(group_id, _offset_fetch, {"group_id": group_id, "topics": topics},
                                           lambda r: r.error_code or 0)
        if resp.error_code:
            raise KafkaError(resp.error_code, f"OffsetFetch for group {group_id!r}")
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    raise KafkaError(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "", p.committed_leader_epoch)
        return dict(sorted(out.items()))

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any],
                                     raise_errors: bool = True) -> dict[TopicPartition, KafkaError | None]:
        """Commit ``offsets`` for an inactive group (OffsetCommit with generation -1, like Kafka's admin)."""
        oms = {TopicPartition(*tp): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
               for tp, v in offsets.items()}
        body = {"group_id": group_id, "generation_id": -1, "member_id": "", "group_instance_id": None,
                "retention_time_ms": -1, "topics": offsets_body(oms)}

        def first_error(r: Any) -> int:
            return next((p.error_code for t in r.topics for p in t.partitions if p.error_code in _COORD_RETRY), 0)

        with self._lock:
            _node, resp = self._group_call(group_id, _offset_commit, body, first_error)
        results: dict[TopicPartition, KafkaError | None] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                results[tp] = None if p.error_code == ErrorCode.NONE else KafkaError(
                    p.error_code, f"{group_id}: {tp.topic}-{tp.partition}")
        return self._finish(results, raise_errors)

    def delete_consumer_groups(self, group_ids: Iterable[str], raise_errors: bool = True
                               ) -> dict[str, KafkaError | None]:
        """Delete empty groups: {group: None | KafkaError (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...)}."""
        results: dict[str, KafkaError | None] = {}
        with self._lock:
            for gid in group_ids:
                _node, resp = self._group_call(gid, _delete_groups, {"groups_names": [gid]},
                                               lambda r: r.results[0].error_code if r.results else 0)
                code = resp.results[0].error_code if resp.results else ErrorCode.UNKNOWN_SERVER_ERROR
                results[gid] = None if code == ErrorCode.NONE else KafkaError(code, f"group {gid!r}")
        return self._finish(results, raise_errors)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                                      ) -> dict[TopicPartition, KafkaError | None]:
        """Delete a group's committed offsets (OffsetDelete): {partition: None | KafkaError
        (GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION, ...)}; a group-level error
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) raises KafkaError."""
        topics: dict[str, list[dict]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        body = {"group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        with self._lock:
            _node, resp = self._group_call(group_id, _offset_delete, body, lambda r: r.error_code)
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code), f"group {group_id!r}")
        return {TopicPartition(t.name, p.partition_index):
                None if p.error_code == ErrorCode.NONE else KafkaError(ErrorCode(p.error_code), f"{t.name}-{p.partition_index}")
                for t in resp.topics for p in t.partitions}

    # -- users' SCRAM credentials (client/scram_admin.py) --------------------------------

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, raise_errors: bool = True
                                        ) -> dict[str, Any]:
        """{user: [ScramCredentialInfo(mechanism, iterations), ...]} for ``users`` (None: every user
        with a credential); a per-user error raises, or with ``raise_errors=False`` is the value."""
        from .scram_admin import ScramAdmin
        with self._lock:
            results = ScramAdmin(self._cluster, self._pool, self.config["request.timeout.ms"] / 1000.0,
                                 self.config["retry.backoff.ms"] / 1000.0).describe(users)
        if raise_errors:
            self._finish({u: r for u, r in results.items() if isinstance(r, KafkaError)}, True)
        return results

    def alter_user_scram_credentials(self, alterations: Iterable[Any], raise_errors: bool = True
                                     ) -> dict[str, KafkaError | None]:
        """Apply ``UserScramCredentialUpsertion``/``UserScramCredentialDeletion``s (client/scram_admin.py)
        on the controller; the password is sent only as a salted hash. {user: None | KafkaError}."""
        from .scram_admin import ScramAdmin
        with self._lock:
            results = ScramAdmin(self._cluster, self._pool, self.config["request.timeout.ms"] / 1000.0,
                                 self.config["retry.backoff.ms"] / 1000.0).alter(alterations)
        return self._finish(results, raise_errors)

    # -- client quotas (client/quota_admin.py) ---------------------------------------------

    def describe_client_quotas(self, components: Iterable[Any] = (), strict: bool = False
                               ) -> dict[Any, dict[str, float]]:
        """{ClientQuotaEntity: {key: value}} of the entities the ``ClientQuotaFilterComponent``s match."""
        from . import quota_admin as qa
        resp = self._call(_describe_client_quotas, qa.describe_body(components, strict), lambda: sorted(self._cluster.brokers))
        return qa.describe_result(resp)

    def alter_client_quotas(self, alterations: Iterable[Any], validate_only: bool = False,
                            raise_errors: bool = True) -> dict[Any, KafkaError | None]:
        """Apply ``ClientQuotaAlteration``s: {ClientQuotaEntity: None | KafkaError}."""
        from . import quota_admin as qa
        resp = self._call(_alter_client_quotas, qa.alter_body(alterations, validate_only), lambda: sorted(self._cluster.brokers))
        return self._finish(qa.alter_result(resp), raise_errors)

    # -- ACLs (client/acl_admin.py) ---------------------------------------------------------

    def _acl_admin(self) -> Any:
        from .acl_admin import AclAdmin
        return AclAdmin(self._cluster, self._pool, self.config["request.timeout.ms"] / 1000.0,
                        self.config["retry.backoff.ms"] / 1000.0)

    def describe_acls(self, acl_filter: Any) -> list[Any]:
        """The ``AclBinding``s matching an ``AclBindingFilter`` (odradek.protocol.acl)."""
        with self._lock:
            return self._acl_admin().describe(acl_filter)

    def create_acls(self, acls: Iterable[Any], raise_errors: bool = True) -> dict[Any, KafkaError | None]:
        """Create ``AclBinding``s: {binding: None | KafkaError}."""
        with self._lock:
            results = self._acl_admin().create(list(acls))
        return self._finish(results, raise_errors)

    def delete_acls(self, acl_filters: Iterable[Any]) -> list[tuple[Any, list[Any], KafkaError | None]]:
        """[(filter, the AclBindings it removed, None | KafkaError)] per ``AclBindingFilter``."""
        with self._lock:
            return self._acl_admin().delete(list(acl_filters))

    # -- delegation tokens (client/token_admin.py) ------------------------------------------

    def _token_admin(self) -> Any:
        from .token_admin import TokenAdmin
        return TokenAdmin(self._cluster, self._pool, self.config["request.timeout.ms"] / 1000.0,
                          self.config["retry.backoff.ms"] / 1000.0)

    def create_delegation_token(self, renewers: Iterable[str] = (), max_lifetime_ms: int = -1) -> Any:
        """A ``DelegationToken`` owned by this client's principal (renewers as ``User:name``)."""
        with self._lock:
            return self._token_admin().create(renewers, max_lifetime_ms)

    def renew_delegation_token(self, hmac: bytes, renew_time_period_ms: int = -1) -> int:
        """The token's new expiry timestamp (ms)."""
        with self._lock:
            return self._token_admin().renew(hmac, renew_time_period_ms)

    def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        """The token's new expiry timestamp (ms); a negative period expires it at once."""
        with self._lock:
            return self._token_admin().expire(hmac, expiry_time_period_ms)

    def describe_delegation_token(self, owners: Iterable[str] | None = None) -> list[Any]:
        """The ``DelegationToken``s this principal may see, of ``owners`` (None: every owner)."""
        with self._lock:
            return self._token_admin().describe(owners)

    def close(self) -> None:
        with self._lock:
            self._pool.close()
            self._cluster.close()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
