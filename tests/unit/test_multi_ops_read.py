"""``multi_ops.read_existing`` against a server without multiRead (ZooKeeper before 3.6): the
request record's bytes, and the fallback to one get per znode. (Against a real ZooKeeper:
tests/integration/test_controller_zk_session.py.)"""
from __future__ import annotations

from kazoo.exceptions import NoNodeError, UnimplementedError
from kazoo.handlers.threading import SequentialThreadingHandler

from odradek.zk.multi_ops import MultiRead, read_existing


class OldServer:
    """A kazoo client whose server answers multiRead UNIMPLEMENTED and serves plain gets."""

    def __init__(self, nodes):
        self.handler = SequentialThreadingHandler()
        self.chroot = "/root"
        self.nodes = nodes
        self.gets: list[str] = []

    def _call(self, request, result):
        assert isinstance(request, MultiRead)
        result.set_exception(UnimplementedError())

    def get_async(self, path):
        self.gets.append(path)
        result = self.handler.async_result()
        if path in self.nodes:
            result.set(self.nodes[path])
        else:
            result.set_exception(NoNodeError())
        return result


def test_a_server_without_multiread_is_read_one_get_per_znode():
    server = OldServer({"/a": (b"1", "stat-a"), "/c": (b"3", "stat-c")})
    assert read_existing(server, ["/a", "/b", "/c"]) == {"/a": (b"1", "stat-a"), "/c": (b"3", "stat-c")}
    assert server.gets == ["/a", "/b", "/c"]


def test_the_request_is_getdata_ops_then_the_end_marker():
    body = bytes(MultiRead(["/x"]).serialize())
    assert body == (b"\x00\x00\x00\x04" b"\x00" b"\xff\xff\xff\xff"      # op getData, not done, err -1
                    b"\x00\x00\x00\x02/x" b"\x00"                       # path, no watch
                    b"\xff\xff\xff\xff" b"\x01" b"\xff\xff\xff\xff")    # done
