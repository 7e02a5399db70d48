"""Kafka's checkpoint files and meta.properties.

Invariant: a checkpoint file on disk is always complete — it is written to
``<name>.tmp``, fsynced, then renamed over the old file (``CheckpointFile.scala``).
Format: line 1 version (0), line 2 entry count, then one entry per line with
space-separated fields (``topic partition offset`` or ``epoch startOffset``).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Mapping

VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"


class CheckpointError(Exception):
    """A malformed checkpoint file."""


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` via temp file, fsync and rename."""
    _write_temp(path, text, sync=True)
    os.replace(path + ".tmp", path)


def write_all_atomically(files: Iterable[tuple[str, str]], threads: int = 16) -> list[tuple[str, OSError]]:
    """``write_atomically`` for many (path, text) at once: every temp file written, then all of
    them fsynced by ``threads`` threads (the file system commits concurrent syncs together, where
    one at a time costs a journal commit each), then each renamed over its file. Returns (path,
    error) for those that failed; the others are replaced."""
    failed: list[tuple[str, OSError]] = []
    written: list[str] = []
    for path, text in files:
        try:
            _write_temp(path, text, sync=False)
            written.append(path)
        except OSError as e:
            failed.append((path, e))

    def sync(path: str) -> OSError | None:
        try:
            fd = os.open(path + ".tmp", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(path + ".tmp", path)
        except OSError as e:
            return e
        return None
    if written:
        with ThreadPoolExecutor(min(threads, len(written))) as pool:
            failed += [(path, e) for path, e in zip(written, pool.map(sync, written)) if e is not None]
    return failed


def _write_temp(path: str, text: str, sync: bool) -> None:
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_entries(path: str, entries: Iterable[tuple]) -> None:
    write_atomically(path, entries_text(entries))


def entries_text(entries: Iterable[tuple]) -> str:
    """A checkpoint file's text: version, count, one entry per line."""
    lines = [" ".join(str(f) for f in e) for e in entries]
    return f"{VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)


def read_entries(path: str, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file ([] if it does not exist)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unrecognised version or empty file")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(e) != fields for e in entries):
        raise CheckpointError(f"{path}: expected {count} entries of {fields} fields")
    return entries


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoints (recovery points, log start offsets, HWs)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_entries(self.path, ((t, p, o) for (t, p), o in sorted(offsets.items())))

    def read(self) -> dict[tuple[str, int], int]:
        try:
            return {(t, int(p)): int(o) for t, p, o in read_entries(self.path, 3)}
        except ValueError:
            raise CheckpointError(f"{self.path}: malformed partition or offset") from None


def read_properties(path: str) -> dict[str, str] | None:
    """A small ``key=value`` file such as meta.properties (None if absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if line and line[0] not in "#!" and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props


def write_properties(path: str, props: Mapping[str, object], comment: str = "") -> None:
    head = f"#{comment}\n" if comment else ""
    write_atomically(path, head + "".join(f"{k}={v}\n" for k, v in props.items()))
