"""``odradek configs --bootstrap-server``: kafka-configs.sh's admin-API mode, for users' SCRAM
credentials.

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
    if request.entity_type != "users":
        raise ToolError("odradek configs --bootstrap-server changes users' SCRAM credentials only; "
                        f"use --zookeeper for {request.entity_type}")
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
