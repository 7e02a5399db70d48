"""SCRAM credentials from what an AlterUserScramCredentials upsertion carries (Kafka's
``ScramFormatter.generateCredential(salt, saltedPassword, iterations)``).

Invariant: the broker never sees a password: the client sends the salt and the salted
password (PBKDF2 output) and this module derives RFC 5802's stored key
(``H(HMAC(salted, "Client Key"))``) and server key (``HMAC(salted, "Server Key")``) with
``hashlib``/``hmac``, returning the ``ScramCredential`` ZooKeeper keeps. Pure functions.
"""
from __future__ import annotations

import hashlib
import hmac

from odradek.protocol.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """The credential for ``mechanism`` (SCRAM-SHA-256 or -512); KeyError for another name."""
    hash_name = MECHANISMS[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", hash_name).digest()
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def iterations_problem(iterations: int) -> str | None:
    """Kafka's message for iterations a broker refuses (UNACCEPTABLE_CREDENTIAL), else None."""
    if iterations < MIN_ITERATIONS:
        return "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return "Too many iterations"
    return None
