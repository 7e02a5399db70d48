"""Kafka's JAAS configuration syntax: login files, ``sasl.jaas.config`` values, and ``KAFKA_OPTS``.

Invariants: parsing is pure (no I/O except ``load_jaas_file``) and total: any input either
parses or raises ``JaasError`` with one line that names the file (or the config value's
origin) and what is wrong, never another exception. The grammar is that of Java's login
configuration files as Kafka reads them::

    file    := section*
    section := NAME '{' entry* '}' ';'
    entry   := LOGIN_MODULE_CLASS FLAG (KEY '=' VALUE)* ';'
    FLAG    := required | requisite | sufficient | optional      (any case)
    VALUE   := "quoted string" (backslash escapes) | bare word

with ``//`` and ``/* */`` comments. A ``sasl.jaas.config`` value is ``entry+`` and must hold
exactly one login module (Kafka's JaasContext rule). Option order is kept.

Kafka's scripts pass JVM system properties in ``KAFKA_OPTS``; ``java_system_properties``
reads the ``-Dkey=value`` words of such a string and ``login_config_file`` the one naming
the JAAS file (``-Djava.security.auth.login.config=...``, also the ``==`` override form).
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

LOGIN_CONFIG_PROPERTY = "java.security.auth.login.config"
KAFKA_OPTS = "KAFKA_OPTS"
FLAGS = ("required", "requisite", "sufficient", "optional")
_PUNCTUATION = "{};="
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasError(ValueError):
    """A JAAS file or ``sasl.jaas.config`` value that cannot be used (one-line message)."""


@dataclass(frozen=True)
class LoginModule:
    """One entry of a JAAS section: ``class_name flag key="value" ...;``."""

    class_name: str
    flag: str                                   # lower case: one of FLAGS
    options: dict[str, str] = field(default_factory=dict)


JaasSections = dict[str, list[LoginModule]]


# ---------------------------------------------------------------- tokenizer

@dataclass(frozen=True)
class _Token:
    kind: str    # "word", "string" or one punctuation character
    text: str
    line: int


def _tokenize(text: str, origin: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("//", i) or c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError(f"{origin}: unterminated comment starting on line {line}")
            line += text.count("\n", i, end)
            i = end + 2
        elif c in _PUNCTUATION:
            tokens.append(_Token(c, c, line))
            i += 1
        elif c == '"':
            start_line, i, chars = line, i + 1, []
            while True:
                if i >= n:
                    raise JaasError(f"{origin}: unterminated quoted string starting on line {start_line}")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    chars.append(_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                if c == "\n":
                    line += 1
                chars.append(c)
                i += 1
            tokens.append(_Token("string", "".join(chars), start_line))
        else:
            start = i
            while i < n and not (text[i].isspace() or text[i] in _PUNCTUATION or text[i] == '"'
                                 or text.startswith("//", i) or text.startswith("/*", i)):
                i += 1
            tokens.append(_Token("word", text[start:i], line))
    return tokens


class _Parser:
    def __init__(self, text: str, origin: str):
        self.origin = origin
        self.tokens = _tokenize(text, origin)
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def peek(self) -> _Token | None:
        return None if self.at_end() else self.tokens[self.pos]

    def fail(self, expected: str) -> JaasError:
        tok = self.peek()
        if tok is None:
            return JaasError(f"{self.origin}: expected {expected} but the text ended")
        return JaasError(f"{self.origin}: line {tok.line}: expected {expected}, found {tok.text!r}")

    def take(self, kind: str, expected: str) -> _Token:
        tok = self.peek()
        if tok is None or tok.kind != kind:
            raise self.fail(expected)
        self.pos += 1
        return tok

    def take_value(self, key: str) -> str:
        tok = self.peek()
        if tok is None or tok.kind not in ("word", "string"):
            raise JaasError(f"{self.origin}: value not specified for key '{key}'")
        self.pos += 1
        return tok.text

    def entry(self) -> LoginModule:
        class_name = self.take("word", "a login module class name").text
        flag_tok = self.take("word", f"a control flag ({'|'.join(FLAGS)}) after {class_name}")
        flag = flag_tok.text.lower()
        if flag not in FLAGS:
            raise JaasError(f"{self.origin}: line {flag_tok.line}: invalid control flag {flag_tok.text!r} "
                            f"for {class_name} (expected {'|'.join(FLAGS)})")
        options: dict[str, str] = {}
        while True:
            tok = self.peek()
            if tok is not None and tok.kind == ";":
                self.pos += 1
                return LoginModule(class_name, flag, options)
            if tok is None or tok.kind not in ("word", "string"):
                raise self.fail(f"an option key=value or ';' ending the {class_name} entry")
            self.pos += 1
            if self.peek() is None or self.peek().kind != "=":  # type: ignore[union-attr]
                raise JaasError(f"{self.origin}: line {tok.line}: value not specified for key '{tok.text}'")
            self.pos += 1
            options[tok.text] = self.take_value(tok.text)

    def sections(self) -> JaasSections:
        out: JaasSections = {}
        while not self.at_end():
            name_tok = self.take("word", "a section name")
            if name_tok.text in out:
                raise JaasError(f"{self.origin}: line {name_tok.line}: section {name_tok.text!r} appears twice")
            self.take("{", f"'{{' after section name {name_tok.text}")
            modules = []
            while self.peek() is not None and self.peek().kind != "}":  # type: ignore[union-attr]
                modules.append(self.entry())
            self.take("}", f"'}}' closing section {name_tok.text}")
            self.take(";", f"';' after the '}}' of section {name_tok.text}")
            out[name_tok.text] = modules
        return out


# ---------------------------------------------------------------- public API

def parse_jaas_text(text: str, origin: str = "JAAS configuration") -> JaasSections:
    """The sections of a JAAS login file's text: {section name: [LoginModule, ...]}."""
    return _Parser(text, origin).sections()


def load_jaas_file(path: str | os.PathLike[str]) -> JaasSections:
    """Parse the JAAS file at ``path``; JaasError (naming the file) if missing, unreadable or bad."""
    origin = f"JAAS file {os.fspath(path)}"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise JaasError(f"{origin} does not exist") from None
    except UnicodeDecodeError:
        raise JaasError(f"{origin} is not UTF-8 text") from None
    except OSError as exc:
        raise JaasError(f"{origin} cannot be read: {exc.strerror or exc}") from None
    return parse_jaas_text(text, origin)


def parse_login_modules(value: str, origin: str = "sasl.jaas.config") -> list[LoginModule]:
    """Every login module of a ``sasl.jaas.config``-style value (``entry+``)."""
    parser = _Parser(value, origin)
    modules = []
    while not parser.at_end():
        modules.append(parser.entry())
    return modules


def parse_jaas_config(value: str, origin: str = "sasl.jaas.config") -> LoginModule:
    """The one login module of a ``sasl.jaas.config`` value (Kafka requires exactly one)."""
    modules = parse_login_modules(value, origin)
    if len(modules) != 1:
        raise JaasError(f"{origin}: JAAS config property contains {len(modules)} login modules, "
                        "should be 1 module")
    return modules[0]


def java_system_properties(opts: str) -> dict[str, str]:
    """The ``-Dkey=value`` (or ``-Dkey``) words of a JVM option string such as KAFKA_OPTS."""
    try:
        words = shlex.split(opts)
    except ValueError as exc:
        raise JaasError(f"{KAFKA_OPTS} cannot be split into words: {exc}") from None
    props: dict[str, str] = {}
    for word in words:
        if word.startswith("-D") and len(word) > 2:
            key, _, value = word[2:].partition("=")
            props[key] = value
    return props


def kafka_opts_properties(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """System properties given in ``KAFKA_OPTS`` of ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    return java_system_properties(env.get(KAFKA_OPTS, ""))


def login_config_file(properties: Mapping[str, str]) -> str | None:
    """The JAAS file named by ``java.security.auth.login.config`` (``==`` override form too)."""
    value = properties.get(LOGIN_CONFIG_PROPERTY)
    if value is None:
        return None
    value = value[1:] if value.startswith("=") else value
    return value or None
