"""The sans-IO connection: framing under any chunking (whole frames cut in C or in Python alike),
request/response pairing, owed responses."""
from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import _frames, connection
from odradek.protocol.apis import api_versions, fetch, metadata
from odradek.protocol.connection import (LEND_FROM, SMALL_FRAME, ClientConnection, FrameReader,
                                         ServerConnection, frame_parts)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import encode_response


def framed(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20), st.lists(st.integers(min_value=0), max_size=40))
def test_any_chunking_gives_back_the_same_frames(frames, cuts):
    reader = FrameReader(1000)
    out: list[bytes] = []
    for chunk in split(framed(frames), cuts):
        out += reader.feed(chunk)
    assert out == frames and reader.buffered == 0 and reader.oversize is None


def python_cut_only(monkeypatch) -> None:
    monkeypatch.setattr(connection, "_cut", None)


def fed(reader: FrameReader, chunks: list[bytes], kind: str) -> tuple[list[bytes], int | None, int]:
    out: list[bytes] = []
    for chunk in chunks:
        data = chunk if kind == "bytes" else bytearray(chunk) if kind == "bytearray" else memoryview(chunk)
        out += [bytes(f) for f in reader.feed(data)]
    return out, reader.oversize, reader.buffered


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.integers(-3, 60).map(lambda n: struct.pack(">i", n)), max_size=12),
       st.lists(st.integers(min_value=0), max_size=12), st.integers(0, 50), st.sampled_from(["bytes", "bytearray", "view"]))
def test_frames_cut_in_c_are_the_frames_the_python_loop_cuts(pieces, cuts, max_size, kind):
    """Any stream (sizes good, bad, negative, cut short), any chunking, any kind of chunk: the same
    frames, the same oversize and the same bytes held, with the cut in C and without it."""
    chunks = split(b"".join(pieces), cuts)
    assert connection._cut is _frames.cut   # built: the reader uses it
    with_c = fed(FrameReader(max_size), chunks, kind)
    with pytest.MonkeyPatch.context() as mp:
        python_cut_only(mp)
        assert fed(FrameReader(max_size), chunks, kind) == with_c


def test_the_c_cut_stops_before_what_is_not_a_whole_frame():
    frames: list = []
    data = framed([b"ab", b""]) + struct.pack(">i", 5) + b"abc"
    assert _frames.cut(data, 0, 10, frames) == 10 and frames == [b"ab", b""]
    assert _frames.cut(data, 10, 10, frames) == 10   # a frame not yet whole
    assert _frames.cut(framed([b"abc"]), 0, 2, []) == 0   # over the maximum
    assert _frames.cut(b"\xff\xff\xff\xff", 0, 2, []) == 0   # negative
    assert _frames.cut(b"\x00\x00", 0, 2, []) == 0   # a size cut short
    with pytest.raises(TypeError):
        _frames.cut(memoryview(b"abcd").cast("c"), 0, 2, [])


def test_large_frame_received_straight_into_its_buffer():
    frame = bytes(range(256)) * 1000
    reader = FrameReader(1 << 20)
    assert reader.feed(framed([frame])[:100]) == []
    space = reader.body_space()
    assert space is not None and len(space) == len(frame) - 96
    rest = frame[96:]
    space[:len(rest) - 10] = rest[:-10]
    assert reader.body_filled(len(rest) - 10) == []
    assert reader.feed(rest[-10:] + framed([b"next"])) == [frame, b"next"]


def produce_frame(seed: int, size: int = LEND_FROM + 1000) -> bytes:
    """A frame that begins as a Produce request does (api key 0), then ``size`` bytes in all."""
    return b"\x00\x00" + random.Random(seed).randbytes(size - 2)


def feed_in_chunks(reader: FrameReader, data: bytes, chunk: int = 4096) -> list:
    out: list = []
    for i in range(0, len(data), chunk):
        out += reader.feed(data[i:i + chunk])
    return out


def test_a_servers_reader_lends_large_produce_frames_as_writable_views_of_its_buffer():
    small, other = produce_frame(1, 200), b"\x00\x03" + bytes(LEND_FROM)   # a small Produce; a large Metadata
    big = produce_frame(2)
    out = feed_in_chunks(ServerConnection(1 << 20).reader, framed([small, big, other]))
    assert out == [small, big, other]
    assert [type(f) for f in out] == [bytes, memoryview, bytes]
    assert not out[1].readonly
    # a reader that does not lend (a client's) copies every frame
    assert [type(f) for f in feed_in_chunks(ClientConnection("c").reader, framed([big]))] == [bytes]


def test_a_connection_lending_responses_decodes_a_large_fetch_with_its_records_a_view_into_the_frame():
    records = random.Random(5).randbytes(LEND_FROM * 3)
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partition_responses": [
        {"partition": 0, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9, "log_start_offset": 0,
         "aborted_transactions": [], "preferred_read_replica": -1, "record_set": records}]}]}
    for lend, kind in ((True, memoryview), (False, bytes)):
        conn: ClientConnection[str] = ClientConnection("c", lend_responses=lend)
        pending, _ = conn.send_request(fetch, 11, {"replica_id": 1, "max_wait_ms": 0, "min_bytes": 1, "topics": []}, "f")
        (done,) = [d for chunk in split(_response(fetch, 11, pending.correlation_id, body), list(range(0, 10 ** 6, 9000)))
                   for d in conn.receive_data(chunk)]
        got = done[1].responses[0].partition_responses[0]
        assert type(got.record_set) is kind and got.record_set == records and got.high_watermark == 9


def test_a_lent_frame_is_never_written_over_while_held_and_its_buffer_is_reused_once_released():
    reader = ServerConnection(1 << 20).reader
    first, second, third = produce_frame(1), produce_frame(2), produce_frame(3)
    (held,) = feed_in_chunks(reader, framed([first]))
    (view,) = feed_in_chunks(reader, framed([second]))   # the first is still held: another buffer
    assert held == first and view == second and view.obj is not held.obj
    lent_id = id(view.obj)   # (the reader keeps that buffer alive: the id cannot be reused meanwhile)
    del view
    (again,) = feed_in_chunks(reader, framed([third]))
    assert again == third and id(again.obj) == lent_id   # released: reused, no fresh allocation
    assert held == first


def test_a_server_connection_receives_the_rest_of_a_large_frame_straight_into_it():
    conn = ServerConnection(1 << 20)
    frame = produce_frame(4)
    data = framed([frame, b"\x00\x12next"])
    conn.receive_data(data[:1000])
    space = conn.receive_space()
    assert space is not None and len(space) == len(frame) - 996
    space[:] = data[1000:4 + len(frame)]
    conn.receive_body(len(space))
    assert conn.receive_space() is None
    conn.receive_data(data[4 + len(frame):])
    first, second = conn.next_request(), None
    assert first is not None and first.frame == frame and type(first.frame) is memoryview and first.produce
    conn.respond(first, b"r")
    second = conn.next_request()
    assert second is not None and second.frame == b"\x00\x12next"
    conn.close_after_owed("closing")
    conn.receive_data(framed([frame])[:1000])   # nothing more is read once closing
    assert conn.receive_space() is None


@pytest.mark.parametrize("cut", ["c", "python"])
def test_oversize_and_negative_sizes_stop_the_reader_after_the_frames_before_them(monkeypatch, cut):
    if cut == "python":
        python_cut_only(monkeypatch)
    for bad in (1001, -1):
        reader = FrameReader(1000)
        assert reader.feed(framed([b"a", b"b"]) + struct.pack(">i", bad) + framed([b"c"])) == [b"a", b"b"]
        assert reader.oversize == bad
        assert reader.feed(framed([b"d"])) == []


def test_a_response_given_as_parts_is_framed_without_joining_them():
    conn = ServerConnection(1 << 20)
    conn.receive_data(framed([b"\x00\x01request"]))
    ticket = conn.next_request()
    assert ticket is not None
    records = memoryview(bytes(range(256)) * 512)
    (due,) = conn.respond(ticket, [b"head", records, b"tail"])
    parts = due.parts()
    assert parts[1] is records and b"".join(parts) == framed([b"head" + bytes(records) + b"tail"])


def test_frame_parts_join_small_frames_and_keep_large_ones_apart():
    assert frame_parts(b"abc") == [b"\x00\x00\x00\x03abc"]
    big = b"x" * SMALL_FRAME
    assert frame_parts(big) == [struct.pack(">i", SMALL_FRAME), big]


def _response(api, version, cid, body) -> bytes:
    return framed([encode_response(api, version, cid, body)])


def test_client_matches_responses_in_order_and_counts_correlation_ids():
    conn: ClientConnection[str] = ClientConnection("c", first_correlation_id=7)
    p1, parts = conn.send_request(metadata, 9, {"topics": None}, "first")
    p2, _ = conn.send_request(metadata, 9, {"topics": None}, "second")
    assert (p1.correlation_id, p2.correlation_id) == (7, 8)
    assert struct.unpack(">i", parts[0][:4])[0] == len(parts[0]) - 4
    data = _response(metadata, 9, 7, {"brokers": [], "topics": []}) + _response(metadata, 9, 8, {})
    done = conn.receive_data(data[:5]) + conn.receive_data(data[5:])
    assert [p.token for p, _ in done] == ["first", "second"] and not conn.in_flight
    assert conn.violation is None


def test_a_request_without_response_is_not_awaited():
    conn: ClientConnection[None] = ClientConnection("c")
    conn.send_request(metadata, 9, {}, None, expect_response=False)
    assert not conn.in_flight


def test_client_violations_keep_what_was_matched_before_them():
    conn: ClientConnection[str] = ClientConnection("c")
    conn.send_request(metadata, 9, {}, "a")
    conn.send_request(metadata, 9, {}, "b")
    done = conn.receive_data(_response(metadata, 9, 0, {}) + _response(metadata, 9, 5, {}))
    assert [p.token for p, _ in done] == ["a"]
    assert conn.violation is not None and "correlation id 5" in conn.violation
    assert [p.token for p in conn.fail_all()] == ["b"] and not conn.in_flight

    lone: ClientConnection[str] = ClientConnection("c")
    assert lone.receive_data(_response(metadata, 9, 0, {})) == []
    assert lone.violation == "a response without a request"

    garbled: ClientConnection[str] = ClientConnection("c")
    garbled.send_request(metadata, 9, {}, "x")
    garbled.receive_data(framed([b"\x00\x00\x00\x00\xff"]))
    assert garbled.violation is not None and "undecodable" in garbled.violation


def test_api_versions_error_is_read_in_the_v0_layout():
    conn: ClientConnection[None] = ClientConnection("c")
    conn.send_request(api_versions, 3, {"client_software_name": "a", "client_software_version": "1"}, None)
    body = {"error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    [(_, resp)] = conn.receive_data(_response(api_versions, 0, 0, body))
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION and resp.api_keys[0].max_version == 2


def _written(tickets) -> list[bytes]:
    return [part for t in tickets for part in t.parts()]


def test_server_hands_out_one_request_at_a_time_in_order():
    server = ServerConnection(1000)
    server.receive_data(framed([b"r1", b"r2"]))
    t1 = server.next_request()
    assert t1 is not None and t1.frame == b"r1"
    assert server.next_request() is None          # r1 is still being handled
    assert server.next_request(overlap_produce=True) is None   # neither is a Produce
    assert _written(server.respond(t1, b"a1")) == [b"\x00\x00\x00\x02a1"]
    t2 = server.next_request()
    assert t2 is not None and t2.frame == b"r2"
    assert server.respond(t2, None) == [t2] and _written([t2]) == [] and server.next_request() is None


def _request(api_key: int, tag: bytes) -> bytes:
    return struct.pack(">hhi", api_key, 8, 1) + tag


def test_server_overlaps_produces_behind_parked_produces_and_answers_in_order():
    produce, fetch = 0, 1
    server = ServerConnection(1000)
    server.receive_data(framed([_request(produce, b"p1"), _request(produce, b"p2"), _request(fetch, b"f3"),
                                _request(produce, b"p4")]))
    p1 = server.next_request()
    assert p1 is not None and server.next_request() is None       # only when the caller allows it
    p2 = server.next_request(overlap_produce=True)
    assert p2 is not None and p2.frame.endswith(b"p2") and server.owed == 2
    assert server.next_request(overlap_produce=True) is None       # a Fetch waits for both
    assert server.respond(p2, b"a2") == []                         # p2's answer waits for p1's
    assert server.respond(p1, b"a1") == [p1, p2]
    assert _written([p1, p2]) == [b"\x00\x00\x00\x02a1", b"\x00\x00\x00\x02a2"]
    f3 = server.next_request(overlap_produce=True)
    assert f3 is not None and f3.frame.endswith(b"f3")
    assert server.next_request(overlap_produce=True) is None       # no Produce overlaps a Fetch
    assert server.respond(f3, b"a3") == [f3]
    p4 = server.next_request()
    assert p4 is not None and server.respond(p4, b"a4") == [p4] and server.owed == 0


def test_server_answers_what_it_owes_before_closing_for_an_oversize_frame():
    server = ServerConnection(1000)
    server.receive_data(framed([b"r1", b"r2"]) + struct.pack(">i", 5000) + b"xx")
    assert server.close_reason is not None and "5000" in server.close_reason
    assert not server.should_close
    t1 = server.next_request()
    assert t1 is not None and t1.frame == b"r1"
    server.respond(t1, b"a1")
    t2 = server.next_request()
    assert t2 is not None and t2.frame == b"r2"
    assert not server.should_close                # r2's answer is still owed
    server.respond(t2, b"a2")
    assert server.should_close
    server.receive_data(framed([b"r3"]))          # nothing more is read after the close
    assert server.next_request() is None


def test_server_close_now_drops_what_is_queued():
    server = ServerConnection(1000)
    server.receive_data(framed([b"r1", b"r2"]))
    t1 = server.next_request()
    assert t1 is not None
    server.close_now("garbage")
    server.respond(t1, None)
    assert server.should_close and server.next_request() is None
