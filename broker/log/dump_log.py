"""``odradek dump-log``: a partition's files printed as kafka-dump-log.sh (Kafka 2.8's
DumpLogSegments) prints them, for looking into a log that seems corrupt.

Invariant: it only reads (a broker may be running on the same files), and it prints every
complete batch of a ``.log`` — one that fails its CRC is printed with ``isvalid: false``,
records that cannot be decoded get a line saying why — so a damaged segment is shown up to
its damage, never refused as a whole. Line formats follow Kafka's tool, so scripts written
against it keep working; problems found (index entries that do not match the log, offsets
that are not consecutive) go to stderr after the dump, as Kafka's tool reports them.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import Callable, TextIO

from odradek.protocol import record_batch as rb
from odradek.protocol.compression import CODEC_NAMES
from odradek.protocol.control_records import parse_control_record
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import Record, decode_batch

from .producer_state import CorruptSnapshotError, decode_snapshot
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from .txn_index import TXN_INDEX_SUFFIX, parse_entries

SNAPSHOT_SUFFIX = ".snapshot"
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_OFFSET_ENTRY = struct.Struct(">ii")    # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")      # timestamp, relative offset


class Problems:
    """What the dump found wrong, printed to stderr at the end as Kafka's tool does."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    def report(self, err: TextIO) -> None:
        for path, pairs in self.index_mismatches.items():
            print(f"Mismatches in :{path}", file=err)
            for index_offset, log_offset in pairs:
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for path, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{path}", file=err)
            for index_ts, log_ts in pairs:
                print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=err)
        for path, pairs in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {path}", file=err)
            for first, second in pairs:
                print(f"  {first} is followed by {second}", file=err)


def _batches(data: bytes, max_size: int) -> list[tuple[int, rb.BatchHeader]]:
    """(position, header) of each complete batch from the start of a segment's bytes."""
    out = []
    pos = 0
    while len(data) - pos >= rb.HEADER_SIZE:
        h = rb.parse_header(data, pos)
        if h.batch_length < rb.HEADER_SIZE - rb.LOG_OVERHEAD or h.size > max_size or pos + h.size > len(data):
            break
        out.append((pos, h))
        pos += h.size
    return out


class DumpError(Exception):
    """A file that cannot be dumped: one line on stderr, exit code 1."""


def _base_offset(path: str) -> int:
    name = os.path.basename(path).split(".")[0]
    try:
        return int(name)
    except ValueError:
        raise DumpError(f"{path}: the file name is not a base offset") from None


def _sibling(path: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(path).split(".")[0] + suffix)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _batch_line(h: rb.BatchHeader, position: int, valid: bool) -> str:
    last_seq = -1 if h.base_sequence < 0 else (h.base_sequence + h.last_offset_delta) % (1 << 31)
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_seq} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
            f"position: {position} {TIMESTAMP_TYPES[h.timestamp_type]}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {CODEC_NAMES.get(h.compression, str(h.compression)).upper()} "
            f"crc: {h.crc} isvalid: {str(valid).lower()}")


def _record_line(h: rb.BatchHeader, r: Record, batch: bytes, metadata: bool, contents: bool,
                 decode: Callable[[Record], tuple[str | None, str | None]]) -> str:
    parts = ["|"]
    if metadata:
        sequence = -1 if h.base_sequence < 0 else (h.base_sequence + r.offset - h.base_offset) % (1 << 31)
        parts.append(f"offset: {r.offset} {TIMESTAMP_TYPES[h.timestamp_type]}: {r.timestamp} "
                     f"keysize: {-1 if r.key is None else len(r.key)} "
                     f"valuesize: {-1 if r.value is None else len(r.value)} sequence: {sequence} "
                     f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        if h.is_control:
            try:
                commit, coordinator_epoch = parse_control_record(batch)
                parts.append(f"endTxnMarker: {'COMMIT' if commit else 'ABORT'} coordinatorEpoch: {coordinator_epoch}")
            except (KafkaError, ValueError, struct.error):
                parts.append("controlType: UNKNOWN")
    if contents and not h.is_control:
        key, payload = decode(r)
        if key is not None:
            parts.append(f"key: {key}")
        if payload is not None:
            parts.append(f"payload: {payload}")
    return " ".join(parts)


def _text(r: Record) -> tuple[str | None, str | None]:
    def show(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8", errors="replace")
    return show(r.key), show(r.value)


def dump_log(path: str, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    print(f"Starting offset: {_base_offset(path)}", file=out)
    data = _read(path)
    deep = args.deep_iteration or args.print_data_log
    valid_bytes = 0
    last = -1
    for pos, h in _batches(data, args.max_message_size):
        raw = data[pos:pos + h.size]
        valid = rb.compute_crc(raw, 0, h.size) == h.crc
        print(_batch_line(h, pos, valid), file=out)
        if deep:
            try:
                _, records = decode_batch(raw)
            except KafkaError as e:
                print(f"| records not readable: {e.message}", file=out)
                records = []
            for r in records:
                if last != -1 and r.offset != last + 1:
                    problems.non_consecutive.setdefault(os.path.abspath(path), []).append((last, r.offset))
                last = r.offset
                print(_record_line(h, r, raw, not args.skip_record_metadata, args.print_data_log, _text), file=out)
        valid_bytes += h.size
    if len(data) > valid_bytes:
        print(f"Found {len(data) - valid_bytes} invalid bytes at the end of {os.path.basename(path)}", file=out)


def _segment_batches(path: str, max_size: int) -> list[tuple[int, rb.BatchHeader]]:
    log_path = _sibling(path, LOG_SUFFIX)
    return _batches(_read(log_path), max_size) if os.path.exists(log_path) else []


def dump_index(path: str, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    base = _base_offset(path)
    data = _read(path)
    whole = len(data) - len(data) % _OFFSET_ENTRY.size
    entries = [(base + rel, position) for rel, position in _OFFSET_ENTRY.iter_unpack(data[:whole])]
    if not entries:
        print(f"{path} is empty.", file=out)
        return
    if args.index_sanity_check:
        sane = (len(data) == whole and all(a[0] < b[0] for a, b in zip(entries, entries[1:]))
                and all(o >= base and p >= 0 for o, p in entries))
        print(f"{path} {'passed' if sane else 'failed'} sanity check.", file=out)
        return
    last_offsets = {pos: h.last_offset for pos, h in _segment_batches(path, args.max_message_size)}
    for i, (offset, position) in enumerate(entries):
        if offset == base and i > 0:   # the zero-filled tail of a preallocated index
            break
        found = last_offsets.get(position, -1)
        if found != offset:
            problems.index_mismatches.setdefault(os.path.abspath(path), []).append((offset, found))
        if not args.verify_index_only:
            print(f"offset: {offset} position: {position}", file=out)


def dump_time_index(path: str, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    base = _base_offset(path)
    data = _read(path)
    whole = len(data) - len(data) % _TIME_ENTRY.size
    entries = [(ts, base + rel) for ts, rel in _TIME_ENTRY.iter_unpack(data[:whole])]
    if args.index_sanity_check:
        sane = len(data) == whole and all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(entries, entries[1:]))
        print(f"{path} {'passed' if sane else 'failed'} sanity check.", file=out)
        return
    max_ts = {h.last_offset: h.max_timestamp for _, h in _segment_batches(path, args.max_message_size)}
    for i, (ts, offset) in enumerate(entries):
        if offset == base and i > 0:
            break
        if max_ts.get(offset, ts) != ts:
            problems.time_mismatches.setdefault(os.path.abspath(path), []).append((ts, max_ts[offset]))
        if not args.verify_index_only:
            print(f"timestamp: {ts} offset: {offset}", file=out)


def dump_txn_index(path: str, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    for version, txn in parse_entries(_read(path)):
        print(f"version: {version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
              f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}", file=out)


def dump_snapshot(path: str, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    try:
        producers = decode_snapshot(_read(path))
    except CorruptSnapshotError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return
    for pid, entry in producers.items():
        txn_first = "None" if entry.current_txn_first_offset < 0 else f"Some({entry.current_txn_first_offset})"
        line = (f"producerId: {pid} producerEpoch: {entry.epoch} coordinatorEpoch: {entry.coordinator_epoch} "
                f"currentTxnFirstOffset: {txn_first} ")
        if entry.batches:
            b = entry.batches[-1]
            line += (f"firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                     f"offsetDelta: {b.last_offset - b.first_offset} timestamp: {entry.last_timestamp}")
        print(line, file=out)


DUMPERS = {LOG_SUFFIX: dump_log, INDEX_SUFFIX: dump_index, TIME_INDEX_SUFFIX: dump_time_index,
           TXN_INDEX_SUFFIX: dump_txn_index, SNAPSHOT_SUFFIX: dump_snapshot}


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = argparse.ArgumentParser(prog="odradek dump-log", description=__doc__.split("\n")[0])
    parser.add_argument("--files", required=True, help="comma-separated data and index files to dump")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    parser.add_argument("--print-data-log", action="store_true", help="print keys and values (implies deep iteration)")
    parser.add_argument("--skip-record-metadata", action="store_true", help="with --print-data-log: only keys and values")
    parser.add_argument("--verify-index-only", action="store_true", help="check index entries against the log, print nothing")
    parser.add_argument("--index-sanity-check", action="store_true", help="only the check a broker makes at startup")
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024, help="largest batch size (default 5242880)")
    args = parser.parse_args(argv)
    problems = Problems()
    for path in [p for p in args.files.split(",") if p]:
        print(f"Dumping {path}", file=out)
        dumper = DUMPERS.get(os.path.splitext(path)[1])
        if dumper is None:
            print(f"Ignoring unknown file {path}", file=err)
            continue
        try:
            dumper(path, args, problems, out)
        except OSError as e:
            print(f"Error: {path}: {e.strerror}", file=err)
            return 1
        except DumpError as e:
            print(f"Error: {e}", file=err)
            return 1
    problems.report(err)
    return 0
