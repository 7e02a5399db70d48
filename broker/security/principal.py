"""Principals: who a connection is, as Kafka names it (``User:<name>``).

Invariant: PLAINTEXT connections, and SSL ones without a client certificate, are
``User:ANONYMOUS``; SASL connections are ``User:<authenticated user>``; SSL connections with a
client certificate are ``User:<name>``, the name being the certificate's subject DN (most
specific part first, RFC 2253 as Java prints it) passed through ``ssl.principal.mapping.rules``:
the first ``RULE:pattern/replacement/[LU]`` whose pattern matches the whole DN, or ``DEFAULT``
(the DN itself). Rules are parsed once, when the listener starts; a malformed one is a
``ValueError`` naming it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    return f"User:{name}"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None   # None: DEFAULT
    replacement: str = ""
    case: str = ""                     # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        name = self.pattern.sub(self.replacement, dn, count=1)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])+)/((?:\\.|[^\\/])*)/([LU]?))\s*(,|$)")


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, e.g. ``RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT``."""

    def __init__(self, rules: str = "DEFAULT"):
        self.rules: list[_Rule] = []
        pos = 0
        text = rules.strip()
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"Invalid value {rules!r} for configuration ssl.principal.mapping.rules: "
                                 f"cannot parse the rule at {text[pos:pos + 30]!r}")
            if m.group(1) == "DEFAULT":
                self.rules.append(_Rule(None))
            else:
                # Java's $1 group references become Python's \g<1>
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3))
                self.rules.append(_Rule(re.compile(m.group(2)), replacement, m.group(4)))
            pos = m.end()
        if not self.rules:
            self.rules.append(_Rule(None))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise ValueError(f"no ssl.principal.mapping.rules rule matches {dn!r}")


def certificate_dn(certificate: x509.Certificate) -> str:
    """The subject DN as Java's X500Principal.getName() prints it (RFC 2253)."""
    return certificate.subject.rfc4514_string()
