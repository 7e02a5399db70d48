"""What a broker accepts in an AlterUserScramCredentials upsertion (the credential itself is
``protocol/scram.py:ScramCredential.from_salted_password``: the broker never sees a password).

Invariant: pure functions; the messages are Kafka's.
"""
from __future__ import annotations

from odradek.protocol.scram import MAX_ITERATIONS, MIN_ITERATIONS


def iterations_problem(iterations: int) -> str | None:
    """Kafka's message for iterations a broker refuses (UNACCEPTABLE_CREDENTIAL), else None."""
    if iterations < MIN_ITERATIONS:
        return "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return "Too many iterations"
    return None
