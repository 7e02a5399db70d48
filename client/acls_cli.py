"""The ``--bootstrap-server`` backend of ``odradek acls`` (the command itself is ``odradek.zk.acls_cli``):
ACLs through a broker's CreateAcls / DescribeAcls / DeleteAcls with odradek's AdminClient.

Invariant: the AdminClient is configured from ``--command-config`` (Kafka's client properties:
security.protocol, sasl.*, ssl.*) plus the bootstrap servers; a broker's refusal
(CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED, INVALID_REQUEST ...) leaves as a ``KafkaError``
and a bad config file or setting as one of ``USER_ERRORS``, both printed as one line by the command.
"""
from __future__ import annotations

from odradek.protocol.acl import AclBinding, AclBindingFilter

from .admin import AdminClient
from .config import ConfigError
from .tools import ToolError, properties_file

USER_ERRORS: tuple[type[Exception], ...] = (ToolError, ConfigError)


class AdminBackend:
    def __init__(self, bootstrap_servers: str, command_config: str | None) -> None:
        config = {**properties_file(command_config), "bootstrap.servers": bootstrap_servers}
        self.admin = AdminClient(config)

    def add(self, bindings: list[AclBinding]) -> None:
        self.admin.create_acls(bindings)

    def remove(self, filters: list[AclBindingFilter]) -> None:
        for _flt, _removed, error in self.admin.delete_acls(filters):
            if error is not None:
                raise error

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self.admin.describe_acls(flt)

    def close(self) -> None:
        self.admin.close()
