"""TLS for the broker's listeners and its connections to other brokers, from Kafka's ``ssl.*`` settings.

Invariant: a listener whose protocol is SSL or SASL_SSL gets a TLS context built from its
keystore before the broker binds anything; a keystore or truststore that is missing,
unreadable, of an unsupported type, or whose key does not match its certificate raises
``TlsConfigError`` naming the file (the broker then refuses to start), so a TLS listener never
serves plaintext. All cryptography is OpenSSL's (pyOpenSSL through Twisted) and the
``cryptography`` package's parsers; settings may be given per listener
(``listener.name.<l>.ssl.*``, ``KafkaConfig.listener_value``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from OpenSSL import SSL, crypto
from twisted.internet import ssl as twisted_ssl
from twisted.internet.interfaces import IOpenSSLContextFactory
from zope.interface import implementer

# ssl.enabled.protocols -> Twisted's TLS versions
_VERSIONS = {"TLSv1.2": twisted_ssl.TLSVersion.TLSv1_2, "TLSv1.3": twisted_ssl.TLSVersion.TLSv1_3}


class TlsConfigError(Exception):
    """A TLS setting the broker cannot use: one line naming the setting or the file."""


@dataclass(frozen=True)
class KeyMaterial:
    """A certificate chain (leaf first) and its private key, as pyOpenSSL objects."""
    certificate: crypto.X509
    chain: tuple[crypto.X509, ...]
    key: crypto.PKey


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise TlsConfigError(f"cannot read {what} {path}: {e.strerror}") from None


def _pem_certificates(data: bytes, where: str) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise TlsConfigError(f"no PEM certificate in {where}")
    return certs


def _password(value: Any) -> bytes | None:
    return None if value in (None, "") else str(value).encode("utf-8")


def load_keystore(get: Callable[[str], Any]) -> KeyMaterial:
    """The keystore named by ``ssl.keystore.*`` (``get`` reads one setting)."""
    kind = str(get("ssl.keystore.type")).upper()
    location = get("ssl.keystore.location")
    inline_chain, inline_key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    key_password = _password(get("ssl.key.password"))
    if inline_chain or inline_key:
        if kind != "PEM":
            raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM")
        if not (inline_chain and inline_key):
            raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key must be given together")
        return _pem_key_material(str(inline_chain).encode(), str(inline_key).encode(), key_password,
                                 "ssl.keystore.certificate.chain / ssl.keystore.key")
    if not location:
        raise TlsConfigError("ssl.keystore.location is required on a TLS listener")
    if kind == "JKS":
        raise TlsConfigError(f"keystore {location}: ssl.keystore.type JKS is not supported; "
                             f"use ssl.keystore.type=PEM or PKCS12")
    data = _read(location, "keystore")
    if kind == "PEM":
        return _pem_key_material(data, data, key_password, f"keystore {location}")
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, _password(get("ssl.keystore.password")))
    except ValueError as e:
        raise TlsConfigError(f"cannot open PKCS12 keystore {location}: {e}") from None
    if key is None or cert is None:
        raise TlsConfigError(f"PKCS12 keystore {location} holds no private key and certificate")
    return _key_material([cert, *extra], key, f"keystore {location}")


def _pem_key_material(chain_pem: bytes, key_pem: bytes, password: bytes | None, where: str) -> KeyMaterial:
    certs = _pem_certificates(chain_pem, where)
    try:
        key = serialization.load_pem_private_key(key_pem, password)
    except TypeError:
        raise TlsConfigError(f"the private key in {where} is encrypted: set ssl.key.password") from None
    except ValueError:
        raise TlsConfigError(f"no readable PEM private key in {where} (wrong ssl.key.password?)") from None
    return _key_material(certs, key, where)


def _key_material(certs: list[x509.Certificate], key: Any, where: str) -> KeyMaterial:
    pkey = crypto.PKey.from_cryptography_key(key)
    leaf = crypto.X509.from_cryptography(certs[0])
    context = SSL.Context(SSL.TLS_METHOD)
    try:
        context.use_certificate(leaf)
        context.use_privatekey(pkey)
        context.check_privatekey()
    except SSL.Error:
        raise TlsConfigError(f"the private key in {where} does not match its certificate") from None
    return KeyMaterial(leaf, tuple(crypto.X509.from_cryptography(c) for c in certs[1:]), pkey)


def load_truststore(get: Callable[[str], Any]) -> list[crypto.X509] | None:
    """The CA certificates named by ``ssl.truststore.*``; None when none is configured."""
    kind = str(get("ssl.truststore.type")).upper()
    inline, location = get("ssl.truststore.certificates"), get("ssl.truststore.location")
    if inline:
        if kind != "PEM":
            raise TlsConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
        certs = _pem_certificates(str(inline).encode(), "ssl.truststore.certificates")
    elif location:
        if kind == "JKS":
            raise TlsConfigError(f"truststore {location}: ssl.truststore.type JKS is not supported; "
                                 f"use ssl.truststore.type=PEM or PKCS12")
        data = _read(location, "truststore")
        if kind == "PEM":
            certs = _pem_certificates(data, f"truststore {location}")
        else:
            try:
                store = pkcs12.load_pkcs12(data, _password(get("ssl.truststore.password")))
            except ValueError as e:
                raise TlsConfigError(f"cannot open PKCS12 truststore {location}: {e}") from None
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.insert(0, store.cert.certificate)
            if not certs:
                raise TlsConfigError(f"PKCS12 truststore {location} holds no certificate")
    else:
        return None
    return [crypto.X509.from_cryptography(c) for c in certs]


def _versions(get: Callable[[str], Any]) -> dict[str, Any]:
    enabled = [v for v in get("ssl.enabled.protocols")]
    if not enabled:
        raise TlsConfigError("ssl.enabled.protocols is empty")
    ordered = sorted(_VERSIONS[v] for v in enabled)
    return {"raiseMinimumTo": ordered[0], "lowerMaximumSecurityTo": ordered[-1]}


def _ciphers(get: Callable[[str], Any]) -> dict[str, Any]:
    suites = [s for s in get("ssl.cipher.suites") if s]
    if not suites:
        return {}
    try:
        SSL.Context(SSL.TLS_METHOD).set_cipher_list(":".join(suites).encode("ascii"))
    except (SSL.Error, UnicodeEncodeError):
        raise TlsConfigError(f"none of ssl.cipher.suites ({', '.join(suites)}) is a TLS 1.2 cipher suite "
                             f"OpenSSL knows (use OpenSSL names such as ECDHE-RSA-AES256-GCM-SHA384)") from None
    return {"acceptableCiphers": twisted_ssl.AcceptableCiphers.fromOpenSSLCipherString(":".join(suites))}


def _server_options(get: Callable[[str], Any], keys: KeyMaterial) -> twisted_ssl.CertificateOptions:
    """The TLS context of one listener (``get`` reads that listener's settings) serving ``keys``."""
    client_auth = str(get("ssl.client.auth")).lower()
    trust = load_truststore(get)
    verify: dict[str, Any] = {}
    if client_auth != "none":
        if not trust:
            raise TlsConfigError(f"ssl.client.auth={client_auth} needs a truststore "
                                 f"(ssl.truststore.location or ssl.truststore.certificates)")
        verify = {"verify": True, "caCerts": trust, "requireCertificate": client_auth == "required"}
    return twisted_ssl.CertificateOptions(
        privateKey=keys.key, certificate=keys.certificate, extraCertChain=list(keys.chain),
        **verify, **_versions(get), **_ciphers(get))


def certificate_identity(cert: crypto.X509) -> tuple[str, tuple[str, ...]]:
    """(subject DN, sorted subject alternative names) of a certificate."""
    c = cert.to_cryptography()
    try:
        sans = tuple(sorted(str(n.value) for n in c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value))
    except x509.ExtensionNotFound:
        sans = ()
    return c.subject.rfc4514_string(), sans


@implementer(IOpenSSLContextFactory)
class ReloadableServerContext:
    """A listener's server TLS context that a dynamic config change (or a keystore file rewritten
    in place) replaces while the listener runs: each connection takes the context current when it
    is accepted, open connections keep theirs. As in Kafka (SslFactory), a replacement keystore
    must keep the certificate's subject DN and subject alternative names."""

    def __init__(self, get: Callable[[str], Any]) -> None:
        keys = load_keystore(get)
        self.options = _server_options(get, keys)
        self.identity = certificate_identity(keys.certificate)

    def getContext(self) -> SSL.Context:
        return self.options.getContext()

    def prepare(self, get: Callable[[str], Any]) -> twisted_ssl.CertificateOptions:
        """The new context from ``get`` (TlsConfigError if it cannot serve, or names another identity)."""
        keys = load_keystore(get)
        identity = certificate_identity(keys.certificate)
        if identity[0] != self.identity[0]:
            raise TlsConfigError(f"Keystore DistinguishedName does not match: existing={self.identity[0]}, "
                                 f"new={identity[0]}")
        if identity[1] != self.identity[1]:
            raise TlsConfigError(f"Keystore SubjectAltNames do not match: existing={list(self.identity[1])}, "
                                 f"new={list(identity[1])}")
        options = _server_options(get, keys)
        options.getContext()   # builds OpenSSL's context now: a failure is the caller's, not a client's
        return options

    def install(self, options: twisted_ssl.CertificateOptions) -> None:
        self.options = options


def client_context(get: Callable[[str], Any], host: str) -> Any:
    """A client TLS context for connecting to ``host`` (another broker): trusts the truststore,
    checks the host name unless ``ssl.endpoint.identification.algorithm`` is empty, and
    presents the keystore (for listeners with ``ssl.client.auth``)."""
    trust = load_truststore(get)
    if not trust:
        raise TlsConfigError("a TLS inter-broker listener needs a truststore "
                             "(ssl.truststore.location or ssl.truststore.certificates)")
    root = twisted_ssl.trustRootFromCertificates([twisted_ssl.Certificate(c) for c in trust])
    keys = load_keystore(get) if get("ssl.keystore.location") or get("ssl.keystore.certificate.chain") else None
    if get("ssl.endpoint.identification.algorithm"):
        client_cert = (twisted_ssl.PrivateCertificate.fromCertificateAndKeyPair(
            twisted_ssl.Certificate(keys.certificate), twisted_ssl.KeyPair(keys.key)) if keys else None)
        return twisted_ssl.optionsForClientTLS(host, trustRoot=root, clientCertificate=client_cert,
                                               extraCertificateOptions={**_versions(get), **_ciphers(get)})
    return twisted_ssl.CertificateOptions(
        privateKey=keys.key if keys else None, certificate=keys.certificate if keys else None,
        extraCertChain=list(keys.chain) if keys else None, trustRoot=root, **_versions(get), **_ciphers(get))
