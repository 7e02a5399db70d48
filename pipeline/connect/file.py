"""FileStreamSource / FileStreamSink: lines of a file to a topic and records of topics to a file
(Kafka's quickstart connectors, same settings: ``file``, ``topic`` / ``topics``, ``batch.size``).

Invariant: the source emits only complete lines (a trailing line without its
newline waits for it), each with source partition ``{"filename": <file>}`` and
source offset ``{"position": <byte offset just past the line's newline>}``, so a
task restarted from a committed offset re-reads exactly the lines after it. The
sink appends ``str(value)`` plus a newline per record, whole lines per write, and
its ``flush`` returns only once the bytes are fsynced; a task that starts on a
file ending in a line without its newline (a write cut short by kill -9, after
the last flush, so its records were never committed and are delivered again) cuts
that partial line first. Kafka's sink leaves it, and the replayed record is
glued to it.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, BinaryIO

from .api import ConfigDef, ConnectException, SinkConnector, SinkRecord, SinkTask, SourceConnector, \
    SourceRecord, SourceTask

STRING_SCHEMA = {"type": "string", "optional": False}


class FileStreamSourceConnector(SourceConnector):
    """Reads one file (``file``) into ``topic``; always a single task."""

    def config_def(self) -> ConfigDef:
        return (ConfigDef()
                .define("file", doc="Source filename.", required=True)
                .define("topic", "list", required=True, doc="The topic to publish data to",
                        validator=lambda v: None if len(v) == 1 else "'topic' in FileStreamSourceConnector "
                                                                    "configuration requires definition of a single topic.")
                .define("batch.size", "int", 2000, doc="The maximum number of records the task returns per poll"))

    def start(self, props: dict[str, str]) -> None:
        self.cfg = self.config_def().parse(props)
        self.props = props

    def task_class(self) -> type:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"file": self.cfg["file"], "topic": self.cfg["topic"][0], "batch.size": str(self.cfg["batch.size"])}]


class FileStreamSourceTask(SourceTask):
    """Tails ``file``: returns new complete lines, remembers the byte position after each."""

    idle_wait_s = 0.05

    def start(self, props: dict[str, str]) -> None:
        self.filename = os.path.abspath(props["file"])
        self.topic = props["topic"]
        self.batch_size = int(props.get("batch.size", "2000"))
        self.partition = {"filename": props["file"]}
        self.stream: BinaryIO | None = None
        self.position = 0
        self.buffer = b""
        last = self.context.offset_storage_reader.offset(self.partition)
        if last is not None:
            pos = last.get("position")
            if not isinstance(pos, int):
                raise ConnectException(f"Offset position is the incorrect type: {type(pos).__name__}")
            self.position = pos
        self._stopped = False

    def _open(self) -> bool:
        if self.stream is not None:
            return True
        try:
            self.stream = open(self.filename, "rb")
        except FileNotFoundError:
            return False
        self.stream.seek(self.position)
        self.buffer = b""
        return True

    def poll(self) -> list[SourceRecord] | None:
        if not self._open():
            time.sleep(self.idle_wait_s * 4)
            return None
        assert self.stream is not None
        records: list[SourceRecord] = []
        while len(records) < self.batch_size:
            nl = self.buffer.find(b"\n")
            if nl < 0:
                chunk = self.stream.read(1 << 16)
                if not chunk:
                    break
                self.buffer += chunk
                continue
            raw = self.buffer[:nl]
            self.buffer = self.buffer[nl + 1:]
            self.position += nl + 1
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            records.append(SourceRecord(self.partition, {"position": self.position}, self.topic, None,
                                        None, None, STRING_SCHEMA, raw.decode("utf-8", "replace"),
                                        int(time.time() * 1000)))
        if not records:
            time.sleep(self.idle_wait_s)
            return None
        return records

    def stop(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None


class FileStreamSinkConnector(SinkConnector):
    """Appends the records of ``topics`` to ``file``; always a single task."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("file", doc="Destination filename.", required=True)

    def start(self, props: dict[str, str]) -> None:
        self.cfg = self.config_def().parse(props)

    def task_class(self) -> type:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"file": self.cfg["file"]}]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _cut_partial_line(fd: int) -> None:
    """Truncates the file open as ``fd`` to just after its last newline (to nothing without one)."""
    end = os.fstat(fd).st_size
    pos = end
    while pos > 0:
        start = max(0, pos - (1 << 16))
        nl = os.pread(fd, pos - start, start).rfind(b"\n")
        if nl >= 0:
            pos = start + nl + 1
            break
        pos = start
    if pos < end:
        os.ftruncate(fd, pos)


class FileStreamSinkTask(SinkTask):
    fd: int | None = None

    def start(self, props: dict[str, str]) -> None:
        self.filename = props["file"]
        try:
            self.fd = os.open(self.filename, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise ConnectException(f"Couldn't find or create file '{self.filename}' for FileStreamSinkTask: "
                                   f"{exc.strerror}") from exc
        _cut_partial_line(self.fd)

    def put(self, records: list[SinkRecord]) -> None:
        assert self.fd is not None
        data = memoryview("".join(_text(r.value) + "\n" for r in records).encode("utf-8"))
        while data:
            data = data[os.write(self.fd, data):]

    def flush(self, current_offsets: dict) -> None:
        if self.fd is not None:
            os.fsync(self.fd)

    def stop(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
