"""``odradek configs --bootstrap-server``: kafka-configs.sh's admin-API mode: users' SCRAM
credentials, user / client-id / <user, client-id> quotas (DescribeClientQuotas,
AlterClientQuotas), and ``--describe [--all]`` / ``--alter`` of topics and brokers.

Invariant: receives a request already parsed and checked by ``odradek.zk.configs_cli`` (plain
attributes: action, entity_type, entity_name, with_clients, client_name, to_add, to_delete,
scram, bootstrap_server, command_config) and talks to the cluster only through ``AdminClient`` configured from
``--command-config`` (security.protocol, sasl.*, ssl.*). Output lines are kafka-configs.sh's;
a password is never printed; every error is one ``Error: ...`` line and exit code 1.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .quota_admin import CLIENT_ID, USER, ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilterComponent
from .scram_admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion
from .tools import ToolError, properties_file, run_tool

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
EXCEPTION_NAMES = {ErrorCode.RESOURCE_NOT_FOUND: "ResourceNotFoundException",
                   ErrorCode.DUPLICATE_RESOURCE: "DuplicateResourceException",
                   ErrorCode.UNACCEPTABLE_CREDENTIAL: "UnacceptableCredentialException",
                   ErrorCode.UNSUPPORTED_SASL_MECHANISM: "UnsupportedSaslMechanismException",
                   ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
                   ErrorCode.INVALID_REQUEST: "InvalidRequestException"}


def run(request: Any) -> int:
    return run_tool(lambda: _run(request))


def _run(request: Any) -> int:
    if request.entity_type in ("topics", "brokers"):
        config = {**properties_file(request.command_config), "bootstrap.servers": request.bootstrap_server}
        with AdminClient(config) as admin:
            if request.action == "describe":
                return describe_configs(admin, request.entity_type, request.entity_name, request.describe_all)
            return alter_configs(admin, request)
    config = {**properties_file(request.command_config), "bootstrap.servers": request.bootstrap_server}
    with AdminClient(config) as admin:
        if request.action == "describe":
            describe_quotas(admin, request)
            # SCRAM credentials too, unless clients or a default are described (kafka-configs)
            if request.entity_type == "users" and not request.with_clients and request.entity_name != "":
                return describe(admin, request.entity_name)
            return 0
        return alter_user_or_client(admin, request)


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


# ---------------------------------------------------------------- quotas

def _types_and_names(request: Any) -> tuple[list[str], list[str]]:
    types = [USER if request.entity_type == "users" else CLIENT_ID] + ([CLIENT_ID] if request.with_clients else [])
    return types, request.entity_names()


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it (what kafka-configs shows): 1024.0, 1.0E7."""
    if value != 0 and not 1e-3 <= abs(value) < 1e7:
        mantissa, exponent = f"{value:.16E}".split("E")
        mantissa = mantissa.rstrip("0")
        return f"{mantissa}{'0' if mantissa.endswith('.') else ''}E{int(exponent)}"
    return repr(float(value))


def _quota_components(request: Any) -> list[ClientQuotaFilterComponent]:
    types, names = _types_and_names(request)
    out = []
    for i, kind in enumerate(types):
        name = names[i] if i < len(names) else None
        out.append(ClientQuotaFilterComponent.of_entity_type(kind) if name is None else
                   ClientQuotaFilterComponent.of_default_entity(kind) if name == "" else
                   ClientQuotaFilterComponent.of_entity(kind, name))
    return out


def quota_line(entity: ClientQuotaEntity, values: dict[str, float]) -> str:
    kinds = {USER: "user-principal", CLIENT_ID: "client-id"}
    parts = [f"{kinds.get(t, t)} '{n}'" if n is not None else f"the default {kinds.get(t, t)}" for t, n in entity.entries]
    return f"Quota configs for {', '.join(parts)} are {', '.join(f'{k}={java_double(v)}' for k, v in values.items())}"


def describe_quotas(admin: AdminClient, request: Any) -> None:
    """kafka-configs' describeQuotaConfigs: every entity the (strict) filter matches."""
    for entity, values in admin.describe_client_quotas(_quota_components(request), strict=True).items():
        print(quota_line(entity, values))


def alter_user_or_client(admin: AdminClient, request: Any) -> int:
    """kafka-configs' --alter of users / clients: quotas, or (a user alone) SCRAM credentials."""
    keys = [*request.to_add, *request.scram, *request.to_delete]
    unknown = sorted(k for k in keys if k not in SCRAM_MECHANISMS and k not in QUOTA_CONFIGS)
    scram = sorted(k for k in keys if k in SCRAM_MECHANISMS)
    quotas = [k for k in keys if k in QUOTA_CONFIGS]
    if request.entity_type == "clients" or request.with_clients:
        if unknown or scram:
            raise ToolError("Only quota configs can be altered for 'clients' using --bootstrap-server. "
                            f"Unexpected config names: {', '.join(unknown + scram)}")
    elif unknown:
        raise ToolError("Only quota and SCRAM credential configs can be altered for 'users' using "
                        f"--bootstrap-server. Unexpected config names: {', '.join(unknown)}")
    elif scram and request.entity_name == "":
        raise ToolError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                        "Credentials using --bootstrap-server.")
    elif scram and quotas:
        raise ToolError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                        "using --bootstrap-server.")
    if quotas:
        alter_quotas(admin, request)
    else:
        alter(admin, request)
    return 0


def alter_quotas(admin: AdminClient, request: Any) -> None:
    components = _quota_components(request)
    old = next(iter(admin.describe_client_quotas(components, strict=True).values()), {})
    missing = [k for k in request.to_delete if k not in old]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    ops: list[tuple[str, float | None]] = []
    for key, value in request.to_add.items():
        try:
            ops.append((key, float(value)))
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: {value}") from None
    ops += [(key, None) for key in request.to_delete]
    types, names = _types_and_names(request)
    entity = ClientQuotaEntity.of({t: (n or None) for t, n in zip(types, names)})
    try:
        admin.alter_client_quotas([ClientQuotaAlteration(entity, tuple(ops))])
    except KafkaError as e:
        raise ToolError(f"{EXCEPTION_NAMES.get(e.code, e.code.name)}: {e.message}") from None
    print(f"Completed updating config for {request.entity_type[:-1]} {request.entity_name}." if request.entity_name
          else f"Completed updating default config for {request.entity_type} in the cluster.")


def alter(admin: AdminClient, request: Any) -> int:
    user = request.entity_name
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
