"""Source offset storage: a local file (standalone) or a compacted Kafka topic (distributed).

Invariant: keys and values are Kafka Connect's JSON — key
``["<connector>", {<source partition>}]``, value ``{<source offset>}`` (null
deletes) — so an offset written by one worker is read by any other;
``set(...)`` returns only once the offsets are durable (fsynced file renamed
into place / acknowledged by all in-sync replicas), and ``get`` sees every
offset that any earlier ``set`` stored.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any

from .api import OffsetStorageReader, _freeze
from .kafka_log import KafkaBasedLog, ensure_topic


def offset_key(connector: str, partition: dict) -> bytes:
    return json.dumps([connector, partition], separators=(",", ":"), sort_keys=True).encode("utf-8")


def offset_value(offset: dict | None) -> bytes | None:
    return None if offset is None else json.dumps(offset, separators=(",", ":"), sort_keys=True).encode("utf-8")


class OffsetBackingStore:
    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def get(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        raise NotImplementedError

    def set(self, values: dict[bytes, bytes | None]) -> None:
        raise NotImplementedError


class MemoryOffsetBackingStore(OffsetBackingStore):
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.lock = threading.Lock()

    def get(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        with self.lock:
            return {k: self.data.get(k) for k in keys}

    def _apply(self, values: dict[bytes, bytes | None]) -> None:
        for k, v in values.items():
            if v is None:
                self.data.pop(k, None)
            else:
                self.data[k] = v

    def set(self, values: dict[bytes, bytes | None]) -> None:
        with self.lock:
            self._apply(values)


class FileOffsetBackingStore(MemoryOffsetBackingStore):
    """``offset.storage.file.filename``: a JSON object {key: value} (our format; Kafka's is Java-serialized)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def start(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f)
        except FileNotFoundError:
            return
        except ValueError as exc:
            raise RuntimeError(f"offset file {self.path} is corrupt: {exc}") from None
        self.data = {k.encode("utf-8"): v.encode("utf-8") for k, v in raw.items()}

    def set(self, values: dict[bytes, bytes | None]) -> None:
        with self.lock:
            self._apply(values)
            doc = {k.decode("utf-8"): v.decode("utf-8") for k, v in self.data.items()}
            tmp = f"{self.path}.tmp"
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)


class KafkaOffsetBackingStore(MemoryOffsetBackingStore):
    """``offset.storage.topic``: compacted, ``offset.storage.partitions`` partitions, keyed as above."""

    def __init__(self, worker_config: Any) -> None:
        super().__init__()
        self.wc = worker_config
        self.log = KafkaBasedLog(worker_config.offset_topic, worker_config.producer_props(),
                                 worker_config.consumer_props(), self._on_record)

    def _on_record(self, record: Any) -> None:
        with self.lock:
            self._apply({record.key: record.value})

    def start(self) -> None:
        wc = self.wc
        ensure_topic(wc.admin_props(), wc.offset_topic, wc.offset_partitions, wc.offset_rf)
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def get(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        self.log.read_to_end()
        return super().get(keys)

    def set(self, values: dict[bytes, bytes | None]) -> None:
        futures = [self.log.send(k, v) for k, v in values.items()]
        for fut in futures:
            fut.get(timeout=self.wc.offset_flush_timeout_ms / 1000.0 + 30)
        with self.lock:
            self._apply(values)


class ConnectorOffsetReader(OffsetStorageReader):
    """The offsets of one connector's source partitions."""

    def __init__(self, store: OffsetBackingStore, connector: str) -> None:
        self.store, self.connector = store, connector

    def offsets(self, partitions: list[dict]) -> dict:
        keys = {offset_key(self.connector, p): p for p in partitions}
        found = self.store.get(list(keys))
        out = {}
        for k, v in found.items():
            if v is not None:
                out[_freeze(keys[k])] = json.loads(v)
        return out
