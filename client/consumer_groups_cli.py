"""``odradek consumer-groups``: Kafka's kafka-consumer-groups.sh (list, describe, reset offsets, delete).

Invariant: exactly one action per run; output tables use Kafka 2.8's column
headers and layout (column widths from the longest value, at least 15); offsets
are only reset for a group that is Empty or Dead (no active members), and
only with ``--execute`` (otherwise it is a dry run that prints the plan). User
errors are one ``Error: ...`` line on stderr and exit code 1.
"""
from __future__ import annotations

import datetime as _dt
import sys
from typing import Any, Iterable

from odradek.protocol.errors import KafkaError

from .admin import AdminClient
from .consumer import Consumer
from .structs import GroupDescription, OffsetAndMetadata, TopicPartition
from .tools import ArgParser, ToolError, properties_file, resolve_bootstrap, run_tool

MISSING = "-"
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_RESET_SPECS = ("to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by", "to_current")


def parser() -> ArgParser:
    ap = ArgParser(prog="odradek consumer-groups", description="List, describe, reset and delete consumer groups.")
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--describe", action="store_true")
    ap.add_argument("--delete", action="store_true")
    ap.add_argument("--reset-offsets", dest="reset_offsets", action="store_true")
    ap.add_argument("--delete-offsets", dest="delete_offsets", action="store_true")
    ap.add_argument("--group", action="append", default=[])
    ap.add_argument("--all-groups", action="store_true")
    ap.add_argument("--members", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--state", action="store_true")
    ap.add_argument("--offsets", action="store_true")
    ap.add_argument("--topic", action="append", default=[])
    ap.add_argument("--all-topics", action="store_true")
    ap.add_argument("--to-earliest", action="store_true")
    ap.add_argument("--to-latest", action="store_true")
    ap.add_argument("--to-current", action="store_true")
    ap.add_argument("--to-offset", type=int)
    ap.add_argument("--shift-by", type=int)
    ap.add_argument("--to-datetime")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--execute", action="store_true")
    ap.add_argument("--timeout", type=int, default=5000, help="request timeout in ms")
    ap.add_argument("--command-config", dest="command_config",
                    help="client properties file (security.protocol, ssl.*, sasl.*)")
    return ap


def _table(header: list[str], rows: list[list[Any]], fixed: dict[int, int] | None = None) -> str:
    """Kafka's printf layout: every column but the last left-aligned to max(15, widest value)."""
    cols = [[str(c) for c in row] for row in rows]
    widths = []
    for i, h in enumerate(header[:-1]):
        w = (fixed or {}).get(i) or max([15, len(h)] + [len(r[i]) for r in cols])
        widths.append(w)
    lines = []
    for r in [header] + cols:
        lines.append(" ".join(f"{c:<{widths[i]}}" for i, c in enumerate(r[:-1])) + " " + r[-1])
    return "\n".join(lines)


class GroupsTool:
    def __init__(self, args: Any) -> None:
        self.args = args
        bootstrap = resolve_bootstrap(args.bootstrap_server)
        client = {**properties_file(args.command_config), "bootstrap.servers": bootstrap,
                  "request.timeout.ms": args.timeout, "client.id": "odradek-consumer-groups"}
        self.admin = AdminClient(client)
        self.consumer = Consumer({**client, "enable.auto.commit": False})

    def close(self) -> None:
        self.admin.close()
        self.consumer.close()

    def groups(self) -> list[str]:
        if self.args.all_groups:
            return [g for g, _ in self.admin.list_consumer_groups()]
        if not self.args.group:
            raise ToolError("--group (or --all-groups) is required")
        return self.args.group

    # -- list / describe -----------------------------------------------------------------------

    def list_groups(self) -> None:
        for gid, _ptype in self.admin.list_consumer_groups():
            print(gid)

    def describe(self) -> None:
        for desc in self.admin.describe_consumer_groups(self.groups()):
            if desc.state == "Dead":
                raise ToolError(f"Consumer group '{desc.group_id}' does not exist.")
            if self.args.state:
                self._print_state(desc)
            elif self.args.members:
                self._print_members(desc)
            else:
                self._print_offsets(desc)

    def _member_note(self, desc: GroupDescription) -> None:
        if desc.state == "Empty":
            print(f"\nConsumer group '{desc.group_id}' has no active members.", file=sys.stderr)
        elif desc.state in ("PreparingRebalance", "CompletingRebalance"):
            print(f"\nWarning: Consumer group '{desc.group_id}' is rebalancing.", file=sys.stderr)

    def _print_state(self, desc: GroupDescription) -> None:
        broker = self.admin.describe_cluster()["brokers"]
        coord = next((f"{b['host']}:{b['port']} ({b['node_id']})" for b in broker
                      if b["node_id"] == desc.coordinator), f"({desc.coordinator})")
        print()
        print(_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                     [[desc.group_id, coord, desc.protocol or "", desc.state, len(desc.members)]]))

    def _print_members(self, desc: GroupDescription) -> None:
        self._member_note(desc)
        if not desc.members:
            return
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        rows = []
        for m in desc.members:
            row = [desc.group_id, m.member_id, m.client_host, m.client_id, len(m.assignment)]
            if self.args.verbose:
                by_topic: dict[str, list[int]] = {}
                for tp in sorted(m.assignment):
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                row.append(",".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or MISSING)
            rows.append(row)
        if self.args.verbose:
            header.append("ASSIGNMENT")
        print()
        print(_table(header, rows))

    def _print_offsets(self, desc: GroupDescription) -> None:
        self._member_note(desc)
        committed = self.admin.list_consumer_group_offsets(desc.group_id)
        owners: dict[TopicPartition, Any] = {}
        members = sorted(desc.members, key=lambda m: -len(m.assignment))
        for m in members:
            for tp in m.assignment:
                owners[tp] = m
        tps = sorted(set(committed) | set(owners))
        ends = self.consumer.end_offsets(tps) if tps else {}
        rows: list[list[Any]] = []

        def row(tp: TopicPartition, m: Any) -> list[Any]:
            cur = committed.get(tp)
            end = ends.get(tp)
            lag = end - cur.offset if cur is not None and end is not None else MISSING
            return [desc.group_id, tp.topic, tp.partition, MISSING if cur is None else cur.offset,
                    MISSING if end is None else end, lag, m.member_id if m else MISSING,
                    m.client_host if m else MISSING, m.client_id if m else MISSING]

        for m in members:
            if not m.assignment:
                rows.append([desc.group_id, MISSING, MISSING, MISSING, MISSING, MISSING, m.member_id,
                             m.client_host, m.client_id])
            for tp in sorted(m.assignment):
                rows.append(row(tp, m))
        for tp in tps:
            if tp not in owners:
                rows.append(row(tp, None))
        if not rows:
            return
        print()
        print(_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"], rows, fixed={2: 10}))

    # -- reset -------------------------------------------------------------------------------

    def _partitions(self, group: str) -> list[TopicPartition]:
        if self.args.all_topics:
            return sorted(self.admin.list_consumer_group_offsets(group))
        if not self.args.topic:
            raise ToolError("--reset-offsets and --delete-offsets need --topic (--reset-offsets: or --all-topics)")
        out: list[TopicPartition] = []
        for spec in self.args.topic:
            topic, _, parts = spec.partition(":")
            existing = self.consumer.partitions_for_topic(topic)
            if existing is None:
                raise ToolError(f"topic '{topic}' does not exist")
            if parts:
                try:
                    wanted = [int(p) for p in parts.split(",") if p.strip()]
                except ValueError:
                    raise ToolError(f"invalid partition list in --topic {spec!r}") from None
                missing = [p for p in wanted if p not in existing]
                if missing:
                    raise ToolError(f"partition(s) {missing} of topic '{topic}' do not exist")
            else:
                wanted = sorted(existing)
            out.extend(TopicPartition(topic, p) for p in wanted)
        return out

    def _targets(self, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        a = self.args
        if a.to_earliest:
            return self.consumer.beginning_offsets(tps)
        if a.to_latest:
            return self.consumer.end_offsets(tps)
        begin, end = self.consumer.beginning_offsets(tps), self.consumer.end_offsets(tps)

        def clamp(tp: TopicPartition, off: int) -> int:
            return max(begin[tp], min(end[tp], off))

        if a.to_offset is not None:
            return {tp: clamp(tp, a.to_offset) for tp in tps}
        if a.shift_by is not None or a.to_current:
            committed = self.admin.list_consumer_group_offsets(group, tps)
            shift = a.shift_by or 0
            return {tp: clamp(tp, (committed[tp].offset if tp in committed else end[tp]) + shift) for tp in tps}
        ts = _parse_datetime(a.to_datetime)
        found = self.consumer.offsets_for_times({tp: ts for tp in tps})
        return {tp: (end[tp] if (at := found.get(tp)) is None else at.offset) for tp in tps}

    def reset(self) -> None:
        a = self.args
        specs = [s for s in _RESET_SPECS if getattr(a, s) not in (None, False)]
        if len(specs) != 1:
            raise ToolError("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-current, "
                            "--to-offset, --shift-by, --to-datetime")
        if a.dry_run and a.execute:
            raise ToolError("--dry-run and --execute cannot be used together")
        if not a.dry_run and not a.execute:
            print("WARN: No action will be performed as the --execute option is missing. "
                  "You should add the --dry-run option explicitly.", file=sys.stderr)
        rows: list[tuple[str, TopicPartition, int]] = []
        for group in self.groups():
            desc = self.admin.describe_consumer_groups([group])[0]
            if desc.state not in ("Empty", "Dead"):
                raise ToolError(f"Assignments can only be reset if the group '{group}' is inactive, "
                                f"but the current state is {desc.state}.")
            targets = self._targets(group, self._partitions(group))
            if a.execute:
                self.admin.alter_consumer_group_offsets(group, {tp: OffsetAndMetadata(o) for tp, o in targets.items()})
            rows.extend((group, tp, off) for tp, off in sorted(targets.items()))
        print()
        print(f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}".rstrip())
        for group, tp, off in rows:
            print(f"{group:<30} {tp.topic:<30} {tp.partition:<10} {off:<15}".rstrip())

    # -- delete ------------------------------------------------------------------------------

    def delete(self) -> None:
        groups = self.groups()
        results = self.admin.delete_consumer_groups(groups, raise_errors=False)
        failed = {g: e for g, e in results.items() if e is not None}
        if failed:
            detail = "; ".join(f"group '{g}': {_describe_error(e)}" for g, e in failed.items())
            raise ToolError(f"Deletion of some consumer groups failed: {detail}")
        print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in groups) + ") was successful.")


    def delete_offsets(self) -> None:
        """kafka-consumer-groups.sh --delete-offsets: one group, the partitions of --topic."""
        groups = self.args.group
        if len(groups) != 1 or self.args.all_groups or self.args.all_topics:
            raise ToolError("--delete-offsets takes exactly one --group and --topic (not --all-groups, --all-topics)")
        group, topics = groups[0], [spec.partition(":")[0] for spec in self.args.topic]
        try:
            results = self.admin.delete_consumer_group_offsets(group, self._partitions(group))
        except KafkaError as e:
            raise ToolError(_GROUP_ERRORS.get(e.code.name, "Encounter some unknown error: {e}").format(
                group=group, e=e)) from None
        if any(err is not None for err in results.values()):
            print("Error: Encounter some partition level error, see the follow-up details:", file=sys.stderr)
        else:
            print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
        print(f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}")
        for tp, err in sorted(results.items(), key=lambda kv: kv[0].topic + str(kv[0].partition)):
            status = "Successful" if err is None else f"Error: {_describe_error(err)}"
            print(f"{tp.topic:<30} {tp.partition:<15} {status:<15}".rstrip())


_GROUP_ERRORS = {   # kafka-consumer-groups.sh --delete-offsets' lines for a group-level error
    "INVALID_GROUP_ID": "'{group}' is not valid.",
    "GROUP_ID_NOT_FOUND": "'{group}' does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "Access to '{group}' is not authorized.",
    "NON_EMPTY_GROUP": "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
}


def _describe_error(e: Any) -> str:
    code = getattr(e, "code", None)
    name = getattr(code, "name", "")
    if name == "NON_EMPTY_GROUP":
        return "The group is not empty."
    if name == "GROUP_ID_NOT_FOUND":
        return "The group id does not exist."
    if name == "GROUP_SUBSCRIBED_TO_TOPIC":
        return "The consumer group is actively subscribed to the topic."
    if name == "UNKNOWN_TOPIC_OR_PARTITION":
        return "This server does not host this topic-partition."
    return str(e)


def _parse_datetime(text: str) -> int:
    """'YYYY-MM-DDTHH:mm:SS.sss' (local time unless it carries an offset / Z) -> epoch ms."""
    try:
        value = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss") from None
    if value.tzinfo is None:
        value = value.astimezone()
    return int(value.timestamp() * 1000)


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        args = parser().parse_args(argv)
        actions = [a for a in _ACTIONS if getattr(args, a)]
        if len(actions) != 1:
            raise ToolError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                            "--delete-offsets")
        tool = GroupsTool(args)
        try:
            {"list": tool.list_groups, "describe": tool.describe, "delete": tool.delete,
             "reset_offsets": tool.reset, "delete_offsets": tool.delete_offsets}[actions[0]]()
        finally:
            tool.close()
        return 0

    return run_tool(body)


if __name__ == "__main__":
    sys.exit(main())
