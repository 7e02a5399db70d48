"""PasswordEncoder: dynamic password configs stored encrypted in ZooKeeper, as Kafka stores them.

Invariant: a password config given dynamically (a keystore password, an inline PEM key) is
written to /config/brokers/<id> only encrypted with ``password.encoder.secret``, never in clear;
the stored form is Kafka's: comma-separated ``name:value`` pairs (``keyFactoryAlgorithm``,
``cipherAlgorithm``, ``keyLength``, ``salt``, ``iterations``, ``encryptedPassword``,
``passwordLength``, ``initializationVector``; binary values in base64), the key derived with
PBKDF2-HMAC-SHA512 from the secret and a random 256-byte salt, the password encrypted with
AES/CBC/PKCS5Padding. The cryptography is the ``cryptography`` package's; nothing here is
hand-written but the encoding of the map. ``decode`` raises PasswordEncoderError for a value it
cannot decrypt (a wrong secret, or not an encoded password), naming no secret. Both the broker
(dynamic configs set through the admin API) and ``odradek configs --zookeeper`` (bootstrapping a
stopped broker's configs) use it.
"""
from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC


KEY_FACTORY = "PBKDF2WithHmacSHA512"
CIPHER = "AES/CBC/PKCS5Padding"
SALT_BYTES = 256
# the broker's dynamically updatable password configs (broker/config/security_keys.py), by how
# their names end (Kafka's isPasswordConfig), for the tools that cannot import the broker's config
# table; tests/unit/test_dynamic_broker_config.py holds the two in agreement
PASSWORD_SUFFIXES = ("password", "sasl.jaas.config", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                     "ssl.truststore.certificates")


class PasswordEncoderError(ValueError):
    """A password encoder setting that is not built, or a stored value that does not decode."""


class PasswordEncoder:
    def __init__(self, secret: str, key_factory: str | None = None, cipher: str = CIPHER,
                 key_length: int = 128, iterations: int = 4096) -> None:
        if (key_factory or KEY_FACTORY) != KEY_FACTORY or cipher != CIPHER:
            raise PasswordEncoderError(f"password.encoder: only {KEY_FACTORY} with {CIPHER} is supported "
                              f"(got {key_factory or KEY_FACTORY} with {cipher})")
        if key_length not in (128, 192, 256):
            raise PasswordEncoderError(f"Invalid value {key_length} for configuration password.encoder.key.length: "
                              "AES keys are 128, 192 or 256 bits")
        self._secret = secret.encode()
        self.key_length = key_length
        self.iterations = iterations

    def _key(self, salt: bytes, key_length: int, iterations: int) -> bytes:
        kdf = PBKDF2HMAC(algorithm=hashes.SHA512(), length=key_length // 8, salt=salt, iterations=iterations)
        return kdf.derive(self._secret)

    def encode(self, password: str) -> str:
        salt, iv = os.urandom(SALT_BYTES), os.urandom(16)
        padder = padding.PKCS7(128).padder()
        plain = padder.update(password.encode()) + padder.finalize()
        enc = Cipher(algorithms.AES(self._key(salt, self.key_length, self.iterations)), modes.CBC(iv)).encryptor()
        encrypted = enc.update(plain) + enc.finalize()
        fields = {
            "keyFactoryAlgorithm": KEY_FACTORY, "cipherAlgorithm": CIPHER, "keyLength": str(self.key_length),
            "salt": _b64(salt), "iterations": str(self.iterations), "encryptedPassword": _b64(encrypted),
            "passwordLength": str(len(password)), "initializationVector": _b64(iv),
        }
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        try:
            fields = dict(part.split(":", 1) for part in encoded.split(","))
            if fields["keyFactoryAlgorithm"] != KEY_FACTORY or fields["cipherAlgorithm"] != CIPHER:
                raise ValueError("unsupported algorithm")
            key = self._key(base64.b64decode(fields["salt"]), int(fields["keyLength"]), int(fields["iterations"]))
            dec = Cipher(algorithms.AES(key), modes.CBC(base64.b64decode(fields["initializationVector"]))).decryptor()
            padded = dec.update(base64.b64decode(fields["encryptedPassword"])) + dec.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(padded) + unpadder.finalize()).decode()
            if len(password) != int(fields["passwordLength"]):
                raise ValueError("length mismatch")
            return password
        except (KeyError, ValueError, TypeError, UnicodeDecodeError):
            raise PasswordEncoderError("a dynamic password config could not be decoded with password.encoder.secret "
                              "(a different secret, or not an encoded password)") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
