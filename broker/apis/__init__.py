"""Handler registry: API key -> the handler module that serves it.

Invariant: the ApiVersions response is built from THIS registry, so the broker
advertises exactly the APIs (and version ranges) it handles; each range is the
handler's own, clamped to what the protocol module can encode. One module per
API; a later issue adds group APIs by listing their modules here.
"""
from __future__ import annotations

import importlib
from types import ModuleType

HANDLER_MODULES: tuple[str, ...] = (
    "produce", "fetch", "list_offsets", "metadata", "leader_and_isr", "stop_replica",
    "update_metadata", "controlled_shutdown", "api_versions", "create_topics", "delete_topics",
    "init_producer_id", "offset_for_leader_epoch",
    "create_partitions", "write_txn_markers",
    # transaction coordinator APIs
    "add_partitions_to_txn", "add_offsets_to_txn", "end_txn",
    # group coordinator APIs
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit",
    "offset_fetch", "list_groups", "describe_groups", "delete_groups", "offset_delete",
    "txn_offset_commit",
    # security
    "sasl_handshake", "sasl_authenticate",
    "describe_user_scram_credentials", "alter_user_scram_credentials",
    "describe_acls", "create_acls", "delete_acls",
    # admin
    "describe_cluster", "describe_configs", "elect_leaders", "alter_configs", "incremental_alter_configs",
    "describe_log_dirs", "alter_partition_reassignments", "list_partition_reassignments",
    "delete_records", "alter_replica_log_dirs", "describe_producers", "update_features", "describe_client_quotas",
    "alter_client_quotas",
    "create_delegation_token", "renew_delegation_token", "expire_delegation_token", "describe_delegation_token",
    # controller APIs of inter.broker.protocol.version 2.7+
    "alter_isr",
)

HANDLERS: dict[int, ModuleType] = {}


def register(module: ModuleType) -> None:
    """Add a handler module (it must define API, MIN_VERSION, MAX_VERSION, handle, error_response)."""
    HANDLERS[module.API.API_KEY] = module


def version_range(module: ModuleType) -> tuple[int, int]:
    """The advertised [min, max] of a handler, clamped to its protocol module."""
    api = module.API
    return max(module.MIN_VERSION, api.MIN_VERSION), min(module.MAX_VERSION, api.MAX_VERSION)


def advertised_api_versions() -> list[dict]:
    """The ``api_keys`` array of an ApiVersions response, sorted by key."""
    out = []
    for key in sorted(HANDLERS):
        lo, hi = version_range(HANDLERS[key])
        out.append({"api_key": key, "min_version": lo, "max_version": hi})
    return out


for _name in HANDLER_MODULES:
    register(importlib.import_module(f"{__name__}.{_name}"))
