"""Broker configs Kafka 2.8 updates on a running broker, applied live with no restart: a TLS
listener's keystore (replaced, or its file renewed in place; password configs stored encrypted
with password.encoder.secret) and the connection limits.

Invariant: one module-scoped 1-broker cluster with a PLAINTEXT and an SSL listener; every change
goes through the admin API (confluent-kafka, odradek's CLI) and every effect is what a client
sees: the certificate a new TLS handshake presents, a refused connection. Tests restore what they
change (the keystore's identity never changes, the limits are deleted at the end).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from odradek.testing import wait_until
from odradek.testing.certificates import issue_identity, make_tls_files
from odradek.zk.ensemble import free_ports

pytestmark = pytest.mark.integration

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")
SECRET = "encoder-secret-for-tests"


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dyn-tls")
    make_tls_files(folder)
    return folder


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, tls_dir):
    from odradek.zk.cluster import LocalCluster
    ssl_port = free_ports(1)[0]
    c = LocalCluster(tmp_path_factory.mktemp("dyn-configs"), zookeepers=1, brokers=1,
                     overrides={"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls_dir / "broker-keystore.pem"),
                                "password.encoder.secret": SECRET},
                     extra_listeners={1: [f"SSL://127.0.0.1:{ssl_port}"]})
    c.start()
    c.ssl_port = ssl_port
    try:
        yield c
    finally:
        c.stop()


def served_certificate(cluster, tls_dir: Path) -> x509.Certificate:
    """The certificate a new TLS connection to the SSL listener is shown (verified against the CA)."""
    ctx = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    with socket.create_connection(("127.0.0.1", cluster.ssl_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def serial_of(pem_file: Path) -> int:
    return x509.load_pem_x509_certificates(pem_file.read_bytes())[0].serial_number


def alter(cluster, configs: dict[str, str | None], broker: str = "1") -> None:
    """IncrementalAlterConfigs from confluent-kafka (None: delete); raises KafkaException when refused."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE)
               for k, v in configs.items()]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, broker, incremental_configs=entries)])
    for f in futures.values():
        f.result(timeout=30)


def stored(cluster, entity: str = "1") -> dict[str, str]:
    data, _ = cluster.zk.get(f"/config/brokers/{entity}")
    return json.loads(data)["config"]


def produce_over_tls(cluster, tls_dir: Path, value: bytes) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": f"127.0.0.1:{cluster.ssl_port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(tls_dir / "ca.crt"), "message.timeout.ms": 30000})
    errors: list = []
    p.produce("tls-live", value, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(40) == 0
    assert errors == [None]


def test_keystore_replaced_live_new_connections_get_it_open_ones_keep_working(cluster, tls_dir):
    first = served_certificate(cluster, tls_dir)
    assert first.serial_number == serial_of(tls_dir / "broker-keystore.pem")
    ctx = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    old = ctx.wrap_socket(socket.create_connection(("127.0.0.1", cluster.ssl_port), timeout=10),
                          server_hostname="localhost")
    renewed = issue_identity(tls_dir, "renewed", "localhost")
    alter(cluster, {"listener.name.ssl.ssl.keystore.location": str(renewed.keystore)})
    wait_until(lambda: served_certificate(cluster, tls_dir).serial_number == serial_of(renewed.keystore), 30,
               "new TLS connections to be shown the renewed certificate")
    # the connection opened before the change still speaks TLS with the old context: ApiVersions v0
    old.sendall(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00")
    size = int.from_bytes(old.recv(4), "big")
    assert size > 6 and old.recv(6)[:4] == b"\x00\x00\x00\x07"   # correlation id 7, then error 0
    old.close()
    produce_over_tls(cluster, tls_dir, b"after the rotation")
    assert stored(cluster)["listener.name.ssl.ssl.keystore.location"] == str(renewed.keystore)


def test_a_keystore_file_renewed_in_place_is_reloaded_by_repeating_its_setting(cluster, tls_dir):
    current = stored(cluster).get("listener.name.ssl.ssl.keystore.location") or str(tls_dir / "broker-keystore.pem")
    again = issue_identity(tls_dir, "in-place", "localhost")
    Path(current).write_bytes(again.keystore.read_bytes())          # the operator renews the file...
    assert served_certificate(cluster, tls_dir).serial_number != serial_of(again.keystore)   # ...nothing reads it yet
    alter(cluster, {"listener.name.ssl.ssl.keystore.location": current})   # ...and repeats the setting
    assert served_certificate(cluster, tls_dir).serial_number == serial_of(again.keystore)


def test_a_keystore_of_another_identity_or_unreadable_is_refused_and_nothing_changes(cluster, tls_dir):
    from confluent_kafka import KafkaException
    before_zk, before_cert = stored(cluster), served_certificate(cluster, tls_dir).serial_number
    stranger = issue_identity(tls_dir, "stranger", "evil.example.com", hosts=("evil.example.com",))
    for location, words in ((str(stranger.keystore), "DistinguishedName does not match"),
                            (str(tls_dir / "missing.pem"), "cannot read keystore")):
        with pytest.raises(KafkaException) as refused:
            alter(cluster, {"listener.name.ssl.ssl.keystore.location": location})
        assert words in str(refused.value)
        assert stored(cluster) == before_zk
        assert served_certificate(cluster, tls_dir).serial_number == before_cert


def test_a_password_keystore_is_stored_encrypted_and_survives_a_restart(cluster, tls_dir):
    p12 = issue_identity(tls_dir, "p12", "localhost", password="p12-password")
    alter(cluster, {"listener.name.ssl.ssl.keystore.type": "PKCS12",
                    "listener.name.ssl.ssl.keystore.location": str(p12.p12),
                    "listener.name.ssl.ssl.keystore.password": "p12-password"})
    wait_until(lambda: served_certificate(cluster, tls_dir).serial_number == serial_of(p12.keystore), 30,
               "the PKCS12 keystore to be served")
    raw = cluster.zk.get("/config/brokers/1")[0].decode()
    assert "p12-password" not in raw
    encoded = stored(cluster)["listener.name.ssl.ssl.keystore.password"]
    assert "encryptedPassword:" in encoded and "keyFactoryAlgorithm:PBKDF2WithHmacSHA512" in encoded
    # DescribeConfigs shows the setting as sensitive: no value
    r = subprocess.run([ODRADEK, "configs", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                        "--entity-type", "brokers", "--entity-name", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "listener.name.ssl.ssl.keystore.password=" in ln)
    assert "p12-password" not in line and "sensitive=true" in line
    cluster.kill_broker(1)
    cluster.start_broker(1)
    assert served_certificate(cluster, tls_dir).serial_number == serial_of(p12.keystore)
    produce_over_tls(cluster, tls_dir, b"after the restart")


def test_connection_limits_change_live(cluster):
    """A per-address limit set cluster-wide through the CLI refuses the next connection from that
    address at once, and lifting it lets connections in again. The test's connections come from
    their own loopback address (127.0.0.2), so other clients of this module (and the CLI, from
    127.0.0.1) count against nothing the test sets."""
    def connect() -> bool:
        """True if the broker keeps a new connection from 127.0.0.2 (answers ApiVersions on it)."""
        try:
            s = socket.create_connection(("127.0.0.1", cluster.brokers[1].port), timeout=10,
                                         source_address=("127.0.0.2", 0))
            held.append(s)
            s.sendall(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
            return len(s.recv(4)) == 4
        except OSError:
            return False

    def cluster_default(*args: str) -> None:
        r = subprocess.run([ODRADEK, "configs", "--bootstrap-server", cluster.bootstrap_servers, "--alter",
                            "--entity-type", "brokers", "--entity-default", *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    held: list[socket.socket] = []
    try:
        assert all(connect() for _ in range(3))
        for s in held:
            s.close()
        held.clear()
        cluster_default("--add-config", "max.connections.per.ip.overrides=[127.0.0.2:2]")
        wait_until(lambda: not connect(), 30, "a third connection from 127.0.0.2 to be refused")
        for s in held:
            s.close()
        held.clear()
        cluster_default("--delete-config", "max.connections.per.ip.overrides")
        wait_until(lambda: all(connect() for _ in range(4)), 30, "connections from 127.0.0.2 kept once the limit is gone")
    finally:
        for s in held:
            s.close()


def test_a_stopped_brokers_keystore_password_bootstrapped_through_zookeeper(cluster, tls_dir):
    """kafka-configs.sh --zookeeper's way: while the broker is down, with the brokers' encoder secret."""
    boot = issue_identity(tls_dir, "bootstrapped", "localhost", password="boot-pw")
    configs = (f"listener.name.ssl.ssl.keystore.type=PKCS12,listener.name.ssl.ssl.keystore.location={boot.p12},"
               "listener.name.ssl.ssl.keystore.password=boot-pw")

    def zk_alter(add: str) -> subprocess.CompletedProcess:
        return subprocess.run([ODRADEK, "configs", "--zookeeper", cluster.zookeeper_connect, "--alter",
                               "--entity-type", "brokers", "--entity-name", "1", "--add-config", add],
                              capture_output=True, text=True, timeout=60)
    running = zk_alter(f"{configs},password.encoder.secret={SECRET}")
    assert running.returncode != 0 and "--bootstrap-server option must be specified" in running.stderr
    cluster.kill_broker(1, signal.SIGTERM)
    wait_until(lambda: cluster.zk.exists("/brokers/ids/1") is None, 60, "broker 1 to leave /brokers/ids")
    no_secret = zk_alter(configs)
    assert no_secret.returncode != 0 and "password.encoder.secret" in no_secret.stderr
    assert zk_alter(f"{configs},password.encoder.secret={SECRET}").returncode == 0
    assert "boot-pw" not in cluster.zk.get("/config/brokers/1")[0].decode()
    assert "password.encoder.secret" not in stored(cluster)
    cluster.start_broker(1)
    assert served_certificate(cluster, tls_dir).serial_number == serial_of(boot.keystore)
