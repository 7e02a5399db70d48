"""Type of the compiled record scanner (broker/log/_recordscan.c)."""

def scan(data: bytes | bytearray | memoryview, start: int, end: int, count: int, last_delta: int, strict: bool,
         base_timestamp: int, collect: bool, /) -> tuple[list[int], list[int]] | None: ...
