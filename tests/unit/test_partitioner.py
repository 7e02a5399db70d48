"""odradek.client.partitioner: murmur2 vs Java and kafka-python, key placement, KIP-480 stickiness."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# (input hex or "-" for empty, Java Utils-style murmur2, (h & 0x7fffffff) % 7), printed by
# tests/unit/data/Murmur2Golden.java running on a JVM (int wraparound, >>> shifts).
JAVA_GOLDEN = [
    ("-", 275646681, 2),
    ("61", -1563381124, 5),
    ("6162", 316155434, 0),
    ("616263", 479470107, 4),
    ("3231", -973932308, 3),
    ("666f6f626172", -790332482, 0),
    ("612d6c6974746c652d6269742d6c6f6e672d737472696e67", -985981536, 1),
    ("612d6c6974746c652d6269742d6c6f6e6765722d737472696e67", -1486304829, 0),
    ("6c6b6a683233346c68396669756839307932336f697568736166756a6861646f66323239706872396831396838396838", -58897971, 3),
    ("6b65792d30", 29210041, 0),
    ("6b65792d31", 193331640, 5),
    ("757365722d3432", 1459644460, 1),
    ("c3a974c3a9", -2101193575, 4),
    ("44", -1339759895, 4),
    ("a9821fe4ee624a6417233ce13a1df840562fa70f", -1318533243, 3),
    ("ae8da52b0a7dd28935307510e3f7cec5857277353cdd1ef0db9146764f1da74aed", -684574724, 1),
    ("ff5d7d9322425313fba49937bf", 504372848, 0),
    ("658a", 1785230730, 3),
    ("85a939d91bea766fc7", 732877195, 1),
    ("23a186", -1069555389, 2),
    ("a0b91126a8aabbe6", 1919320192, 6),
    ("6fc5a043323344cc251d1e9caad9431a728db609316a82", 407857682, 1),
    ("9ddf99e738fa915c85736d", -284699148, 3),
    ("ff11d037adedd9fe4d646beefb3c83a819db698985021cec2735777a6a388909accd76134c4b70", -1983921229, 6),
    ("5a4b8ecf120e6cfdba6eb1d143f47947159553e8a2a9c8904cb52991103e1d91aa192db858809d", 1263363970, 1),
    ("4a1bd883df8263dab5a477a9bec00f", 471963053, 2),
    ("657c3cc4e455b6020f3b", -573879525, 0),
    ("4d1fb0b71ef843af49b7e05ee207", -336023253, 3),
    ("4eaf3b0d1a66ec4b241d02bed8b7f475f77f7bb0a61532da60b3ca450c6f924a551abd41e3", -52082570, 1),
    ("6d544335c2b3cd28235af4ea", -556561530, 2),
    ("723d53e85b921f6df2d110077e66", -1549590092, 1),
    ("e32e76de2123323a07ac1e1f35522e3ae610187822037eeee31fd9bba84c51e821c9ff0996", -1276002251, 3),
    ("54b6f4b421ae3727243e1b3a60a7d802ed9a48", 2125277944, 6),
    ("8c43f7f0439d4e8c03d85bae58512b97fbaf1c13", 91259243, 5),
    ("759758890b6b7c4ba0ead45e2ac3093d277de94080f110d27e", 712068555, 2),
    ("f27b", -1457023572, 5),
    ("84221866eda66c61dc857bc5ac6504d5dab649ba2f", -294300535, 5),
    ("91228cb97de3b833f10b0a49", -1464091504, 1),
    ("99c5455f0d14a45325c567f9504d0e02cad186c2e58c51b71f91a6696504de48235a9bee6cb590", -1204512041, 4),
    ("d7966fb404df5f3faa335527641ddfd2f2f3", 1072780617, 6),
    ("1eadaf9b59a79f279c667b53c6b6d665cd40519f315c80a2836f13423ecd77bc9e0e048799638d", 1556413616, 2),
    ("f605", 1447247471, 5),
    ("fb49a1d8b5af0a55bf8745fd3d454b9fbaab163bab2e769861e2127f9abdd4e4bcd0", -682465094, 6),
    ("beffb97a9dba785728fc5fde39ff75ac3683a91e2a96af4a7074f6cdfc70b3ca4d3be83d37", -909458019, 1),
    ("916b816b8b893c27e6131c0f990f8e0e529b7c63a3e48765", -694389703, 2),
    ("693bfc7f777c82c7d7d85595b67dab19bc9f96", 448760896, 3),
    ("9a2ab0311a03", -532902299, 3),
    ("a492e1ae76ff3f1791b5b05ce22140980ca42f402f31de8af6b5f9ab06037d2e44f134", 955576204, 2),
    ("0607a942187f14f16a77fbe20612292c33428efa", 876464570, 2),
    ("7818676993c5f82db745", -2033295749, 0),
    ("70c97e74e46cc5", 1692940980, 3),
    ("e8f00c0fd5ef5d19bd64470dd83bcaddfc05eaf55d", -767535678, 2),
    ("0e53ce1374fcffa9e3c06caa929b59bfb4", 1413944449, 1),
]


@pytest.mark.parametrize("hex_input, expected, partition7", JAVA_GOLDEN)
def test_murmur2_matches_java(hex_input, expected, partition7):
    data = b"" if hex_input == "-" else bytes.fromhex(hex_input)
    assert murmur2(data) == expected
    assert partition_for_key(data, 7) == partition7


def test_kafka_utils_test_vectors():
    # the vectors of Kafka's own UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_to_positive_is_not_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert partition_for_key(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=200), n=st.integers(1, 1000))
def test_murmur2_matches_kafka_python(data, n):
    theirs = pytest.importorskip("kafka.partitioner.default").murmur2
    ours = murmur2(data)
    assert -(2**31) <= ours < 2**31
    assert ours & 0xFFFFFFFF == theirs(data) & 0xFFFFFFFF
    assert partition_for_key(data, n) == (theirs(data) & 0x7FFFFFFF) % n


def test_keyed_records_ignore_stickiness():
    p = StickyPartitioner(random.Random(1))
    parts = list(range(12))
    for i in range(100):
        key = b"user-%d" % i
        assert p.partition("t", key, parts, [0]) == partition_for_key(key, 12)


def test_null_keys_stick_until_new_batch():
    p = StickyPartitioner(random.Random(7))
    parts, available = list(range(6)), [1, 2, 4]
    first = p.partition("t", None, parts, available)
    assert first in available
    assert {p.partition("t", None, parts, available) for _ in range(50)} == {first}
    seen = [first]
    for _ in range(30):
        p.on_new_batch("t", seen[-1])
        nxt = p.partition("t", None, parts, available)
        assert nxt in available and nxt != seen[-1]  # always a different partition
        seen.append(nxt)
    assert set(seen) == set(available)


def test_new_batch_on_a_stale_partition_keeps_current_choice():
    p = StickyPartitioner(random.Random(3))
    parts = list(range(4))
    current = p.partition("t", None, parts, parts)
    p.on_new_batch("t", (current + 1) % 4)  # a batch of some other partition filled up
    assert p.partition("t", None, parts, parts) == current


def test_topics_are_independent_and_fallbacks():
    p = StickyPartitioner(random.Random(5))
    a = p.partition("a", None, [0, 1, 2], [2])
    assert a == 2
    p.on_new_batch("a", 2)
    assert p.partition("a", None, [0, 1, 2], [2]) == 2  # the only available partition
    b = p.partition("b", None, [0, 1, 2], [])  # nothing available: any partition
    assert b in (0, 1, 2)
    assert p.partition("a", None, [0, 1, 2], [2]) == 2


def test_sticky_choice_is_uniform_over_available():
    p = StickyPartitioner(random.Random(11))
    parts = list(range(5))
    counts = Counter()
    prev = p.partition("t", None, parts, parts)
    for _ in range(5000):
        p.on_new_batch("t", prev)
        prev = p.partition("t", None, parts, parts)
        counts[prev] += 1
    assert set(counts) == set(parts)
    assert min(counts.values()) > 800
