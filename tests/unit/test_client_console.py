"""Console tools: argument parsing, configuration, output format, bootstrap resolution."""
from __future__ import annotations

import io
import json

import pytest

from odradek.client import console, perf
from odradek.client.structs import ConsumerRecord
from odradek.client.tools import ToolError, kv_pairs, resolve_bootstrap


def rec(key=b"k", value=b"v", ts=1234, ts_type=0, partition=2, offset=7):
    return ConsumerRecord("t", partition, offset, ts, ts_type, key, value, [], 1, 1)


def test_producer_arguments_map_to_producer_config():
    args = console.producer_parser().parse_args([
        "--bootstrap-server", "h:1", "--topic", "t", "--compression-codec", "--request-required-acks", "all",
        "--producer-property", "linger.ms=7", "--producer-property", "batch.size=10"])
    cfg = console.producer_config(args)
    assert cfg["bootstrap.servers"] == "h:1" and cfg["compression.type"] == "gzip" and cfg["acks"] == "all"
    assert cfg["linger.ms"] == "7" and cfg["batch.size"] == "10"
    from odradek.client.config import ClientConfig
    ClientConfig("producer", cfg)        # the result is a valid producer configuration


def test_producer_defaults_and_required_topic():
    args = console.producer_parser().parse_args(["--bootstrap-server", "h:1", "--topic", "t"])
    cfg = console.producer_config(args)
    assert cfg["acks"] == "1" and cfg["linger.ms"] == 1000 and "compression.type" not in cfg
    with pytest.raises(ToolError):
        console.producer_parser().parse_args(["--bootstrap-server", "h:1"])


def test_consumer_arguments():
    args = console.consumer_parser().parse_args([
        "--bootstrap-server", "h:1", "--topic", "t", "--from-beginning", "--max-messages", "5",
        "--property", "print.key=true", "--timeout-ms", "100", "--partition", "1"])
    assert args.from_beginning and args.max_messages == 5 and args.partition == 1 and args.timeout_ms == 100
    cfg = console.consumer_config(args)
    assert cfg["auto.offset.reset"] == "earliest"


def test_formatter_default_prints_value_only():
    f = console.Formatter({})
    assert f.format(rec()) == "v\n"
    assert f.format(rec(value=None)) == "null\n"
    assert f.format(rec(value=b"\xff ok")) == "\ufffd ok\n"


def test_formatter_all_columns_in_kafka_order():
    f = console.Formatter(kv_pairs(["print.key=true", "print.timestamp=true", "print.partition=true",
                                    "print.offset=true", "key.separator=|"], "--property"))
    assert f.format(rec()) == "CreateTime:1234|Partition:2|Offset:7|k|v\n"
    assert f.format(rec(key=None, ts_type=1)) == "LogAppendTime:1234|Partition:2|Offset:7|null|v\n"


def test_kv_pairs_errors():
    assert kv_pairs(["a=b=c"], "x") == {"a": "b=c"}
    with pytest.raises(ToolError):
        kv_pairs(["novalue"], "--property")


def test_bootstrap_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("ODRADEK_BOOTSTRAP_SERVERS", raising=False)
    state = tmp_path / "cluster.json"
    with pytest.raises(ToolError, match="--bootstrap-server is required"):
        resolve_bootstrap(None, state)
    state.write_text(json.dumps({"bootstrap_servers": "127.0.0.1:1,127.0.0.1:2"}))
    assert resolve_bootstrap(None, state) == "127.0.0.1:1,127.0.0.1:2"
    monkeypatch.setenv("ODRADEK_BOOTSTRAP_SERVERS", "e:9")
    assert resolve_bootstrap(None, state) == "e:9"
    assert resolve_bootstrap("given:1", state) == "given:1"


def test_tool_errors_are_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ODRADEK_BOOTSTRAP_SERVERS", raising=False)
    assert console.consumer_main(["--topic", "t", "--offset", "3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1
    assert console.producer_main(["--topic", "t"]) == 1
    assert capsys.readouterr().err.startswith("Error: --bootstrap-server is required")
    assert console.producer_main(["--nope"]) == 1
    assert perf.main(["producer", "--topic", "t"]) == 1
    assert perf.main(["bogus"]) == 1


def test_perf_stats_lines():
    out = io.StringIO()
    s = perf.Stats(10, interval_s=1000, out=out)
    for i in range(10):
        s.record(i, 100, s.start)
    s.print_window(s.start + 1.0)
    s.print_total()
    window, total = out.getvalue().splitlines()
    assert window == "10 records sent, 10.0 records/sec (0.00 MB/sec), 4.5 ms avg latency, 9.0 ms max latency."
    assert total.startswith("10 records sent, ")
    assert total.endswith("ms avg latency, 9.00 ms max latency, 5 ms 50th, 9 ms 95th, 9 ms 99th, 9 ms 99.9th.")
    assert perf.HEADER.split(", ")[0] == "start.time" and len(perf.HEADER.split(", ")) == 10


@pytest.mark.parametrize("num_records", [10, 1_700_000])    # sampling 1, and every third latency kept
def test_perf_stats_batch_is_its_records_one_by_one(num_records):
    """A batch's records recorded in one call add up as they do one at a time (the windows aside)."""
    one, batched = (perf.Stats(num_records, interval_s=1000, out=io.StringIO()) for _ in range(2))
    sends = [[one.start + 0.0013 * i for i in range(n)] for n in (1, 5, 3, 9, 2, 7)]
    for k, sent in enumerate(sends):
        now = one.start + 0.5 + k * 0.1
        for t in sent:
            one.record(int((now - t) * 1000), 100 + k, now)
        batched.record_batch(sent, 100 + k, now)
    fields = ("count", "bytes", "total_latency", "max_latency", "w_count", "w_bytes", "w_total", "w_max",
              "index", "latencies")
    assert {f: getattr(batched, f) for f in fields} == {f: getattr(one, f) for f in fields}
    assert one.count == 27 and (num_records == 10) == (len(one.latencies) == 27)
