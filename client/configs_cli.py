"""``odradek configs --bootstrap-server``: kafka-configs.sh's admin-API mode: users' SCRAM
credentials, and ``--describe [--all]`` of topics and brokers (DescribeConfigs).

Invariant: receives a request already parsed and checked by ``odradek.zk.configs_cli`` (plain
attributes: action, entity_type, entity_name, to_add, to_delete, scram, bootstrap_server,
command_config) and talks to the cluster only through ``AdminClient`` configured from
``--command-config`` (security.protocol, sasl.*, ssl.*). Output lines are kafka-configs.sh's;
a password is never printed; every error is one ``Error: ...`` line and exit code 1.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .scram_admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion
from .tools import ToolError, properties_file, run_tool

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
EXCEPTION_NAMES = {ErrorCode.RESOURCE_NOT_FOUND: "ResourceNotFoundException",
                   ErrorCode.DUPLICATE_RESOURCE: "DuplicateResourceException",
                   ErrorCode.UNACCEPTABLE_CREDENTIAL: "UnacceptableCredentialException",
                   ErrorCode.UNSUPPORTED_SASL_MECHANISM: "UnsupportedSaslMechanismException",
                   ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException"}


def run(request: Any) -> int:
    return run_tool(lambda: _run(request))


def _run(request: Any) -> int:
    if request.entity_type in ("topics", "brokers"):
        config = {**properties_file(request.command_config), "bootstrap.servers": request.bootstrap_server}
        with AdminClient(config) as admin:
            if request.action == "describe":
                return describe_configs(admin, request.entity_type, request.entity_name, request.describe_all)
            return alter_configs(admin, request)
    if request.entity_type != "users":
        raise ToolError("odradek configs --bootstrap-server describes and alters topics and brokers, and users' "
                        f"SCRAM credentials; use --zookeeper for {request.entity_type}")
    if request.entity_name == "":
        raise ToolError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                        "Credentials using --bootstrap-server.")
    config = {**properties_file(request.command_config), "bootstrap.servers": request.bootstrap_server}
    with AdminClient(config) as admin:
        return describe(admin, request.entity_name) if request.action == "describe" else alter(admin, request)


def describe_line(user: str, found: list[ScramCredentialInfo] | KafkaError) -> str:
    if isinstance(found, KafkaError):
        kind = EXCEPTION_NAMES.get(found.code, found.code.name)
        message = (found.message or "").removeprefix(f"{user}: ")
        return f"Error retrieving SCRAM credential configs for user-principal '{user}': {kind}: {message}"
    infos = ", ".join(f"{i.mechanism}=iterations={i.iterations}" for i in found)
    return f"SCRAM credential configs for user-principal '{user}' are {infos}"


def describe(admin: AdminClient, user: str | None) -> int:
    results = admin.describe_user_scram_credentials(None if user is None else [user], raise_errors=False)
    for name, found in results.items():
        print(describe_line(name, found))
    return 1 if any(isinstance(r, KafkaError) for r in results.values()) else 0


def alter(admin: AdminClient, request: Any) -> int:
    user = request.entity_name
    unknown = sorted(k for k in [*request.to_add, *request.to_delete]
                     if k not in SCRAM_MECHANISMS and k not in QUOTA_CONFIGS)
    if unknown:
        raise ToolError("Only quota and SCRAM credential configs can be altered for 'users' using "
                        f"--bootstrap-server. Unexpected config names: {', '.join(unknown)}")
    quotas = sorted(k for k in [*request.to_add, *request.to_delete] if k in QUOTA_CONFIGS)
    if quotas:
        raise ToolError(f"user quota configs ({', '.join(quotas)}) go through --zookeeper in odradek "
                        "(AlterClientQuotas is not served)")
    alterations: list[Any] = [UserScramCredentialDeletion(user, m) for m in request.to_delete]
    alterations += [UserScramCredentialUpsertion(user, m, password, iterations)
                    for m, (iterations, password) in request.scram.items()]
    admin.alter_user_scram_credentials(alterations)
    print(f"Completed updating config for user {user}.")
    return 0


def describe_configs(admin: AdminClient, entity_type: str, name: str | None, describe_all: bool) -> int:
    """kafka-configs.sh --describe through DescribeConfigs: the dynamic configs (or ``--all``) of a
    topic or broker, every topic or broker (and the cluster default) when no name is given."""
    kind = entity_type[:-1]
    if name is None:
        names = admin.list_topics() if kind == "topic" else [
            str(b["node_id"]) for b in admin.describe_cluster()["brokers"]] + [""]
    else:
        names = [name]
    for entity, found in admin.describe_configs([(kind, n) for n in names], include_synonyms=True).items():
        if isinstance(found, KafkaError):
            raise ToolError(f"{kind} {entity[1]!r}: {found.code.name}: {found.message}")
        if entity[1] == "":
            print(f"Default configs for {entity_type} in the cluster are:")
            dynamic = "DYNAMIC_DEFAULT_BROKER_CONFIG"
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {kind} {entity[1]} are:")
            dynamic = "DYNAMIC_TOPIC_CONFIG" if kind == "topic" else "DYNAMIC_BROKER_CONFIG"
        for e in sorted(found, key=lambda e: e.name):
            if describe_all or e.source == dynamic:
                synonyms = ", ".join(f"{source}:{n}={_shown(v)}" for n, v, source in e.synonyms)
                print(f"  {e.name}={_shown(e.value)} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return 0


def _shown(value: str | None) -> str:
    return "null" if value is None else value


def alter_configs(admin: AdminClient, request: Any) -> int:
    """kafka-configs.sh --alter of a topic or broker through IncrementalAlterConfigs."""
    kind = request.entity_type[:-1]
    try:
        admin.incremental_alter_configs((kind, request.entity_name), request.to_add, request.to_delete)
    except KafkaError as e:
        raise ToolError(f"{kind} {request.entity_name!r}: {e.code.name}: {e.message}") from None
    print(f"Completed updating config for {kind} {request.entity_name}." if request.entity_name else
          f"Completed updating default config for {request.entity_type} in the cluster.")
    return 0
