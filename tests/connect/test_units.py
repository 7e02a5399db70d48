"""Unit tests: converters, SMTs, the ConnectProtocol bytes, configs, plugins, file tasks, offsets."""
from __future__ import annotations

import json

import pytest

from odradek.pipeline.connect.api import ConfigException, DataException, SinkRecord, SourceRecord, \
    SourceTaskContext
from odradek.pipeline.connect.config import ConnectorConfig, WorkerConfig, parse_properties
from odradek.pipeline.connect.converters import ByteArrayConverter, JsonConverter, StringConverter
from odradek.pipeline.connect.file import FileStreamSinkTask, FileStreamSourceConnector, FileStreamSourceTask
from odradek.pipeline.connect.group import ConnectAssignment, WorkerState, eager_assign
from odradek.pipeline.connect.offsets import ConnectorOffsetReader, FileOffsetBackingStore, offset_key, \
    offset_value
from odradek.pipeline.connect.plugins import connector_plugins, resolve
from odradek.pipeline.connect.transforms import java_date_format, java_replacement

STRUCT = {"type": "struct", "optional": False, "name": "users", "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "score", "type": "float64", "optional": True},
    {"field": "ok", "type": "boolean", "optional": True},
    {"field": "blob", "type": "bytes", "optional": True},
    {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": True},
    {"field": "ts", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp",
     "version": 1}]}
VALUE = {"id": 7, "name": "ada", "score": 1.5, "ok": True, "blob": b"\x00\xff", "tags": ["a", "b"],
         "ts": 1700000000123}


def _json(schemas: bool = True, is_key: bool = False) -> JsonConverter:
    c = JsonConverter()
    c.configure({"schemas.enable": "true" if schemas else "false"}, is_key)
    return c


# -- converters --------------------------------------------------------------------------------------

def test_json_converter_envelope_round_trip():
    c = _json()
    data = c.from_connect_data("t", STRUCT, VALUE)
    doc = json.loads(data)
    assert set(doc) == {"schema", "payload"}
    assert doc["schema"]["type"] == "struct" and doc["schema"]["fields"][0] == {"field": "id", "type": "int64",
                                                                                "optional": False}
    assert doc["payload"]["blob"] == "AP8=" and doc["payload"]["ts"] == 1700000000123
    schema, value = c.to_connect_data("t", data)
    assert schema == STRUCT and value == VALUE


def test_json_converter_reads_kafka_envelope_and_nulls():
    c = _json()
    kafka_bytes = b'{"schema":{"type":"string","optional":false},"payload":"hello"}'
    assert c.to_connect_data("t", kafka_bytes) == ({"type": "string", "optional": False}, "hello")
    assert c.to_connect_data("t", None) == (None, None)
    assert c.from_connect_data("t", None, None) is None
    assert json.loads(c.from_connect_data("t", {"type": "string", "optional": True}, None)) == \
        {"schema": {"type": "string", "optional": True}, "payload": None}


def test_json_converter_errors():
    c = _json()
    with pytest.raises(DataException, match="schemas.enable"):
        c.to_connect_data("t", b'{"id": 1}')
    with pytest.raises(DataException, match="serialization error"):
        c.to_connect_data("t", b"not json")
    with pytest.raises(DataException):
        c.from_connect_data("t", STRUCT, {**VALUE, "id": "x"})
    with pytest.raises(DataException):
        c.from_connect_data("t", STRUCT, {**VALUE, "id": None})


def test_json_converter_schemaless():
    c = _json(schemas=False)
    assert c.from_connect_data("t", None, {"a": [1, 2], "b": None}) == b'{"a":[1,2],"b":null}'
    assert c.to_connect_data("t", b'{"a": 1}') == (None, {"a": 1})


def test_string_and_bytearray_converters():
    s = StringConverter()
    s.configure({}, False)
    assert s.from_connect_data("t", None, "h\u00e9") == "h\u00e9".encode()
    assert s.to_connect_data("t", b"abc") == ({"type": "string", "optional": True}, "abc")
    assert s.from_connect_data("t", None, 12) == b"12"
    b = ByteArrayConverter()
    b.configure({}, True)
    assert b.from_connect_data("t", None, b"\x01") == b"\x01"
    assert b.to_connect_data("t", b"\x02")[1] == b"\x02"
    with pytest.raises(DataException):
        b.from_connect_data("t", None, "text")


# -- transforms -----------------------------------------------------------------------------------------

def _smt(name: str, **props: str):
    t = resolve("transform", name)()
    t.configure(props)
    return t


def _sink_record(value=None, schema=None, topic="orders", key=None, key_schema=None):
    return SinkRecord(topic, 2, key_schema, key, schema, value, 1700000000000, [], 41)


def test_insert_field_value_with_schema_and_schemaless():
    t = _smt("org.apache.kafka.connect.transforms.InsertField$Value", **{
        "topic.field": "src_topic", "partition.field": "p", "offset.field": "off!", "static.field": "dc",
        "static.value": "eu", "timestamp.field": "at"})
    r = t.apply(_sink_record(dict(VALUE), STRUCT))
    assert r.value["src_topic"] == "orders" and r.value["p"] == 2 and r.value["off"] == 41
    assert r.value["dc"] == "eu" and r.value["at"] == 1700000000000 and r.value["id"] == 7
    names = [f["field"] for f in r.value_schema["fields"]]
    assert names[-5:] == ["src_topic", "p", "off", "at", "dc"]
    assert [f for f in r.value_schema["fields"] if f["field"] == "off"][0]["optional"] is False
    # the value schema still serializes
    _json().from_connect_data("t", r.value_schema, r.value)
    r2 = t.apply(_sink_record({"a": 1}))
    assert r2.value_schema is None and r2.value["a"] == 1 and r2.value["dc"] == "eu"
    with pytest.raises(DataException):
        t.apply(_sink_record("plain string", {"type": "string"}))


def test_insert_field_key_variant():
    t = _smt("InsertField$Key", **{"static.field": "k2", "static.value": "v"})
    r = t.apply(_sink_record({"x": 1}, key={"id": 1}))
    assert r.key == {"id": 1, "k2": "v"} and r.value == {"x": 1}


def test_replace_field():
    t = _smt("org.apache.kafka.connect.transforms.ReplaceField$Value", exclude="blob,tags",
             renames="name:full_name,ts:created")
    r = t.apply(_sink_record(dict(VALUE), STRUCT))
    assert "blob" not in r.value and r.value["full_name"] == "ada" and r.value["created"] == VALUE["ts"]
    assert [f["field"] for f in r.value_schema["fields"]] == ["id", "full_name", "score", "ok", "created"]
    t2 = _smt("ReplaceField$Value", whitelist="id,name")
    assert t2.apply(_sink_record(dict(VALUE))).value == {"id": 7, "name": "ada"}
    with pytest.raises(ConfigException):
        _smt("ReplaceField$Value", renames="nocolon")


def test_regex_router_and_timestamp_router():
    t = _smt("org.apache.kafka.connect.transforms.RegexRouter", regex="(.*)-(\\d+)", replacement="$2_$1")
    assert t.apply(_sink_record({}, topic="orders-12")).topic == "12_orders"
    assert t.apply(_sink_record({}, topic="nomatch")).topic == "nomatch"
    assert java_replacement("pre-$1-${name}") == "pre-\\g<1>-\\g<name>"
    tr = _smt("TimestampRouter", **{"topic.format": "${topic}-${timestamp}", "timestamp.format": "yyyy.MM.dd"})
    assert tr.apply(_sink_record({})).topic == "orders-2023.11.14"
    assert java_date_format("yyyyMMdd'T'HH") == "%Y%m%dT%H"


def test_value_to_key_and_extract_field():
    vk = _smt("org.apache.kafka.connect.transforms.ValueToKey", fields="id")
    r = vk.apply(_sink_record(dict(VALUE), STRUCT))
    assert r.key == {"id": 7} and r.key_schema["fields"][0]["field"] == "id"
    ex = _smt("ExtractField$Key", field="id")
    r2 = ex.apply(r)
    assert r2.key == 7 and r2.key_schema["type"] == "int64"


# -- configuration and plugins ----------------------------------------------------------------------------

def test_properties_and_configs(tmp_path):
    props = parse_properties("# c\nname = a\nkey.converter:org.x.Y\nlong=one \\\n  two\n\n!x\n")
    assert props == {"name": "a", "key.converter": "org.x.Y", "long": "one two"}
    with pytest.raises(ConfigException, match="offset.storage.file.filename"):
        WorkerConfig({"bootstrap.servers": "h:1"}, distributed=False)
    with pytest.raises(ConfigException, match="group.id"):
        WorkerConfig({}, distributed=True)
    wc = WorkerConfig({"offset.storage.file.filename": str(tmp_path / "o"), "listeners": "http://127.0.0.1:9999",
                       "producer.linger.ms": "7", "producer.bogus": "1"}, distributed=False)
    assert (wc.rest_host, wc.rest_port, wc.worker_id) == ("127.0.0.1", 9999, "127.0.0.1:9999")
    assert wc.producer_props()["linger.ms"] == "7" and "bogus" not in wc.producer_props()
    with pytest.raises(ConfigException, match="tasks.max"):
        ConnectorConfig({"name": "x", "connector.class": "FileStreamSource", "tasks.max": "0"})
    with pytest.raises(ConfigException, match="transforms.a.type"):
        ConnectorConfig({"name": "x", "connector.class": "C", "transforms": "a"})
    with pytest.raises(ConfigException, match="errors.tolerance"):
        ConnectorConfig({"name": "x", "connector.class": "C", "errors.tolerance": "some"})


def test_plugin_names():
    assert resolve("connector", "org.apache.kafka.connect.file.FileStreamSinkConnector").__name__ == \
        "FileStreamSinkConnector"
    assert resolve("connector", "FileStreamSource").__name__ == "FileStreamSourceConnector"
    assert resolve("converter", "org.apache.kafka.connect.storage.StringConverter") is StringConverter
    assert resolve("converter", "odradek.pipeline.connect.converters:JsonConverter") is JsonConverter
    with pytest.raises(ConfigException):
        resolve("connector", "com.example.Missing")
    types = {p["class"]: p["type"] for p in connector_plugins()}
    assert types["org.apache.kafka.connect.file.FileStreamSinkConnector"] == "sink"
    assert types["io.confluent.connect.jdbc.JdbcSourceConnector"] == "source"
    errors = FileStreamSourceConnector().validate({"topic": "a,b"})
    assert errors["file"] and errors["topic"]


# -- ConnectProtocol --------------------------------------------------------------------------------------

def test_connect_protocol_round_trip_and_layout():
    ws = WorkerState("http://127.0.0.1:8083/", 42)
    raw = ws.encode()
    assert raw == b"\x00\x00" + b"\x00\x16http://127.0.0.1:8083/" + (42).to_bytes(8, "big")
    assert WorkerState.decode(raw) == ws
    a = ConnectAssignment(0, "m-1", "http://l/", 9, ["c1"], [("c1", 0), ("c2", 1)])
    b = ConnectAssignment.decode(a.encode())
    assert (b.leader, b.leader_url, b.config_offset, b.connectors, sorted(b.tasks)) == \
        ("m-1", "http://l/", 9, ["c1"], [("c1", 0), ("c2", 1)])
    with pytest.raises(ValueError):
        ConnectAssignment.decode(a.encode()[:-3])


def test_eager_round_robin():
    plan = eager_assign(["b", "a"], ["c1"], [("c1", 0), ("c1", 1), ("c1", 2)])
    assert plan == {"a": (["c1"], [("c1", 1)]), "b": ([], [("c1", 0), ("c1", 2)])}


# -- file connector tasks and offsets ---------------------------------------------------------------------

def test_file_source_task_offsets_and_partial_lines(tmp_path):
    f = tmp_path / "in.txt"
    f.write_bytes(b"one\r\ntwo\nthr")
    store = FileOffsetBackingStore(str(tmp_path / "offsets.json"))
    store.start()
    task = FileStreamSourceTask()
    task.initialize(SourceTaskContext({}, ConnectorOffsetReader(store, "src")))
    task.start({"file": str(f), "topic": "t"})
    recs = task.poll()
    assert [r.value for r in recs] == ["one", "two"]
    assert recs[-1].source_offset == {"position": 9} and recs[0].source_partition == {"filename": str(f)}
    assert task.poll() is None                          # "thr" waits for its newline
    with open(f, "ab") as out:
        out.write(b"ee\n")
    assert [r.value for r in task.poll()] == ["three"]
    store.set({offset_key("src", recs[-1].source_partition): offset_value(recs[-1].source_offset)})
    task.stop()
    # a new task (new store object reading the file) resumes after "two"
    store2 = FileOffsetBackingStore(str(tmp_path / "offsets.json"))
    store2.start()
    t2 = FileStreamSourceTask()
    t2.initialize(SourceTaskContext({}, ConnectorOffsetReader(store2, "src")))
    t2.start({"file": str(f), "topic": "t"})
    assert [r.value for r in t2.poll()] == ["three"]
    t2.stop()
    assert json.loads((tmp_path / "offsets.json").read_text()) == {'["src",{"filename":"%s"}]' % f: '{"position":9}'}


def test_file_sink_task(tmp_path):
    t = FileStreamSinkTask()
    t.start({"file": str(tmp_path / "out.txt")})
    t.put([_sink_record("a"), _sink_record(b"b"), _sink_record({"k": 1})])
    t.flush({})
    t.stop()
    assert (tmp_path / "out.txt").read_text() == 'a\nb\n{"k":1}\n'


@pytest.mark.parametrize("tail", [b"", b"ab", b"x" * 100_000])
def test_file_sink_task_cuts_a_partial_last_line(tmp_path, tail):
    out = tmp_path / "out.txt"
    out.write_bytes(b"kept\n" * 3 + tail)             # a write cut short by kill -9
    t = FileStreamSinkTask()
    t.start({"file": str(out)})
    t.put([_sink_record("ab")])
    t.stop()
    assert out.read_bytes() == b"kept\n" * 3 + b"ab\n"
    out.write_bytes(b"no newline at all")
    t.start({"file": str(out)})
    t.stop()
    assert out.read_bytes() == b""


def test_source_record_fields():
    r = SourceRecord({"p": 1}, {"o": 2}, "t", None, None, None, {"type": "string"}, "v", 5)
    assert r.source_partition == {"p": 1} and r.new_record(topic="u").source_offset == {"o": 2}
