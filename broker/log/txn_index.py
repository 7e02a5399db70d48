"""The aborted-transaction index of one segment: ``<base offset 20 digits>.txnindex``.

Invariant: the file is a sequence of 34-byte entries in Kafka's format (int16
version 0, int64 producer_id, int64 first_offset, int64 last_offset = the abort
marker's offset, int64 last_stable_offset), one per abort marker appended to the
segment, in marker order; the in-memory list mirrors the file. A missing file is
an empty index (it is created on the first entry). A partial trailing entry (torn
write) is ignored on load and cut off.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def parse_entries(data: bytes) -> list[tuple[int, AbortedTxn]]:
    """(version, entry) of each whole entry of a txn index file's bytes, up to the first entry
    whose version is not 0 (included: the caller decides what to make of it)."""
    out = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:len(data) - len(data) % ENTRY_SIZE]):
        out.append((version, AbortedTxn(pid, first, last, lso)))
        if version != VERSION:
            break
    return out


def write_index_file(path: str, entries: list[AbortedTxn]) -> None:
    """Write a txn index file in place and fsync it (for ``.cleaned`` files of a swap)."""
    with open(path, "wb") as f:
        f.write(b"".join(_ENTRY.pack(VERSION, *e) for e in entries))
        f.flush()
        os.fsync(f.fileno())


class TransactionIndex:
    """Aborted transactions whose markers live in one segment."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []

    def load(self) -> None:
        self.entries = []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        self.entries = [txn for version, txn in parse_entries(data) if version == VERSION]
        if len(self.entries) * ENTRY_SIZE != len(data):
            self._rewrite()

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted txn at {txn.last_offset} is not after "
                             f"{self.entries[-1].last_offset}")
        self.entries.append(txn)
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(VERSION, *txn))

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def reset(self) -> None:
        self.entries = []
        if os.path.exists(self.path):
            self._rewrite()

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_bound) (Kafka's collectAbortedTxns)."""
        return [e for e in self.entries if e.last_offset >= fetch_offset and e.first_offset < upper_bound]

    def _rewrite(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            for e in self.entries:
                f.write(_ENTRY.pack(VERSION, *e))
        os.replace(tmp, self.path)
