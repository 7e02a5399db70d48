"""Shared plumbing of the command-line tools (console, perf, demo).

Invariant: a tool reports a user error as exactly one ``Error: ...`` line on
stderr and exit code 1 (``ToolError``/``ArgParser`` never print a usage dump or
a traceback); the bootstrap address comes from ``--bootstrap-server``, else
``$ODRADEK_BOOTSTRAP_SERVERS``, else ``./data/cluster.json``'s ``bootstrap_servers``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from odradek.protocol.errors import KafkaError

from .config import ConfigError, parse_properties


class ToolError(Exception):
    """A user-facing error: printed as one line."""


class ArgParser(argparse.ArgumentParser):
    """argparse that raises ToolError instead of printing usage and exiting 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ToolError(message)


def resolve_bootstrap(given: str | None, cluster_file: str | os.PathLike = "data/cluster.json") -> str:
    if given:
        return given
    env = os.environ.get("ODRADEK_BOOTSTRAP_SERVERS")
    if env:
        return env
    path = Path(cluster_file)
    if path.exists():
        try:
            servers = json.loads(path.read_text()).get("bootstrap_servers")
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read {path}: {exc}") from None
        if servers:
            return servers
    raise ToolError("--bootstrap-server is required (no $ODRADEK_BOOTSTRAP_SERVERS and no ./data/cluster.json)")


def kv_pairs(items: list[str] | None, what: str) -> dict[str, str]:
    """``["k=v", ...]`` -> dict."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"invalid {what} {item!r} (expected key=value)")
        out[key.strip()] = value
    return out


def properties_file(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    try:
        return parse_properties(Path(path).read_text())
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None


def run_tool(fn: Callable[[], int | None]) -> int:
    """Run a tool body, mapping user errors to one stderr line and exit code 1."""
    try:
        return int(fn() or 0)
    except (ToolError, ConfigError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


def as_bool(value: Any) -> bool:
    return str(value).strip().lower() == "true"
