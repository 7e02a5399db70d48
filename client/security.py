"""The client side of TLS and SASL for odradek's blocking clients, from Kafka's client settings.

Invariant: ``ClientSecurity.from_config`` is built once per client from its ``ClientConfig`` and
either describes a connection the broker's listener will accept or raises ``ConfigError`` with
one line (a missing CA file, a SASL protocol without a mechanism or credentials). TLS is the
standard library's ``ssl`` (OpenSSL): the broker's certificate is checked against the
truststore (the system's CAs when none is given) and, unless
``ssl.endpoint.identification.algorithm`` is empty, against the host name. SASL credentials come
from ``sasl.username``/``sasl.password`` or a ``sasl.jaas.config`` login module's
``username``/``password`` options; ``tokenauth="true"`` there makes it a delegation-token login
(Kafka's ScramLoginModule option: the token id and its base64 HMAC as username and password).
"""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from odradek.protocol.jaas import JaasError, parse_jaas_config
from odradek.protocol.sasl import MECHANISMS

from .config import ClientConfig, ConfigError


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    token_auth: bool = False       # a delegation token: username = token id, password = HMAC

    @classmethod
    def from_config(cls, cfg: ClientConfig) -> "ClientSecurity":
        protocol = str(cfg["security.protocol"]).upper()
        tls = _tls_context(cfg) if protocol in ("SSL", "SASL_SSL") else None
        if not protocol.startswith("SASL_"):
            return cls(protocol, tls)
        mechanism = str(cfg["sasl.mechanism"]).upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        username, password = cfg["sasl.username"], cfg["sasl.password"]
        token_auth = False
        if cfg["sasl.jaas.config"]:
            try:
                options = parse_jaas_config(cfg["sasl.jaas.config"]).options
            except JaasError as e:
                raise ConfigError(str(e)) from None
            username, password = options.get("username", username), options.get("password", password)
            token_auth = str(options.get("tokenauth", "false")).lower() == "true"
            if token_auth and mechanism == "PLAIN":
                raise ConfigError("tokenauth=\"true\" (a delegation token) needs sasl.mechanism SCRAM-SHA-256 "
                                  "or SCRAM-SHA-512")
        if not username or not password:
            raise ConfigError(f"security.protocol={protocol} needs sasl.username and sasl.password "
                              f"(or a sasl.jaas.config with username and password)")
        return cls(protocol, tls, mechanism, username, password, token_auth)

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """The socket to speak Kafka on: ``sock`` itself, or TLS over it (handshake done)."""
        if self.tls is None:
            return sock
        try:
            return self.tls.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError):
            sock.close()
            raise


def _tls_context(cfg: ClientConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    truststore = cfg["ssl.truststore.location"]
    try:
        if truststore:
            context.load_verify_locations(cafile=truststore)
        if cfg["ssl.keystore.location"] or cfg["ssl.certificate.location"]:
            context.load_cert_chain(cfg["ssl.certificate.location"] or cfg["ssl.keystore.location"],
                                    cfg["ssl.key.location"], password=cfg["ssl.key.password"])
    except FileNotFoundError as e:
        raise ConfigError(f"cannot read {e.filename}: no such file") from None
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"cannot load the TLS files ({truststore or ''} "
                          f"{cfg['ssl.keystore.location'] or cfg['ssl.certificate.location'] or ''}): {e}") from None
    context.check_hostname = bool(cfg["ssl.endpoint.identification.algorithm"])
    return context
