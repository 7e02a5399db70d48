"""The fetch path's reused read buffers (``broker/log/read_buffers.py``): reads equal to
``os.pread``'s, a read never changed while it is held, a buffer reused once it is released."""
from __future__ import annotations

import os
import random

import pytest

from odradek.broker.log.read_buffers import KEEP, POOLED_FROM, POOLED_UP_TO, ReadBuffers


@pytest.fixture
def fd(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(random.Random(1).randbytes(3 * POOLED_UP_TO))
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def test_a_read_is_what_pread_reads_as_a_read_only_view(fd):
    buffers = ReadBuffers()
    for n, pos in ((POOLED_FROM, 0), (POOLED_UP_TO, 5), (POOLED_FROM + 1, 3 * POOLED_UP_TO - 10)):
        data = buffers.pread(fd, n, pos)
        assert data == os.pread(fd, n, pos)
        assert type(data) is memoryview and data.readonly
    assert type(buffers.pread(fd, POOLED_FROM - 1, 0)) is bytes     # small: its own bytes
    assert type(buffers.pread(fd, POOLED_UP_TO + 1, 0)) is bytes    # larger than a pooled buffer


def test_a_held_read_is_never_written_over_and_a_released_buffer_is_reused(fd):
    buffers = ReadBuffers()
    held = buffers.pread(fd, POOLED_FROM, 0)
    other = buffers.pread(fd, POOLED_FROM, POOLED_FROM)
    assert held == os.pread(fd, POOLED_FROM, 0) and other.obj is not held.obj
    reused = id(other.obj)   # (the pool keeps it alive: the id cannot be reused meanwhile)
    del other
    again = buffers.pread(fd, POOLED_FROM, 2 * POOLED_FROM)
    assert id(again.obj) == reused and held == os.pread(fd, POOLED_FROM, 0)


def test_with_every_buffer_held_a_read_gets_fresh_bytes(fd):
    buffers = ReadBuffers()
    held = [buffers.pread(fd, POOLED_FROM, i) for i in range(KEEP)]
    assert len({id(view.obj) for view in held}) == KEEP
    extra = buffers.pread(fd, POOLED_FROM, 7)
    assert type(extra) is bytes and extra == os.pread(fd, POOLED_FROM, 7)
    assert all(view == os.pread(fd, POOLED_FROM, i) for i, view in enumerate(held))
