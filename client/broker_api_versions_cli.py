"""``odradek broker-api-versions``: each broker's API version ranges, as kafka-broker-api-versions.sh
prints them.

Invariant: read-only; one block per live broker (``host:port (id: N rack: R) -> (...)``) with a
line per API in key order: the broker's range, and the version odradek's client would use with
it (``[usable: N]``, or why none is usable); every API a ZooKeeper-mode Kafka 2.8 broker serves
that this broker does not advertise is listed as UNSUPPORTED, as Kafka's tool does.
"""
from __future__ import annotations

import sys
from typing import Iterable

from odradek.protocol.apis import API_BY_KEY

from .admin import AdminClient
from .tools import ArgParser, properties_file, resolve_bootstrap, run_tool

# Kafka 2.8's API names by key, for every API a ZooKeeper-mode broker may serve (ApiKeys.zkBrokerApis)
KAFKA_2_8_API_NAMES: dict[int, str] = dict(enumerate((
    "Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr", "StopReplica", "UpdateMetadata",
    "ControlledShutdown", "OffsetCommit", "OffsetFetch", "FindCoordinator", "JoinGroup", "Heartbeat",
    "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics",
    "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn",
    "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit", "DescribeAcls", "CreateAcls",
    "DeleteAcls", "DescribeConfigs", "AlterConfigs", "AlterReplicaLogDirs", "DescribeLogDirs",
    "SaslAuthenticate", "CreatePartitions", "CreateDelegationToken", "RenewDelegationToken",
    "ExpireDelegationToken", "DescribeDelegationToken", "DeleteGroups", "ElectLeaders",
    "IncrementalAlterConfigs", "AlterPartitionReassignments", "ListPartitionReassignments", "OffsetDelete",
    "DescribeClientQuotas", "AlterClientQuotas", "DescribeUserScramCredentials", "AlterUserScramCredentials"))) | {
    56: "AlterIsr", 57: "UpdateFeatures", 60: "DescribeCluster", 61: "DescribeProducers"}


def api_line(key: int, advertised: tuple[int, int] | None) -> str:
    name = KAFKA_2_8_API_NAMES.get(key) or getattr(API_BY_KEY.get(key), "NAME", None)
    label = f"{name}({key})" if name else f"UNKNOWN({key})"
    if advertised is None:
        return f"{label}: UNSUPPORTED"
    lo, hi = advertised
    text = f"{label}: {lo}" if lo == hi else f"{label}: {lo} to {hi}"
    api = API_BY_KEY.get(key)
    if api is None:
        return text
    if api.Request.max_version < lo:
        return f"{text} [unusable: node too new]"
    if hi < api.Request.min_version:
        return f"{text} [unusable: node too old]"
    return f"{text} [usable: {min(api.Request.max_version, hi)}]"


def describe(host: str, port: int, node: int, rack: str | None, versions: dict[int, tuple[int, int]]) -> str:
    keys = sorted(set(versions) | set(KAFKA_2_8_API_NAMES))
    lines = ",\n\t".join(api_line(k, versions.get(k)) for k in keys)
    return f"{host}:{port} (id: {node} rack: {rack if rack is not None else 'null'}) -> (\n\t{lines}\n)"


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        ap = ArgParser(prog="odradek broker-api-versions", description=__doc__.split("\n")[0])
        ap.add_argument("--bootstrap-server", dest="bootstrap_server")
        ap.add_argument("--command-config", dest="command_config",
                        help="client properties file (security.protocol, ssl.*, sasl.*)")
        args = ap.parse_args(argv)
        config = {**properties_file(args.command_config), "bootstrap.servers": resolve_bootstrap(args.bootstrap_server),
                  "client.id": "odradek-broker-api-versions"}
        with AdminClient(config) as admin:
            for node, (broker, versions) in admin.broker_api_versions().items():
                print(describe(broker.host, broker.port, node, broker.rack, versions))
        return 0

    return run_tool(body)
