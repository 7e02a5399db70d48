"""Typed configuration keys and the Java properties syntax: what ``config`` is built from.

Invariant: ``_parse`` is the only place a raw value becomes a typed one: ints are range
checked for their Kafka type, booleans are ``true``/``false``, lists split on commas, and
a key's validator runs last; every problem is a ``ConfigError`` whose message is one
line naming the key. ``parse_properties`` follows ``java.util.Properties.load``.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, NamedTuple

from odradek.zk.topics import message_format_problem

INT, LONG, SHORT, DOUBLE, BOOLEAN, STRING, LIST, PASSWORD = (
    "int", "long", "short", "double", "boolean", "string", "list", "password")
_RANGES = {INT: (-2**31, 2**31 - 1), LONG: (-2**63, 2**63 - 1), SHORT: (-2**15, 2**15 - 1)}
LONG_MAX = 2**63 - 1
REQUIRED = object()  # a key without a default

Validator = Callable[[Any], "str | None"]


class ConfigError(ValueError):
    """A configuration problem; ``str()`` is one line naming the key."""


class ConfigKey(NamedTuple):
    name: str
    type: str
    default: Any
    validator: Validator | None
    doc: str


# ---------------------------------------------------------------- validators

def at_least(n: float) -> Validator:
    return lambda v: None if v >= n else f"must be at least {n}"


def between(lo: float, hi: float) -> Validator:
    return lambda v: None if lo <= v <= hi else f"must be between {lo} and {hi}"


def one_of(*options: str, case_insensitive: bool = False) -> Validator:
    allowed = {o.lower() for o in options} if case_insensitive else set(options)

    def check(v: str) -> str | None:
        return None if (v.lower() if case_insensitive else v) in allowed else \
            f"must be one of {', '.join(options)}"
    return check


def list_of(*options: str) -> Validator:
    def check(v: list[str]) -> str | None:
        bad = [x for x in v if x not in options]
        return f"must be a list of {', '.join(options)} (got {', '.join(bad)})" if bad else None
    return check


def non_empty(v: Any) -> str | None:
    return "must not be empty" if not v else None


def message_format_version(v: str) -> str | None:
    """Kafka's ApiVersionValidator, and odradek's one refusal (``zk.topics.message_format_problem``)."""
    return message_format_problem(v)


LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def replica_selector(v: str) -> str | None:
    """Kafka loads the named class; odradek has the behaviour of Kafka's default, LeaderSelector, only."""
    return None if v in ("", LEADER_SELECTOR) else \
        f"fetching from a follower (KIP-392) is not built; leave it unset or set {LEADER_SELECTOR}"


# ---------------------------------------------------------------- parsing

def _parse(key: ConfigKey, value: Any) -> Any:
    """The typed value of ``value`` for ``key``; raises ConfigError."""
    name, typ = key.name, key.type
    if value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
    try:
        if typ in _RANGES:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, str):
                if not re.fullmatch(r"[+-]?\d+", value):
                    raise ValueError
                value = int(value)
            elif not isinstance(value, int):
                raise ValueError
            lo, hi = _RANGES[typ]
            if not lo <= value <= hi:
                raise ConfigError(f"Invalid value {value} for configuration {name}: "
                                  f"out of range for a {typ}")
        elif typ == DOUBLE:
            value = float(value)
        elif typ == BOOLEAN:
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ValueError
                value = value.lower() == "true"
            elif not isinstance(value, bool):
                raise ValueError
        elif typ == LIST:
            if isinstance(value, str):
                value = [x.strip() for x in value.split(",")] if value else []
            else:
                value = [str(x).strip() for x in value]
        else:
            value = str(value)
    except (ValueError, TypeError):
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: "
                          f"expected a value of type {typ}") from None
    if key.validator is not None:
        problem = key.validator(value)
        if problem:
            raise ConfigError(f"Invalid value {value!r} for configuration {name}: {problem}")
    return value


def _table(keys: Iterable[tuple]) -> dict[str, ConfigKey]:
    return {k[0]: ConfigKey(*k) for k in keys}


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load``: ``#``/``!`` comments, ``=``/``:``/space separators,
    backslash line continuations and escapes."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_property(line)
        props[key] = value
    return props


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6]):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _split_property(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest).strip()
