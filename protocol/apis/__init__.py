"""One module per Kafka API; ``API_BY_KEY`` maps an API key to its module.

Invariant: every module listed here exposes ``API_KEY``, ``NAME``, ``MIN_VERSION``,
``MAX_VERSION`` (the range the broker advertises), ``FLEXIBLE_FROM`` and the
``Request`` / ``Response`` messages; keys are unique.
"""
from __future__ import annotations

from types import ModuleType

from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_isr,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_delegation_token,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_delegation_token,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    expire_delegation_token,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    renew_delegation_token,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_features,
    update_metadata,
    write_txn_markers,
)

ALL_APIS: tuple[ModuleType, ...] = (
    produce, fetch, list_offsets, metadata, leader_and_isr, stop_replica, update_metadata,
    controlled_shutdown, offset_commit, offset_fetch, find_coordinator, join_group,
    heartbeat, leave_group, sync_group, describe_groups, list_groups, api_versions,
    create_topics, delete_topics, init_producer_id, offset_for_leader_epoch,
    describe_configs, create_partitions, delete_groups, add_partitions_to_txn,
    add_offsets_to_txn, end_txn, write_txn_markers, txn_offset_commit, sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials, alter_user_scram_credentials,
    describe_acls, create_acls, delete_acls, describe_cluster, offset_delete,
    elect_leaders, alter_configs, incremental_alter_configs, describe_log_dirs,
    alter_partition_reassignments, list_partition_reassignments, delete_records, alter_replica_log_dirs,
    create_delegation_token, renew_delegation_token, expire_delegation_token, describe_delegation_token,
    describe_producers, update_features, alter_isr,
    describe_client_quotas, alter_client_quotas,
)

API_BY_KEY: dict[int, ModuleType] = {api.API_KEY: api for api in ALL_APIS}
API_BY_NAME: dict[str, ModuleType] = {api.NAME: api for api in ALL_APIS}

assert len(API_BY_KEY) == len(ALL_APIS), "duplicate API key"

__all__ = ["API_BY_KEY", "API_BY_NAME", "ALL_APIS"] + [api.__name__.rsplit(".", 1)[1]
                                                        for api in ALL_APIS]
