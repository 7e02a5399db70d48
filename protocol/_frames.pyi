"""Types of request frames' steps in C (protocol/_frames.c)."""
from typing import TypeVar

H = TypeVar("H", bound=tuple[object, ...])
R = TypeVar("R", bound=tuple[object, ...])

def cut(data: bytes | memoryview, pos: int, max_size: int, frames: list[bytes | memoryview], /) -> int: ...

def read_header(table: bytes, header_type: type[H], frame: bytes | memoryview, /) -> tuple[H, int] | None: ...

def read_frame(header_type: type[H], request_type: type[R], frame: bytes | memoryview, /) -> tuple[H, R] | None: ...

def encode_answer(version: int, correlation_id: int, topic: str, index: int, error_code: int, base_offset: int,
                  log_append_time: int, log_start_offset: int, /) -> bytes: ...
