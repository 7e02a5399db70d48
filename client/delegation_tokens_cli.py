"""``odradek delegation-tokens``: kafka-delegation-tokens.sh (create, renew, expire and describe
delegation tokens through the admin API).

Invariant: Kafka's flags and checks (``--bootstrap-server`` and ``--command-config`` required,
exactly one of --create/--renew/--expire/--describe, each action's required and forbidden
options) and its output lines: the "Calling ... operation" line, then the token table (TOKENID,
HMAC, OWNER, RENEWERS, ISSUEDATE, EXPIRYDATE, MAXDATE with dates as yyyy-MM-ddTHH:mm in local
time) or the new expiry date. A refusal is ``Error while executing delegation token command :
<Kafka's message>`` and exit code 1; a bad command line is one line and exit code 1.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import sys
import time
from typing import Iterable

from odradek.protocol.delegation_token import DelegationToken
from odradek.protocol.errors import KafkaError

from .admin import AdminClient
from .tools import ArgParser, ToolError, properties_file, run_tool

ACTIONS = ("create", "renew", "expire", "describe")
# Kafka's checkInvalidArgs: what each action may not be given
FORBIDDEN = {"create": ("hmac", "renew_time_period", "expiry_time_period", "owner_principal"),
             "renew": ("renewer_principal", "max_life_time_period", "expiry_time_period", "owner_principal"),
             "expire": ("renewer_principal", "max_life_time_period", "renew_time_period", "owner_principal"),
             "describe": ("renewer_principal", "max_life_time_period", "hmac", "renew_time_period",
                          "expiry_time_period")}
REQUIRED = {"create": ("max_life_time_period",), "renew": ("hmac", "renew_time_period"),
            "expire": ("hmac", "expiry_time_period"), "describe": ()}


def date(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def java_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(items) + "]"


def print_tokens(tokens: list[DelegationToken]) -> None:
    row = "\n%-15s %-30s %-15s %-25s %-15s %-15s %-15s"
    sys.stdout.write(row % ("TOKENID", "HMAC", "OWNER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"))
    for t in tokens:
        i = t.info
        sys.stdout.write(row % (i.token_id, t.hmac_base64, i.owner, java_list(i.renewers),
                                date(i.issue_timestamp), date(i.expiry_timestamp), date(i.max_timestamp)))
        print()


def parse(argv: list[str]) -> tuple[str, argparse.Namespace]:
    ap = ArgParser(prog="odradek delegation-tokens", description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--command-config", dest="command_config")
    for action in ACTIONS:
        ap.add_argument(f"--{action}", action="store_true")
    ap.add_argument("--max-life-time-period", dest="max_life_time_period", type=int)
    ap.add_argument("--renewer-principal", dest="renewer_principal", action="append")
    ap.add_argument("--owner-principal", dest="owner_principal", action="append")
    ap.add_argument("--hmac")
    ap.add_argument("--renew-time-period", dest="renew_time_period", type=int)
    ap.add_argument("--expiry-time-period", dest="expiry_time_period", type=int)
    args = ap.parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise ToolError("Command must include exactly one action: --create, --renew, --expire or --describe")
    for name in ("bootstrap_server", "command_config", *REQUIRED[chosen[0]]):
        if getattr(args, name) is None:
            raise ToolError(f"Missing required argument \"[{name.replace('_', '-')}]\"")
    for name in FORBIDDEN[chosen[0]]:
        if getattr(args, name) is not None:
            raise ToolError(f"Option \"[{chosen[0]}]\" can't be used with option \"[{name.replace('_', '-')}]\"")
    return chosen[0], args


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"--hmac {text!r} is not base64") from None


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        action, args = parse(argv)
        config = {**properties_file(args.command_config), "bootstrap.servers": args.bootstrap_server,
                  "client.id": "odradek-delegation-tokens"}
        with AdminClient(config) as admin:
            try:
                run(admin, action, args)
            except KafkaError as exc:
                print(f"Error while executing delegation token command : {exc.message or exc}", file=sys.stderr)
                return 1
        return 0

    return run_tool(body)


def run(admin: AdminClient, action: str, a: argparse.Namespace) -> None:
    if action == "create":
        renewers = [p.strip() for p in (a.renewer_principal or [])]
        period = a.max_life_time_period
        print(f"Calling create token operation with renewers :{java_list(renewers)} , max-life-time-period :{period}")
        token = admin.create_delegation_token(renewers, period)
        print(f"Created delegation token with tokenId : {token.info.token_id}")
        print_tokens([token])
    elif action in ("renew", "expire"):
        period = a.renew_time_period if action == "renew" else a.expiry_time_period
        if action == "renew":
            print(f"Calling renew token operation with hmac :{a.hmac} , renew-time-period :{period}")
            expiry = admin.renew_delegation_token(_hmac(a.hmac), period)
        else:
            print(f"Calling expire token operation with hmac :{a.hmac} , expire-time-period : {period}")
            expiry = admin.expire_delegation_token(_hmac(a.hmac), period)
        print(f"Completed {action} operation. New expiry date : {date(expiry)}")
    else:
        owners = a.owner_principal
        if owners is None:
            print("Calling describe token operation for current user.")
        else:
            print(f"Calling describe token operation for owners :{java_list(p.strip() for p in owners)}")
        tokens = admin.describe_delegation_token(None if owners is None else [p.strip() for p in owners])
        print(f"Total number of tokens : {len(tokens)}")
        print_tokens(tokens)
