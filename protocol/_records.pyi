"""Types of the records section walks in C (protocol/_records.c)."""
from typing import TypeVar

R = TypeVar("R", bound=tuple[object, ...])

def scan(data: bytes | bytearray | memoryview, start: int, end: int, count: int, last_delta: int, strict: bool,
         base_timestamp: int, collect: bool, /) -> tuple[list[int], list[int]] | None: ...

def decode(data: bytes | bytearray | memoryview, start: int, end: int, count: int, base_offset: int,
           base_timestamp: int, log_append_time: int | None, record_type: type[R], /) -> list[R] | None: ...

def check_client_batch(data: bytes | bytearray | memoryview, max_size: int, /) -> tuple[int, ...] | None: ...

def append_record(buf: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | bytearray | memoryview | None,
                  value: bytes | bytearray | memoryview | None, headers: bytes, /) -> None: ...
