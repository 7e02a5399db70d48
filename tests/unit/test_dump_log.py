"""``odradek dump-log`` on a real log written by the broker's Log: the lines kafka-dump-log.sh
prints for batches, records, control markers, indexes, the txn index and producer snapshots,
and what it reports for a damaged segment."""
from __future__ import annotations

import glob
import io
import os

from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import Log
from odradek.broker.log.dump_log import main
from odradek.broker.log.producer_state import ORIGIN_COORDINATOR
from odradek.protocol import compression
from odradek.protocol.control_records import build_control_batch
from odradek.protocol.records import BatchBuilder

NOW = 1_700_000_000_000


def dump(*args: str) -> tuple[int, list[str], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue().splitlines(), err.getvalue().splitlines()


def written_log(tmp_path) -> Log:
    log = Log(str(tmp_path / "orders-0"), LogConfig({"index.interval.bytes": "1"}), time=lambda: NOW / 1000,
              had_clean_shutdown=True)
    plain = BatchBuilder()
    plain.append(NOW, b"k0", b"hello", [("h1", b"x")])
    plain.append(NOW + 1, None, b"world")
    log.append_as_leader(plain.build(), 3)
    zipped = BatchBuilder(compression=compression.GZIP)
    zipped.append(NOW + 2, b"k2", b"zipped")
    log.append_as_leader(zipped.build(), 3)
    txn = BatchBuilder(producer_id=42, producer_epoch=1, base_sequence=0, is_transactional=True)
    txn.append(NOW + 3, b"k3", b"aborted")
    log.append_as_leader(txn.build(), 3)
    log.append_as_leader(build_control_batch(42, 1, False, 7, NOW + 4), 3, origin=ORIGIN_COORDINATOR)
    log.producer_state.take_snapshot(log.log_end_offset)
    log.flush()
    return log


def test_batches_records_and_markers_as_kafka_prints_them(tmp_path):
    log = written_log(tmp_path)
    segment = glob.glob(os.path.join(log.dir, "*.log"))[0]
    code, out, err = dump("--files", segment, "--print-data-log")
    assert code == 0 and err == []
    assert out[:2] == [f"Dumping {segment}", "Starting offset: 0"]
    assert out[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
                             "producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
                             f"position: 0 CreateTime: {NOW + 1} size: ")
    assert out[2].endswith("magic: 2 compresscodec: NONE crc: " + out[2].split("crc: ")[1].split()[0] + " isvalid: true")
    assert out[3] == (f"| offset: 0 CreateTime: {NOW} keysize: 2 valuesize: 5 sequence: -1 headerKeys: [h1] "
                      "key: k0 payload: hello")
    assert out[4] == f"| offset: 1 CreateTime: {NOW + 1} keysize: -1 valuesize: 5 sequence: -1 headerKeys: [] payload: world"
    assert "compresscodec: GZIP" in out[5] and out[6].endswith("key: k2 payload: zipped")
    assert "producerId: 42 producerEpoch: 1" in out[7] and "isTransactional: true" in out[7]
    assert out[8].endswith("sequence: 0 headerKeys: [] key: k3 payload: aborted")
    assert "isControl: true" in out[9]
    assert out[10] == f"| offset: 4 CreateTime: {NOW + 4} keysize: 4 valuesize: 6 sequence: -1 headerKeys: [] " \
                      "endTxnMarker: ABORT coordinatorEpoch: 7"
    assert len(out) == 11
    # batches only, without --deep-iteration
    assert [line.split()[1] for line in dump("--files", segment)[1][2:]] == ["0", "2", "3", "4"]
    log.close()


def test_indexes_txn_index_and_snapshot(tmp_path):
    log = written_log(tmp_path)
    files = {os.path.splitext(p)[1]: p for p in glob.glob(os.path.join(log.dir, "*")) if not p.endswith(".log")}
    code, out, err = dump("--files", ",".join(files[s] for s in (".index", ".timeindex", ".txnindex", ".snapshot")))
    assert code == 0 and err == []
    text = "\n".join(out)
    batches = dump("--files", glob.glob(os.path.join(log.dir, "*.log"))[0])[1][2:]
    position_of = {int(b.split()[3]): int(b.split("position: ")[1].split()[0]) for b in batches}  # lastOffset
    assert f"offset: 4 position: {position_of[4]}" in text  # an index entry: its batch's last offset
    assert f"timestamp: {NOW + 4} offset: 4" in text
    assert "version: 0 producerId: 42 firstOffset: 3 lastOffset: 4 lastStableOffset: " in text
    assert "producerId: 42 producerEpoch: 1 coordinatorEpoch: 7 currentTxnFirstOffset: None" in text
    code, out, _ = dump("--files", files[".index"], "--index-sanity-check")
    assert out[-1] == f"{files['.index']} passed sanity check."
    code, out, err = dump("--files", files[".index"], "--verify-index-only")
    assert out == [f"Dumping {files['.index']}"] and err == []
    log.close()


def test_damaged_segment_is_shown_up_to_its_damage(tmp_path):
    log = written_log(tmp_path)
    segment = glob.glob(os.path.join(log.dir, "*.log"))[0]
    log.close()
    with open(segment, "r+b") as f:
        f.seek(70)                     # inside the first batch's records: its CRC no longer matches
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
        f.seek(0, os.SEEK_END)
        f.write(b"\x00" * 17)          # a torn write at the end
    code, out, err = dump("--files", segment, "--deep-iteration")
    assert code == 0
    assert out[2].endswith("isvalid: false") and out[3].startswith("| records not readable: ")
    assert out[-1] == f"Found 17 invalid bytes at the end of {os.path.basename(segment)}"
    assert sum(line.startswith("baseOffset:") for line in out) == 4
    code, out, err = dump("--files", str(tmp_path / "00000000000000000099.log"))
    assert code == 1 and err[-1].startswith("Error: ")
    code, out, err = dump("--files", str(tmp_path / "orders.log"))
    assert code == 1 and err[-1] == f"Error: {tmp_path / 'orders.log'}: the file name is not a base offset"
    code, out, err = dump("--files", str(tmp_path / "notes.txt"))
    assert code == 0 and err == [f"Ignoring unknown file {tmp_path / 'notes.txt'}"]
