"""Throw-away TLS material for tests: a CA, broker and client certificates, as PEM and PKCS12 files.

Invariant: every file is made fresh with the ``cryptography`` package (no OpenSSL command, no
network), under the folder given, and signed by the CA made in the same call, so a test trusts
exactly what it made (``issue_identity`` signs more with the same CA); the broker certificate names every host it is given (127.0.0.1 and
localhost by default, as IP and DNS subjectAltNames), so host-name verification passes. Not for
production: keys are unencrypted (the PKCS12 files use ``password``).
``python -m odradek.testing.certificates DIR [--host NAME ...]`` makes the same files for a
development cluster (the secured docker-compose variant uses it).
"""
from __future__ import annotations

import argparse
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Identity:
    """One certificate and its key: ``cert`` (PEM), ``key`` (PEM), ``keystore`` (PEM chain + key,
    Kafka's ssl.keystore.type=PEM layout), ``p12`` (PKCS12 with ``password``)."""
    cert: Path
    key: Path
    keystore: Path
    p12: Path
    password: str


@dataclass(frozen=True)
class TlsFiles:
    ca: Path                     # the CA certificate: a PEM truststore
    broker: Identity
    client: Identity             # subject CN=client,OU=test,O=odradek
    other_ca: Path               # a second CA nobody signed with (an untrusting truststore)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "odradek"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "test"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=30)))


def _make_ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(cn), _name(cn), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _identity(folder: Path, stem: str, cn: str, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
              hosts: tuple[str, ...], password: str) -> Identity:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _builder(_name(cn), ca.subject, key.public_key()).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = builder.add_extension(x509.ExtendedKeyUsage([usage, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    paths = Identity(folder / f"{stem}.crt", folder / f"{stem}.key", folder / f"{stem}-keystore.pem",
                     folder / f"{stem}.p12", password)
    paths.cert.write_bytes(_pem(cert) + _pem(ca))
    paths.key.write_bytes(key_pem)
    paths.keystore.write_bytes(_pem(cert) + _pem(ca) + key_pem)
    paths.p12.write_bytes(pkcs12.serialize_key_and_certificates(
        stem.encode(), key, cert, [ca], serialization.BestAvailableEncryption(password.encode())))
    for p in (paths.key, paths.keystore, paths.p12):
        p.chmod(0o600)
    return paths


def make_tls_files(folder: str | Path, password: str = "changeit",
                   hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> TlsFiles:
    """A CA, a broker identity (CN=the first host, every host a subjectAltName) and a client
    identity (CN=client) under ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _make_ca("odradek test CA")
    other, _ = _make_ca("untrusted CA")
    (folder / "ca.crt").write_bytes(_pem(ca))
    (folder / "ca.key").write_bytes(ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    (folder / "ca.key").chmod(0o600)
    (folder / "other-ca.crt").write_bytes(_pem(other))
    return TlsFiles(folder / "ca.crt", _identity(folder, "broker", hosts[0], ca, ca_key, hosts, password),
                    _identity(folder, "client", "client", ca, ca_key, (), password),
                    folder / "other-ca.crt")


def issue_identity(folder: str | Path, stem: str, cn: str, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
                   password: str = "changeit") -> Identity:
    """Another identity signed by the CA ``make_tls_files`` made in ``folder`` (a renewed broker
    certificate: same ``cn`` and ``hosts``, new key and serial), written as ``<stem>.*``."""
    folder = Path(folder)
    ca = x509.load_pem_x509_certificate((folder / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((folder / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    return _identity(folder, stem, cn, ca, ca_key, hosts, password)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m odradek.testing.certificates",
                                 description="Throw-away CA, broker and client certificates for a development cluster.")
    ap.add_argument("folder")
    ap.add_argument("--host", action="append", default=[], help="a name the broker certificate covers (repeatable)")
    ap.add_argument("--password", default="changeit", help="password of the PKCS12 files")
    args = ap.parse_args(argv)
    files = make_tls_files(args.folder, args.password, tuple(args.host) or ("localhost", "127.0.0.1"))
    print(f"CA {files.ca}; broker keystore {files.broker.keystore}; client {files.client.cert}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
