"""partition.metadata: the topic id a partition's log belongs to (Kafka 2.8, KIP-516).

Invariant: the file is Kafka's (``version: 0`` then ``topic_id: <base64 id>``), written
atomically (``checkpoint.write_atomically``: temp file, fsync, rename) the first time a
LeaderAndIsr names the log's topic id, and never changed afterwards: a log whose file names
another id belongs to an older topic of the same name (deleted while this broker was away), and
the replica manager refuses to use it (INCONSISTENT_TOPIC_ID) rather than mix two topics' data.
"""
from __future__ import annotations

import os
import uuid

from odradek.zk.znodes import topic_id_from_string, topic_id_string

from .checkpoint import CheckpointError, write_atomically

FILE_NAME = "partition.metadata"


def read_topic_id(log_dir: str) -> uuid.UUID | None:
    """The id in ``log_dir``'s partition.metadata (None: no file); CheckpointError if malformed."""
    path = os.path.join(log_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: not a version 0 partition.metadata file")
    try:
        return topic_id_from_string(fields["topic_id"])
    except ValueError:
        raise CheckpointError(f"{path}: malformed topic id {fields['topic_id']!r}") from None


def write_topic_id(log_dir: str, topic_id: uuid.UUID) -> None:
    write_atomically(os.path.join(log_dir, FILE_NAME), f"version: 0\ntopic_id: {topic_id_string(topic_id)}\n")
