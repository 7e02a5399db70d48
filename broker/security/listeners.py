"""What each listener demands of a connection, and what this broker presents to other brokers,
resolved from the configuration once, before the broker binds a port.

Invariant: ``ListenerSecurity.for_listener`` gives every listener its protocol, its TLS server
context (SSL, SASL_SSL) and its SASL settings (SASL_PLAINTEXT, SASL_SSL: enabled mechanisms and
the PLAIN users of its JAAS entry); ``InterBrokerSecurity.from_config`` gives the inter-broker
listener's client side (TLS context per peer host, SASL mechanism and the broker's own
username/password). Any setting that cannot be honoured raises ``SecurityConfigError`` with
one line naming it, so a broker starts with every listener speaking what it says, or not at all.
JAAS entries come, as in Kafka, from ``listener.name.<l>.<mechanism>.sasl.jaas.config``, then
``sasl.jaas.config``, then the ``KafkaServer`` section (``<listener>.KafkaServer`` first) of the
file named by ``-Djava.security.auth.login.config=`` in ``KAFKA_OPTS``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from odradek.protocol import jaas

from ..config.kafka_config import KafkaConfig
from . import tls
from .principal import SslPrincipalMapper


class SecurityConfigError(Exception):
    """A security setting the broker cannot honour (one line)."""


def jaas_entry(cfg: KafkaConfig, listener: str, mechanism: str,
               environ: Mapping[str, str] = os.environ) -> jaas.LoginModule | None:
    """The JAAS login entry for ``mechanism`` on ``listener`` (Kafka's order of precedence)."""
    text = cfg.listener_value(listener, "sasl.jaas.config", mechanism)
    if text:
        try:
            module = jaas.parse_jaas_config(str(text), f"the sasl.jaas.config of listener {listener}")
        except jaas.JaasError as e:
            raise SecurityConfigError(str(e)) from None
        return module
    try:
        path = jaas.login_config_file(jaas.kafka_opts_properties(environ))
        sections = jaas.load_jaas_file(path) if path is not None else {}
    except jaas.JaasError as e:
        raise SecurityConfigError(str(e)) from None
    for name in (f"{listener.lower()}.KafkaServer", "KafkaServer"):
        for module in sections.get(name, []):
            if _module_serves(module.class_name, mechanism):
                return module
    return None


def _module_serves(module: str, mechanism: str) -> bool:
    return module.endswith("PlainLoginModule") if mechanism == "PLAIN" else module.endswith("ScramLoginModule")


@dataclass(frozen=True)
class SaslSettings:
    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    tls_context: tls.ReloadableServerContext | None = None   # for SSL / SASL_SSL
    sasl: SaslSettings | None = None
    principal_mapper: SslPrincipalMapper | None = None

    @classmethod
    def for_listener(cls, cfg: KafkaConfig, listener: str) -> "ListenerSecurity":
        protocol = cfg.security_protocol(listener)

        def get(name: str) -> Any:
            return cfg.listener_value(listener, name)
        context = mapper = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                context = tls.ReloadableServerContext(get)
                mapper = SslPrincipalMapper(str(get("ssl.principal.mapping.rules")))
            except (tls.TlsConfigError, ValueError) as e:
                raise SecurityConfigError(f"listener {listener} ({protocol}): {e}") from None
        sasl = None
        if protocol.startswith("SASL_"):
            mechanisms = list(get("sasl.enabled.mechanisms"))
            users: dict[str, str] = {}
            if "PLAIN" in mechanisms:
                entry = jaas_entry(cfg, listener, "PLAIN")
                if entry is None:
                    raise SecurityConfigError(
                        f"listener {listener} enables SASL mechanism PLAIN but has no JAAS entry for it: set "
                        f"listener.name.{listener.lower()}.plain.sasl.jaas.config (PlainLoginModule with "
                        f"user_<name>=\"<password>\" options)")
                users = {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")}
            sasl = SaslSettings(mechanisms, users)
        return cls(listener, protocol, context, sasl, mapper)


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How this broker connects to the others' inter-broker listener."""
    protocol: str = "PLAINTEXT"
    tls_context_for: Callable[[str], Any] | None = None   # host -> client TLS context
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_config(cls, cfg: KafkaConfig) -> "InterBrokerSecurity":
        listener = cfg.inter_broker_listener_name
        protocol = cfg.security_protocol(listener)

        def get(name: str) -> Any:
            return cfg.listener_value(listener, name)
        context_for = None
        if protocol in ("SSL", "SASL_SSL"):
            contexts: dict[str, Any] = {}

            def context_for(host: str) -> Any:
                if host not in contexts:
                    contexts[host] = tls.client_context(get, host)
                return contexts[host]
            try:
                context_for("localhost")   # check the truststore and keystore now, not at first use
            except tls.TlsConfigError as e:
                raise SecurityConfigError(f"inter-broker listener {listener} ({protocol}): {e}") from None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context_for)
        mechanism = cfg["sasl.mechanism.inter.broker.protocol"]
        entry = jaas_entry(cfg, listener, mechanism)
        username = entry.options.get("username") if entry else None
        password = entry.options.get("password") if entry else None
        if not username or not password:
            raise SecurityConfigError(
                f"the inter-broker listener {listener} uses SASL {mechanism}, but its JAAS entry has no "
                f"username and password for this broker (listener.name.{listener.lower()}."
                f"{mechanism.lower()}.sasl.jaas.config)")
        return cls(protocol, context_for, mechanism, username, password)
