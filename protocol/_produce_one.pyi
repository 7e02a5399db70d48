"""Types of the common Produce frame's reader in C (protocol/_produce_one.c)."""
from typing import TypeVar

H = TypeVar("H", bound=tuple[object, ...])
R = TypeVar("R", bound=tuple[object, ...])

def read_frame(header_type: type[H], request_type: type[R], frame: bytes | memoryview, /) -> tuple[H, R] | None: ...
