"""ReadBuffers: the buffers a fetch reads segments into, reused once nothing holds a view of them.

Invariant: a buffer is handed out again only when no view of it is alive (its reference count
says so), so the bytes of a read never change while anything can still see them: a response
waiting in the socket writer, a parked fetch. A read of at least ``POOLED_FROM`` and at most
``POOLED_UP_TO`` bytes goes into one of at most ``KEEP`` buffers, whose pages stay faulted in
from one fetch to the next; any other read, or one while every buffer is held, gets fresh bytes
from ``os.pread``. Reads come back as read-only views. Reactor thread only (the fetch path).
"""
from __future__ import annotations

import os
from sys import getrefcount

POOLED_FROM = 64 << 10   # smaller reads are cheap to allocate
POOLED_UP_TO = 2 << 20   # every pooled buffer has this size; larger reads are not pooled
KEEP = 8
# the references to a pooled buffer while nothing else holds it: the pool's list, the loop's name
# and getrefcount's argument (a view of it holds one more, through its managed buffer)
_UNSHARED = 3


class ReadBuffers:
    """See the module invariant."""

    def __init__(self) -> None:
        self._buffers: list[bytearray] = []

    def pread(self, fd: int, n: int, pos: int) -> bytes | memoryview:
        """Up to ``n`` bytes of ``fd`` from ``pos``, as ``os.pread`` reads them."""
        if not POOLED_FROM <= n <= POOLED_UP_TO:
            return os.pread(fd, n, pos)
        buf = self._free()
        if buf is None:
            return os.pread(fd, n, pos)
        got = os.preadv(fd, [memoryview(buf)[:n]], pos)
        return memoryview(buf)[:got].toreadonly()

    def _free(self) -> bytearray | None:
        for buf in self._buffers:
            if getrefcount(buf) == _UNSHARED:
                return buf
        if len(self._buffers) < KEEP:
            self._buffers.append(bytearray(POOLED_UP_TO))
            return self._buffers[-1]
        return None
