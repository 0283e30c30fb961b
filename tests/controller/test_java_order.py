"""The Java iteration orders kwire reproduces (``server.controller.java_order``), each expected
value as a JVM gives it: ``String.hashCode``, a ``java.util.HashMap<String, ?>`` and a
``HashSet<Integer>`` filled in the given order, and Kafka's ``TimelineHashMap`` (the controller's
config store). Records are written in these orders, so a wrong order changes the log."""

from __future__ import annotations

import pytest

from server.controller.java_order import (
    ConcurrentHashMapOrder,
    java_hash_map_copy_order,
    java_hash_map_order,
    java_int_set_order,
    java_record_hash,
    java_string_hash,
    timeline_hash_map_order,
    unverified_feature_order,
)

TWELVE = [f"k{i}" for i in range(12)]
THIRTEEN = [f"k{i}" for i in range(13)]
TOPIC_KEYS = ["segment.bytes", "retention.ms", "cleanup.policy", "min.insync.replicas", "compression.type",
              "max.message.bytes"]


# ---------------------------------------------------------------- String.hashCode


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", 0), ("a", 97), ("b", 98), ("Q", 81), ("hello", 99162322), ("Aa", 2112), ("BB", 2112), ("C#", 2112),
        ("k0", 3365), ("k10", 104394), ("retention.ms", 2955746934), ("min.insync.replicas", 268940301),
        ("cleanup.policy", 3756979132), ("segment.bytes", 2271992304), ("compression.type", 2197970626),
        ("max.message.bytes", 3898600634),
    ],
)
def test_string_hash_codes(text: str, code: int) -> None:
    assert java_string_hash(text) == code


def test_a_negative_hash_code_is_given_as_its_unsigned_32_bit_value() -> None:
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE
    assert java_string_hash("polygenelubricants") == 2**31


def test_hash_codes_are_over_utf_16_code_units() -> None:
    assert java_string_hash("\u00e9") == 233
    # one code point outside the BMP is two UTF-16 units: 0xD83D * 31 + 0xDE00
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00 == 1772899


def test_hash_codes_wrap_at_32_bits() -> None:
    assert java_string_hash("x" * 100) == 1680682496
    assert java_string_hash("log.retention.hours") == 3455434133


# ---------------------------------------------------------------- HashMap<String, ?>


def test_hash_map_colliding_keys_keep_their_insertion_order() -> None:
    assert java_hash_map_order(["Aa", "BB", "C#"]) == ["Aa", "BB", "C#"]
    assert java_hash_map_order(["C#", "BB", "Aa"]) == ["C#", "BB", "Aa"]
    # 'a', 'q', 'A' and 'Q' differ but share bucket 1 of 16
    assert java_hash_map_order(["a", "q", "A", "Q"]) == ["a", "q", "A", "Q"]


def test_hash_map_order_is_by_bucket_whatever_the_insertion_order() -> None:
    assert java_hash_map_order(["a", "b", "c", "d", "e"]) == ["a", "b", "c", "d", "e"]
    assert java_hash_map_order(["e", "d", "c", "b", "a"]) == ["a", "b", "c", "d", "e"]
    assert java_hash_map_order(["y", "x"]) == ["x", "y"]


def test_hash_map_spreads_the_high_bits_of_the_hash_into_the_bucket() -> None:
    assert java_hash_map_order(TOPIC_KEYS) == [
        "compression.type", "cleanup.policy", "max.message.bytes", "min.insync.replicas", "segment.bytes", "retention.ms",
    ]


def test_hash_map_of_twelve_keys_has_sixteen_buckets() -> None:
    assert java_hash_map_order(TWELVE) == ["k0", "k1", "k2", "k3", "k4", "k5", "k11", "k6", "k10", "k7", "k8", "k9"]


def test_hash_map_grows_to_thirty_two_buckets_at_the_thirteenth_key() -> None:
    assert java_hash_map_order(THIRTEEN) == [
        "k0", "k1", "k2", "k3", "k4", "k5", "k11", "k6", "k10", "k7", "k8", "k12", "k9"]


FEATURES_4_0 = ["group.version", "kraft.version", "metadata.version", "transaction.version"]
"""A broker's supported features at metadata.version 4.0-IV3, as it registers them (sorted)."""


def test_a_hash_map_copy_of_four_keys_has_eight_buckets() -> None:
    # 16 buckets: group.version 0, kraft.version 5, metadata.version 7, transaction.version 13;
    # the copy's 8: 0, 5, 7, 5 (the order of Kafka 4.4's snapshot at 4.0-IV3)
    assert java_hash_map_order(FEATURES_4_0) == FEATURES_4_0
    assert java_hash_map_copy_order(FEATURES_4_0) == [
        "group.version", "transaction.version", "kraft.version", "metadata.version"]


def test_a_hash_map_copy_keeps_the_source_order_within_a_bucket() -> None:
    with_elr = ["eligible.leader.replicas.version", *FEATURES_4_0]
    assert java_hash_map_copy_order(with_elr) == [
        "group.version", "transaction.version", "eligible.leader.replicas.version", "kraft.version", "metadata.version"]
    assert java_hash_map_copy_order(list(reversed(with_elr))) == java_hash_map_copy_order(with_elr)


def test_a_hash_map_copy_of_six_keys_has_sixteen_buckets() -> None:
    # (int) (6 / 0.75f + 1) = 9 -> 16: the same order as the source's
    assert java_hash_map_copy_order(TOPIC_KEYS) == java_hash_map_order(TOPIC_KEYS)
    assert java_hash_map_copy_order(["y", "x"]) == ["x", "y"]
    assert java_hash_map_copy_order([]) == []


def test_hash_map_of_unusual_keys() -> None:
    keys = ["hello", "polygenelubricants", "", "\u00e9", "\U0001f600", "min.insync.replicas"]
    assert java_hash_map_order(keys) == [
        "polygenelubricants", "", "\U0001f600", "\u00e9", "min.insync.replicas", "hello"]
    assert java_hash_map_order([]) == []
    assert java_hash_map_order(["retention.ms"]) == ["retention.ms"]


# ---------------------------------------------------------------- TimelineHashMap


def test_timeline_hash_map_depends_on_the_insertion_order() -> None:
    assert timeline_hash_map_order(["a", "b", "c", "d", "e"]) == ["c", "e", "b", "d", "a"]
    assert timeline_hash_map_order(["e", "d", "c", "b", "a"]) == ["c", "e", "b", "a", "d"]


def test_timeline_hash_map_gives_a_slots_last_inserted_key_first() -> None:
    assert timeline_hash_map_order(["Aa", "BB", "C#"]) == ["C#", "BB", "Aa"]
    assert timeline_hash_map_order(["C#", "BB", "Aa"]) == ["Aa", "BB", "C#"]
    assert timeline_hash_map_order(["a", "q", "A", "Q"]) == ["Q", "A", "q", "a"]


def test_timeline_hash_map_of_the_topic_config_names() -> None:
    assert timeline_hash_map_order(TOPIC_KEYS) == [
        "cleanup.policy", "segment.bytes", "compression.type", "retention.ms", "max.message.bytes", "min.insync.replicas",
    ]


def test_timeline_hash_map_as_it_grows() -> None:
    assert timeline_hash_map_order(TWELVE) == ["k10", "k7", "k4", "k9", "k1", "k6", "k3", "k11", "k8", "k0", "k5", "k2"]
    assert timeline_hash_map_order(THIRTEEN) == [
        "k10", "k7", "k4", "k9", "k12", "k1", "k6", "k3", "k11", "k8", "k0", "k5", "k2"]


def test_timeline_hash_map_of_unusual_keys() -> None:
    keys = ["hello", "polygenelubricants", "", "\u00e9", "\U0001f600", "min.insync.replicas"]
    assert timeline_hash_map_order(keys) == [
        "\u00e9", "", "polygenelubricants", "hello", "\U0001f600", "min.insync.replicas"]
    assert timeline_hash_map_order(["x", "y"]) == ["x", "y"]
    assert timeline_hash_map_order([]) == []


# ---------------------------------------------------------------- HashSet<Integer>


@pytest.mark.parametrize(
    ("values", "order"),
    [
        ([16, 0, 1], [16, 0, 1]),
        ([17, 1], [17, 1]),
        ([1, 17], [1, 17]),
        ([20, 3], [3, 20]),
        ([3, 20], [3, 20]),
        ([33, 17, 1], [33, 17, 1]),
        ([100, 4, 36], [100, 4, 36]),
        ([1, 65536], [1, 65536]),
        ([65536, 1], [65536, 1]),
        ([16, *range(12)], [*range(12), 16]),
        ([16, *range(13)], [*range(13), 16]),
    ],
    ids=[
        "same-bucket", "17-then-1", "1-then-17", "bucket-order", "sorted-input", "three-in-bucket-1", "three-in-bucket-4",
        "high-bits-spread", "high-bits-spread-reversed", "thirteen-values-grow", "fourteen-values",
    ],
)
def test_int_set_order(values: list[int], order: list[int]) -> None:
    assert java_int_set_order(values) == order


def test_int_set_drops_repeats_keeping_the_first_insertion() -> None:
    assert java_int_set_order([17, 1, 17, 1]) == [17, 1]
    assert java_int_set_order(iter([5, 21, 5])) == [5, 21]
    assert java_int_set_order([]) == []


def _concurrent_order(keys: list[tuple[int, int]]) -> list[tuple[int, int]]:
    order = ConcurrentHashMapOrder()
    held: list[tuple[int, int]] = []
    for key in keys:
        held.append(key)
        order.added(len(held))
    return sorted(held, key=lambda k: order.bin(java_record_hash(*k)))


def test_broker_id_and_epoch_keys_iterate_as_a_java_concurrent_hash_map_does() -> None:
    # the orders Java 17 iterates a ConcurrentHashMap<BrokerIdAndEpoch, Long> filled in this order
    assert _concurrent_order([(5, 13), (6, 14), (7, 15), (1, 2), (100, 3), (101, 4), (17, 40), (33, 8), (49, 9)]) == [
        (1, 2), (17, 40), (33, 8), (5, 13), (6, 14), (7, 15), (49, 9), (100, 3), (101, 4)
    ]
    # eleven keys: still the first table of 16 bins
    assert _concurrent_order([(i * 7 + 1, 100 + i) for i in range(11)]) == [
        (22, 103), (1, 100), (57, 108), (36, 105), (15, 102), (71, 110), (50, 107), (29, 104), (8, 101), (64, 109), (43, 106)
    ]


def test_java_record_hash_of_an_int_and_a_long() -> None:
    assert java_record_hash(5, 13) == 31 * 5 + 13
    assert java_record_hash(0, 1 << 32) == 1  # Long.hashCode folds the high half onto the low
    assert java_record_hash(0x40000000, 0) == -(1 << 30)  # 31 * 2**30 wraps to a negative int


def test_a_concurrent_hash_map_table_doubles_at_three_quarters_and_never_shrinks() -> None:
    order = ConcurrentHashMapOrder()
    for size in range(1, 12):
        order.added(size)
    assert order.capacity == 16
    order.added(12)
    assert order.capacity == 32


# ---------------------------------------------------------------- registerBroker's unlisted features


@pytest.mark.parametrize(
    ("names", "order"),
    [
        # five names: the copies have tables of 8, where group.version, transaction.version,
        # eligible.leader.replicas.version, kraft.version and metadata.version sit in buckets
        # 0, 2, 4, 5 and 7
        (["metadata.version", "eligible.leader.replicas.version", "group.version", "transaction.version", "kraft.version"],
         ["group.version", "transaction.version", "eligible.leader.replicas.version", "kraft.version", "metadata.version"]),
        # seven: tables of 16, where metadata.version and share.version share bucket 7 and
        # metadata.version, put in first, stays ahead
        (["metadata.version", "share.version", "streams.version", "group.version", "transaction.version",
          "eligible.leader.replicas.version", "kraft.version"],
         ["group.version", "kraft.version", "metadata.version", "share.version", "streams.version",
          "transaction.version", "eligible.leader.replicas.version"]),
        (["metadata.version", "kraft.version"], ["kraft.version", "metadata.version"]),
    ],
)
def test_unverified_feature_order_follows_kafkas_copies(names: list[str], order: list[str]) -> None:
    """The orders a JVM (Java 17) gives the keys of ``new HashMap<>(b)``, ``b`` being
    ``new HashMap<>(a)`` plus kraft.version and ``a`` a ``HashMap`` of the other names."""
    assert unverified_feature_order(names) == order
