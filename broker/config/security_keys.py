"""The broker's TLS, SASL, delegation-token and password-encoder settings, by Kafka 2.8's names, types and defaults.

Invariant: declared here once and spliced into ``kafka_config.BROKER_CONFIG`` (one table of
broker keys); each TLS and SASL key may also be given per listener as
``listener.name.<l>.<key>`` (``KafkaConfig.listener_value``).
"""
from __future__ import annotations

from typing import Any

from .types import INT, LIST, LONG, PASSWORD, STRING, at_least, list_of, one_of

SECURITY_KEYS: list[tuple[str, str, Any, Any, str]] = [
    # --- TLS (each may be given per listener as listener.name.<l>.<key>)
    ("ssl.keystore.type", STRING, "JKS", one_of("JKS", "PEM", "PKCS12", case_insensitive=True),
     "Keystore format: PEM or PKCS12 here (JKS is refused with a clear error)."),
    ("ssl.keystore.location", STRING, None, None, "Keystore file: PEM (chain + key) or PKCS12."),
    ("ssl.keystore.password", PASSWORD, None, None, "Password of a PKCS12 keystore."),
    ("ssl.key.password", PASSWORD, None, None, "Password of the private key (encrypted PEM key)."),
    ("ssl.keystore.certificate.chain", PASSWORD, None, None, "PEM certificate chain, inline (KIP-651)."),
    ("ssl.keystore.key", PASSWORD, None, None, "PEM private key, inline (KIP-651)."),
    ("ssl.truststore.type", STRING, "JKS", one_of("JKS", "PEM", "PKCS12", case_insensitive=True),
     "Truststore format: PEM or PKCS12 here."),
    ("ssl.truststore.location", STRING, None, None, "Truststore file: PEM CA certificates or PKCS12."),
    ("ssl.truststore.password", PASSWORD, None, None, "Password of a PKCS12 truststore."),
    ("ssl.truststore.certificates", PASSWORD, None, None, "PEM CA certificates, inline (KIP-651)."),
    ("ssl.client.auth", STRING, "none", one_of("none", "requested", "required", case_insensitive=True),
     "Client certificates: none, requested or required (mutual TLS)."),
    ("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], list_of("TLSv1.2", "TLSv1.3"),
     "TLS versions accepted."),
    ("ssl.cipher.suites", LIST, [], None, "TLS 1.2 cipher suites by OpenSSL's names; empty: OpenSSL's defaults."),
    ("ssl.endpoint.identification.algorithm", STRING, "https", None,
     "'https' checks the broker's host name against its certificate; empty turns it off."),
    ("ssl.principal.mapping.rules", STRING, "DEFAULT", None, "Certificate DN -> principal name rules."),
    # --- dynamic password configs are kept in ZooKeeper encrypted with this secret
    ("password.encoder.secret", PASSWORD, None, None,
     "Secret that encrypts password configs set dynamically (keystore passwords) in ZooKeeper."),
    ("password.encoder.old.secret", PASSWORD, None, None,
     "The previous password.encoder.secret, to decode passwords stored with it while rotating."),
    ("password.encoder.keyfactory.algorithm", STRING, None, None,
     "Key derivation of the password encoder (PBKDF2WithHmacSHA512, the default, is the one built)."),
    ("password.encoder.cipher.algorithm", STRING, "AES/CBC/PKCS5Padding", None, "Cipher of the password encoder."),
    ("password.encoder.key.length", INT, 128, at_least(8), "Key length (bits) of the password encoder."),
    ("password.encoder.iterations", INT, 4096, at_least(1024), "PBKDF2 iterations of the password encoder."),
    # --- SASL (sasl.jaas.config may be given as listener.name.<l>.<mechanism>.sasl.jaas.config)
    ("sasl.enabled.mechanisms", LIST, ["GSSAPI"], None, "SASL mechanisms served on SASL listeners."),
    ("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None, "SASL mechanism between brokers."),
    ("sasl.jaas.config", PASSWORD, None, None, "JAAS login context, in the properties file."),
    ("connections.max.reauth.ms", LONG, 0, at_least(0), "Re-authentication interval (0: none)."),
    ("connection.failed.authentication.delay.ms", INT, 100, at_least(0),
     "How long a connection that failed to authenticate stays open (unread) before it is closed."),
    # --- delegation tokens (KIP-48)
    ("delegation.token.secret.key", PASSWORD, None, None, "Signs delegation tokens; unset or empty: tokens disabled."),
    ("delegation.token.master.key", PASSWORD, None, None, "Kafka 2.8's deprecated alias of delegation.token.secret.key."),
    ("delegation.token.max.lifetime.ms", LONG, 604800000, at_least(1), "Max lifetime of a delegation token."),
    ("delegation.token.expiry.time.ms", LONG, 86400000, at_least(1), "A token's default renew period."),
    ("delegation.token.expiry.check.interval.ms", LONG, 3600000, at_least(1), "How often expired tokens are removed."),
]
