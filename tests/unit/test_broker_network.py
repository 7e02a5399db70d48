"""The socket layer with StringTransport: framing, ordering, closes, ApiVersions fallback."""
from __future__ import annotations

import struct

import pytest
from twisted.internet import defer
from twisted.internet.testing import StringTransport

from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.broker.network.request_handler import RequestHandler
from odradek.protocol.apis import api_versions, fetch, metadata, produce
from odradek.protocol import record_batch as rb
from odradek.protocol.header import decode_response, encode_request

from broker_fixtures import Broker, batch, fetch_body, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.lead("t")
    yield b
    b.close()


def connect(broker, max_bytes=1 << 20):
    factory = KafkaServerFactory(RequestHandler(broker.ctx), "PLAINTEXT", max_bytes)
    conn = factory.buildProtocol(None)
    tr = StringTransport()
    conn.makeConnection(tr)
    return conn, tr


def frame(api, version, cid, body, client_id="t"):
    data = encode_request(api, version, cid, client_id, body)
    return struct.pack(">i", len(data)) + data


def responses(tr):
    data = tr.value()
    out = []
    while data:
        (n,) = struct.unpack(">i", data[:4])
        out.append(data[4:4 + n])
        data = data[4 + n:]
    tr.clear()
    return out


def test_api_versions_and_byte_by_byte_framing(broker):
    conn, tr = connect(broker)
    data = frame(api_versions, 3, 11, {"client_software_name": "librdkafka", "client_software_version": "2.16.1"})
    for i in range(len(data)):
        conn.dataReceived(data[i:i + 1])
    [resp] = responses(tr)
    cid, body = decode_response(api_versions, 3, resp)
    assert cid == 11 and body.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert keys[0] == (0, 9) and keys[1] == (0, 12) and keys[18] == (0, 3) and keys[3] == (0, 11)
    assert keys[11] == (0, 7) and keys[10] == (0, 3)  # group APIs are advertised


def test_api_versions_unsupported_version_answers_v0_error_35(broker):
    conn, tr = connect(broker)
    data = struct.pack(">hhih", 18, 99, 5, -1)  # header only: the body is never parsed
    conn.dataReceived(struct.pack(">i", len(data)) + data)
    [resp] = responses(tr)
    cid, body = decode_response(api_versions, 0, resp)
    assert cid == 5 and body.error_code == 35
    assert any(k.api_key == 18 and k.max_version == 3 for k in body.api_keys)
    assert not tr.disconnecting


def test_api_versions_v3_invalid_software_name(broker):
    conn, tr = connect(broker)
    conn.dataReceived(frame(api_versions, 3, 1, {"client_software_name": "bad name!",
                                                 "client_software_version": "1"}))
    [resp] = responses(tr)
    assert decode_response(api_versions, 3, resp)[1].error_code == 42


def test_pipelined_requests_answer_in_order(broker):
    conn, tr = connect(broker)
    data = b"".join([
        frame(metadata, 8, 1, {"topics": None}),
        frame(produce, 8, 2, produce_body("t", batch(2))),
        frame(fetch, 11, 3, fetch_body("t")),
        frame(api_versions, 0, 4, {}),
    ])
    conn.dataReceived(data)
    out = responses(tr)
    assert [struct.unpack(">i", r[:4])[0] for r in out] == [1, 2, 3, 4]
    _, f = decode_response(fetch, 11, out[2])
    assert f.responses[0].partition_responses[0].high_watermark == 2


def test_the_answers_to_one_read_leave_in_one_write_and_before_a_close(broker):
    conn, tr = connect(broker)
    writes = []
    write_sequence = tr.writeSequence
    tr.writeSequence = lambda parts: (writes.append(len(parts)), write_sequence(parts))
    conn.dataReceived(b"".join(frame(api_versions, 0, cid, {}) for cid in (1, 2, 3)))
    assert len(writes) == 1 and [struct.unpack(">i", r[:4])[0] for r in responses(tr)] == [1, 2, 3]
    # an acks=0 failure closes the connection: the answers owed before it still leave, first
    conn.dataReceived(frame(api_versions, 0, 4, {}) + frame(produce, 8, 5, produce_body("nope", batch(1), acks=0))
                      + frame(api_versions, 0, 6, {}))
    assert len(writes) == 2 and [struct.unpack(">i", r[:4])[0] for r in responses(tr)] == [4]
    assert tr.disconnecting


def test_long_poll_holds_the_connection_queue(broker):
    conn, tr = connect(broker)
    conn.dataReceived(frame(fetch, 11, 1, fetch_body("t", max_wait_ms=1000)) + frame(api_versions, 0, 2, {}))
    assert tr.value() == b""  # the fetch is parked and the ApiVersions waits behind it
    broker.clock.advance(1.1)
    out = responses(tr)
    assert [struct.unpack(">i", r[:4])[0] for r in out] == [1, 2]


def test_acks_zero_sends_nothing(broker):
    conn, tr = connect(broker)
    conn.dataReceived(frame(produce, 8, 1, produce_body("t", batch(1), acks=0)) + frame(api_versions, 0, 2, {}))
    out = responses(tr)
    assert [struct.unpack(">i", r[:4])[0] for r in out] == [2]
    assert broker.log_manager.get_log(("t", 0)).log_end_offset == 1


def test_acks_zero_error_closes(broker):
    conn, tr = connect(broker)
    conn.dataReceived(frame(produce, 8, 1, produce_body("nope", batch(1), acks=0)))
    assert tr.value() == b"" and tr.disconnecting


def test_oversized_frame_closes(broker):
    conn, tr = connect(broker, max_bytes=1000)
    conn.dataReceived(struct.pack(">i", 1001) + b"x" * 10)
    assert tr.disconnecting and tr.value() == b""


def test_negative_size_closes(broker):
    conn, tr = connect(broker)
    conn.dataReceived(struct.pack(">i", -5) + b"x" * 10)
    assert tr.disconnecting


@pytest.mark.parametrize("payload", [
    b"\x00\x01",                                   # too short for a header
    struct.pack(">hhih", 77, 0, 1, -1),            # unknown API key
    struct.pack(">hhih", 3, 42, 1, -1),            # unsupported Metadata version
    struct.pack(">hhih", 3, 1, 1, -1) + b"\xff",   # Metadata body that does not decode
    struct.pack(">hhih", 3, 1, 1, 50) + b"abc",    # client id longer than the frame
])
def test_garbage_closes_only_that_connection(broker, payload):
    conn, tr = connect(broker)
    conn.dataReceived(struct.pack(">i", len(payload)) + payload + frame(api_versions, 0, 9, {}))
    assert tr.disconnecting and tr.value() == b""
    other, tr2 = connect(broker)
    other.dataReceived(frame(api_versions, 0, 10, {}))
    assert len(responses(tr2)) == 1


def test_handler_exception_becomes_unknown_server_error(broker, monkeypatch):
    conn, tr = connect(broker)

    def boom(*a, **k):
        raise RuntimeError("boom")
    monkeypatch.setattr(broker.rm, "fetch_messages", boom)
    conn.dataReceived(frame(fetch, 11, 1, fetch_body("t")))
    [resp] = responses(tr)
    _, body = decode_response(fetch, 11, resp)
    assert body.error_code == -1 and body.responses[0].partition_responses[0].error_code == -1
    assert not tr.disconnecting


def test_deferred_failure_becomes_error_response(broker, monkeypatch):
    from odradek.broker.apis import api_versions as h
    conn, tr = connect(broker)
    monkeypatch.setattr(h, "handle", lambda ctx, rc, req: defer.fail(RuntimeError("later boom")))
    conn.dataReceived(frame(api_versions, 0, 1, {}))
    [resp] = responses(tr)
    assert decode_response(api_versions, 0, resp)[1].error_code == -1


def test_oversized_frame_after_a_request_closes_after_its_response(broker):
    conn, tr = connect(broker, max_bytes=1000)
    conn.dataReceived(frame(api_versions, 0, 7, {}) + struct.pack(">i", 1001) + b"x" * 10)
    [resp] = responses(tr)
    assert decode_response(api_versions, 0, resp)[0] == 7
    assert tr.disconnecting


def test_oversized_frame_behind_a_parked_request_waits_for_its_response(broker):
    conn, tr = connect(broker, max_bytes=1000)
    conn.dataReceived(frame(fetch, 11, 1, fetch_body("t", max_wait_ms=1000)) + struct.pack(">i", 5000))
    assert tr.value() == b"" and not tr.disconnecting  # the long poll still owes its answer
    broker.clock.advance(1.0)
    [resp] = responses(tr)
    assert decode_response(fetch, 11, resp)[0] == 1
    assert tr.disconnecting


def test_librdkafkas_all_topics_metadata_v11_is_read_as_kafka_reads_it(broker):
    """librdkafka 2.x writes the null topic array of an all-topics Metadata v9+ request as a 4-byte
    placeholder (these bytes are what it sent): Kafka ignores what follows the last field, and so
    does odradek for Metadata, answering every topic."""
    conn, tr = connect(broker)
    raw = bytes.fromhex("0003000b00000003000772646b61666b610000000000010000")
    conn.dataReceived(struct.pack(">i", len(raw)) + raw)
    [resp] = responses(tr)
    cid, body = decode_response(metadata, 11, resp)
    assert cid == 3 and [t.name for t in body.topics] == ["t"]
    garbage = frame(fetch, 11, 4, fetch_body("t"))[4:] + b"\x00\x00"     # other APIs stay strict
    conn.dataReceived(struct.pack(">i", len(garbage)) + garbage)
    assert tr.disconnecting


def test_framing_benchmark_runs_every_case(capsys):
    """``odradek perf framing`` (the figures in docs/benchmarks.md) drives the real socket layer
    with its fixed-response handler and answers every frame of every case."""
    from odradek.client.perf import main
    assert main(["framing", "--rounds", "1", "--scale", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("us per frame" in line for line in lines)


class _QuotasOn:
    """Client quotas set (``ctx.quotas.active``) with nothing throttled yet."""
    active = True

    def after_request(self, *request: object) -> tuple[int, bool]:
        return 0, False


@pytest.fixture
def replicated(tmp_path):
    """A broker leading partition r-0 with follower 2 in its ISR: acks=all waits for that follower."""
    b = Broker(tmp_path)
    b.lead("r", replicas=[1, 2])
    yield b
    b.close()


def follower_fetches(b, offset):
    from odradek.broker.apis import fetch as fetch_handler
    from broker_fixtures import call
    call(b, fetch_handler, 11, fetch_body("r", offset=offset, replica_id=2))


@pytest.mark.parametrize("quotas", [False, True])
def test_produces_behind_a_parked_produce_are_appended_at_once_and_answered_in_order(replicated, quotas):
    b = replicated
    if quotas:
        b.ctx.quotas = _QuotasOn()
    log = b.log_manager.get_log(("r", 0))
    conn, tr = connect(b)
    conn.dataReceived(frame(produce, 8, 1, produce_body("r", batch(2), acks=-1))
                      + frame(produce, 8, 2, produce_body("r", batch(2), acks=-1))
                      + frame(api_versions, 0, 3, {})
                      + frame(produce, 8, 4, produce_body("r", batch(2), acks=-1)))
    assert tr.value() == b""
    # without quotas the second Produce is appended while the first waits (a quota's throttle
    # mutes the connection between requests: then one at a time, as in Kafka); never the one
    # behind the ApiVersions
    assert log.log_end_offset == (2 if quotas else 4)
    follower_fetches(b, 2 if quotas else 4)
    if quotas:
        assert [struct.unpack(">i", r[:4])[0] for r in responses(tr)] == [1]
        assert log.log_end_offset == 4
        follower_fetches(b, 4)
    out = responses(tr)
    assert [struct.unpack(">i", r[:4])[0] for r in out] == ([2, 3] if quotas else [1, 2, 3])
    bases = [decode_response(produce, 8, r)[1].responses[0].partition_responses[0].base_offset
             for r in out if struct.unpack(">i", r[:4])[0] != 3]
    assert bases == ([2] if quotas else [0, 2])
    assert log.log_end_offset == 6                 # the last Produce, once the ApiVersions is answered
    follower_fetches(b, 6)
    [last] = responses(tr)
    _, body = decode_response(produce, 8, last)
    assert struct.unpack(">i", last[:4])[0] == 4 and body.responses[0].partition_responses[0].base_offset == 4
    assert body.responses[0].partition_responses[0].error_code == 0


def test_an_acks_zero_failure_behind_a_parked_produce_closes_after_its_answer(replicated):
    conn, tr = connect(replicated)
    conn.dataReceived(frame(produce, 8, 1, produce_body("r", batch(2), acks=-1))
                      + frame(produce, 8, 2, produce_body("nope", batch(1), acks=0))
                      + frame(api_versions, 0, 3, {}))
    assert tr.value() == b"" and not tr.disconnecting   # the first Produce's answer is owed
    follower_fetches(replicated, 2)
    [resp] = responses(tr)                               # as Kafka, handling one at a time, would
    assert struct.unpack(">i", resp[:4])[0] == 1 and tr.disconnecting


def test_overlapping_produces_are_bounded_per_connection(replicated):
    from odradek.broker.network.socket_server import MAX_OVERLAPPED, MAX_QUEUED_REQUESTS
    conn, tr = connect(replicated)
    n = MAX_OVERLAPPED + MAX_QUEUED_REQUESTS + 1
    conn.dataReceived(b"".join(frame(produce, 8, cid, produce_body("r", batch(1), acks=-1)) for cid in range(n)))
    # a client that never waits parks at most MAX_OVERLAPPED Produces; the rest stay queued,
    # and past MAX_QUEUED_REQUESTS of them nothing more is read
    assert replicated.log_manager.get_log(("r", 0)).log_end_offset == MAX_OVERLAPPED
    assert conn.conn.owed == MAX_OVERLAPPED and tr.producerState == "paused"


def test_a_large_produce_is_appended_from_its_frame_and_a_large_fetch_leaves_in_parts(broker):
    """A Produce of more than 64 KiB, handed over in pieces, is appended from the frame's buffer
    (a writable view, stamped in place); fetching it back reads into one of the replica manager's
    reused buffers and the response goes out as parts, the records one of them, not joined."""
    conn, tr = connect(broker, max_bytes=4 << 20)
    conn.dataReceived(frame(produce, 8, 1, produce_body("t", batch(2))))
    big = batch(300, value=b"x" * 1000)
    data = frame(produce, 8, 2, produce_body("t", big))
    for i in range(0, len(data), 9000):
        conn.dataReceived(data[i:i + 9000])
    writes = []
    write_sequence = tr.writeSequence
    tr.writeSequence = lambda parts: (writes.append(list(parts)), write_sequence(parts))[1]
    conn.dataReceived(frame(fetch, 11, 3, fetch_body("t", offset=2)))
    out = responses(tr)
    _, appended = decode_response(produce, 8, out[1])
    assert appended.responses[0].partition_responses[0].base_offset == 2
    (parts,) = writes
    records = [p for p in parts if type(p) is memoryview and len(p) >= len(big)]
    assert len(records) == 1 and records[0].readonly and type(records[0].obj) is bytearray   # a reused buffer, sent as read
    _, fetched = decode_response(fetch, 11, out[2])
    stored = fetched.responses[0].partition_responses[0].record_set
    assert bytes(stored) == bytes(records[0]) and stored[rb.CRC_START - 5:] == big[rb.CRC_START - 5:]
    assert rb.parse_header(stored).base_offset == 2


def test_answers_completed_by_another_connections_request_leave_in_one_write_per_connection(replicated):
    """A follower's Fetch that moves the high watermark completes the parked acks=all Produces of
    every producer: each producer's answers leave in one write when that Fetch's handling ends
    (Kafka's processors likewise write what is ready once per poll), in their order."""
    b = replicated
    producers = [connect(b) for _ in range(2)]
    writes: list[list[int]] = [[], []]
    for (conn, tr), counts in zip(producers, writes):
        tr.writeSequence = (lambda parts, ws=tr.writeSequence, counts=counts:
                            (counts.append(len(parts)), ws(parts)))
        conn.dataReceived(b"".join(frame(produce, 8, cid, produce_body("r", batch(1), acks=-1)) for cid in (1, 2, 3)))
        assert tr.value() == b""
    assert b.log_manager.get_log(("r", 0)).log_end_offset == 6
    follower, _ = connect(b)
    follower.dataReceived(frame(fetch, 11, 9, fetch_body("r", offset=6, replica_id=2)))
    assert writes == [[3], [3]]
    for _, tr in producers:
        out = responses(tr)
        assert [struct.unpack(">i", r[:4])[0] for r in out] == [1, 2, 3]
        assert [decode_response(produce, 8, r)[1].responses[0].partition_responses[0].error_code for r in out] == [0] * 3
