"""ZooKeeper client security as Kafka 2.8 sets it up: SASL DIGEST-MD5 from JAAS, and znode ACLs.

Invariants:
- the SASL identity comes only from the JAAS file named in ``KAFKA_OPTS``
  (``-Djava.security.auth.login.config=...``), section ``Client`` or the one named by
  ``-Dzookeeper.sasl.clientconfig``, exactly as Kafka's ``JaasUtils.isZkSaslEnabled``
  decides: no file or no such section means no SASL; a named file that is missing or
  unparsable, or the section with ``-Dzookeeper.sasl.client=false``, is a ``ZkSecurityError``
  (one line naming the file), never a silent fallback to an anonymous session;
- with secure ACLs on, EVERY znode a client of ``new_kazoo`` creates without an explicit
  ACL (create, makepath parents, ensure_path, transactions) gets Kafka's
  ``ZkData.defaultAcls(isSecure=true, path)``: the creator's authenticated identity gets
  ALL, the world READ, except under ``SENSITIVE_ROOT_PATHS`` (no world access at all).
  Without them a znode is world-writable, as Kafka's are; an ACL given explicitly is kept;
- secure ACLs without SASL are refused (``ZkSecurityError``), as Kafka refuses
  ``zookeeper.set.acl=true`` without a ZooKeeper login;
- ``start_kazoo`` fails at once with ``ZkAuthenticationError`` when ZooKeeper rejects the
  login, instead of waiting out the connection timeout.
"""
from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import AuthFailedError, ConnectionClosedError, ConnectionLoss, NoNodeError
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from odradek.protocol.jaas import (LOGIN_CONFIG_PROPERTY, JaasError, kafka_opts_properties, load_jaas_file,
                                   login_config_file)

SASL_CLIENT_PROPERTY = "zookeeper.sasl.client"
CONTEXT_NAME_PROPERTY = "zookeeper.sasl.clientconfig"
DEFAULT_CONTEXT_NAME = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
SASL_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
# Kafka 2.8's ZkData.SensitiveRootPaths: /config/users (SCRAM credentials), /config/brokers
# (dynamic broker configs, passwords among them), /delegation_token/tokens.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")

AclChooser = Callable[[str], list[ACL]]


class ZkSecurityError(Exception):
    """ZooKeeper security is misconfigured or refused (one-line message for the user)."""


class ZkAuthenticationError(ZkSecurityError):
    """ZooKeeper rejected the SASL login."""


# ---------------------------------------------------------------- ACLs

def is_sensitive_path(path: str) -> bool:
    """Kafka's ``ZkData.sensitivePath``: a prefix match on SENSITIVE_ROOT_PATHS."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    """Kafka's ``ZkData.defaultAcls``: creator ALL (+ world READ unless sensitive), or open."""
    if not secure:
        return list(OPEN_ACL_UNSAFE)
    return list(CREATOR_ALL_ACL) + ([] if is_sensitive_path(path) else list(READ_ACL_UNSAFE))


class _AclTransaction(TransactionRequest):
    """A transaction whose creates without an explicit ACL get the client's per-path ACL."""

    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):  # type: ignore[override]
        if acl is None and self.client.acl_for is not None:
            acl = self.client.acl_for(path)
        return super().create(path, value, acl, ephemeral, sequence)


class AclKazooClient(KazooClient):
    """A KazooClient whose creates without an explicit ACL use ``acl_for(path)`` (per path,
    makepath parents and ensure_path included: each znode gets the ACL of its own path)."""

    def __init__(self, *args: Any, acl_for: AclChooser | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.acl_for = acl_for

    def create_async(self, path, value=b"", acl=None, ephemeral=False, sequence=False,  # type: ignore[override]
                     makepath=False, include_data=False):
        if acl or self.acl_for is None:
            return super().create_async(path, value, acl, ephemeral, sequence, makepath, include_data)
        own_acl = self.acl_for(path)

        def attempt():
            return KazooClient.create_async(self, path, value, own_acl, ephemeral, sequence, False,
                                            include_data)
        if not makepath:
            return attempt()
        # kazoo's makepath would give the parents this znode's ACL: create them one by one
        # (ensure_path_async calls create_async per missing parent, with acl None).
        result = self.handler.async_result()
        parent = path.rstrip("/") if sequence and path.endswith("/") else posixpath.split(path)[0]

        def finish(res) -> None:
            try:
                result.set(res.get())
            except Exception as exc:
                result.set_exception(exc)

        def parent_ready(res) -> None:
            try:
                res.get()
            except Exception as exc:
                result.set_exception(exc)
                return
            attempt().rawlink(finish)

        def first(res) -> None:
            try:
                result.set(res.get())
            except NoNodeError:
                self.ensure_path_async(parent).rawlink(parent_ready)
            except Exception as exc:
                result.set_exception(exc)

        attempt().rawlink(first)
        return result

    def transaction(self):
        return _AclTransaction(self)


# ---------------------------------------------------------------- SASL from KAFKA_OPTS

@dataclass(frozen=True)
class ZkClientSecurity:
    """How a ZooKeeper client authenticates (no ``username``: anonymously)."""

    login_config: str | None = None
    context_name: str = DEFAULT_CONTEXT_NAME
    sasl_client_property: str | None = None
    context_property: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def sasl_enabled(self) -> bool:
        return self.username is not None

    def sasl_options(self) -> dict[str, str] | None:
        """kazoo's ``sasl_options`` (a fresh dict: kazoo adds to it), or None without SASL."""
        if self.username is None:
            return None
        return {"mechanism": "DIGEST-MD5", "username": self.username, "password": self.password or ""}

    def describe(self) -> str:
        """Kafka's ``JaasUtils.zkSecuritySysConfigString``."""
        client = self.sasl_client_property or "default:true"
        context = self.context_property or f"default:{DEFAULT_CONTEXT_NAME}"
        return (f"[{LOGIN_CONFIG_PROPERTY}={self.login_config}, {SASL_CLIENT_PROPERTY}={client}, "
                f"{CONTEXT_NAME_PROPERTY}={context}]")


def zk_client_security(environ: Mapping[str, str] | None = None) -> ZkClientSecurity:
    """The ZooKeeper login that ``KAFKA_OPTS`` of ``environ`` (default: os.environ) asks for."""
    try:
        props = kafka_opts_properties(environ)
    except JaasError as exc:
        raise ZkSecurityError(str(exc)) from None
    base = ZkClientSecurity(login_config=login_config_file(props),
                            context_name=props.get(CONTEXT_NAME_PROPERTY) or DEFAULT_CONTEXT_NAME,
                            sasl_client_property=props.get(SASL_CLIENT_PROPERTY),
                            context_property=props.get(CONTEXT_NAME_PROPERTY))
    if base.login_config is None:
        return base
    try:
        sections = load_jaas_file(base.login_config)
    except JaasError as exc:
        raise ZkSecurityError(f"{exc} (named by KAFKA_OPTS -D{LOGIN_CONFIG_PROPERTY})") from None
    if base.context_name not in sections:
        return base
    where = f"JAAS file {base.login_config}, section {base.context_name}"
    if (base.sasl_client_property or "true").strip().lower() != "true":
        raise ZkSecurityError(f"{where} is present, but system property {SASL_CLIENT_PROPERTY} is set to "
                              f"{base.sasl_client_property}, which disables SASL in the ZooKeeper client")
    modules = sections[base.context_name]
    if not modules:
        raise ZkSecurityError(f"{where} has no login module")
    module = modules[0]
    if module.class_name != DIGEST_LOGIN_MODULE:
        raise ZkSecurityError(f"{where}: login module {module.class_name} is not supported; ZooKeeper "
                              f"SASL here is DIGEST-MD5 with {DIGEST_LOGIN_MODULE}")
    missing = [k for k in ("username", "password") if k not in module.options]
    if missing:
        raise ZkSecurityError(f"{where}: {DIGEST_LOGIN_MODULE} needs option(s) {', '.join(missing)}")
    return ZkClientSecurity(base.login_config, base.context_name, base.sasl_client_property,
                            base.context_property, module.options["username"], module.options["password"])


# ---------------------------------------------------------------- kazoo sessions

def new_kazoo(hosts: str, timeout: float, security: ZkClientSecurity, secure_acls: bool,
              read_only: bool = False) -> AclKazooClient:
    """A (not started) kazoo client logging in as ``security`` says; with ``secure_acls`` every
    znode it creates gets Kafka's secure default ACLs (ZkSecurityError without SASL)."""
    if secure_acls and not security.sasl_enabled:
        raise ZkSecurityError(f"zookeeper.set.acl is true, but ZooKeeper SASL is not configured: no "
                              f"'{security.context_name}' section in a JAAS file named by KAFKA_OPTS "
                              f"{security.describe()}")
    acl_for = (lambda path: default_acls(True, path)) if secure_acls else None
    return AclKazooClient(hosts=hosts, timeout=timeout, read_only=read_only,
                          sasl_options=security.sasl_options(), acl_for=acl_for)


def start_kazoo(kazoo: KazooClient, connect: str, timeout: float, security: ZkClientSecurity) -> None:
    """Start ``kazoo``: kazoo's timeout exception after ``timeout`` s, ZkAuthenticationError as
    soon as ZooKeeper refuses the SASL login (the client is closed in both cases).

    kazoo reports CONNECTED before its SASL exchange, and runs queued requests only after it:
    one request answered (``exists``) proves the login, AuthFailedError disproves it."""
    deadline = time.monotonic() + timeout
    try:
        if not kazoo.start_async().wait(timeout):
            raise kazoo.handler.timeout_exception("Connection time-out")
        if security.sasl_enabled:
            try:
                kazoo.exists_async("/").get(timeout=max(0.1, deadline - time.monotonic()))
            except kazoo.handler.timeout_exception:
                raise ZkAuthenticationError(
                    f"ZooKeeper at {connect} did not complete the SASL (DIGEST-MD5) login of user "
                    f"'{security.username}' within {timeout:g}s: is it configured for SASL (a JAAS "
                    f"Server section and authProvider.1={SASL_AUTH_PROVIDER})?") from None
            except (ConnectionClosedError, ConnectionLoss):
                # ZooKeeper closes the connection of a refused login: the pending request may
                # fail with the close before kazoo has recorded AUTH_FAILED; wait for the verdict
                if _auth_failed(kazoo, min(deadline, time.monotonic() + 2.0)):
                    raise AuthFailedError() from None
                raise
    except AuthFailedError:
        _close_quietly(kazoo)
        raise ZkAuthenticationError(
            f"ZooKeeper at {connect} refused the SASL (DIGEST-MD5) login of user "
            f"'{security.username}' (JAAS file {security.login_config}, section "
            f"{security.context_name})") from None
    except BaseException:
        _close_quietly(kazoo)
        raise


def _auth_failed(kazoo: KazooClient, until: float) -> bool:
    """Whether kazoo records a refused login (KeeperState.AUTH_FAILED) before ``until``."""
    while True:
        if kazoo.client_state == KeeperState.AUTH_FAILED:
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)


def _close_quietly(kazoo: KazooClient) -> None:
    try:
        kazoo.stop()
        kazoo.close()
    except Exception:  # pragma: no cover - already closed
        pass
